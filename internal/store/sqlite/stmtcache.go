package sqlite

import (
	"context"
	"database/sql/driver"
	"errors"
	"strings"

	sqlite "modernc.org/sqlite"
)

// maxCachedStmts bounds the statements one connection keeps prepared. The
// store's queries are a few dozen texts; filters with IN lists make more,
// and past the bound the least recently used is finalized.
const maxCachedStmts = 256

// connector opens connections that keep their prepared statements: a
// query's SQL text is parsed once per connection rather than on every
// call. database/sql prepares and finalizes a statement per call when the
// driver takes queries directly, and parsing was a fifth of the server's
// CPU while a fleet was being created.
type connector struct {
	dsn string
	drv *sqlite.Driver
}

func (c connector) Connect(context.Context) (driver.Conn, error) {
	cn, err := c.drv.Open(c.dsn)
	if err != nil {
		return nil, err
	}
	inner, ok := cn.(sqliteConn)
	if !ok {
		cn.Close()
		return nil, errors.New("sqlite driver connection lacks the context methods")
	}
	return &cachingConn{sqliteConn: inner, stmts: map[string]*cachedStmt{}}, nil
}

func (c connector) Driver() driver.Driver { return c.drv }

// sqliteConn is what database/sql uses of a modernc connection.
type sqliteConn interface {
	driver.Conn
	driver.ConnBeginTx
	driver.ConnPrepareContext
	driver.ExecerContext
	driver.QueryerContext
	driver.Pinger
	driver.SessionResetter
	driver.Validator
}

// cachingConn is a connection with its statements kept by SQL text.
// database/sql uses a connection from one goroutine at a time (a Rows'
// Close included), so the cache needs no lock of its own.
type cachingConn struct {
	sqliteConn
	stmts    map[string]*cachedStmt
	tick     uint64 // for least recently used
	prepares int    // statements prepared for the cache (for tests)
}

type cachedStmt struct {
	st interface {
		driver.Stmt
		driver.StmtExecContext
		driver.StmtQueryContext
	}
	// busy: rows read from it are still open; a second use of the same
	// text meanwhile gets a statement of its own.
	busy bool
	used uint64
}

// stmt returns the cached statement for query, preparing it if needed;
// nil when the query is not to be cached (a script of several
// statements, or its statement is busy).
func (c *cachingConn) stmt(ctx context.Context, query string) (*cachedStmt, error) {
	c.tick++
	if s, ok := c.stmts[query]; ok {
		if s.busy {
			return nil, nil
		}
		s.used = c.tick
		return s, nil
	}
	if strings.Contains(query, ";") {
		return nil, nil
	}
	ds, err := c.sqliteConn.PrepareContext(ctx, query)
	if err != nil {
		return nil, err
	}
	st, ok := ds.(interface {
		driver.Stmt
		driver.StmtExecContext
		driver.StmtQueryContext
	})
	if !ok {
		ds.Close()
		return nil, nil
	}
	if len(c.stmts) >= maxCachedStmts {
		c.evict()
	}
	c.prepares++
	s := &cachedStmt{st: st, used: c.tick}
	c.stmts[query] = s
	return s, nil
}

// evict finalizes the least recently used statement not in use.
func (c *cachingConn) evict() {
	var oldest string
	var at uint64
	for q, s := range c.stmts {
		if !s.busy && (oldest == "" || s.used < at) {
			oldest, at = q, s.used
		}
	}
	if oldest != "" {
		c.stmts[oldest].st.Close()
		delete(c.stmts, oldest)
	}
}

func (c *cachingConn) ExecContext(ctx context.Context, query string, args []driver.NamedValue) (driver.Result, error) {
	s, err := c.stmt(ctx, query)
	if err != nil {
		return nil, err
	}
	if s == nil {
		return c.sqliteConn.ExecContext(ctx, query, args)
	}
	return s.st.ExecContext(ctx, args)
}

func (c *cachingConn) QueryContext(ctx context.Context, query string, args []driver.NamedValue) (driver.Rows, error) {
	s, err := c.stmt(ctx, query)
	if err != nil {
		return nil, err
	}
	if s == nil {
		return c.sqliteConn.QueryContext(ctx, query, args)
	}
	rows, err := s.st.QueryContext(ctx, args)
	if err != nil {
		return nil, err
	}
	s.busy = true
	return &cachedRows{Rows: rows, s: s}, nil
}

func (c *cachingConn) Close() error {
	for q, s := range c.stmts {
		s.st.Close()
		delete(c.stmts, q)
	}
	return c.sqliteConn.Close()
}

// cachedRows frees its statement for the next use when closed (the
// driver resets the statement rather than finalizing it).
type cachedRows struct {
	driver.Rows
	s      *cachedStmt
	closed bool
}

func (r *cachedRows) Close() error {
	if r.closed {
		return nil
	}
	r.closed = true
	err := r.Rows.Close()
	r.s.busy = false
	return err
}
