package server

import (
	"cmp"
	"context"
	"time"

	"github.com/sparecap/sparecap/internal/api"
	"github.com/sparecap/sparecap/internal/domain"
	"github.com/sparecap/sparecap/internal/quota"
)

// The leader's keeping of the store over years: the roller of closed
// months, the raw rows' retention, the projects' storage quotas.

// rawRetention is how long raw usage records and work spans are kept
// (negative: for ever).
func (b *boot) rawRetention() (usage, spans time.Duration) {
	return cmp.Or(b.o.UsageRetention, domain.DefaultUsageRetention), cmp.Or(b.o.SpanRetention, domain.DefaultSpanRetention)
}

// RollSlice is the most cluster months a roller pass computes before it
// goes on (a month closing marks every cluster that used it).
const RollSlice = 200

// roll rolls closed months up (api.Server.RollPass) every minute of the
// server's clock until ctx ends, on the leader.
func (b *boot) roll(ctx context.Context) {
	for {
		if n, err := b.api.RollPass(ctx, b.s.Clock.Now(), RollSlice); err != nil && ctx.Err() == nil {
			b.o.Log.Warn("rolling up closed months failed; trying again in a minute", "err", err)
		} else if n == RollSlice {
			continue // a backlog: the next slice at once
		}
		select {
		case <-ctx.Done():
			return
		case <-b.s.Clock.After(time.Minute):
		}
	}
}

// quotaKeeper is the keeper of the projects' storage quotas, which the
// API asks and the leader's term runs (counts) and feeds.
func (b *boot) quotaKeeper(a *api.Server) *quota.Keeper {
	return &quota.Keeper{Store: b.cached, Default: cmp.Or(b.o.StorageQuota, domain.DefaultStorageQuota), Reached: a.QuotaReached,
		Measured: func(us []quota.Use) {
			ps, used, limits := make([]string, len(us)), make([]int64, len(us)), make([]int64, len(us))
			for i, u := range us {
				ps[i], used[i], limits[i] = u.ProjectID, u.Used, u.Quota
			}
			b.s.Metrics.ProjectStorage(ps, used, limits)
		}}
}
