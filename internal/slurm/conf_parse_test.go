package slurm

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"
)

// TestConfReadAsSlurmReadsIt: the parser reads a slurm.conf as Slurm
// 22.05's own does, checked against scontrol itself: each file sets
// SlurmctldPort to a value scontrol refuses and quotes ("Invalid
// SlurmctldPort VALUE", read before it looks for slurmctld), or has a
// line it cannot parse ("Parse error"). An Include (of a file that sets
// SlurmctldPort=included) is followed by scontrol and flagged by the
// parser.
func TestConfReadAsSlurmReadsIt(t *testing.T) {
	dir := t.TempDir()
	inc := filepath.Join(dir, "included.conf")
	if err := os.WriteFile(inc, []byte("SlurmctldPort=included\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		name, text string
		port       string // the value read; "" for a file Slurm refuses
	}{
		{"plain", "SlurmctldPort=x\n", "x"},
		{"spaces around =, quoted", "  SlurmctldPort = \"x y\"\n", "x y"},
		{"quoted without spaces", "SlurmctldPort=\"ab\"\n", "ab"},
		{"a quote inside a word", "SlurmctldPort=\"a\"b\n", "\"a\"b"},
		{"comment", "SlurmctldPort=a # the port\n", "a"},
		{"escaped #", "SlurmctldPort=a\\#b\n", "a#b"},
		{"escape dropped", "SlurmctldPort=a\\b\n", "ab"},
		{"continuation", "Slurmctld\\\nPort=a\n", "a"},
		{"continuation, then a comment line", "SlurmctldPort=a \\\n# c\n", "a"},
		{"even backslashes do not continue", "SlurmctldPort=a\\\\\n", "a\\"},
		{"the last wins", "SlurmctldPort=a\nSlurmctldPort=b\n", "b"},
		{"any case", "slurmctldPORT=a\n", "a"},
		{"an operator", "SlurmctldPort+=a\n", "a"},
		{"CRLF", "SlurmctldPort=a\r\n", "a"},
		{"a record's pairs", "NodeName=n[1-2] CPUs=1 Feature=\"x y\"\nSlurmctldPort=a\n", "a"},
		{"two settings on a line", "SlurmctldPort=a MessageTimeout=1\n", ""},
		{"not Key=Value", "SlurmctldPort=a\ngarbage here\n", ""},
		{"no value", "SlurmctldPort=\n", ""},
		{"Include after whitespace", "SlurmctldPort=a\n Include " + inc + "\n", ""},
		{"Include", "SlurmctldPort=a\ninclude\t" + inc + "\n", "included"},
		{"Include continued", "SlurmctldPort=a\nInc\\\nlude " + inc + "\n", "included"},
	} {
		t.Run(c.name, func(t *testing.T) {
			text := "ClusterName=a\nSlurmctldHost=localhost\n" + c.text
			if got := scontrolReads(t, dir, text); got != c.port {
				t.Fatalf("scontrol reads SlurmctldPort %q, the test says %q", got, c.port)
			}
			lines, problems := parseConfLines([]byte(text))
			port, include := "", false
			for _, l := range lines {
				include = include || l.include
				if !l.include && strings.EqualFold(l.pairs[0].key, "SlurmctldPort") {
					port = l.pairs[0].value
				}
			}
			switch {
			case c.port == "included":
				if !include {
					t.Errorf("the parser did not see the Include: %+v", lines)
				}
			case c.port == "":
				if len(problems) == 0 {
					t.Errorf("the parser reads a file Slurm refuses, SlurmctldPort %q", port)
				}
			case len(problems) > 0:
				t.Errorf("the parser refuses a file Slurm reads: %v", problems)
			case port != c.port:
				t.Errorf("the parser reads SlurmctldPort %q, Slurm %q", port, c.port)
			}
		})
	}
}

var invalidPort = regexp.MustCompile(`Invalid SlurmctldPort (.*)`)

// scontrolReads is the SlurmctldPort scontrol reads in text, or "" if it
// cannot parse the file.
func scontrolReads(t *testing.T, dir, text string) string {
	t.Helper()
	path := filepath.Join(dir, "slurm.conf")
	if err := os.WriteFile(path, []byte(text), 0o644); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, "scontrol", "show", "config")
	cmd.Env = commandEnv(path)
	out, _ := cmd.CombinedOutput()
	if strings.Contains(string(out), "Parse error") {
		return ""
	}
	m := invalidPort.FindStringSubmatch(string(out))
	if m == nil {
		t.Fatalf("scontrol did not quote SlurmctldPort:\n%s", out)
	}
	return m[1]
}

// TestConfIdentityShares: what two slurm.confs have in common that one
// Slurm alone may have.
func TestConfIdentityShares(t *testing.T) {
	id := func(text string) Identity {
		t.Helper()
		i, err := ConfIdentity([]byte(text))
		if err != nil {
			t.Fatal(err)
		}
		return i
	}
	a := id("ClusterName=A\nSlurmctldHost=ctl(10.0.0.1)\nSlurmctldHost=backup\nSlurmctldPort=6817-6819\n")
	for text, want := range map[string]string{
		"ClusterName=a\nSlurmctldHost=x\n":                                 "ClusterName a",
		"ClusterName=b\nSlurmctldHost=other(10.0.0.1)\n":                   "slurmctld 10.0.0.1 port 6817",
		"ClusterName=b\nSlurmctldHost=BACKUP\nSlurmctldPort=6819\n":        "slurmctld backup port 6819",
		"ClusterName=b\nControlMachine=m\nControlAddr=10.0.0.1\n":          "slurmctld 10.0.0.1 port 6817",
		"ClusterName=b\nSlurmctldHost=ctl(10.0.0.1)\nSlurmctldPort=6820\n": "",
		"ClusterName=b\nSlurmctldHost=ctl(10.0.0.2)\n":                     "",
	} {
		if got := a.Shares(id(text)); got != want {
			t.Errorf("%q shares %q, want %q", text, got, want)
		}
	}
}

// TestMungeSocketUnderTheRoot: the munge socket the commands would use,
// named or munge's default, must be under the operator's root.
func TestMungeSocketUnderTheRoot(t *testing.T) {
	const head = "ClusterName=a\nSlurmctldHost=c\n"
	for text, ok := range map[string]bool{
		"AuthInfo=socket=/run/sparecap/a/munge.socket\n":               true,
		"AuthInfo=cred_expire=10,socket=/run/sparecap/a.socket\n":      true,
		"AuthInfo=/run/sparecap/a.socket\n":                            true,
		"":                                                             false, // /run/munge/munge.socket.2
		"AuthInfo=cred_expire=10\n":                                    false,
		"AuthInfo=socket=,cred_expire=10\n":                            false,
		"AuthInfo=socket=/run/sparecap/a.socket\nAuthInfo=ttl=5\n":     false, // the last counts
		"AuthInfo=socket=/run/sparecapx/a.socket\n":                    false,
		"AuthInfo=socket=/run/sparecap\n":                              false,
		"AuthInfo=socket=/run/sparecap/a/../../munge/munge.socket.2\n": false,
	} {
		_, err := ParseConf([]byte(head+text), "/run/sparecap")
		if (err == nil) != ok {
			t.Errorf("%q: %v, want accepted %v", text, err, ok)
		}
	}
}
