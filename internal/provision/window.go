package provision

import (
	"sync"
	"time"

	"github.com/sparecap/sparecap/internal/domain"
)

// RegisterBy is when node n, provisioning, must be ready by: the
// registration window counts from the first Prepare of n this process
// made, or, before that, from when n was planned.
func (p *Provisioner) RegisterBy(n domain.Node) time.Time {
	start := p.preparing.since(n.ID)
	if start.IsZero() {
		start = n.ProvisioningAt
	}
	if start.IsZero() {
		start = n.CreatedAt // a node stored before provisioning_at existed
	}
	return start.Add(p.cfg.RegisterTimeout)
}

// Forget drops what provisioning remembers of node id (it left
// provisioning: ready, reclaimed, removed).
func (p *Provisioner) Forget(id string) { p.preparing.forget(id) }

// preparing records when each provisioning node's machine was first asked
// to prepare. It lives in memory: a new leader gives every machine still
// preparing one fresh window, which costs a broken machine one more
// timeout and never fails a node for time it spent queued in sparecap.
type preparing struct {
	mu sync.Mutex
	at map[string]time.Time
}

// started records now as node id's first accepted Prepare, and reports
// whether it was the first.
func (p *preparing) started(id string, now time.Time) bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	if _, ok := p.at[id]; ok {
		return false
	}
	if p.at == nil {
		p.at = map[string]time.Time{}
	}
	p.at[id] = now
	return true
}

func (p *preparing) since(id string) time.Time {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.at[id]
}

func (p *preparing) forget(id string) {
	p.mu.Lock()
	delete(p.at, id)
	p.mu.Unlock()
}

// FirstPrepare is when this process's first Prepare of node id was
// accepted; zero if none was, or the node left provisioning.
func (p *Provisioner) FirstPrepare(id string) time.Time { return p.preparing.since(id) }
