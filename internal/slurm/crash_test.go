package slurm_test

import (
	"bytes"
	"context"
	"fmt"
	"io/fs"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/sparecap/sparecap/internal/apiv1"
	"github.com/sparecap/sparecap/internal/client"
)

// TestKilledServerLeavesOnlyItsLiveCopy: the Slurm commands' copy of an
// attached slurm.conf lives in the data directory, holds only what they
// need (never the tenant's AccountingStoragePass), and a server killed
// with SIGKILL and started again leaves the live copy alone: nothing in
// the temporary directory, the killed server's copy gone.
func TestKilledServerLeavesOnlyItsLiveCopy(t *testing.T) {
	bin := t.TempDir()
	buildBinary(t, bin)
	data, tmp, home := t.TempDir(), t.TempDir(), t.TempDir()
	const secret = "db-password-6c1d0e"
	conf := string(mustRead(t, env.Conf)) + "AccountingStoragePass=" + secret + "\n"
	const token = "sc_slurm_crash_admin_token_0123456789"
	srv := startSparecap(t, filepath.Join(bin, "sparecap"), data, tmp, home, token)
	c := client.New(srv.url, token)
	ctx := context.Background()
	if _, err := c.CreateProject(ctx, "p"); err != nil {
		t.Fatal(err)
	}
	cl, err := c.CreateCluster(ctx, apiv1.CreateClusterRequest{ClusterName: "hpc", Region: region, GPUType: gpu,
		ClusterType: "SLURM", NumGPUs: 8, ProjectID: "p"})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := c.AttachSlurm(ctx, cl.ClusterID, []byte(conf)); err != nil {
		t.Fatal(err)
	}
	first := waitCopies(t, data, 1)[0] // the driver runs: the controller adds the cluster's node
	checkCopy(t, first, secret)
	srv.kill()
	srv = startSparecap(t, filepath.Join(bin, "sparecap"), data, tmp, home, token)
	defer srv.kill()
	copies := waitCopies(t, data, 1) // the term starts the attached cluster's driver
	if copies[0] == first {
		t.Errorf("the restarted server uses the killed one's copy %s", first)
	}
	checkCopy(t, copies[0], secret)
	filepath.WalkDir(tmp, func(path string, d fs.DirEntry, err error) error {
		if err == nil && path != tmp {
			b, _ := os.ReadFile(path)
			if strings.Contains(path, "slurm") || bytes.Contains(b, []byte(secret)) || bytes.Contains(b, []byte("SlurmctldHost")) {
				t.Errorf("%s in the server's TMPDIR", path)
			}
		}
		return nil
	})
}

// waitCopies waits until the data directory holds n copies of a
// slurm.conf, and no more, and returns them.
func waitCopies(t *testing.T, data string, n int) []string {
	t.Helper()
	var copies []string
	eventually(t, 30*time.Second, func() error {
		copies, _ = filepath.Glob(filepath.Join(data, "slurm", "*", "slurm.conf"))
		if len(copies) != n {
			return fmt.Errorf("%d copies of the slurm.conf in the data directory, want %d: %v", len(copies), n, copies)
		}
		return nil
	})
	return copies
}

// checkCopy: owner only, and without the tenant's secret.
func checkCopy(t *testing.T, path, secret string) {
	t.Helper()
	b := mustRead(t, path)
	if bytes.Contains(b, []byte(secret)) || bytes.Contains(b, []byte("AccountingStoragePass")) {
		t.Errorf("the copy %s holds the tenant's AccountingStoragePass:\n%s", path, b)
	}
	for _, p := range []string{path, filepath.Dir(path), filepath.Dir(filepath.Dir(path))} {
		if fi, err := os.Stat(p); err != nil || fi.Mode().Perm()&0o077 != 0 {
			t.Errorf("%s: %v %v, want owner only", p, fi.Mode(), err)
		}
	}
}

// sparecapProcess is a `sparecap server` the test runs.
type sparecapProcess struct {
	url  string
	cmd  *exec.Cmd
	done chan struct{}
	out  bytes.Buffer
}

// startSparecap starts `sparecap server` on data with tmp as its TMPDIR,
// for the Slurm of env, and waits until it is ready.
func startSparecap(t *testing.T, binary, data, tmp, home, token string) *sparecapProcess {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := l.Addr().String()
	l.Close()
	p := &sparecapProcess{url: "http://" + addr, done: make(chan struct{})}
	p.cmd = exec.Command(binary, "server", "--addr", addr, "--data-dir", data, "--provision-time", "100ms",
		"--slurm-poll", "200ms", "--slurm-auth-socket-dir", filepath.Dir(env.MungeSocket()))
	p.cmd.Env = []string{"PATH=" + os.Getenv("PATH"), "HOME=" + home, "TMPDIR=" + tmp,
		"SPARECAP_ADMIN_TOKEN=" + token, "SPARECAP_CONFIG=" + filepath.Join(home, "config.json")}
	p.cmd.Stdout, p.cmd.Stderr = &p.out, &p.out
	p.cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	if err := p.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	go func() { p.cmd.Wait(); close(p.done) }()
	t.Cleanup(func() {
		p.kill()
		if t.Failed() {
			t.Logf("sparecap server output:\n%s", p.out.String())
		}
	})
	c := client.New(p.url, "")
	eventually(t, 30*time.Second, func() error {
		ctx, cancel := context.WithTimeout(context.Background(), time.Second)
		defer cancel()
		return c.Readyz(ctx)
	})
	return p
}

// kill SIGKILLs the server, as a crash does.
func (p *sparecapProcess) kill() {
	select {
	case <-p.done:
		return
	default:
	}
	syscall.Kill(-p.cmd.Process.Pid, syscall.SIGKILL)
	<-p.done
}
