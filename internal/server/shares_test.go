package server

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/sparecap/sparecap/internal/apiv1"
	"github.com/sparecap/sparecap/internal/client"
)

// from is an HTTP client whose connections come from the loopback
// address src, so a test plays several client hosts.
func from(src string) *http.Client {
	d := &net.Dialer{LocalAddr: &net.TCPAddr{IP: net.ParseIP(src)}, Timeout: 2 * time.Second}
	return &http.Client{Timeout: 3 * time.Second, Transport: &http.Transport{DialContext: d.DialContext}}
}

// dialFrom opens a raw connection to srv from src.
func dialFrom(t *testing.T, srv *Server, src string) net.Conn {
	t.Helper()
	d := net.Dialer{LocalAddr: &net.TCPAddr{IP: net.ParseIP(src)}}
	c, err := d.Dial("tcp", strings.TrimPrefix(srv.URL, "http://"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	return c
}

// get sends a GET with token as cl and returns the status and body.
func get(t *testing.T, cl *http.Client, url, token string) (int, string) {
	t.Helper()
	req, _ := http.NewRequest("GET", url, nil)
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	resp, err := cl.Do(req)
	if err != nil {
		t.Fatalf("GET %s: %v", url, err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b)
}

// ask sends a GET on the raw connection c and reads the answer.
func ask(c net.Conn, path string) (*http.Response, string, error) {
	fmt.Fprintf(c, "GET %s HTTP/1.1\r\nHost: x\r\n\r\n", path)
	_ = c.SetReadDeadline(time.Now().Add(5 * time.Second))
	resp, err := http.ReadResponse(bufio.NewReader(c), nil)
	if err != nil {
		return nil, "", err
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp, string(b), nil
}

// TestOneAddressCannotTakeEveryConnection: 40 idle connections from one
// address, with --max-connections 40, leave another client's requests
// and the health probes their answers; the flooding address gets a 429
// that names its limit on the connections past its share.
func TestOneAddressCannotTakeEveryConnection(t *testing.T) {
	srv, _, _ := limited(t, Limits{MaxConnections: 40})
	other, err := client.New(srv.URL, testAdmin).CreateProject(context.Background(), "other")
	if err != nil {
		t.Fatal(err)
	}
	http.DefaultClient.CloseIdleConnections()
	var flood []net.Conn
	for range 40 {
		flood = append(flood, dialFrom(t, srv, "127.0.0.1"))
	}
	cl := from("127.0.0.2")
	for _, path := range []string{"/healthz", "/readyz"} {
		if code, body := get(t, cl, srv.URL+path, ""); code != 200 {
			t.Errorf("%s from another address: %d %s", path, code, body)
		}
	}
	if code, body := get(t, cl, srv.URL+"/v1/clusters", other.Token); code != 200 {
		t.Errorf("another project's request: %d %s", code, body)
	}
	resp, body, err := ask(flood[39], "/v1/clusters")
	if err != nil {
		t.Fatalf("a connection past the address's share got no answer: %v", err)
	}
	if resp.StatusCode != 429 || !strings.Contains(body, "--max-connections-per-address") || resp.Header.Get("Retry-After") == "" {
		t.Errorf("past the share: %s %s", resp.Status, body)
	}
	if resp, _, err := ask(flood[0], "/healthz"); err != nil || resp.StatusCode != 200 {
		t.Errorf("a connection within the share: %v %v", resp, err)
	}
}

// TestHealthIsAnsweredWhenFull: with every connection the server serves
// taken, /healthz and /readyz are still answered (a probe that times out
// would restart the server), and anything else is a 503 that names the
// limit, at once rather than after a wait.
func TestHealthIsAnsweredWhenFull(t *testing.T) {
	srv, token, _ := limited(t, Limits{MaxConnections: 4, MaxConnectionsPerAddress: 4})
	servedConns(t, srv, "127.0.0.1", 4)
	cl := from("127.0.0.2")
	for _, path := range []string{"/healthz", "/readyz"} {
		if code, body := get(t, cl, srv.URL+path, ""); code != 200 {
			t.Errorf("%s when full: %d %s", path, code, body)
		}
	}
	start := time.Now()
	code, body := get(t, cl, srv.URL+"/v1/clusters", token)
	if code != 503 || !strings.Contains(body, "--max-connections") || !strings.Contains(body, apiv1.CodeUnavailable) {
		t.Errorf("a request when full: %d %s", code, body)
	}
	if d := time.Since(start); d > 2*time.Second {
		t.Errorf("the refusal took %s", d)
	}
}

// TestStreamsPerProject: a project's event streams are capped together,
// whatever tokens it mints to open them; another project still opens
// its own.
func TestStreamsPerProject(t *testing.T) {
	srv, token, _ := limited(t, Limits{MaxStreamsPerProject: 2})
	ctx := context.Background()
	admin := client.New(srv.URL, testAdmin)
	cl, err := client.New(srv.URL, token).CreateCluster(ctx, apiv1.CreateClusterRequest{ClusterName: "a", Region: "us-central-2", GPUType: "RTX_6000_PCI", NumGPUs: 8})
	if err != nil {
		t.Fatal(err)
	}
	var tokens []string
	for i := range 3 {
		tok, err := client.New(srv.URL, token).NewToken(ctx, client.TokenScope{}, apiv1.CreateTokenRequest{Name: fmt.Sprintf("t%d", i)})
		if err != nil {
			t.Fatal(err)
		}
		tokens = append(tokens, tok.Token)
	}
	open := func(tok, cluster string) int {
		ctx, cancel := context.WithCancel(ctx)
		t.Cleanup(cancel)
		req, _ := http.NewRequestWithContext(ctx, "GET", srv.URL+"/v1/clusters/"+cluster+"/events?watch=true", nil)
		req.Header.Set("Authorization", "Bearer "+tok)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		if resp.StatusCode != 200 {
			resp.Body.Close()
		}
		return resp.StatusCode
	}
	if a, b, c := open(tokens[0], cl.ClusterID), open(tokens[1], cl.ClusterID), open(tokens[2], cl.ClusterID); a != 200 || b != 200 || c != 429 {
		t.Fatalf("three tokens of one project: %d, %d, %d; want 200, 200, 429", a, b, c)
	}
	other, err := admin.CreateProject(ctx, "other")
	if err != nil {
		t.Fatal(err)
	}
	ocl, err := client.New(srv.URL, other.Token).CreateCluster(ctx, apiv1.CreateClusterRequest{ClusterName: "b", Region: "us-central-2", GPUType: "RTX_6000_PCI", NumGPUs: 8})
	if err != nil {
		t.Fatal(err)
	}
	if code := open(other.Token, ocl.ClusterID); code != 200 {
		t.Errorf("another project's stream: %d", code)
	}
}
