package tail

import (
	"context"
	"time"
)

// Once takes the snapshot mqtail --once prints: a first sample, then,
// interval later, a second whose rates are measured against the first.
// An error of either sample is returned (unreachable when the broker
// cannot be reached).
func Once(ctx context.Context, sample func() (Snapshot, error), interval time.Duration) (Snapshot, error) {
	if _, err := sample(); err != nil {
		return Snapshot{}, err
	}
	t := time.NewTimer(interval)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return Snapshot{}, ctx.Err()
	case <-t.C:
	}
	return sample()
}
