package api

import (
	"net/http"

	"github.com/sparecap/sparecap/internal/apiv1"
)

// clientError is a 403, 404, 409 or 429 whose message is complete as
// it stands.
type clientError struct {
	status int
	code   string
	msg    string
}

func (e *clientError) Error() string { return e.msg }

func notFound(format string, args ...any) error {
	return &clientError{http.StatusNotFound, apiv1.CodeNotFound, echof(format, args...)}
}

func conflict(format string, args ...any) error {
	return &clientError{http.StatusConflict, apiv1.CodeConflict, echof(format, args...)}
}

// rateLimited is a 429 of a limit the handler checked (it sets
// Retry-After itself).
func rateLimited(format string, args ...any) error {
	return &clientError{http.StatusTooManyRequests, apiv1.CodeRateLimited, echof(format, args...)}
}
