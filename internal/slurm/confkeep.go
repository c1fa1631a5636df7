package slurm

import (
	"errors"
	"fmt"
	"path/filepath"
	"strconv"
	"strings"
)

// What sparecap keeps of a tenant's slurm.conf. The Slurm commands it runs
// (scontrol, sinfo, squeue, scancel) never read the tenant's file: they get
// a copy sparecap writes itself, of the settings they need to reach and
// authenticate to slurmctld, each value checked. A key that would make
// them read another file, load a library or run a program is refused by
// name, so the operator knows; every other key is left out of the copy
// (a tenant's file holds the daemons' settings too, AccountingStoragePass
// among them).

// DefaultAuthSocketDir is the directory under which a slurm.conf's munge
// socket must be (Options.AuthSocketDir): munged's own.
const DefaultAuthSocketDir = "/run/munge"

// mungeDefaultSocket is libmunge's socket when AuthInfo names none.
const mungeDefaultSocket = "/run/munge/munge.socket.2"

// kept are the keys of the commands' copy, by their lower-case name.
var kept = map[string]string{
	"clustername":             "ClusterName", // the commands refuse a file without it
	"slurmctldhost":           "SlurmctldHost",
	"controlmachine":          "ControlMachine", // SlurmctldHost's old spellings
	"controladdr":             "ControlAddr",
	"backupcontroller":        "BackupController",
	"backupaddr":              "BackupAddr",
	"slurmctldaddr":           "SlurmctldAddr",
	"slurmctldport":           "SlurmctldPort",
	"authtype":                "AuthType",
	"authinfo":                "AuthInfo",
	"slurmuser":               "SlurmUser",               // scontrol ping (and show config) takes slurmctld's answer from this user only
	"communicationparameters": "CommunicationParameters", // IPv6, address caching
	"messagetimeout":          "MessageTimeout",
	"tcptimeout":              "TCPTimeout",
}

// named are keys refused, read or checked, spelled as Slurm's documentation
// does, for the errors.
var named = map[string]string{
	"include": "Include", "plugindir": "PluginDir", "plugstackconfig": "PlugStackConfig", "slurmdport": "SlurmdPort",
}

// canonicalKey is key as Slurm's documentation spells it, when sparecap
// knows it.
func canonicalKey(key string) string {
	l := strings.ToLower(key)
	if k, ok := kept[l]; ok {
		return k
	}
	if k, ok := named[l]; ok {
		return k
	}
	return key
}

// refusedKey says why a key is refused whatever its value, or "".
func refusedKey(key string) string {
	l := strings.ToLower(key)
	switch {
	case l == "include":
		return "makes Slurm read another file"
	case l == "plugindir":
		return "makes the Slurm commands load libraries from a directory the file names"
	case l == "plugstackconfig":
		return "names a SPANK configuration, which loads libraries into Slurm commands"
	case strings.HasSuffix(l, "program"), strings.HasSuffix(l, "prog"):
		return "names a program to run"
	case strings.HasSuffix(l, "prolog"), strings.HasSuffix(l, "epilog"), l == "prologslurmctld", l == "epilogslurmctld":
		return "names a program to run"
	}
	return ""
}

// Conf is a slurm.conf as sparecap keeps it: who it reaches, and the
// settings of the commands' copy.
type Conf struct {
	Identity
	// SlurmdPort is the file's SlurmdPort; 0 if it sets none.
	SlurmdPort int
	settings   []confPair // in the file's order, keys canonical
}

// ParseConf reads and checks a slurm.conf: an error lists what is refused
// (which key on which line, and why), at most a few. socketDir is the
// directory the munge socket must be under (DefaultAuthSocketDir if
// empty).
func ParseConf(text []byte, socketDir string) (*Conf, error) {
	lines, problems := parseConfLines(text)
	c := &Conf{}
	for _, l := range lines {
		problems = append(problems, c.take(l, socketDir)...)
	}
	var err error
	if c.Identity, err = identityOf(lines); err != nil {
		problems = append(problems, Problem{Why: err.Error()})
	}
	if !namesSocket(lines) {
		problems = append(problems, checkSocket(0, "", mungeDefaultSocket, socketDir)...)
	}
	if len(problems) > 0 {
		return nil, &ConfError{Problems: problems}
	}
	return c, nil
}

// take keeps, refuses or leaves out the settings of one line.
func (c *Conf) take(l confLine, socketDir string) []Problem {
	if l.include {
		return []Problem{{Line: l.n, Key: "Include", Why: refusedKey("include")}}
	}
	if recordKeys[strings.ToLower(l.pairs[0].key)] {
		return nil // nodes and partitions: slurmctld's business
	}
	p := l.pairs[0]
	key := canonicalKey(p.key)
	if why := refusedKey(p.key); why != "" {
		return []Problem{{Line: l.n, Key: key, Why: why}}
	}
	if key == "SlurmdPort" {
		port, err := parsePort(p.value)
		if err != nil {
			return []Problem{{Line: l.n, Key: key, Why: err.Error()}}
		}
		c.SlurmdPort = port
		return nil
	}
	if _, ok := kept[strings.ToLower(key)]; !ok {
		return nil
	}
	value, problems := checkValue(l.n, key, p.value, socketDir)
	if len(problems) == 0 && value != "" { // AuthInfo may keep nothing
		c.settings = append(c.settings, confPair{key: key, value: value})
	}
	return problems
}

// checkValue checks the value of a kept key and returns it as the copy
// holds it.
func checkValue(line int, key, value, socketDir string) (string, []Problem) {
	if !plainValue(value) {
		return "", []Problem{{Line: line, Key: key, Why: "its value holds characters sparecap does not pass on (whitespace, quotes, '#', '\\' or non-ASCII)"}}
	}
	bad := func(why string) (string, []Problem) { return "", []Problem{{Line: line, Key: key, Why: why}} }
	switch key {
	case "AuthType":
		if value != "auth/munge" {
			return bad(fmt.Sprintf("%q: the Slurm commands sparecap runs authenticate with auth/munge only (another would load another plugin into them)", clip(value)))
		}
	case "AuthInfo":
		return authInfo(line, value, socketDir)
	case "SlurmctldPort":
		if _, _, err := parsePortRange(value); err != nil {
			return bad(err.Error())
		}
	case "MessageTimeout", "TCPTimeout":
		if n, err := strconv.Atoi(value); err != nil || n < 1 || n > 3600 {
			return bad("not a number of seconds from 1 to 3600")
		}
	}
	return value, nil
}

// plainValue: a value the copy can hold as it is: printable ASCII, no
// whitespace, nothing Slurm's reader would take for a quote, a comment or
// an escape.
func plainValue(v string) bool {
	for i := 0; i < len(v); i++ {
		if c := v[i]; c <= ' ' || c > '~' || c == '"' || c == '#' || c == '\\' {
			return false
		}
	}
	return v != ""
}

// authInfo checks AuthInfo's munge options and writes them back: the
// socket must be under socketDir, since the munged behind it signs the
// commands' requests with its key; cred_expire and ttl are kept, other
// options left out.
func authInfo(line int, value, socketDir string) (string, []Problem) {
	var keep []string
	if strings.Contains(value, "=") {
		for _, opt := range strings.Split(value, ",") {
			k, v, _ := strings.Cut(opt, "=")
			if k = strings.ToLower(k); k != "cred_expire" && k != "ttl" {
				continue
			}
			if _, err := strconv.Atoi(v); err != nil {
				return "", []Problem{{Line: line, Key: "AuthInfo", Why: k + " is not a number"}}
			}
			keep = append(keep, k+"="+v)
		}
	}
	socket := authSocket(value)
	if socket == "" {
		return strings.Join(keep, ","), nil
	}
	if strings.ContainsAny(socket, ",=") {
		return "", []Problem{{Line: line, Key: "AuthInfo", Why: "a munge socket path with ',' or '=' in it cannot be written back"}}
	}
	if p := checkSocket(line, "AuthInfo", socket, socketDir); p != nil {
		return "", p
	}
	return strings.Join(append([]string{"socket=" + filepath.Clean(socket)}, keep...), ","), nil
}

// authSocket is the munge socket an AuthInfo value names, as Slurm's
// auth/munge reads it: the first socket=PATH option, or the whole value
// in the old form (no '='); "" for none.
func authSocket(value string) string {
	if !strings.Contains(value, "=") {
		return value
	}
	for _, opt := range strings.Split(value, ",") {
		if k, v, ok := strings.Cut(opt, "="); ok && strings.EqualFold(k, "socket") {
			return v
		}
	}
	return ""
}

// checkSocket refuses a munge socket outside socketDir.
func checkSocket(line int, key, socket, socketDir string) []Problem {
	if socketDir == "" {
		socketDir = DefaultAuthSocketDir
	}
	rel, err := filepath.Rel(filepath.Clean(socketDir), filepath.Clean(socket))
	outside := !filepath.IsAbs(socket) || err != nil || rel == "." || rel == ".." || strings.HasPrefix(rel, "../") ||
		strings.Contains("/"+socket+"/", "/../")
	if !outside {
		return nil
	}
	why := fmt.Sprintf("the munge socket %s is not under %s, where the operator keeps the munge sockets the Slurm commands may use (--slurm-auth-socket-dir)", clip(socket), socketDir)
	if key == "" {
		why = "no AuthInfo socket: " + why + "; name the tenant's socket with AuthInfo=socket=PATH"
		key = "AuthInfo"
	}
	return []Problem{{Line: line, Key: key, Why: why}}
}

// namesSocket: the file's AuthInfo (its last, as Slurm reads it) names
// a munge socket.
func namesSocket(lines []confLine) bool {
	named := false
	for _, l := range lines {
		if !l.include && strings.EqualFold(l.pairs[0].key, "AuthInfo") {
			named = authSocket(l.pairs[0].value) != ""
		}
	}
	return named
}

// Copy is the slurm.conf the Slurm commands get: the kept settings, one a
// line, in the file's order.
func (c *Conf) Copy() []byte {
	var b strings.Builder
	b.WriteString("# Written by sparecap: the settings of the attached slurm.conf the Slurm commands need.\n")
	for _, s := range c.settings {
		b.WriteString(s.key + "=" + s.value + "\n")
	}
	return []byte(b.String())
}

func parsePort(s string) (int, error) {
	n, err := strconv.Atoi(s)
	if err != nil || n < 1 || n > 65535 {
		return 0, fmt.Errorf("%q is not a port", s)
	}
	return n, nil
}

// parsePortRange reads "6817" or "6817-6820".
func parsePortRange(s string) (lo, hi int, err error) {
	a, b, isRange := strings.Cut(s, "-")
	if lo, err = parsePort(a); err != nil {
		return 0, 0, err
	}
	hi = lo
	if isRange {
		if hi, err = parsePort(b); err != nil || hi < lo {
			return 0, 0, fmt.Errorf("%q is not a port range", s)
		}
	}
	return lo, hi, nil
}

// clip bounds a value an error quotes (the file's own text, up to its
// size).
func clip(s string) string {
	if len(s) > 120 {
		return s[:120] + "..."
	}
	return s
}

// ConfError is a slurm.conf sparecap refuses.
type ConfError struct{ Problems []Problem }

// maxProblems bounds the problems an error lists.
const maxProblems = 5

func (e *ConfError) Error() string {
	var parts []string
	for i, p := range e.Problems {
		if i == maxProblems {
			parts = append(parts, fmt.Sprintf("and %d more", len(e.Problems)-maxProblems))
			break
		}
		parts = append(parts, p.String())
	}
	return "the slurm.conf is refused: " + strings.Join(parts, "; ") +
		" (the Slurm commands sparecap runs need ClusterName, SlurmctldHost, SlurmctldPort, SlurmUser, AuthType and AuthInfo: remove the rest from the copy you attach)"
}

// errNoController: the file names no slurmctld.
var errNoController = errors.New("the slurm.conf names no SlurmctldHost: the Slurm commands could not find slurmctld")
