package client

import (
	"context"
	"path/filepath"
	"testing"
	"time"

	"github.com/sparecap/sparecap/internal/api"
	"github.com/sparecap/sparecap/internal/clock"
	"github.com/sparecap/sparecap/internal/controller"
	"github.com/sparecap/sparecap/internal/fleet"
	"github.com/sparecap/sparecap/internal/metering"
	"github.com/sparecap/sparecap/internal/openapi/contracttest"
	"github.com/sparecap/sparecap/internal/secret"
	"github.com/sparecap/sparecap/internal/sim"
	"github.com/sparecap/sparecap/internal/store/sqlite"
	"github.com/sparecap/sparecap/internal/webhook"

	"net/http/httptest"
)

const realAdmin = "admin-token-for-the-contract-test-0123456789"

// realServer is the API on SQLite and a simulated fleet, every exchange
// checked against the OpenAPI document; turn moves its controller on.
func realServer(t *testing.T) (url string, turn func()) {
	t.Helper()
	ctx := context.Background()
	st, err := sqlite.Open(ctx, filepath.Join(t.TempDir(), "db"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	clk := clock.NewFake(time.Date(2026, 11, 30, 12, 0, 0, 0, time.UTC))
	f, err := fleet.Parse([]byte("pools: [{region: us-central-2, gpu_type: RTX_6000_PCI, machines: 6}]\nprices: {RTX_6000_PCI: \"0.89\"}"))
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
	if _, err := api.BootstrapOperator(ctx, st, realAdmin, time.Now()); err != nil {
		t.Fatal(err)
	}
	sealer, err := secret.NewSealer(make([]byte, 32))
	if err != nil {
		t.Fatal(err)
	}
	allow, _ := webhook.ParseAllow([]string{"127.0.0.0/8"})
	s := api.New(st, ctrl, clk, clock.Real{}, nil)
	s.Meter = metering.New(st, clk, nil)
	s.Options = api.Options{Sealer: sealer, Webhooks: api.WebhookOptions{Policy: webhook.Policy{Allow: allow}}}
	srv := httptest.NewServer(contracttest.Handler(t, s))
	t.Cleanup(srv.Close)
	return srv.URL, func() {
		for i := 0; i < 20; i++ {
			if _, err := ctrl.Turn(ctx); err != nil {
				t.Fatal(err)
			}
			clk.Step(5 * time.Second)
		}
	}
}
