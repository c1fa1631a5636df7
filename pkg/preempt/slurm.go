package preempt

import (
	"context"
	"encoding/json"
	"os"
	"os/exec"
	"strings"
	"time"
)

// ExtraDeadline is the key of the deadline in the JSON of a Slurm node's
// Extra field, which sparecap writes at a reclaim's T+0.
const ExtraDeadline = "sparecap.dev/deadline"

// ReadSlurmDeadline reads the deadline of the Slurm node the job runs on
// (SLURMD_NODENAME) from its Extra field, with `scontrol show node`; false
// outside Slurm, or when the node carries none. It asks slurmctld, so it
// is read at a signal, not polled.
func ReadSlurmDeadline(ctx context.Context) (time.Time, bool) {
	show, ok := showNode(ctx)
	if !ok {
		return time.Time{}, false
	}
	return SlurmDeadline(show)
}

// showNode is `scontrol --oneliner show node` of the job's node
// (SLURMD_NODENAME); false outside Slurm or when slurmctld does not
// answer in 5 s.
func showNode(ctx context.Context) (string, bool) {
	node := os.Getenv("SLURMD_NODENAME")
	if node == "" {
		return "", false
	}
	ctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, "scontrol", "--oneliner", "show", "node", node)
	cmd.WaitDelay = time.Second // a wrapper's child may hold the output open
	out, err := cmd.Output()
	return string(out), err == nil
}

// SlurmDeadline finds the deadline in `scontrol --oneliner show node`
// output: the Extra field's JSON, key ExtraDeadline.
func SlurmDeadline(show string) (time.Time, bool) { return slurmExtra(show, ExtraDeadline) }

// slurmExtra reads key's time from the Extra field's JSON in `scontrol
// --oneliner show node` output.
func slurmExtra(show, key string) (time.Time, bool) {
	_, extra, ok := strings.Cut(show, " Extra=")
	if !ok {
		return time.Time{}, false
	}
	// Extra is the last free-text field scontrol prints on one line, and
	// holds a JSON object: read up to its closing brace.
	if end := strings.LastIndexByte(extra, '}'); end >= 0 {
		extra = extra[:end+1]
	}
	var x map[string]string
	if json.Unmarshal([]byte(extra), &x) != nil {
		return time.Time{}, false
	}
	return parseTime(x[key])
}
