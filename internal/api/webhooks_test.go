package api

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/sparecap/sparecap/internal/apiv1"
	"github.com/sparecap/sparecap/internal/domain"
	"github.com/sparecap/sparecap/internal/secret"
	"github.com/sparecap/sparecap/internal/store"
	"github.com/sparecap/sparecap/internal/webhook"
)

func newWebhookEnv(t *testing.T, allow ...string) (*env, *secret.Sealer, *int) {
	t.Helper()
	sealer, err := secret.NewSealer(make([]byte, 32))
	if err != nil {
		t.Fatal(err)
	}
	prefixes, err := webhook.ParseAllow(allow)
	if err != nil {
		t.Fatal(err)
	}
	kicks := new(int)
	e := newEnvOpts(t, Options{Sealer: sealer, Webhooks: WebhookOptions{Policy: webhook.Policy{Allow: prefixes}, OnMessage: func() { *kicks++ }}})
	return e, sealer, kicks
}

// TestWebhookLifecycle: a project registers an endpoint (its secret
// answered once, sealed in the store), lists, reads, changes, rotates,
// tests and deletes it; an operator does the same through the admin
// routes.
func TestWebhookLifecycle(t *testing.T) {
	e, sealer, kicks := newWebhookEnv(t)
	cl := e.create("p", `{"cluster_name":"a","region":"us-central-2","gpu_type":"RTX_6000_PCI","num_gpus":8}`)
	var ep apiv1.WebhookEndpoint
	e.do("p", "POST", "/v1/webhooks", `{"name":"ray","url":"https://hooks.example.com/ray",
		"event_types":["PreemptionNotified","dev.sparecap.NodeRemoved","PreemptionNotified"],"cluster_ids":["`+cl.ClusterID+`"]}`, 201, &ep)
	if !strings.HasPrefix(ep.EndpointID, "wh-") || ep.ProjectID != "p" || ep.Name != "ray" || ep.URL != "https://hooks.example.com/ray" ||
		!ep.Enabled || strings.Join(ep.EventTypes, ",") != "PreemptionNotified,NodeRemoved" ||
		strings.Join(ep.ClusterIDs, ",") != cl.ClusterID || ep.PreviousSecretExpiresAt != nil || ep.CreatedAt.IsZero() {
		t.Fatalf("created %+v", ep)
	}
	if !strings.HasPrefix(ep.Secret, "whsec_") || len(ep.Secret) != len("whsec_")+44 {
		t.Fatalf("secret %q: want whsec_ and the base64 of 32 bytes", ep.Secret)
	}
	stored, err := e.st.GetWebhookEndpoint(e.ctx, ep.EndpointID)
	if err != nil {
		t.Fatal(err)
	}
	if strings.Contains(string(stored.Secret), ep.Secret[6:]) {
		t.Fatal("the secret is stored in the clear")
	}
	if plain, err := sealer.Open(stored.Secret, ep.EndpointID); err != nil || string(plain) != ep.Secret {
		t.Fatalf("the stored secret opens to %q, %v; want the answered one", plain, err)
	}
	var list apiv1.WebhookEndpointList
	e.do("p", "GET", "/v1/webhooks", "", 200, &list)
	if len(list.Endpoints) != 1 || list.Endpoints[0].Secret != "" || list.Endpoints[0].EndpointID != ep.EndpointID {
		t.Fatalf("list %+v", list)
	}
	var got apiv1.WebhookEndpoint
	e.do("p", "GET", "/v1/webhooks/"+ep.EndpointID, "", 200, &got)
	if got.Secret != "" || got.Name != "ray" {
		t.Fatalf("get %+v", got)
	}
	// An empty event list is every event; the name changes; disabled.
	e.do("p", "PATCH", "/v1/webhooks/"+ep.EndpointID, `{"event_types":[],"name":"ray2","enabled":false}`, 200, &got)
	if len(got.EventTypes) != 0 || got.Name != "ray2" || got.Enabled || strings.Join(got.ClusterIDs, ",") != cl.ClusterID {
		t.Fatalf("patched %+v", got)
	}
	// A test needs it enabled.
	e.apiErr("p", "POST", "/v1/webhooks/"+ep.EndpointID+"/test", "", 409)
	e.do("p", "PATCH", "/v1/webhooks/"+ep.EndpointID, `{"enabled":true}`, 200, &got)
	var d apiv1.WebhookDelivery
	e.do("p", "POST", "/v1/webhooks/"+ep.EndpointID+"/test", "", 202, &d)
	if !strings.HasPrefix(d.WebhookID, "test-") || d.Type != "dev.sparecap.Test" || d.State != "pending" || d.NextAttemptAt == nil || *kicks != 1 {
		t.Fatalf("test delivery %+v (kicks %d)", d, *kicks)
	}
	var ds apiv1.WebhookDeliveryList
	e.do("p", "GET", "/v1/webhooks/"+ep.EndpointID+"/deliveries", "", 200, &ds)
	if len(ds.Deliveries) != 1 || ds.Deliveries[0].WebhookID != d.WebhookID {
		t.Fatalf("deliveries %+v", ds)
	}
	e.do("p", "GET", "/v1/webhooks/"+ep.EndpointID+"/deliveries?state=delivered&limit=5", "", 200, &ds)
	if len(ds.Deliveries) != 0 {
		t.Fatalf("delivered %+v", ds)
	}
	e.do("p", "GET", "/v1/webhooks/"+ep.EndpointID, "", 200, &got)
	if got.Deliveries != (apiv1.DeliveryCounts{Pending: 1}) {
		t.Fatalf("counts %+v", got.Deliveries)
	}

	// Rotate: a new secret, the old one signs for 24 h more.
	e.wall.Step(time.Hour)
	var rotated apiv1.WebhookEndpoint
	e.do("p", "POST", "/v1/webhooks/"+ep.EndpointID+"/rotate", "", 200, &rotated)
	if !strings.HasPrefix(rotated.Secret, "whsec_") || rotated.Secret == ep.Secret || rotated.PreviousSecretExpiresAt == nil ||
		!rotated.PreviousSecretExpiresAt.Equal(e.wall.Now().Add(24*time.Hour)) {
		t.Fatalf("rotated %+v", rotated)
	}
	stored, _ = e.st.GetWebhookEndpoint(e.ctx, ep.EndpointID)
	prev, err := sealer.Open(stored.PreviousSecret, ep.EndpointID)
	if err != nil || string(prev) != ep.Secret {
		t.Fatalf("the previous secret is %q, %v; want the first one", prev, err)
	}
	// Rotated again with no overlap (the secret leaked): none kept.
	rotated = apiv1.WebhookEndpoint{}
	e.do("p", "POST", "/v1/webhooks/"+ep.EndpointID+"/rotate", `{"previous_expires_in":"0s"}`, 200, &rotated)
	stored, _ = e.st.GetWebhookEndpoint(e.ctx, ep.EndpointID)
	if rotated.PreviousSecretExpiresAt != nil || stored.PreviousSecret != nil {
		t.Fatalf("rotated with no overlap: %+v, previous kept: %v", rotated, stored.PreviousSecret != nil)
	}
	e.apiErr("p", "POST", "/v1/webhooks/"+ep.EndpointID+"/rotate", `{"previous_expires_in":"48h"}`, 400)

	// The operator, on the admin routes.
	var adm apiv1.WebhookEndpoint
	e.do("admin", "POST", "/v1/admin/projects/p/webhooks", `{"name":"sky","url":"https://sky.example.com/x","enabled":false}`, 201, &adm)
	if adm.ProjectID != "p" || adm.Enabled || adm.Secret == "" {
		t.Fatalf("the operator's endpoint: %+v", adm)
	}
	e.do("admin", "GET", "/v1/admin/projects/p/webhooks", "", 200, &list)
	if len(list.Endpoints) != 2 {
		t.Fatalf("the operator's list: %+v", list)
	}
	e.do("admin", "PATCH", "/v1/admin/projects/p/webhooks/"+adm.EndpointID, `{"url":"https://sky.example.com/y"}`, 200, &got)
	e.do("admin", "DELETE", "/v1/admin/projects/p/webhooks/"+adm.EndpointID, "", 200, &got)
	e.do("p", "DELETE", "/v1/webhooks/"+ep.EndpointID, "", 200, &got)
	e.do("p", "GET", "/v1/webhooks", "", 200, &list)
	if len(list.Endpoints) != 0 {
		t.Fatalf("after deleting both: %+v", list)
	}
	if ds, _ := e.st.ListWebhookDeliveries(e.ctx, store.DeliveryFilter{EndpointID: ep.EndpointID}); len(ds) != 0 {
		t.Fatalf("a deleted endpoint's deliveries are left: %+v", ds)
	}
	e.apiErr("p", "GET", "/v1/webhooks/"+ep.EndpointID, "", 404)
}

// TestWebhookValidation: every bad request is refused with a message
// naming its field, and changes nothing.
func TestWebhookValidation(t *testing.T) {
	e, _, _ := newWebhookEnv(t)
	other := e.create("q", `{"cluster_name":"b","region":"us-central-2","gpu_type":"RTX_6000_PCI","num_gpus":8}`)
	var ep apiv1.WebhookEndpoint
	e.do("p", "POST", "/v1/webhooks", `{"name":"ray","url":"https://hooks.example.com/ray"}`, 201, &ep)
	var before apiv1.WebhookEndpoint
	e.do("p", "GET", "/v1/webhooks/"+ep.EndpointID, "", 200, &before)
	for _, c := range []struct {
		method, path, body string
		status             int
		field, msg         string
	}{
		{"POST", "", `{"url":"https://x.example.com"}`, 400, "name", "name is required"},
		{"POST", "", `{"name":"x"}`, 400, "url", "url is required"},
		{"POST", "", `{"name":"bad name","url":"https://x.example.com"}`, 400, "name", "is not valid"},
		{"POST", "", `{"name":"x","url":"ftp://x.example.com"}`, 400, "url", "https://"},
		{"POST", "", `{"name":"x","url":"https://u:p@x.example.com"}`, 400, "url", "user name or password"},
		{"POST", "", `{"name":"x","url":"http://10.1.2.3/hook"}`, 400, "url", "10.1.2.3 is a private address"},
		{"POST", "", `{"name":"x","url":"http://169.254.169.254/latest/meta-data"}`, 400, "url", "--webhook-allow-cidr"},
		{"POST", "", `{"name":"x","url":"http://localhost:9000/"}`, 400, "url", "this server itself"},
		{"POST", "", `{"name":"x","url":"https://x.example.com","event_types":["Preempted"]}`, 400, "event_types", `unknown event type "Preempted"; the types are NodeAdded, PreemptionNotified`},
		{"POST", "", `{"name":"x","url":"https://x.example.com","cluster_ids":["` + other.ClusterID + `"]}`, 400, "cluster_ids", "not found in project p"},
		{"POST", "", `{"name":"x","url":"https://x.example.com","cluster_ids":["c-nope"]}`, 400, "cluster_ids", "not found in project p"},
		{"POST", "", `{"name":"ray","url":"https://x.example.com"}`, 409, "", "already has a webhook endpoint named \"ray\""},
		{"POST", "", `{"name":"x","url":"https://x.example.com","secret":"whsec_mine"}`, 400, "secret", `unknown field "secret"`},
		{"POST", "", `{"name":"x","url":"https://x.example.com","URL":"y"}`, 400, "URL", "case-sensitive"},
		{"PATCH", "/" + ep.EndpointID, `{}`, 400, "", "nothing to update"},
		{"PATCH", "/" + ep.EndpointID, `{"url":"http://[::1]/"}`, 400, "url", "loopback"},
		{"PATCH", "/" + ep.EndpointID, `{"event_types":["NodeAdded","nope"]}`, 400, "event_types", "unknown event type"},
		{"PATCH", "/" + ep.EndpointID, `{"enabled":"yes"}`, 400, "enabled", "must be true or false, not a JSON string"},
		{"GET", "/" + ep.EndpointID + "/deliveries?state=lost", "", 400, "state", "pending, delivered or failed"},
		{"GET", "/" + ep.EndpointID + "/deliveries?limit=0", "", 400, "limit", "between 1 and 1000"},
		{"GET", "/" + ep.EndpointID + "/deliveries?limit=1001", "", 400, "limit", "between 1 and 1000"},
		{"POST", "/" + ep.EndpointID + "/rotate", `{"previous_expires_in":"soon"}`, 400, "previous_expires_in", "from 0s"},
		{"POST", "/" + ep.EndpointID + "/test", `{"x":1}`, 400, "x", "unknown field"},
		{"GET", "/wh-nope", "", 404, "", `webhook endpoint "wh-nope" not found`},
	} {
		got := e.apiErr("p", c.method, "/v1/webhooks"+c.path, c.body, c.status)
		if got.Field != c.field || !strings.Contains(got.Message, c.msg) {
			t.Errorf("%s %s %s: %d %+v; want field %q and a message with %q", c.method, c.path, c.body, c.status, got, c.field, c.msg)
		}
	}
	var after apiv1.WebhookEndpoint
	e.do("p", "GET", "/v1/webhooks/"+ep.EndpointID, "", 200, &after)
	if fmt.Sprint(after) != fmt.Sprint(before) {
		t.Errorf("refused requests changed the endpoint:\n %+v\nwas\n %+v", after, before)
	}
	var list apiv1.WebhookEndpointList
	e.do("p", "GET", "/v1/webhooks", "", 200, &list)
	if len(list.Endpoints) != 1 {
		t.Errorf("refused requests made endpoints: %+v", list)
	}
}

// TestWebhookScopes: another project's endpoint is not found, whatever
// the action; a project token cannot use the admin routes; an operator
// names the project.
func TestWebhookScopes(t *testing.T) {
	e, _, _ := newWebhookEnv(t)
	var ep apiv1.WebhookEndpoint
	e.do("p", "POST", "/v1/webhooks", `{"name":"ray","url":"https://hooks.example.com/ray"}`, 201, &ep)
	for _, c := range []struct{ method, path, body string }{
		{"GET", "", ""}, {"PATCH", "", `{"enabled":false}`}, {"DELETE", "", ""}, {"POST", "/rotate", ""},
		{"POST", "/test", ""}, {"GET", "/deliveries", ""},
	} {
		got := e.apiErr("q", c.method, "/v1/webhooks/"+ep.EndpointID+c.path, c.body, 404)
		if got.Message != `webhook endpoint "`+ep.EndpointID+`" not found` {
			t.Errorf("q %s %s: %+v", c.method, c.path, got)
		}
		e.apiErr("admin", c.method, "/v1/admin/projects/q/webhooks/"+ep.EndpointID+c.path, c.body, 404)
	}
	var list apiv1.WebhookEndpointList
	e.do("q", "GET", "/v1/webhooks", "", 200, &list)
	if len(list.Endpoints) != 0 {
		t.Fatalf("q sees p's endpoints: %+v", list)
	}
	e.apiErr("p", "GET", "/v1/admin/projects/p/webhooks", "", 403)
	if got := e.apiErr("admin", "GET", "/v1/webhooks", "", 400); !strings.Contains(got.Message, "/v1/admin/projects/{project}/webhooks") {
		t.Errorf("an operator on /v1/webhooks: %+v", got)
	}
	e.apiErr("admin", "POST", "/v1/webhooks", `{"name":"x","url":"https://x.example.com"}`, 400)
	if got := e.apiErr("admin", "GET", "/v1/admin/projects/ghost/webhooks", "", 404); got.Message != `project "ghost" not found` {
		t.Errorf("a missing project: %+v", got)
	}
	e.apiErr("admin", "POST", "/v1/admin/projects/ghost/webhooks", `{"name":"x","url":"https://x.example.com"}`, 404)
	var got apiv1.WebhookEndpoint
	e.do("p", "GET", "/v1/webhooks/"+ep.EndpointID, "", 200, &got)
	if !got.Enabled {
		t.Error("q's refused PATCH disabled p's endpoint")
	}
}

// TestWebhookCaps: a project has at most MaxWebhookEndpoints endpoints;
// the next is refused until one is deleted; other projects are not
// affected.
func TestWebhookCaps(t *testing.T) {
	e, _, _ := newWebhookEnv(t)
	var first apiv1.WebhookEndpoint
	for i := range MaxWebhookEndpoints {
		e.do("p", "POST", "/v1/webhooks", fmt.Sprintf(`{"name":"h%d","url":"https://h%d.example.com/"}`, i, i), 201, &first)
	}
	got := e.apiErr("p", "POST", "/v1/webhooks", `{"name":"one-more","url":"https://x.example.com/"}`, 409)
	if !strings.Contains(got.Message, "has 20 webhook endpoints, the most a project may have") {
		t.Errorf("over the cap: %+v", got)
	}
	e.do("q", "POST", "/v1/webhooks", `{"name":"one-more","url":"https://x.example.com/"}`, 201, nil)
	e.do("p", "DELETE", "/v1/webhooks/"+first.EndpointID, "", 200, nil)
	e.do("p", "POST", "/v1/webhooks", `{"name":"one-more","url":"https://x.example.com/"}`, 201, nil)
}

// TestWebhookAllowList: an operator's --webhook-allow-cidr lets
// endpoints on those addresses register; others stay refused.
func TestWebhookAllowList(t *testing.T) {
	e, _, _ := newWebhookEnv(t, "10.0.0.0/8", "127.0.0.1")
	e.do("p", "POST", "/v1/webhooks", `{"name":"a","url":"http://10.20.30.40:8080/hook"}`, 201, nil)
	e.do("p", "POST", "/v1/webhooks", `{"name":"b","url":"http://localhost:8080/hook"}`, 201, nil)
	e.apiErr("p", "POST", "/v1/webhooks", `{"name":"c","url":"http://192.168.0.1/hook"}`, 400)
	e.apiErr("p", "POST", "/v1/webhooks", `{"name":"d","url":"http://169.254.169.254/"}`, 400)
}

// TestWebhookNeedsASealer: without a key to seal secrets with, creating
// and rotating are refused (503) rather than storing a secret in the
// clear.
func TestWebhookNeedsASealer(t *testing.T) {
	e := newEnv(t)
	got := e.apiErr("p", "POST", "/v1/webhooks", `{"name":"a","url":"https://a.example.com/"}`, 503)
	if !strings.Contains(got.Message, "no secret key") {
		t.Errorf("%+v", got)
	}
	if eps, _ := e.st.ListWebhookEndpoints(e.ctx, "p"); len(eps) != 0 {
		t.Errorf("an endpoint was stored: %+v", eps)
	}
}

// TestWebhookEventTypesAreTheReasons: every lifecycle reason is a valid
// event type, as is its CloudEvents type.
func TestWebhookEventTypesAreTheReasons(t *testing.T) {
	for _, r := range domain.EventReasons {
		got, err := eventTypes([]string{string(r), webhook.TypeOf(r)})
		if err != nil || len(got) != 1 || got[0] != r {
			t.Errorf("%s: %v, %v", r, got, err)
		}
	}
}

// TestPendingTestDeliveriesAreCapped: an endpoint holds at most
// MaxPendingTests test deliveries pending (a dead endpoint keeps each for
// a day): the next test is refused with a 409 that names the limit, and
// stores nothing; once one ends, a test is taken again.
func TestPendingTestDeliveriesAreCapped(t *testing.T) {
	e, _, _ := newWebhookEnv(t)
	var ep apiv1.WebhookEndpoint
	e.do("p", "POST", "/v1/webhooks", `{"name":"dead","url":"https://hooks.example.com/dead"}`, 201, &ep)
	path := "/v1/webhooks/" + ep.EndpointID + "/test"
	var first apiv1.WebhookDelivery
	for i := range MaxPendingTests {
		var d apiv1.WebhookDelivery
		e.do("p", "POST", path, "", 202, &d)
		if i == 0 {
			first = d
		}
	}
	er := e.apiErr("p", "POST", path, "", 409)
	if !strings.Contains(er.Message, fmt.Sprintf("%d test deliveries pending", MaxPendingTests)) {
		t.Errorf("refusal: %+v; want it to name the limit", er)
	}
	ds, err := e.st.ListWebhookDeliveries(e.ctx, store.DeliveryFilter{EndpointID: ep.EndpointID})
	if err != nil || len(ds) != MaxPendingTests {
		t.Fatalf("%d deliveries stored (%v); want %d", len(ds), err, MaxPendingTests)
	}
	// One ends: room for one more.
	for _, d := range ds {
		if d.MessageID == first.WebhookID {
			d.State, d.NextAt = domain.DeliveryDelivered, time.Time{}
			if err := e.st.Update(e.ctx, func(tx store.Tx) error { return tx.UpdateWebhookDelivery(e.ctx, d) }); err != nil {
				t.Fatal(err)
			}
		}
	}
	e.do("p", "POST", path, "", 202, nil)
	e.apiErr("p", "POST", path, "", 409)
}
