package controller

import (
	"context"
	"fmt"
	"slices"
	"strconv"
	"sync"
	"time"

	"github.com/hashicorp/raft"

	"github.com/mqproject/mq/lib/clock"
)

// Heartbeat is a broker's periodic sign of life
// (broker.heartbeat.interval.ms), Kafka's BrokerHeartbeat.
type Heartbeat struct {
	BrokerID int32
	// BrokerEpoch is the epoch RegisterBroker returned.
	BrokerEpoch int64
	// AppliedVersion is the Version of the image the broker's node has
	// applied; a fenced broker is unfenced only once it is at least its
	// registration (the broker epoch).
	AppliedVersion uint64
	// WantShutDown asks for a controlled shutdown.
	WantShutDown bool
	// Offline is the position of the broker's log of every partition it
	// hosts that has no leader (-1) in its node's image: what the active
	// controller chooses an unclean leader by. Nil when there is none.
	Offline []ReplicaPosition `json:",omitempty"`
}

// ReplicaPosition is how far a replica's log of one partition goes: the
// leader epoch of its last record and its log end offset.
type ReplicaPosition struct {
	Topic     string
	Partition int32
	LastEpoch int32
	EndOffset int64
}

// ahead reports whether position p is more advanced than q: a later last
// leader epoch, or the same one and a larger end offset.
func (p ReplicaPosition) ahead(q ReplicaPosition) bool {
	if p.LastEpoch != q.LastEpoch {
		return p.LastEpoch > q.LastEpoch
	}
	return p.EndOffset > q.EndOffset
}

// HeartbeatResult is the active controller's answer to a Heartbeat.
type HeartbeatResult struct {
	// Fenced: the broker is fenced (it must not serve as a leader).
	Fenced bool
	// ShouldShutDown: the broker asked to shut down and leads no
	// partition that another live ISR member could take over.
	ShouldShutDown bool
}

// liveness is the active controller's view of the broker sessions. It
// lives in memory only: a new controller starts every session afresh.
type liveness struct {
	mu       sync.Mutex
	sessions map[int32]session
	// offline holds when each partition was first seen needing an unclean
	// election (see sawOffline).
	offline map[TopicPartition]time.Time
}

type session struct {
	epoch int64
	// started is when this controller first saw the broker at this epoch
	// (or became active).
	started time.Time
	// lastHeartbeat is the last heartbeat, or the start of the session.
	lastHeartbeat  time.Time
	appliedVersion uint64
	// heartbeated: lastHeartbeat is a heartbeat's.
	heartbeated bool
	// beats counts the heartbeats of the session.
	beats uint64
	// offline is the last heartbeat's Offline, by partition; never
	// modified once stored.
	offline map[TopicPartition]ReplicaPosition
}

func newLiveness() *liveness { return &liveness{sessions: map[int32]session{}} }

// reset starts a session at now for every broker of img.
func (l *liveness) reset(img *Image, now time.Time) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.sessions = map[int32]session{}
	l.offline = nil
	for id, b := range img.Brokers {
		l.sessions[id] = session{epoch: b.Epoch, started: now, lastHeartbeat: now}
	}
}

func (l *liveness) heartbeat(hb Heartbeat, now time.Time) {
	l.mu.Lock()
	defer l.mu.Unlock()
	started, beats := now, uint64(1)
	if s, ok := l.sessions[hb.BrokerID]; ok && s.epoch == hb.BrokerEpoch {
		started, beats = s.started, s.beats+1
	}
	var offline map[TopicPartition]ReplicaPosition
	if len(hb.Offline) > 0 {
		offline = make(map[TopicPartition]ReplicaPosition, len(hb.Offline))
		for _, pos := range hb.Offline {
			offline[TopicPartition{pos.Topic, pos.Partition}] = pos
		}
	}
	l.sessions[hb.BrokerID] = session{
		epoch: hb.BrokerEpoch, started: started, lastHeartbeat: now,
		appliedVersion: hb.AppliedVersion, heartbeated: true, beats: beats, offline: offline,
	}
}

// beats returns how many heartbeats broker id sent at epoch in its
// session (0 without one).
func (l *liveness) beats(id int32, epoch int64) uint64 {
	l.mu.Lock()
	defer l.mu.Unlock()
	if s, ok := l.sessions[id]; ok && s.epoch == epoch {
		return s.beats
	}
	return 0
}

func (l *liveness) get(id int32) (session, bool) {
	l.mu.Lock()
	defer l.mu.Unlock()
	s, ok := l.sessions[id]
	return s, ok
}

// expired returns the unfenced brokers of img silent for longer than
// timeout. A broker without a session for its current epoch (a new
// registration) starts one at now.
func (l *liveness) expired(img *Image, now time.Time, timeout time.Duration) []Broker {
	l.mu.Lock()
	defer l.mu.Unlock()
	var out []Broker
	for _, id := range sortedKeys(img.Brokers) {
		b := img.Brokers[id]
		s, ok := l.sessions[id]
		if !ok || s.epoch != b.Epoch {
			l.sessions[id] = session{epoch: b.Epoch, started: now, lastHeartbeat: now}
			continue
		}
		if !b.Fenced && now.Sub(s.lastHeartbeat) > timeout {
			out = append(out, b)
		}
	}
	return out
}

// Heartbeat records a broker's heartbeat on the active controller (sent
// there when this node is not it) and acts on it: a fenced broker whose
// node has caught up with its registration is unfenced, and a broker that
// wants to shut down is put in controlled shutdown, its leaderships moved
// to other live ISR members. ErrStaleBrokerEpoch when the broker is not
// registered with that epoch: it must register again.
func (c *Controller) Heartbeat(ctx context.Context, hb Heartbeat) (HeartbeatResult, error) {
	var res HeartbeatResult
	err := c.onLeader(ctx, opHeartbeat, hb, &res, func(ctx context.Context) error {
		var err error
		res, err = c.heartbeatLocal(ctx, hb)
		return err
	})
	return res, err
}

func (c *Controller) heartbeatLocal(ctx context.Context, hb Heartbeat) (HeartbeatResult, error) {
	if !c.isActive() {
		if c.leading.Load() {
			// Still announcing its election: the sessions of this term
			// have started, so the heartbeat counts, though the broker
			// is asked to send it again for its answer.
			if _, err := checkBrokerEpoch(c.Image(), hb.BrokerID, hb.BrokerEpoch); err == nil {
				c.live.heartbeat(hb, c.cfg.Clock.Now())
			}
		}
		return HeartbeatResult{}, errRetry
	}
	img := c.Image()
	b, err := checkBrokerEpoch(img, hb.BrokerID, hb.BrokerEpoch)
	if err != nil {
		return HeartbeatResult{}, err
	}
	c.live.heartbeat(hb, c.cfg.Clock.Now())
	var cmd any
	var typ commandType
	switch {
	case hb.WantShutDown && (!b.InControlledShutdown || !img.canShutDown(b.ID)):
		typ, cmd = cmdControlledShutdown, &controlledShutdownV1{ID: b.ID, Epoch: b.Epoch}
	case b.Fenced && !hb.WantShutDown && hb.AppliedVersion >= uint64(b.Epoch):
		typ, cmd = cmdUnfenceBroker, &unfenceBrokerV2{ID: b.ID, Epoch: b.Epoch}
	}
	if cmd != nil {
		if err := c.applyCommandHere(ctx, typ, cmd); err != nil {
			return HeartbeatResult{}, err
		}
		if typ == cmdUnfenceBroker {
			c.logger.Info("controller: broker unfenced", "broker", b.ID)
		}
		img = c.Image()
		b = img.Brokers[b.ID]
	}
	return HeartbeatResult{
		Fenced:         b.Fenced,
		ShouldShutDown: hb.WantShutDown && b.InControlledShutdown && img.canShutDown(b.ID),
	}, nil
}

// applyCommandHere commits a command this node (the leader) decided on.
func (c *Controller) applyCommandHere(ctx context.Context, t commandType, body any) error {
	data, err := encodeCommand(t, body)
	if err != nil {
		return err
	}
	res, err := c.applyLocal(ctx, data)
	if err != nil {
		return err
	}
	return res.err
}

// isActive reports whether this node is the leader and has applied its
// election record (and so started the broker sessions of its term).
func (c *Controller) isActive() bool {
	return c.active.Load() && c.raft.State() == raft.Leader
}

// superviseBrokers arms the active controller's periodic checks on the
// controller's clock: every sessionCheckInterval it fences brokers whose
// session timed out and elects unclean leaders where allowed, and, when
// auto.leader.rebalance.enable is on, every LeaderImbalanceCheckInterval
// it moves leaderships back to the preferred replicas. Every node runs
// them; they act only while the node is the active controller.
func (c *Controller) superviseBrokers() {
	c.every(c.sessionCheckInterval(), func() {
		if c.isActive() {
			c.fenceExpired()
		}
		if c.isActive() {
			c.electUnclean()
		}
	})
	if c.cfg.AutoLeaderRebalance {
		c.every(c.cfg.LeaderImbalanceCheckInterval, func() {
			if c.isActive() {
				c.rebalanceLeaders()
			}
		})
	}
}

// sessionCheckInterval is how often the active controller looks for
// expired sessions: a quarter of the session timeout, within 10ms..1s.
// A broker is fenced at the first check after its session timed out.
func (c *Controller) sessionCheckInterval() time.Duration {
	return min(max(c.cfg.BrokerSessionTimeout/4, 10*time.Millisecond), time.Second)
}

// every runs check each d of the controller's clock, until Close: an
// AfterFunc timer that check's run re-arms when it ends, so runs never
// pile up, and superviseMu keeps them from overlapping each other. On a
// clock.Manual the run falls in the goroutine that advances the time,
// before Advance returns, so a test steps the checks one due time after
// another without waiting for a goroutine of the controller.
func (c *Controller) every(d time.Duration, check func()) {
	c.superviseMu.Lock()
	defer c.superviseMu.Unlock()
	var t clock.Timer
	t = c.cfg.Clock.AfterFunc(d, func() {
		c.superviseMu.Lock()
		defer c.superviseMu.Unlock()
		if c.superviseStopped {
			return
		}
		check()
		t.Reset(d)
	})
	c.supervisors = append(c.supervisors, t)
}

// stopSupervising stops the periodic checks, waiting for a running one
// to end (Close has ended its command's context by then).
func (c *Controller) stopSupervising() {
	c.superviseMu.Lock()
	defer c.superviseMu.Unlock()
	c.superviseStopped = true
	for _, t := range c.supervisors {
		t.Stop()
	}
}

func (c *Controller) fenceExpired() {
	for _, b := range c.live.expired(c.Image(), c.cfg.Clock.Now(), c.cfg.BrokerSessionTimeout) {
		if c.fence(b, FencedSessionTimeout) != nil {
			return
		}
	}
}

// rebalanceLeaders elects the preferred replica of every partition whose
// preferred replica is alive and in sync but not the leader.
func (c *Controller) rebalanceLeaders() {
	img := c.Image()
	var wanted []topicPartitionV1
	for _, t := range sortedTopics(img) {
		for _, p := range t.Partitions {
			preferred := p.Replicas[0]
			if p.Leader != preferred && img.BrokerAlive(preferred) && slices.Contains(p.ISR, preferred) {
				wanted = append(wanted, topicPartitionV1{Topic: t.Name, Partition: p.ID})
			}
		}
	}
	if len(wanted) == 0 {
		return
	}
	ctx, cancel := c.commandContext()
	defer cancel()
	if err := c.applyCommandHere(ctx, cmdElectLeaders, &electLeadersV1{Type: int8(ElectPreferred), Partitions: wanted}); err != nil {
		c.logger.Warn("controller: preferred leader election", "err", err)
		return
	}
	c.logger.Info("controller: moved leadership back to preferred replicas", "partitions", len(wanted))
}

// QuorumMember is one member of the controller quorum.
type QuorumMember struct {
	ID    int32
	Addr  string
	Voter bool
	// AppliedVersion and LastHeartbeat are from the member's broker
	// heartbeats to the active controller (zero without any).
	AppliedVersion uint64
	LastHeartbeat  time.Time
}

// Quorum describes the controller quorum as its leader sees it.
type Quorum struct {
	LeaderID  int32
	Term      uint64
	LastIndex uint64
	Members   []QuorumMember // by ID
}

// Quorum returns the leader's view of the controller quorum (asked of the
// leader when this node is not it).
func (c *Controller) Quorum(ctx context.Context) (Quorum, error) {
	var q Quorum
	err := c.onLeader(ctx, opQuorum, nil, &q, func(context.Context) error {
		var err error
		q, err = c.quorumLocal()
		return err
	})
	return q, err
}

func (c *Controller) quorumLocal() (Quorum, error) {
	if c.raft.State() != raft.Leader {
		return Quorum{}, errRetry
	}
	f := c.raft.GetConfiguration()
	if err := f.Error(); err != nil {
		return Quorum{}, fmt.Errorf("controller: raft configuration: %w", err)
	}
	q := Quorum{LeaderID: c.cfg.NodeID, Term: c.raft.CurrentTerm(), LastIndex: c.raft.LastIndex()}
	for _, s := range f.Configuration().Servers {
		id, err := strconv.ParseInt(string(s.ID), 10, 32)
		if err != nil {
			continue
		}
		m := QuorumMember{ID: int32(id), Addr: string(s.Address), Voter: s.Suffrage == raft.Voter}
		if sess, ok := c.live.get(m.ID); ok && sess.heartbeated {
			m.AppliedVersion, m.LastHeartbeat = sess.appliedVersion, sess.lastHeartbeat
		}
		q.Members = append(q.Members, m)
	}
	slices.SortFunc(q.Members, func(a, b QuorumMember) int { return int(a.ID) - int(b.ID) })
	return q, nil
}
