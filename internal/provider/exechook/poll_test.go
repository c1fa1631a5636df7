package exechook

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"github.com/sparecap/sparecap/internal/domain"
	"github.com/sparecap/sparecap/internal/driver"
)

// Polling: a hook runs in the background, one at a time per machine, and
// its result is reported to the calls that poll it.

const gatedBody = `echo "$1" >> "$HOOK_DIR/runs.$1.$2"
while [ ! -e "$HOOK_DIR/gate" ]; do sleep 0.01; done
echo '{}'
`

func TestPolling(t *testing.T) {
	p, _, dir := setup(t, gatedBody, Config{})
	runs := filepath.Join(dir, "runs.provision.m-1")
	eventuallyRuns := func(n int) {
		eventually(t, fmt.Sprintf("%d runs", n), func() bool { return lines(runs) == n })
	}

	if done, err := p.Prepare(context.Background(), testMachine, testSpec); done || err != nil {
		t.Fatalf("first call = %v, %v", done, err)
	}
	eventuallyRuns(1)
	for range 5 {
		if done, err := p.Prepare(context.Background(), testMachine, testSpec); done || err != nil {
			t.Fatalf("call while running = %v, %v", done, err)
		}
	}
	if err := os.WriteFile(filepath.Join(dir, "gate"), nil, 0o644); err != nil {
		t.Fatal(err)
	}
	if err := until(prepare(p, testMachine, testSpec)); err != nil {
		t.Fatal(err)
	}
	if n := lines(runs); n != 1 {
		t.Errorf("hook ran %d times, want 1", n)
	}
	// The success stays: asked again (the controller does on every turn
	// until the node registers), it is done and the hook does not run.
	for range 3 {
		if done, err := p.Prepare(context.Background(), testMachine, testSpec); !done || err != nil {
			t.Fatalf("call after success = %v, %v; want done", done, err)
		}
	}
	if n := lines(runs); n != 1 {
		t.Errorf("hook ran %d times, want 1", n)
	}
	// Another node on the machine runs it anew.
	other := testSpec
	other.NodeName = "gpu-preemptible-dp-4"
	if err := until(prepare(p, testMachine, other)); err != nil {
		t.Fatal(err)
	}
	eventuallyRuns(2)
}

func TestRetryAfterFailure(t *testing.T) {
	p, _, dir := setup(t, `n=$(( $(cat "$HOOK_DIR/count" 2>/dev/null || echo 0) + 1 ))
echo $n > "$HOOK_DIR/count"
if [ $n -eq 1 ]; then echo "first attempt fails" >&2; exit 1; fi
echo '{}'
`, Config{})
	err := until(wipe(p, testMachine, "n"))
	if err == nil || !strings.Contains(err.Error(), "first attempt fails") {
		t.Fatalf("first run: %v", err)
	}
	if done, err := p.Wipe(context.Background(), testMachine, "c-4", "n"); done || err != nil {
		t.Fatalf("call after failure = %v, %v; want a new run", done, err)
	}
	if err := until(wipe(p, testMachine, "n")); err != nil {
		t.Fatal(err)
	}
	if c := strings.TrimSpace(readFile(t, filepath.Join(dir, "count"))); c != "2" {
		t.Errorf("hook ran %s times, want 2", c)
	}
}

// The hook outlives the call that started it: its context is not the
// caller's.
func TestCallerContext(t *testing.T) {
	p, _, dir := setup(t, gatedBody, Config{})
	ctx, cancel := context.WithCancel(context.Background())
	if done, err := p.Prepare(ctx, testMachine, testSpec); done || err != nil {
		t.Fatalf("Prepare = %v, %v", done, err)
	}
	cancel()
	if _, err := p.Prepare(ctx, testMachine, testSpec); !errors.Is(err, context.Canceled) {
		t.Errorf("Prepare with a cancelled context: %v", err)
	}
	eventually(t, "hook starts", func() bool { return exists(filepath.Join(dir, "runs.provision.m-1")) })
	if err := os.WriteFile(filepath.Join(dir, "gate"), nil, 0o644); err != nil {
		t.Fatal(err)
	}
	if err := until(prepare(p, testMachine, testSpec)); err != nil {
		t.Fatal(err)
	}
}

func TestOneHookPerMachine(t *testing.T) {
	p, _, dir := setup(t, gatedBody, Config{})
	provisions := filepath.Join(dir, "runs.provision.m-1")
	wipes := filepath.Join(dir, "runs.deprovision.m-1")

	if done, err := p.Prepare(context.Background(), testMachine, testSpec); done || err != nil {
		t.Fatalf("Prepare = %v, %v", done, err)
	}
	eventually(t, "provision starts", func() bool { return exists(provisions) })
	// The wipe waits for the running provision.
	for range 5 {
		if done, err := p.Wipe(context.Background(), testMachine, "c-4", testSpec.NodeName); done || err != nil {
			t.Fatalf("Wipe = %v, %v", done, err)
		}
	}
	if exists(wipes) {
		t.Fatal("deprovision started while provision was running")
	}
	// Another machine is not held up.
	other := domain.Machine{ID: "m-2"}
	if _, err := p.Wipe(context.Background(), other, "c-4", "x"); err != nil {
		t.Fatal(err)
	}
	eventually(t, "other machine's hook starts", func() bool { return exists(filepath.Join(dir, "runs.deprovision.m-2")) })

	if err := os.WriteFile(filepath.Join(dir, "gate"), nil, 0o644); err != nil {
		t.Fatal(err)
	}
	// The wipe runs once the provision has finished; the provision's
	// result, never collected, is dropped then.
	if err := until(wipe(p, testMachine, testSpec.NodeName)); err != nil {
		t.Fatal(err)
	}
	if done, err := p.Prepare(context.Background(), testMachine, testSpec); done || err != nil {
		t.Fatalf("Prepare after the wipe = %v, %v; want a new run", done, err)
	}
	if err := until(prepare(p, testMachine, testSpec)); err != nil {
		t.Fatal(err)
	}
	if n, w := lines(provisions), lines(wipes); n != 2 || w != 1 {
		t.Errorf("%d provisions and %d deprovisions, want 2 and 1", n, w)
	}
}

func TestConcurrentMachines(t *testing.T) {
	p, _, dir := setup(t, `echo "$3" >> "$HOOK_DIR/runs.$1.$2"
sleep 0.$((RANDOM % 5))
echo '{}'
`, Config{})
	const machines = 16
	var wg sync.WaitGroup
	errs := make(chan error, machines)
	for i := range machines {
		m := domain.Machine{ID: fmt.Sprintf("m-%d", i), GPUs: 8}
		spec := driver.NodeSpec{ClusterID: fmt.Sprintf("c-%d", i%3), NodeName: fmt.Sprintf("gpu-dp-%d", i), MachineID: m.ID}
		wg.Go(func() {
			if err := until(prepare(p, m, spec)); err != nil {
				errs <- err
				return
			}
			if err := until(func() (bool, error) { return p.Wipe(context.Background(), m, spec.ClusterID, spec.NodeName) }); err != nil {
				errs <- err
			}
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
	for i := range machines {
		cluster := fmt.Sprintf("c-%d\n", i%3)
		for _, action := range []string{"provision", "deprovision"} {
			// Each ran once, and the wipe was told the cluster.
			if got := readFile(t, filepath.Join(dir, fmt.Sprintf("runs.%s.m-%d", action, i))); got != cluster {
				t.Errorf("m-%d %s runs: %q, want %q", i, action, got, cluster)
			}
		}
	}
}
