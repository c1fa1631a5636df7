package memstore_test

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/sparecap/sparecap/internal/domain"
	"github.com/sparecap/sparecap/internal/store"
	"github.com/sparecap/sparecap/internal/store/memstore"
	"github.com/sparecap/sparecap/internal/store/sqlite"
)

// TestSameAsSQLite: random transactions, many of them refused in part or
// whole (taken keys, missing parents, busy machines, NULLs, rollbacks),
// answer on this store exactly as on SQLite, and so does every read after
// each: values, orders and errors.
func TestSameAsSQLite(t *testing.T) {
	steps := 400
	switch {
	case memstore.Race:
		steps = 12
	case testing.Short():
		steps = 100
	}
	for seed := range uint64(4) {
		t.Run(fmt.Sprint("seed=", seed), func(t *testing.T) {
			t.Parallel()
			same(t, seed, steps)
		})
	}
}

func same(t *testing.T, seed uint64, steps int) {
	ctx := t.Context()
	q, err := sqlite.Open(ctx, ":memory:")
	if err != nil {
		t.Fatal(err)
	}
	defer q.Close()
	m := memstore.New()
	defer m.Close()
	g := &gen{rng: rand.New(rand.NewPCG(seed, 7))}
	for _, s := range []store.Store{m, q} {
		if err := s.Update(ctx, seedSame); err != nil {
			t.Fatal(err)
		}
	}
	for step := range steps {
		g.step = step
		ops := g.ops()
		rollback := g.rng.IntN(10) == 0
		// One time in three, reads made outside memstore's transaction
		// while it is open, after one of its operations and after the
		// last, answer as before it: its writes after the first such
		// read leave what that read was given as it was.
		mid, during := -1, []read(nil)
		var before []any
		if g.pick(3) == 0 {
			mid, during = g.pick(len(ops)), g.reads()
			before = readAll(ctx, m, during)
		}
		var got, want []any
		run := func(s store.Store, out *[]any) error {
			return s.Update(ctx, func(tx store.Tx) error {
				*out = (*out)[:0]
				for i, o := range ops {
					*out = append(*out, o.run(ctx, tx))
					if s == m && (i == mid || (mid >= 0 && i == len(ops)-1)) {
						sameReads(t, fmt.Sprintf("step %d, while op %d (%s) is not committed", step, i, o.name), during,
							readAll(ctx, m, during), before)
					}
				}
				if rollback {
					return errRollback
				}
				return nil
			})
		}
		errM, errQ := run(m, &got), run(q, &want)
		for i := range ops {
			if !reflect.DeepEqual(got[i], want[i]) {
				t.Fatalf("step %d, op %d (%s):\n memstore %#v\n   sqlite %#v", step, i, ops[i].name, got[i], want[i])
			}
		}
		if class(errM) != class(errQ) {
			t.Fatalf("step %d: update: memstore %v, sqlite %v", step, errM, errQ)
		}
		for _, r := range g.reads() {
			a, b := r.run(ctx, m), r.run(ctx, q)
			if !reflect.DeepEqual(a, b) {
				t.Fatalf("step %d, read %s:\n memstore %#v\n   sqlite %#v", step, r.name, a, b)
			}
		}
	}
}

// readAll runs rs on s.
func readAll(ctx context.Context, s store.Store, rs []read) []any {
	out := make([]any, len(rs))
	for i, r := range rs {
		out[i] = r.run(ctx, s)
	}
	return out
}

// sameReads fails t unless the answers got to rs are want.
func sameReads(t *testing.T, when string, rs []read, got, want []any) {
	t.Helper()
	for i, r := range rs {
		if !reflect.DeepEqual(got[i], want[i]) {
			t.Fatalf("%s, read %s:\n    got %#v\n   want %#v", when, r.name, got[i], want[i])
		}
	}
}

// seedSame makes the parents most rows need: projects, clusters,
// machines, webhook endpoints and messages.
func seedSame(tx store.Tx) error {
	ctx := context.Background()
	var errs []error
	for i := range 3 {
		errs = append(errs, tx.CreateProject(ctx, domain.Project{ID: fmt.Sprint("p", i), CreatedAt: t0}))
	}
	for i := range 4 {
		errs = append(errs, tx.CreateCluster(ctx, domain.Cluster{ID: fmt.Sprint("c", i), ProjectID: fmt.Sprint("p", i%3), CreatedAt: t0}))
		errs = append(errs, tx.CreateWebhookEndpoint(ctx, domain.WebhookEndpoint{ID: fmt.Sprint("wh", i), ProjectID: fmt.Sprint("p", i%2),
			Name: fmt.Sprint("seeded", i), Enabled: i != 2, CreatedAt: t0}))
	}
	for i := range 20 {
		errs = append(errs, tx.CreateMachine(ctx, domain.Machine{ID: fmt.Sprint("m", i), CreatedAt: t0.Add(time.Duration(i%3) * time.Minute)}))
	}
	for i := range 8 {
		errs = append(errs, tx.AddWebhookMessages(ctx, []domain.WebhookMessage{{ID: fmt.Sprint("msg", i), Body: []byte("{}"), CreatedAt: t0}}))
	}
	return errors.Join(errs...)
}

var errRollback = errors.New("rolled back on purpose")

// class is what callers branch on in an error.
func class(err error) string {
	for _, e := range []error{domain.ErrNotFound, domain.ErrConflict, store.ErrFenced, errRollback} {
		if errors.Is(err, e) {
			return e.Error()
		}
	}
	if err != nil {
		return "error"
	}
	return ""
}

// result is an answer: a value and the class of its error.
type result struct {
	V   any
	Err string
}

func res(v any, err error) result { return result{v, class(err)} }

type op struct {
	name string
	run  func(context.Context, store.Tx) any
}

type read struct {
	name string
	run  func(context.Context, store.Store) any
}

// gen draws the operations of the test from small pools of IDs, times
// and text, so keys collide, parents go missing and text needs cutting.
type gen struct {
	rng  *rand.Rand
	step int
}

var t0 = time.Date(2025, 3, 14, 9, 26, 53, 589793000, time.UTC)

func (g *gen) pick(n int) int { return g.rng.IntN(n) }

func (g *gen) id(prefix string, n int) string { return fmt.Sprintf("%s%d", prefix, g.pick(n)) }

// moving is an ID of a pool of n that moves on by one every per steps:
// old IDs stop being asked for and new ones can still be created.
func (g *gen) moving(prefix string, n, per int) string {
	return fmt.Sprintf("%s%d", prefix, g.step/per+g.pick(n))
}

func (g *gen) when() time.Time {
	zone := time.FixedZone("UTC-7", -7*3600)
	switch g.pick(8) {
	case 0:
		return time.Time{}
	case 1:
		return time.Date(1969, 12, 31, 23, 59, 59, 999999500, time.UTC)
	case 2:
		return t0.Add(time.Duration(g.pick(40))*time.Minute + 789).In(zone)
	}
	return t0.Add(time.Duration(g.pick(40)) * time.Minute)
}

func (g *gen) text() string {
	switch g.pick(8) {
	case 0:
		return strings.Repeat("é", store.MaxText)
	case 1:
		return "bad \xff\xfe utf-8"
	case 2:
		return ""
	case 3:
		return "nul \x00 inside"
	}
	return fmt.Sprintf("text %d ünïcode", g.pick(5))
}

func (g *gen) bit() bool { return g.pick(2) == 0 }

// ops draws one transaction's operations.
func (g *gen) ops() []op {
	var out []op
	for range 1 + g.pick(5) {
		all := g.all()
		out = append(out, all[g.pick(len(all))]())
	}
	return out
}
