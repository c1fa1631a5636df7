package runwrap

import (
	"syscall"
	"time"

	"github.com/sparecap/sparecap/internal/clock"
)

// setSubreaper makes this process the reaper of its orphaned descendants
// (PR_SET_CHILD_SUBREAPER), as PID 1 is.
func setSubreaper() error {
	_, _, errno := syscall.RawSyscall6(syscall.SYS_PRCTL, 36 /* PR_SET_CHILD_SUBREAPER */, 1, 0, 0, 0, 0)
	if errno != 0 {
		return errno
	}
	return nil
}

// reapGroup waits, for up to wait, for the processes of group pgid that
// are this process's children (the job's orphans came to it), so none is
// left a zombie.
func reapGroup(wall clock.Clock, pgid int, wait time.Duration) {
	deadline := wall.Now().Add(wait)
	for {
		var ws syscall.WaitStatus
		pid, err := syscall.Wait4(-pgid, &ws, syscall.WNOHANG, nil)
		switch {
		case err != nil: // ECHILD: none left
			return
		case pid > 0:
			continue
		case wall.Now().After(deadline):
			return
		}
		<-wall.After(5 * time.Millisecond)
	}
}
