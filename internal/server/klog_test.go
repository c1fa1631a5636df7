package server

import (
	"bytes"
	"log/slog"
	"strings"
	"testing"

	"k8s.io/klog/v2"
)

// client-go's log lines go to the log of the server started last, its
// attributes kept, and setting it again races with nothing (run -race).
func TestClientGoLogsGoToTheLatestServer(t *testing.T) {
	// Only the watch goroutine writes until it is done, then only this one.
	var first, second bytes.Buffer
	logClientGo(slog.New(slog.NewTextHandler(&first, nil)).With("component", "client-go"))
	done := make(chan struct{})
	go func() { // a watch of the first server, logging meanwhile
		defer close(done)
		for range 100 {
			klog.Background().WithValues("k", "v").Info("watch line")
		}
	}()
	logClientGo(slog.New(slog.NewTextHandler(&second, nil)).With("component", "client-go"))
	<-done
	klog.Background().WithValues("k", "v").Info("after the second start")
	klog.Flush()
	if !strings.Contains(second.String(), "after the second start") || !strings.Contains(second.String(), "component=client-go") ||
		!strings.Contains(second.String(), "k=v") {
		t.Fatalf("the second server's log: %q", second.String())
	}
	if strings.Contains(first.String(), "after the second start") {
		t.Fatalf("a line after the second start went to the first server's log")
	}
}
