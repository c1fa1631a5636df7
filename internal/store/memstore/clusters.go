package memstore

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/sparecap/sparecap/internal/domain"
)

// clusterRow is a cluster as stored: with its attach time and access
// record (which only SetKubeconfig and SetAccess write) and its sealed
// kubeconfig (nil: none), which no domain.Cluster carries.
type clusterRow struct {
	c          domain.Cluster
	kubeconfig []byte
}

// clusterTables holds every cluster by ID, fully deleted ones too, and
// the ones not fully deleted in listing order, all, by project, and by
// project and name (ClustersNamed).
type clusterTables struct {
	clusters        tree[string, *clusterRow]
	clusterOrder    tree[tid, *clusterRow]
	projectClusters tree[stid, *clusterRow]
	clusterNames    tree[sstid, *clusterRow]
}

func newClusterTables() clusterTables {
	return clusterTables{clusters: newTree[string, *clusterRow](cmpString),
		clusterOrder: newTree[tid, *clusterRow](cmpTID), projectClusters: newTree[stid, *clusterRow](cmpSTID),
		clusterNames: newTree[sstid, *clusterRow](cmpSSTID)}
}

// cluster returns the row's cluster, its access record copied: the
// caller owns what it gets.
func (r *clusterRow) cluster() domain.Cluster {
	c := r.c
	c.Access.Missing = slices.Clone(c.Access.Missing)
	return c
}

// liveCluster returns the cluster id unless it is missing or fully
// deleted.
func (v view) liveCluster(id string) (*clusterRow, bool) {
	r, ok := v.st.clusters.get(id)
	return r, ok && r.c.DeletedAt.IsZero()
}

func (v view) GetCluster(ctx context.Context, id string) (domain.Cluster, error) {
	if err := v.check(ctx); err != nil {
		return domain.Cluster{}, err
	}
	r, ok := v.liveCluster(id)
	if !ok {
		return domain.Cluster{}, fmt.Errorf("get cluster %s: %w", id, domain.ErrNotFound)
	}
	return r.cluster(), nil
}

func (v view) GetClusterRecord(ctx context.Context, id string) (domain.Cluster, error) {
	if err := v.check(ctx); err != nil {
		return domain.Cluster{}, err
	}
	r, ok := v.st.clusters.get(id)
	if !ok {
		return domain.Cluster{}, fmt.Errorf("get cluster %s: %w", id, domain.ErrNotFound)
	}
	return r.cluster(), nil
}

func (v view) ListClusters(ctx context.Context, projectID string) ([]domain.Cluster, error) {
	if err := v.check(ctx); err != nil {
		return nil, err
	}
	out := []domain.Cluster{}
	if projectID == "" {
		v.st.clusterOrder.each(func(_ tid, r *clusterRow) bool {
			out = append(out, r.cluster())
			return true
		})
		return out, nil
	}
	v.st.projectClusters.ascend(&stid{s: projectID, t: minKey}, func(k stid, r *clusterRow) bool {
		if k.s != projectID {
			return false
		}
		out = append(out, r.cluster())
		return true
	})
	return out, nil
}

func (v view) GetKubeconfig(ctx context.Context, clusterID string) ([]byte, error) {
	if err := v.check(ctx); err != nil {
		return nil, err
	}
	r, ok := v.liveCluster(clusterID)
	if !ok {
		// The sealed bytes are a credential: they stay out of errors.
		return nil, fmt.Errorf("get kubeconfig of cluster %s: %w", clusterID, domain.ErrNotFound)
	}
	return slices.Clone(r.kubeconfig), nil
}

func (t *tx) CreateCluster(ctx context.Context, c domain.Cluster) error {
	if err := t.write(ctx); err != nil {
		return err
	}
	defer t.unlock()
	return t.createCluster(c)
}

// createCluster writes c unless its ID is taken or its project missing.
func (t *tx) createCluster(c domain.Cluster) error {
	if t.st.clusters.has(c.ID) {
		return conflict("cluster " + c.ID)
	}
	if !t.st.projects.has(c.ProjectID) {
		return missingParent("create cluster " + c.ID)
	}
	t.insertCluster(c)
	return nil
}

// insertCluster writes a new cluster, without its attachment and access
// record: neither is CreateCluster's.
func (t *tx) insertCluster(c domain.Cluster) {
	c.KubeAttachedAt, c.Access = time.Time{}, domain.Access{}
	t.putCluster(nil, &clusterRow{c: storedCluster(c)})
}

// storedCluster is c with its times as stored.
func storedCluster(c domain.Cluster) domain.Cluster {
	c.CreatedAt, c.DeletedAt, c.UnmetSince = dbTime(c.CreatedAt), dbTime(c.DeletedAt), dbTime(c.UnmetSince)
	c.StartsAt, c.ActiveAt = dbTime(c.StartsAt), dbTime(c.ActiveAt)
	// As the SQL backends keep them: one bounded text, read back split.
	if types := text(strings.Join(c.PreemptibleGPUTypes, ",")); types != "" {
		c.PreemptibleGPUTypes = strings.Split(types, ",")
	} else {
		c.PreemptibleGPUTypes = nil
	}
	c.PreemptibleStrategy, c.MaxPreemptiblePrice = text(c.PreemptibleStrategy), text(c.MaxPreemptiblePrice)
	return c
}

func (t *tx) UpdateCluster(ctx context.Context, c domain.Cluster) error {
	if err := t.write(ctx); err != nil {
		return err
	}
	defer t.unlock()
	old, ok := t.st.clusters.get(c.ID)
	if !ok {
		return missing("update cluster " + c.ID)
	}
	if !t.st.projects.has(c.ProjectID) {
		return missingParent("update cluster " + c.ID)
	}
	t.setCluster(old, c, true)
	return nil
}

// setCluster writes every field of c that UpdateCluster writes over old;
// with drop, a full deletion drops the kubeconfig, its attach time and
// the access record: credentials do not outlive a cluster.
func (t *tx) setCluster(old *clusterRow, c domain.Cluster, drop bool) {
	next := &clusterRow{c: storedCluster(c), kubeconfig: old.kubeconfig}
	next.c.KubeAttachedAt, next.c.Access = old.c.KubeAttachedAt, old.c.Access
	if drop && !next.c.DeletedAt.IsZero() {
		next.kubeconfig, next.c.KubeAttachedAt, next.c.Access = nil, time.Time{}, domain.Access{}
	}
	t.putCluster(old, next)
}

// putCluster writes row r over old (nil: a new cluster), keeping the
// listing indexes to the clusters not fully deleted.
func (t *tx) putCluster(old, r *clusterRow) {
	if old != nil && old.c.DeletedAt.IsZero() {
		c, at := &old.c, tkey(old.c.CreatedAt)
		t.st.clusterOrder.delete(t.w, tid{at, c.ID})
		t.st.projectClusters.delete(t.w, stid{c.ProjectID, at, c.ID})
		t.st.clusterNames.delete(t.w, sstid{c.ProjectID, c.Name, at, c.ID})
	}
	t.st.clusters.set(t.w, r.c.ID, r)
	if c, at := &r.c, tkey(r.c.CreatedAt); c.DeletedAt.IsZero() {
		t.st.clusterOrder.set(t.w, tid{at, c.ID}, r)
		t.st.projectClusters.set(t.w, stid{c.ProjectID, at, c.ID}, r)
		t.st.clusterNames.set(t.w, sstid{c.ProjectID, c.Name, at, c.ID}, r)
	}
	t.d.notes.clusters = append(t.d.notes.clusters, r.c.ID)
}

func (t *tx) SetKubeconfig(ctx context.Context, clusterID string, sealed []byte, at time.Time) error {
	if err := t.write(ctx); err != nil {
		return err
	}
	defer t.unlock()
	if len(sealed) > 0 && at.IsZero() {
		return fmt.Errorf("set kubeconfig of cluster %s: the attach time is zero", clusterID)
	}
	old, ok := t.liveCluster(clusterID)
	if !ok {
		return missing("update kubeconfig of cluster " + clusterID)
	}
	next := *old
	// A new kubeconfig is a new identity: what was learned of the old
	// one's permissions goes.
	next.c.Access = domain.Access{}
	next.kubeconfig, next.c.KubeAttachedAt = nil, time.Time{}
	if len(sealed) > 0 {
		next.kubeconfig, next.c.KubeAttachedAt = slices.Clone(sealed), dbTime(at)
	}
	t.putCluster(old, &next)
	return nil
}

func (t *tx) SetAccess(ctx context.Context, clusterID string, a domain.Access) error {
	if err := t.write(ctx); err != nil {
		return err
	}
	defer t.unlock()
	stored, err := storedAccess(a)
	if err != nil {
		return fmt.Errorf("set access of cluster %s: %w", clusterID, err)
	}
	old, ok := t.liveCluster(clusterID)
	if !ok {
		return missing("update access of cluster " + clusterID)
	}
	next := *old
	next.c.Access = stored
	t.putCluster(old, &next)
	return nil
}

// accessJSON and missingJSON are how the SQL backends keep a cluster's
// access record (package sqlstore): storedAccess puts a record through
// the same encoding, so it reads back as theirs does (times in UTC to the
// microsecond, text as JSON keeps it, an empty list as none).
type accessJSON struct {
	CheckedAt time.Time     `json:"checked_at,omitzero"`
	Missing   []missingJSON `json:"missing,omitempty"`
}

type missingJSON struct {
	Permission string    `json:"permission"`
	Essential  bool      `json:"essential,omitempty"`
	Effect     string    `json:"effect,omitempty"`
	Since      time.Time `json:"since,omitzero"`
	Detail     string    `json:"detail,omitempty"`
}

// storedAccess is a as the access column keeps it and gives it back.
func storedAccess(a domain.Access) (domain.Access, error) {
	if a.CheckedAt.IsZero() && len(a.Missing) == 0 {
		return domain.Access{}, nil
	}
	j := accessJSON{CheckedAt: readBack(a.CheckedAt)}
	for _, m := range a.Missing {
		j.Missing = append(j.Missing, missingJSON{Permission: m.Permission, Essential: m.Essential, Effect: m.Effect,
			Since: readBack(m.Since), Detail: text(m.Detail)}) // the cluster API wrote it
	}
	b, err := json.Marshal(j)
	if err != nil {
		return domain.Access{}, err
	}
	var back accessJSON
	if err := json.Unmarshal(b, &back); err != nil {
		return domain.Access{}, fmt.Errorf("scan access: %w", err)
	}
	out := domain.Access{CheckedAt: back.CheckedAt}
	for _, m := range back.Missing {
		out.Missing = append(out.Missing, domain.MissingPermission{Permission: m.Permission, Essential: m.Essential,
			Effect: m.Effect, Since: m.Since, Detail: m.Detail})
	}
	return out, nil
}
