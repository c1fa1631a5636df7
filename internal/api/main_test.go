package api

import (
	"fmt"
	"os"
	"slices"
	"testing"

	"github.com/sparecap/sparecap/internal/openapi/contracttest"
)

// TestMain runs the package's tests, whose servers check every exchange
// against the OpenAPI document (newEnv), then fails the run if an
// operation of the document was never exercised: each is called by some
// test and checked against the contract.
func TestMain(m *testing.M) {
	code := m.Run()
	if code == 0 && fullRun() {
		if missed := unexercised(); len(missed) > 0 {
			fmt.Printf("FAIL: operations no test called against the contract: %v\n", missed)
			code = 1
		}
	}
	os.Exit(code)
}

// fullRun reports whether every test ran (no -run filter).
func fullRun() bool {
	return !slices.ContainsFunc(os.Args, func(a string) bool { return a == "-test.run" || len(a) > 10 && a[:10] == "-test.run=" })
}

func unexercised() []string {
	c, err := contracttest.Load()
	if err != nil {
		return []string{err.Error()}
	}
	var out []string
	seen := c.Seen()
	if c.Events() == 0 {
		out = append(out, "(no event of a stream was checked)")
	}
	for _, op := range Contract() {
		if seen[op.ID] == 0 {
			out = append(out, op.ID)
		}
	}
	return out
}
