package webhook

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"

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

// maxErrorBody is how much of a refusal's body is kept in the
// delivery's last error.
const maxErrorBody = 200

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
	start := realClock.Now()
	resp, err := s.client.Do(req)
	latency := realClock.Now().Sub(start)
	if err != nil {
		return result{err: attemptError(err, ctx, s.cfg.Timeout), latency: latency}
	}
	defer resp.Body.Close()
	head, _ := io.ReadAll(io.LimitReader(resp.Body, maxErrorBody))
	// The rest is read (a little) so the connection can be used again.
	_, _ = io.Copy(io.Discard, io.LimitReader(resp.Body, 64<<10))
	r := result{status: resp.StatusCode, latency: latency}
	switch {
	case resp.StatusCode/100 == 2:
	case resp.StatusCode/100 == 3:
		r.err = fmt.Sprintf("HTTP %s: redirects are not followed (Location: %s)", resp.Status, resp.Header.Get("Location"))
	default:
		r.err = "HTTP " + resp.Status
		if text := strings.TrimSpace(strings.ToValidUTF8(string(head), "")); text != "" {
			if len(head) == maxErrorBody {
				text += "…"
			}
			r.err += ": " + text
		}
	}
	return r
}

// attemptError says why an attempt got no answer, without the request
// line url.Error repeats (the endpoint's URL is shown next to it).
func attemptError(err error, ctx context.Context, timeout time.Duration) string {
	var ne net.Error
	if errors.Is(ctx.Err(), context.DeadlineExceeded) || (errors.As(err, &ne) && ne.Timeout()) {
		return fmt.Sprintf("no answer within %s", timeout)
	}
	var ue *url.Error
	if errors.As(err, &ue) {
		err = ue.Err
	}
	return err.Error()
}
