package preempt

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"
)

// Advice is sparecap's checkpoint advice (GET /v1/advice/checkpoint).
type Advice struct {
	// Interval is the recommended checkpoint interval; 0 when the server
	// had no rate to work from (RateBasis "none").
	Interval time.Duration
	// RatePercentPerHour is the preemption rate it used and RateBasis how
	// it got it ("measured", "upper_bound" or "none").
	RatePercentPerHour float64
	RateBasis          string
	// Formula names how the interval was worked out ("daly").
	Formula string
	// Overhead is the expected share of time lost to checkpoints and
	// redone work; LostPerPreemption the work a preemption loses without
	// a notice checkpoint.
	Overhead          float64
	LostPerPreemption time.Duration
}

// Advise asks the sparecap API at apiURL (SPARECAP_URL) with token
// (SPARECAP_TOKEN) for the checkpoint interval of a job in region and
// gpuType whose checkpoints take cost.
func Advise(ctx context.Context, apiURL, token, region, gpuType string, cost time.Duration) (Advice, error) {
	q := url.Values{"region": {region}, "gpu_type": {gpuType}, "checkpoint_seconds": {strconv.FormatFloat(cost.Seconds(), 'f', -1, 64)}}
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, strings.TrimRight(apiURL, "/")+"/v1/advice/checkpoint?"+q.Encode(), nil)
	if err != nil {
		return Advice{}, err
	}
	req.Header.Set("Authorization", "Bearer "+token)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return Advice{}, err
	}
	defer resp.Body.Close()
	var body struct {
		Rate      float64 `json:"preemption_rate_percent_per_hour"`
		Basis     string  `json:"rate_basis"`
		Formula   string  `json:"formula"`
		Interval  float64 `json:"recommended_interval_seconds"`
		Overhead  float64 `json:"expected_overhead_percent"`
		Lost      float64 `json:"expected_lost_seconds_per_preemption"`
		ErrorBody struct {
			Message string `json:"message"`
		} `json:"error"`
	}
	if err := json.NewDecoder(resp.Body).Decode(&body); err != nil {
		return Advice{}, fmt.Errorf("checkpoint advice: %s: %w", resp.Status, err)
	}
	if resp.StatusCode != http.StatusOK {
		return Advice{}, fmt.Errorf("checkpoint advice: %s: %s", resp.Status, body.ErrorBody.Message)
	}
	sec := func(s float64) time.Duration { return time.Duration(s * float64(time.Second)) }
	return Advice{Interval: sec(body.Interval), RatePercentPerHour: body.Rate, RateBasis: body.Basis, Formula: body.Formula,
		Overhead: body.Overhead / 100, LostPerPreemption: sec(body.Lost)}, nil
}
