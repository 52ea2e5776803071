package replica

import (
	"slices"

	"github.com/mqproject/mq/lib/log"
)

// Resignation is a leader's proposal to give its partition up (the
// controller's ResignLeadership), made under the epochs it names, for the
// damaged range it cannot serve.
type Resignation struct {
	LeaderEpoch    int32
	PartitionEpoch int32
	Damage         log.Damage
}

// ProposeResignation reports whether the leader should hand the partition
// to another ISR member, and marks the resignation pending: its log has a
// damaged range it has not skipped, which it withholds from consumers and
// followers alike, and its committed ISR has another member. Every ISR
// member holds every record below the high-water mark, so the one the
// controller elects can serve what this log cannot; this replica, a
// follower outside the ISR then, cuts the range and fetches it again
// (RefetchDamaged). A damage above the high-water mark is no reason to
// keep the leadership either: followers could never fetch past it.
//
// It proposes nothing on a follower, on a leader alone in its ISR (it
// keeps the range withheld: no replica is known to hold it), while an ISR
// change or a resignation is pending, and for replica.lag.time.max.ms
// after the controller refused one (ResignationRefused; the other
// members may be fenced). A Become with new epochs ends a pending one.
func (p *Partition) ProposeResignation() (Resignation, bool) {
	p.stateMu.RLock()
	defer p.stateMu.RUnlock()
	if p.role != Leader || !slices.ContainsFunc(p.isr, func(r int32) bool { return r != p.cfg.NodeID }) {
		return Resignation{}, false
	}
	damaged := p.log.Damaged()
	i := slices.IndexFunc(damaged, func(d log.Damage) bool { return !d.Skipped })
	if i < 0 {
		return Resignation{}, false
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.closed || p.pending != nil || p.resigning ||
		(!p.resignRefused.IsZero() && p.clock.Now().Sub(p.resignRefused) < p.cfg.ReplicaLagTime) {
		return Resignation{}, false
	}
	p.resigning = true
	return Resignation{LeaderEpoch: p.leaderEpoch, PartitionEpoch: p.partitionEpoch, Damage: damaged[i]}, true
}

// ResignationRefused ends the pending resignation after the controller
// refused it or could not be reached; the next is proposed no sooner than
// replica.lag.time.max.ms from now.
func (p *Partition) ResignationRefused() {
	p.stateMu.RLock()
	defer p.stateMu.RUnlock()
	p.mu.Lock()
	defer p.mu.Unlock()
	p.resigning = false
	p.resignRefused = p.clock.Now()
}
