package server

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"time"

	"github.com/sparecap/sparecap/internal/clock"

	"github.com/sparecap/sparecap/internal/controller"
	"github.com/sparecap/sparecap/internal/ha"
	"github.com/sparecap/sparecap/internal/store"
)

// lockFile takes an exclusive lock on path (created if need be) for as
// long as the process lives or until unlock: a second server on the same
// SQLite file is refused with an error that says so.
func lockFile(path, busy string) (unlock func(), err error) {
	f, err := os.OpenFile(path, os.O_RDWR|os.O_CREATE, 0o600)
	if err != nil {
		return nil, fmt.Errorf("lock %s: %w", path, err)
	}
	if err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB); err != nil {
		f.Close()
		if errors.Is(err, syscall.EWOULDBLOCK) {
			return nil, fmt.Errorf("%s (%s is locked)", busy, path)
		}
		return nil, fmt.Errorf("lock %s: %w", path, err)
	}
	return func() { f.Close() }, nil
}

// serverID returns this server's name in the leader lease, kept in the
// data directory (generated on first start), and locks the directory so
// no other process uses the name while this one runs.
func serverID(dataDir string) (string, func(), error) {
	unlock, err := lockFile(filepath.Join(dataDir, "server.lock"),
		"another sparecap server is using this data directory: every server needs its own --data-dir")
	if err != nil {
		return "", nil, err
	}
	path := filepath.Join(dataDir, "server-id")
	if b, err := os.ReadFile(path); err == nil && len(strings.TrimSpace(string(b))) > 0 {
		return strings.TrimSpace(string(b)), unlock, nil
	}
	var b [6]byte
	_, _ = rand.Read(b[:])
	id := "srv-" + hex.EncodeToString(b[:])
	if err := os.WriteFile(path, []byte(id+"\n"), 0o600); err != nil {
		unlock()
		return "", nil, fmt.Errorf("save server id: %w", err)
	}
	return id, unlock, nil
}

// followPoll is how often a follower looks for new lifecycle events, for
// its event streams (the leader wakes its own at each commit).
const followPoll = 250 * time.Millisecond

// followEvents wakes this server's event streams when the leader commits
// events, while this server follows, so an SSE client connected to any
// server sees every event. It polls on wall, a wall clock.
func followEvents(ctx context.Context, wall clock.Clock, st store.Store, el *ha.Elector, ctrl *controller.Controller) {
	var last int64
	caughtUp := false
	for {
		if el.Epoch() < 0 {
			n, seq, err := newEvents(ctx, st, last)
			if err == nil {
				if n > 0 && caughtUp {
					ctrl.NotifyEvents()
				}
				last, caughtUp = seq, true
			}
		} else {
			caughtUp = false // the leader wakes streams itself
		}
		select {
		case <-ctx.Done():
			return
		case <-wall.After(followPoll):
		}
	}
}

// newEvents counts the events after seq and returns the last one's seq.
func newEvents(ctx context.Context, st store.Store, seq int64) (int, int64, error) {
	n := 0
	for {
		evs, err := st.ListEvents(ctx, store.EventFilter{AfterSeq: seq, Limit: 1000})
		if err != nil {
			return n, seq, err
		}
		if len(evs) == 0 {
			return n, seq, nil
		}
		n += len(evs)
		seq = evs[len(evs)-1].Seq
	}
}
