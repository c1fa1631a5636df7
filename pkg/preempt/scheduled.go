package preempt

import (
	"context"
	"os"
	"time"
)

// AnnotationPreemptAt is the annotation, on the node and its pods, that
// says when the node's notice is scheduled to come: its machine is booked
// (another cluster booked ahead, or maintenance), hours or days ahead. It
// goes away if the booking moves elsewhere or is cancelled. ExtraPreemptAt
// is the same key in a Slurm node's Extra.
const (
	AnnotationPreemptAt = "sparecap.dev/preempt-at"
	ExtraPreemptAt      = AnnotationPreemptAt
)

// Scheduled reports when the node's notice is scheduled to come, ahead of
// it: from the pod's annotations (annotationsFile; "" takes
// EnvAnnotationsFile, else DefaultAnnotationsFile), or in a Slurm job
// from its node's Extra. ok is false when none is scheduled (or it cannot
// tell). A job can checkpoint before then, or not start a step that
// would not end by then.
func Scheduled(ctx context.Context, annotationsFile string) (time.Time, bool) {
	if annotationsFile == "" {
		annotationsFile = os.Getenv(EnvAnnotationsFile)
	}
	if annotationsFile == "" {
		annotationsFile = DefaultAnnotationsFile
	}
	if annotationsFile != "-" {
		if t, ok := readAnnotation(annotationsFile, AnnotationPreemptAt); ok {
			return t, true
		}
	}
	show, ok := showNode(ctx)
	if !ok {
		return time.Time{}, false
	}
	return SlurmScheduled(show)
}

// SlurmScheduled finds the scheduled notice in `scontrol --oneliner show
// node` output: the Extra field's JSON, key ExtraPreemptAt.
func SlurmScheduled(show string) (time.Time, bool) { return slurmExtra(show, ExtraPreemptAt) }
