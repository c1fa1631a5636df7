// Package helm_test checks the Helm chart in deploy/helm/sparecap: it lints
// it, renders it with several value sets and checks what comes out, checks
// that bad values are refused, validates every rendered object with
// kubeconform against JSON schemas made from the test API server's OpenAPI
// document, applies every object to that API server with a server-side
// dry-run and strict field validation, and installs, upgrades and
// uninstalls a release there to see that the generated secrets are kept.
//
// helm and kubeconform are built from their Go modules (tools/helm,
// tools/kubeconform) by scripts/ensure-helm.sh, which `make test` runs; the
// API server is the one of internal/kube/kubeenv. The tests fail, never
// skip, when any of them is missing.
package helm_test

import (
	"bufio"
	"bytes"
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/sparecap/sparecap/internal/kube/kubeenv"
)

// env is one etcd and kube-apiserver for the package. Each test works in
// namespaces of its own.
var env *kubeenv.Env

// work holds helm's home directories and the kubeconfig of env.
var work string

func TestMain(m *testing.M) {
	os.Exit(run(m))
}

func run(m *testing.M) int {
	var err error
	if work, err = os.MkdirTemp("", "chart-test-"); err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	defer os.RemoveAll(work)
	env, err = kubeenv.Start(kubeenv.Options{})
	if err != nil {
		// Fail loudly: these tests never skip.
		fmt.Fprintln(os.Stderr, "cannot start the Kubernetes test environment:", err)
		return 1
	}
	defer env.Close()
	if err := os.WriteFile(filepath.Join(work, "kubeconfig"), env.Kubeconfig(), 0o600); err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	return m.Run()
}

const (
	// chartDir is the chart, relative to this package's directory (the
	// working directory of `go test`).
	chartDir = "sparecap"
	// repoRoot is the repository's root, likewise.
	repoRoot = "../.."
	// release is the release name of every rendering.
	release = "rel"
	// fullname is the chart's object name prefix for that release.
	fullname = "rel-sparecap"
)

var (
	toolsOnce  sync.Once
	toolsErr   error
	helmBin    string
	kubeconBin string
)

// tools finds helm and kubeconform where scripts/helm-paths.sh says
// scripts/ensure-helm.sh put them, and fails the test if either is missing.
func tools(t testing.TB) {
	t.Helper()
	toolsOnce.Do(func() {
		find := func(name string) string {
			if toolsErr != nil {
				return ""
			}
			out, err := exec.Command("bash", filepath.Join(repoRoot, "scripts", "helm-paths.sh"), name).Output()
			if err != nil {
				toolsErr = fmt.Errorf("scripts/helm-paths.sh %s: %v", name, err)
				return ""
			}
			p := strings.TrimSpace(string(out))
			fi, err := os.Stat(p)
			if err != nil || fi.IsDir() || fi.Mode()&0o111 == 0 {
				toolsErr = fmt.Errorf("%s is not at %s (%v); run `make test` or scripts/ensure-helm.sh, which build it", name, p, err)
				return ""
			}
			return p
		}
		helmBin = find("helm")
		kubeconBin = find("kubeconform")
	})
	if toolsErr != nil {
		t.Fatal(toolsErr)
	}
}

// kubeVersion is the Kubernetes version the test API server is built
// from (tools/kube-apiserver pins k8s.io/kubernetes): the charts are
// rendered for it. The server itself reports v0.0.0-master, as it is built
// without version stamps.
func kubeVersion(t testing.TB) string {
	t.Helper()
	data, err := os.ReadFile(filepath.Join(repoRoot, "tools", "kube-apiserver", "go.mod"))
	if err != nil {
		t.Fatal(err)
	}
	sc := bufio.NewScanner(bytes.NewReader(data))
	for sc.Scan() {
		f := strings.Fields(sc.Text())
		if len(f) >= 3 && f[0] == "require" && f[1] == "k8s.io/kubernetes" {
			return f[2]
		}
		if len(f) >= 2 && f[0] == "k8s.io/kubernetes" && strings.HasPrefix(f[1], "v") {
			return f[1]
		}
	}
	t.Fatal("tools/kube-apiserver/go.mod does not require k8s.io/kubernetes")
	return ""
}

// helm runs the helm CLI with its home directories in the test's work
// directory and the test API server as its cluster. It returns stdout and
// stderr, and an error if helm failed.
func helm(t testing.TB, args ...string) (stdout, stderr string, err error) {
	t.Helper()
	tools(t)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, helmBin, args...)
	cmd.Env = append(os.Environ(),
		"HELM_CACHE_HOME="+filepath.Join(work, "helm", "cache"),
		"HELM_CONFIG_HOME="+filepath.Join(work, "helm", "config"),
		"HELM_DATA_HOME="+filepath.Join(work, "helm", "data"),
		"KUBECONFIG="+filepath.Join(work, "kubeconfig"),
	)
	var out, errOut bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errOut
	err = cmd.Run()
	if err != nil {
		err = fmt.Errorf("helm %s: %w\n%s", strings.Join(args, " "), err, errOut.String())
	}
	return out.String(), errOut.String(), err
}

// valuesFile writes values (YAML) to a file for helm's -f and returns its
// path.
func valuesFile(t testing.TB, values string) string {
	t.Helper()
	f, err := os.CreateTemp(t.TempDir(), "values-*.yaml")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := f.WriteString(values); err != nil {
		t.Fatal(err)
	}
	if err := f.Close(); err != nil {
		t.Fatal(err)
	}
	return f.Name()
}
