package slurm_test

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/sparecap/sparecap/internal/domain"
	"github.com/sparecap/sparecap/internal/driver"
	"github.com/sparecap/sparecap/internal/slurm"
	"github.com/sparecap/sparecap/internal/slurm/slurmenv"
)

// env is one Slurm for the whole package (munged, slurmctld; each test
// starts the slurmds of its own nodes, with names of its own).
var env *slurmenv.Env

func TestMain(m *testing.M) {
	flag.Parse()
	if f := flag.Lookup("test.fuzz"); f != nil && f.Value.String() != "" {
		os.Exit(m.Run()) // fuzzing reads slurm.confs: no Slurm needed
	}
	var err error
	env, err = slurmenv.Start(slurmenv.Options{})
	if err != nil {
		// Fail loudly: these tests never skip.
		fmt.Fprintln(os.Stderr, "cannot start the Slurm test environment (scripts/ensure-slurm.sh installs it):", err)
		os.Exit(1)
	}
	code := m.Run()
	env.Close()
	os.Exit(code)
}

var clusterSeq atomic.Int64

// newCluster starts a driver of env under a cluster ID of its own.
func newCluster(t *testing.T, e *slurmenv.Env, opts slurm.Options) *slurm.Cluster {
	t.Helper()
	conf, err := os.ReadFile(e.Conf)
	if err != nil {
		t.Fatal(err)
	}
	if opts.Log == nil {
		opts.Log = testLog()
	}
	if opts.PollEvery == 0 {
		opts.PollEvery = 200 * time.Millisecond
	}
	if opts.AuthSocketDir == "" {
		opts.AuthSocketDir = filepath.Dir(e.MungeSocket())
	}
	id := fmt.Sprintf("c-slurm-%d", clusterSeq.Add(1))
	c, err := slurm.NewCluster(context.Background(), id, conf, opts)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(c.Close)
	return c
}

// join starts the node's slurmd as a machine's boot does, with the
// features of its class.
func join(t *testing.T, e *slurmenv.Env, spec driver.NodeSpec) {
	t.Helper()
	_, err := e.StartNode(context.Background(), slurmenv.NodeSpec{Name: spec.NodeName, GPUs: spec.GPUs,
		GPUType: spec.GPUType, Features: slurm.Features(spec.Class)})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		e.StopNode(spec.NodeName)
		e.Run(context.Background(), "scontrol", "delete", "nodename="+spec.NodeName)
	})
}

// addNode adds a node as the controller does: AddNode until Ready, with
// its slurmd started after the first call.
func addNode(t *testing.T, e *slurmenv.Env, c *slurm.Cluster, clusterID, name string, class domain.ComputeClass) driver.NodeSpec {
	t.Helper()
	spec := driver.NodeSpec{ClusterID: clusterID, NodeName: name, MachineID: "m-" + name, Class: class, GPUs: 2}
	ctx := context.Background()
	if err := c.AddNode(ctx, spec); !errors.Is(err, driver.ErrNotReady) {
		t.Fatalf("AddNode before the slurmd joined: %v", err)
	}
	join(t, e, spec)
	eventually(t, 20*time.Second, func() error { return c.AddNode(ctx, spec) })
	return spec
}

// job is a batch job the tests submit.
type job struct {
	Node    string
	Account string
	Name    string
	// OnTerm is the shell run at SIGTERM ("" ignores it).
	OnTerm    string
	NoRequeue bool
	// Script replaces the body (default: sleep until signalled).
	Script string
	Extra  []string
}

// submit submits j and returns its ID.
func submit(t *testing.T, e *slurmenv.Env, j job) string {
	t.Helper()
	body := j.Script
	if body == "" {
		trap := "trap '' TERM"
		if j.OnTerm != "" {
			trap = "trap '" + j.OnTerm + "' TERM"
		}
		body = trap + "\nwhile :; do sleep 0.2; done"
	}
	args := []string{"--parsable", "-J", j.Name, "-o", "/dev/null", "--gres=gpu:1"}
	if j.Node != "" {
		args = append(args, "-w", j.Node)
	}
	if j.Account != "" {
		args = append(args, "--account="+j.Account)
	}
	if j.NoRequeue {
		args = append(args, "--no-requeue")
	} else {
		args = append(args, "--requeue")
	}
	args = append(args, j.Extra...)
	args = append(args, "--wrap", body)
	out, err := e.Run(context.Background(), "sbatch", args...)
	if err != nil {
		t.Fatal(err)
	}
	id := strings.TrimSpace(strings.Split(out, ";")[0])
	t.Cleanup(func() {
		e.Run(context.Background(), "scancel", "--full", "--signal=KILL", id)
		e.Run(context.Background(), "scancel", id)
	})
	return id
}

// jobState is a job as squeue shows it.
type jobState struct {
	State        string `json:"job_state"`
	Reason       string `json:"state_reason"`
	Restarts     int    `json:"restart_cnt"`
	AdminComment string `json:"admin_comment"`
	Nodes        string `json:"nodes"`
	Account      string `json:"account"`
	Name         string `json:"name"`
	ID           int64  `json:"job_id"`
	Eligible     int64  `json:"eligible_time"`
}

func jobs(t *testing.T, e *slurmenv.Env) []jobState {
	t.Helper()
	out, err := e.Run(context.Background(), "squeue", "--json", "--states=all")
	if err != nil {
		t.Fatal(err)
	}
	var v struct {
		Jobs []jobState `json:"jobs"`
	}
	if err := json.Unmarshal([]byte(out), &v); err != nil {
		t.Fatal(err)
	}
	return v.Jobs
}

func jobByID(t *testing.T, e *slurmenv.Env, id string) jobState {
	t.Helper()
	for _, j := range jobs(t, e) {
		if fmt.Sprint(j.ID) == id {
			return j
		}
	}
	t.Fatalf("no job %s", id)
	return jobState{}
}

// nodeState is a node as sinfo shows it.
type nodeState struct {
	Name     string   `json:"name"`
	State    string   `json:"state"`
	Flags    []string `json:"state_flags"`
	Reason   string   `json:"reason"`
	Extra    string   `json:"extra"`
	Features string   `json:"features"`
	Gres     string   `json:"gres"`
}

func nodeOf(t *testing.T, e *slurmenv.Env, name string) (nodeState, bool) {
	t.Helper()
	out, err := e.Run(context.Background(), "sinfo", "--json")
	if err != nil {
		t.Fatal(err)
	}
	var v struct {
		Nodes []nodeState `json:"nodes"`
	}
	if err := json.Unmarshal([]byte(out), &v); err != nil {
		t.Fatal(err)
	}
	for _, n := range v.Nodes {
		if n.Name == name {
			return n, true
		}
	}
	return nodeState{}, false
}

func eventually(t testing.TB, d time.Duration, check func() error) {
	t.Helper()
	end := time.Now().Add(d)
	for {
		err := check()
		if err == nil {
			return
		}
		if time.Now().After(end) {
			t.Fatalf("after %s: %v", d, err)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

func testLog() *slog.Logger {
	return slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelWarn}))
}
