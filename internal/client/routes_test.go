package client

import (
	"context"
	"errors"
	"io"
	"testing"
	"time"

	"github.com/sparecap/sparecap/internal/api"
	"github.com/sparecap/sparecap/internal/apiv1"
	"github.com/sparecap/sparecap/internal/openapi/contracttest"
)

// step is one client call of the route-by-route test.
type step struct {
	name string
	call func(ctx context.Context) error
}

// TestEveryRouteThroughTheClient calls every operation of the OpenAPI
// document through this client, against a real server that checks each
// exchange against the document; it fails if an operation was called by
// no method of the client.
func TestEveryRouteThroughTheClient(t *testing.T) {
	url, turn := realServer(t)
	ctx := context.Background()
	admin := New(url, realAdmin)
	proj, err := admin.CreateProject(ctx, "team")
	if err != nil {
		t.Fatal(err)
	}
	tenant := New(url, proj.Token)
	cl, err := tenant.CreateCluster(ctx, apiv1.CreateClusterRequest{ClusterName: "train", Region: "us-central-2", GPUType: "RTX_6000_PCI", NumGPUs: 8, NumPreemptibleGPUs: 8})
	if err != nil {
		t.Fatal(err)
	}
	turn()
	w := &routeWorld{t: t, admin: admin, tenant: tenant, cluster: cl.ClusterID, turn: turn}
	for _, group := range [][]step{w.clusterSteps(), w.planSteps(), w.billingSteps(), w.tokenSteps(), w.webhookSteps(), w.adminSteps()} {
		for _, s := range group {
			switch err := s.call(ctx); {
			case isAPIError(err):
				t.Logf("%s: refused: %v", s.name, err)
			case err != nil:
				t.Errorf("%s: %v", s.name, err)
			}
		}
	}
	c, err := contracttest.Load()
	if err != nil {
		t.Fatal(err)
	}
	if c.Events() == 0 {
		t.Error("no event of the stream was checked against the document")
	}
	seen := c.Seen()
	for _, op := range api.Contract() {
		if seen[op.ID] == 0 {
			t.Errorf("%s (%s): no method of the client called it", op.ID, op.Key())
		}
	}
}

// isAPIError: a refusal is an answer, checked against the contract like
// any other; only a failure to get one fails the step.
func isAPIError(err error) bool {
	var e *APIError
	return errors.As(err, &e)
}

type routeWorld struct {
	t              *testing.T
	admin, tenant  *Client
	cluster        string
	turn           func()
	webhook, token string
}

func (w *routeWorld) clusterSteps() []step {
	return []step{
		{"GetCluster", func(ctx context.Context) error { _, err := w.tenant.GetCluster(ctx, w.cluster); return err }},
		{"ListClusters", func(ctx context.Context) error {
			_, err := w.tenant.ListClusters(ctx, ListClustersOptions{})
			return err
		}},
		{"UpdateCluster", func(ctx context.Context) error {
			n := 16
			_, err := w.tenant.UpdateCluster(ctx, w.cluster, apiv1.UpdateClusterRequest{NumPreemptibleGPUs: &n})
			return err
		}},
		{"ListEvents", func(ctx context.Context) error { _, err := w.tenant.ListEvents(ctx, w.cluster, "", 10); return err }},
		{"WatchEvents", func(ctx context.Context) error {
			ctx, cancel := context.WithTimeout(ctx, 2*time.Second)
			defer cancel()
			stop := errors.New("one is enough")
			if err := w.tenant.WatchEvents(ctx, w.cluster, "", func(apiv1.Event) error { return stop }); !errors.Is(err, stop) {
				return err
			}
			return nil
		}},
		{"ConvertNode", func(ctx context.Context) error {
			c, err := w.tenant.GetCluster(ctx, w.cluster)
			if err != nil {
				return err
			}
			for _, n := range c.GPUWorkerNodes {
				if n.ComputeClass == "preemptible" && n.Status == "ready" {
					_, err = w.tenant.ConvertNode(ctx, w.cluster, n.NodeName, "standard")
					return err
				}
			}
			w.t.Errorf("no ready preemptible node to convert: %+v", c.GPUWorkerNodes)
			return nil
		}},
		{"Capacity", func(ctx context.Context) error { _, err := w.tenant.Capacity(ctx); return err }},
		{"CapacityForecast", func(ctx context.Context) error {
			_, err := w.tenant.CapacityForecast(ctx, "us-central-2", "RTX_6000_PCI", 4)
			return err
		}},
		{"WhoAmI", func(ctx context.Context) error { _, err := w.tenant.WhoAmI(ctx); return err }},
		{"Healthz", func(ctx context.Context) error { return w.tenant.Healthz(ctx) }},
		{"Readyz", func(ctx context.Context) error { return w.tenant.Readyz(ctx) }},
		{"OpenAPI", func(ctx context.Context) error { _, err := w.tenant.OpenAPI(ctx); return err }},
	}
}

func (w *routeWorld) planSteps() []step {
	now := time.Date(2026, 11, 30, 12, 0, 0, 0, time.UTC)
	pq := PlanQuery{Region: "us-central-2", GPUType: "RTX_6000_PCI", GPUHours: 100, GPUs: 8, Checkpoint: time.Minute, Deadline: 30 * time.Hour}
	return []step{
		{"PreemptionStats", func(ctx context.Context) error {
			_, err := w.tenant.PreemptionStats(ctx, now.Add(-time.Hour), now.Add(time.Hour), "", "")
			return err
		}},
		{"PreemptionWeek", func(ctx context.Context) error {
			_, err := w.tenant.PreemptionWeek(ctx, "us-central-2", "RTX_6000_PCI", now.Add(-24*time.Hour), now.Add(time.Hour), 2)
			return err
		}},
		{"LostWork", func(ctx context.Context) error {
			_, err := w.tenant.LostWork(ctx, UsageQuery{From: now.Add(-time.Hour), To: now.Add(time.Hour)})
			return err
		}},
		{"CheckpointAdvice", func(ctx context.Context) error {
			_, err := w.tenant.CheckpointAdvice(ctx, "us-central-2", "RTX_6000_PCI", time.Minute)
			return err
		}},
		{"Plan", func(ctx context.Context) error { _, err := w.tenant.Plan(ctx, pq); return err }},
		{"PlanOptions", func(ctx context.Context) error { _, err := w.tenant.PlanOptions(ctx, pq, nil, nil); return err }},
		{"CreateSimulation", func(ctx context.Context) error {
			_, err := w.admin.CreateSimulation(ctx, apiv1.CreateSimulationRequest{Scenario: []byte(`{"horizon":"2h","seed":1}`)})
			return err
		}},
		{"ListSimulations", func(ctx context.Context) error {
			list, err := w.admin.ListSimulations(ctx)
			if err != nil || len(list.Simulations) == 0 {
				return err
			}
			id := list.Simulations[0].ID
			if _, err := w.admin.GetSimulation(ctx, id); err != nil {
				return err
			}
			_, err = w.admin.CancelSimulation(ctx, id)
			return err
		}},
	}
}

func (w *routeWorld) billingSteps() []step {
	now := time.Date(2026, 11, 30, 12, 0, 0, 0, time.UTC)
	q := UsageQuery{From: now.Add(-time.Hour), To: now.Add(time.Hour), GroupBy: "cluster"}
	return []step{
		{"Usage", func(ctx context.Context) error { _, err := w.tenant.Usage(ctx, q); return err }},
		{"UsageCSV", func(ctx context.Context) error { return w.tenant.UsageCSV(ctx, q, io.Discard) }},
		{"Invoice", func(ctx context.Context) error { _, err := w.tenant.Invoice(ctx, "", "2026-11"); return err }},
		{"InvoiceCSV", func(ctx context.Context) error { return w.tenant.InvoiceCSV(ctx, "", "2026-11", io.Discard) }},
		{"Rates", func(ctx context.Context) error { _, err := w.tenant.Rates(ctx); return err }},
		{"Storage", func(ctx context.Context) error { _, err := w.tenant.Storage(ctx, ""); return err }},
		{"Budgets", func(ctx context.Context) error {
			b, err := w.tenant.CreateBudget(ctx, "", apiv1.CreateBudgetRequest{Name: "month", Amount: "5000"})
			if err != nil {
				return err
			}
			if _, err := w.tenant.Budgets(ctx, ""); err != nil {
				return err
			}
			if _, err := w.tenant.BudgetAlertsPage(ctx, "", BudgetAlertOptions{Newest: true, Limit: 10}); err != nil {
				return err
			}
			return w.tenant.DeleteBudget(ctx, "", b.ID)
		}},
	}
}

func (w *routeWorld) tokenSteps() []step {
	var steps []step
	for _, sc := range []struct {
		c     *Client
		scope TokenScope
	}{{w.tenant, TokenScope{}}, {w.admin, TokenScope{ProjectID: "team"}}} {
		steps = append(steps, step{"tokens " + sc.scope.ProjectID, func(ctx context.Context) error {
			tok, err := sc.c.NewToken(ctx, sc.scope, apiv1.CreateTokenRequest{Name: "ci"})
			if err != nil {
				return err
			}
			if _, err := sc.c.ListTokens(ctx, sc.scope); err != nil {
				return err
			}
			turned, err := sc.c.RotateToken(ctx, sc.scope, tok.TokenID)
			if err != nil {
				return err
			}
			_, err = sc.c.RevokeToken(ctx, sc.scope, turned.TokenID)
			return err
		}})
	}
	return append(steps, step{"CreateToken", func(ctx context.Context) error { _, err := w.admin.CreateToken(ctx, "team"); return err }})
}

func (w *routeWorld) webhookSteps() []step {
	var steps []step
	for _, sc := range []struct {
		c     *Client
		scope WebhookScope
	}{{w.tenant, WebhookScope{}}, {w.admin, WebhookScope{ProjectID: "team"}}} {
		steps = append(steps, step{"webhooks " + sc.scope.ProjectID, func(ctx context.Context) error {
			e, err := sc.c.CreateWebhook(ctx, sc.scope, apiv1.CreateWebhookRequest{Name: "hook-" + sc.scope.ProjectID, URL: "http://127.0.0.1:9/hook"})
			if err != nil {
				return err
			}
			name := "renamed-" + sc.scope.ProjectID
			for _, call := range []func() error{
				func() error { _, err := sc.c.ListWebhooks(ctx, sc.scope); return err },
				func() error { _, err := sc.c.GetWebhook(ctx, sc.scope, e.EndpointID); return err },
				func() error {
					_, err := sc.c.UpdateWebhook(ctx, sc.scope, e.EndpointID, apiv1.UpdateWebhookRequest{Name: &name})
					return err
				},
				func() error {
					_, err := sc.c.RotateWebhookSecret(ctx, sc.scope, e.EndpointID, apiv1.RotateWebhookSecretRequest{})
					return err
				},
				func() error { _, err := sc.c.TestWebhook(ctx, sc.scope, e.EndpointID); return err },
				func() error {
					_, err := sc.c.WebhookDeliveries(ctx, sc.scope, e.EndpointID, DeliveriesQuery{State: "pending", Limit: 10})
					return err
				},
				func() error { _, err := sc.c.DeleteWebhook(ctx, sc.scope, e.EndpointID); return err },
			} {
				if err := call(); err != nil {
					return err
				}
			}
			return nil
		}})
	}
	return steps
}

func (w *routeWorld) adminSteps() []step {
	now := time.Date(2026, 11, 30, 12, 0, 0, 0, time.UTC)
	out := true
	return []step{
		{"ListProjects", func(ctx context.Context) error { _, err := w.admin.ListProjects(ctx); return err }},
		{"SetStorageQuota", func(ctx context.Context) error { return w.admin.SetStorageQuota(ctx, "team", 1<<30) }},
		{"SetClusterWeight", func(ctx context.Context) error { _, err := w.admin.SetClusterWeight(ctx, w.cluster, 3); return err }},
		{"Machines", func(ctx context.Context) error {
			made, err := w.admin.CreateMachines(ctx, apiv1.CreateMachinesRequest{Region: "us-central-2", GPUType: "RTX_6000_PCI", Count: 1})
			if err != nil {
				return err
			}
			if _, err := w.admin.ListMachines(ctx, ListMachinesOptions{State: "free"}); err != nil {
				return err
			}
			_, err = w.admin.UpdateMachine(ctx, made.Machines[0].MachineID, apiv1.UpdateMachineRequest{OutOfService: &out})
			return err
		}},
		{"Reservations", func(ctx context.Context) error {
			if _, err := w.admin.CreateReservation(ctx, apiv1.CreateReservationRequest{ProjectID: "team", Region: "us-central-2", GPUType: "RTX_6000_PCI"}); err != nil {
				return err
			}
			_, err := w.admin.ListReservations(ctx)
			return err
		}},
		{"Lending", func(ctx context.Context) error {
			_, err := w.admin.Lending(ctx, now.Add(-time.Hour), now.Add(time.Hour))
			return err
		}},
		{"Prices", func(ctx context.Context) error {
			if _, err := w.admin.PriceBook(ctx); err != nil {
				return err
			}
			_, err := w.admin.CreatePrice(ctx, apiv1.CreatePriceRequest{Kind: "on_demand", GPUType: "RTX_6000_PCI", Value: "0.99", EffectiveFrom: timep(now.Add(time.Hour))})
			return err
		}},
		// Attaching needs a reachable API or a slurmctld: refused here,
		// and the refusals are checked like any answer.
		{"Kubeconfig", func(ctx context.Context) error {
			if _, err := w.admin.AttachKubeconfig(ctx, w.cluster, []byte("apiVersion: v1\nkind: Config\n")); !isAPIError(err) {
				return err
			}
			_, err := w.admin.DetachKubeconfig(ctx, w.cluster)
			return err
		}},
		{"Slurm", func(ctx context.Context) error {
			if _, err := w.admin.AttachSlurm(ctx, w.cluster, []byte("ClusterName=x\n")); !isAPIError(err) {
				return err
			}
			_, err := w.admin.DetachSlurm(ctx, w.cluster)
			return err
		}},
		{"DeleteCluster", func(ctx context.Context) error { _, err := w.tenant.DeleteCluster(ctx, w.cluster); return err }},
	}
}
