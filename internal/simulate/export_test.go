package simulate

import (
	"context"

	"github.com/sparecap/sparecap/internal/store"
)

// RunInspect is Run with a look at the simulated control plane's store
// once the run is over, for the tests outside the package.
func RunInspect(ctx context.Context, sc Scenario, evs []Event, pol Policy, inspect func(store.Store) error) (*Result, error) {
	return run(ctx, sc, evs, pol, nil, inspect)
}
