package simulate

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/sparecap/sparecap/internal/clock"
	"github.com/sparecap/sparecap/internal/controller"
	"github.com/sparecap/sparecap/internal/domain"
	"github.com/sparecap/sparecap/internal/fleet"
	"github.com/sparecap/sparecap/internal/metering"
	"github.com/sparecap/sparecap/internal/random"
	"github.com/sparecap/sparecap/internal/sim"
	"github.com/sparecap/sparecap/internal/store"
	"github.com/sparecap/sparecap/internal/store/memstore"
)

// Epoch is the virtual time a simulation starts at: fixed, so that a
// seed gives the same answer to the byte.
var Epoch = time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)

// project is the project every simulated cluster belongs to.
const project = "sim"

// meterEvery is how often, in virtual time, the meter makes a pass, as
// the server's does every minute: stopped nodes get their final records
// and can be archived, so a long run's live tables stay small.
const meterEvery = 10 * time.Minute

// interval is the controller's Interval, the server's: how long its loop
// waits at most between passes, and half of it between the replans for
// nodes that moved.
const interval = time.Second

// maxSameInstant bounds the ticks at one virtual instant: a control
// plane that keeps finding work due now never lets time move.
const maxSameInstant = 10_000

// Progress is how far a run is.
type Progress struct {
	Policy      string
	Done, Total time.Duration
	Ticks       int
}

// world is one run's control plane and fleet.
type world struct {
	sc  Scenario
	pol Policy
	clk *clock.Fake
	// st is the in-memory store: a store.Memory, as the leader's copy of
	// a server's database is.
	st    *memstore.Store
	fl    *sim.Fleet
	ctrl  *controller.Controller
	meter *metering.Meter
	// ids maps a demand's cluster names to the clusters made for them.
	ids     map[string]string
	evs     []Event
	told    tells
	refused int
	errs    int
	ticks   int
}

// Run runs the demand evs under policy pol and returns what happened.
// progress, if set, is called now and then.
func Run(ctx context.Context, sc Scenario, evs []Event, pol Policy, progress func(Progress)) (*Result, error) {
	return run(ctx, sc, evs, pol, progress, nil)
}

// run is Run; inspect, if set, reads the control plane's store at the end.
func run(ctx context.Context, sc Scenario, evs []Event, pol Policy, progress func(Progress), inspect func(store.Store) error) (*Result, error) {
	w, err := newWorld(ctx, sc, pol)
	if err != nil {
		return nil, err
	}
	defer w.st.Close()
	w.evs = evs
	if err := w.loop(ctx, evs, progress); err != nil {
		return nil, err
	}
	r, err := w.result(ctx)
	if err == nil && inspect != nil {
		err = inspect(w.st)
	}
	return r, err
}

func newWorld(ctx context.Context, sc Scenario, pol Policy) (*world, error) {
	clk := clock.NewFake(Epoch)
	db := memstore.New()
	w := &world{sc: sc, pol: pol, clk: clk, st: db, ids: map[string]string{}}
	if err := w.register(ctx); err != nil {
		db.Close()
		return nil, err
	}
	var err error
	w.fl, err = sim.New(sim.Config{Clock: clk, Seed: int64(sc.Seed), Pods: []sim.PodTemplate{{
		Name: "job", TerminationGracePeriod: pol.DrainWindow.D, ExitAfter: sc.Jobs.ExitAfterNotice.D,
	}}})
	if err != nil {
		db.Close()
		return nil, err
	}
	cooldown := 30 * time.Second
	if pol.Cooldown != nil {
		cooldown = pol.Cooldown.D
	}
	if cooldown == 0 {
		cooldown = -1 // the controller reads 0 as its default
	}
	w.ctrl = controller.New(w.st, &loadFleet{Fleet: w.fl, w: w, cache: map[string]*tenantLoads{}}, w.fl, clk, controller.Config{
		DrainWindow: pol.DrainWindow.D, Cooldown: cooldown, Interval: interval, MinLease: pol.minLease(),
		Workers: 1, NoticeWorkers: 1, Instant: true, Random: random.New(sc.Seed),
		// Nothing goes behind the simulated control plane's back: the
		// backstop sweeps would only cost time.
		SweepEvery: 24 * time.Hour,
	}, nil)
	w.told = tells{}
	w.ctrl.Observer = w.told.observe
	w.meter = metering.New(w.st, clk, nil)
	w.meter.Reads = w.st
	// Running nodes' records need rewriting only at the end (Cut): the
	// passes finish the stopped ones.
	w.meter.Refresh = metering.NoRefresh
	return w, nil
}

// register adds the fleet, the project and the prices.
func (w *world) register(ctx context.Context) error {
	if _, err := fleet.Register(ctx, w.st, w.sc.Fleet, Epoch); err != nil {
		return fmt.Errorf("register the fleet: %w", err)
	}
	if err := fleet.RegisterPrices(ctx, w.st, w.sc.Fleet, "50", Epoch); err != nil {
		return fmt.Errorf("register the prices: %w", err)
	}
	return w.st.Update(ctx, func(tx store.Tx) error {
		err := tx.CreateProject(ctx, domain.Project{ID: project, CreatedAt: Epoch})
		if errors.Is(err, domain.ErrConflict) {
			return nil
		}
		return err
	})
}

// loop jumps the clock from one due time to the next (a demand event, or
// whatever the control plane said is due) until the horizon.
func (w *world) loop(ctx context.Context, evs []Event, progress func(Progress)) error {
	end := Epoch.Add(w.sc.Horizon.D)
	var next time.Time
	same, i := 0, 0
	lastReport, lastMeter := Epoch, Epoch
	for {
		if err := ctx.Err(); err != nil {
			return err
		}
		t := next
		if i < len(evs) {
			if at := Epoch.Add(evs[i].At); t.IsZero() || at.Before(t) {
				t = at
			}
		}
		if t.IsZero() || t.After(end) {
			break
		}
		if t.After(w.clk.Now()) {
			same = 0
			w.clk.Set(t)
		} else if same++; same > maxSameInstant {
			return fmt.Errorf("the control plane kept finding work due at %s (T+%s)", t.Format(time.RFC3339), t.Sub(Epoch))
		}
		for ; i < len(evs) && !Epoch.Add(evs[i].At).After(t); i++ {
			if err := w.apply(ctx, evs[i]); err != nil {
				return err
			}
		}
		if t.Sub(lastMeter) >= meterEvery {
			if err := w.meter.Pass(ctx); err != nil {
				return fmt.Errorf("meter the usage at T+%s: %w", t.Sub(Epoch), err)
			}
			lastMeter = t
		}
		var err error
		next, err = w.ctrl.Turn(ctx)
		if err != nil {
			w.errs++
		}
		w.ticks++
		if progress != nil && t.Sub(lastReport) >= w.sc.Horizon.D/100 {
			lastReport = t
			progress(Progress{Policy: w.pol.Name, Done: t.Sub(Epoch), Total: w.sc.Horizon.D, Ticks: w.ticks})
		}
	}
	w.clk.Set(end)
	if err := w.meter.Cut(ctx); err != nil {
		return fmt.Errorf("meter the usage: %w", err)
	}
	if progress != nil {
		progress(Progress{Policy: w.pol.Name, Done: w.sc.Horizon.D, Total: w.sc.Horizon.D, Ticks: w.ticks})
	}
	return nil
}

// apply makes one demand event a request to the controller, as the API
// would.
func (w *world) apply(ctx context.Context, e Event) error {
	id, known := w.ids[e.Cluster]
	switch {
	case !known && e.GPUs == 0:
		return nil
	case !known:
		return w.create(ctx, e)
	case e.GPUs == 0:
		delete(w.ids, e.Cluster)
		_, err := w.ctrl.DeleteCluster(ctx, id)
		return ignoreGone(err)
	}
	g := e.GPUs
	ch := controller.Change{NumGPUs: &g}
	if e.Class == domain.Preemptible {
		ch = controller.Change{PreemptibleGPUs: &g}
	}
	_, err := w.ctrl.UpdateCluster(ctx, id, ch)
	var short *controller.ShortfallError
	if errors.As(err, &short) {
		w.refused++
		return nil
	}
	return ignoreGone(err)
}

func (w *world) create(ctx context.Context, e Event) error {
	c := domain.Cluster{Name: e.Cluster, ProjectID: project, Region: e.Region, GPUType: e.GPUType,
		Type: domain.ClusterKubernetes, BillingType: domain.BillingOnDemand, Weight: max(e.Weight, 1)}
	if e.Class == domain.Standard {
		c.NumGPUs = e.GPUs
		if e.StartsAt > e.At {
			c.StartsAt = Epoch.Add(e.StartsAt)
		}
	} else {
		c.NumGPUs, c.DesiredPreemptibleGPUs, c.PreemptibleGPUTypes = e.Standard, e.GPUs, e.Types
	}
	got, err := w.ctrl.CreateCluster(ctx, c)
	var short *controller.ShortfallError
	if errors.As(err, &short) {
		// A tenant refused its standard node is no on-demand request.
		if e.Class == domain.Standard {
			w.refused++
		}
		return nil
	}
	if err != nil {
		return fmt.Errorf("create cluster %s at T+%s: %w", e.Cluster, e.At, err)
	}
	w.ids[e.Cluster] = got.ID
	return nil
}

// ignoreGone: a trace may change a cluster the control plane already
// finished deleting.
func ignoreGone(err error) error {
	if errors.Is(err, domain.ErrNotFound) || errors.Is(err, controller.ErrDeleting) {
		return nil
	}
	return err
}

// minLease is the controller's MinLease for the policy's lease; nil for
// none.
func (p Policy) minLease() func(*domain.Machine) time.Duration {
	if p.MinLease == nil || p.MinLease.D <= 0 {
		return nil
	}
	lease := p.MinLease.D
	return func(*domain.Machine) time.Duration { return lease }
}
