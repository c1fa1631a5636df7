package api

import (
	"context"
	"fmt"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/sparecap/sparecap/internal/allocator"
	"github.com/sparecap/sparecap/internal/apiv1"
	"github.com/sparecap/sparecap/internal/billing"
	"github.com/sparecap/sparecap/internal/domain"
	"github.com/sparecap/sparecap/internal/store"
)

func (s *Server) book(ctx context.Context) (*billing.Book, error) {
	prices, err := s.store.ListPrices(ctx)
	if err != nil {
		return nil, err
	}
	return billing.NewBook(prices)
}

func percent(bp uint64) string {
	if bp%100 == 0 {
		return strconv.FormatUint(bp/100, 10)
	}
	return fmt.Sprintf("%d.%02d", bp/100, bp%100)
}

// rates serves GET /v1/prices: what each region and GPU type of the fleet
// costs per GPU-hour now, on demand and preemptible.
func (s *Server) rates(w http.ResponseWriter, r *http.Request, _ principal) {
	ctx := r.Context()
	b, err := s.book(ctx)
	if err != nil {
		s.fail(w, r, err)
		return
	}
	snap, err := s.store.Snapshot(ctx)
	if err != nil {
		s.fail(w, r, err)
		return
	}
	now := s.clock.Now().Unix()
	disc := b.DiscountBP(now)
	out := apiv1.Rates{Currency: Currency, PreemptibleDiscountPercent: percent(disc), Rates: []apiv1.Rate{}}
	for _, a := range allocator.Available(allocator.Snapshot(snap), s.clock.Now(), allocator.Config{}) {
		rate := apiv1.Rate{Region: a.Region, GPUType: a.GPUType}
		if od, ok := b.OnDemandRate(a.Region, a.GPUType, now); ok {
			rate.OnDemand = billing.FormatRate(od)
			rate.Preemptible = billing.Line{RateMicros: od, FactorBP: billing.FullBP - disc}.EffectiveRate()
		}
		out.Rates = append(out.Rates, rate)
	}
	slices.SortFunc(out.Rates, func(a, b apiv1.Rate) int {
		return strings.Compare(a.Region+"/"+a.GPUType, b.Region+"/"+b.GPUType)
	})
	writeJSON(w, http.StatusOK, out)
}

func priceView(p domain.Price) apiv1.PriceEntry {
	return apiv1.PriceEntry{ID: p.ID, Kind: string(p.Kind), Region: p.Region, GPUType: p.GPUType, ReservationID: p.ReservationID,
		Value: p.Value, EffectiveFrom: p.EffectiveFrom, CreatedAt: p.CreatedAt}
}

func (s *Server) listPrices(w http.ResponseWriter, r *http.Request, _ principal) {
	ps, err := s.store.ListPrices(r.Context())
	if err != nil {
		s.fail(w, r, err)
		return
	}
	out := apiv1.PriceBook{Prices: make([]apiv1.PriceEntry, 0, len(ps))}
	for _, p := range ps {
		out.Prices = append(out.Prices, priceView(p))
	}
	writeJSON(w, http.StatusOK, out)
}

// CheckPrice validates a price book entry.
func CheckPrice(p domain.Price) error {
	if err := checkNames(p.Region, p.GPUType); err != nil {
		return err
	}
	switch p.Kind {
	case domain.PriceOnDemand:
		if p.GPUType == "" {
			return invalid("gpu_type", "an on_demand price needs gpu_type")
		}
		if p.ReservationID != "" {
			return invalid("reservation_id", "an on_demand price has no reservation_id")
		}
		if _, err := billing.ParseRate(p.Value); err != nil {
			return invalid("value", "%v", err)
		}
	case domain.PriceReserved:
		if p.ReservationID == "" {
			return invalid("reservation_id", "a reserved price needs reservation_id")
		}
		if _, err := billing.ParseRate(p.Value); err != nil {
			return invalid("value", "%v", err)
		}
	case domain.PricePreemptibleDiscount:
		if p.Region != "" || p.GPUType != "" || p.ReservationID != "" {
			return invalid("kind", "the preemptible discount is the same for everyone: no region, gpu_type or reservation_id")
		}
		if _, err := billing.ParsePercent(p.Value); err != nil {
			return invalid("value", "%v", err)
		}
	default:
		return invalid("kind", "kind must be on_demand, reserved or preemptible_discount; got %q", echo(string(p.Kind)))
	}
	return nil
}

func (s *Server) createPrice(w http.ResponseWriter, r *http.Request, _ principal) {
	ctx := r.Context()
	var req apiv1.CreatePriceRequest
	if err := decodeStrict(r.Body, &req); err != nil {
		s.fail(w, r, err)
		return
	}
	now := s.clock.Now()
	// Usage is metered to the whole second before now, so the earliest a
	// price may take effect is the next whole second.
	ceil := func(t time.Time) time.Time {
		if u := t.Truncate(time.Second); u.Equal(t) {
			return u
		} else {
			return u.Add(time.Second)
		}
	}
	p := domain.Price{ID: s.ctrl.NewID("price-"), Kind: domain.PriceKind(req.Kind), Region: req.Region, GPUType: req.GPUType,
		ReservationID: req.ReservationID, Value: req.Value, EffectiveFrom: ceil(now), CreatedAt: now}
	if req.EffectiveFrom != nil {
		if req.EffectiveFrom.Before(now) {
			s.fail(w, r, invalid("effective_from", "effective_from %s is in the past: a price change never reprices usage already metered", req.EffectiveFrom.Format(time.RFC3339)))
			return
		}
		p.EffectiveFrom = ceil(req.EffectiveFrom.UTC())
	}
	if err := CheckPrice(p); err != nil {
		s.fail(w, r, err)
		return
	}
	err := s.store.Update(ctx, func(tx store.Tx) error {
		if p.Kind != domain.PriceReserved {
			return tx.CreatePrice(ctx, p)
		}
		rs, err := tx.ListReservations(ctx)
		if err != nil {
			return err
		}
		for _, res := range rs {
			if res.ID == p.ReservationID {
				p.Region, p.GPUType = res.Region, res.GPUType
				return tx.CreatePrice(ctx, p)
			}
		}
		return invalid("reservation_id", "unknown reservation %q", echo(p.ReservationID))
	})
	if err != nil {
		s.fail(w, r, err)
		return
	}
	writeJSON(w, http.StatusCreated, priceView(p))
}
