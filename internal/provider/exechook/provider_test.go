package exechook

import (
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/sparecap/sparecap/internal/domain"
	"github.com/sparecap/sparecap/internal/driver"
	"github.com/sparecap/sparecap/internal/driver/providertest"
)

// siteHook is a hook that behaves like a site's: it reads its input, takes
// a moment to image or wipe the machine, records what the machine serves
// (machine.<id>: the action, cluster and node last done), and does nothing
// twice: asked again for what the machine already is, it says so at once.
// It cannot reach the machines of nodes named fail-*.
const siteHook = `input=$(cat)
case "$input" in
*"\"id\":\"$SPARECAP_MACHINE_ID\""*) ;;
*) echo "the input names another machine: $input" >&2; exit 2 ;;
esac
echo "$SPARECAP_ACTION $SPARECAP_CLUSTER_ID $SPARECAP_NODE_NAME" >> "$HOOK_DIR/runs.$SPARECAP_MACHINE_ID"
case "$SPARECAP_NODE_NAME" in
fail-*) echo "cannot reach the BMC of $SPARECAP_MACHINE_ID" >&2; exit 3 ;;
esac
state="$HOOK_DIR/machine.$SPARECAP_MACHINE_ID"
want="$SPARECAP_ACTION $SPARECAP_CLUSTER_ID $SPARECAP_NODE_NAME"
if [ "$(cat "$state" 2>/dev/null)" = "$want" ]; then
	echo '{"message": "already done"}'
	exit 0
fi
sleep 0.3
echo "$want" > "$state.new" && mv "$state.new" "$state"
echo '{}'
`

// TestProvider runs the machine provider suite that the simulated fleet
// and the register provider pass, with a hook like a site's.
func TestProvider(t *testing.T) {
	p, _, dir := setup(t, siteHook, Config{})
	providertest.Run(t, &providerHarness{p: p, dir: dir})
}

type providerHarness struct {
	p   *Provider
	dir string
}

func (h *providerHarness) Provider() driver.MachineProvider { return h.p }
func (h *providerHarness) ClusterID() string                { return "c-provider" }
func (h *providerHarness) Pass(d time.Duration)             { time.Sleep(d) }
func (h *providerHarness) Now() time.Time                   { return time.Now() }

// Machine: what the hook recorded of the machine, and how often it ran
// for it.
func (h *providerHarness) Machine(t *testing.T, m domain.Machine, clusterID, nodeName string) providertest.Machine {
	state, err := os.ReadFile(filepath.Join(h.dir, "machine."+m.ID))
	if err != nil && !os.IsNotExist(err) {
		t.Fatal(err)
	}
	s := strings.TrimSpace(string(state))
	return providertest.Machine{
		Prepared: s == ActionProvision+" "+clusterID+" "+nodeName,
		Wiped:    s == ActionDeprovision+" "+clusterID+" "+nodeName,
		Work:     strconv.Itoa(lines(filepath.Join(h.dir, "runs."+m.ID))) + " runs",
	}
}

// Failing: a node whose machine the hook cannot reach.
func (h *providerHarness) Failing(t *testing.T) (domain.Machine, driver.NodeSpec, bool) {
	m := domain.Machine{ID: "m-unreachable", GPUs: 8}
	return m, providertest.Spec(h, m, "fail-1"), true
}
