package api

import (
	"bufio"
	"bytes"
	"encoding/csv"
	"encoding/json"
	"net/http"
	"time"

	"github.com/sparecap/sparecap/internal/apiv1"
	"github.com/sparecap/sparecap/internal/billing"
	"github.com/sparecap/sparecap/internal/clock"
	"github.com/sparecap/sparecap/internal/store"
)

// streamUsage serves the ungrouped usage (one line per node and price
// stretch) as the store reads the records: each line is priced and written
// as its record arrives, so a period of a million records never sits in
// memory. The bytes are those writeJSON and writeUsageCSV write for the
// whole document.
//
// A failure before the first line is an ordinary error response. After it
// the status is sent; the connection is then aborted (http.ErrAbortHandler)
// so that the client sees a broken transfer, never a complete-looking
// document with lines missing.
func (s *Server) streamUsage(w http.ResponseWriter, r *http.Request, f store.UsageFilter, b *billing.Book, from, to time.Time, csvOut bool) {
	out := &usageStream{w: w, wall: s.realClock, csv: csvOut, from: from, to: to,
		head: apiv1.Usage{Currency: Currency, From: from, To: to, GroupBy: "node", Rounding: rounding}}
	p := newPricer(b, from, to, nil)
	p.emit = out.line
	err := s.store.ScanUsage(r.Context(), f, p.add)
	if err == nil {
		pr := p.result()
		out.head.Totals, out.head.ByClass = totalsView(pr.total), byClassView(pr.byClass)
		err = out.finish()
	}
	if err == nil {
		return
	}
	if !out.started {
		s.fail(w, r, err)
		return
	}
	if r.Context().Err() == nil {
		s.log.Error("usage: response cut short", "err", err)
	}
	panic(http.ErrAbortHandler)
}

// usageStream writes a usage document line by line.
type usageStream struct {
	w        http.ResponseWriter
	wall     clock.Clock // times the write deadlines
	csv      bool
	from, to time.Time
	head     apiv1.Usage // everything but the lines
	started  bool
	n        int
	// JSON
	bw     *bufio.Writer
	suffix []byte
	buf    bytes.Buffer
	enc    *json.Encoder
	// compact: no indentation (see wantsPretty)
	compact bool
	// CSV
	cw *csv.Writer
	// rc moves the write deadline on as lines go out: a long query may
	// outlast the server's write timeout, a client that stops reading may
	// not.
	rc *http.ResponseController
}

// jsonParts splits the document writeJSON writes for u, without lines,
// around the inside of its line_items array: prefix ends with its '[',
// suffix starts with its ']'.
func jsonParts(u apiv1.Usage, compact bool) (prefix, suffix []byte) {
	u.LineItems = []apiv1.UsageLine{}
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	lineItems := []byte(`"line_items":[]`)
	if !compact {
		enc.SetIndent("", "  ")
		lineItems = []byte(`"line_items": []`)
	}
	_ = enc.Encode(u)
	doc := buf.Bytes()
	i := bytes.Index(doc, lineItems) + len(lineItems) - 1 // at the ']'
	return doc[:i], doc[i:]
}

func (u *usageStream) start() {
	u.started = true
	u.rc = http.NewResponseController(u.w)
	u.rc.SetWriteDeadline(u.wall.Now().Add(streamWriteTimeout))
	if u.csv {
		u.cw = startUsageCSV(u.w, usageCSVName(u.from, u.to), false)
		return
	}
	u.w.Header().Set("Content-Type", "application/json")
	u.w.WriteHeader(http.StatusOK)
	u.bw = bufio.NewWriterSize(u.w, 32<<10)
	u.compact = compactJSON(u.w)
	prefix, _ := jsonParts(u.head, u.compact)
	u.bw.Write(prefix)
	// An element of line_items, as the document's encoder indents it.
	u.enc = json.NewEncoder(&u.buf)
	if !u.compact {
		u.enc.SetIndent("    ", "  ")
	}
}

func (u *usageStream) line(l apiv1.UsageLine) error {
	if !u.started {
		u.start()
	}
	u.n++
	if u.n%1024 == 0 {
		u.rc.SetWriteDeadline(u.wall.Now().Add(streamWriteTimeout))
	}
	if u.csv {
		if err := writeCSVLine(u.cw, l, false); err != nil {
			return err
		}
		return u.cw.Error()
	}
	u.buf.Reset()
	if u.n > 1 {
		u.buf.WriteByte(',')
	}
	if !u.compact {
		u.buf.WriteString("\n    ")
	}
	if err := u.enc.Encode(l); err != nil {
		return err
	}
	_, err := u.bw.Write(bytes.TrimSuffix(u.buf.Bytes(), []byte("\n")))
	return err
}

func (u *usageStream) finish() error {
	if !u.started {
		u.start()
	}
	if u.csv {
		endUsageCSV(u.cw, u.head.Totals, false)
		return u.cw.Error()
	}
	if u.n > 0 && !u.compact {
		u.bw.WriteString("\n  ")
	}
	_, suffix := jsonParts(u.head, u.compact)
	u.bw.Write(suffix)
	return u.bw.Flush()
}
