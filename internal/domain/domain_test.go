package domain

import "testing"

func TestTargetPreemptibleGPUs(t *testing.T) {
	for _, tc := range []struct {
		desired, max, requested, want int
	}{
		{desired: 16, want: 16},                         // no queue: the tenant's target
		{desired: 16, max: 0, requested: 64, want: 16},  // requests without opting in count for nothing
		{desired: 0, max: 64, requested: 24, want: 24},  // the queue's requests
		{desired: 8, max: 32, requested: 48, want: 32},  // capped at the maximum
		{desired: 40, max: 32, requested: 24, want: 40}, // the tenant's own target is a floor
		{desired: 16, max: 64, requested: 0, want: 16},  // requests gone: back to the floor
	} {
		c := Cluster{DesiredPreemptibleGPUs: tc.desired, MaxPreemptibleGPUs: tc.max, RequestedPreemptibleGPUs: tc.requested}
		if got := c.TargetPreemptibleGPUs(); got != tc.want {
			t.Errorf("desired %d, max %d, requested %d: target %d, want %d", tc.desired, tc.max, tc.requested, got, tc.want)
		}
	}
}
