package fleet

import (
	"context"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/sparecap/sparecap/docs"
	"github.com/sparecap/sparecap/internal/domain"
	"github.com/sparecap/sparecap/internal/store"
	"github.com/sparecap/sparecap/internal/store/sqlite"
)

func TestDefaultFleetParses(t *testing.T) {
	f := Default()
	if len(f.Pools) < 4 || f.Prices["H100_SXM"] == "" {
		t.Fatalf("%+v", f)
	}
	reserved, regions, types := 0, map[string]bool{}, map[string]bool{}
	for _, p := range f.Pools {
		regions[p.Region], types[p.GPUType] = true, true
		if p.ReservedFor != "" {
			reserved++
		}
	}
	if reserved == 0 || len(regions) < 2 || len(types) < 2 {
		t.Fatal("the built-in fleet must show several regions, GPU types and an idle reservation")
	}
}

func TestParseErrors(t *testing.T) {
	for _, tc := range []struct{ yaml, want string }{
		{`pools: []`, "no pools"},
		{`pools: [{region: r, gpu_type: g, machines: 0}]`, "machines must be"},
		{`pools: [{region: r, gpu_type: g, machines: 1, gpus_per_machine: 4}]`, "gpus_per_machine must be 8"},
		{`pools: [{region: r, gpu_type: g, machines: 1, reserved_for: "Not Valid"}]`, "reserved_for"},
		{`pools: [{region: "", gpu_type: g, machines: 1}]`, "region"},
		{`pools: [{region: r, gpu_type: g, machines: 1, spot: true}]`, "spot"},
		{`pools: [{region: r, gpu_type: g, machines: 1}]` + "\nprices: {g: \"cheap\"}", "decimal"},
		{`pools: [`, "parse"},
		{`pools: [{region: r, gpu_type: g, machines: 1, min_lease: soon}]`, "min_lease"},
		{`pools: [{region: r, gpu_type: g, machines: 1, min_lease: 25h}]`, "min_lease"},
		{`pools: [{region: r, gpu_type: g, machines: 1, min_lease: -1m}]`, "min_lease"},
	} {
		if _, err := Parse([]byte(tc.yaml)); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%q: error %v, want one mentioning %q", tc.yaml, err, tc.want)
		}
	}
}

func TestRegisterIsIdempotent(t *testing.T) {
	ctx := context.Background()
	st, err := sqlite.Open(ctx, filepath.Join(t.TempDir(), "db"))
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	f, err := Parse([]byte(`
pools:
  - {region: us-central-8, gpu_type: H100_SXM, machines: 2}
  - {region: us-central-8, gpu_type: H100_SXM, machines: 3, reserved_for: acme}
`))
	if err != nil {
		t.Fatal(err)
	}
	now := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	if n, err := Register(ctx, st, f, now); err != nil || n != 5 {
		t.Fatalf("first register: %d %v", n, err)
	}
	if n, err := Register(ctx, st, f, now.Add(time.Hour)); err != nil || n != 0 {
		t.Fatalf("second register added %d (%v)", n, err)
	}
	ms, _ := st.ListMachines(ctx)
	rs, _ := st.ListReservations(ctx)
	if len(ms) != 5 || len(rs) != 1 || rs[0].ProjectID != "acme" {
		t.Fatalf("machines %d reservations %+v", len(ms), rs)
	}
	if _, err := st.GetProject(ctx, "acme"); err != nil {
		t.Fatalf("reservation's project not created: %v", err)
	}
	reserved := 0
	for _, m := range ms {
		if m.ReservationID == rs[0].ID {
			reserved++
		}
	}
	if reserved != 3 {
		t.Fatalf("%d machines in the reservation", reserved)
	}
}

func FuzzParse(f *testing.F) {
	f.Add(string(defaultYAML))
	f.Add(`pools: [{region: r, gpu_type: g, machines: 1}]`)
	f.Fuzz(func(t *testing.T, data string) {
		fl, err := Parse([]byte(data))
		if err != nil {
			return
		}
		for _, p := range fl.Pools {
			if p.Machines < 1 || p.GPUsPerMachine != 8 || p.Region == "" || p.GPUType == "" {
				t.Fatalf("accepted pool %+v", p)
			}
		}
	})
}

func TestRegisterPricesAddsOnlyChanges(t *testing.T) {
	ctx := context.Background()
	st, err := sqlite.Open(ctx, filepath.Join(t.TempDir(), "db"))
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	f, _ := Parse([]byte("pools: [{region: r, gpu_type: H100, machines: 1}]\nprices: {H100: \"2.99\", A100: \"1.79\"}"))
	now := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	if err := RegisterPrices(ctx, st, f, "50", now); err != nil {
		t.Fatal(err)
	}
	if err := RegisterPrices(ctx, st, f, "50", now.Add(time.Hour)); err != nil {
		t.Fatal(err)
	}
	ps, _ := st.ListPrices(ctx)
	if len(ps) != 3 {
		t.Fatalf("unchanged prices were added again: %+v", ps)
	}
	f.Prices["H100"] = "3.19"
	later := now.Add(48 * time.Hour)
	if err := RegisterPrices(ctx, st, f, "40", later); err != nil {
		t.Fatal(err)
	}
	ps, _ = st.ListPrices(ctx)
	if len(ps) != 5 {
		t.Fatalf("want a new H100 price and discount: %+v", ps)
	}
	for _, p := range ps[3:] {
		if !p.EffectiveFrom.Equal(later) {
			t.Fatalf("new entry %+v not effective from the change", p)
		}
	}
	if err := RegisterPrices(ctx, st, f, "150", later); err == nil {
		t.Fatal("a discount over 100% accepted")
	}
	// A price the admin set since is not undone by a restart with the
	// same file.
	admin := domain.Price{ID: "price-admin", Kind: domain.PriceOnDemand, GPUType: "H100", Value: "4.00", EffectiveFrom: later.Add(time.Hour), CreatedAt: later.Add(time.Hour)}
	st.Update(ctx, func(tx store.Tx) error { return tx.CreatePrice(ctx, admin) })
	if err := RegisterPrices(ctx, st, f, "40", later.Add(2*time.Hour)); err != nil {
		t.Fatal(err)
	}
	if ps, _ = st.ListPrices(ctx); len(ps) != 6 {
		t.Fatalf("a restart undid the admin's price: %+v", ps)
	}
}

// TestMinLeaseByPool: a machine's minimum lease is its own pool's: the
// on-demand pool's for its machines, a reservation's for the
// reservation's, none for a pool without one.
func TestMinLeaseByPool(t *testing.T) {
	f, err := Parse([]byte(`pools:
- {region: r, gpu_type: g, machines: 2, min_lease: 10m}
- {region: r, gpu_type: g, machines: 2, reserved_for: acme, min_lease: 1h}
- {region: r, gpu_type: h, machines: 2}
`))
	if err != nil {
		t.Fatal(err)
	}
	if f.Leases() == nil {
		t.Error("a fleet with leases has no Leases")
	}
	if none, _ := Parse([]byte("pools: [{region: r, gpu_type: g, machines: 1}]")); none.Leases() != nil {
		t.Error("a fleet without leases has Leases: every node would pay a lookup")
	}
	for _, tc := range []struct {
		m    domain.Machine
		want time.Duration
	}{
		{domain.Machine{Region: "r", GPUType: "g"}, 10 * time.Minute},
		{domain.Machine{Region: "r", GPUType: "g", ReservationID: ReservationID(f.Pools[1])}, time.Hour},
		{domain.Machine{Region: "r", GPUType: "g", ReservationID: "rsv-other"}, 0},
		{domain.Machine{Region: "r", GPUType: "h"}, 0},
		{domain.Machine{Region: "q", GPUType: "g"}, 0},
	} {
		if got := f.MinLease(&tc.m); got != tc.want {
			t.Errorf("%+v: lease %s, want %s", tc.m, got, tc.want)
		}
	}
}

// TestDocumentedFleetFile: the fleet file of docs/operations.md parses,
// and its min_lease is its on-demand pool's lease.
func TestDocumentedFleetFile(t *testing.T) {
	doc, err := docs.Snippet("operations.md", "fleet-file")
	if err != nil {
		t.Fatal(err)
	}
	f, err := Parse([]byte(doc))
	if err != nil {
		t.Fatal(err)
	}
	if got := f.MinLease(&domain.Machine{Region: "us-east-1", GPUType: "H100_SXM"}); got != 10*time.Minute {
		t.Errorf("the documented pool's lease is %s, want 10m", got)
	}
	if got := f.MinLease(&domain.Machine{Region: "us-east-1", GPUType: "H100_SXM", ReservationID: ReservationID(f.Pools[1])}); got != 0 {
		t.Errorf("the documented reservation's lease is %s, want none", got)
	}
}
