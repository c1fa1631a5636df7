package slurm

import (
	"bytes"
	"fmt"
	"strings"
)

// A slurm.conf is read here as Slurm 22.05 reads it
// (src/common/parse_config.c, measured with scontrol):
//
//   - a physical line that ends in an odd number of backslashes (trailing
//     whitespace aside) goes on in the next one, the last backslash and
//     the line break removed;
//   - everything from a '#' not escaped by a backslash is a comment;
//   - then every backslash escapes the character after it ("\#" is '#',
//     "\\" a backslash);
//   - a line that starts (no whitespace before it) with "Include",
//     any case, and whitespace includes a file;
//   - any other holds one Key=Value: the key letters, digits, '_' and '.',
//     any case; whitespace may surround the '=', which an operator
//     character (+ - * /) may precede; the value is "quoted" (then it may
//     hold whitespace; the quotes are not part of it) or runs to the next
//     whitespace, and is never empty;
//   - except the record lines (NodeName, PartitionName, NodeSet, DownNodes,
//     FrontendName), whose first pair names the record and whose rest
//     holds the record's own pairs.
//
// Slurm refuses a file with a line it cannot read this way (scontrol:
// "Parse error in file ... line N"), and so does sparecap.

// confPair is one Key=Value.
type confPair struct {
	key   string // as written
	value string // its quotes and escapes removed
}

// confLine is one logical line.
type confLine struct {
	n       int  // its first physical line, from 1
	include bool // an Include directive
	pairs   []confPair
}

// recordKeys name the lines that hold a record: several pairs.
var recordKeys = map[string]bool{"nodename": true, "partitionname": true, "nodeset": true, "downnodes": true, "frontendname": true}

// parseConfLines reads text into logical lines, refusing what Slurm would
// not read.
func parseConfLines(text []byte) ([]confLine, []Problem) {
	if bytes.IndexByte(text, 0) >= 0 {
		return nil, []Problem{{Line: 1 + bytes.Count(text[:bytes.IndexByte(text, 0)], []byte("\n")), Why: "a NUL byte: this is not a text file"}}
	}
	var lines []confLine
	var problems []Problem
	for _, l := range logicalLines(string(text)) {
		line, p := parseLine(l.n, l.text)
		if p != nil {
			problems = append(problems, *p)
			continue
		}
		if line.include || len(line.pairs) > 0 {
			lines = append(lines, line)
		}
	}
	return lines, problems
}

// rawLine is a logical line before its pairs are read.
type rawLine struct {
	n    int
	text string
}

// logicalLines joins continued lines, drops comments and removes escapes.
func logicalLines(text string) []rawLine {
	var out []rawLine
	var cur strings.Builder
	start, joining := 0, false
	physical := strings.SplitAfter(text, "\n")
	for i, p := range physical {
		if !joining {
			start = i + 1
		}
		p = stripComment(p)
		if body, ok := continued(p); ok && i < len(physical)-1 {
			cur.WriteString(body)
			joining = true
			continue
		}
		cur.WriteString(p)
		out = append(out, rawLine{n: start, text: unescape(cur.String())})
		cur.Reset()
		joining = false
	}
	return out
}

// stripComment cuts s at its first '#' that an even number of backslashes
// precede.
func stripComment(s string) string {
	bs := 0
	for i := 0; i < len(s); i++ {
		switch {
		case s[i] == '#' && bs%2 == 0:
			return s[:i]
		case s[i] == '\\':
			bs++
		default:
			bs = 0
		}
	}
	return s
}

// continued reports whether s ends in an odd number of backslashes
// (whitespace after them aside), and returns it without the last one and
// what follows.
func continued(s string) (string, bool) {
	end := len(s)
	for end > 0 && isSpace(s[end-1]) {
		end--
	}
	bs := 0
	for bs < end && s[end-1-bs] == '\\' {
		bs++
	}
	if bs%2 == 0 {
		return s, false
	}
	return s[:end-1], true
}

// unescape drops each backslash and keeps the character after it.
func unescape(s string) string {
	if !strings.Contains(s, `\`) {
		return s
	}
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		if s[i] == '\\' {
			i++
			if i == len(s) {
				break
			}
		}
		b.WriteByte(s[i])
	}
	return b.String()
}

// parseLine reads one logical line: an Include, one pair, or a record.
func parseLine(n int, s string) (confLine, *Problem) {
	line := confLine{n: n}
	if isInclude(s) {
		line.include = true
		return line, nil
	}
	p, rest, ok := nextPair(s)
	if !ok {
		if strings.TrimFunc(s, func(r rune) bool { return r < 0x80 && isSpace(byte(r)) }) == "" {
			return line, nil
		}
		return line, &Problem{Line: n, Why: "not a Key=Value setting; Slurm would not read this file"}
	}
	line.pairs = append(line.pairs, p)
	if recordKeys[strings.ToLower(p.key)] {
		for {
			q, r, ok := nextPair(rest)
			if !ok {
				break
			}
			line.pairs, rest = append(line.pairs, q), r
		}
	}
	if strings.TrimLeft(rest, " \t\n\v\f\r") != "" {
		return line, &Problem{Line: n, Key: canonicalKey(p.key), Why: "more than one setting on the line (only NodeName, PartitionName, NodeSet, DownNodes and FrontendName lines hold several); Slurm would not read this file"}
	}
	return line, nil
}

// isInclude: the line is an Include directive.
func isInclude(s string) bool {
	const word = "include"
	return len(s) >= len(word) && strings.EqualFold(s[:len(word)], word) && (len(s) == len(word) || isSpace(s[len(word)]))
}

// nextPair reads the Key=Value at the start of s (after whitespace), as
// Slurm's regular expression does, and returns what follows it.
func nextPair(s string) (confPair, string, bool) {
	i := skipSpace(s, 0)
	k := i
	for k < len(s) && isKeyByte(s[k]) {
		k++
	}
	if k == i {
		return confPair{}, s, false
	}
	key := s[i:k]
	j := skipSpace(s, k)
	if j < len(s) && strings.IndexByte("+-*/", s[j]) >= 0 {
		j++
	}
	if j >= len(s) || s[j] != '=' {
		return confPair{}, s, false
	}
	v := skipSpace(s, j+1)
	value, end, ok := readValue(s, v)
	if !ok {
		return confPair{}, s, false
	}
	return confPair{key: key, value: value}, s[end:], true
}

// readValue reads a value at s[i:]: "quoted" if whitespace or the end
// follows the closing quote (Slurm's POSIX expression takes the longer
// match, and the quoted one when both are as long), else the run of
// non-whitespace.
func readValue(s string, i int) (string, int, bool) {
	run := i
	for run < len(s) && !isSpace(s[run]) {
		run++
	}
	if i < len(s) && s[i] == '"' {
		if q := strings.IndexByte(s[i+1:], '"'); q >= 0 {
			end := i + 1 + q + 1
			if end == len(s) || isSpace(s[end]) {
				return s[i+1 : end-1], end, true
			}
		}
	}
	if run == i {
		return "", i, false
	}
	return s[i:run], run, true
}

func skipSpace(s string, i int) int {
	for i < len(s) && isSpace(s[i]) {
		i++
	}
	return i
}

// isSpace is C's isspace in the C locale.
func isSpace(c byte) bool {
	return c == ' ' || c == '\t' || c == '\n' || c == '\v' || c == '\f' || c == '\r'
}

func isKeyByte(c byte) bool {
	return c == '_' || c == '.' || ('a' <= c && c <= 'z') || ('A' <= c && c <= 'Z') || ('0' <= c && c <= '9')
}

// Problem is what sparecap refuses in a slurm.conf: the line (0: the
// whole file), the key (as Slurm's documentation spells it, or as
// written) and why.
type Problem struct {
	Line int
	Key  string
	Why  string
}

func (p Problem) String() string {
	var s string
	if p.Line > 0 {
		s = fmt.Sprintf("line %d: ", p.Line)
	}
	if p.Key != "" {
		s += p.Key + ": "
	}
	return s + p.Why
}
