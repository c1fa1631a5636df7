package kubeenv

import (
	"bufio"
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
)

const module = "github.com/sparecap/sparecap"

// hint is appended to every "binary missing" error: the integration tests
// never skip, so the error has to say how to get what they need.
const hint = "run `make test` or scripts/ensure-kube.sh"

// A binary the tests run, built by scripts/ensure-kube.sh from the module
// pinned in tools/<tools>.
type binary struct {
	name   string // also the file name's prefix in the cache
	env    string // overrides the cached build
	tools  string // directory under tools/
	module string // the module that directory pins
	// recipe names what of the build go.sum does not say (version stamps
	// in the ldflags), hashed after go.sum as scripts/tool-path.sh does.
	recipe string
}

var (
	apiServerBin         = binary{"kube-apiserver", "SPARECAP_KUBE_APISERVER", "kube-apiserver", "k8s.io/kubernetes", "version-stamped"}
	controllerManagerBin = binary{"kube-controller-manager", "SPARECAP_KUBE_CONTROLLER_MANAGER", "kube-apiserver", "k8s.io/kubernetes", "version-stamped"}
	schedulerBin         = binary{"kube-scheduler", "SPARECAP_KUBE_SCHEDULER", "kube-apiserver", "k8s.io/kubernetes", "version-stamped"}
	kwokBin              = binary{"kwok", "SPARECAP_KWOK", "kwok", "sigs.k8s.io/kwok", ""}
	etcdBin              = binary{"etcd", "SPARECAP_ETCD", "etcd", "go.etcd.io/etcd/server/v3", ""}
	// JobSet and KubeRay at the versions the pinned Kueue requires (which
	// scripts/ensure-kube.sh checks), each built with its own module's
	// requirements.
	kueueBin   = binary{"kueue", "SPARECAP_KUEUE", "kueue", "sigs.k8s.io/kueue", ""}
	jobsetBin  = binary{"jobset", "SPARECAP_JOBSET", "jobset", "sigs.k8s.io/jobset", ""}
	kuberayBin = binary{"kuberay-operator", "SPARECAP_KUBERAY", "kuberay", "github.com/ray-project/kuberay/ray-operator", ""}
	// Not a binary: the directory of CRDs and webhook manifests that
	// scripts/ensure-kube.sh copies from the sources of tools/kueue's
	// modules (see manifestFiles).
	manifestsDir = binary{"kueue-manifests", "SPARECAP_KUEUE_MANIFESTS", "kueue", "sigs.k8s.io/kueue", ""}
)

// APIServerPath returns the kube-apiserver binary the tests run:
// $SPARECAP_KUBE_APISERVER if set, else the cached build at the path
// `scripts/kube-paths.sh kube-apiserver` prints (the two must agree, so the
// naming below mirrors that script exactly).
func APIServerPath() (string, error) { return apiServerBin.path() }

// ControllerManagerPath returns the kube-controller-manager binary of the
// mini cluster: $SPARECAP_KUBE_CONTROLLER_MANAGER, else the cached build
// (same version and key as kube-apiserver).
func ControllerManagerPath() (string, error) { return controllerManagerBin.path() }

// SchedulerPath returns the kube-scheduler binary of the mini cluster:
// $SPARECAP_KUBE_SCHEDULER, else the cached build.
func SchedulerPath() (string, error) { return schedulerBin.path() }

// KwokPath returns the kwok binary of the mini cluster: $SPARECAP_KWOK,
// else the cached build from tools/kwok.
func KwokPath() (string, error) { return kwokBin.path() }

// KueuePath returns Kueue's manager (sigs.k8s.io/kueue/cmd/kueue):
// $SPARECAP_KUEUE, else the cached build from tools/kueue.
func KueuePath() (string, error) { return kueueBin.path() }

// JobSetPath returns JobSet's controller manager: $SPARECAP_JOBSET, else
// the cached build from tools/jobset.
func JobSetPath() (string, error) { return jobsetBin.path() }

// KubeRayPath returns KubeRay's operator: $SPARECAP_KUBERAY, else the
// cached build from tools/kuberay.
func KubeRayPath() (string, error) { return kuberayBin.path() }

// KueueManifestsDir returns the directory of the CRDs and webhook
// manifests that Options.Kueue, JobSet and KubeRay install:
// $SPARECAP_KUEUE_MANIFESTS, else the copy scripts/ensure-kube.sh made in
// the cache. It must hold every file the options use (manifestFiles).
func KueueManifestsDir() (string, error) {
	p, err := manifestsDir.cached()
	if err != nil {
		return "", err
	}
	for _, f := range manifestFiles {
		if _, err := os.Stat(filepath.Join(p, f)); err != nil {
			return "", fmt.Errorf("kubeenv: %s lacks %s (%w); %s", p, f, err, hint)
		}
	}
	return p, nil
}

func (b binary) path() (string, error) {
	p, err := b.cached()
	if err != nil {
		return "", err
	}
	return checkExecutable(p)
}

// cached returns $env if set, else where the build script puts b.
func (b binary) cached() (string, error) {
	if p := os.Getenv(b.env); p != "" {
		return p, nil
	}
	root, err := repoRoot(b.env)
	if err != nil {
		return "", err
	}
	cache, err := cacheDir()
	if err != nil {
		return "", err
	}
	tools := filepath.Join(root, "tools", b.tools)
	version, err := pinnedVersion(filepath.Join(tools, "go.mod"), b.module)
	if err != nil {
		return "", err
	}
	sum, err := os.ReadFile(filepath.Join(tools, "go.sum"))
	if err != nil {
		return "", err
	}
	h := sha256.Sum256(append(sum, b.recipe...))
	return filepath.Join(cache, b.name+"-"+version+"-"+hex.EncodeToString(h[:])[:12]), nil
}

// etcdPath returns the etcd the mini cluster runs: $SPARECAP_ETCD, else
// the cached build from tools/etcd (3.5 or later, which kube-apiserver's
// watch cache needs).
func etcdPath() (string, error) { return etcdBin.path() }

func checkExecutable(p string) (string, error) {
	fi, err := os.Stat(p)
	if err != nil {
		return "", fmt.Errorf("%w; %s", err, hint)
	}
	if fi.IsDir() || fi.Mode()&0o111 == 0 {
		return "", fmt.Errorf("%s is not an executable file; %s", p, hint)
	}
	return p, nil
}

// cacheDir mirrors ${SPARECAP_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/sparecap}.
func cacheDir() (string, error) {
	if d := os.Getenv("SPARECAP_CACHE"); d != "" {
		return d, nil
	}
	if d := os.Getenv("XDG_CACHE_HOME"); d != "" {
		return filepath.Join(d, "sparecap"), nil
	}
	home := os.Getenv("HOME")
	if home == "" {
		return "", errors.New("kubeenv: none of $SPARECAP_CACHE, $XDG_CACHE_HOME, $HOME is set")
	}
	return filepath.Join(home, ".cache", "sparecap"), nil
}

// repoRoot walks up from the working directory (a package directory under
// `go test`) to the go.mod of the main module, skipping nested modules such
// as tools/kube-apiserver. env names the variable that would spare the
// lookup, for the error message.
func repoRoot(env string) (string, error) {
	dir, err := os.Getwd()
	if err != nil {
		return "", err
	}
	for {
		if data, err := os.ReadFile(filepath.Join(dir, "go.mod")); err == nil && modulePath(data) == module {
			return dir, nil
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			return "", fmt.Errorf("kubeenv: no go.mod of module %s above the working directory; set $%s", module, env)
		}
		dir = parent
	}
}

func modulePath(gomod []byte) string {
	for line := range strings.Lines(string(gomod)) {
		if f := strings.Fields(line); len(f) == 2 && f[0] == "module" {
			return strings.Trim(f[1], `"`)
		}
	}
	return ""
}

// pinnedVersion reads the version of module that gomod requires, on a
// `require MODULE vX` line or a `MODULE vX` line of a require block, like
// the script's awk.
func pinnedVersion(gomod, module string) (string, error) {
	data, err := os.ReadFile(gomod)
	if err != nil {
		return "", err
	}
	sc := bufio.NewScanner(bytes.NewReader(data))
	for sc.Scan() {
		f := strings.Fields(sc.Text())
		if len(f) >= 3 && f[0] == "require" && f[1] == module {
			return f[2], nil
		}
		if len(f) >= 2 && f[0] == module && strings.HasPrefix(f[1], "v") {
			return f[1], nil
		}
	}
	return "", fmt.Errorf("kubeenv: %s does not require %s", gomod, module)
}
