package replica

import (
	"fmt"
	"slices"
)

// ISRChange is an ISR the leader proposes to the controller (AlterPartition),
// made under its leader epoch and the partition epoch it last saw: the
// controller refuses it when either moved on, so a stale leader never
// overwrites a newer ISR.
type ISRChange struct {
	LeaderEpoch    int32
	PartitionEpoch int32
	ISR            []int32
}

// pendingISR is an ISR proposal waiting for the controller.
type pendingISR struct {
	leaderEpoch, partitionEpoch int32   // the epochs it was made under
	isr                         []int32 // the proposed ISR
	added                       []int32 // its members not in the committed ISR
}

// is reports whether c is this proposal: a report about an older one
// (ended by a Become, answered late) must not end a newer one.
func (q *pendingISR) is(c ISRChange) bool {
	return q != nil && q.leaderEpoch == c.LeaderEpoch && q.partitionEpoch == c.PartitionEpoch && slices.Equal(q.isr, c.ISR)
}

// ProposeISR computes the ISR change the leader should propose, if any, and
// marks it pending. In one change it removes the ISR followers that have
// not caught up with the leader's log end for replica.lag.time.max.ms, or
// that asked to cut a damaged log (GrantRefetch), and adds the followers
// outside the ISR (and not cutting one) whose fetch offset has reached both
// the high-water mark and the start of the leader's epoch (a follower that
// has not fetched past the epoch start may still hold a divergent suffix
// of an older leader) and that were caught up within
// replica.lag.time.max.ms. The leader never leaves its own ISR.
//
// It also adds again, caught up or not, the unresolved followers: those a
// proposal whose outcome is unknown was adding (ISRProposalUnresolved),
// which the controller may have committed. The high-water mark has waited
// for them since they were first proposed, so they hold every record
// below it and adding them is safe; proposing them again is how their
// outcome gets settled: either this proposal is committed, or it is
// refused because the earlier one was, and either way the image moves to
// a newer partition epoch. (A proposal without them could equal the
// committed ISR, which the controller accepts without a new partition
// epoch: nothing would ever settle them.) Followers that lag leave in a
// later change, once the image has them in the ISR.
//
// While a change is pending, ProposeISR proposes nothing, and the
// high-water mark waits for the maximal ISR: the committed ISR, the
// followers being added, and the unresolved ones. The next Become with a
// newer partition epoch, ISRProposalRefused or ISRProposalUnresolved ends
// it. It reports false on a follower, while a change is pending, and when
// the ISR is as it should be.
//
// A caught-up follower joins only where eligible says its broker may be
// in an ISR (nil: every broker may): the controller refuses a fenced
// broker or one shutting down, and a follower that stopped fetching at
// the log end of an idle partition looks caught up for
// replica.lag.time.max.ms, so without the check the leader would propose
// it every round, each proposal a Raft command refused (KIP-841 has
// Kafka's leaders check the same). Unresolved followers are proposed
// whatever their broker's state: the refusal is what settles them.
func (p *Partition) ProposeISR(eligible func(replica int32) bool) (ISRChange, bool) {
	p.stateMu.RLock()
	defer p.stateMu.RUnlock()
	if p.role != Leader {
		return ISRChange{}, false
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.pending != nil || p.closed {
		return ISRChange{}, false
	}
	now := p.clock.Now()
	self := p.cfg.NodeID
	lagging := func(r int32) bool {
		f := p.followers[r]
		return r != self && f != nil && !f.inSync(now, p.cfg.ReplicaLagTime)
	}
	// A follower joins only while it keeps up: one that reached the HW
	// and then went silent (died at the log end of an idle partition) is
	// not caught up once replica.lag.time.max.ms has passed. An
	// unresolved one is proposed again whatever its state (see above).
	joining := func(r int32) bool {
		if r == self || slices.Contains(p.isr, r) {
			return false
		}
		if slices.Contains(p.unresolved, r) {
			return true
		}
		f := p.followers[r]
		return f != nil && (eligible == nil || eligible(r)) && f.fetchOffset >= 0 &&
			f.fetchOffset >= p.highWatermark && f.fetchOffset >= p.epochStart &&
			f.inSync(now, p.cfg.ReplicaLagTime)
	}
	// Allocate only for a change: the ISR loop calls this often.
	if !slices.ContainsFunc(p.isr, lagging) && !slices.ContainsFunc(p.replicas, joining) && slices.Contains(p.isr, self) {
		return ISRChange{}, false
	}
	isr := make([]int32, 0, len(p.replicas)+1)
	if !slices.Contains(p.isr, self) {
		isr = append(isr, self)
	}
	for _, r := range p.isr {
		if !lagging(r) {
			isr = append(isr, r)
		}
	}
	var added []int32
	for _, r := range p.replicas {
		if joining(r) {
			isr = append(isr, r)
			added = append(added, r)
		}
	}
	p.pending = &pendingISR{leaderEpoch: p.leaderEpoch, partitionEpoch: p.partitionEpoch, isr: isr, added: added}
	p.setMaximalISRLocked()
	return ISRChange{LeaderEpoch: p.leaderEpoch, PartitionEpoch: p.partitionEpoch, ISR: slices.Clone(isr)}, true
}

// GrantRefetch answers a follower that found a damaged range in its log
// and asks leave to cut the log at offset and fetch the rest again
// (lib/kafkaext's Refetch). An ISR member must hold every record below
// the high-water mark, and the follower's own image cannot tell it
// whether it is one: this leader may have just added it, or be adding it.
// So the leader decides. It grants the cut only when the follower is in
// none of its ISRs: the committed one, the pending proposal's, the
// unresolved additions. Either way, from now on the follower counts as
// lagging (ProposeISR takes it out of the ISR at the next round) and does
// not join, until a fetch at or below offset shows that it has cut; then
// it rejoins as any follower does, once it has fetched up to the
// high-water mark again. Refused, the follower asks again later.
//
// leaderEpoch is the epoch the follower follows in. It returns
// ErrNotLeader on a follower, ErrFencedLeaderEpoch or
// ErrUnknownLeaderEpoch when leaderEpoch is not this leader's, and
// ErrNotReplica (an ErrNotLeader) when replica is not one of its
// followers; then nothing changes.
func (p *Partition) GrantRefetch(replica, leaderEpoch int32, offset int64) (bool, error) {
	p.stateMu.RLock()
	defer p.stateMu.RUnlock()
	if p.role != Leader {
		return false, ErrNotLeader
	}
	if err := p.checkEpochLocked(leaderEpoch); err != nil {
		return false, err
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	f := p.followers[replica]
	if f == nil || replica == p.cfg.NodeID {
		return false, fmt.Errorf("%w: broker %d", ErrNotReplica, replica)
	}
	f.refetching, f.refetchAt = true, offset
	return !slices.Contains(p.maximalISR, replica), nil
}

// ISRProposalRefused ends the pending ISR proposal c after the controller
// refused it in a way that proves it applied nothing (an invalid ISR, an
// ineligible replica), having checked that the partition was still at c's
// epochs: the followers it was adding leave the maximal ISR, and so do the
// unresolved ones (ISRProposalUnresolved), which earlier proposals made
// under the same epochs were adding: had one of those been committed, the
// partition epoch would have moved. The high-water mark may then move on
// without them; the next ProposeISR computes a new proposal. It does
// nothing when c is no longer the pending proposal (a Become with a newer
// partition epoch ended it).
//
// Only such a refusal may be reported here. When the proposal may have
// been committed (a timeout, a broken connection, a refusal for stale
// epochs), report ISRProposalUnresolved: dropping a follower the
// controller put in the ISR from the high-water mark's set would let the
// mark pass records that follower lacks, and the follower could then be
// elected leader without them.
func (p *Partition) ISRProposalRefused(c ISRChange) {
	p.stateMu.RLock()
	defer p.stateMu.RUnlock()
	p.mu.Lock()
	defer p.mu.Unlock()
	if !p.pending.is(c) {
		return
	}
	p.pending = nil
	p.unresolved = nil // made under c's epochs: see above
	p.setMaximalISRLocked()
	// Without the followers being added the high-water mark may move.
	if p.advanceLocked() {
		p.notifyLocked()
	}
}

// ISRProposalUnresolved ends the pending ISR proposal c when its outcome is
// unknown: the controller may or may not have committed it. The followers
// it was adding become unresolved: they stay in the maximal ISR, so the
// high-water mark keeps waiting for them, and the next ProposeISR proposes
// them again, until a Become with a newer partition epoch (or a new
// leadership) brings the image that says whether they are in the ISR.
// Its removals need nothing: the maximal ISR keeps the committed ISR's
// members until the image drops them. It does nothing when c is no longer
// the pending proposal.
func (p *Partition) ISRProposalUnresolved(c ISRChange) {
	p.stateMu.RLock()
	defer p.stateMu.RUnlock()
	p.mu.Lock()
	defer p.mu.Unlock()
	if !p.pending.is(c) {
		return
	}
	for _, r := range p.pending.added {
		if !slices.Contains(p.unresolved, r) {
			p.unresolved = append(p.unresolved, r)
		}
	}
	p.pending = nil
	p.setMaximalISRLocked() // the same set: the high-water mark stays where it is
}

// setMaximalISRLocked recomputes maximalISR from the committed ISR, the
// pending additions and the unresolved ones. Called with stateMu (read or
// write) and mu held.
func (p *Partition) setMaximalISRLocked() {
	if (p.pending == nil || len(p.pending.added) == 0) && len(p.unresolved) == 0 {
		p.maximalISR = p.isr
		return
	}
	m := slices.Clone(p.isr)
	var added []int32
	if p.pending != nil {
		added = p.pending.added
	}
	for _, r := range slices.Concat(added, p.unresolved) {
		if !slices.Contains(m, r) {
			m = append(m, r)
		}
	}
	p.maximalISR = m
}
