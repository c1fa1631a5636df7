package api

import (
	"strings"
	"testing"

	"github.com/sparecap/sparecap/internal/apiv1"
)

func TestSetClusterWeight(t *testing.T) {
	e := newEnv(t)
	c := e.create("p", createBody)
	if c.Weight != 1 {
		t.Fatalf("a new cluster has weight %d, want 1", c.Weight)
	}
	path := "/v1/admin/clusters/" + c.ClusterID
	var got apiv1.Cluster
	e.do("admin", "PATCH", path, `{"weight":7}`, 200, &got)
	if got.Weight != 7 || got.ClusterID != c.ClusterID {
		t.Fatalf("%+v", got)
	}
	e.do("p", "GET", "/v1/clusters/"+c.ClusterID, "", 200, &got)
	if got.Weight != 7 {
		t.Fatalf("the tenant sees weight %d, want 7", got.Weight)
	}
	// Bounds are inclusive.
	e.do("admin", "PATCH", path, `{"weight":1000}`, 200, &got)
	e.do("admin", "PATCH", path, `{"weight":1}`, 200, &got)

	for _, tc := range []struct{ body, field, msg string }{
		{`{"weight":0}`, "weight", "weight must be an integer from 1 to 1000; got 0"},
		{`{"weight":-3}`, "weight", "got -3"},
		{`{"weight":1001}`, "weight", "got 1001"},
		{`{"weight":2.5}`, "weight", `field "weight" must be an integer, not a JSON`},
		{`{"weight":"3"}`, "weight", `field "weight" must be an integer, not a JSON`},
		{`{}`, "weight", "nothing to update; set weight"},
		{`{"weight":3,"num_gpus":8}`, "num_gpus", `unknown field "num_gpus"`},
		{``, "", "request body is empty"},
	} {
		got := e.apiErr("admin", "PATCH", path, tc.body, 400)
		if got.Code != apiv1.CodeInvalid || got.Field != tc.field || !strings.Contains(got.Message, tc.msg) {
			t.Errorf("%s: %+v, want field %q and %q", tc.body, got, tc.field, tc.msg)
		}
	}
	// Refused requests changed nothing.
	e.do("p", "GET", "/v1/clusters/"+c.ClusterID, "", 200, &got)
	if got.Weight != 1 {
		t.Fatalf("weight %d after refused requests, want 1", got.Weight)
	}

	if got := e.apiErr("admin", "PATCH", "/v1/admin/clusters/c-missing", `{"weight":2}`, 404); got.Message != `cluster "c-missing" not found` {
		t.Fatalf("%+v", got)
	}
	e.apiErr("p", "PATCH", path, `{"weight":2}`, 403)
	e.apiErr("", "PATCH", path, `{"weight":2}`, 401)
}
