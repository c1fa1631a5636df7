package domain

import "time"

// LostWork is an entry of the lost-work ledger: the work a node's drain
// put at risk at its notice (T+0), as its cluster's driver saw it then:
// the GPU-seconds since the last checkpoint of each of its pods or jobs
// (since their start when they report none). Work that saves a checkpoint
// within the notice loses less; work that does not loses all of it. It is
// written with the drain and never changed: it outlives the node and its
// cluster, like usage.
type LostWork struct {
	NodeID      string
	NodeName    string
	ClusterID   string
	ClusterName string
	ProjectID   string
	Region      string
	GPUType     string
	Class       ComputeClass
	Cause       DrainCause
	// At is the notice (the drain's start).
	At time.Time
	// GPUSeconds is the work at risk; Job names the gang of the node's
	// work (NodeLoad.Gang), empty for work of its own.
	GPUSeconds int64
	Job        string
	// SavedAt is when the node's work reported a checkpoint after the
	// notice, before it went: the work at risk at the notice was saved
	// then, not lost. Zero: it saved none (or its driver cannot tell).
	SavedAt time.Time
}
