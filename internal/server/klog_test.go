package server

import (
	"bytes"
	"log/slog"
	"strings"
	"sync"
	"testing"

	"k8s.io/klog/v2"
)

// syncBuffer is a bytes.Buffer safe for the log's concurrent writes.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

// client-go's log lines go to the log of the server started last, its
// attributes kept, and setting it again races with nothing (run -race).
func TestClientGoLogsGoToTheLatestServer(t *testing.T) {
	var first, second syncBuffer
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
