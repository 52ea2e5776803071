package replica

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/mqproject/mq/lib/clock"
	"github.com/mqproject/mq/lib/log"
)

// Errors returned by Partition. Callers map them to Kafka error codes.
var (
	// ErrNotLeader: the request needs the leader and this replica is not it.
	ErrNotLeader = errors.New("replica: not the leader")
	// ErrNotFollower: the call needs a follower of a known leader and this
	// replica is the leader, or the partition has no leader.
	ErrNotFollower = errors.New("replica: not a follower")
	// ErrNotEnoughReplicas: acks=all and the ISR is smaller than min.insync.replicas.
	ErrNotEnoughReplicas = errors.New("replica: not enough in-sync replicas")
	// ErrNotEnoughReplicasAfterAppend: an acks=all batch reached the
	// high-water mark, but the ISR shrank below min.insync.replicas while
	// it waited: the batch is in the log and may not be durable enough.
	ErrNotEnoughReplicasAfterAppend = errors.New("replica: not enough in-sync replicas after append")
	// ErrStaleLeaderEpoch: Become was given an older state than the current
	// one: an older leader epoch, or the same leader epoch with an older
	// partition epoch.
	ErrStaleLeaderEpoch = errors.New("replica: stale leader epoch")
	// ErrTruncationNeeded: AppendFromLeader before the truncation a new
	// leadership requires (FetchPosition.NeedsTruncation) was done.
	ErrTruncationNeeded = errors.New("replica: truncation with OffsetForLeaderEpoch needed first")
	// ErrFencedLeaderEpoch: a request carried a leader epoch older than ours.
	ErrFencedLeaderEpoch = errors.New("replica: fenced leader epoch")
	// ErrUnknownLeaderEpoch: a request carried a leader epoch newer than ours.
	ErrUnknownLeaderEpoch = errors.New("replica: unknown leader epoch")
	// ErrHighWatermarkBehind: a new leader does not know the high-water
	// mark yet. It learned its mark from the old leader one fetch late,
	// so until the followers have fetched past the start of its epoch
	// its mark may be below what consumers already saw; it answers
	// consumers with this rather than a mark that went backwards.
	ErrHighWatermarkBehind = errors.New("replica: a new leader's high-water mark is not known yet")
	// ErrClosed: the partition was closed or deleted.
	ErrClosed = errors.New("replica: closed")
	// ErrLeaderLostRecords: the leader answered, in the leader epoch this
	// follower fetched in, with a log end below what this follower has
	// already fetched from it in that epoch. A leader's log never shrinks
	// within its epoch, unless it lost records (a power loss took what it
	// had not flushed and it came back leading in the same epoch): the
	// follower keeps its log rather than cut records that may be on no
	// other replica, and waits for a new leader epoch (ResetFetchOffset).
	ErrLeaderLostRecords = errors.New("replica: the leader's log ends below what was fetched from it in the same leader epoch")
	// ErrNotReplica: a fetch or a Refetch named a replica id that is not
	// a follower of this leader (not in the partition's replicas, adding
	// ones included, or this node itself). It wraps ErrNotLeader, so it
	// is answered NOT_LEADER_OR_FOLLOWER, as Kafka answers a replica it
	// does not recognise: a real follower re-reads the metadata.
	ErrNotReplica = fmt.Errorf("%w: not a replica of this partition", ErrNotLeader)
)

// Role is a replica's part in its partition.
type Role int8

// Roles.
const (
	Follower Role = iota
	Leader
)

func (r Role) String() string {
	if r == Leader {
		return "leader"
	}
	return "follower"
}

// DefaultReplicaLagTime is Kafka's replica.lag.time.max.ms default.
const DefaultReplicaLagTime = 30 * time.Second

// Config describes one partition replica.
type Config struct {
	Topic     string
	Partition int32
	TopicID   [16]byte
	// NodeID is this node's broker ID: the replica is leader when the
	// partition's leader is NodeID.
	NodeID int32
	// MinInsyncReplicas is min.insync.replicas: acks=all appends are refused
	// when the ISR is smaller. Values below 1 mean 1.
	MinInsyncReplicas int32
	// ReplicaLagTime is replica.lag.time.max.ms: an ISR follower that has
	// not caught up with the leader's log end for this long leaves the ISR
	// at the next ProposeISR. Zero means DefaultReplicaLagTime.
	ReplicaLagTime time.Duration
	// Clock tells the time for follower bookkeeping; nil is the real clock.
	Clock clock.Clock
}

// PartitionState is a partition's state in the cluster image, as Become
// applies it.
type PartitionState struct {
	Leader         int32 // -1: no leader
	LeaderEpoch    int32 // bumped by every leader change
	PartitionEpoch int32 // bumped by every change to the partition (ISR changes too)
	Replicas       []int32
	ISR            []int32
}

// State is a consistent snapshot of a replica's state.
type State struct {
	Role           Role
	LeaderEpoch    int32
	PartitionEpoch int32
	Leader         int32 // -1 when the partition has no leader
	Replicas       []int32
	ISR            []int32 // the committed ISR, from the image
	// PendingISR is the ISR this leader proposed and the controller has
	// not answered yet (nil when none).
	PendingISR []int32
	// UnresolvedISR are the followers that proposals of unknown outcome
	// were adding (ISRProposalUnresolved), which the high-water mark
	// waits for until a newer partition epoch settles them (nil when none).
	UnresolvedISR []int32
	// NeedsTruncation: a follower that must truncate with
	// OffsetForLeaderEpoch before it fetches.
	NeedsTruncation bool
	HighWatermark   int64
	LogStartOffset  int64
	LogEndOffset    int64
}

// follower is what a leader knows of one follower replica.
type follower struct {
	// fetchOffset is the offset of the follower's latest fetch, i.e. its
	// log end offset; -1 before its first fetch.
	fetchOffset int64
	// lastFetch is when that fetch arrived, and leaderEndAtLastFetch the
	// leader's log end offset at that time.
	lastFetch            time.Time
	leaderEndAtLastFetch int64
	// lastCaughtUp is the last time the follower was known to have every
	// record the leader had.
	lastCaughtUp time.Time
	// refetching: the follower asked leave to cut its log at refetchAt
	// (GrantRefetch). It counts as lagging and does not join the ISR until
	// a fetch at or below refetchAt shows it cut.
	refetching bool
	refetchAt  int64
}

// inSync reports whether the follower has caught up with the leader
// within lag, and is not cutting a damaged log.
func (f *follower) inSync(now time.Time, lag time.Duration) bool {
	return !f.refetching && now.Sub(f.lastCaughtUp) <= lag
}

// Partition is one partition replica. All methods are safe for concurrent use.
type Partition struct {
	cfg   Config
	log   *log.Log
	clock clock.Clock

	// stateMu guards the fields set by Become and SetMinInsyncReplicas.
	// Appends hold it for reading, so Become (writing) waits for the
	// appends in flight and no batch is appended under a stale epoch.
	//
	// The follower-side calls (TruncateFromLeader, AppendFromLeader,
	// ResetFetchOffset) hold it for reading while they change the log, so
	// a Become waits for them and they never act under a leadership the
	// replica already left.
	stateMu        sync.RWMutex
	role           Role
	leaderEpoch    int32
	partitionEpoch int32
	leader         int32
	replicas       []int32
	isr            []int32 // committed: the image's
	minISR         int32
	// epochStart is, on a leader, where its leader epoch begins in the
	// log: a follower joins the ISR only once it has fetched past it.
	epochStart int64

	// lost is set when the log ended below its checkpointed high-water
	// mark at New (see LostCommitted); fixed at New.
	lost LostCommitted

	// mu guards the offsets, the followers, the ISR proposal and the
	// change channel. Lock order: stateMu before mu.
	mu            sync.Mutex
	highWatermark int64
	logEndOffset  int64
	followers     map[int32]*follower
	// pending is the ISR change proposed and not yet answered, nil when
	// none; unresolved are the followers that proposals whose outcome is
	// unknown were adding: the controller may have committed them, and
	// only an image with a newer partition epoch tells. maximalISR is the
	// committed ISR with pending's additions and the unresolved ones, the
	// replicas the high-water mark waits for (a follower being added may
	// already count for acks=all, one being removed still does).
	pending    *pendingISR
	unresolved []int32
	maximalISR []int32
	// resigning: a resignation was proposed and not yet answered;
	// resignRefused: when the controller last refused one (ProposeResignation
	// waits replica.lag.time.max.ms before the next).
	resigning       bool
	resignRefused   time.Time
	needsTruncation bool          // follower: see FetchPosition
	changed         chan struct{} // closed and replaced on HW advance, role change, close
	changedTaken    bool          // changed has been handed out since it was made
	changedClosed   bool          // changed is closed for good (closed)
	closed          bool
	// throttled holds which sides of the replication throttle the topic's
	// configs name this replica for (throttleLeader, throttleFollower):
	// read without a lock on every fetch, so a replica named on neither
	// pays one atomic load (SetThrottled).
	throttled atomic.Uint32

	// leaderEndSeen is, on a follower, the least log end offset its
	// leader is known to have in the current leader epoch: the end of
	// what it appended from it, or the high-water mark it announced,
	// whichever is higher; -1 until it fetched in the epoch. A leader's
	// log never shrinks within its epoch (ResetFetchOffset).
	leaderEndSeen int64
}

// New makes a Partition over an open log. The replica starts as a follower
// with leader epoch -1 and no leader; Become gives it its state from the
// cluster image. Its high-water mark starts at the log's checkpoint of it
// (log.HighWatermarkCheckpoint) brought within [log start, log end]: the
// log start offset without a checkpoint, the log end offset when a crash
// cut the log below it.
func New(cfg Config, l *log.Log) *Partition {
	p := &Partition{
		cfg:            cfg,
		log:            l,
		clock:          cfg.Clock,
		role:           Follower,
		leaderEpoch:    -1,
		partitionEpoch: -1,
		leader:         -1,
		minISR:         max(cfg.MinInsyncReplicas, 1),
		followers:      map[int32]*follower{},
		changed:        make(chan struct{}),
		leaderEndSeen:  -1,
	}
	if p.clock == nil {
		p.clock = clock.Real()
	}
	if p.cfg.ReplicaLagTime <= 0 {
		p.cfg.ReplicaLagTime = DefaultReplicaLagTime
	}
	p.logEndOffset = l.EndOffset()
	if hw := l.HighWatermarkCheckpoint(); hw > p.logEndOffset {
		p.lost = LostCommitted{EndOffset: p.logEndOffset, HighWatermark: hw}
	}
	p.highWatermark = min(max(l.HighWatermarkCheckpoint(), l.StartOffset()), p.logEndOffset)
	return p
}

// LostCommitted describes a replica whose log, when New opened it, ended
// (EndOffset) below the high-water mark it had checkpointed
// (HighWatermark): records this replica knew as committed are gone (a
// power loss took what the log had not flushed). Such a replica must not
// be elected cleanly: other replicas may hold what it lost. The zero value
// is a replica that lost nothing.
type LostCommitted struct {
	EndOffset, HighWatermark int64
}

// Lost reports whether the replica lost committed records.
func (l LostCommitted) Lost() bool { return l.HighWatermark > l.EndOffset }

// LostCommitted returns what the replica's log lost of the records it knew
// as committed when New opened it; the zero value when nothing. It stays
// as it was at New: the broker reports it when it registers, and the
// controller keeps the replica out of the ISR until it caught up again.
func (p *Partition) LostCommitted() LostCommitted { return p.lost }

// Topic returns the topic name.
func (p *Partition) Topic() string { return p.cfg.Topic }

// Partition returns the partition number.
func (p *Partition) Partition() int32 { return p.cfg.Partition }

// TopicID returns the topic ID.
func (p *Partition) TopicID() [16]byte { return p.cfg.TopicID }

// Log returns the underlying log, for operations that need no replica
// state (timestamps lookup, retention, config).
func (p *Partition) Log() *log.Log { return p.log }

func (p *Partition) String() string { return fmt.Sprintf("%s-%d", p.cfg.Topic, p.cfg.Partition) }

// Become applies the partition's state from the cluster image. The replica
// is leader when s.Leader is this node. An older state (leader epoch, or
// partition epoch within the same leader epoch) is refused with
// ErrStaleLeaderEpoch and changes nothing; the same leader epoch with a
// newer partition epoch updates the replicas and ISR (the controller
// changes the ISR without a new leader epoch).
//
// A new leadership (leader epoch or role changed):
//   - on the leader, records the epoch at the log end (log.BeginEpoch)
//     before any append in it, so that OffsetForLeaderEpoch answers for it
//     at once, and starts follower tracking afresh;
//   - on a follower, requires a truncation with OffsetForLeaderEpoch
//     before the next fetch (FetchPosition.NeedsTruncation).
//
// A newer partition epoch (or a new leadership) ends a pending ISR proposal
// and settles the unresolved ones (ISRProposalUnresolved): a proposal is
// made under the partition epoch the leader saw, and the controller
// commits it only at that epoch, so the image at a newer epoch holds its
// outcome, whatever it was.
func (p *Partition) Become(s PartitionState) error {
	p.stateMu.Lock()
	defer p.stateMu.Unlock()
	if s.LeaderEpoch < p.leaderEpoch || (s.LeaderEpoch == p.leaderEpoch && s.PartitionEpoch < p.partitionEpoch) {
		return fmt.Errorf("%w: have leader epoch %d partition epoch %d, got %d and %d",
			ErrStaleLeaderEpoch, p.leaderEpoch, p.partitionEpoch, s.LeaderEpoch, s.PartitionEpoch)
	}
	if p.isClosed() {
		return ErrClosed
	}
	role := Follower
	if s.Leader == p.cfg.NodeID {
		role = Leader
	}
	newLeadership := s.LeaderEpoch != p.leaderEpoch || role != p.role || s.Leader != p.leader
	epochStart := p.epochStart
	if role == Leader && newLeadership {
		if err := p.log.BeginEpoch(s.LeaderEpoch); err != nil {
			if errors.Is(err, log.ErrClosed) {
				return ErrClosed
			}
			return fmt.Errorf("replica: become leader in epoch %d: %w", s.LeaderEpoch, err)
		}
		epochStart = p.log.EndOffset()
		for _, e := range p.log.LeaderEpochs() {
			if e.Epoch == s.LeaderEpoch {
				epochStart = e.StartOffset
			}
		}
	}
	newPartitionEpoch := s.PartitionEpoch != p.partitionEpoch
	p.leaderEpoch = s.LeaderEpoch
	p.partitionEpoch = s.PartitionEpoch
	p.leader = s.Leader
	p.replicas = slices.Clone(s.Replicas)
	p.isr = slices.Clone(s.ISR)
	p.epochStart = epochStart

	p.mu.Lock()
	defer p.mu.Unlock()
	roleChanged := role != p.role
	p.role = role
	if newLeadership || newPartitionEpoch {
		p.pending = nil
		p.unresolved = nil
		p.resigning = false
	}
	if newLeadership {
		p.leaderEndSeen = -1
	}
	p.setMaximalISRLocked()
	if role == Leader {
		p.needsTruncation = false
		now := p.clock.Now()
		// A new leadership starts follower tracking afresh; every follower
		// gets a full lag period to catch up before it counts as out of sync.
		if newLeadership {
			clear(p.followers)
		}
		for _, r := range p.replicas {
			if r == p.cfg.NodeID {
				continue
			}
			if _, ok := p.followers[r]; !ok {
				p.followers[r] = &follower{fetchOffset: -1, lastCaughtUp: now, lastFetch: now}
			}
		}
		for r := range p.followers {
			if !slices.Contains(p.replicas, r) {
				delete(p.followers, r)
			}
		}
		p.logEndOffset = p.log.EndOffset() // appends wait for stateMu: it stays put
		if p.advanceLocked() {
			roleChanged = true // wake waiters
		}
	} else {
		clear(p.followers)
		p.logEndOffset = p.log.EndOffset()
		if newLeadership {
			p.needsTruncation = true
		}
	}
	if roleChanged || newLeadership || newPartitionEpoch {
		p.notifyLocked() // acks=all waits recheck the ISR size
	}
	return nil
}

// InState reports whether the replica is in state s already: the same
// leader, leader epoch and partition epoch, which every change of a
// partition's state moves. Become(s) would then change nothing; a broker
// applying an image of 10,000 partitions after a change to a few skips it
// for the others.
func (p *Partition) InState(s PartitionState) bool {
	p.stateMu.RLock()
	defer p.stateMu.RUnlock()
	return p.leader == s.Leader && p.leaderEpoch == s.LeaderEpoch && p.partitionEpoch == s.PartitionEpoch
}

func (p *Partition) isClosed() bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.closed
}

// SetMinInsyncReplicas changes min.insync.replicas (values below 1 mean 1).
func (p *Partition) SetMinInsyncReplicas(n int32) {
	p.stateMu.Lock()
	p.minISR = max(n, 1)
	p.stateMu.Unlock()
}

// State returns a snapshot of the replica's state.
func (p *Partition) State() State {
	p.stateMu.RLock()
	defer p.stateMu.RUnlock()
	p.mu.Lock()
	defer p.mu.Unlock()
	st := State{
		Role:            p.role,
		LeaderEpoch:     p.leaderEpoch,
		PartitionEpoch:  p.partitionEpoch,
		Leader:          p.leader,
		Replicas:        slices.Clone(p.replicas),
		ISR:             slices.Clone(p.isr),
		NeedsTruncation: p.needsTruncation,
		HighWatermark:   p.highWatermark,
		LogStartOffset:  p.log.StartOffset(),
		LogEndOffset:    p.logEndOffset,
	}
	if p.pending != nil {
		st.PendingISR = slices.Clone(p.pending.isr)
	}
	if len(p.unresolved) > 0 {
		st.UnresolvedISR = slices.Clone(p.unresolved)
	}
	return st
}

// LeaderEpoch returns the current leader epoch.
func (p *Partition) LeaderEpoch() int32 {
	p.stateMu.RLock()
	defer p.stateMu.RUnlock()
	return p.leaderEpoch
}

// IsLeader reports whether this replica is the partition's leader.
func (p *Partition) IsLeader() bool {
	p.stateMu.RLock()
	defer p.stateMu.RUnlock()
	return p.role == Leader
}

// HighWatermark returns the high-water mark: the offset below which every
// record is on every in-sync replica and may be read by consumers.
func (p *Partition) HighWatermark() int64 {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.highWatermark
}

// CheckLeaderEpoch compares the leader epoch a client sent (-1: none) with
// the current one: ErrFencedLeaderEpoch when it is older, ErrUnknownLeaderEpoch
// when newer.
func (p *Partition) CheckLeaderEpoch(epoch int32) error {
	return compareLeaderEpoch(epoch, p.LeaderEpoch())
}

// EndOffsetForEpoch answers OffsetForLeaderEpoch on the leader: the end
// offset of the latest epoch at or below epoch in its leader-epoch
// history, and that epoch (-1 and -1 when the history holds none). The
// requester's current leader epoch (-1: none) is checked first, as
// CheckLeaderEpoch does, then that this replica leads (ErrNotLeader).
func (p *Partition) EndOffsetForEpoch(currentLeaderEpoch, epoch int32) (int64, int32, error) {
	if err := p.CheckLeaderEpoch(currentLeaderEpoch); err != nil {
		return -1, -1, err
	}
	if !p.IsLeader() {
		return -1, -1, ErrNotLeader
	}
	endOffset, found := p.log.EndOffsetForEpoch(epoch)
	return endOffset, found, nil
}

// compareLeaderEpoch is CheckLeaderEpoch's rule: a requested epoch (-1:
// none) against the current one.
func compareLeaderEpoch(requested, current int32) error {
	switch {
	case requested < 0:
		return nil
	case requested < current:
		return ErrFencedLeaderEpoch
	case requested > current:
		return ErrUnknownLeaderEpoch
	}
	return nil
}

// Append appends one validated batch as leader, under the current leader
// epoch. acks is the producer's acks setting: with -1 the append is refused
// with ErrNotEnoughReplicas when the ISR is smaller than min.insync.replicas,
// counting only the members that have kept up within
// replica.lag.time.max.ms: the ISR the leader is proposing, which the
// controller may not be able to commit (it lost its quorum with the same
// nodes), so that such a write is refused rather than left to time out.
// The batch is patched in place (base offset, epoch). With ISR = {self}
// the high-water mark moves past the batch before Append returns. The
// result's LeaderEpoch is the epoch to wait for it in (WaitHighWatermark).
func (p *Partition) Append(batch []byte, acks int16) (log.AppendResult, error) {
	p.stateMu.RLock()
	defer p.stateMu.RUnlock()
	if p.role != Leader {
		return log.AppendResult{}, ErrNotLeader
	}
	if acks == -1 && int32(len(p.isr)) < p.minISR {
		return log.AppendResult{}, fmt.Errorf("%w: isr %v, min.insync.replicas %d", ErrNotEnoughReplicas, p.isr, p.minISR)
	}
	if acks == -1 && len(p.isr) > 1 {
		if n := p.keepingUp(); n < p.minISR {
			return log.AppendResult{}, fmt.Errorf("%w: isr %v, of which %d kept up within replica.lag.time.max.ms, min.insync.replicas %d",
				ErrNotEnoughReplicas, p.isr, n, p.minISR)
		}
	}
	res, err := p.log.Append(batch, p.leaderEpoch)
	if err != nil {
		if errors.Is(err, log.ErrClosed) {
			return res, ErrClosed
		}
		return res, err
	}
	p.mu.Lock()
	// Appends are serialized by the log, and Append returns only once the
	// batch is written (and synced under flush policy "always"); every
	// record below LastOffset+1 is therefore in the log.
	moved := false
	if !res.Duplicate && res.LastOffset+1 > p.logEndOffset {
		p.logEndOffset = res.LastOffset + 1
		moved = true // followers long-polling for the log end want to know
	}
	if p.advanceLocked() || moved {
		p.notifyLocked()
	}
	p.mu.Unlock()
	return res, nil
}

// keepingUp counts the ISR members that are the leader or have caught up
// with it within replica.lag.time.max.ms. Called with stateMu held.
func (p *Partition) keepingUp() int32 {
	p.mu.Lock()
	defer p.mu.Unlock()
	now := p.clock.Now()
	var n int32
	for _, r := range p.isr {
		f := p.followers[r]
		if r == p.cfg.NodeID || f != nil && f.inSync(now, p.cfg.ReplicaLagTime) {
			n++
		}
	}
	return n
}

// advanceLocked moves the high-water mark to the smallest log end offset of
// the maximal ISR (committed ISR, pending and unresolved additions) when that is
// larger, and reports whether it moved. Called with stateMu (read) and mu
// held; the caller notifies.
func (p *Partition) advanceLocked() bool {
	if p.role != Leader {
		return false
	}
	hw := p.logEndOffset
	for _, r := range p.maximalISR {
		if r == p.cfg.NodeID {
			continue
		}
		f := p.followers[r]
		if f == nil {
			return false
		}
		hw = min(hw, f.fetchOffset)
	}
	if hw > p.highWatermark {
		p.highWatermark = hw
		return true
	}
	return false
}

// notifyLocked wakes everything waiting on Changed. A channel nobody has
// taken has nobody to wake, and whoever takes it later checks its
// condition after taking it, so it is kept: appends that no fetch waits for
// make no garbage. Once the partition is closed the channel stays closed,
// and a change that still arrives (a follower's append that was under way
// when a reassignment removed the replica) has nothing left to wake.
func (p *Partition) notifyLocked() {
	if p.changedClosed || !p.changedTaken && !p.closed {
		return
	}
	close(p.changed)
	if p.closed {
		p.changedClosed = true // waiters must not block on a closed partition
		return
	}
	p.changed = make(chan struct{})
	p.changedTaken = false
}

// takeChangedLocked hands out the current change channel.
func (p *Partition) takeChangedLocked() chan struct{} {
	p.changedTaken = true
	return p.changed
}

// Changed returns a channel closed the next time the high-water mark or
// the log end offset advances, the role or leader epoch changes, or the
// partition closes. Take the channel before checking the condition waited
// for, so that no advance is missed.
func (p *Partition) Changed() <-chan struct{} {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.takeChangedLocked()
}

// WaitHighWatermark blocks until the record at offset, appended by this
// replica as leader in leaderEpoch (log.AppendResult.LeaderEpoch), is on
// every in-sync replica (acks=all): until the high-water mark is above
// offset while this replica still leads in that epoch. It returns
// ErrNotEnoughReplicasAfterAppend when the high-water mark passed offset
// but the ISR is then smaller than min.insync.replicas, ctx.Err() when ctx
// ends first, ErrNotLeader when the replica no longer leads in
// leaderEpoch, and ErrClosed when the partition closes.
//
// The epoch is what makes the answer true: a replica that lost its
// leadership truncates what it appended past its new leader's log, then
// fetches that leader's records at the same offsets, and its high-water
// mark passes offset with records that are not the ones appended.
func (p *Partition) WaitHighWatermark(ctx context.Context, offset int64, leaderEpoch int32) error {
	for {
		var ch chan struct{}
		done, err := p.commitState(offset, leaderEpoch, &ch)
		if done {
			return err
		}
		select {
		case <-ch:
		case <-ctx.Done():
			return ctx.Err()
		}
	}
}

// Acknowledged reports whether WaitHighWatermark(offset, leaderEpoch)
// would return nil now, without waiting.
func (p *Partition) Acknowledged(offset int64, leaderEpoch int32) bool {
	done, err := p.commitState(offset, leaderEpoch, nil)
	return done && err == nil
}

// commitState is one check of WaitHighWatermark: done with its result, or
// not done, with *ch (when ch is not nil) set to the channel to wait on.
// The role, epoch and high-water mark are read together, under stateMu
// and mu: a follower's high-water mark never passes for a leader's.
func (p *Partition) commitState(offset int64, leaderEpoch int32, ch *chan struct{}) (done bool, err error) {
	p.stateMu.RLock()
	defer p.stateMu.RUnlock()
	leads, enough := p.role == Leader && p.leaderEpoch == leaderEpoch, int32(len(p.isr)) >= p.minISR
	p.mu.Lock()
	defer p.mu.Unlock()
	switch {
	case leads && p.highWatermark > offset && !enough:
		return true, ErrNotEnoughReplicasAfterAppend
	case leads && p.highWatermark > offset:
		return true, nil
	case p.closed:
		return true, ErrClosed
	case !leads:
		return true, ErrNotLeader
	}
	if ch != nil {
		// Taken under the lock that read the high-water mark: no advance
		// is missed. Only when waiting: a taken channel is replaced at the
		// next append, which would cost an allocation.
		*ch = p.takeChangedLocked()
	}
	return false, nil
}

// Offsets returns the offsets a fetch reports for the partition.
func (p *Partition) Offsets() ReadInfo {
	p.stateMu.RLock()
	defer p.stateMu.RUnlock()
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.readInfoLocked()
}

// readInfoLocked is Offsets with stateMu (for reading) and mu held.
func (p *Partition) readInfoLocked() ReadInfo {
	start := p.log.StartOffset()
	return ReadInfo{
		HighWatermark: p.highWatermark,
		// An open transaction whose first batches retention deleted
		// holds the LSO at the log start, as Kafka does.
		LastStableOffset:    max(p.log.LastStableOffset(p.highWatermark), min(start, p.highWatermark)),
		HighWatermarkBehind: p.role == Leader && p.highWatermark < p.epochStart,
		LogStartOffset:      start,
		LogEndOffset:        p.logEndOffset,
		LeaderEpoch:         p.leaderEpoch,
	}
}

// ReadInfo is the partition's state at the time of a Read.
type ReadInfo struct {
	HighWatermark int64
	// LastStableOffset is the high-water mark, or the first offset of
	// the oldest transaction still open when that is below it.
	LastStableOffset int64
	// HighWatermarkBehind: this is a new leader whose high-water mark has
	// not reached the start of its epoch yet (ErrHighWatermarkBehind).
	HighWatermarkBehind bool
	LogStartOffset      int64
	LogEndOffset        int64
	LeaderEpoch         int32
}

// Read reads whole batches from offset on, up to maxBytes (the first batch
// is always whole, even when larger). A follower's Read with maxBytes 0
// records its fetch and reads nothing (a throttled follower over its
// quota, see Quota). A consumer (replicaID < 0) reads only
// below the high-water mark; a follower (replicaID >= 0) reads up to the
// log end offset and has its fetch position recorded first; a replicaID
// that is not a follower of this leader is ErrNotReplica and reads
// nothing, moving neither the high-water mark nor the ISR. An offset
// outside [log start, log end] is log.ErrOffsetOutOfRange. When there is
// nothing to read, the region is empty (zero Len) and err is nil.
//
// Reads are served by the leader only (ErrNotLeader otherwise). A new
// leader answers consumers ErrHighWatermarkBehind until its high-water mark
// reaches the start of its epoch, so that no consumer sees the mark go
// backwards across a leader change.
func (p *Partition) Read(offset int64, maxBytes int, replicaID int32) (log.Region, ReadInfo, error) {
	return p.read(offset, maxBytes, replicaID, false, -1, false)
}

// ReadInEpoch is Read for a fetch made in leaderEpoch (its
// CurrentLeaderEpoch; -1: none), checked as CheckLeaderEpoch does but
// under the same lock as the read: a follower's fetch position from
// another leadership of this replica (it lost and regained the leadership
// between a separate check and the read) is never recorded, since the
// follower's records at that offset may not be this leadership's.
func (p *Partition) ReadInEpoch(offset int64, maxBytes int, replicaID, leaderEpoch int32) (log.Region, ReadInfo, error) {
	return p.read(offset, maxBytes, replicaID, false, leaderEpoch, false)
}

// ReadAnyReplica is a consumer's Read from this replica whether it leads
// or follows (KIP-392, fetch from a follower): below this replica's own
// high-water mark, which on a follower is the leader's as of its last
// fetch, so it may lag the leader's but never passes it. Records below it
// are on every in-sync replica, the same bytes as on the leader.
func (p *Partition) ReadAnyReplica(offset int64, maxBytes int) (log.Region, ReadInfo, error) {
	return p.read(offset, maxBytes, -1, true, -1, false)
}

// ReadCommitted is a read_committed consumer's read: below the last
// stable offset instead of the high-water mark, from the leader in
// leaderEpoch (-1: any), or with anyReplica from this replica whether it
// leads or follows, as ReadAnyReplica.
func (p *Partition) ReadCommitted(offset int64, maxBytes int, leaderEpoch int32, anyReplica bool) (log.Region, ReadInfo, error) {
	return p.read(offset, maxBytes, -1, anyReplica, leaderEpoch, true)
}

// read is Read; anyRole lets a follower serve a consumer, committed stops
// a consumer's read at the last stable offset.
func (p *Partition) read(offset int64, maxBytes int, replicaID int32, anyRole bool, leaderEpoch int32, committed bool) (log.Region, ReadInfo, error) {
	p.stateMu.RLock()
	defer p.stateMu.RUnlock()
	if p.role != Leader && !(anyRole && p.role == Follower) {
		return log.Region{}, ReadInfo{}, ErrNotLeader
	}
	if err := compareLeaderEpoch(leaderEpoch, p.leaderEpoch); err != nil {
		return log.Region{}, ReadInfo{}, err
	}
	if replicaID >= 0 {
		// Only a follower reads past the high-water mark or moves it: a
		// fetch naming any other replica id reads nothing.
		if !p.isFollower(replicaID) {
			return log.Region{}, ReadInfo{}, fmt.Errorf("%w: broker %d", ErrNotReplica, replicaID)
		}
		p.recordFollowerFetch(replicaID, offset)
	}
	p.mu.Lock()
	info := p.readInfoLocked()
	closed := p.closed
	p.mu.Unlock()
	if closed {
		return log.Region{}, info, ErrClosed
	}
	if replicaID < 0 && info.HighWatermarkBehind {
		return log.Region{}, info, ErrHighWatermarkBehind
	}
	if offset < info.LogStartOffset || offset > info.LogEndOffset {
		return log.Region{}, info, fmt.Errorf("%w: %d not in [%d, %d]", log.ErrOffsetOutOfRange, offset, info.LogStartOffset, info.LogEndOffset)
	}
	limit := info.HighWatermark
	switch {
	case replicaID >= 0:
		limit = info.LogEndOffset
	case committed:
		limit = info.LastStableOffset
	}
	if offset >= limit || (maxBytes <= 0 && replicaID >= 0) {
		// Nothing new, or a throttled follower over its quota: its
		// fetch is recorded and answered with the offsets only.
		return log.Region{}, info, nil
	}
	r, err := p.log.Read(offset, limit, maxBytes)
	if err != nil {
		if errors.Is(err, log.ErrClosed) {
			err = ErrClosed
		}
		return log.Region{}, info, err
	}
	return r, info, nil
}

// RecordFollowerFetch records that follower replicaID fetched at offset,
// which is its log end offset, and advances the high-water mark if that
// lets it. It reports false when this replica is not the leader,
// replicaID is not a follower of the partition, or offset is outside this
// log. Read calls it for fetches carrying a replica id.
func (p *Partition) RecordFollowerFetch(replicaID int32, offset int64) bool {
	p.stateMu.RLock()
	defer p.stateMu.RUnlock()
	if p.role != Leader {
		return false
	}
	return p.recordFollowerFetch(replicaID, offset)
}

// isFollower reports whether replicaID is a follower of this leader;
// stateMu is held.
func (p *Partition) isFollower(replicaID int32) bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	return replicaID != p.cfg.NodeID && p.followers[replicaID] != nil
}

// recordFollowerFetch is RecordFollowerFetch with stateMu held for reading.
// A fetch outside this log's offsets is not recorded (Read answers it
// OFFSET_OUT_OF_RANGE): past the log end it would count the follower as
// holding offsets the leader does not have yet, and the high-water mark
// would pass the leader's next appends before the follower fetched them.
func (p *Partition) recordFollowerFetch(replicaID int32, offset int64) bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	f := p.followers[replicaID]
	if f == nil || offset > p.logEndOffset || offset < p.log.StartOffset() {
		return false
	}
	now := p.clock.Now()
	// Kafka's rule: a follower that fetches at the leader's current log end
	// is caught up now; one that fetches at the log end the leader had at
	// its previous fetch was caught up at that previous fetch.
	switch {
	case offset >= p.logEndOffset:
		f.lastCaughtUp = now
	case offset >= f.leaderEndAtLastFetch && f.fetchOffset >= 0:
		f.lastCaughtUp = f.lastFetch
	}
	if f.refetching && offset <= f.refetchAt {
		f.refetching = false // it cut: from here on its fetches say what it holds
	}
	f.fetchOffset = offset
	f.lastFetch = now
	f.leaderEndAtLastFetch = p.logEndOffset
	if p.advanceLocked() {
		p.notifyLocked()
	}
	return true
}

// FollowerOffset returns the last fetch offset recorded for a follower, or
// -1 when it has not fetched (or is not a follower of this leader).
func (p *Partition) FollowerOffset(replicaID int32) int64 {
	p.mu.Lock()
	defer p.mu.Unlock()
	if f := p.followers[replicaID]; f != nil {
		return f.fetchOffset
	}
	return -1
}

// DeleteRecordsBefore raises the log start offset to offset, which must not
// be above the high-water mark (log.ErrOffsetOutOfRange otherwise). It
// returns the new log start offset. Leader only.
func (p *Partition) DeleteRecordsBefore(offset int64) (int64, error) {
	p.stateMu.RLock()
	defer p.stateMu.RUnlock()
	if p.role != Leader {
		return 0, ErrNotLeader
	}
	hw := p.HighWatermark()
	if offset > hw || offset < 0 {
		return 0, fmt.Errorf("%w: %d beyond high-water mark %d", log.ErrOffsetOutOfRange, offset, hw)
	}
	if offset > p.log.StartOffset() {
		if err := p.log.DeleteRecordsBefore(offset); err != nil {
			return 0, err
		}
	}
	return p.log.StartOffset(), nil
}

// HighWatermarkToCheckpoint returns the high-water mark to write to the
// log's checkpoint (log.CheckpointHighWatermark), which the broker does
// periodically (replica.high.watermark.checkpoint.interval.ms); Close
// writes it too.
func (p *Partition) HighWatermarkToCheckpoint() int64 {
	return p.HighWatermark()
}

// Close marks the partition closed, wakes every waiter (ErrClosed),
// checkpoints the high-water mark and closes the log.
func (p *Partition) Close() error {
	if !p.markClosed() {
		return nil
	}
	err := p.log.CheckpointHighWatermark(p.HighWatermark())
	return errors.Join(err, p.log.Close())
}

// Delete closes the partition and removes its log from disk.
func (p *Partition) Delete() error {
	p.markClosed()
	return p.log.Delete()
}

func (p *Partition) markClosed() bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.closed {
		return false
	}
	p.closed = true
	p.notifyLocked()
	return true
}

// The sides of the replication throttle (KIP-73) a replica may be named
// for, as bits of Partition.throttled.
const (
	throttleLeader   = 1 << iota // leader.replication.throttled.replicas
	throttleFollower             // follower.replication.throttled.replicas
)

// SetThrottled says whether the topic's configs name this replica in
// leader.replication.throttled.replicas (leader) and in
// follower.replication.throttled.replicas (follower). Only replicas out
// of the ISR are throttled: see LeaderThrottled and
// FetchPosition.Throttled.
func (p *Partition) SetThrottled(leader, follower bool) {
	var bits uint32
	if leader {
		bits |= throttleLeader
	}
	if follower {
		bits |= throttleFollower
	}
	p.throttled.Store(bits)
}

// LeaderThrottled reports whether this leader's answers to follower
// replicaID's fetches count against the leader side of the replication
// throttle: the replica is named in leader.replication.throttled.replicas
// and the follower is out of the maximal ISR. A follower being added to
// the ISR is no longer throttled, so an acks=all append never waits for a
// throttled follower.
func (p *Partition) LeaderThrottled(replicaID int32) bool {
	if p.throttled.Load()&throttleLeader == 0 {
		return false
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	return !slices.Contains(p.maximalISR, replicaID)
}
