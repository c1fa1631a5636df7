// Package demo plays the scenario of `sparecap demo`: an embedded server on
// a simulated fleet at high speed, driven through the public API like any
// client, with a narrated timeline of what happens to the nodes.
package demo

import (
	"context"
	"fmt"
	"io"
	"os"
	"sort"
	"strings"
	"sync"
	"text/tabwriter"
	"time"

	"github.com/sparecap/sparecap/internal/clock"

	"github.com/sparecap/sparecap/internal/apiv1"
	"github.com/sparecap/sparecap/internal/client"
	"github.com/sparecap/sparecap/internal/fleet"
	"github.com/sparecap/sparecap/internal/server"
	"github.com/sparecap/sparecap/internal/sim"
	"github.com/sparecap/sparecap/internal/simjob"
)

// Options of a demo run.
type Options struct {
	// Speed of the simulated clock (default 60: the 5-minute drain window
	// lasts 5 seconds).
	Speed float64
	// DataDir keeps the demo's state; empty uses a temporary directory that
	// is removed afterwards.
	DataDir string
	// Clock is the wall clock the demo, its embedded server and its job
	// run on (default clock.Real{}); the server's clock runs Speed times
	// faster.
	Clock clock.Clock
}

// The demo fleet: one region and GPU type the scenario plays in, and a
// second one showing that idle reservations make preemptible capacity
// exceed on-demand capacity.
const demoFleet = `
pools:
  - {region: us-central-2, gpu_type: RTX_6000_PCI, machines: 4}
  - {region: us-central-8, gpu_type: H100_SXM, machines: 2}
  - {region: us-central-8, gpu_type: H100_SXM, machines: 4, reserved_for: acme}
prices:
  RTX_6000_PCI: "0.89"
  H100_SXM: "2.99"
`

// Run plays the demo, writing the narration to out.
func Run(ctx context.Context, out io.Writer, o Options) error {
	if o.Speed <= 0 {
		o.Speed = 60
	}
	if o.Clock == nil {
		o.Clock = clock.Real{}
	}
	dir := o.DataDir
	if dir != "" {
		// Made here, before the server makes anything in it: a directory
		// that cannot be made stops the demo with nothing made. Owner only,
		// as the server's: it holds the admin token.
		if err := os.MkdirAll(dir, 0o700); err != nil {
			return fmt.Errorf("make the data directory %s: %w", dir, err)
		}
	} else {
		tmp, err := os.MkdirTemp("", "sparecap-demo-")
		if err != nil {
			return err
		}
		defer os.RemoveAll(tmp)
		dir = tmp
	}
	fleetPath := dir + "/fleet.yaml"
	if err := os.WriteFile(fleetPath, []byte(demoFleet), 0o600); err != nil {
		return err
	}
	if _, err := fleet.Parse([]byte(demoFleet)); err != nil {
		return err
	}
	srv, err := server.Start(ctx, server.Options{
		Addr: "127.0.0.1:0", DataDir: dir, FleetFile: fleetPath, Speed: o.Speed, Clock: o.Clock,
		Cooldown: 30 * time.Second, SimSeed: 3,
	})
	if err != nil {
		return fmt.Errorf("start embedded server: %w", err)
	}
	defer srv.Close()
	d := &demo{out: out, srv: srv, wall: o.Clock, dir: dir, start: srv.Clock.Now(), admin: client.New(srv.URL, srv.AdminToken, client.WithClock(o.Clock))}
	return d.play(ctx)
}

type demo struct {
	out io.Writer
	srv *server.Server
	// wall paces the demo's own polls and pauses: wall time.
	wall  clock.Clock
	dir   string
	start time.Time
	admin *client.Client
	mu    sync.Mutex
}

// say prints a line stamped with the simulated time since the start.
func (d *demo) say(format string, args ...any) {
	d.mu.Lock()
	defer d.mu.Unlock()
	el := d.srv.Clock.Now().Sub(d.start).Round(time.Second)
	fmt.Fprintf(d.out, "[T+%02d:%02d] %s\n", int(el.Minutes()), int(el.Seconds())%60, fmt.Sprintf(format, args...))
}

func (d *demo) heading(s string) {
	d.mu.Lock()
	defer d.mu.Unlock()
	fmt.Fprintf(d.out, "\n== %s\n", s)
}

func (d *demo) play(ctx context.Context) error {
	ctx, cancel := context.WithTimeout(ctx, 3*time.Minute)
	defer cancel()
	window := time.Duration(float64(5*time.Minute) / d.srv.Speed).Round(100 * time.Millisecond)
	fmt.Fprintf(d.out, "sparecap demo: an embedded server on a simulated fleet, its clock at %.0fx (the 5-minute drain window lasts %s)\n", d.srv.Speed, window)
	fmt.Fprintf(d.out, "Times below are simulated time since the start.\n")

	d.heading("Capacity: idle reservations are lent as preemptible, so there is more preemptible than on-demand capacity")
	if err := d.capacity(ctx); err != nil {
		return err
	}

	research, err := d.project(ctx, "research")
	if err != nil {
		return err
	}
	burstCo, err := d.project(ctx, "burst-co")
	if err != nil {
		return err
	}
	training, job, err := d.fill(ctx, research)
	if err != nil {
		return err
	}
	burst, err := d.reclaim(ctx, research, burstCo, training)
	if err != nil {
		return err
	}
	if err := d.replenish(ctx, research, burstCo, training, burst, job); err != nil {
		return err
	}

	d.heading("The job: what the reclaim cost a real training process")
	d.jobSummary(job)

	d.heading("The bill: training's usage priced to the second, preemptible at half price")
	if err := d.bill(ctx, research); err != nil {
		return err
	}

	d.heading("Done")
	fmt.Fprintf(d.out, "Run it yourself: `sparecap server` in one terminal, then `sparecap capacity`, `sparecap clusters create ...`,\n`sparecap events --cluster <id> --follow`, `sparecap usage`, or the web console at http://127.0.0.1:8407/console/.\nSee README.md.\n")
	return nil
}

// fill is the first act: research's cluster fills its preemptible target
// and a training job starts on it. It returns the cluster's ID and the
// job.
func (d *demo) fill(ctx context.Context, research *client.Client) (string, *simjob.Job, error) {
	d.heading("Tenant research creates a cluster: 8 standard GPUs now, a target of 16 preemptible GPUs filled as capacity appears")
	c, err := research.CreateCluster(ctx, apiv1.CreateClusterRequest{ClusterName: "training", Region: "us-central-2", GPUType: "RTX_6000_PCI",
		ClusterType: "KUBERNETES", BillingType: "ON_DEMAND", NumGPUs: 8, NumPreemptibleGPUs: 16})
	if err != nil {
		return "", nil, fmt.Errorf("create research cluster: %w", err)
	}
	d.say("cluster %s (%s): status %s, %d standard GPUs, preemptible target %d", c.ClusterName, c.ClusterID, c.Status, c.NumGPUs, c.DesiredPreemptibleGPUs)
	go d.follow(ctx, research, c.ClusterID, "training")
	go d.watchPods(ctx)
	if err := d.waitFor(ctx, research, c.ClusterID, func(c *apiv1.Cluster) bool {
		return c.Status == "Ready" && c.AllocatedPreemptibleGPUs == 16
	}); err != nil {
		return "", nil, err
	}
	c, _ = research.GetCluster(ctx, c.ClusterID)
	d.say("training is Ready: allocated %d of %d preemptible GPUs; nodes: %s", c.AllocatedPreemptibleGPUs, c.DesiredPreemptibleGPUs, nodeList(c))
	job, err := d.trainingJob(ctx, d.dir, c.ClusterID)
	if err != nil {
		return "", nil, err
	}
	d.say("training runs for 10 minutes...")
	d.sleep(ctx, 10*time.Minute)
	return c.ClusterID, job, nil
}

// reclaim is the second act: burst-co's on-demand cluster takes the
// training cluster's preemptible nodes. It returns the burst cluster's
// ID.
func (d *demo) reclaim(ctx context.Context, research, burstCo *client.Client, training string) (string, error) {
	d.heading("Tenant burst-co needs 24 on-demand GPUs: the free machine is not enough, so both preemptible nodes are reclaimed")
	b, err := burstCo.CreateCluster(ctx, apiv1.CreateClusterRequest{ClusterName: "burst", Region: "us-central-2", GPUType: "RTX_6000_PCI",
		ClusterType: "KUBERNETES", BillingType: "ON_DEMAND", NumGPUs: 24})
	if err != nil {
		return "", fmt.Errorf("create burst cluster: %w", err)
	}
	d.say("cluster burst (%s) accepted at once: status %s until the drains end", b.ClusterID, b.Status)
	go d.follow(ctx, burstCo, b.ClusterID, "burst")
	if err := d.waitFor(ctx, burstCo, b.ClusterID, func(c *apiv1.Cluster) bool { return c.Status == "Ready" }); err != nil {
		return "", err
	}
	c, _ := research.GetCluster(ctx, training)
	d.say("burst is Ready. training keeps its target: allocated %d of %d preemptible GPUs%s", c.AllocatedPreemptibleGPUs, c.DesiredPreemptibleGPUs, reason(c))
	return b.ClusterID, nil
}

// replenish is the last act: the burst ends, the training cluster's
// target is filled again and the job runs to its end.
func (d *demo) replenish(ctx context.Context, research, burstCo *client.Client, training, burst string, job *simjob.Job) error {
	d.heading("The burst ends: burst-co deletes its cluster, and training's target is replenished")
	if _, err := burstCo.DeleteCluster(ctx, burst); err != nil {
		return fmt.Errorf("delete burst cluster: %w", err)
	}
	if err := d.waitFor(ctx, research, training, func(c *apiv1.Cluster) bool { return c.AllocatedPreemptibleGPUs == 16 }); err != nil {
		return err
	}
	<-d.wall.After(200 * time.Millisecond) // let the last events print
	c, _ := research.GetCluster(ctx, training)
	d.say("training: allocated %d of %d preemptible GPUs again; nodes: %s", c.AllocatedPreemptibleGPUs, c.DesiredPreemptibleGPUs, nodeList(c))
	d.say("training runs until its job completes...")
	select {
	case <-job.Done():
	case <-ctx.Done():
		return fmt.Errorf("demo timed out waiting for the training job: %w", ctx.Err())
	}
	if err := job.Err(); err != nil {
		return fmt.Errorf("the training job: %w", err)
	}
	return nil
}

// bill prints the tenant's usage since the demo started, as the tenant
// sees it through the API.
func (d *demo) bill(ctx context.Context, c *client.Client) error {
	from := d.start.Truncate(time.Second)
	to := d.srv.Clock.Now().Truncate(time.Second).Add(time.Second)
	u, err := c.Usage(ctx, client.UsageQuery{From: from, To: to})
	if err != nil {
		return fmt.Errorf("usage: %w", err)
	}
	d.mu.Lock()
	defer d.mu.Unlock()
	tw := tabwriter.NewWriter(d.out, 0, 2, 2, ' ', 0)
	fmt.Fprintln(tw, "NODE\tCLASS\tBILLED\tRATE/GPU-H\tAMOUNT\tON-DEMAND")
	for _, l := range u.LineItems {
		fmt.Fprintf(tw, "%s\t%s\t%s\t$%s\t$%s\t$%s\n", l.NodeName, l.ComputeClass, time.Duration(l.BilledSeconds)*time.Second,
			l.RatePerGPUHour, l.Amount, l.OnDemandAmount)
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	pre, std := u.ByClass["preemptible"], u.ByClass["standard"]
	fmt.Fprintf(d.out, "\nstandard     $%s\npreemptible  $%s  (on demand it would have been $%s)\n", std.Amount, pre.Amount, pre.OnDemandEquivalent)
	fmt.Fprintf(d.out, "total        $%s %s; on-demand equivalent $%s; saved $%s\n", u.Totals.Amount, u.Currency, u.Totals.OnDemandEquivalent, u.Totals.Savings)
	fmt.Fprintf(d.out, "Reclaimed preemptible nodes stop billing at the notice (T+0): the drain window is not billed.\n")
	return nil
}

func (d *demo) capacity(ctx context.Context) error {
	caps, err := d.admin.Capacity(ctx)
	if err != nil {
		return err
	}
	tw := tabwriter.NewWriter(d.out, 0, 2, 2, ' ', 0)
	fmt.Fprintln(tw, "REGION\tGPU TYPE\tTOTAL\tON-DEMAND AVAILABLE\tPREEMPTIBLE AVAILABLE\tRESERVED")
	for _, c := range caps.Capacity {
		fmt.Fprintf(tw, "%s\t%s\t%d\t%d\t%d\t%d\n", c.Region, c.GPUType, c.Total, c.AvailableOnDemand, c.AvailablePreemptible, c.Reserved)
	}
	return tw.Flush()
}

// project creates a project and returns a client with its token: tenants
// act with their own token, as they would.
func (d *demo) project(ctx context.Context, id string) (*client.Client, error) {
	p, err := d.admin.CreateProject(ctx, id)
	if err != nil {
		return nil, fmt.Errorf("create project %s: %w", id, err)
	}
	return client.New(d.srv.URL, p.Token, client.WithClock(d.wall)), nil
}

func (d *demo) waitFor(ctx context.Context, c *client.Client, id string, ok func(*apiv1.Cluster) bool) error {
	for {
		cl, err := c.GetCluster(ctx, id)
		if err == nil && ok(cl) {
			return nil
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("demo timed out waiting for cluster %s: %w", id, ctx.Err())
		case <-d.wall.After(50 * time.Millisecond):
		}
	}
}

// follow narrates a cluster's lifecycle events from the API's event stream.
func (d *demo) follow(ctx context.Context, c *client.Client, id, name string) {
	_ = c.WatchEvents(ctx, id, "", func(e apiv1.Event) error {
		msg := e.Message
		if e.Deadline != nil && e.Reason == "PreemptionNotified" {
			msg += fmt.Sprintf(" (deadline T+%s)", offset(e.Deadline.Sub(d.start)))
		}
		d.say("%-8s %-18s %s", name, e.Reason, msg)
		return nil
	})
}

// watchPods narrates what the simulated pods do after SIGTERM: the part of
// the story that happens inside the tenant's cluster.
func (d *demo) watchPods(ctx context.Context) {
	seen := map[string]bool{}
	for {
		for _, n := range d.srv.Sim.Nodes("") {
			for _, p := range n.Pods {
				key := n.ClusterID + "/" + n.Name + "/" + p.Name
				switch {
				case p.State == sim.PodTerminating && !seen[key+"/term"]:
					seen[key+"/term"] = true
					d.say("  pod %s on %s got SIGTERM, grace %s", p.Name, n.Name, p.Grace)
				case p.State == sim.PodGone && !seen[key+"/gone"]:
					seen[key+"/gone"] = true
					seen[key+"/term"] = true
					how := "exited"
					switch p.End {
					case sim.PodKilled:
						how = "was killed when its grace ran out"
					case sim.PodForceDeleted:
						how = "was force-deleted at the deadline"
					}
					d.say("  pod %s on %s %s, %s after SIGTERM", p.Name, n.Name, how, p.GoneAt.Sub(p.SIGTERMAt).Round(time.Second))
				}
			}
		}
		select {
		case <-ctx.Done():
			return
		case <-d.wall.After(20 * time.Millisecond):
		}
	}
}

// sleep waits d of simulated time.
func (d *demo) sleep(ctx context.Context, dur time.Duration) {
	select {
	case <-ctx.Done():
	case <-d.srv.Clock.After(dur):
	}
}

func offset(d time.Duration) string {
	d = d.Round(time.Second)
	return fmt.Sprintf("%02d:%02d", int(d.Minutes()), int(d.Seconds())%60)
}

func nodeList(c *apiv1.Cluster) string {
	var parts []string
	for _, n := range c.GPUWorkerNodes {
		parts = append(parts, fmt.Sprintf("%s (%s, %s)", n.NodeName, n.ComputeClass, n.Status))
	}
	sort.Strings(parts)
	return strings.Join(parts, ", ")
}

func reason(c *apiv1.Cluster) string {
	if c.TargetUnfulfilled == nil {
		return ""
	}
	return fmt.Sprintf(" (%s: %s)", c.TargetUnfulfilled.Reason, c.TargetUnfulfilled.Message)
}
