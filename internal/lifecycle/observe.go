package lifecycle

import (
	"time"

	"github.com/sparecap/sparecap/internal/domain"
)

// Observation is a step taken on a node. Kind says which: a lifecycle
// event recorded (KindEvent: Reason and Message are set), or one of the
// reclaim steps that metrics time (Reason is empty). Each is reported
// once, after the transaction that recorded it committed.
type Observation struct {
	Time    time.Time
	Kind    ObservationKind
	Cluster string
	Node    string
	Reason  domain.EventReason
	Message string

	// Set on the reclaim steps (KindDrainStarted, KindNoticeDelivered,
	// KindDrainFinished): the node's class and GPUs, why it is drained, T+0
	// and its deadline.
	Class          domain.ComputeClass
	GPUs           int
	Cause          domain.DrainCause
	DrainStartedAt time.Time
	Deadline       time.Time
	// Outcome of a finished drain (KindDrainFinished); Time is then when
	// the node was drained (its DrainedAt).
	Outcome domain.DrainOutcome
}

// ObservationKind says what an Observation reports.
type ObservationKind string

const (
	// KindEvent: a lifecycle event was recorded.
	KindEvent ObservationKind = "event"
	// KindDrainStarted: a drain was committed (T+0): the node is draining
	// with its deadline. A reclaimed node that never became ready is
	// removed without a drain and is not reported.
	KindDrainStarted ObservationKind = "drain_started"
	// KindNoticeDelivered: every pod on the node got its notice (SIGTERM)
	// and Notified was stored, at Time. Not reported when the deadline
	// passed before the notice got through.
	KindNoticeDelivered ObservationKind = "notice_delivered"
	// KindDrainFinished: the node left draining for removing, at Time,
	// with Outcome early or deadline.
	KindDrainFinished ObservationKind = "drain_finished"
)

// EventObservation reports event e.
func EventObservation(e domain.Event) Observation {
	return Observation{Time: e.Timestamp, Kind: KindEvent, Cluster: e.ClusterID, Node: e.NodeName, Reason: e.Reason, Message: e.Message}
}

// DrainObservation describes a reclaim step of node n at at.
func DrainObservation(kind ObservationKind, n domain.Node, at time.Time) Observation {
	return Observation{Time: at, Kind: kind, Cluster: n.ClusterID, Node: n.Name, Class: n.Class, GPUs: n.GPUs,
		Cause: n.DrainCause, DrainStartedAt: n.DrainStartedAt, Deadline: n.Deadline, Outcome: n.Outcome}
}
