package store

import (
	"slices"

	"github.com/sparecap/sparecap/internal/domain"
)

// nodeIndex finds the in-memory copy's live nodes by ID, by cluster and
// name (a driver speaks of a node by its name in its cluster; nothing
// keeps two live nodes from sharing one, so a name has a list), and by
// the machine an active node occupies. Cached keeps it under nmu.
type nodeIndex struct {
	byID   map[string]*domain.Node
	byName map[nameKey][]*domain.Node
	active map[string]*domain.Node // by machine ID
}

type nameKey struct{ cluster, name string }

func newNodeIndex(nodes []*domain.Node) nodeIndex {
	ni := nodeIndex{byID: make(map[string]*domain.Node, len(nodes)), byName: make(map[nameKey][]*domain.Node, len(nodes)),
		active: make(map[string]*domain.Node, len(nodes))}
	for _, n := range nodes {
		ni.put(n)
	}
	return ni
}

// put indexes n, replacing the node of its ID.
func (ni nodeIndex) put(n *domain.Node) {
	ni.remove(n.ID)
	ni.byID[n.ID] = n
	k := nameKey{n.ClusterID, n.Name}
	ni.byName[k] = append(ni.byName[k], n)
	if n.State.Active() {
		ni.active[n.MachineID] = n
	}
}

// remove forgets node id.
func (ni nodeIndex) remove(id string) {
	old, ok := ni.byID[id]
	if !ok {
		return
	}
	delete(ni.byID, id)
	k := nameKey{old.ClusterID, old.Name}
	if named := slices.DeleteFunc(ni.byName[k], func(n *domain.Node) bool { return n == old }); len(named) > 0 {
		ni.byName[k] = named
	} else {
		delete(ni.byName, k)
	}
	if ni.active[old.MachineID] == old {
		delete(ni.active, old.MachineID)
	}
}

// NodeNamed reads the live node named name in cluster clusterID from the
// copy (found; of several, the one named so first), if the copy is
// loaded (loaded).
func (c *Cached) NodeNamed(clusterID, name string) (n domain.Node, found, loaded bool) {
	return c.indexed(func(ni nodeIndex) *domain.Node {
		if named := ni.byName[nameKey{clusterID, name}]; len(named) > 0 {
			return named[0]
		}
		return nil
	})
}

// ActiveOn reads the active node (provisioning, ready, draining,
// removing) that occupies machine id from the copy (found), if the copy is
// loaded (loaded).
func (c *Cached) ActiveOn(machineID string) (n domain.Node, found, loaded bool) {
	return c.indexed(func(ni nodeIndex) *domain.Node { return ni.active[machineID] })
}

func (c *Cached) indexed(find func(nodeIndex) *domain.Node) (domain.Node, bool, bool) {
	if !c.enabled.Load() || c.cur.Load() == nil {
		return domain.Node{}, false, false
	}
	c.nmu.RLock()
	n := find(c.ni)
	c.nmu.RUnlock()
	if n == nil {
		return domain.Node{}, false, true
	}
	return *n, true, true
}
