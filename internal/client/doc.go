// Package client is the Go client of the sparecap /v1 REST API. It speaks
// the wire types of package apiv1 and nothing else: every method maps to one
// endpoint, takes a context, and turns a non-2xx answer into an *APIError.
//
// WatchEvents follows a cluster's node lifecycle events as Server-Sent
// Events. It does not reconnect: when the stream ends it returns, and the
// caller resumes from the cursor of the last event it saw.
//
// The package also owns the CLI's config file (url and token), because the
// server writes that file on first start and the CLI reads it.
package client
