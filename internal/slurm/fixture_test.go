package slurm_test

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/sparecap/sparecap/internal/clock"
	"github.com/sparecap/sparecap/internal/controller"
	"github.com/sparecap/sparecap/internal/domain"
	"github.com/sparecap/sparecap/internal/driver"
	"github.com/sparecap/sparecap/internal/sim"
	"github.com/sparecap/sparecap/internal/slurm"
	"github.com/sparecap/sparecap/internal/slurm/slurmenv"
	"github.com/sparecap/sparecap/internal/store"
	"github.com/sparecap/sparecap/internal/store/sqlite"
)

const (
	region = "us-central-2"
	gpu    = "RTX_6000_PCI"
)

// fixture is a sparecap controller on SQLite driving a Slurm of its own
// (a new slurmctld and munge key per test) through the Slurm platform, with
// a machine provider that boots each node's slurmd as a machine's boot
// hook does.
type fixture struct {
	t      testing.TB
	ctx    context.Context
	env    *slurmenv.Env
	st     store.Store
	ctrl   *controller.Controller
	router *driver.Router
}

type fixtureConfig struct {
	machines int
	window   time.Duration
	killWait time.Duration
	// schedInterval: slurmctld's periodic scheduling pass (slurmenv's
	// default when 0).
	schedInterval time.Duration
}

func newFixture(t testing.TB, cfg fixtureConfig) *fixture {
	t.Helper()
	e, err := slurmenv.Start(slurmenv.Options{KillWait: cfg.killWait, SchedInterval: cfg.schedInterval})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(e.Close)
	conf, err := os.ReadFile(e.Conf)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	st, err := sqlite.Open(ctx, filepath.Join(t.TempDir(), "db.sqlite"))
	if err != nil {
		t.Fatal(err)
	}
	clk := clock.Real{}
	fl, err := sim.New(sim.Config{Clock: clk, ProvisionTime: -1, WipeTime: -1, Pods: []sim.PodTemplate{}})
	if err != nil {
		t.Fatal(err)
	}
	slurms := slurm.NewPlatform(func(context.Context, string) ([]byte, error) { return conf, nil },
		slurm.Options{PollEvery: 250 * time.Millisecond, ProbeEvery: 250 * time.Millisecond, Log: testLog(),
			AuthSocketDir: filepath.Dir(e.MungeSocket())})
	router := driver.NewRouter(func(context.Context, string) (domain.ClusterType, error) { return domain.ClusterSlurm, nil },
		map[domain.ClusterType]driver.Drivers{domain.ClusterSlurm: slurms}, fl)
	ctrl := controller.New(st, router, &bootProvider{env: e}, clk, controller.Config{
		DrainWindow: cfg.window, Cooldown: -1, Interval: 500 * time.Millisecond,
	}, nil)
	f := &fixture{t: t, ctx: ctx, env: e, st: st, ctrl: ctrl, router: router}
	err = st.Update(ctx, func(tx store.Tx) error {
		if err := tx.CreateProject(ctx, domain.Project{ID: "p", CreatedAt: time.Now()}); err != nil {
			return err
		}
		for i := range cfg.machines {
			if err := tx.CreateMachine(ctx, domain.Machine{ID: fmt.Sprintf("m%03d", i), Region: region, GPUType: gpu, GPUs: 8, CreatedAt: time.Now()}); err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	done := make(chan struct{})
	go func() { ctrl.Run(ctx); close(done) }()
	t.Cleanup(func() {
		cancel()
		<-done
		router.Close()
		st.Close()
	})
	return f
}

// bootProvider is the machine provider's hook on one host: Prepare boots
// the node's slurmd (`slurmd -Z` with the node's features and GPUs), Wipe
// stops it.
type bootProvider struct{ env *slurmenv.Env }

func (b *bootProvider) Prepare(ctx context.Context, m domain.Machine, spec driver.NodeSpec) (bool, error) {
	for _, n := range b.env.Nodes() {
		if n == spec.NodeName {
			return true, nil
		}
	}
	_, err := b.env.StartNode(ctx, slurmenv.NodeSpec{Name: spec.NodeName, GPUs: 2, GPUType: spec.GPUType, Features: slurm.Features(spec.Class)})
	return err == nil, err
}

func (b *bootProvider) Wipe(ctx context.Context, m domain.Machine, clusterID, nodeName string) (bool, error) {
	b.env.StopNode(nodeName)
	return true, nil
}

// createCluster creates a SLURM cluster.
func (f *fixture) createCluster(id string, standard, preemptible int) {
	f.t.Helper()
	_, err := f.ctrl.CreateCluster(f.ctx, domain.Cluster{ID: id, Name: id, ProjectID: "p", Region: region, GPUType: gpu,
		Type: domain.ClusterSlurm, BillingType: domain.BillingOnDemand, NumGPUs: standard, DesiredPreemptibleGPUs: preemptible})
	if err != nil {
		f.t.Fatal(err)
	}
}

func (f *fixture) setPreemptible(id string, gpus int) {
	f.t.Helper()
	if _, err := f.ctrl.UpdateCluster(f.ctx, id, controller.Change{PreemptibleGPUs: &gpus}); err != nil {
		f.t.Fatal(err)
	}
}

// waitNodes waits until the cluster has n nodes of the class in state.
func (f *fixture) waitNodes(cluster string, class domain.ComputeClass, state domain.NodeState, n int, within time.Duration) []domain.Node {
	f.t.Helper()
	var got []domain.Node
	eventually(f.t, within, func() error {
		ns, err := f.st.ListNodes(f.ctx, store.NodeFilter{ClusterID: cluster, States: []domain.NodeState{state}})
		if err != nil {
			return err
		}
		got = got[:0]
		for _, nd := range ns {
			if nd.Class == class {
				got = append(got, nd)
			}
		}
		if len(got) != n {
			return fmt.Errorf("cluster %s has %d %s nodes %s, want %d", cluster, len(got), class, state, n)
		}
		return nil
	})
	return got
}

func (f *fixture) node(id string) domain.Node {
	f.t.Helper()
	n, err := f.st.GetNode(f.ctx, id)
	if err != nil {
		f.t.Fatal(err)
	}
	return n
}

func (f *fixture) events(cluster string) []domain.Event {
	f.t.Helper()
	evs, err := f.st.ListEvents(f.ctx, store.EventFilter{ClusterID: cluster})
	if err != nil {
		f.t.Fatal(err)
	}
	return evs
}
