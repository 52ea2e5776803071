package group

import (
	"bytes"
	"errors"
	"slices"
	"time"

	"github.com/mqproject/mq/lib/clock"
)

// State is a group's state in the classic protocol.
type State int8

// The states of a group:
//
//	Empty ──join──▶ PreparingRebalance ──all joined / rebalance timeout──▶ CompletingRebalance
//	  ▲                 ▲    │ (no member left)                                │ leader's SyncGroup
//	  └─────────────────┼────┘                                                 ▼
//	                    └────── join with new metadata, leave, session expiry ─ Stable
//
// Dead is a group being removed (deleted, expired, or its partition
// unloaded); it is never seen in the groups map.
const (
	Empty State = iota
	PreparingRebalance
	CompletingRebalance
	Stable
	Dead
)

func (s State) String() string {
	switch s {
	case Empty:
		return "Empty"
	case PreparingRebalance:
		return "PreparingRebalance"
	case CompletingRebalance:
		return "CompletingRebalance"
	case Stable:
		return "Stable"
	case Dead:
		return "Dead"
	}
	return "Unknown"
}

// Protocol is one assignment protocol a member supports, with its
// subscription metadata.
type Protocol struct {
	Name     string
	Metadata []byte
}

// TopicPartition names a partition.
type TopicPartition struct {
	Topic     string
	Partition int32
}

// Offset is a committed offset.
type Offset struct {
	Offset      int64
	LeaderEpoch int32 // -1: unknown
	Metadata    string
	CommitTime  time.Time
}

// group is one consumer group. Everything is guarded by Coordinator.mu.
type group struct {
	c         *Coordinator
	id        string
	partition int32

	state        State
	stateTime    time.Time // when state last changed
	protocolType string
	protocol     string
	generation   int32
	leader       string
	hasMetadata  bool // a group record was written (and not deleted)

	members []*member         // in join order
	pending map[string]*timer // member ids handed out with MEMBER_ID_REQUIRED, not joined yet
	offsets map[TopicPartition]Offset
	// txnOffsets are the offsets committed in transactions not ended yet,
	// by producer id: they become offsets when the transaction's commit
	// marker is written to the group's partition, and go at its abort
	// (CompleteTransaction).
	txnOffsets map[int64]map[TopicPartition]Offset

	// Writes waiting for durability (see Coordinator.appendLocked).
	writes         map[TopicPartition]*offsetWrites // per offset key with writes waiting
	metadataWrites int                              // group records waiting
	metadataSeq    uint64                           // of the latest group record made visible
	storing        bool                             // the leader's assignment is being stored (CompletingRebalance)
	deleting       bool                             // the group's tombstone is being stored

	rebalanceStart    time.Time
	delayUntil        time.Time // initial rebalance delay: no completion before
	aloneUntil        time.Time // initial rebalance delay: completion here if the first member is still alone; zero: not so
	rebalanceDeadline time.Time // completion without the missing members at
	rebalanceTimer    *timer
	syncTimer         *timer
}

// offsetWrites are the writes of one offset key waiting for durability.
type offsetWrites struct {
	waiting int    // appended, not finished
	applied uint64 // seq of the latest write of the key made visible
}

// member is one member of a group.
type member struct {
	id, instanceID       string
	clientID, clientHost string
	sessionTimeout       time.Duration
	rebalanceTimeout     time.Duration
	protocolType         string
	protocols            []Protocol
	assignment           []byte
	skipAssignmentOK     bool // JoinGroup v9+: a static leader may be told to skip assigning

	joinCh  chan JoinResult // set while waiting for the rebalance to complete
	syncCh  chan SyncResult // set while waiting for the leader's assignment
	session *timer
	synced  bool // sent SyncGroup for the current generation
}

// timer is a Clock timer that can be cancelled reliably: a callback that
// already started checks stopped under the coordinator's lock.
type timer struct {
	t       clock.Timer
	stopped bool
}

func (c *Coordinator) after(d time.Duration, f func()) *timer {
	tm := &timer{}
	tm.t = c.clock.AfterFunc(d, func() {
		c.mu.Lock()
		defer c.mu.Unlock()
		if tm.stopped {
			return
		}
		tm.stopped = true
		f()
	})
	return tm
}

func (t *timer) stop() {
	if t != nil && !t.stopped {
		t.stopped = true
		t.t.Stop()
	}
}

func (c *Coordinator) newGroup(id string, partition int32) *group {
	return &group{c: c, id: id, partition: partition, state: Empty, stateTime: c.clock.Now(),
		pending: map[string]*timer{}, offsets: map[TopicPartition]Offset{}, writes: map[TopicPartition]*offsetWrites{},
		txnOffsets: map[int64]map[TopicPartition]Offset{}}
}

func (m *member) metadata(protocol string) []byte {
	for _, p := range m.protocols {
		if p.Name == protocol {
			return p.Metadata
		}
	}
	return nil
}

// sameProtocols reports whether ps equals the member's protocols.
func (m *member) sameProtocols(ps []Protocol) bool {
	return slices.EqualFunc(m.protocols, ps, func(a, b Protocol) bool {
		return a.Name == b.Name && bytes.Equal(a.Metadata, b.Metadata)
	})
}

func (g *group) setState(s State) {
	if g.state != s {
		g.c.log.Debug("group state", "group", g.id, "from", g.state.String(), "to", s.String(), "generation", g.generation)
		g.state = s
		g.stateTime = g.c.clock.Now()
	}
}

func (g *group) find(id string) *member {
	for _, m := range g.members {
		if m.id == id {
			return m
		}
	}
	return nil
}

func (g *group) findInstance(instance string) *member {
	if instance == "" {
		return nil
	}
	for _, m := range g.members {
		if m.instanceID == instance {
			return m
		}
	}
	return nil
}

// supports reports whether protocolType and protocols fit the group's
// other members (all of them but except): the same protocol type and at
// least one protocol every member supports.
func (g *group) supports(protocolType string, protocols []Protocol, except *member) bool {
	if protocolType == "" || len(protocols) == 0 {
		return false
	}
	others := 0
	for _, m := range g.members {
		if m == except {
			continue
		}
		others++
		if m.protocolType != protocolType {
			return false
		}
	}
	if others == 0 {
		return true
	}
	for _, p := range protocols {
		all := true
		for _, m := range g.members {
			if m != except && !m.hasProtocol(p.Name) {
				all = false
				break
			}
		}
		if all {
			return true
		}
	}
	return false
}

func (m *member) hasProtocol(name string) bool {
	return slices.ContainsFunc(m.protocols, func(p Protocol) bool { return p.Name == name })
}

// selectProtocol picks the protocol for a new generation: among the
// protocols every member supports, the one most members list first (of
// those they all support); ties go to the earliest in the first member's
// list.
func (g *group) selectProtocol() string {
	if len(g.members) == 0 {
		return ""
	}
	var candidates []string
	for _, p := range g.members[0].protocols {
		all := true
		for _, m := range g.members[1:] {
			if !m.hasProtocol(p.Name) {
				all = false
				break
			}
		}
		if all {
			candidates = append(candidates, p.Name)
		}
	}
	votes := map[string]int{}
	for _, m := range g.members {
		for _, p := range m.protocols {
			if slices.Contains(candidates, p.Name) {
				votes[p.Name]++
				break
			}
		}
	}
	best := ""
	for _, name := range candidates {
		if best == "" || votes[name] > votes[best] {
			best = name
		}
	}
	return best
}

// touch restarts a member's session timer: it is removed if no heartbeat
// (or join, sync, commit) comes within its session timeout. A member
// waiting for a join or sync response is kept alive: the rebalance and
// sync timeouts bound those waits instead.
func (g *group) touch(m *member) {
	m.session.stop()
	m.session = g.c.after(m.sessionTimeout, func() {
		if g.c.groups[g.id] != g || g.find(m.id) != m {
			return
		}
		if m.joinCh != nil || m.syncCh != nil {
			g.touch(m)
			return
		}
		g.c.log.Info("group member session expired", "group", g.id, "member", m.id)
		g.remove(m, ErrUnknownMemberID)
	})
}

// remove takes a member out of the group (left, expired, fenced): its
// waiting requests get err, and the others rebalance.
func (g *group) remove(m *member, err error) {
	m.session.stop()
	if m.joinCh != nil {
		m.joinCh <- JoinResult{Err: err, MemberID: m.id}
		m.joinCh = nil
	}
	if m.syncCh != nil {
		m.syncCh <- SyncResult{Err: err}
		m.syncCh = nil
	}
	g.members = slices.DeleteFunc(g.members, func(o *member) bool { return o == m })
	if g.leader == m.id {
		g.leader = ""
	}
	switch g.state {
	case Stable, CompletingRebalance:
		g.prepareRebalance()
	case PreparingRebalance:
		g.maybeCompleteJoin()
	}
}

// maxRebalanceTimeout is the longest rebalance timeout of the members.
func (g *group) maxRebalanceTimeout() time.Duration {
	var d time.Duration
	for _, m := range g.members {
		d = max(d, m.rebalanceTimeout)
	}
	return d
}

// prepareRebalance starts a new rebalance: members have until the longest
// rebalance timeout to join again. From Empty, the initial rebalance delay
// gives other members of a starting application time to join too; a first
// member that nobody else follows within InitialRebalanceAlone does not
// wait for the rest of it (see Config.InitialRebalanceAlone).
func (g *group) prepareRebalance() {
	if g.state == CompletingRebalance {
		// The assignment being computed is for a generation that will not be.
		for _, m := range g.members {
			if m.syncCh != nil {
				m.syncCh <- SyncResult{Err: ErrRebalanceInProgress}
				m.syncCh = nil
			}
			m.assignment = nil
		}
	}
	g.syncTimer.stop()
	g.storing = false // an assignment being stored is for a generation that will not be
	now := g.c.clock.Now()
	g.rebalanceStart = now
	g.delayUntil = now
	g.aloneUntil = time.Time{}
	if g.state == Empty {
		g.delayUntil = now.Add(g.c.cfg.InitialRebalanceDelay)
	}
	g.rebalanceDeadline = now.Add(g.maxRebalanceTimeout())
	if g.delayUntil.After(g.rebalanceDeadline) {
		g.delayUntil = g.rebalanceDeadline
	}
	if alone := g.c.cfg.InitialRebalanceAlone; g.state == Empty && alone > 0 && len(g.members) == 1 && len(g.pending) == 0 {
		if until := now.Add(alone); until.Before(g.delayUntil) {
			g.aloneUntil = until
		}
	}
	g.setState(PreparingRebalance)
	g.c.log.Info("group rebalancing", "group", g.id, "generation", g.generation, "members", len(g.members))
	g.maybeCompleteJoin()
}

// extendInitialDelay pushes the initial delay back when a new member joins
// during it, up to the rebalance deadline. The first member is not alone
// any more: the delay runs its course.
func (g *group) extendInitialDelay() {
	now := g.c.clock.Now()
	if g.state != PreparingRebalance || !now.Before(g.delayUntil) {
		return
	}
	g.aloneUntil = time.Time{}
	g.rebalanceDeadline = g.rebalanceStart.Add(g.maxRebalanceTimeout())
	d := now.Add(g.c.cfg.InitialRebalanceDelay)
	if d.After(g.rebalanceDeadline) {
		d = g.rebalanceDeadline
	}
	g.delayUntil = d
}

// maybeCompleteJoin completes the join phase when every member has joined
// (and the initial delay is over, or the first member stayed alone long
// enough), or when the rebalance deadline passed; otherwise it arms a
// timer for the next moment that can change that.
func (g *group) maybeCompleteJoin() {
	if g.state != PreparingRebalance {
		return
	}
	g.rebalanceTimer.stop()
	now := g.c.clock.Now()
	allJoined := len(g.pending) == 0
	for _, m := range g.members {
		if m.joinCh == nil {
			allJoined = false
		}
	}
	nobody := len(g.members) == 0 && len(g.pending) == 0
	alone := !g.aloneUntil.IsZero() && len(g.members) == 1 && len(g.pending) == 0
	delayOver := !now.Before(g.delayUntil) || (alone && !now.Before(g.aloneUntil))
	if (allJoined && delayOver) || !now.Before(g.rebalanceDeadline) || nobody {
		g.completeJoin()
		return
	}
	next := g.rebalanceDeadline
	if allJoined || now.Before(g.delayUntil) {
		next = g.delayUntil
		if !allJoined && g.rebalanceDeadline.Before(next) {
			next = g.rebalanceDeadline
		}
	}
	if alone && g.aloneUntil.Before(next) {
		next = g.aloneUntil
	}
	g.rebalanceTimer = g.c.after(next.Sub(now), g.maybeCompleteJoin)
}

// completeJoin ends the join phase: members that did not join are
// removed, the generation moves on, and the joined members get their
// responses, the leader with everyone's metadata.
func (g *group) completeJoin() {
	g.rebalanceTimer.stop()
	g.aloneUntil = time.Time{}
	for _, m := range slices.Clone(g.members) {
		if m.joinCh == nil {
			g.c.log.Info("group member did not rejoin in time", "group", g.id, "member", m.id)
			m.session.stop()
			if m.syncCh != nil {
				m.syncCh <- SyncResult{Err: ErrRebalanceInProgress}
				m.syncCh = nil
			}
			g.members = slices.DeleteFunc(g.members, func(o *member) bool { return o == m })
		}
	}
	for id, t := range g.pending {
		t.stop()
		delete(g.pending, id)
	}
	g.generation++
	if len(g.members) == 0 {
		g.protocol, g.leader = "", ""
		g.setState(Empty)
		g.storeMetadata(g.logStoreFailure)
		g.c.log.Info("group empty", "group", g.id, "generation", g.generation)
		return
	}
	g.protocol = g.selectProtocol()
	if g.find(g.leader) == nil {
		g.leader = g.members[0].id
	}
	g.setState(CompletingRebalance)
	var all []JoinMember
	for _, m := range g.members {
		all = append(all, JoinMember{MemberID: m.id, InstanceID: m.instanceID, Metadata: m.metadata(g.protocol)})
	}
	for _, m := range g.members {
		m.assignment = nil
		m.synced = false
		res := g.joinResult(m)
		if m.id == g.leader {
			res.Members = all
		}
		m.joinCh <- res
		m.joinCh = nil
		g.touch(m)
	}
	g.c.log.Info("group join complete", "group", g.id, "generation", g.generation,
		"protocol", g.protocol, "leader", g.leader, "members", len(g.members))
	// Members that do not sync within the rebalance timeout are removed,
	// so a leader that vanished cannot hold the group in this state.
	gen := g.generation
	g.syncTimer = g.c.after(g.maxRebalanceTimeout(), func() {
		if g.c.groups[g.id] != g || g.state != CompletingRebalance || g.generation != gen {
			return
		}
		for _, m := range slices.Clone(g.members) {
			if !m.synced {
				g.c.log.Info("group member did not sync in time", "group", g.id, "member", m.id)
				m.session.stop()
				g.members = slices.DeleteFunc(g.members, func(o *member) bool { return o == m })
				if g.leader == m.id {
					g.leader = ""
				}
			}
		}
		g.prepareRebalance()
	})
}

func (g *group) joinResult(m *member) JoinResult {
	return JoinResult{MemberID: m.id, Generation: g.generation, ProtocolType: g.protocolType,
		Protocol: g.protocol, Leader: g.leader}
}

// storeMetadata appends the group's record and calls done with mu held
// once it is durable (nil) or is not (why). The group has its metadata
// once a record is durable.
func (g *group) storeMetadata(done func(error)) {
	v := groupValue{protocolType: g.protocolType, generation: g.generation, protocol: g.protocol,
		leader: g.leader, stateMS: g.stateTime.UnixMilli()}
	for _, m := range g.members {
		v.members = append(v.members, storedMember{id: m.id, instanceID: m.instanceID, clientID: m.clientID,
			clientHost: m.clientHost, rebalanceMS: int32(m.rebalanceTimeout / time.Millisecond),
			sessionMS: int32(m.sessionTimeout / time.Millisecond), subscription: m.metadata(g.protocol),
			assignment: m.assignment})
	}
	w, err := g.c.appendLocked(g.partition, [][]byte{groupKey(g.id)}, [][]byte{v.encode()})
	if err != nil {
		done(err)
		return
	}
	g.metadataWrites++
	g.c.awaitAsync(w, func(err error) {
		g.metadataWrites--
		if err == nil && w.seq > g.metadataSeq {
			g.metadataSeq = w.seq
			g.hasMetadata = true
		}
		done(err)
	})
}

// restoreMembers makes a replayed group what its last group record says.
// A record with members is written only for a stable generation (the
// leader's assignment, a static member's return), so the group comes back
// Stable with them: same member ids, generation, leader and assignments,
// and for each member the group's protocol with the subscription the
// record holds (as in Kafka; a member that joins again with all its
// protocols looks changed, and rebalances). Load starts their sessions.
// A record without members leaves the group Empty. One that is not a
// stable generation (members but no protocol, a leader that is not a
// member, a member without id or session timeout; no writer of mq or
// Kafka makes one) restores no members either: they get
// ErrUnknownMemberID and join again, the safe way back from a state this
// coordinator did not see.
func (g *group) restoreMembers(v *groupValue) {
	if len(v.members) == 0 {
		return
	}
	if reason := v.unstable(); reason != "" {
		g.c.log.Warn("group record is not a stable generation: members not restored",
			"group", g.id, "generation", v.generation, "reason", reason)
		return
	}
	g.protocol, g.leader = v.protocol, v.leader
	for _, sm := range v.members {
		m := &member{id: sm.id, instanceID: sm.instanceID, clientID: sm.clientID, clientHost: sm.clientHost,
			sessionTimeout:   time.Duration(sm.sessionMS) * time.Millisecond,
			rebalanceTimeout: time.Duration(sm.rebalanceMS) * time.Millisecond,
			protocolType:     v.protocolType,
			protocols:        []Protocol{{Name: v.protocol, Metadata: sm.subscription}},
			assignment:       sm.assignment,
			synced:           true,
		}
		if m.rebalanceTimeout <= 0 {
			m.rebalanceTimeout = m.sessionTimeout // version 0 has none; Kafka's default
		}
		g.members = append(g.members, m)
	}
	g.state = Stable
}

// unstable says why a group record with members does not describe a
// stable generation; "" if it does.
func (v *groupValue) unstable() string {
	if v.protocolType == "" || v.protocol == "" {
		return "no protocol"
	}
	ids, instances := map[string]bool{}, map[string]bool{}
	for _, m := range v.members {
		switch {
		case m.id == "" || ids[m.id]:
			return "member id missing or repeated"
		case m.instanceID != "" && instances[m.instanceID]:
			return "instance id repeated"
		case m.sessionMS <= 0:
			return "no session timeout"
		}
		ids[m.id], instances[m.instanceID] = true, true
	}
	if !ids[v.leader] {
		return "leader not a member"
	}
	return ""
}

// logStoreFailure is storeMetadata's done for records nobody waits for
// (the group became Empty, a static member came back): a failure is
// logged and the group works on; after a failover it is what its
// previous record says: members join again, and restored members that
// are gone expire.
func (g *group) logStoreFailure(err error) {
	if err != nil && !errors.Is(err, ErrNotCoordinator) {
		g.c.log.Warn("store group metadata", "group", g.id, "err", err)
	}
}

// beginOffsets notes writes of the offsets of tps, just appended.
func (g *group) beginOffsets(tps []TopicPartition) {
	for _, tp := range tps {
		ow := g.writes[tp]
		if ow == nil {
			ow = &offsetWrites{}
			g.writes[tp] = ow
		}
		ow.waiting++
	}
}

// finishOffsets ends the writes of w to the offsets of tps (values[i] nil:
// a tombstone). When w is durable each value becomes visible, unless a
// later write of the same key already is: writes can finish out of order,
// and in memory as on replay the last record of a key wins.
func (g *group) finishOffsets(w *write, tps []TopicPartition, values []*Offset, durable bool) {
	for i, tp := range tps {
		ow := g.writes[tp]
		if durable && w.seq > ow.applied {
			ow.applied = w.seq
			if values[i] == nil {
				delete(g.offsets, tp)
			} else {
				g.offsets[tp] = *values[i]
			}
		}
		if ow.waiting--; ow.waiting == 0 {
			delete(g.writes, tp) // later writes have higher seqs: applied is not needed
		}
	}
}

// offsetKeys are the partitions with an offset, visible or on its way,
// sorted.
func (g *group) offsetKeys() []TopicPartition {
	var tps []TopicPartition
	for tp := range g.offsets {
		tps = append(tps, tp)
	}
	for tp := range g.writes {
		if _, ok := g.offsets[tp]; !ok {
			tps = append(tps, tp)
		}
	}
	slices.SortFunc(tps, compareTopicPartitions)
	return tps
}

// dropIfVacant removes a group that holds nothing and waits for nothing:
// one a simple commit created whose write failed, or whose offsets were
// all deleted, and that never wrote a group record. Loading its
// partition (replay) would not find it either.
func (g *group) dropIfVacant() {
	if g.c.groups[g.id] == g && g.state == Empty && len(g.members) == 0 && len(g.pending) == 0 &&
		len(g.offsets) == 0 && len(g.writes) == 0 && len(g.txnOffsets) == 0 && !g.hasMetadata && g.metadataWrites == 0 && !g.deleting {
		g.shutdown(ErrCoordinatorUnavailable)
		delete(g.c.groups, g.id)
	}
}

// shutdown fails every waiting request and stops every timer: the group
// is going away from this coordinator.
func (g *group) shutdown(err error) {
	g.rebalanceTimer.stop()
	g.syncTimer.stop()
	for _, t := range g.pending {
		t.stop()
	}
	for _, m := range g.members {
		m.session.stop()
		if m.joinCh != nil {
			m.joinCh <- JoinResult{Err: err, MemberID: m.id}
			m.joinCh = nil
		}
		if m.syncCh != nil {
			m.syncCh <- SyncResult{Err: err}
			m.syncCh = nil
		}
	}
	g.members = nil
	g.state = Dead
}
