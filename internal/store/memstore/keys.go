package memstore

import (
	"cmp"
	"math"
	"strings"
	"time"

	"github.com/sparecap/sparecap/internal/bound"
	"github.com/sparecap/sparecap/internal/store"
)

// Values are kept as the SQL backends (package sqlstore) keep them, so
// that what is read back is what they would return: times in UTC,
// truncated to the microsecond, the zero time standing for NULL; the text
// an outsider fills cut to store.MaxText.

// dbTime is t as stored and read back: the zero time stays zero (NULL),
// any other time becomes its microsecond in UTC.
func dbTime(t time.Time) time.Time {
	if t.IsZero() {
		return t
	}
	return time.UnixMicro(readBack(t).UnixMicro()).UTC()
}

// readBack is t as sqlstore hands a written time back without reading it
// (AddEvent's result).
func readBack(t time.Time) time.Time {
	if t.IsZero() {
		return t
	}
	return t.Truncate(time.Microsecond).UTC()
}

// tkey is a stored time as the backends order it: NULL (the zero time)
// before every other time, then by microsecond.
func tkey(t time.Time) int64 {
	if t.IsZero() {
		return math.MinInt64
	}
	return t.UnixMicro()
}

// text is s as stored in a column an outsider fills.
func text(s string) string { return bound.Text(s, store.MaxText) }

// The keys of the tables and indexes, each with its order.

// tid orders by a time (tkey) or a sequence number, then an ID.
type tid struct {
	t  int64
	id string
}

func cmpTID(a, b tid) int {
	if c := cmp.Compare(a.t, b.t); c != 0 {
		return c
	}
	return strings.Compare(a.id, b.id)
}

// stid orders by a string (a parent's ID), then as tid.
type stid struct {
	s  string
	t  int64
	id string
}

func cmpSTID(a, b stid) int {
	if c := strings.Compare(a.s, b.s); c != 0 {
		return c
	}
	if c := cmp.Compare(a.t, b.t); c != 0 {
		return c
	}
	return strings.Compare(a.id, b.id)
}

// sttid orders by a string, two times, then an ID.
type sttid struct {
	s    string
	t, u int64
	id   string
}

func cmpSTTID(a, b sttid) int {
	if c := strings.Compare(a.s, b.s); c != 0 {
		return c
	}
	if c := cmp.Compare(a.t, b.t); c != 0 {
		return c
	}
	if c := cmp.Compare(a.u, b.u); c != 0 {
		return c
	}
	return strings.Compare(a.id, b.id)
}

// sstid orders by two strings, then a time and an ID.
type sstid struct {
	a, b string
	t    int64
	id   string
}

func cmpSSTID(a, b sstid) int {
	if c := cmpSS(ss{a.a, a.b}, ss{b.a, b.b}); c != 0 {
		return c
	}
	return cmpTID(tid{a.t, a.id}, tid{b.t, b.id})
}

// ss orders by two strings.
type ss struct{ a, b string }

func cmpSS(a, b ss) int {
	if c := strings.Compare(a.a, b.a); c != 0 {
		return c
	}
	return strings.Compare(a.b, b.b)
}

// sss orders by three strings.
type sss struct{ a, b, c string }

func cmpSSS(a, b sss) int {
	if c := cmpSS(ss{a.a, a.b}, ss{b.a, b.b}); c != 0 {
		return c
	}
	return strings.Compare(a.c, b.c)
}

// ssi orders by two strings, then a number.
type ssi struct {
	a, b string
	n    int64
}

func cmpSSI(a, b ssi) int {
	if c := cmpSS(ss{a.a, a.b}, ss{b.a, b.b}); c != 0 {
		return c
	}
	return cmp.Compare(a.n, b.n)
}

// ii orders by two numbers.
type ii struct{ a, b int64 }

func cmpII(a, b ii) int {
	if c := cmp.Compare(a.a, b.a); c != 0 {
		return c
	}
	return cmp.Compare(a.b, b.b)
}

// limited reports whether n rows reach a LIMIT of limit, as SQLite reads
// it: a negative limit is no limit.
func limited(n, limit int) bool { return limit >= 0 && n >= limit }

// minKey is the time of NULL in a key: before every time.
const minKey = math.MinInt64

func cmpString(a, b string) int { return strings.Compare(a, b) }
