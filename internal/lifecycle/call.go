package lifecycle

import (
	"errors"
	"time"

	"github.com/sparecap/sparecap/internal/driver"
)

// CallKind is which driver call a Call is. Calls act on the step's node:
// its cluster and name, its machine and spec come from the Input.
type CallKind uint8

// The calls a step can ask for.
const (
	// CallMark: ClusterDriver.MarkDraining with Call.Marks.
	CallMark CallKind = iota + 1
	// CallList: ClusterDriver.ListWork (Result.Work).
	CallList
	// CallNotify: ClusterDriver.Notify of Call.Work, gone by Call.By.
	CallNotify
	// CallPost: ClusterDriver.PostNotice of Call.Notice, about the node or,
	// with OnWork, about Call.Work.
	CallPost
	// CallRelease: ClusterDriver.Release.
	CallRelease
	// CallPrepare: MachineProvider.Prepare (Result.Done, Result.First).
	CallPrepare
	// CallAddNode: ClusterDriver.AddNode.
	CallAddNode
	// CallWipe: MachineProvider.Wipe (Result.Done).
	CallWipe
	// CallSetClass: ClusterDriver.SetClass.
	CallSetClass
)

var callNames = [...]string{"", "MarkDraining", "ListWork", "Notify", "PostNotice", "Release", "Prepare", "AddNode", "Wipe", "SetClass"}

func (k CallKind) String() string {
	if int(k) < len(callNames) {
		return callNames[k]
	}
	return "call?"
}

// Call is one driver call a step asks the executor to make.
type Call struct {
	Kind CallKind
	// Group orders calls: groups run one after another, the calls of one
	// group at once (up to WorkCalls). A failed Essential call stops the
	// groups after its own.
	Group     int
	Essential bool
	// Work is what CallNotify notifies and what CallPost posts about with
	// OnWork.
	Work   driver.Work
	OnWork bool
	// By is when CallNotify's work must be gone (zero: at once).
	By     time.Time
	Notice driver.Notice
	Marks  driver.Marks
	// Until cuts the call off at that time; Within cuts it off that long
	// after its group starts (zero: neither).
	Until  time.Time
	Within time.Duration
}

// Result is what a call answered.
type Result struct {
	Call Call
	Err  error
	// Done: CallPrepare's or CallWipe's work has finished.
	Done bool
	// First: CallPrepare was accepted for the first time by this process
	// (the node's registration window starts now).
	First bool
	// Work is what CallList listed.
	Work []driver.Work
}

// WorkCalls bounds the calls of one group made at once (one node's
// pods).
const WorkCalls = 16

// errNotTried: the calls were not made (the node's background cleanup
// held them).
var errNotTried = errors.New("not tried yet")

// results picks the results of kind from rs.
func results(rs []Result, kind CallKind) []Result {
	var out []Result
	for _, r := range rs {
		if r.Call.Kind == kind {
			out = append(out, r)
		}
	}
	return out
}

// result is the first result of kind in rs, false if there is none.
func result(rs []Result, kind CallKind) (Result, bool) {
	for _, r := range rs {
		if r.Call.Kind == kind {
			return r, true
		}
	}
	return Result{}, false
}

// errorsOf joins the errors of rs of kind (nil if none failed).
func errorsOf(rs []Result, kind CallKind) []error {
	var errs []error
	for _, r := range rs {
		if r.Call.Kind == kind && r.Err != nil {
			errs = append(errs, r.Err)
		}
	}
	return errs
}
