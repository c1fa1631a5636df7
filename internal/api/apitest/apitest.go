// Package apitest starts the API for other packages' tests: on SQLite in
// a test's directory, a simulated fleet and a fake clock, with an
// operator token, as the server wires it but without its listeners.
package apitest

import (
	"context"
	"path/filepath"
	"testing"
	"time"

	"github.com/sparecap/sparecap/internal/api"
	"github.com/sparecap/sparecap/internal/clock"
	"github.com/sparecap/sparecap/internal/controller"
	"github.com/sparecap/sparecap/internal/fleet"
	"github.com/sparecap/sparecap/internal/sim"
	"github.com/sparecap/sparecap/internal/store"
	"github.com/sparecap/sparecap/internal/store/sqlite"
)

// Start is 2026-11-30 12:00 UTC, where the fake clock starts.
var Start = time.Date(2026, 11, 30, 12, 0, 0, 0, time.UTC)

// Env is a started API and what moves it.
type Env struct {
	API   *api.Server
	Ctrl  *controller.Controller
	Clock *clock.Fake
	Sim   *sim.Fleet
	Store store.Store
}

// New starts the API on the fleet of fleetYAML (pools and prices, at a
// 50% discount), with admin as the operator token.
func New(t testing.TB, fleetYAML, admin string) *Env {
	t.Helper()
	ctx := context.Background()
	st, err := sqlite.Open(ctx, filepath.Join(t.TempDir(), "db"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	clk := clock.NewFake(Start)
	f, err := fleet.Parse([]byte(fleetYAML))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := fleet.Register(ctx, st, f, clk.Now()); err != nil {
		t.Fatal(err)
	}
	if err := fleet.RegisterPrices(ctx, st, f, "50", clk.Now()); err != nil {
		t.Fatal(err)
	}
	fl, err := sim.New(sim.Config{Clock: clk, Pods: []sim.PodTemplate{}})
	if err != nil {
		t.Fatal(err)
	}
	ctrl := controller.New(st, fl, fl, clk, controller.Config{Cooldown: -1}, nil)
	if _, err := api.BootstrapOperator(ctx, st, admin, time.Now()); err != nil {
		t.Fatal(err)
	}
	return &Env{API: api.New(st, ctrl, clk, clock.Real{}, nil), Ctrl: ctrl, Clock: clk, Sim: fl, Store: st}
}

// Turn runs n controller passes, 5 s of the fake clock apart.
func (e *Env) Turn(t testing.TB, n int) {
	t.Helper()
	for i := 0; i < n; i++ {
		if _, err := e.Ctrl.Turn(context.Background()); err != nil {
			t.Fatal(err)
		}
		e.Clock.Step(5 * time.Second)
	}
}
