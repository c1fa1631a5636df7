package slurm_test

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/sparecap/sparecap/internal/slurm"
)

// tenantConf is the start of a tenant's slurm.conf, as the tests attach it.
const tenantConf = "ClusterName=tenant\nSlurmctldHost=ctl(10.0.0.1)\n"

// TestConfRefusedByName: a slurm.conf that would make the client commands
// read another file, load a library, run a program or sign with a munged
// outside the operator's root is refused before any command sees it,
// with an error naming the key and its line.
func TestConfRefusedByName(t *testing.T) {
	for _, c := range []struct{ line, key string }{
		{"Include /etc/passwd", "Include"},
		{"include\t/etc/passwd", "Include"},
		{"Include=/etc/passwd", "Include"},
		{"PluginDir=/tmp/evil", "PluginDir"},
		{"pluginDIR = /tmp/evil", "PluginDir"},
		{"Plugin\\\nDir=/tmp/evil", "PluginDir"},
		{"PlugStackConfig=/tmp/plugstack.conf", "PlugStackConfig"},
		{"ResumeProgram=/tmp/x", "ResumeProgram"},
		{"HealthCheckProgram=/tmp/x", "HealthCheckProgram"},
		{"MailProg=/usr/bin/mail", "MailProg"},
		{"Prolog=/tmp/x", "Prolog"},
		{"Epilog=/tmp/x", "Epilog"},
		{"TaskProlog=/tmp/x", "TaskProlog"},
		{"SrunEpilog=/tmp/x", "SrunEpilog"},
		{"PrologSlurmctld=/tmp/x", "PrologSlurmctld"},
		{"AuthType=auth/none", "AuthType"},
		{"AuthType=auth/jwt", "AuthType"},
		{"AuthInfo=socket=/tmp/other/munge.socket", "AuthInfo"},
		{"AuthInfo=/tmp/other/munge.socket", "AuthInfo"},
		{"AuthInfo=socket=/run/munge/../../tmp/munge.socket", "AuthInfo"},
		{"AuthInfo=socket=munge.socket", "AuthInfo"},
	} {
		t.Run(c.line, func(t *testing.T) {
			s := newStandIn(t, nil)
			err := s.check(t, tenantConf+c.line+"\n", slurm.Options{})
			if err == nil {
				t.Fatalf("%q accepted", c.line)
			}
			if msg := err.Error(); !strings.Contains(msg, "line 3: "+c.key) {
				t.Errorf("the error does not name %s on line 3: %v", c.key, err)
			}
			if s.ran("scontrol") {
				t.Error("a Slurm command ran with the refused slurm.conf")
			}
		})
	}
	// Under the socket root (Options.AuthSocketDir, /run/munge by
	// default), munge's own default included.
	for _, ok := range []string{"", "AuthType=auth/munge\nAuthInfo=socket=/run/munge/munge.socket.2,cred_expire=10\n", "AuthInfo=/run/munge/tenant.socket\n"} {
		if err := newStandIn(t, nil).check(t, tenantConf+ok, slurm.Options{}); err != nil {
			t.Errorf("%q refused: %v", ok, err)
		}
	}
}

// TestCommandsGetNoSecretsAndTheKeptConf: the Slurm commands run with a
// minimal environment (none of the server's secrets) and a copy of the
// slurm.conf that holds only what they need, private to sparecap, in
// Options.Dir.
func TestCommandsGetNoSecretsAndTheKeptConf(t *testing.T) {
	secrets := map[string]string{"SPARECAP_ADMIN_TOKEN": "sc_admin_0123456789secret", "SPARECAP_METRICS_TOKEN": "metrics-secret-42",
		"PGPASSWORD": "pg-secret-99", "SQUEUE_FORMAT": "%i-tenant-chosen"}
	for k, v := range secrets {
		t.Setenv(k, v)
	}
	out := t.TempDir()
	s := newStandIn(t, map[string]string{"scontrol": `env > ` + out + `/env
cp "$SLURM_CONF" ` + out + `/conf
stat -c '%a' "$SLURM_CONF" "$(dirname "$SLURM_CONF")" > ` + out + `/modes
printf '` + "KillWait = 30 sec\\n" + `'
`})
	dir := t.TempDir()
	conf := tenantConf + "SlurmctldPort=6817\nSlurmUser=slurm\nAuthInfo=socket=/run/munge/munge.socket.2\n" +
		"AccountingStoragePass=db-password-777\nSlurmctldLogFile=/var/log/slurmctld.log\nNodeName=a[1-4] CPUs=2 Feature=x\nPartitionName=main Nodes=ALL Default=YES\n"
	if err := s.check(t, conf, slurm.Options{Dir: dir}); err != nil {
		t.Fatal(err)
	}
	env := read(t, filepath.Join(out, "env"))
	for k, v := range secrets {
		if strings.Contains(env, v) || strings.Contains(env, k+"=") {
			t.Errorf("the command's environment has %s:\n%s", k, env)
		}
	}
	if !strings.Contains(env, "\nPATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin\n") && !strings.HasPrefix(env, "PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin\n") {
		t.Errorf("PATH is not the fixed one:\n%s", env)
	}
	if !strings.Contains(env, "SLURM_CONF="+dir+"/") {
		t.Errorf("SLURM_CONF is not under Options.Dir %s:\n%s", dir, env)
	}
	copied := read(t, filepath.Join(out, "conf"))
	for _, want := range []string{"ClusterName=tenant\n", "SlurmctldHost=ctl(10.0.0.1)\n", "SlurmctldPort=6817\n", "SlurmUser=slurm\n", "AuthInfo=socket=/run/munge/munge.socket.2\n"} {
		if !strings.Contains(copied, want) {
			t.Errorf("the commands' copy lacks %q:\n%s", want, copied)
		}
	}
	for _, not := range []string{"db-password-777", "AccountingStoragePass", "SlurmctldLogFile", "NodeName", "PartitionName"} {
		if strings.Contains(copied, not) {
			t.Errorf("the commands' copy has %q:\n%s", not, copied)
		}
	}
	if modes := strings.Fields(read(t, filepath.Join(out, "modes"))); len(modes) != 2 || modes[0] != "600" || modes[1] != "700" {
		t.Errorf("modes of the copy and its directory: %v, want 600 700", modes)
	}
	if left, _ := os.ReadDir(dir); len(left) != 0 {
		t.Errorf("the check left %d entries in Options.Dir", len(left))
	}
}

// TestSlurmErrorIsOneBoundedLine: of what a failing command writes, one
// line reaches the error, bounded, its control characters escaped.
func TestSlurmErrorIsOneBoundedLine(t *testing.T) {
	s := newStandIn(t, map[string]string{"scontrol": `printf 'scontrol: error: first line \033]0;title\007 %s\nSECOND-LINE-MARKER\nthird\n' "$(printf '%0500d' 0)" >&2
exit 1
`})
	err := s.check(t, tenantConf, slurm.Options{})
	if err == nil {
		t.Fatal("no error")
	}
	msg := err.Error()
	if !strings.Contains(msg, "first line") || strings.Contains(msg, "SECOND-LINE-MARKER") || strings.Contains(msg, "third") {
		t.Errorf("not just the first line: %q", msg)
	}
	if strings.ContainsAny(msg, "\x1b\x07\n") {
		t.Errorf("control characters in the error: %q", msg)
	}
	if len(msg) > 500 {
		t.Errorf("the error is %d bytes: %q", len(msg), msg)
	}
}

func read(t *testing.T, path string) string {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}
