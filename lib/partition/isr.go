package partition

import (
	"context"
	"errors"
	"sync"
	"time"

	"github.com/mqproject/mq/lib/controller"
	"github.com/mqproject/mq/lib/replica"
)

// maxISRProposals bounds the AlterPartition proposals in flight at once:
// when a follower dies, every partition it followed shrinks together, and
// when it comes back every one grows again. Each is a Raft command, and
// Raft commits those waiting together, so more in flight confirm more a
// second.
const maxISRProposals = 128

// isrCheckInterval is how often the leaders check their followers: often
// enough that a follower caught up rejoins the ISR promptly, and at most
// half of replica.lag.time.max.ms, as Kafka checks.
func isrCheckInterval(lag time.Duration) time.Duration {
	return min(max(lag/2, time.Millisecond), 250*time.Millisecond)
}

// maintain runs the leader's periodic replication chores until stop: ISR
// changes and hand-overs of damaged partitions (proposed to the
// controller), high-water mark checkpoints, and the steps of the auto
// replication throttle (autothrottle.go).
func (m *Manager) maintain() {
	defer close(m.maintained)
	s := m.cfg.Settings
	isr := m.clock.NewTicker(isrCheckInterval(s.ReplicaLagTime))
	defer isr.Stop()
	every := s.ReplicaHighWatermarkCheckpointInterval
	if every <= 0 {
		every = 5 * time.Second
	}
	hw := m.clock.NewTicker(every)
	defer hw.Stop()
	auto := m.clock.NewTicker(autoInterval)
	defer auto.Stop()
	ctx, cancel := context.WithCancel(context.Background())
	props := &proposals{ctx: ctx, slots: make(chan struct{}, maxISRProposals)}
	// On stop, proposals in flight are given up (cancel first), not waited
	// out: a controller that cannot be reached would hold the shutdown.
	defer props.inflight.Wait()
	defer cancel()
	for {
		select {
		case <-m.stop:
			return
		case <-hw.C():
			m.checkpointHighWatermarks()
		case <-auto.C():
			m.throttles.auto.tick()
		case <-isr.C():
			m.proposeISRChanges(props)
			m.proposeResignations(props)
		}
	}
}

// proposals are the leader's proposals to the controller in flight, at
// most maxISRProposals at once.
type proposals struct {
	ctx      context.Context // ends at stop
	slots    chan struct{}
	inflight sync.WaitGroup
}

// propose runs call, one proposal to the controller, in a goroutine of its
// own with a 10 s deadline once a slot is free; at stop it calls abandon
// instead and reports false.
func (m *Manager) propose(p *proposals, call func(context.Context), abandon func()) bool {
	select {
	case p.slots <- struct{}{}:
	case <-m.stop:
		abandon()
		return false
	}
	p.inflight.Add(1)
	go func() {
		defer p.inflight.Done()
		defer func() { <-p.slots }()
		ctx, cancel := context.WithTimeout(p.ctx, 10*time.Second)
		defer cancel()
		call(ctx)
	}()
	return true
}

// maxISRBatch bounds the ISR changes sent in one AlterPartition command.
// A leader whose follower came back proposes thousands of changes at once
// (every partition the follower left the ISR of): one command for many
// of them rather than one Raft command each.
const maxISRBatch = 1000

// isrProposal is one partition's ISR change on its way to the controller.
type isrProposal struct {
	h      *Hosted
	change replica.ISRChange
	before []int32 // the ISR it changes
}

// proposeISRChanges proposes the ISR change of every partition this node
// leads whose followers fell behind or caught up, up to maxISRBatch in
// one command. A proposal the controller answered with an error ends as
// isrOutcome says: refused (replica.Partition.ISRProposalRefused) only
// when the error proves nothing was applied, unresolved
// (ISRProposalUnresolved) otherwise, and left pending when the
// controller's image has moved past its epochs.
func (m *Manager) proposeISRChanges(props *proposals) {
	m.isr.rounds.Add(1)
	eligible := m.ctrl.Image().BrokerAlive
	var batch []isrProposal
	for _, h := range m.LeadShared() {
		change, ok := h.ProposeISR(eligible)
		if !ok {
			continue
		}
		batch = append(batch, isrProposal{h: h, change: change, before: h.State().ISR})
		if len(batch) == maxISRBatch {
			if !m.proposeISRBatch(props, batch) {
				return
			}
			batch = nil
		}
	}
	if len(batch) > 0 {
		m.proposeISRBatch(props, batch)
	}
}

// proposeISRBatch sends batch as one command (a single change as the
// AlterPartition of one partition, which every build reads) and settles
// each change with its outcome. At stop it reports false, the changes
// refused (never sent: nothing applied).
func (m *Manager) proposeISRBatch(props *proposals, batch []isrProposal) bool {
	self := m.cfg.Settings.NodeID
	return m.propose(props, func(ctx context.Context) {
		m.isr.commands.Add(1)
		reqs := make([]controller.AlterPartition, len(batch))
		for i, pr := range batch {
			reqs[i] = controller.AlterPartition{
				Topic: pr.h.Topic(), Partition: pr.h.Partition.Partition(), Leader: self,
				LeaderEpoch: pr.change.LeaderEpoch, PartitionEpoch: pr.change.PartitionEpoch, ISR: pr.change.ISR,
			}
		}
		var results []controller.AlterPartitionResult
		var err error // the command's: every change's outcome
		if len(reqs) == 1 {
			p, perr := m.ctrl.AlterPartition(ctx, reqs[0])
			results = []controller.AlterPartitionResult{{Partition: p, Err: perr}}
		} else {
			results, err = m.ctrl.AlterPartitions(ctx, reqs)
		}
		for i, pr := range batch {
			if err != nil {
				m.settleISR(pr, err)
			} else {
				m.settleISR(pr, results[i].Err)
			}
		}
	}, func() {
		for _, pr := range batch {
			pr.h.ISRProposalRefused(pr.change)
		}
	})
}

// settleISR ends one proposal with the controller's answer to it.
func (m *Manager) settleISR(pr isrProposal, err error) {
	h, change := pr.h, pr.change
	if err != nil {
		m.isr.unconfirmed.Add(1)
		switch isrOutcome(err) {
		case isrRefused:
			h.ISRProposalRefused(change)
		case isrSuperseded:
			// Pending until the Become that brings the newer image.
		default:
			h.ISRProposalUnresolved(change)
		}
		if !errors.Is(err, context.Canceled) {
			m.log.Warn("ISR change not confirmed", "partition", h.String(), "isr", change.ISR, "err", err)
		}
		return
	}
	m.isr.count(pr.before, change.ISR)
	m.log.Info("ISR changed", "partition", h.String(), "isr", change.ISR,
		"leader_epoch", change.LeaderEpoch, "partition_epoch", change.PartitionEpoch+1)
}

// What an AlterPartition that failed may have done (isrOutcome).
const (
	// isrUnknown: it may or may not have been committed.
	isrUnknown = iota
	// isrRefused: the controller applied nothing.
	isrRefused
	// isrSuperseded: refused for stale epochs: the controller's image is
	// past the epochs the proposal was made under, perhaps by this very
	// proposal, committed on an earlier try whose answer was lost.
	isrSuperseded
)

// isrOutcome classifies the error of an AlterPartition. The FSM checks the
// leader and partition epochs before anything else, so a refusal for any
// other reason was made at the proposal's own epochs: neither this command
// nor an earlier copy of it (a retry after a lost answer) changed the
// partition, which would have moved its epoch. Those are isrRefused. A
// stale epoch is isrSuperseded: the outcome is unknown, but an image with
// a newer partition epoch exists and will reach the replica's Become,
// settling it. Everything else (a deadline, a broken connection, a lost
// Raft leadership, ErrNotController, ErrClosed, an unknown topic that may
// have been deleted after the change) is isrUnknown. Misjudging a refusal
// as unknown only keeps the high-water mark waiting for a follower a
// little longer; the reverse can lose acknowledged records.
func isrOutcome(err error) int {
	switch {
	case errors.Is(err, controller.ErrNotController), errors.Is(err, context.DeadlineExceeded), errors.Is(err, context.Canceled):
		return isrUnknown // whatever else it wraps
	case errors.Is(err, controller.ErrFencedLeaderEpoch), errors.Is(err, controller.ErrInvalidUpdateVersion):
		return isrSuperseded
	case errors.Is(err, controller.ErrInvalidPartitionState), errors.Is(err, controller.ErrIneligibleReplica),
		errors.Is(err, controller.ErrNotLeader),
		errors.Is(err, controller.ErrInvalidCommand), errors.Is(err, controller.ErrUnknownCommand):
		return isrRefused
	}
	return isrUnknown
}

// proposeResignations hands every partition this node leads but cannot
// serve whole (a damaged range: replica.Partition.ProposeResignation) to
// another ISR member, which holds the range intact; this node then
// follows outside the ISR, cuts the range and fetches it again. Where the
// controller refuses (no other live ISR member), it keeps the partition
// and the range stays withheld, and tries again later.
func (m *Manager) proposeResignations(props *proposals) {
	self := m.cfg.Settings.NodeID
	for _, h := range m.LeadShared() {
		r, ok := h.ProposeResignation()
		if !ok {
			continue
		}
		before := h.State().ISR
		sent := m.propose(props, func(ctx context.Context) {
			p, err := m.ctrl.ResignLeadership(ctx, controller.Resignation{
				Topic: h.Topic(), Partition: h.Partition.Partition(), Leader: self,
				LeaderEpoch: r.LeaderEpoch, PartitionEpoch: r.PartitionEpoch,
			})
			if err != nil {
				h.ResignationRefused()
				if !errors.Is(err, context.Canceled) {
					m.log.Warn("damaged range: leadership kept, the range stays withheld", "partition", h.String(),
						"damage", r.Damage.String(), "err", err)
				}
				return
			}
			m.isr.count(before, p.ISR)
			m.log.Warn("damaged range: leadership handed to an ISR member that holds it; fetching it again from there",
				"partition", h.String(), "damage", r.Damage.String(), "leader", p.Leader, "isr", p.ISR, "leader_epoch", p.LeaderEpoch)
		}, h.ResignationRefused)
		if !sent {
			return
		}
	}
}
