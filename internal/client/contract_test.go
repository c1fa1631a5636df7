package client

import (
	"net/http/httptest"
	"testing"

	"github.com/sparecap/sparecap/internal/api"
	"github.com/sparecap/sparecap/internal/api/apitest"
	"github.com/sparecap/sparecap/internal/metering"
	"github.com/sparecap/sparecap/internal/openapi/contracttest"
	"github.com/sparecap/sparecap/internal/secret"
	"github.com/sparecap/sparecap/internal/webhook"
)

const realAdmin = "admin-token-for-the-contract-test-0123456789"

// realServer is the API on SQLite and a simulated fleet, every exchange
// checked against the OpenAPI document; turn moves its controller on.
func realServer(t *testing.T) (url string, turn func()) {
	t.Helper()
	env := apitest.New(t, "pools: [{region: us-central-2, gpu_type: RTX_6000_PCI, machines: 6}]\nprices: {RTX_6000_PCI: \"0.89\"}", realAdmin)
	sealer, err := secret.NewSealer(make([]byte, 32))
	if err != nil {
		t.Fatal(err)
	}
	allow, _ := webhook.ParseAllow([]string{"127.0.0.0/8"})
	env.API.Meter = metering.New(env.Store, env.Clock, nil)
	env.API.Options = api.Options{Sealer: sealer, Webhooks: api.WebhookOptions{Policy: webhook.Policy{Allow: allow}}}
	srv := httptest.NewServer(contracttest.Handler(t, env.API))
	t.Cleanup(srv.Close)
	return srv.URL, func() { env.Turn(t, 20) }
}
