package console_test

import (
	"context"
	"net/http"
	"net/url"
	"strings"
	"testing"
	"time"
)

// A booking from the create form: a bad start is refused next to its
// field; a good one makes a Scheduled cluster whose page says when it is
// booked from, and the node its booking claims shows when its notice
// comes on its own cluster's page.
func TestBookAheadFromTheConsole(t *testing.T) {
	e := newEnv(t)
	id := e.readyCluster() // one standard node, one preemptible, one machine free
	b := e.browser()
	csrf := b.signIn(e.tokens["p"])
	form := url.Values{"csrf": {csrf}, "cluster_name": {"monday"}, "region_gpu": {"us-central-2/RTX_6000_PCI"},
		"cluster_type": {"KUBERNETES"}, "billing_type": {"ON_DEMAND"}, "num_gpus": {"16"}, "starts_at": {"monday morning"}}
	status, body, _ := b.post("/console/clusters", form)
	if status != http.StatusBadRequest || !strings.Contains(body, `id="err-starts_at"`) {
		t.Fatalf("a bad start: %d\n%s", status, body)
	}
	start := e.clk.Now().Add(6 * time.Hour).UTC().Truncate(time.Second).Format(time.RFC3339)
	form.Set("starts_at", start)
	status, _, h := b.post("/console/clusters", form)
	if status != http.StatusSeeOther {
		t.Fatalf("book: %d", status)
	}
	_, page, _ := b.get(h.Get("Location"))
	if !strings.Contains(page, "Scheduled") || !strings.Contains(page, `booked from <time datetime="`+start+`"`) {
		t.Fatalf("the booking's page does not say it is booked from %s", start)
	}
	e.ctrl.Turn(context.Background())
	_, page, _ = b.get("/console/clusters/" + id)
	if !strings.Contains(page, `class="preempt-at"`) {
		t.Fatal("the claimed node's notice time is not on its cluster's page")
	}
}
