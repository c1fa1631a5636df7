package slurm

import (
	"slices"
	"strings"
	"testing"
)

// FuzzParseConf: whatever the file, ParseConf does not panic, and a file
// it accepts gives a copy that holds kept keys only, one plain Key=Value
// a line, which reads back to the same settings and reaches the same
// Slurm (Identity).
func FuzzParseConf(f *testing.F) {
	for _, seed := range []string{
		"ClusterName=tenant\nSlurmctldHost=ctl(10.0.0.1)\n",
		"ClusterName=t\nSlurmctldHost=a(10.0.0.1)\nSlurmctldHost=b\nSlurmctldPort=6817-6820\nAuthType=auth/munge\nAuthInfo=socket=/run/munge/t.socket,cred_expire=10,ttl=5\n",
		"ClusterName = \"my cluster\"\nSlurmctldHost=ctl # comment\nAccountingStoragePass=secret\n",
		"ClusterName=t\\\n2\nSlurmctldHost=c\\#1\nMessageTimeout+=20\n",
		"ClusterName=t\nControlMachine=ctl\nControlAddr=10.0.0.2\nBackupController=b\nSlurmctldAddr=10.0.0.9\n",
		"ClusterName=t\nSlurmctldHost=c\nInclude /etc/shadow\n",
		"ClusterName=t\nSlurmctldHost=c\nPlug\\\nInDir=/tmp\nNodeName=n[1-4] CPUs=2 Feature=\"a b\"\nPartitionName=p Nodes=ALL\n",
		"ClusterName=t SlurmctldHost=c\n",
		"ClusterName=\"t\"x\nSlurmctldHost=\"\"\n",
		"\x00",
		"ClusterName=t\r\nSlurmctldHost=c\r\nAuthInfo=/run/munge/../x\r\n",
		"include\nClusterName=t\\\\\nSlurmctldHost=c\\",
		"ClusterName=0\nSlurmctldHost=0\nAuthInfo=x=1\n",
		"ClusterName=0\nSlurmctldHost=0\nAuthInfo=/run/munge/,000\n",
	} {
		f.Add([]byte(seed))
	}
	f.Fuzz(func(t *testing.T, text []byte) {
		c, err := ParseConf(text, DefaultAuthSocketDir)
		id, _ := ConfIdentity(text)
		if err != nil {
			return
		}
		if !identical(c.Identity, id) {
			t.Fatalf("ParseConf and ConfIdentity disagree: %+v, %+v", c.Identity, id)
		}
		copied := c.Copy()
		lines, problems := parseConfLines(copied)
		if len(problems) > 0 {
			t.Fatalf("the copy does not read: %v\n%s", problems, copied)
		}
		var got []confPair
		for _, l := range lines {
			if l.include || len(l.pairs) != 1 {
				t.Fatalf("the copy has a line that is not one Key=Value: %+v\n%s", l, copied)
			}
			p := l.pairs[0]
			if _, ok := kept[strings.ToLower(p.key)]; !ok || !plainValue(p.value) {
				t.Fatalf("the copy holds %s=%q\n%s", p.key, p.value, copied)
			}
			got = append(got, p)
		}
		if !slices.Equal(got, c.settings) {
			t.Fatalf("the copy reads back as %+v, kept %+v", got, c.settings)
		}
		again, err := ParseConf(copied, DefaultAuthSocketDir)
		if err != nil {
			t.Fatalf("the copy is refused: %v\n%s", err, copied)
		}
		if !identical(again.Identity, c.Identity) {
			t.Fatalf("the copy reaches %+v, the file %+v", again.Identity, c.Identity)
		}
	})
}

func identical(a, b Identity) bool {
	return a.ClusterName == b.ClusterName && slices.Equal(a.Controllers, b.Controllers)
}
