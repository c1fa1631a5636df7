// Package fleet reads the fleet file (`--fleet`) and the built-in fleet of
// the embedded default, and registers their machines, reservations and
// projects in the store.
//
// Registration is idempotent and only adds: machine and reservation IDs are
// derived from the file, so starting again with the same file changes
// nothing, and machines removed from the file stay registered (take them
// out of service through the admin API instead).
package fleet

import (
	"context"
	_ "embed"
	"errors"
	"fmt"
	"os"
	"regexp"
	"slices"
	"strings"
	"time"

	"sigs.k8s.io/yaml"

	"github.com/sparecap/sparecap/internal/billing"
	"github.com/sparecap/sparecap/internal/domain"
	"github.com/sparecap/sparecap/internal/store"
)

// Pool is a group of identical machines.
type Pool struct {
	Region         string `json:"region"`
	GPUType        string `json:"gpu_type"`
	Machines       int    `json:"machines"`
	GPUsPerMachine int    `json:"gpus_per_machine,omitempty"`
	// ReservedFor names the project holding these machines as a
	// reservation; empty for the on-demand pool.
	ReservedFor string `json:"reserved_for,omitempty"`
	// MinLease is the minimum lease of a preemptible node on these
	// machines (docs/reclaim.md), as a duration ("10m"); empty: none.
	MinLease string `json:"min_lease,omitempty"`
}

// MaxMinLease bounds a pool's minimum lease.
const MaxMinLease = 24 * time.Hour

// Leases is MinLease if any pool has a lease, else nil: a fleet without
// leases costs the plans and the API nothing per node.
func (f File) Leases() func(*domain.Machine) time.Duration {
	for _, p := range f.Pools {
		if d, _ := time.ParseDuration(p.MinLease); d > 0 {
			return f.MinLease
		}
	}
	return nil
}

// MinLease is the minimum lease of the pool machine m belongs to: the
// first pool of its region, GPU type and reservation; 0 when none.
func (f File) MinLease(m *domain.Machine) time.Duration {
	for _, p := range f.Pools {
		if p.Region != m.Region || p.GPUType != m.GPUType || (p.ReservedFor != "") != (m.ReservationID != "") {
			continue
		}
		if p.ReservedFor != "" && ReservationID(p) != m.ReservationID {
			continue
		}
		d, _ := time.ParseDuration(p.MinLease) // checked by Parse
		return d
	}
	return 0
}

// File is the fleet file.
type File struct {
	Pools []Pool `json:"pools"`
	// Prices are on-demand prices per GPU-hour by GPU type, as decimal
	// strings (for example "2.99").
	Prices map[string]string `json:"prices,omitempty"`
}

//go:embed default.yaml
var defaultYAML []byte

// Default returns the built-in fleet of the embedded default.
func Default() File {
	f, err := Parse(defaultYAML)
	if err != nil {
		panic(fmt.Sprintf("built-in fleet: %v", err))
	}
	return f
}

// Load reads and validates a fleet file.
func Load(path string) (File, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return File{}, fmt.Errorf("read fleet file: %w", err)
	}
	f, err := Parse(data)
	if err != nil {
		return File{}, fmt.Errorf("fleet file %s: %w", path, err)
	}
	return f, nil
}

var (
	priceRE = regexp.MustCompile(`^[0-9]{1,6}(\.[0-9]{1,6})?$`)
	idRE    = regexp.MustCompile(`^[a-z0-9]([a-z0-9._-]{0,62}[a-z0-9])?$`)
)

// Parse decodes and validates fleet YAML. Unknown keys are errors, so a
// typo does not silently drop a pool.
func Parse(data []byte) (File, error) {
	var f File
	if err := yaml.UnmarshalStrict(data, &f); err != nil {
		return File{}, fmt.Errorf("parse: %w", err)
	}
	if len(f.Pools) == 0 {
		return File{}, errors.New("no pools: list at least one under pools:")
	}
	for i := range f.Pools {
		p := &f.Pools[i]
		if p.GPUsPerMachine == 0 {
			p.GPUsPerMachine = domain.DefaultGPUsPerMachine
		}
		switch {
		case !domain.ValidName(p.Region):
			return File{}, fmt.Errorf("pool %d: region %q is not a valid name", i+1, p.Region)
		case !domain.ValidName(p.GPUType):
			return File{}, fmt.Errorf("pool %d: gpu_type %q is not a valid name", i+1, p.GPUType)
		case p.Machines < 1 || p.Machines > 100000:
			return File{}, fmt.Errorf("pool %d: machines must be between 1 and 100000; got %d", i+1, p.Machines)
		case p.GPUsPerMachine != domain.GPUStep:
			return File{}, fmt.Errorf("pool %d: gpus_per_machine must be %d (one node is %d GPUs); got %d", i+1, domain.GPUStep, domain.GPUStep, p.GPUsPerMachine)
		case p.ReservedFor != "" && !idRE.MatchString(p.ReservedFor):
			return File{}, fmt.Errorf("pool %d: reserved_for %q is not a valid project id", i+1, p.ReservedFor)
		}
		if p.MinLease != "" {
			d, err := time.ParseDuration(p.MinLease)
			if err != nil || d < 0 || d > MaxMinLease {
				return File{}, fmt.Errorf("pool %d: min_lease %.40q is not a duration between 0s and %s", i+1, p.MinLease, MaxMinLease)
			}
		}
	}
	for gpu, price := range f.Prices {
		if !priceRE.MatchString(price) {
			return File{}, fmt.Errorf("price of %s: %q is not a decimal amount like \"2.99\"", gpu, price)
		}
	}
	return f, nil
}

func slug(s string) string {
	return strings.Trim(regexp.MustCompile(`[^a-z0-9]+`).ReplaceAllString(strings.ToLower(s), "-"), "-")
}

// MachineIDs are derived from the pool's place in the file, so the same
// file names the same machines on every start.
func machineID(p Pool, n int) string {
	pool := "od"
	if p.ReservedFor != "" {
		pool = "rsv-" + p.ReservedFor
	}
	return fmt.Sprintf("%s-%s-%s-%02d", slug(p.Region), slug(p.GPUType), pool, n)
}

// ReservationID is the reservation a pool reserved for a project becomes.
func ReservationID(p Pool) string {
	return fmt.Sprintf("rsv-%s-%s-%s", p.ReservedFor, slug(p.Region), slug(p.GPUType))
}

// Register adds the file's projects, reservations and machines to the store,
// skipping those already there. It returns how many machines it added.
func Register(ctx context.Context, st store.Store, f File, now time.Time) (int, error) {
	added := 0
	err := st.Update(ctx, func(tx store.Tx) error {
		added = 0
		counts := map[string]int{}
		for _, p := range f.Pools {
			if p.ReservedFor != "" {
				if err := ignoreConflict(tx.CreateProject(ctx, domain.Project{ID: p.ReservedFor, CreatedAt: now})); err != nil {
					return fmt.Errorf("project %s: %w", p.ReservedFor, err)
				}
				res := domain.Reservation{ID: ReservationID(p), ProjectID: p.ReservedFor, Region: p.Region, GPUType: p.GPUType, CreatedAt: now}
				if err := ignoreConflict(tx.CreateReservation(ctx, res)); err != nil {
					return fmt.Errorf("reservation %s: %w", res.ID, err)
				}
			}
			key := machineID(p, 0)
			for i := 0; i < p.Machines; i++ {
				counts[key]++
				m := domain.Machine{ID: machineID(p, counts[key]), Region: p.Region, GPUType: p.GPUType, GPUs: p.GPUsPerMachine, CreatedAt: now}
				if p.ReservedFor != "" {
					m.ReservationID = ReservationID(p)
				}
				err := tx.CreateMachine(ctx, m)
				if err == nil {
					added++
				} else if !errors.Is(err, domain.ErrConflict) {
					return fmt.Errorf("machine %s: %w", m.ID, err)
				}
			}
		}
		return nil
	})
	return added, err
}

func ignoreConflict(err error) error {
	if errors.Is(err, domain.ErrConflict) {
		return nil
	}
	return err
}

// RegisterPrices records the file's on-demand prices and the deployment's
// preemptible discount (percent) in the price book, effective now, when
// they differ from what the file and flag said last time. Comparing with
// the last value the file set — not with the price in force — keeps a
// restart from undoing a price the admin API set since. Past usage keeps
// the price it had either way.
func RegisterPrices(ctx context.Context, st store.Store, f File, discountPercent string, now time.Time) error {
	if _, err := billing.ParsePercent(discountPercent); err != nil {
		return err
	}
	now = now.Truncate(time.Second)
	return st.Update(ctx, func(tx store.Tx) error {
		prices, err := tx.ListPrices(ctx)
		if err != nil {
			return err
		}
		// The last value each source key was given, prices being in
		// effective order.
		last := map[string]string{}
		for _, p := range prices {
			if k, ok := sourceKey(p.ID); ok {
				last[k] = p.Value
			}
		}
		add := func(key string, p domain.Price) error {
			p.ID = fmt.Sprintf("%s@%d", key, now.Unix())
			p.EffectiveFrom, p.CreatedAt = now, now
			return ignoreConflict(tx.CreatePrice(ctx, p))
		}
		gpus := make([]string, 0, len(f.Prices))
		for gpu := range f.Prices {
			gpus = append(gpus, gpu)
		}
		slices.Sort(gpus)
		for _, gpu := range gpus {
			key := "fleet-on-demand-" + gpu
			if v, ok := last[key]; ok && sameRate(v, f.Prices[gpu]) {
				continue
			}
			if err := add(key, domain.Price{Kind: domain.PriceOnDemand, GPUType: gpu, Value: f.Prices[gpu]}); err != nil {
				return fmt.Errorf("price of %s: %w", gpu, err)
			}
		}
		const key = "flag-preemptible-discount"
		if v, ok := last[key]; !ok || !samePercent(v, discountPercent) {
			if err := add(key, domain.Price{Kind: domain.PricePreemptibleDiscount, Value: discountPercent}); err != nil {
				return fmt.Errorf("preemptible discount: %w", err)
			}
		}
		return nil
	})
}

// sourceKey is the part of a price ID RegisterPrices wrote before "@".
func sourceKey(id string) (string, bool) {
	k, _, ok := strings.Cut(id, "@")
	return k, ok && (strings.HasPrefix(k, "fleet-") || strings.HasPrefix(k, "flag-"))
}

func sameRate(a, b string) bool {
	x, err1 := billing.ParseRate(a)
	y, err2 := billing.ParseRate(b)
	return err1 == nil && err2 == nil && x == y
}

func samePercent(a, b string) bool {
	x, err1 := billing.ParsePercent(a)
	y, err2 := billing.ParsePercent(b)
	return err1 == nil && err2 == nil && x == y
}
