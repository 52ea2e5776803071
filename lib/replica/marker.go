package replica

import (
	"context"
	"time"

	"github.com/mqproject/mq/lib/record"
)

// MarkerWaitTimeout bounds the wait for a marker to reach the high-water
// mark (WriteTxnMarkers has no timeout of its own; Kafka's coordinator
// gives up on a request after request.timeout.ms, 30 s).
const MarkerWaitTimeout = 30 * time.Second

// MarkerWrite is a transaction marker appended by WriteMarker.
type MarkerWrite struct {
	p          *Partition
	lastOffset int64
	epoch      int32
}

// WriteMarker appends the control batch of m, a transaction
// coordinator's marker, as leader, timestamped ts (Unix milliseconds).
// The log refuses a marker of a producer epoch older than the producer's
// and one from an older coordinator epoch, keeping its state. Like any
// append it does not wait for the followers: Wait does.
func (p *Partition) WriteMarker(m record.Marker, ts int64) (MarkerWrite, error) {
	res, err := p.Append(record.BuildMarker(m, ts), -1)
	if err != nil {
		return MarkerWrite{}, err
	}
	return MarkerWrite{p: p, lastOffset: res.LastOffset, epoch: res.LeaderEpoch}, nil
}

// Wait waits, at most MarkerWaitTimeout, until the marker is on every
// in-sync replica (WaitHighWatermark).
func (w MarkerWrite) Wait(ctx context.Context) error {
	ctx, cancel := context.WithTimeout(ctx, MarkerWaitTimeout)
	defer cancel()
	return w.p.WaitHighWatermark(ctx, w.lastOffset, w.epoch)
}
