// Package webhooks verifies sparecap's signed notice webhooks in a
// receiver: a Ray autoscaler, a queue's worker pool, any scheduler that
// runs outside the tenant's Kubernetes or Slurm and wants to hear of a
// preemption before its work gets SIGTERM.
//
// Deliveries follow the Standard Webhooks convention
// (https://www.standardwebhooks.com). Each request carries three headers:
//
//	webhook-id:        the delivery's ID, the same on every retry
//	webhook-timestamp: when this attempt was signed, in Unix seconds
//	webhook-signature: v1,<base64 signature> (several, space-separated,
//	                   while a rotated secret still signs)
//
// A signature is base64(HMAC-SHA256(key, id + "." + timestamp + "." +
// body)), where key is the base64-decoded part of the endpoint's secret
// after "whsec_". [Verify] checks one of the signatures and that the
// timestamp is within [DefaultTolerance] of now, which bounds how long a
// captured request can be replayed; a [Dedup] remembers the IDs it has
// handled, so a retry of a delivery that was handled (or a replay inside
// the tolerance) is recognised.
//
// A receiver, in short:
//
//	body, _ := io.ReadAll(r.Body)
//	if err := webhooks.Verify(secret, r.Header, body, time.Now()); err != nil {
//		http.Error(w, err.Error(), http.StatusUnauthorized)
//		return
//	}
//	if seen.Seen(r.Header.Get(webhooks.HeaderID), time.Now()) {
//		return // handled already: answer 2xx so it is not sent again
//	}
//	// handle the CloudEvent in body, then answer 2xx
//
// See docs/webhooks.md for the events, their bodies and the retries.
package webhooks

import (
	"crypto/hmac"
	"crypto/rand"
	"crypto/sha256"
	"encoding/base64"
	"errors"
	"fmt"
	"net/http"
	"strconv"
	"strings"
	"time"
)

// The headers of a delivery.
const (
	HeaderID        = "webhook-id"
	HeaderTimestamp = "webhook-timestamp"
	HeaderSignature = "webhook-signature"
)

// SecretPrefix starts every signing secret.
const SecretPrefix = "whsec_"

// DefaultTolerance is how far a delivery's timestamp may be from the
// receiver's clock, either way.
const DefaultTolerance = 5 * time.Minute

// What Verify refuses, for callers that branch on it.
var (
	// ErrSecret: the secret is not a whsec_ secret.
	ErrSecret = errors.New("webhooks: the secret is not a whsec_ secret")
	// ErrHeaders: a header is missing or malformed.
	ErrHeaders = errors.New("webhooks: missing or malformed webhook-id, webhook-timestamp or webhook-signature header")
	// ErrTimestamp: the timestamp is outside the tolerance (a replay, or
	// a clock far off).
	ErrTimestamp = errors.New("webhooks: the timestamp is too far from now")
	// ErrSignature: no signature matches (another secret, or the body,
	// ID or timestamp was changed).
	ErrSignature = errors.New("webhooks: no signature matches")
)

// NewSecret returns a new signing secret: "whsec_" and the base64 of 32
// random bytes.
func NewSecret() (string, error) {
	var b [32]byte
	if _, err := rand.Read(b[:]); err != nil {
		return "", fmt.Errorf("webhooks: new secret: %w", err)
	}
	return SecretPrefix + base64.StdEncoding.EncodeToString(b[:]), nil
}

// key is the HMAC key of a secret: the base64 after the prefix.
func key(secret string) ([]byte, error) {
	enc, ok := strings.CutPrefix(secret, SecretPrefix)
	if !ok {
		return nil, ErrSecret
	}
	k, err := base64.StdEncoding.DecodeString(enc)
	if err != nil || len(k) == 0 {
		return nil, ErrSecret
	}
	return k, nil
}

// Sign returns the signature of a delivery with id, signed at ts, of
// body: "v1," and the base64 of its HMAC-SHA256.
func Sign(secret, id string, ts time.Time, body []byte) (string, error) {
	k, err := key(secret)
	if err != nil {
		return "", err
	}
	return "v1," + base64.StdEncoding.EncodeToString(mac(k, id, ts.Unix(), body)), nil
}

func mac(key []byte, id string, ts int64, body []byte) []byte {
	h := hmac.New(sha256.New, key)
	h.Write([]byte(id))
	h.Write([]byte{'.'})
	h.Write([]byte(strconv.FormatInt(ts, 10)))
	h.Write([]byte{'.'})
	h.Write(body)
	return h.Sum(nil)
}

// Verify checks a delivery with DefaultTolerance: see VerifyWithin.
func Verify(secret string, header http.Header, body []byte, now time.Time) error {
	return VerifyWithin(secret, header, body, now, DefaultTolerance)
}

// VerifyWithin checks that one of the header's signatures is secret's
// over its webhook-id, its webhook-timestamp and body, and that the
// timestamp is within tolerance of now. body must be the request's bytes
// as received (not decoded and encoded again).
func VerifyWithin(secret string, header http.Header, body []byte, now time.Time, tolerance time.Duration) error {
	k, err := key(secret)
	if err != nil {
		return err
	}
	id, tsText, sigs := header.Get(HeaderID), header.Get(HeaderTimestamp), header.Get(HeaderSignature)
	ts, perr := strconv.ParseInt(tsText, 10, 64)
	if id == "" || perr != nil || sigs == "" {
		return ErrHeaders
	}
	if d := now.Sub(time.Unix(ts, 0)); d > tolerance || d < -tolerance {
		return fmt.Errorf("%w: signed at %s, %s from now (tolerance %s)", ErrTimestamp,
			time.Unix(ts, 0).UTC().Format(time.RFC3339), d.Round(time.Second), tolerance)
	}
	want := mac(k, id, ts, body)
	for _, s := range strings.Fields(sigs) {
		version, enc, ok := strings.Cut(s, ",")
		if !ok || version != "v1" {
			continue // a scheme this version does not know
		}
		got, err := base64.StdEncoding.DecodeString(enc)
		if err == nil && hmac.Equal(got, want) {
			return nil
		}
	}
	return ErrSignature
}
