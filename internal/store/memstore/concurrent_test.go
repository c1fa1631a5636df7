package memstore_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"

	"github.com/sparecap/sparecap/internal/domain"
	"github.com/sparecap/sparecap/internal/store"
	"github.com/sparecap/sparecap/internal/store/memstore"
)

// TestReadersDuringUpdates: readers that run while Updates write (some
// of them reading between their own writes, some rolled back) see every
// Update whole or not at all, and never one rolled back. Each Update
// writes three nodes and their events; one in four is rolled back.
func TestReadersDuringUpdates(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	s := memstore.New()
	if err := s.Update(ctx, seedSame); err != nil {
		t.Fatal(err)
	}
	const updates = 60
	done := make(chan struct{})
	var wg sync.WaitGroup
	for r := range 3 {
		wg.Go(func() {
			for i := 0; ; i++ {
				if err := readWhole(ctx, s, r+i); err != nil {
					t.Error(err)
					return
				}
				select {
				case <-done:
					return
				default:
				}
			}
		})
	}
	boom := errors.New("rolled back")
	for u := range updates {
		err := s.Update(ctx, func(tx store.Tx) error {
			for i := range 3 {
				n := domain.Node{ID: fmt.Sprintf("n%d-%d", u, i), ClusterID: "c0", MachineID: fmt.Sprint("m", i),
					State: domain.NodeRemoved, CreatedAt: t0}
				if u%4 == 3 {
					n.ID = "rolled-back-" + n.ID
				}
				if err := tx.CreateNode(ctx, n); err != nil {
					return err
				}
				if _, err := tx.AddEvent(ctx, domain.Event{ID: n.ID, ClusterID: "c0", NodeID: n.ID, Timestamp: t0}); err != nil {
					return err
				}
				if u%2 == 0 {
					if err := readWhole(ctx, s, u); err != nil {
						return err
					}
				}
			}
			if u%4 == 3 {
				return boom
			}
			return nil
		})
		if err != nil && !errors.Is(err, boom) {
			t.Fatal(err)
		}
	}
	close(done)
	wg.Wait()
}

// readWhole reads the nodes (all, or of a cluster) or the events of s, by
// kind, and checks they are whole Updates' and none rolled back.
func readWhole(ctx context.Context, s store.Store, kind int) error {
	var ids []string
	switch kind % 3 {
	case 0, 1:
		f := store.NodeFilter{IncludeRemoved: true}
		if kind%3 == 1 {
			f.ClusterID = "c0"
		}
		ns, err := s.ListNodes(ctx, f)
		if err != nil {
			return err
		}
		for _, n := range ns {
			ids = append(ids, n.ID)
		}
	default:
		es, err := s.ListEvents(ctx, store.EventFilter{})
		if err != nil {
			return err
		}
		for _, e := range es {
			ids = append(ids, e.ID)
		}
	}
	for _, id := range ids {
		if strings.HasPrefix(id, "rolled-back") {
			return fmt.Errorf("read %s, which was rolled back", id)
		}
	}
	if len(ids)%3 != 0 {
		return fmt.Errorf("read %d rows: a part of an Update", len(ids))
	}
	return nil
}
