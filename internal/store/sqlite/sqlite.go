// Package sqlite is the SQLite backend of store.Store, for a single
// control-plane process: a file database in WAL mode through the pure-Go
// modernc.org/sqlite driver.
//
// One connection writes and a small pool reads. SQLite allows one writer
// at a time anyway; funnelling every Update through one connection makes
// writers queue in database/sql instead of failing with SQLITE_BUSY, and
// makes Update serializable. WAL lets readers and Snapshot run beside the
// writer on a consistent snapshot.
package sqlite

import (
	"context"
	"database/sql"
	"embed"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"log/slog"
	"net/url"
	"os"
	"strings"
	"sync"
	"time"

	"github.com/pressly/goose/v3"
	"modernc.org/sqlite"
	sqlite3 "modernc.org/sqlite/lib"

	"github.com/sparecap/sparecap/internal/store"
	"github.com/sparecap/sparecap/internal/store/sqlstore"
)

//go:embed migrations/*.sql
var migrations embed.FS

// busyTimeout bounds how long a statement waits for a lock held by another
// process (a second sparecap, a backup) before failing.
const busyTimeout = 10 * time.Second

// readers is the size of the read pool.
const readers = 4

// tableSizes walks every page (dbstat): a table's rows are the cells of
// its b-tree's leaves, its bytes its pages and its indexes'.
const tableSizes = `SELECT s.tbl_name,
	SUM(CASE WHEN d.name = s.tbl_name AND d.pagetype = 'leaf' THEN d.ncell ELSE 0 END),
	SUM(d.pgsize)
FROM dbstat d JOIN sqlite_schema s ON s.name = d.name
WHERE s.tbl_name NOT LIKE 'sqlite_%' AND s.tbl_name != 'goose_db_version'
GROUP BY s.tbl_name ORDER BY s.tbl_name`

var dialect = sqlstore.Dialect{
	Name:       "sqlite",
	TableSizes: tableSizes,
	TimeArg:    func(t time.Time) any { return t.UnixMicro() },
	ForeignKeyViolation: func(err error) bool {
		var e *sqlite.Error
		return errors.As(err, &e) && e.Code() == sqlite3.SQLITE_CONSTRAINT_FOREIGNKEY
	},
	UniqueViolation: func(err error) bool {
		var e *sqlite.Error
		return errors.As(err, &e) && e.Code() == sqlite3.SQLITE_CONSTRAINT_UNIQUE
	},
	// Update transactions take the write lock at BEGIN (_txlock
	// immediate), so the epoch read needs no lock of its own.
	NowMicros: `CAST(unixepoch('subsec') * 1000000 AS INTEGER)`,
	// One statement replaces an event (events.seq is AUTOINCREMENT).
	InsertOrReplace: true,
	// UPDATE … FROM (VALUES …): the CASTs to PostgreSQL's type names
	// keep each value's storage class (timestamptz and boolean have
	// NUMERIC affinity, which leaves integers as they are).
	BulkUpdate: true,
	// A usage download holds a read connection while the client reads;
	// one is always left for the Snapshot and the other short reads.
	MaxScans: readers - 1,
}

// Open opens (creating it if needed) the database file at path and
// migrates it to the current schema. The path ":memory:" gives a private
// in-memory database, for tests and dry runs.
func Open(ctx context.Context, path string) (store.Store, error) {
	return OpenWith(ctx, path, sqlstore.Options{})
}

// OpenWith is Open with the store's options (its clock).
func OpenWith(ctx context.Context, path string, o sqlstore.Options) (store.Store, error) {
	if path == "" || strings.ContainsAny(path, "?#") {
		return nil, fmt.Errorf("open sqlite %q: path must be a plain file name", path)
	}
	if path == ":memory:" {
		return openMemory(ctx, o)
	}
	if err := ownerOnly(path); err != nil {
		return nil, fmt.Errorf("open sqlite %s: %w", path, err)
	}
	w, err := openPool(ctx, path, 1, url.Values{
		// synchronous stays FULL: the controller records an intent before
		// it acts, and a commit lost to a power cut would leave an action
		// without its record.
		"_pragma": {"journal_mode(WAL)"},
		// IMMEDIATE takes the write lock at BEGIN, where busy_timeout
		// applies, rather than at the first write, where SQLite fails at
		// once if another process wrote since the transaction's first read.
		"_txlock": {"immediate"},
	})
	if err != nil {
		return nil, fmt.Errorf("open sqlite %s: %w", path, err)
	}
	if err := migrate(ctx, w); err != nil {
		w.Close()
		return nil, fmt.Errorf("open sqlite %s: %w", path, err)
	}
	r, err := openPool(ctx, path, readers, url.Values{"_pragma": {"query_only(1)"}})
	if err != nil {
		w.Close()
		return nil, fmt.Errorf("open sqlite %s: %w", path, err)
	}
	return sqlstore.New(dialect, w, r, o), nil
}

// openMemory opens an in-memory database. It lives as long as its one
// connection, so the pool must never close it and readers share it.
func openMemory(ctx context.Context, o sqlstore.Options) (store.Store, error) {
	db, err := openPool(ctx, ":memory:", 1, nil)
	if err != nil {
		return nil, fmt.Errorf("open sqlite :memory:: %w", err)
	}
	db.SetConnMaxLifetime(0)
	db.SetConnMaxIdleTime(0)
	if err := migrateMemory(ctx, db); err != nil {
		db.Close()
		return nil, fmt.Errorf("open sqlite :memory:: %w", err)
	}
	return sqlstore.New(dialect, db, db, o), nil
}

// memoryImage is the first in-memory database as migrated, serialized:
// every later one starts from it rather than running the migrations
// again, a few hundred milliseconds under the race detector (tests open
// many).
var memoryImage struct {
	sync.Mutex
	b []byte
}

// imager is what a connection of the driver offers to copy a database.
type imager interface {
	Serialize() ([]byte, error)
	Deserialize([]byte) error
}

// migrateMemory migrates db, an in-memory database of one connection, or
// loads memoryImage into it.
func migrateMemory(ctx context.Context, db *sql.DB) error {
	memoryImage.Lock()
	defer memoryImage.Unlock()
	image := memoryImage.b
	if image == nil {
		if err := migrate(ctx, db); err != nil {
			return err
		}
	}
	c, err := db.Conn(ctx)
	if err != nil {
		return err
	}
	defer c.Close()
	return c.Raw(func(dc any) error {
		var im imager
		cc, ok := dc.(*cachingConn)
		if ok {
			im, ok = cc.sqliteConn.(imager)
		}
		if !ok {
			return errors.New("the sqlite driver's connection cannot copy a database")
		}
		if image != nil {
			return im.Deserialize(image)
		}
		memoryImage.b, err = im.Serialize()
		return err
	})
}

// openPool opens a pool of at most n connections, each set up with the
// pragmas every connection needs plus extra.
func openPool(ctx context.Context, path string, n int, extra url.Values) (*sql.DB, error) {
	q := url.Values{"_pragma": {
		fmt.Sprintf("busy_timeout(%d)", busyTimeout.Milliseconds()),
		"foreign_keys(1)",
	}}
	for k, vs := range extra {
		q[k] = append(q[k], vs...)
	}
	db := sql.OpenDB(connector{dsn: path + "?" + q.Encode(), drv: &sqlite.Driver{}})
	db.SetMaxOpenConns(n)
	db.SetMaxIdleConns(n)
	if err := db.PingContext(ctx); err != nil {
		db.Close()
		return nil, err
	}
	return db, nil
}

func migrate(ctx context.Context, db *sql.DB) error { return migrateTo(ctx, db, 0) }

// migrateTo migrates up to version (0: the last).
func migrateTo(ctx context.Context, db *sql.DB, version int64) error {
	fsys, err := fs.Sub(migrations, "migrations")
	if err != nil {
		return err
	}
	p, err := goose.NewProvider(goose.DialectSQLite3, db, fsys,
		goose.WithDisableGlobalRegistry(true),
		goose.WithSlog(slog.New(slog.NewTextHandler(io.Discard, nil))))
	if err != nil {
		return fmt.Errorf("migrate: %w", err)
	}
	if version > 0 {
		_, err = p.UpTo(ctx, version)
	} else {
		_, err = p.Up(ctx)
	}
	if err != nil {
		return fmt.Errorf("migrate: %w", err)
	}
	return nil
}

// ownerOnly creates the database file with mode 0600 if it is not there
// and takes group and other access away from it and its WAL and
// shared-memory files: SQLite creates those two with the database file's
// mode, which would otherwise be the umask's (0644 as a rule).
func ownerOnly(path string) error {
	f, err := os.OpenFile(path, os.O_RDWR|os.O_CREATE, 0o600)
	if err != nil {
		return err
	}
	f.Close()
	for _, p := range []string{path, path + "-wal", path + "-shm"} {
		fi, err := os.Stat(p)
		if errors.Is(err, fs.ErrNotExist) {
			continue
		}
		if err != nil {
			return err
		}
		if fi.Mode().Perm()&0o077 != 0 {
			if err := os.Chmod(p, 0o600); err != nil {
				return err
			}
		}
	}
	return nil
}
