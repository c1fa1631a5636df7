package slurm

import (
	"cmp"
	"fmt"
	"strings"
)

// Identity tells one Slurm from another: its ClusterName and where its
// slurmctld listens. Two attached clusters may share neither: one Slurm
// driven as two clusters would let each one's reclaims drain the other's
// nodes (the controllers name their nodes alike) and show each the
// other's jobs.
type Identity struct {
	ClusterName string
	// Controllers are the addresses the commands reach slurmctld at
	// (SlurmctldHost's, in parentheses, or its name), the backups' too.
	Controllers []Endpoint
}

// Endpoint is a slurmctld's address and its port range (SlurmctldPort).
type Endpoint struct {
	Host   string
	Lo, Hi int
}

func (e Endpoint) String() string {
	if e.Lo == e.Hi {
		return fmt.Sprintf("%s port %d", e.Host, e.Lo)
	}
	return fmt.Sprintf("%s ports %d-%d", e.Host, e.Lo, e.Hi)
}

// defaultCtldPort is SlurmctldPort's default.
const defaultCtldPort = 6817

// ConfIdentity reads a slurm.conf's identity, as much of it as the file
// holds: the error says what is missing, or what is not a slurm.conf.
func ConfIdentity(text []byte) (Identity, error) {
	lines, problems := parseConfLines(text)
	id, err := identityOf(lines)
	if len(problems) > 0 {
		return id, &ConfError{Problems: problems}
	}
	return id, err
}

// identityOf reads ClusterName and the slurmctlds from the file's
// settings; the last of each key counts, as in Slurm, except
// SlurmctldHost, of which each line names one slurmctld.
func identityOf(lines []confLine) (Identity, error) {
	last := map[string]string{}
	var hosts []string
	for _, l := range lines {
		if l.include {
			continue
		}
		p := l.pairs[0]
		k := strings.ToLower(p.key)
		last[k] = p.value
		if k == "slurmctldhost" {
			hosts = append(hosts, ctldAddr(p.value))
		}
	}
	id := Identity{ClusterName: strings.ToLower(last["clustername"])}
	for _, pair := range [][2]string{{"controlmachine", "controladdr"}, {"backupcontroller", "backupaddr"}} {
		if h := cmp.Or(last[pair[1]], last[pair[0]]); h != "" {
			hosts = append(hosts, h)
		}
	}
	if a := last["slurmctldaddr"]; a != "" {
		hosts = append(hosts, a)
	}
	lo, hi := defaultCtldPort, defaultCtldPort
	if v, ok := last["slurmctldport"]; ok {
		if l, h, err := parsePortRange(v); err == nil {
			lo, hi = l, h
		}
	}
	for _, h := range hosts {
		id.Controllers = append(id.Controllers, Endpoint{Host: strings.ToLower(h), Lo: lo, Hi: hi})
	}
	switch {
	case id.ClusterName == "":
		return id, fmt.Errorf("the slurm.conf has no ClusterName: the Slurm commands refuse it (%q)", "ClusterName needs to be specified")
	case len(id.Controllers) == 0:
		return id, errNoController
	}
	return id, nil
}

// ctldAddr is the address in "name(address)", or the name.
func ctldAddr(v string) string {
	name, addr, ok := strings.Cut(v, "(")
	if ok && strings.HasSuffix(addr, ")") && len(addr) > 1 {
		return strings.TrimSuffix(addr, ")")
	}
	return name
}

// Shares says what a and b have in common that one Slurm alone may have:
// "" when nothing.
func (a Identity) Shares(b Identity) string {
	if a.ClusterName != "" && a.ClusterName == b.ClusterName {
		return "ClusterName " + a.ClusterName
	}
	for _, x := range a.Controllers {
		for _, y := range b.Controllers {
			if x.Host == y.Host && x.Lo <= y.Hi && y.Lo <= x.Hi {
				return "slurmctld " + y.String()
			}
		}
	}
	return ""
}
