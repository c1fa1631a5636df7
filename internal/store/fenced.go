package store

import (
	"context"
	"sync/atomic"
)

// Fenced is a Store whose Updates carry the epoch set with SetEpoch (see
// WithEpoch), for the parts of a server that write only while it leads
// (the controller, the meter, the API behind the write forwarder). A new
// Fenced is unfenced until SetEpoch is called; a context that already
// carries an epoch keeps it.
type Fenced struct {
	Store
	epoch atomic.Int64
	set   atomic.Bool
}

// NewFenced wraps st.
func NewFenced(st Store) *Fenced { return &Fenced{Store: st} }

// SetEpoch fences every later Update with epoch: the current term while
// this server leads, -1 while it does not.
func (f *Fenced) SetEpoch(epoch int64) {
	f.epoch.Store(epoch)
	f.set.Store(true)
}

// Epoch returns the epoch set last (0 if none was).
func (f *Fenced) Epoch() int64 { return f.epoch.Load() }

// Update runs fn fenced by the current epoch.
func (f *Fenced) Update(ctx context.Context, fn func(Tx) error) error {
	if _, ok := EpochOf(ctx); !ok && f.set.Load() {
		ctx = WithEpoch(ctx, f.epoch.Load())
	}
	return f.Store.Update(ctx, fn)
}
