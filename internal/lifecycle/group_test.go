package lifecycle

import (
	"context"
	"slices"
	"strings"
	"testing"
)

// TestInlineTurnsShareCommits: turns run inline park at their commits
// and are flushed together, in their order, round after round; the
// order of everything they do is fixed.
func TestInlineTurnsShareCommits(t *testing.T) {
	var log, queued []string
	commit := func(ctx context.Context, what string) {
		queued = append(queued, what)
		if !Park(ctx) {
			t.Fatalf("%s: not parked in a group", what)
		}
	}
	flush := func(context.Context) {
		log = append(log, "flush "+strings.Join(queued, ","))
		queued = nil
	}
	run := func(ctx context.Context, key string) {
		log = append(log, key+" reads")
		commit(ctx, key+"1")
		log = append(log, key+" acts")
		if key != "b" { // b ends after one commit
			commit(ctx, key+"2")
		}
	}
	runGrouped(context.Background(), []string{"a", "b", "c"}, run, flush)
	want := []string{"a reads", "b reads", "c reads", "flush a1,b1,c1", "a acts", "b acts", "c acts", "flush a2,c2"}
	if !slices.Equal(log, want) {
		t.Fatalf("got  %q\nwant %q", log, want)
	}
	if Park(context.Background()) {
		t.Fatal("parked outside a group")
	}
}

// TestInlineTurnPanicReachesTheCaller: a turn's panic is raised where the
// group was run, as it would be with the turns run one after another.
func TestInlineTurnPanicReachesTheCaller(t *testing.T) {
	defer func() {
		if v := recover(); v != "boom" {
			t.Fatalf("recovered %v, want the turn's panic", v)
		}
	}()
	runGrouped(context.Background(), []string{"a", "b"}, func(ctx context.Context, key string) {
		if key == "b" {
			panic("boom")
		}
		Park(ctx)
	}, func(context.Context) {})
	t.Fatal("no panic")
}
