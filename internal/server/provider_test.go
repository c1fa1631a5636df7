package server

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/sparecap/sparecap/internal/apiv1"
	"github.com/sparecap/sparecap/internal/client"
)

// TestExecProvider runs the server with an operator's provision hook and
// checks what each outcome looks like from the API: a node that joins, or a
// clear error on the cluster's node and a ProvisionFailed event.
func TestExecProvider(t *testing.T) {
	for _, tc := range []struct {
		name   string
		script string
		want   string // in the node's last_error and the event; "" joins
	}{
		{"success", `cat >/dev/null; echo '{"message":"booted"}'`, ""},
		{"failure", `cat >/dev/null; echo "no capacity in rack 7" >&2; exit 3`, "exited with status 3: no capacity in rack 7"},
		{"timeout", `cat >/dev/null; sleep 30`, "timed out after 1s"},
		{"malformed output", `cat >/dev/null; echo booted`, "printed malformed output"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ctx := context.Background()
			dir := t.TempDir()
			hook := filepath.Join(dir, "hook.sh")
			if err := os.WriteFile(hook, []byte("#!/bin/bash\n"+tc.script+"\n"), 0o755); err != nil {
				t.Fatal(err)
			}
			srv, err := Start(ctx, Options{Addr: "127.0.0.1:0", DataDir: dir, AdminToken: "adm-0123456789abcdef0123456789abcdef",
				MachineProvider: "exec", ProvisionHook: hook, ProvisionHookTimeout: time.Second})
			if err != nil {
				t.Fatal(err)
			}
			defer srv.Close()
			c := client.New(srv.URL, "adm-0123456789abcdef0123456789abcdef")
			if _, err := c.CreateProject(ctx, "team"); err != nil {
				t.Fatal(err)
			}
			cl, err := c.CreateCluster(ctx, apiv1.CreateClusterRequest{ProjectID: "team", ClusterName: "a", Region: "us-central-2",
				GPUType: "RTX_6000_PCI", ClusterType: "KUBERNETES", BillingType: "ON_DEMAND", NumGPUs: 8})
			if err != nil {
				t.Fatal(err)
			}
			deadline := time.Now().Add(20 * time.Second)
			for {
				err := check(ctx, c, cl.ClusterID, tc.want)
				if err == nil {
					break
				}
				if time.Now().After(deadline) {
					t.Fatal(err)
				}
				time.Sleep(100 * time.Millisecond)
			}
		})
	}
}

// TestExecProviderEnvironment: the hook gets the operator's extras and
// none of the server's own environment, its admin token least of all.
func TestExecProviderEnvironment(t *testing.T) {
	const token = "admin-token-from-the-environment"
	t.Setenv("SPARECAP_ADMIN_TOKEN", token)
	t.Setenv("SPARECAP_TEST_SERVER_SECRET", token)
	ctx := context.Background()
	dir := t.TempDir()
	hook := filepath.Join(dir, "hook.sh")
	envFile := filepath.Join(dir, "env")
	script := "#!/bin/bash\ncat >/dev/null\nenv > " + envFile + ".tmp && mv " + envFile + ".tmp " + envFile + "\necho '{}'\n"
	if err := os.WriteFile(hook, []byte(script), 0o755); err != nil {
		t.Fatal(err)
	}
	srv, err := Start(ctx, Options{Addr: "127.0.0.1:0", DataDir: dir, AdminToken: token,
		MachineProvider: "exec", ProvisionHook: hook, ProvisionHookTimeout: 10 * time.Second,
		ProvisionHookEnv: []string{"SITE=rack-7"}})
	if err != nil {
		t.Fatal(err)
	}
	defer srv.Close()
	c := client.New(srv.URL, token)
	if _, err := c.CreateProject(ctx, "team"); err != nil {
		t.Fatal(err)
	}
	if _, err := c.CreateCluster(ctx, apiv1.CreateClusterRequest{ProjectID: "team", ClusterName: "a", Region: "us-central-2",
		GPUType: "RTX_6000_PCI", ClusterType: "KUBERNETES", BillingType: "ON_DEMAND", NumGPUs: 8}); err != nil {
		t.Fatal(err)
	}
	var env []byte
	for deadline := time.Now().Add(20 * time.Second); ; time.Sleep(50 * time.Millisecond) {
		if env, err = os.ReadFile(envFile); err == nil {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("the hook did not run")
		}
	}
	if strings.Contains(string(env), token) {
		t.Fatalf("the hook saw the server's admin token:\n%s", env)
	}
	for _, want := range []string{"\nSITE=rack-7\n", "\nPATH=", "\nSPARECAP_ACTION=provision\n"} {
		if !strings.Contains("\n"+string(env), want) {
			t.Errorf("the hook's environment lacks %q:\n%s", strings.TrimSpace(want), env)
		}
	}
}

func check(ctx context.Context, c *client.Client, id, want string) error {
	cl, err := c.GetCluster(ctx, id)
	if err != nil {
		return err
	}
	if len(cl.GPUWorkerNodes) != 1 {
		return fmt.Errorf("nodes %+v", cl.GPUWorkerNodes)
	}
	n := cl.GPUWorkerNodes[0]
	if want == "" {
		if n.ReadyAt == nil || n.LastError != "" {
			return fmt.Errorf("node %+v, want ready", n)
		}
		return nil
	}
	if n.ReadyAt != nil || !strings.Contains(n.LastError, want) || !strings.Contains(n.LastError, "hook") {
		return fmt.Errorf("node %+v, want last_error with %q", n, want)
	}
	evs, err := c.ListEvents(ctx, id, "", 0)
	if err != nil {
		return err
	}
	for _, e := range evs.Events {
		if e.Reason == "ProvisionFailed" && strings.Contains(e.Message, want) && e.NodeName == n.NodeName {
			return nil
		}
	}
	return fmt.Errorf("no ProvisionFailed event with %q: %+v", want, evs.Events)
}
