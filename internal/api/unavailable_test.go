package api

import (
	"context"
	"errors"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/sparecap/sparecap/internal/clock"
	"github.com/sparecap/sparecap/internal/domain"
	"github.com/sparecap/sparecap/internal/store"
)

// downStore fails every token lookup as a database out of reach would.
type downStore struct {
	store.Store
	err error
}

func (s downStore) TokenByHash(context.Context, string) (domain.Token, error) {
	return domain.Token{}, s.err
}

// TestDatabaseOutOfReachIsNotUnauthenticated: a token that cannot be
// checked because the database is out of reach is answered 503 with
// Retry-After, never 401 (which tells a client its token is bad); any
// other store failure is a 500.
func TestDatabaseOutOfReachIsNotUnauthenticated(t *testing.T) {
	e := newEnv(t)
	for _, tc := range []struct {
		err    error
		status int
		want   string
	}{
		{&net.OpError{Op: "read", Net: "tcp", Err: errors.New("connection reset by peer")}, 503, "unreachable"},
		{errors.New("disk I/O error"), 500, "internal error"},
	} {
		srv := httptest.NewServer(New(downStore{e.st, tc.err}, e.ctrl, e.clk, clock.Real{}, nil))
		req, _ := http.NewRequest("GET", srv.URL+"/v1/clusters", nil)
		req.Header.Set("Authorization", "Bearer "+e.tokens["p"])
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		data, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		body := string(data)
		srv.Close()
		if resp.StatusCode != tc.status || !strings.Contains(body, tc.want) {
			t.Errorf("token lookup failing with %v: %d %s; want %d mentioning %q", tc.err, resp.StatusCode, body, tc.status, tc.want)
		}
		if tc.status == 503 && resp.Header.Get("Retry-After") == "" {
			t.Errorf("503 without Retry-After")
		}
	}
}
