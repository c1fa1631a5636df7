package memstore

import (
	"context"
	"fmt"

	"github.com/sparecap/sparecap/internal/domain"
	"github.com/sparecap/sparecap/internal/store"
)

// catalog holds the small tables: projects, tokens, reservations,
// machines and prices. Each has its rows by ID and in its listing's order
// (created_at NULLS FIRST, id; prices by effective_from).
type catalog struct {
	projects         tree[string, *domain.Project]
	projectOrder     tree[tid, *domain.Project]
	tokens           tree[string, *domain.Token]
	tokenHashes      tree[string, *domain.Token]
	tokenOrder       tree[stid, *domain.Token] // by project ("" for operators)
	reservations     tree[string, *domain.Reservation]
	reservationOrder tree[tid, *domain.Reservation]
	machines         tree[string, *domain.Machine]
	machineOrder     tree[tid, *domain.Machine]
	prices           tree[string, *domain.Price]
	priceOrder       tree[tid, *domain.Price]
}

func newCatalog() catalog {
	return catalog{
		projects: newTree[string, *domain.Project](cmpString), projectOrder: newTree[tid, *domain.Project](cmpTID),
		tokens: newTree[string, *domain.Token](cmpString), tokenHashes: newTree[string, *domain.Token](cmpString),
		tokenOrder:   newTree[stid, *domain.Token](cmpSTID),
		reservations: newTree[string, *domain.Reservation](cmpString), reservationOrder: newTree[tid, *domain.Reservation](cmpTID),
		machines: newTree[string, *domain.Machine](cmpString), machineOrder: newTree[tid, *domain.Machine](cmpTID),
		prices: newTree[string, *domain.Price](cmpString), priceOrder: newTree[tid, *domain.Price](cmpTID),
	}
}

func (v view) GetProject(ctx context.Context, id string) (domain.Project, error) {
	if err := v.check(ctx); err != nil {
		return domain.Project{}, err
	}
	return getRow(&v.st.projects, id, "project ", id)
}

func (v view) ListProjects(ctx context.Context) ([]domain.Project, error) {
	if err := v.check(ctx); err != nil {
		return nil, err
	}
	return rows(&v.st.projectOrder, nil, nil), nil
}

func (t *tx) CreateProject(ctx context.Context, p domain.Project) error {
	if err := t.write(ctx); err != nil {
		return err
	}
	defer t.unlock()
	if t.st.projects.has(p.ID) {
		return conflict("project " + p.ID)
	}
	p.CreatedAt, p.StorageQuota = dbTime(p.CreatedAt), max(p.StorageQuota, 0)
	t.st.projects.set(t.w, p.ID, &p)
	t.st.projectOrder.set(t.w, tid{tkey(p.CreatedAt), p.ID}, &p)
	return nil
}

func (v view) TokenByHash(ctx context.Context, hash string) (domain.Token, error) {
	if err := v.check(ctx); err != nil {
		return domain.Token{}, err
	}
	// The hash is a credential: it stays out of the error.
	return getRow(&v.st.tokenHashes, hash, "token", "")
}

func (v view) GetToken(ctx context.Context, id string) (domain.Token, error) {
	if err := v.check(ctx); err != nil {
		return domain.Token{}, err
	}
	return getRow(&v.st.tokens, id, "token ", id)
}

func (v view) ListTokens(ctx context.Context, projectID string) ([]domain.Token, error) {
	if err := v.check(ctx); err != nil {
		return nil, err
	}
	return rows(&v.st.tokenOrder, &stid{s: projectID, t: minKey}, func(k stid) bool { return k.s == projectID }), nil
}

func (t *tx) CreateToken(ctx context.Context, tok domain.Token) error {
	if err := t.write(ctx); err != nil {
		return err
	}
	defer t.unlock()
	if t.st.tokens.has(tok.ID) || t.st.tokenHashes.has(tok.Hash) {
		return conflict("token " + tok.ID)
	}
	if tok.ProjectID != "" && !t.st.projects.has(tok.ProjectID) {
		return missingParent("create token " + tok.ID)
	}
	tok.CreatedAt, tok.ExpiresAt = dbTime(tok.CreatedAt), dbTime(tok.ExpiresAt)
	tok.RevokedAt, tok.LastUsedAt = dbTime(tok.RevokedAt), dbTime(tok.LastUsedAt)
	t.putToken(&tok)
	return nil
}

// putToken writes a token's row (its hash, project and creation time
// never change).
func (t *tx) putToken(tok *domain.Token) {
	t.st.tokens.set(t.w, tok.ID, tok)
	t.st.tokenHashes.set(t.w, tok.Hash, tok)
	t.st.tokenOrder.set(t.w, stid{tok.ProjectID, tkey(tok.CreatedAt), tok.ID}, tok)
}

func (t *tx) UpdateToken(ctx context.Context, tok domain.Token) error {
	if err := t.write(ctx); err != nil {
		return err
	}
	defer t.unlock()
	old, ok := t.st.tokens.get(tok.ID)
	if !ok {
		return missing("update token " + tok.ID)
	}
	next := *old
	next.Name, next.ExpiresAt, next.RevokedAt = tok.Name, dbTime(tok.ExpiresAt), dbTime(tok.RevokedAt)
	t.putToken(&next)
	return nil
}

func (t *tx) DeleteToken(ctx context.Context, id string) error {
	if err := t.write(ctx); err != nil {
		return err
	}
	defer t.unlock()
	old, ok := t.st.tokens.delete(t.w, id)
	if !ok {
		return missing("update token " + id)
	}
	t.st.tokenHashes.delete(t.w, old.Hash)
	t.st.tokenOrder.delete(t.w, stid{old.ProjectID, tkey(old.CreatedAt), old.ID})
	return nil
}

func (v view) ListReservations(ctx context.Context) ([]domain.Reservation, error) {
	if err := v.check(ctx); err != nil {
		return nil, err
	}
	return rows(&v.st.reservationOrder, nil, nil), nil
}

func (t *tx) CreateReservation(ctx context.Context, r domain.Reservation) error {
	if err := t.write(ctx); err != nil {
		return err
	}
	defer t.unlock()
	if t.st.reservations.has(r.ID) {
		return conflict("reservation " + r.ID)
	}
	if !t.st.projects.has(r.ProjectID) {
		return missingParent("create reservation " + r.ID)
	}
	r.CreatedAt = dbTime(r.CreatedAt)
	t.st.reservations.set(t.w, r.ID, &r)
	t.st.reservationOrder.set(t.w, tid{tkey(r.CreatedAt), r.ID}, &r)
	t.d.notes.reserved = true
	return nil
}

func (v view) GetMachine(ctx context.Context, id string) (domain.Machine, error) {
	if err := v.check(ctx); err != nil {
		return domain.Machine{}, err
	}
	return getRow(&v.st.machines, id, "machine ", id)
}

func (v view) ListMachines(ctx context.Context) ([]domain.Machine, error) {
	if err := v.check(ctx); err != nil {
		return nil, err
	}
	return rows(&v.st.machineOrder, nil, nil), nil
}

func (t *tx) CreateMachine(ctx context.Context, m domain.Machine) error {
	if err := t.write(ctx); err != nil {
		return err
	}
	defer t.unlock()
	if t.st.machines.has(m.ID) {
		return conflict("machine " + m.ID)
	}
	t.putMachine(nil, m)
	return nil
}

func (t *tx) UpdateMachine(ctx context.Context, m domain.Machine) error {
	if err := t.write(ctx); err != nil {
		return err
	}
	defer t.unlock()
	old, ok := t.st.machines.get(m.ID)
	if !ok {
		return missing("update machine " + m.ID)
	}
	t.putMachine(old, m)
	return nil
}

// putMachine writes m over old (nil: a new machine).
func (t *tx) putMachine(old *domain.Machine, m domain.Machine) {
	m.CooldownUntil, m.CreatedAt = dbTime(m.CooldownUntil), dbTime(m.CreatedAt)
	m.MaintenanceAt, m.PreemptAt = dbTime(m.MaintenanceAt), dbTime(m.PreemptAt)
	if old != nil {
		t.st.machineOrder.delete(t.w, tid{tkey(old.CreatedAt), old.ID})
	}
	t.st.machines.set(t.w, m.ID, &m)
	t.st.machineOrder.set(t.w, tid{tkey(m.CreatedAt), m.ID}, &m)
	t.d.notes.machines = append(t.d.notes.machines, m.ID)
}

func (v view) ListPrices(ctx context.Context) ([]domain.Price, error) {
	if err := v.check(ctx); err != nil {
		return nil, err
	}
	return rows(&v.st.priceOrder, nil, nil), nil
}

func (t *tx) CreatePrice(ctx context.Context, p domain.Price) error {
	if err := t.write(ctx); err != nil {
		return err
	}
	defer t.unlock()
	if t.st.prices.has(p.ID) {
		return conflict("price " + p.ID)
	}
	p.EffectiveFrom, p.CreatedAt = dbTime(p.EffectiveFrom), dbTime(p.CreatedAt)
	t.st.prices.set(t.w, p.ID, &p)
	t.st.priceOrder.set(t.w, tid{tkey(p.EffectiveFrom), p.ID}, &p)
	// A price of the past reprices the rolled months from its start.
	from := tkey(store.MonthOf(p.EffectiveFrom))
	t.st.rollups.ascend(&rkey{month: from}, func(k rkey, _ *domain.Rollup) bool {
		if k.cluster != "" {
			t.st.dirty.set(t.w, rkey{k.month, k.project, k.cluster, -1}, true)
		}
		return true
	})
	return nil
}

// getRow reads the row at k; what and id name it in the error.
func getRow[K, V any](tr *tree[K, *V], k K, what, id string) (V, error) {
	if p, ok := tr.get(k); ok {
		return *p, nil
	}
	var zero V
	return zero, fmt.Errorf("get %s%s: %w", what, id, domain.ErrNotFound)
}

// rows copies the rows of tr from lo on (all if lo is nil) while in
// says a key is in range (nil: to the end). It never returns nil, so that
// results compare and encode as the SQL backends' do.
func rows[K, V any](tr *tree[K, *V], lo *K, in func(K) bool) []V {
	out := []V{}
	tr.ascend(lo, func(k K, p *V) bool {
		if in != nil && !in(k) {
			return false
		}
		out = append(out, *p)
		return true
	})
	return out
}

// The errors of refused writes, worded as the SQL backends word theirs.

func conflict(what string) error { return fmt.Errorf("create %s: %w", what, domain.ErrConflict) }

func missing(doing string) error { return fmt.Errorf("%s: %w", doing, domain.ErrNotFound) }

// missingParent refuses a row whose parent row (its project, cluster,
// machine, …) does not exist, as a foreign key does.
func missingParent(doing string) error {
	return fmt.Errorf("%s: referenced row %w (FOREIGN KEY constraint failed)", doing, domain.ErrNotFound)
}

// notNull refuses a row without a value its column requires.
func notNull(doing, column string) error {
	return fmt.Errorf("memstore: %s: NOT NULL constraint failed: %s", doing, column)
}
