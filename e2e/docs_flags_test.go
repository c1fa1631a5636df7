package e2e

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"unicode/utf8"
)

// TestOperationsDocsListEveryServerFlag: the flag list of
// docs/operations.md is what `sparecap server --help` prints (each line
// cut at docsFlagWidth), so a flag added, renamed or given a new default
// cannot leave the docs behind. On a mismatch it prints the block to
// paste.
func TestOperationsDocsListEveryServerFlag(t *testing.T) {
	t.Parallel()
	root, err := moduleRoot()
	if err != nil {
		t.Fatal(err)
	}
	doc, err := os.ReadFile(filepath.Join(root, "docs", "operations.md"))
	if err != nil {
		t.Fatal(err)
	}
	_, after, ok := strings.Cut(string(doc), "From `sparecap server --help`:\n\n```\n")
	block, _, ok2 := strings.Cut(after, "```")
	if !ok || !ok2 {
		t.Fatal("docs/operations.md has no flag block after \"From `sparecap server --help`:\"")
	}
	// A home of its own, so the data directory's default reads the same
	// wherever the test runs.
	r := cliEnv(t, []string{"HOME=/home/you", "XDG_DATA_HOME="}, "server", "--help")
	if r.code != 0 {
		t.Fatalf("server --help: %s", r)
	}
	want := helpBlock(r.stdout)
	if block != want {
		t.Errorf("docs/operations.md's flag block is not what `sparecap server --help` prints; replace it with:\n%s", want)
	}
}

// docsFlagWidth is where the docs cut a flag's line.
const docsFlagWidth = 160

// helpBlock is the flag lines of a --help output, the help flag and the
// output format left out, each cut at docsFlagWidth characters.
func helpBlock(help string) string {
	var b strings.Builder
	for _, line := range strings.Split(help, "\n") {
		trimmed := strings.TrimSpace(line)
		if !strings.HasPrefix(trimmed, "-") || strings.HasPrefix(trimmed, "-h, --help") || strings.HasPrefix(trimmed, "-o, --output") {
			continue
		}
		if utf8.RuneCountInString(line) > docsFlagWidth {
			line = string([]rune(line)[:docsFlagWidth])
		}
		b.WriteString(strings.TrimRight(line, " ") + "\n")
	}
	return b.String()
}
