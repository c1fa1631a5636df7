package docs

import (
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/spf13/cobra"

	"github.com/sparecap/sparecap/internal/cli"
)

const (
	cliDoc          = "cli.md"
	commandsSection = "## Every command"
)

// TestCLIDocsListEveryCommand: the table of docs/cli.md's "Every command"
// has a row for every command of `sparecap --help` that does something
// (`sparecap prices`, `sparecap clusters create`; not the group
// `sparecap clusters`), and no row
// for a command that does not exist. The commands are the CLI's tree
// (internal/cli) and the ones cmd/sparecap adds to it (server, demo, run,
// trainer: read from its source, so the binary is not built).
func TestCLIDocsListEveryCommand(t *testing.T) {
	extra, err := mainCommands(filepath.Join("..", "cmd", "sparecap"))
	if err != nil {
		t.Fatal(err)
	}
	if len(extra) == 0 {
		t.Fatal("no commands found in cmd/sparecap: the pattern is broken")
	}
	var stubs []*cobra.Command
	for _, name := range extra {
		stubs = append(stubs, &cobra.Command{Use: name, Run: func(*cobra.Command, []string) {}})
	}
	var want []string
	var walk func(c *cobra.Command, path []string)
	walk = func(c *cobra.Command, path []string) {
		if c.Hidden || c.Deprecated != "" || c.Name() == "help" || c.Name() == "completion" {
			return
		}
		if len(path) > 0 && (c.Runnable() || !c.HasSubCommands()) {
			want = append(want, strings.Join(path, " "))
		}
		for _, sub := range c.Commands() {
			walk(sub, append(slices.Clone(path), sub.Name()))
		}
	}
	walk(cli.NewRoot(stubs...), nil)

	b, err := os.ReadFile(cliDoc)
	if err != nil {
		t.Fatal(err)
	}
	got := documentedCommands(string(b))
	if len(got) == 0 {
		t.Fatalf("%s: no commands in the table of its section %q", cliDoc, commandsSection)
	}
	for _, c := range want {
		if !slices.Contains(got, c) {
			t.Errorf("%s: the table of %q has no row for `sparecap %s`: add one", cliDoc, commandsSection, c)
		}
	}
	for _, c := range got {
		if !slices.Contains(want, c) {
			t.Errorf("%s: the table of %q has a row for `sparecap %s`, which is not a command", cliDoc, commandsSection, c)
		}
	}
}

// useRE is a cobra command's name, from its Use.
var useRE = regexp.MustCompile(`(?m)^\s*Use:\s*"([a-z][a-z-]*)`)

// mainCommands returns the names of the commands defined in the non-test
// Go files of dir.
func mainCommands(dir string) ([]string, error) {
	files, err := filepath.Glob(filepath.Join(dir, "*.go"))
	if err != nil {
		return nil, err
	}
	var names []string
	for _, f := range files {
		if strings.HasSuffix(f, "_test.go") {
			continue
		}
		b, err := os.ReadFile(f)
		if err != nil {
			return nil, err
		}
		for _, m := range useRE.FindAllStringSubmatch(string(b), -1) {
			names = append(names, m[1])
		}
	}
	return names, nil
}

// commandWordRE is a word of a command's path.
var commandWordRE = regexp.MustCompile(`^[a-z][a-z-]*$`)

// documentedCommands returns the command paths ("clusters create") of the
// first cells of the table in the page's section commandsSection: a code
// span `sparecap WORDS [ARGS]`, whose path is its words up to the first
// argument or flag.
func documentedCommands(page string) []string {
	_, section, ok := strings.Cut(page, "\n"+commandsSection+"\n")
	if !ok {
		return nil
	}
	if i := strings.Index(section, "\n## "); i >= 0 {
		section = section[:i]
	}
	var paths []string
	for _, line := range proseLines(section) {
		m := tableRowRE.FindStringSubmatch(line)
		if m == nil {
			continue
		}
		for _, c := range regexp.MustCompile("`sparecap ([^`]*)`").FindAllStringSubmatch(m[1], -1) {
			var words []string
			for _, w := range strings.Fields(c[1]) {
				if !commandWordRE.MatchString(w) {
					break
				}
				words = append(words, w)
			}
			paths = append(paths, strings.Join(words, " "))
		}
	}
	return paths
}
