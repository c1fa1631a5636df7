package allocator

// A booking's claims (domain.Machine.ClaimedBy, PreemptAt) as the plan
// reads them: claimedFor takes a booking's claimed machines
// first; a claimed machine is not lent past its claim's lease.

// leasedPastClaim: machine mi is claimed by a booking (or maintenance),
// and a preemptible node placed on it now would still be inside its
// pool's minimum lease when the claim's notice comes; such a machine is
// not lent. The plan wakes when that starts.
func (p *planner) leasedPastClaim(mi int32) bool {
	m := &p.s.Machines[mi]
	if m.PreemptAt.IsZero() || p.cfg.MinLease == nil {
		return false
	}
	lease := p.cfg.MinLease(m)
	if lease <= 0 {
		return false
	}
	from := m.PreemptAt.Add(-lease)
	p.wake(from)
	return !p.now.Before(from)
}

// claimedFor reports whether node ni's machine is claimed by the booking
// of cluster ci.
func (p *planner) claimedFor(ni, ci int32) bool {
	by := p.s.Machines[p.nMachine[ni]].ClaimedBy
	return by != "" && by == p.s.Clusters[ci].ID
}
