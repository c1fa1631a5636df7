package lifecycle

import (
	"errors"
	"fmt"
	"time"

	"github.com/sparecap/sparecap/internal/domain"
	"github.com/sparecap/sparecap/internal/driver"
)

// startStep is the pending state's step: a node planned onto a machine
// still draining another node starts provisioning once the machine is
// free. The removal that frees the machine normally starts it in its own
// transaction (Ready.HandOver); this covers a node planned onto a machine
// just as it was vacated. While the machine is busy the node waits for
// that hand-over (due never).
func startStep(in Input) Ready {
	if in.Facts.MachineBusy {
		return Ready{}
	}
	w := write(in)
	w.State, w.ProvisioningAt = domain.NodeProvisioning, in.Now
	return Ready{Write: w, From: domain.NodePending, Start: true, Moved: true, Again: true}
}

// provisionStep is the provisioning state's step: the machine is
// prepared through the machine provider, then the node is added to its
// cluster, and once the cluster has it Ready it is ready. The node is
// asked first and its registration deadline checked after: a turn that
// runs late (a busy controller) must not fail a node that did register,
// nor count it against its machine.
func provisionStep(cfg Config, in Input) Ready {
	switch in.Phase {
	case PhasePrepared:
		return prepared(cfg, in)
	case PhaseAdded:
		return added(cfg, in)
	}
	late := !in.Now.Before(RegisterBy(cfg, in.Node, in.Facts.FirstPrepare))
	return Ready{Calls: []Call{{Kind: CallPrepare}}, Next: PhasePrepared, Carry: Carry{Late: late}}
}

// prepared reads Prepare's answer: the node is added to its cluster once
// its machine is ready.
func prepared(cfg Config, in Input) Ready {
	r, _ := result(in.Results, CallPrepare)
	// The machine was first asked just now (the turn queued behind
	// others, or a new leader took over): its window starts here.
	late := in.Carry.Late && !r.First
	switch {
	case r.Err != nil && late:
		return registrationFailed(cfg, in)
	case r.Err != nil:
		return failed(provisionDue(cfg, in, in.Facts.ProviderTells), &ProviderError{Reason: domain.ReasonProvisionFailed,
			Err: fmt.Errorf("prepare its machine (%s): %w", in.Facts.Machine.Capacity(), r.Err)})
	case !r.Done && late:
		return registrationFailed(cfg, in)
	case !r.Done:
		return Ready{Due: provisionDue(cfg, in, in.Facts.ProviderTells)}
	}
	return Ready{Calls: []Call{{Kind: CallAddNode}}, Next: PhaseAdded, Carry: Carry{Late: late}}
}

// added reads AddNode's answer: the node is ready once its cluster has it
// Ready.
func added(cfg Config, in Input) Ready {
	r, _ := result(in.Results, CallAddNode)
	switch {
	case r.Err != nil && in.Carry.Late:
		return registrationFailed(cfg, in)
	case errors.Is(r.Err, driver.ErrNotReady):
		return Ready{Due: provisionDue(cfg, in, in.Facts.Tells)} // not registered or not Ready yet
	case r.Err != nil:
		return failed(provisionDue(cfg, in, in.Facts.Tells), &ClusterError{Err: fmt.Errorf("add node: %w", r.Err)})
	}
	w := write(in)
	w.State, w.ReadyAt = domain.NodeReady, in.Now
	return Ready{Write: w, From: domain.NodeProvisioning, Events: readyEvents(w, in.Facts.Machine), Forget: true, Moved: true,
		// Most machines have no failures to forget.
		Machine: MachineChange{ResetFailures: in.Facts.Machine.Failures != 0}}
}

// provisionDue: a provisioning node waits for its platform (tells: woken,
// else polled), by its registration deadline.
func provisionDue(cfg Config, in Input, tells bool) Due {
	return wait(in.Now, tells, cfg.Poll, RegisterBy(cfg, in.Node, in.Facts.FirstPrepare), Workers)
}

// RegisterBy is when node n, provisioning, must be ready by: the
// registration window counts from the first Prepare of n this process
// made (first), or, before that, from when n was planned.
func RegisterBy(cfg Config, n domain.Node, first time.Time) time.Time {
	cfg.defaults()
	start := first
	if start.IsZero() {
		start = n.ProvisioningAt
	}
	if start.IsZero() {
		start = n.CreatedAt // a node stored before provisioning_at existed
	}
	return start.Add(cfg.RegisterTimeout)
}

// readyEvents: node n joined its cluster on machine m, which the tenant
// knows by its capacity (Machine.Capacity), not its ID. The event carries
// n's ReadyAt, where its billing starts: a group commit stamps events
// later, and across a second's boundary the two told different seconds.
func readyEvents(n *domain.Node, m domain.Machine) []domain.Event {
	return []domain.Event{{Reason: domain.ReasonNodeAdded, Timestamp: n.ReadyAt,
		Message: fmt.Sprintf("%s node %s (%d GPUs, %s) joined the cluster, labelled %s=%s", n.Class, n.Name, n.GPUs, m.Capacity(), domain.LabelComputeClass, n.Class)}}
}

// registrationFailed gives back the machine of a node that did not
// register Ready within the registration timeout, so the node is
// replaced: it goes through the removing step, its cleanup pending. The
// machine is blamed unless the cluster's API was failing (then it is the
// cluster's fault); after MaxFailures in a row it is taken out of
// service, with the reason on the admin machine listing.
func registrationFailed(cfg Config, in Input) Ready {
	n, now := in.Node, in.Now
	w := write(in)
	w.State, w.RemovedAt, w.CleanupPending = domain.NodeRemoving, now, true
	r := Ready{Write: w, From: domain.NodeProvisioning, Forget: true, Moved: true, Again: true}
	var ce *ClusterError
	if errors.As(in.Facts.LastErr, &ce) {
		r.Events = []domain.Event{{Reason: domain.ReasonRegistrationFailed, Message: fmt.Sprintf(
			"node %s did not register Ready within %s: the cluster's API kept failing; the machine goes back and the node is replaced",
			n.Name, cfg.RegisterTimeout)}}
		return r
	}
	m := in.Facts.Machine
	msg := fmt.Sprintf("node %s did not register Ready within %s on %s; the machine goes back and the node is replaced",
		n.Name, cfg.RegisterTimeout, m.Capacity())
	reason := fmt.Sprintf("%d nodes in a row did not register Ready within %s (last: %s of cluster %s at %s)",
		m.Failures+1, cfg.RegisterTimeout, n.Name, n.ClusterID, now.UTC().Format(time.RFC3339))
	r.Machine = MachineChange{Failed: true, MaxFailures: cfg.MaxFailures, OutOfServiceReason: reason}
	if m.Failures+1 >= cfg.MaxFailures && !m.OutOfService {
		msg += fmt.Sprintf("; the machine is taken out of service after %d such failures in a row", m.Failures+1)
	}
	r.Events = []domain.Event{{Reason: domain.ReasonRegistrationFailed, Message: msg}}
	return r
}
