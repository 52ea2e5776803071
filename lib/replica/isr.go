package replica

import "slices"

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
	isr   []int32 // the proposed ISR
	added []int32 // its members not in the committed ISR
}

// ProposeISR computes the ISR change the leader should propose, if any, and
// marks it pending. In one change it removes the ISR followers that have
// not caught up with the leader's log end for replica.lag.time.max.ms and
// adds the followers outside the ISR whose fetch offset has reached both
// the high-water mark and the start of the leader's epoch (a follower that
// has not fetched past the epoch start may still hold a divergent suffix
// of an older leader) and that were caught up within
// replica.lag.time.max.ms. The leader never leaves its own ISR.
//
// While a change is pending, ProposeISR proposes nothing, and the
// high-water mark waits for the maximal ISR: the committed ISR and the
// followers being added. The next Become with a newer partition epoch, or
// ISRProposalFailed, ends it. It reports false on a follower, while a
// change is pending, and when the ISR is as it should be.
func (p *Partition) ProposeISR() (ISRChange, bool) {
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
		return r != self && f != nil && now.Sub(f.lastCaughtUp) > p.cfg.ReplicaLagTime
	}
	// A follower joins only while it keeps up: one that reached the HW
	// and then went silent (died at the log end of an idle partition) is
	// not caught up once replica.lag.time.max.ms has passed.
	caughtUp := func(r int32) bool {
		f := p.followers[r]
		return r != self && f != nil && f.fetchOffset >= 0 &&
			f.fetchOffset >= p.highWatermark && f.fetchOffset >= p.epochStart &&
			now.Sub(f.lastCaughtUp) <= p.cfg.ReplicaLagTime &&
			!slices.Contains(p.isr, r)
	}
	// Allocate only for a change: the ISR loop calls this often.
	if !slices.ContainsFunc(p.isr, lagging) && !slices.ContainsFunc(p.replicas, caughtUp) && slices.Contains(p.isr, self) {
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
		if caughtUp(r) {
			isr = append(isr, r)
			added = append(added, r)
		}
	}
	p.pending = &pendingISR{isr: isr, added: added}
	p.setMaximalISRLocked()
	return ISRChange{LeaderEpoch: p.leaderEpoch, PartitionEpoch: p.partitionEpoch, ISR: slices.Clone(isr)}, true
}

// ISRProposalFailed ends the pending ISR proposal after the controller
// refused it or could not be reached: the next ProposeISR computes a new
// one. (A Become with a newer partition epoch ends it too.)
func (p *Partition) ISRProposalFailed() {
	p.stateMu.RLock()
	defer p.stateMu.RUnlock()
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.pending == nil {
		return
	}
	p.pending = nil
	p.setMaximalISRLocked()
	// Without the followers being added the high-water mark may move.
	if p.advanceLocked() {
		p.notifyLocked()
	}
}

// setMaximalISRLocked recomputes maximalISR from the committed ISR and the
// pending additions. Called with stateMu (read or write) and mu held.
func (p *Partition) setMaximalISRLocked() {
	if p.pending == nil || len(p.pending.added) == 0 {
		p.maximalISR = p.isr
		return
	}
	m := slices.Clone(p.isr)
	for _, r := range p.pending.added {
		if !slices.Contains(m, r) {
			m = append(m, r)
		}
	}
	p.maximalISR = m
}
