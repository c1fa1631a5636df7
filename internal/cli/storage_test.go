package cli

import (
	"fmt"
	"testing"

	"github.com/sparecap/sparecap/internal/apiv1"
)

func TestStorageCommands(t *testing.T) {
	f := newFakeAPI(t)
	f.handle("GET /v1/storage", 200, apiv1.Storage{CountedAt: t0, Projects: []apiv1.ProjectStorage{{ProjectID: "team-ml",
		QuotaBytes: 1 << 30, UsedBytes: 3 << 28, Tables: []apiv1.StorageTable{{Table: "work_spans", Rows: 9, Bytes: 3 << 28}}}}})
	f.handle("PUT /v1/admin/projects/team-ml/storage-quota", 204, nil)
	r := f.run("storage", "--project", "team-ml")
	if r.err != nil {
		t.Fatal(r.err)
	}
	mustContain(t, "storage", r.stdout, "team-ml", "768.0 MiB", "1.0 GiB", "75.0", "work_spans 768.0 MiB")
	if q := f.only("GET", "/v1/storage")[0].Query; q != "project_id=team-ml" {
		t.Errorf("query %q", q)
	}
	r = f.run("projects", "storage-quota", "team-ml", "4294967296")
	if r.err != nil {
		t.Fatal(r.err)
	}
	mustContain(t, "quota", r.stdout, "4.0 GiB")
	if body := fmt.Sprint(f.only("PUT", "/v1/admin/projects/team-ml/storage-quota")[0].Body); body != "map[bytes:4.294967296e+09]" {
		t.Errorf("request %s", body)
	}
	if r = f.run("projects", "storage-quota", "team-ml", "lots"); r.err == nil {
		t.Error("a quota that is not a number was sent")
	}
}
