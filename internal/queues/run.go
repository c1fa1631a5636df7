package queues

import (
	"context"
	"fmt"
	"log/slog"
	"time"

	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/dynamic"

	"github.com/sparecap/sparecap/internal/clock"
	"github.com/sparecap/sparecap/internal/driver"
)

// Base is what every integration of a cluster is given.
type Base struct {
	ClusterID string
	// Client reaches the cluster's API (JSON: custom resources).
	Client dynamic.Interface
	Fleet  Fleet
	// Resync is the longest time between passes (default 5 s).
	Resync time.Duration
	Clock  clock.Clock
	Log    *slog.Logger
	// Refused reports a permission the cluster refused (the controller's
	// RecordAccess), once per permission.
	Refused func(driver.AccessReport)
}

// Defaults fills in what is unset: a pass at least every 5 s, the real
// clock, no log.
func (b *Base) Defaults() {
	if b.Resync <= 0 {
		b.Resync = 5 * time.Second
	}
	if b.Clock == nil {
		b.Clock = clock.Real{}
	}
	if b.Log == nil {
		b.Log = slog.New(slog.DiscardHandler)
	}
}

// Integration is one controller's part of Run.
type Integration struct {
	// Name is for the logs ("Kueue admission check").
	Name string
	// Effect is what the tenant loses while a permission it needs is
	// refused.
	Effect string
	// Watch are the resources its passes read.
	Watch []schema.GroupVersionResource
	// Pass decides and writes once, from the watches.
	Pass func(ctx context.Context, w *Watches, refused *Refusals) error
}

// Run runs in until ctx ends: it starts the watches, waits for their
// first list, then runs Loop. It returns an error when the watches cannot
// start (the cluster's API does not serve them).
func Run(ctx context.Context, b Base, in Integration) error {
	b.Defaults()
	refused := &Refusals{ClusterID: b.ClusterID, Report: b.Refused}
	w, err := NewWatches(b.Client, refused, in.Effect, in.Watch...)
	if err != nil {
		return err
	}
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	if err := w.Start(ctx); err != nil {
		return fmt.Errorf("cluster %s: %s: %w", b.ClusterID, in.Name, err)
	}
	b.Log.Info(in.Name+" running", "cluster", b.ClusterID)
	Loop(ctx, w, b.Fleet, b.Clock, b.Resync, func(ctx context.Context) error { return in.Pass(ctx, w, refused) },
		func(err error) { b.Log.Warn(in.Name+" pass failed", "cluster", b.ClusterID, "err", err) })
	return nil
}
