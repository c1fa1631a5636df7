package slurm

import (
	"fmt"
	"strconv"
	"strings"
	"time"
)

// A job's mark is what sparecap promised it at a notice, written on the
// job (its AdminComment, which only operators can set) so that a
// restarted sparecap keeps the promise:
//
//	sparecap:notice node=NODE run=N by=RFC3339 [killed] [requeued]; NOTICE
//
// or, on a job sparecap posted a notice on but never noticed (a job on a
// node drained for a reason the tenant did not cause, say):
//
//	sparecap:notice none; NOTICE
//
// run is the job's restart count when it was noticed (a requeued job that
// runs again is a new run, which this notice does not reach); by is when
// it must be gone; killed: its deadline came and sparecap ended it;
// requeued: sparecap requeued it (once per notice). NOTICE is the last
// notice posted on the job, for the tenant to read. Text someone else
// wrote before the mark is kept.
type mark struct {
	Node     string
	Run      int
	By       time.Time
	Killed   bool
	Requeued bool
	Notice   string
}

const markPrefix = "sparecap:notice"

// parseMark reads the mark in a job's AdminComment; ok is false if there
// is none (m.Notice may still hold a notice). foreign is the text before
// it.
func parseMark(comment string) (m mark, foreign string, ok bool) {
	i := strings.Index(comment, markPrefix)
	if i < 0 {
		return mark{}, comment, false
	}
	foreign = strings.TrimRight(comment[:i], " |")
	rest := comment[i+len(markPrefix):]
	head, notice, _ := strings.Cut(rest, ";")
	m.Notice = strings.TrimSpace(notice)
	if strings.TrimSpace(head) == "none" {
		return m, foreign, false
	}
	for _, f := range strings.Fields(head) {
		k, v, _ := strings.Cut(f, "=")
		switch k {
		case "node":
			m.Node = v
		case "run":
			m.Run, _ = strconv.Atoi(v)
		case "by":
			m.By, _ = time.Parse(time.RFC3339, v)
		case "killed":
			m.Killed = true
		case "requeued":
			m.Requeued = true
		}
	}
	return m, foreign, true
}

// String is the mark as written in the AdminComment.
func (m mark) String() string {
	if m.By.IsZero() {
		return markPrefix + " none; " + strings.ReplaceAll(m.Notice, "\n", " ")
	}
	s := fmt.Sprintf("%s node=%s run=%d by=%s", markPrefix, m.Node, m.Run, m.By.UTC().Format(time.RFC3339))
	if m.Killed {
		s += " killed"
	}
	if m.Requeued {
		s += " requeued"
	}
	if m.Notice != "" {
		s += "; " + strings.ReplaceAll(m.Notice, "\n", " ")
	}
	return s
}

// comment is the AdminComment that carries m after foreign.
func comment(foreign string, m mark) string {
	if foreign == "" {
		return m.String()
	}
	return foreign + " | " + m.String()
}

// jobMark is the mark of j's current run, if it has one.
func jobMark(j *jobInfo) (mark, bool) {
	m, _, ok := parseMark(j.AdminComment)
	if !ok || m.Run != j.Restarts {
		return mark{}, false
	}
	return m, true
}

// awaitsRequeue: j was noticed, has ended, and sparecap has yet to
// requeue it.
func awaitsRequeue(j *jobInfo) bool {
	m, ok := jobMark(j)
	return ok && j.finished() && j.Requeue && j.BatchFlag && !m.Requeued
}
