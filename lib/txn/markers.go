package txn

import (
	"context"
	"log/slog"
	"slices"
	"time"

	"github.com/mqproject/mq/lib/clock"
)

// Peers sends the transaction requests one broker makes of another;
// lib/peer's Nodes implements it over the Kafka protocol. Its methods
// may be called concurrently.
type Peers interface {
	// WriteTxnMarkers sends m's marker for tps, partitions node leads, to
	// node (WriteTxnMarkers) and returns those that did not get it, with
	// the first partition's error or the request's.
	WriteTxnMarkers(ctx context.Context, node int32, m Marker, tps []TopicPartition) (failed []TopicPartition, err error)
	// AddPartitionsToTxn asks the coordinator of id on node
	// (AddPartitionsToTxn v4): with verifyOnly whether each of tps is in
	// the ongoing transaction of producerID at epoch, else to add them to
	// it. It returns each partition's Kafka error code; the error is a
	// coordinator that could not be asked.
	AddPartitionsToTxn(ctx context.Context, node int32, id string, producerID int64, epoch int16, tps []TopicPartition, verifyOnly bool) (map[TopicPartition]int16, error)
}

// MarkerWriter is Markers over Peers: one WriteTxnMarkers to the leader
// of each partition's (this node's own partitions too, through its
// listener), again with a backoff for those that failed or have no
// leader, until every partition has its marker. A partition whose topic
// is gone counts as written, as in Kafka.
type MarkerWriter struct {
	// Leader returns tp's leader (-1: none now), and false when tp no
	// longer exists.
	Leader func(tp TopicPartition) (leader int32, exists bool)
	Peers  Peers
	Clock  clock.Clock  // nil: the real clock
	Logger *slog.Logger // nil: silent
}

// Marker retries back off from markerBackoff to markerMaxBackoff.
const (
	markerBackoff    = 100 * time.Millisecond
	markerMaxBackoff = 2 * time.Second
)

// Write implements Markers.
func (w *MarkerWriter) Write(ctx context.Context, m Marker, written func([]TopicPartition)) error {
	clk := w.Clock
	if clk == nil {
		clk = clock.Real()
	}
	remaining := slices.Clone(m.Partitions)
	backoff := markerBackoff
	for {
		byLeader := map[int32][]TopicPartition{}
		var retry []TopicPartition
		var gone []TopicPartition
		for _, tp := range remaining {
			leader, exists := w.Leader(tp)
			switch {
			case !exists:
				gone = append(gone, tp)
			case leader < 0:
				retry = append(retry, tp)
			default:
				byLeader[leader] = append(byLeader[leader], tp)
			}
		}
		if len(gone) > 0 && written != nil {
			written(gone)
		}
		for leader, tps := range byLeader {
			failed, err := w.Peers.WriteTxnMarkers(ctx, leader, m, tps)
			if err != nil && ctx.Err() == nil && w.Logger != nil {
				w.Logger.Debug("write transaction markers", "transactional_id", m.TransactionalID, "node", leader, "err", err)
			}
			if done := slices.DeleteFunc(slices.Clone(tps), func(tp TopicPartition) bool { return slices.Contains(failed, tp) }); len(done) > 0 && written != nil {
				written(done)
			}
			retry = append(retry, failed...)
		}
		if len(retry) == 0 {
			return nil
		}
		remaining = retry
		t := clk.NewTimer(backoff)
		select {
		case <-t.C():
		case <-ctx.Done():
			t.Stop()
			return ctx.Err()
		}
		backoff = min(2*backoff, markerMaxBackoff)
	}
}
