package lifecycle

import (
	"fmt"
	"time"

	"github.com/sparecap/sparecap/internal/domain"
)

// removeStep is the removing state's step: it wipes the machine of a
// removed node and hands it to whoever waits for it (Ready.HandOver), in
// the transaction that writes the node removed. Nothing here waits on the
// tenant's cluster. A machine another node occupies already (the step
// read a stale copy) is never wiped.
func removeStep(cfg Config, in Input) Ready {
	n := in.Node
	if n.RemovedAt.IsZero() {
		// A node stored by a version that deleted the Node object first:
		// that is cleanup now.
		w := write(in)
		w.RemovedAt, w.CleanupPending = in.Now, true
		return Ready{Write: w, From: domain.NodeRemoving, Again: true, Moved: true,
			Events: []domain.Event{{Reason: domain.ReasonNodeRemoved, Message: removedMessage(*w, in.Now, Cleaned{Err: errNotTried})}}}
	}
	if in.Facts.MachineBusy {
		return Ready{Courtesies: []Courtesy{{"wipe machine " + n.MachineID, fmt.Errorf("machine serves another node; not wiped")}}}
	}
	if in.Phase != PhaseWiped {
		return Ready{Calls: []Call{{Kind: CallWipe}}, Next: PhaseWiped}
	}
	r, _ := result(in.Results, CallWipe)
	due := wait(in.Now, in.Facts.ProviderTells, cfg.Poll, time.Time{}, Workers)
	switch {
	case r.Err != nil:
		return failed(due, &ProviderError{domain.ReasonDeprovisionFailed, fmt.Errorf("wipe its machine (%s): %w", in.Facts.Machine.Capacity(), r.Err)})
	case !r.Done:
		return Ready{Due: due}
	}
	w := write(in)
	w.State = domain.NodeRemoved
	// The machine is free: replan soon.
	return Ready{Write: w, From: domain.NodeRemoving, HandOver: true, Moved: true}
}
