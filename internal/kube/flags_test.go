package kube_test

import (
	"testing"

	"github.com/sparecap/sparecap/internal/kube"
)

func TestParseTaint(t *testing.T) {
	good := map[string]kube.Taint{
		"sparecap.dev/preemptible=true:NoSchedule": {Key: "sparecap.dev/preemptible", Value: "true", Effect: "NoSchedule"},
		"gpu:NoExecute":                      {Key: "gpu", Effect: "NoExecute"},
		"example.com/spot=:PreferNoSchedule": {Key: "example.com/spot", Effect: "PreferNoSchedule"},
	}
	for in, want := range good {
		got, err := kube.ParseTaint(in)
		if err != nil || got != want {
			t.Errorf("ParseTaint(%q) = %+v, %v", in, got, err)
		}
	}
	for _, in := range []string{"", "gpu", "gpu=x", "gpu:Sometimes", "bad key!:NoSchedule", "k=bad value:NoSchedule"} {
		if _, err := kube.ParseTaint(in); err == nil {
			t.Errorf("ParseTaint(%q) accepted", in)
		}
	}
}

func TestParseLabel(t *testing.T) {
	if k, v, err := kube.ParseLabel("example.com/pool=spare"); err != nil || k != "example.com/pool" || v != "spare" {
		t.Fatalf("%q %q %v", k, v, err)
	}
	for _, in := range []string{"", "novalue", "=x", "bad key=x", "k=bad value"} {
		if _, _, err := kube.ParseLabel(in); err == nil {
			t.Errorf("ParseLabel(%q) accepted", in)
		}
	}
}
