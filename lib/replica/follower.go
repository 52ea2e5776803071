package replica

import (
	"errors"
	"fmt"
	"slices"

	"github.com/mqproject/mq/lib/log"
	"github.com/mqproject/mq/lib/record"
)

// FetchPosition is where a follower stands with its leader: what its
// fetcher sends.
type FetchPosition struct {
	Leader, LeaderEpoch int32
	// FetchOffset is the follower's log end offset: the next fetch's offset.
	FetchOffset int64
	// LastFetchedEpoch is the latest epoch of the follower's leader-epoch
	// history (-1 when empty): the epoch an OffsetForLeaderEpoch request
	// asks the leader about.
	LastFetchedEpoch int32
	// NeedsTruncation: since the last leadership change the follower has not
	// truncated with OffsetForLeaderEpoch. Its fetcher asks the leader
	// about LastFetchedEpoch and calls TruncateFromLeader, until this is
	// false, before it fetches.
	NeedsTruncation bool
	// Throttled: the topic's follower.replication.throttled.replicas
	// names this replica and it is out of the ISR: its fetches count
	// against the follower side of the replication throttle (Quota).
	Throttled bool
}

// FetchPosition returns the follower's position; false when this replica
// is the leader, the partition has no leader, or it is closed.
func (p *Partition) FetchPosition() (FetchPosition, bool) {
	p.stateMu.RLock()
	defer p.stateMu.RUnlock()
	if p.role != Follower || p.leader < 0 {
		return FetchPosition{}, false
	}
	p.mu.Lock()
	closed, needs := p.closed, p.needsTruncation
	p.mu.Unlock()
	if closed {
		return FetchPosition{}, false
	}
	return FetchPosition{
		Leader:           p.leader,
		LeaderEpoch:      p.leaderEpoch,
		FetchOffset:      p.log.EndOffset(),
		LastFetchedEpoch: p.log.LatestEpoch(),
		NeedsTruncation:  needs,
		Throttled:        p.throttled.Load()&throttleFollower != 0 && !slices.Contains(p.isr, p.cfg.NodeID),
	}, true
}

// checkFollowerLocked checks that the replica follows a leader in
// leaderEpoch, the epoch the fetcher's request was made under. Called
// with stateMu held.
func (p *Partition) checkFollowerLocked(leaderEpoch int32) error {
	switch {
	case p.isClosed():
		return ErrClosed
	case p.role != Follower || p.leader < 0:
		return ErrNotFollower
	}
	return p.checkEpochLocked(leaderEpoch)
}

// checkEpochLocked checks that a request between replicas was made under
// this replica's leader epoch. Called with stateMu held.
func (p *Partition) checkEpochLocked(leaderEpoch int32) error {
	switch {
	case leaderEpoch < p.leaderEpoch:
		return fmt.Errorf("%w: request in epoch %d, replica in %d", ErrFencedLeaderEpoch, leaderEpoch, p.leaderEpoch)
	case leaderEpoch > p.leaderEpoch:
		return fmt.Errorf("%w: request in epoch %d, replica in %d", ErrUnknownLeaderEpoch, leaderEpoch, p.leaderEpoch)
	}
	return nil
}

// TruncateFromLeader cuts the follower's log where it may diverge from its
// leader's, from the leader's OffsetForLeaderEpoch answer about
// FetchPosition.LastFetchedEpoch: epochFound is the largest epoch ≤ the
// one asked about in the leader's history, endOffset where that epoch ends
// on the leader. leaderEpoch is the leader epoch the request was made under.
//
// The rule is KIP-101 with KIP-279's refinement: when this log has
// epochFound too, it truncates to min(endOffset, this log's end offset for
// epochFound), and is done. When it lacks epochFound (its history skips
// it), it truncates to min(endOffset, this log's end offset for the largest
// epoch below epochFound) and is not done: its latest epoch is now older,
// and the fetcher asks again (FetchPosition.NeedsTruncation stays true).
// Each round drops at least one epoch, so this ends. The log is never cut
// to the high-water mark: records above it may be committed on the leader,
// and a replica that dropped them could be elected and lose them (KIP-101).
//
// When the leader found no epoch (epochFound or endOffset -1) the log is
// kept and the truncation is done. A leader records its own epoch when it
// starts (log.BeginEpoch), so this happens only when this log has no
// history (nothing to cut) or the leader's history lacks every epoch up to
// this log's latest; a fetch past the leader's log end then gets
// OFFSET_OUT_OF_RANGE, and ResetFetchOffset cuts the log to it. Kafka falls
// back to the high-water mark there, which loses the committed records
// above it if this replica is elected before it fetched them again.
//
// It returns ErrNotFollower on the leader or without one, and
// ErrFencedLeaderEpoch or ErrUnknownLeaderEpoch when leaderEpoch is not the
// replica's.
func (p *Partition) TruncateFromLeader(leaderEpoch int32, endOffset int64, epochFound int32) error {
	p.stateMu.RLock()
	defer p.stateMu.RUnlock()
	if err := p.checkFollowerLocked(leaderEpoch); err != nil {
		return err
	}
	done := true
	if epochFound >= 0 && endOffset >= 0 {
		target := min(endOffset, p.log.EndOffset())
		switch ownEnd, ownEpoch := p.log.EndOffsetForEpoch(epochFound); {
		case ownEnd < 0:
			// No epoch ≤ epochFound here: the leader's end offset alone.
		case ownEpoch == epochFound:
			target = min(target, ownEnd)
		default:
			target = min(target, ownEnd)
			done = false
		}
		if err := p.log.TruncateTo(target); err != nil {
			return p.afterLogChange(false, fmt.Errorf("replica: truncate to %d: %w", target, err))
		}
	}
	return p.afterLogChange(done, nil)
}

// Damage returns the log's first damaged range that was not skipped (see
// log.Damage): a follower repairs it from its leader (RefetchDamaged).
func (p *Partition) Damage() (log.Damage, bool) {
	for _, d := range p.log.Damaged() {
		if !d.Skipped { // a skipped one was given up by an operator: a gap the leader has too
			return d, true
		}
	}
	return log.Damage{}, false
}

// RefetchDamaged cuts a follower's log at offset, where a damaged range
// starts (Damage), so that its fetcher fetches that range, and everything
// after it, from the leader again: damage on one replica is repaired from
// the leader's copy instead of staying withheld, and a follower's bytes
// below the high-water mark become the leader's again. It reports whether
// it cut anything. leaderEpoch is the epoch the fetcher follows in.
//
// An ISR member must hold every record below the high-water mark: one
// that cut them could be elected and lose them. Only the leader knows
// whether this replica is in the ISR or about to be (it adds followers;
// this replica's image may not show it yet), so the cut must have its
// leave first: GrantRefetch of offset, asked in leaderEpoch, which also
// keeps this replica out of the ISR until it fetches at or below offset.
// Errors as for TruncateFromLeader.
func (p *Partition) RefetchDamaged(leaderEpoch int32, offset int64) (bool, error) {
	p.stateMu.RLock()
	defer p.stateMu.RUnlock()
	if err := p.checkFollowerLocked(leaderEpoch); err != nil {
		return false, err
	}
	if offset >= p.log.EndOffset() {
		return false, nil
	}
	if err := p.log.TruncateTo(offset); err != nil {
		return false, p.afterLogChange(false, fmt.Errorf("replica: truncate before the damage at %d: %w", offset, err))
	}
	return true, p.afterLogChange(false, nil)
}

// afterLogChange brings the offsets in line with the log after a follower
// changed it (the high-water mark stays within [log start, log end]) and
// clears NeedsTruncation when done. A truncation that lowered the
// high-water mark checkpoints it at once: a crash before the next periodic
// checkpoint would otherwise find the log below the checkpoint and take
// this replica for one that lost committed records (LostCommitted). It
// returns err, or the checkpoint's error.
func (p *Partition) afterLogChange(done bool, err error) error {
	start, end := p.log.StartOffset(), p.log.EndOffset()
	p.mu.Lock()
	p.logEndOffset = end
	before := p.highWatermark
	p.highWatermark = min(max(p.highWatermark, start), end)
	hw := p.highWatermark
	if done {
		p.needsTruncation = false
	}
	p.mu.Unlock()
	if hw < before && err == nil {
		err = p.log.CheckpointHighWatermark(hw)
	}
	if errors.Is(err, log.ErrClosed) {
		err = ErrClosed
	}
	return err
}

// AppendFromLeader appends the batches of a fetch response from the leader,
// which was made under leaderEpoch, and takes the leader's high-water mark
// and log start offset from it. The bytes are split into batches by their
// headers only: no record is decoded. Each batch's CRC is checked, then it
// is appended as the leader wrote it (log.AppendAsFollower). A partial
// batch at the end (a fetch cut at its byte limit) is left for the next
// fetch; a batch the log already has is skipped. A batch that starts below
// the log end but ends past it is appended after truncating the log to
// the batch's start: either the leader's log start fell inside that batch
// (DeleteRecords) and ResetFetchOffset restarted this log there, or the two
// logs cut their batches differently there, so they diverge.
//
// Then the high-water mark becomes min(leaderHW, log end offset) when that
// is higher, and the log start offset moves up to min(leaderLogStart,
// high-water mark) (records the leader deleted).
//
// It returns the number of bytes appended, with ErrNotFollower,
// ErrFencedLeaderEpoch or ErrUnknownLeaderEpoch when the replica no longer
// follows in leaderEpoch (nothing is appended), ErrTruncationNeeded before
// TruncateFromLeader completed, or the error of the first bad batch (what
// came before it is appended).
func (p *Partition) AppendFromLeader(leaderEpoch int32, batches []byte, leaderHW, leaderLogStart int64) (int, error) {
	p.stateMu.RLock()
	defer p.stateMu.RUnlock()
	if err := p.checkFollowerLocked(leaderEpoch); err != nil {
		return 0, err
	}
	p.mu.Lock()
	needs := p.needsTruncation
	p.mu.Unlock()
	if needs {
		return 0, ErrTruncationNeeded
	}
	n, err := p.appendBatches(batches)

	start, end := p.log.StartOffset(), p.log.EndOffset()
	p.mu.Lock()
	moved := end != p.logEndOffset
	p.logEndOffset = end
	if hw := min(leaderHW, end); hw > p.highWatermark {
		p.highWatermark = hw
		moved = true
	}
	p.highWatermark = min(max(p.highWatermark, start), end)
	hw := p.highWatermark
	// Everything below end came from this leader in this epoch (the
	// truncation made the logs agree first), and its high-water mark is
	// at most its log end.
	p.leaderEndSeen = max(p.leaderEndSeen, end, leaderHW)
	if moved {
		p.notifyLocked()
	}
	p.mu.Unlock()
	if newStart := min(leaderLogStart, hw); err == nil && newStart > start {
		if derr := p.log.DeleteRecordsBefore(newStart); derr != nil {
			err = fmt.Errorf("replica: follow the leader's log start %d: %w", newStart, derr)
		}
	}
	if errors.Is(err, log.ErrClosed) {
		err = ErrClosed
	}
	return n, err
}

// appendBatches appends the whole batches of b as a follower and returns
// the number of bytes appended. Under flush.policy=always they are made
// durable together, once, before it returns, whether or not a batch
// failed: the follower's next fetch reports them to the leader as its own.
func (p *Partition) appendBatches(b []byte) (int, error) {
	n, err := p.appendUnsynced(b)
	if n > 0 {
		if serr := p.log.SyncFollowerAppends(); serr != nil && err == nil {
			err = fmt.Errorf("replica: make the leader's batches durable: %w", serr)
		}
	}
	return n, err
}

// appendUnsynced is appendBatches without the fsync.
func (p *Partition) appendUnsynced(b []byte) (int, error) {
	end := p.log.EndOffset()
	n := 0
	for len(b) > 0 {
		batch, rest, h, err := record.Next(b)
		if errors.Is(err, record.ErrTruncated) {
			break // cut by the fetch's byte limit: the next fetch has it whole
		}
		if err != nil {
			return n, fmt.Errorf("replica: batch from the leader at offset %d: %w", end, err)
		}
		if err := record.CheckCRC(batch); err != nil {
			return n, fmt.Errorf("replica: batch from the leader at offset %d: %w", h.BaseOffset, err)
		}
		b = rest
		if h.LastOffset() < end {
			continue
		}
		if h.BaseOffset < end {
			if err := p.log.TruncateTo(h.BaseOffset); err != nil {
				return n, fmt.Errorf("replica: truncate to the leader's batch at %d: %w", h.BaseOffset, err)
			}
		}
		if err := p.log.AppendAsFollowerUnsynced(batch); err != nil {
			return n, fmt.Errorf("replica: append the leader's batch at %d: %w", h.BaseOffset, err)
		}
		end = h.LastOffset() + 1
		n += len(batch)
	}
	return n, nil
}

// ResetFetchOffset handles a fetch the leader answered with
// OFFSET_OUT_OF_RANGE, given the leader's log start and end offsets from
// that answer. A fetch offset below the leader's log start (the leader
// deleted what this follower still needs) empties the log and restarts it
// at the leader's log start; one above the leader's log end (this log has
// a suffix the leader never had) truncates the log to the leader's end.
// Otherwise nothing changes. Errors as for TruncateFromLeader.
//
// A leader's log end below what this follower already fetched from it in
// the same leader epoch means the leader lost records (it came back from
// a power loss leading in the epoch it had). The log is not cut: what it
// holds there may be acknowledged and on no other replica. It returns
// ErrLeaderLostRecords, and the fetcher tries again; the controller gives
// the leader's new incarnation a new leader epoch (or moves the
// leadership), after which TruncateFromLeader reconciles the logs.
func (p *Partition) ResetFetchOffset(leaderEpoch int32, leaderLogStart, leaderLogEnd int64) error {
	p.stateMu.RLock()
	defer p.stateMu.RUnlock()
	if err := p.checkFollowerLocked(leaderEpoch); err != nil {
		return err
	}
	p.mu.Lock()
	seen := p.leaderEndSeen
	p.mu.Unlock()
	if leaderLogEnd < seen {
		return fmt.Errorf("%w: leader epoch %d, its log end %d, fetched up to %d from it", ErrLeaderLostRecords, leaderEpoch, leaderLogEnd, seen)
	}
	switch end := p.log.EndOffset(); {
	case end < leaderLogStart:
		if err := p.log.RestartAt(leaderLogStart); err != nil {
			return p.afterLogChange(false, fmt.Errorf("replica: restart at the leader's log start %d: %w", leaderLogStart, err))
		}
		// An empty log has nothing to truncate.
		return p.afterLogChange(true, nil)
	case end > leaderLogEnd:
		if err := p.log.TruncateTo(leaderLogEnd); err != nil {
			return p.afterLogChange(false, fmt.Errorf("replica: truncate to the leader's log end %d: %w", leaderLogEnd, err))
		}
	}
	return p.afterLogChange(false, nil)
}
