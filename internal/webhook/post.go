package webhook

import (
	"bytes"
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/sparecap/sparecap/internal/bound"
	"github.com/sparecap/sparecap/internal/domain"
	"github.com/sparecap/sparecap/pkg/webhooks"
)

// UserAgent is sent with every delivery.
const UserAgent = "sparecap-webhooks/1"

// result is what one attempt gave.
type result struct {
	status  int // 0: no answer
	err     string
	latency time.Duration
}

func (r result) ok() bool { return r.err == "" && r.status/100 == 2 }

// What of an endpoint's answer is kept: the endpoint is the tenant's, so
// it decides how large its answer is, not what the server stores or
// echoes. Go's client would read 10 MiB of headers.
const (
	// maxAnswerHeaders bounds the headers read from an answer.
	maxAnswerHeaders = 32 << 10
	// maxErrorBody is how much of a refusal's body is kept in the
	// delivery's last error; maxErrorText of its status text and
	// Location.
	maxErrorBody = 200
	maxErrorText = 200
)

// post sends m to target once, signed with secrets at ts, within the
// attempt timeout.
func (s *Service) post(ctx context.Context, target string, m domain.WebhookMessage, secrets []string, ts time.Time) result {
	ctx, cancel := context.WithTimeout(ctx, s.cfg.Timeout)
	defer cancel()
	var sigs []string
	for _, sec := range secrets {
		sig, err := webhooks.Sign(sec, m.ID, ts, m.Body)
		if err != nil {
			return result{err: "cannot sign: " + err.Error()}
		}
		sigs = append(sigs, sig)
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, target, bytes.NewReader(m.Body))
	if err != nil {
		return result{err: "cannot make the request: " + err.Error()}
	}
	h := req.Header
	h.Set("Content-Type", ContentType)
	h.Set("User-Agent", UserAgent)
	h.Set(webhooks.HeaderID, m.ID)
	h.Set(webhooks.HeaderTimestamp, strconv.FormatInt(ts.Unix(), 10))
	h.Set(webhooks.HeaderSignature, strings.Join(sigs, " "))
	start := s.cfg.Timer.Now()
	resp, err := s.client.Do(req)
	latency := s.cfg.Timer.Now().Sub(start)
	if err != nil {
		return result{err: attemptError(err, ctx, s.cfg.Timeout), latency: latency}
	}
	defer resp.Body.Close()
	head, _ := io.ReadAll(io.LimitReader(resp.Body, maxErrorBody))
	// The rest is read (a little) so the connection can be used again.
	_, _ = io.Copy(io.Discard, io.LimitReader(resp.Body, 64<<10))
	r := result{status: resp.StatusCode, latency: latency}
	status := bound.Line(resp.Status, maxErrorText)
	switch {
	case resp.StatusCode/100 == 2:
	case resp.StatusCode/100 == 3:
		r.err = fmt.Sprintf("HTTP %s: redirects are not followed (Location: %s)", status, bound.Line(resp.Header.Get("Location"), maxErrorText))
	default:
		r.err = "HTTP " + status
		if text := bound.Line(string(head), maxErrorBody); text != "" {
			if len(head) == maxErrorBody && !strings.HasSuffix(text, "…") {
				text += "…"
			}
			r.err += ": " + text
		}
	}
	return r
}

// attemptError says why an attempt got no answer, in words the tenant
// may read: refused, unreachable, did not resolve. Never the address a
// name resolved to, the resolver's, nor the request line url.Error
// repeats (the endpoint's URL is shown next to it): the endpoint is the
// tenant's, the network between is the operator's.
func attemptError(err error, ctx context.Context, timeout time.Duration) string {
	var (
		ne  net.Error
		dns *net.DNSError
		tle *tls.CertificateVerificationError
		rhe tls.RecordHeaderError
	)
	switch {
	case errors.Is(ctx.Err(), context.DeadlineExceeded) || (errors.As(err, &ne) && ne.Timeout()):
		return fmt.Sprintf("no answer within %s", timeout)
	case errors.Is(err, ErrRefusedAddress):
		return refusedAtDial
	case errors.As(err, &dns) && dns.IsNotFound:
		return "the endpoint's host name does not resolve"
	case errors.As(err, &dns):
		return "the endpoint's host name could not be resolved"
	case errors.Is(err, syscall.ECONNREFUSED):
		return "connection refused"
	case errors.Is(err, syscall.EHOSTUNREACH) || errors.Is(err, syscall.ENETUNREACH):
		return "the endpoint is unreachable"
	case errors.Is(err, syscall.ECONNRESET) || errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF):
		return "the endpoint closed the connection without an answer"
	case errors.As(err, &tle):
		return "TLS: the endpoint's certificate is not trusted: " + bound.Line(tle.Err.Error(), maxErrorText)
	case errors.As(err, &rhe):
		return "TLS: the endpoint does not speak TLS (is the URL http://?)"
	case strings.Contains(err.Error(), "server response headers exceeded"):
		return fmt.Sprintf("the answer's headers are larger than %d KiB", maxAnswerHeaders>>10)
	}
	var oe *net.OpError
	if errors.As(err, &oe) {
		// Its text names the addresses at both ends.
		return "the endpoint is unreachable (" + oe.Op + " failed)"
	}
	var ue *url.Error
	if errors.As(err, &ue) {
		err = ue.Err
	}
	return "no valid answer: " + bound.Line(err.Error(), maxErrorText)
}
