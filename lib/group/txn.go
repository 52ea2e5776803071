package group

import (
	"context"
	"maps"

	"github.com/mqproject/mq/lib/record"
)

// TxnCommitRequest is a TxnOffsetCommit: offsets committed in the
// transaction of a producer. Generation -1 with no member id commits
// without checking membership (clients before KIP-447).
type TxnCommitRequest struct {
	Group         string
	ProducerID    int64
	ProducerEpoch int16
	MemberID      string
	InstanceID    string
	Generation    int32
	Offsets       []CommitOffset
}

// TxnCommitOffsets handles a TxnOffsetCommit. The offsets are appended to
// the group's partition as one transactional batch of the producer (as
// Kafka writes them) and, once it is durable, held as the producer's
// pending offsets: OffsetFetch does not show them until the transaction's
// commit marker is written to the partition (CompleteTransaction). Errors
// are as CommitOffsets's.
func (c *Coordinator) TxnCommitOffsets(ctx context.Context, r TxnCommitRequest) ([]error, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	checked := r.MemberID != "" || r.Generation >= 0
	g, err := c.committingGroupLocked(r.Group, !checked)
	if err != nil {
		return nil, err
	}
	if checked {
		m, err := g.validate(r.MemberID, r.InstanceID, r.Generation)
		if err != nil {
			return nil, err
		}
		g.touch(m)
	}
	errs, kept, keys, values := c.offsetRecords(r.Group, r.Offsets)
	pending := make(map[TopicPartition]Offset, len(kept))
	for _, o := range kept {
		pending[o.TopicPartition] = o.Offset
	}
	if len(keys) == 0 {
		g.dropIfVacant()
		return errs, nil
	}
	opts := record.BuildOptions{Idempotent: true, ProducerID: r.ProducerID, ProducerEpoch: r.ProducerEpoch, BaseSequence: -1, Transactional: true}
	w, err := c.appendBatchLocked(g.partition, opts, keys, values)
	if err != nil {
		g.dropIfVacant()
		return nil, err
	}
	if err := c.awaitLocked(ctx, w); err != nil {
		g.dropIfVacant()
		return nil, err
	}
	if c.groups[r.Group] == g {
		g.addTxnOffsets(r.ProducerID, pending)
	}
	return errs, nil
}

// addTxnOffsets holds offsets of producerID's transaction.
func (g *group) addTxnOffsets(producerID int64, offsets map[TopicPartition]Offset) {
	held := g.txnOffsets[producerID]
	if held == nil {
		held = map[TopicPartition]Offset{}
		g.txnOffsets[producerID] = held
	}
	maps.Copy(held, offsets)
}

// completeTransaction makes producerID's pending offsets the group's
// (commit) or drops them (abort).
func (g *group) completeTransaction(producerID int64, commit bool) {
	held := g.txnOffsets[producerID]
	if held == nil {
		return
	}
	delete(g.txnOffsets, producerID)
	if commit {
		maps.Copy(g.offsets, held)
	}
}

// CompleteTransaction applies the end of producerID's transaction to the
// groups of a partition of __consumer_offsets: the leader's
// WriteTxnMarkers handler calls it once it has appended the marker to
// that partition. With commit the offsets the producer committed in the
// transaction (TxnCommitOffsets) become the groups' committed offsets;
// otherwise they are dropped. The marker is the record of it: a
// coordinator that replays the partition finds the same; an end that
// comes while the partition loads is applied when the load is done.
func (c *Coordinator) CompleteTransaction(partition int32, producerID int64, producerEpoch int16, commit bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if op := c.owned.GetLocked(partition); op != nil && op.Loading() {
		op.State = append(op.State, completion{producerID, commit})
		return
	}
	n := 0
	for _, g := range c.groups {
		if g.partition == partition && g.txnOffsets[producerID] != nil {
			g.completeTransaction(producerID, commit)
			g.dropIfVacant()
			n++
		}
	}
	if n > 0 {
		c.log.Debug("transaction offsets completed", "partition", partition, "producer_id", producerID,
			"epoch", producerEpoch, "commit", commit, "groups", n)
	}
}

// HasPendingOffsets reports whether partition tp of a group has offsets
// committed in a transaction not ended yet: OffsetFetch's require_stable
// (KIP-447) answers UNSTABLE_OFFSET_COMMIT for it.
func (c *Coordinator) HasPendingOffsets(groupID string, tp TopicPartition) bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	g := c.groups[groupID]
	if g == nil {
		return false
	}
	for _, held := range g.txnOffsets {
		if _, ok := held[tp]; ok {
			return true
		}
	}
	return false
}
