// Package api holds the REST API's published contract: its OpenAPI 3.1
// document (openapi.json, built from the server's route list by
// `make openapi`, served at /v1/openapi.json) and the baseline the
// compatibility test (api/compat, `make test-compat`) diffs it against
// (baseline/v1.json).
package api

import _ "embed"

// Version is the contract's version. A change that breaks clients
// (a route or field removed, a type changed, a request made stricter)
// must take a major step; api/compat's TestNoBreakingChange fails
// otherwise.
const Version = "1.0.0"

// Document is the OpenAPI document.
//
//go:embed openapi.json
var Document []byte
