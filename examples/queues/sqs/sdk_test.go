package main

import (
	"os/exec"
	"path/filepath"
	"testing"
)

// TestBuildsWithCurrentSDK: the recipe builds unchanged with the SDK a
// tenant gets today (../sqs-current-sdk.mod: service/sqs v1.53.0). That
// SDK speaks only SQS's JSON protocol, and goaws only the query protocol,
// so TestReturnAtNotice runs the recipe built with go.mod's SDK of
// November 2023 (service/sqs v1.26.0); the calls are the same.
func TestBuildsWithCurrentSDK(t *testing.T) {
	cmd := exec.Command("go", "build", "-modfile=../sqs-current-sdk.mod", "-o", filepath.Join(t.TempDir(), "worker"), ".")
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("the recipe does not build with the current SDK: %v\n%s", err, out)
	}
}
