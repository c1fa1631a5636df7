package kubeenv

import (
	"bytes"
	"context"
	"net"
	"strconv"
	"testing"
	"time"
)

// TestOwns: a component is ready only once it listens on its ports
// itself; a port another process holds (here the test's own listener)
// does not count, which is what let Kueue be reported ready and then exit
// on "address already in use" for its metrics port.
func TestOwns(t *testing.T) {
	port, err := freePort()
	if err != nil {
		t.Fatal(err)
	}
	p, err := startProc("listener", "python3", []string{"-m", "http.server", "--bind", "127.0.0.1", strconv.Itoa(port)}, &bytes.Buffer{}, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer p.stop()
	if err := p.waitReady(10*time.Second, func(context.Context) error { return p.owns([]int{port}) }); err != nil {
		t.Fatal(err)
	}
	taken, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer taken.Close()
	other := taken.Addr().(*net.TCPAddr).Port
	if err := p.owns([]int{port, other}); err == nil {
		t.Fatalf("port %d, held by the test, counted as the component's", other)
	}
}
