package sim

import (
	"bytes"
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"sync"
)

// The world is persisted as a snapshot plus an append-only log of changes.
//
//   - The snapshot, at Config.StatePath, is the whole world as one JSON
//     object (stateFile), replaced atomically: temp file, fsync, rename,
//     fsync of the directory. It records LogSeq, the sequence number of the
//     last change it includes.
//   - The log, at StatePath + ".log", holds one JSON line per call that
//     changed the world (logRecord): the full new state of each node and
//     machine the call touched, the nodes it deleted and the fleet-wide
//     events it added or bumped, under the call's sequence number. One call
//     is one line, so its changes are applied together or not at all.
//
// Durability: a call that changes the world writes its line and fsyncs the
// log before it returns, as an API server commits to etcd before it
// answers. A crash, of the process or of the machine, therefore loses at
// most the call in flight, which never reported success. Its partial line,
// the log's torn tail, is ignored by New. Anything unreadable followed by a
// readable line is corruption and makes New fail.
//
// New loads the snapshot, replays the log lines with a sequence number
// above the snapshot's LogSeq (lines at or below it are already in the
// snapshot: a crash between writing a snapshot and removing the log leaves
// them behind), then compacts if the log held anything: it writes a new
// snapshot and removes the log. A running Fleet compacts once the log
// outgrows compactRatio times the snapshot (and at least minCompactLog), so
// replay stays bounded and the cost of a change stays independent of the
// fleet's size. The first change of a world with no snapshot yet writes
// one, so the file at StatePath exists from the first change on.
//
// A reader that copies a live state (a snapshot and its log) must copy the
// log first: a compaction in between then yields an old log and a newer
// snapshot, whose LogSeq makes the old lines harmless.

const (
	// stateVersion 2: a snapshot followed by a log. Version 1, the whole
	// world rewritten on every change and no log, loads as a snapshot.
	stateVersion = 2
	// compactRatio: compact once the log is this many times the snapshot.
	compactRatio = 4
	// minCompactLog: never compact a log smaller than this (store.minCompact,
	// which tests lower).
	minCompactLog = 1 << 20
)

// stateFile is the JSON form of the snapshot, with nodes and machines as
// sorted lists so the file is stable.
type stateFile struct {
	Version  int   `json:"version"`
	EventSeq int64 `json:"eventSeq"`
	// LogSeq is the sequence number of the last log record included.
	LogSeq   int64      `json:"logSeq,omitempty"`
	Nodes    []*node    `json:"nodes"`
	Machines []*machine `json:"machines"`
	Events   []*event   `json:"events"`
}

// change is what one call changed; its zero value is no change. The
// pointers are encoded at once, while the fleet's lock is held.
type change struct {
	Nodes       []*node    `json:"nodes,omitempty"`
	DeleteNodes []nodeRef  `json:"deleteNodes,omitempty"`
	Machines    []*machine `json:"machines,omitempty"`
	// Events are entries of the fleet-wide event log, added or updated
	// (matched by Seq).
	Events []*event `json:"events,omitempty"`
}

func (c *change) empty() bool {
	return len(c.Nodes) == 0 && len(c.DeleteNodes) == 0 && len(c.Machines) == 0 && len(c.Events) == 0
}

// changedNode is a change to one node, or no change if changed is false.
func changedNode(n *node, changed bool) change {
	if !changed {
		return change{}
	}
	return change{Nodes: []*node{n}}
}

type nodeRef struct {
	ClusterID string `json:"clusterID"`
	Name      string `json:"name"`
}

// logRecord is one line of the log.
type logRecord struct {
	Seq int64 `json:"seq"`
	change
}

// store is where a Fleet's world lives on disk.
type store struct {
	path    string // the snapshot
	logPath string
	log     *os.File // open for appending; nil until the next append
	// logSize and snapSize are the sizes of the log and of the snapshot
	// (0 if none has been written yet).
	logSize, snapSize int64
	minCompact        int64
	// seq is the sequence number of the last change written, to the log or
	// into the snapshot.
	seq int64
	// stale: the files lag behind the world in memory (a write failed, or
	// the log ends in a torn record that was not cut off yet); the next
	// change, or retry, writes a snapshot instead of appending.
	stale bool

	// Group commit: lines are written under the fleet's lock and fsynced
	// outside it, one fsync for every line written by then. Under smu:
	smu      sync.Mutex
	written  int64         // seq of the last line written to the log
	synced   int64         // every change up to this seq is on disk
	syncing  bool          // an fsync is running
	syncDone chan struct{} // closed when the running fsync ends
	syncErr  error         // the last fsync's error
	// syncFailed: an fsync failed; the next save writes a snapshot.
	syncFailed bool
	// syncFile fsyncs the log (nil: (*os.File).Sync; tests stall it).
	syncFile func(*os.File) error
}

// durable reports whether every change up to seq is on disk.
func (s *store) durable(seq int64) bool {
	s.smu.Lock()
	defer s.smu.Unlock()
	return s.synced >= seq
}

// waitSync returns once every change up to seq is on disk, running the
// fsync itself unless one is running already (then it waits for that
// one, and runs another if the lines it waits for came after). It is
// called without the fleet's lock.
func (s *store) waitSync(ctx context.Context, seq int64) error {
	s.smu.Lock()
	defer s.smu.Unlock()
	for s.synced < seq {
		if !s.syncing {
			target, file := s.written, s.log
			if file == nil || target < seq {
				// Nothing left to sync (a snapshot made it durable) or not
				// written (a failed write: that call reported it).
				return nil
			}
			// The fsync runs on its own goroutine, so even the caller that
			// started it can give up at its ctx's end while the disk stalls.
			s.syncing, s.syncDone, s.syncErr = true, make(chan struct{}), nil
			go s.sync(file, target, s.syncDone)
		}
		done := s.syncDone
		s.smu.Unlock()
		select {
		case <-done:
		case <-ctx.Done():
			s.smu.Lock()
			return ctx.Err()
		}
		s.smu.Lock()
		if s.syncErr != nil && s.synced < seq {
			return fmt.Errorf("save sim state: sync log: %w", s.syncErr)
		}
	}
	return nil
}

// sync fsyncs file, which holds every line up to target, and ends the
// round done.
func (s *store) sync(file *os.File, target int64, done chan struct{}) {
	fsync := s.syncFile
	if fsync == nil {
		fsync = (*os.File).Sync
	}
	err := fsync(file)
	s.smu.Lock()
	defer s.smu.Unlock()
	s.syncing, s.syncErr = false, err
	if err != nil {
		s.syncFailed = true
	} else {
		s.synced = max(s.synced, target)
	}
	close(done)
}

// quiesce waits until no fsync runs, with smu held, for the compaction
// that replaces the log.
func (s *store) quiesce() {
	for s.syncing {
		done := s.syncDone
		s.smu.Unlock()
		<-done
		s.smu.Lock()
	}
}

func logPath(statePath string) string { return statePath + ".log" }

// openStore loads the world from the snapshot at path and its log, and
// compacts if the log held anything. A failed compaction is not an error
// here: the store is stale and the next change retries it.
func openStore(path string) (*store, world, error) {
	s := &store{path: path, logPath: logPath(path), minCompact: minCompactLog}
	w := newWorld()
	// The log first, as a copying reader would (see above); this process
	// is its only writer, so the order only matters for them.
	logData, err := os.ReadFile(s.logPath)
	if err != nil && !errors.Is(err, fs.ErrNotExist) {
		return nil, world{}, fmt.Errorf("load sim log: %w", err)
	}
	data, err := os.ReadFile(path)
	switch {
	case errors.Is(err, fs.ErrNotExist):
	case err != nil:
		return nil, world{}, fmt.Errorf("load sim state: %w", err)
	default:
		if w, s.seq, err = decodeSnapshot(data); err != nil {
			return nil, world{}, fmt.Errorf("load sim state %s: %w", path, err)
		}
		s.snapSize = int64(len(data))
	}
	if err := s.replay(&w, logData); err != nil {
		return nil, world{}, fmt.Errorf("load sim log %s: %w", s.logPath, err)
	}
	if len(logData) > 0 {
		s.stale = s.compact(&w) != nil
	}
	return s, w, nil
}

func decodeSnapshot(data []byte) (world, int64, error) {
	var sf stateFile
	if err := json.Unmarshal(data, &sf); err != nil {
		return world{}, 0, err
	}
	if sf.Version != 1 && sf.Version != stateVersion {
		return world{}, 0, fmt.Errorf("unknown version %d", sf.Version)
	}
	w := newWorld()
	w.EventSeq = sf.EventSeq
	w.Events = sf.Events
	for _, n := range sf.Nodes {
		w.putNode(n)
	}
	for _, m := range sf.Machines {
		w.machines[m.ID] = m
	}
	return w, sf.LogSeq, nil
}

// replay applies the log's records above s.seq to w. An undecodable last
// line, or a last line without its newline, is a torn write and ignored.
func (s *store) replay(w *world, data []byte) error {
	for lineNo := 1; len(data) > 0; lineNo++ {
		line, rest, complete := bytes.Cut(data, []byte("\n"))
		data = rest
		if len(bytes.TrimSpace(line)) == 0 {
			continue
		}
		var rec logRecord
		err := json.Unmarshal(line, &rec)
		if !complete || err != nil {
			if onlyPadding(rest) {
				s.stale = true // torn: cut off before the next append
				return nil
			}
			if err == nil {
				err = errors.New("no newline")
			}
			return fmt.Errorf("line %d: %w", lineNo, err)
		}
		if rec.Seq <= s.seq {
			continue // already in the snapshot
		}
		w.apply(&rec.change)
		s.seq = rec.Seq
	}
	return nil
}

// onlyPadding reports whether b holds nothing but whitespace and the zero
// bytes a file system may leave past the last write after a crash.
func onlyPadding(b []byte) bool {
	return len(bytes.Trim(b, " \t\r\n\x00")) == 0
}

// apply applies a logged change to w.
func (w *world) apply(c *change) {
	for _, n := range c.Nodes {
		w.putNode(n)
	}
	for _, r := range c.DeleteNodes {
		delete(w.nodes, nodeKey{r.ClusterID, r.Name})
	}
	for _, m := range c.Machines {
		w.machines[m.ID] = m
	}
	for _, e := range c.Events {
		w.EventSeq = max(w.EventSeq, e.Seq)
		i, found := slices.BinarySearchFunc(w.Events, e.Seq, func(ev *event, seq int64) int {
			return cmp.Compare(ev.Seq, seq)
		})
		switch {
		case found:
			w.Events[i] = e
		case i == len(w.Events):
			w.Events = append(w.Events, e)
			if over := len(w.Events) - maxLogEvents; over > 0 {
				w.Events = slices.Delete(w.Events, 0, over)
			}
		}
		// Otherwise it is older than the log's window: dropped, as the
		// live fleet would have.
	}
}

// putNode stores a decoded node.
func (w *world) putNode(n *node) {
	if n.Labels == nil {
		n.Labels = map[string]string{}
	}
	if n.Annotations == nil {
		n.Annotations = map[string]string{}
	}
	w.nodes[nodeKey{n.ClusterID, n.Name}] = n
}

// save persists the change c to w: one fsynced line appended to the log,
// or a new snapshot if the store is stale or has none yet. A failure
// leaves the store stale, so the next call writes a snapshot.
func (s *store) save(w *world, c change) error {
	s.smu.Lock()
	if s.syncFailed {
		s.stale, s.syncFailed = true, false
	}
	s.smu.Unlock()
	if c.empty() && !s.stale {
		return nil
	}
	s.seq++
	if s.stale || s.snapSize == 0 {
		if err := s.compact(w); err != nil {
			s.stale = true
			return fmt.Errorf("save sim state: %w", err)
		}
		s.stale = false
		return nil
	}
	if err := s.append(logRecord{Seq: s.seq, change: c}); err != nil {
		s.stale = true
		return fmt.Errorf("save sim state: %w", err)
	}
	if s.logSize > compactRatio*s.snapSize && s.logSize > s.minCompact {
		// The change is durable already; a failed compaction leaves a
		// valid, longer log and is tried again after the next append.
		_ = s.compact(w)
	}
	return nil
}

func (s *store) append(rec logRecord) error {
	line, err := json.Marshal(rec)
	if err != nil {
		return fmt.Errorf("encode log record: %w", err)
	}
	line = append(line, '\n')
	if s.log == nil {
		f, err := os.OpenFile(s.logPath, os.O_WRONLY|os.O_CREATE|os.O_APPEND, 0o600)
		if err != nil {
			return fmt.Errorf("open log: %w", err)
		}
		syncDir(filepath.Dir(s.logPath)) // the new file's name
		s.smu.Lock()
		s.log = f
		s.smu.Unlock()
	}
	if _, err := s.log.Write(line); err != nil {
		return fmt.Errorf("append to log: %w", err)
	}
	// Not synced here: see waitSync.
	s.smu.Lock()
	s.written = rec.Seq
	s.smu.Unlock()
	s.logSize += int64(len(line))
	return nil
}

// compact writes w, which includes every change up to s.seq, as the new
// snapshot and removes the log.
func (s *store) compact(w *world) error {
	sf := stateFile{Version: stateVersion, EventSeq: w.EventSeq, LogSeq: s.seq, Events: w.Events}
	sf.Nodes = make([]*node, 0, len(w.nodes))
	for _, n := range w.nodes {
		sf.Nodes = append(sf.Nodes, n)
	}
	slices.SortFunc(sf.Nodes, func(a, b *node) int {
		return cmp.Or(cmp.Compare(a.ClusterID, b.ClusterID), cmp.Compare(a.Name, b.Name))
	})
	sf.Machines = make([]*machine, 0, len(w.machines))
	for _, m := range w.machines {
		sf.Machines = append(sf.Machines, m)
	}
	slices.SortFunc(sf.Machines, func(a, b *machine) int { return cmp.Compare(a.ID, b.ID) })
	data, err := json.Marshal(sf)
	if err != nil {
		return fmt.Errorf("encode snapshot: %w", err)
	}
	if err := writeAtomic(s.path, data); err != nil {
		return fmt.Errorf("write snapshot: %w", err)
	}
	s.snapSize = int64(len(data))
	// Every change up to s.seq is on disk in the snapshot.
	s.smu.Lock()
	s.quiesce()
	s.synced, s.written = max(s.synced, s.seq), max(s.written, s.seq)
	if s.log != nil {
		s.log.Close()
		s.log = nil
	}
	s.smu.Unlock()
	s.logSize = 0
	// The snapshot holds everything the log did; should the removal not
	// reach the disk, LogSeq makes the old lines harmless on replay.
	if err := os.Remove(s.logPath); err != nil && !errors.Is(err, fs.ErrNotExist) {
		return fmt.Errorf("remove log: %w", err)
	}
	return nil
}

// writeAtomic replaces path with data so that a crash leaves either the old
// or the new file: temp file in the same directory, fsync, rename, fsync of
// the directory.
func writeAtomic(path string, data []byte) (err error) {
	dir := filepath.Dir(path)
	tmp, err := os.CreateTemp(dir, filepath.Base(path)+".tmp-*")
	if err != nil {
		return fmt.Errorf("create temp file: %w", err)
	}
	defer func() {
		if err != nil {
			tmp.Close()
			os.Remove(tmp.Name())
		}
	}()
	if _, err = tmp.Write(data); err != nil {
		return fmt.Errorf("write temp file: %w", err)
	}
	if err = tmp.Sync(); err != nil {
		return fmt.Errorf("sync temp file: %w", err)
	}
	if err = tmp.Close(); err != nil {
		return fmt.Errorf("close temp file: %w", err)
	}
	if err = os.Rename(tmp.Name(), path); err != nil {
		return fmt.Errorf("rename temp file: %w", err)
	}
	syncDir(dir)
	return nil
}

// syncDir makes a rename or a new file in dir durable; best effort, as
// some systems cannot sync directories.
func syncDir(dir string) {
	if d, err := os.Open(dir); err == nil {
		d.Sync()
		d.Close()
	}
}
