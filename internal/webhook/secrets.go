package webhook

import (
	"fmt"
	"time"

	"github.com/sparecap/sparecap/internal/domain"
	"github.com/sparecap/sparecap/internal/secret"
	"github.com/sparecap/sparecap/pkg/webhooks"
)

// RotationOverlap is how long a rotated-away secret keeps signing next
// to the new one, so receivers can switch without losing a delivery.
const RotationOverlap = 24 * time.Hour

// NewSecret makes a signing secret for endpoint id: the secret, shown
// once to whoever made it, and its sealed form, bound to the endpoint,
// for the store.
func NewSecret(s *secret.Sealer, id string) (plain string, sealed []byte, err error) {
	plain, err = webhooks.NewSecret()
	if err != nil {
		return "", nil, err
	}
	sealed, err = s.Seal([]byte(plain), id)
	if err != nil {
		return "", nil, fmt.Errorf("seal the secret of webhook endpoint %s: %w", id, err)
	}
	return plain, sealed, nil
}

// signingSecrets are the secrets that sign ep's deliveries at now: its
// own, then, during a rotation's overlap, the previous one.
func signingSecrets(s *secret.Sealer, ep domain.WebhookEndpoint, now time.Time) ([]string, error) {
	sealed := [][]byte{ep.Secret}
	if ep.Signs(now) {
		sealed = append(sealed, ep.PreviousSecret)
	}
	var out []string
	for _, b := range sealed {
		plain, err := s.Open(b, ep.ID)
		if err != nil {
			return nil, fmt.Errorf("open the signing secret of webhook endpoint %s: %w", ep.ID, err)
		}
		out = append(out, string(plain))
	}
	return out, nil
}
