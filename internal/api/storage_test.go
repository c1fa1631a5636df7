package api

import (
	"fmt"
	"strings"
	"testing"

	"github.com/sparecap/sparecap/internal/apiv1"
	"github.com/sparecap/sparecap/internal/domain"
	"github.com/sparecap/sparecap/internal/quota"
	"github.com/sparecap/sparecap/internal/store"
)

// TestStorageQuota: each project sees its own storage, the operator
// every project's and sets quotas; at its quota a project's new budgets
// are refused with a clear error, its clusters get one
// StorageQuotaReached event, and other projects write on.
func TestStorageQuota(t *testing.T) {
	e := newEnv(t)
	e.create("p", createBody)
	k := &quota.Keeper{Store: e.st, Default: 1 << 20, Reached: e.api.QuotaReached}
	e.api.Quota = k
	if err := k.Count(e.ctx, e.clk.Now()); err != nil {
		t.Fatal(err)
	}
	var mine apiv1.Storage
	e.do("p", "GET", "/v1/storage", "", 200, &mine)
	if len(mine.Projects) != 1 || mine.Projects[0].ProjectID != "p" || mine.Projects[0].QuotaBytes != 1<<20 {
		t.Fatalf("p's storage: %+v", mine)
	}
	e.apiErr("p", "GET", "/v1/storage?project_id=q", "", 404)
	var all apiv1.Storage
	e.do("admin", "GET", "/v1/storage", "", 200, &all)
	if len(all.Projects) != 3 || all.Projects[1].ProjectID != "p" || all.Projects[1].Tables[0].Table != "tokens" {
		t.Fatalf("the operator sees %+v (acme, p and q)", all)
	}
	// Setting quotas: bounds checked, unknown projects, operators only.
	for body, code := range map[string]int{`{"bytes":-1}`: 400, `{"bytes":1000}`: 400, `{"bytes":"big"}`: 400} {
		e.apiErr("admin", "PUT", "/v1/admin/projects/p/storage-quota", body, code)
	}
	e.apiErr("admin", "PUT", "/v1/admin/projects/nope/storage-quota", `{"bytes":0}`, 404)
	e.apiErr("p", "PUT", "/v1/admin/projects/p/storage-quota", `{"bytes":0}`, 403)
	e.do("admin", "PUT", "/v1/admin/projects/q/storage-quota", `{"bytes":2097152}`, 204, nil)
	e.do("admin", "GET", "/v1/storage?project_id=q", "", 200, &all)
	if all.Projects[0].QuotaBytes != 2097152 {
		t.Fatalf("q's quota after setting it: %+v", all.Projects[0])
	}
	// p is at its quota: a span-heavy month filled it.
	k.Admit("p", 1<<20-200)
	e.do("p", "POST", "/v1/budgets", `{"name":"one","amount":"10"}`, 201, nil)
	got := e.apiErr("p", "POST", "/v1/budgets", `{"name":"two","amount":"10"}`, 403)
	if got.Code != apiv1.CodeQuotaExceeded || !strings.Contains(got.Message, "storage quota") || len(got.Message) > 1024 {
		t.Errorf("refusal: %+v", got)
	}
	e.apiErr("p", "POST", "/v1/budgets", `{"name":"three","amount":"10"}`, 403)
	e.do("q", "POST", "/v1/budgets", `{"name":"two","amount":"10"}`, 201, nil)
	events, err := e.st.ListEvents(e.ctx, store.EventFilter{})
	if err != nil {
		t.Fatal(err)
	}
	n := 0
	for _, ev := range events {
		if ev.Reason == domain.ReasonStorageQuotaReached {
			n++
			if !strings.Contains(ev.Message, fmt.Sprint(1<<20)) {
				t.Errorf("event message %q", ev.Message)
			}
		}
	}
	if n != 1 {
		t.Errorf("%d StorageQuotaReached events, want one (p has one cluster; told once)", n)
	}
}
