package store

import (
	"database/sql/driver"
	"errors"
	"io"
	"net"
)

// Unavailable reports whether err says the database could not be reached
// or a connection to it broke (refused, reset, closed mid-query), rather
// than that the request was wrong: the caller may retry. A write that
// failed this way at its commit may or may not have been made.
func Unavailable(err error) bool {
	if err == nil {
		return false
	}
	var op *net.OpError
	// pgconn's connection errors say whether nothing was sent.
	var retry interface{ SafeToRetry() bool }
	return errors.As(err, &op) || errors.Is(err, io.ErrUnexpectedEOF) || errors.Is(err, io.EOF) ||
		errors.Is(err, driver.ErrBadConn) || errors.Is(err, net.ErrClosed) ||
		(errors.As(err, &retry) && retry.SafeToRetry())
}
