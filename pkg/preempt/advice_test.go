package preempt

import (
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"
)

func TestAdvise(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		q := r.URL.Query()
		if r.URL.Path != "/v1/advice/checkpoint" || r.Header.Get("Authorization") != "Bearer tok" ||
			q.Get("region") != "r" || q.Get("gpu_type") != "g" || q.Get("checkpoint_seconds") != "90" {
			w.WriteHeader(400)
			w.Write([]byte(`{"error":{"code":"invalid_argument","message":"bad request"}}`))
			return
		}
		w.Write([]byte(`{"preemption_rate_percent_per_hour":2.3,"rate_basis":"measured","formula":"daly","recommended_interval_seconds":5248.08,"expected_overhead_percent":3.42,"expected_lost_seconds_per_preemption":2669.04}`))
	}))
	defer srv.Close()
	a, err := Advise(t.Context(), srv.URL+"/", "tok", "r", "g", 90*time.Second)
	if err != nil || a.RateBasis != "measured" || a.Formula != "daly" || a.RatePercentPerHour != 2.3 ||
		a.Interval.Round(time.Second) != 5248*time.Second || a.Overhead != 0.0342 || a.LostPerPreemption.Round(time.Second) != 2669*time.Second {
		t.Fatalf("%+v %v", a, err)
	}
	if _, err := Advise(t.Context(), srv.URL, "nope", "r", "g", 90*time.Second); err == nil || !strings.Contains(err.Error(), "bad request") {
		t.Fatalf("refused: %v", err)
	}
	if _, err := Advise(t.Context(), "http://127.0.0.1:1", "tok", "r", "g", time.Second); err == nil {
		t.Fatal("no server answered")
	}
}
