package group

import (
	"context"
	"errors"
	"time"
)

// JoinRequest is a JoinGroup.
type JoinRequest struct {
	Group      string
	MemberID   string // "" on a member's first join
	InstanceID string // group.instance.id; "" for dynamic members
	ClientID   string
	ClientHost string

	SessionTimeout   time.Duration
	RebalanceTimeout time.Duration
	ProtocolType     string
	Protocols        []Protocol

	// RequireKnownMemberID (JoinGroup v4+, KIP-394): a dynamic member's
	// first join gets ErrMemberIDRequired with its member id, and must
	// join again with it.
	RequireKnownMemberID bool
	// SkipAssignmentOK (v9+, KIP-814): a static leader rejoining a stable
	// group may be told it is leader without having to assign again.
	SkipAssignmentOK bool
}

// JoinMember is a member as the leader sees it in its JoinResult.
type JoinMember struct {
	MemberID   string
	InstanceID string
	Metadata   []byte
}

// JoinResult is the answer to a JoinGroup. With ErrMemberIDRequired,
// MemberID is the id to join with.
type JoinResult struct {
	Err            error
	MemberID       string
	Generation     int32
	ProtocolType   string
	Protocol       string
	Leader         string
	SkipAssignment bool
	Members        []JoinMember // for the leader only
}

// Join handles a JoinGroup. The result comes on the returned channel
// (buffered; exactly one value): at once for errors and for members that
// need no rebalance, else when the rebalance's join phase completes.
func (c *Coordinator) Join(r JoinRequest) <-chan JoinResult {
	ch := make(chan JoinResult, 1)
	c.mu.Lock()
	defer c.mu.Unlock()
	if err := c.join(r, ch); err != nil {
		ch <- JoinResult{Err: err, MemberID: r.MemberID}
	}
	return ch
}

func (c *Coordinator) join(r JoinRequest, ch chan JoinResult) error {
	if r.Group == "" {
		return ErrInvalidGroupID
	}
	g, err := c.lookup(r.Group)
	if err != nil {
		return err
	}
	if r.SessionTimeout < c.cfg.MinSessionTimeout || r.SessionTimeout > c.cfg.MaxSessionTimeout {
		return ErrInvalidSessionTimeout
	}
	if r.RebalanceTimeout <= 0 {
		r.RebalanceTimeout = r.SessionTimeout
	}
	if g == nil {
		if r.MemberID != "" {
			return ErrUnknownMemberID
		}
		g = c.newGroup(r.Group, c.Partition(r.Group))
		c.groups[r.Group] = g
	}
	if r.MemberID == "" {
		return g.joinNew(r, ch)
	}
	return g.joinKnown(r, ch)
}

// joinNew handles a join without member id.
func (g *group) joinNew(r JoinRequest, ch chan JoinResult) error {
	if old := g.findInstance(r.InstanceID); old != nil {
		return g.replaceStatic(old, r, ch)
	}
	if !g.supports(r.ProtocolType, r.Protocols, nil) {
		return ErrInconsistentProtocol
	}
	id := g.c.cfg.NewMemberID(memberIDPrefix(r))
	if r.InstanceID == "" && r.RequireKnownMemberID {
		// The member must come back with this id; until it does, or its
		// session timeout passes, a rebalance waits for it. A first
		// member is not alone any more.
		g.aloneUntil = time.Time{}
		g.pending[id] = g.c.after(r.SessionTimeout, func() {
			if g.c.groups[g.id] != g {
				return
			}
			delete(g.pending, id)
			g.maybeCompleteJoin()
		})
		ch <- JoinResult{Err: ErrMemberIDRequired, MemberID: id}
		return nil
	}
	g.add(id, r, ch)
	return nil
}

// add makes a new member that waits for the next join phase to complete.
func (g *group) add(id string, r JoinRequest, ch chan JoinResult) {
	m := &member{id: id}
	g.update(m, r, ch)
	g.members = append(g.members, m)
	if len(g.members) == 1 {
		g.protocolType = r.ProtocolType
	}
	g.c.log.Info("group member joined", "group", g.id, "member", id, "instance", r.InstanceID, "client", r.ClientID)
	switch g.state {
	case Empty, Stable, CompletingRebalance:
		g.prepareRebalance()
	case PreparingRebalance:
		g.extendInitialDelay()
		g.maybeCompleteJoin()
	}
}

// update records a join's details on a member, which now waits on ch.
func (g *group) update(m *member, r JoinRequest, ch chan JoinResult) {
	m.instanceID = r.InstanceID
	m.clientID, m.clientHost = r.ClientID, r.ClientHost
	m.sessionTimeout, m.rebalanceTimeout = r.SessionTimeout, r.RebalanceTimeout
	m.protocolType = r.ProtocolType
	m.protocols = r.Protocols
	m.skipAssignmentOK = r.SkipAssignmentOK
	if m.joinCh != nil && m.joinCh != ch {
		// An earlier join of the same member is superseded.
		m.joinCh <- JoinResult{Err: ErrUnknownMemberID, MemberID: m.id}
	}
	m.joinCh = ch
	m.session.stop()
}

// joinKnown handles a join by a member that has its id.
func (g *group) joinKnown(r JoinRequest, ch chan JoinResult) error {
	m := g.find(r.MemberID)
	if m == nil {
		if t, ok := g.pending[r.MemberID]; ok && r.InstanceID == "" {
			t.stop()
			delete(g.pending, r.MemberID)
			if !g.supports(r.ProtocolType, r.Protocols, nil) {
				return ErrInconsistentProtocol
			}
			g.add(r.MemberID, r, ch)
			return nil
		}
		if old := g.findInstance(r.InstanceID); old != nil {
			return ErrFencedInstanceID
		}
		return ErrUnknownMemberID
	}
	if m.instanceID != "" && r.InstanceID != m.instanceID {
		return ErrFencedInstanceID
	}
	if !g.supports(r.ProtocolType, r.Protocols, m) {
		return ErrInconsistentProtocol
	}
	switch g.state {
	case PreparingRebalance:
		g.update(m, r, ch)
		g.maybeCompleteJoin()
	case CompletingRebalance:
		if m.sameProtocols(r.Protocols) {
			// The join response was lost: send it again.
			res := g.joinResult(m)
			if m.id == g.leader {
				res.Members = g.joinMembers()
			}
			ch <- res
			g.touch(m)
			return nil
		}
		g.update(m, r, ch)
		g.prepareRebalance()
	case Stable:
		if m.id != g.leader && m.sameProtocols(r.Protocols) {
			ch <- g.joinResult(m)
			g.touch(m)
			return nil
		}
		g.update(m, r, ch)
		g.prepareRebalance()
	default:
		return ErrUnknownMemberID
	}
	return nil
}

func (g *group) joinMembers() []JoinMember {
	var all []JoinMember
	for _, m := range g.members {
		all = append(all, JoinMember{MemberID: m.id, InstanceID: m.instanceID, Metadata: m.metadata(g.protocol)})
	}
	return all
}

// memberIDPrefix is what a new member id starts with: the instance id of
// a static member, else the client id (clients rely on the former to
// recognize their own static leadership, KIP-814).
func memberIDPrefix(r JoinRequest) string {
	if r.InstanceID != "" {
		return r.InstanceID
	}
	return r.ClientID
}

// replaceStatic handles a join without member id under a known
// group.instance.id (KIP-345): the instance restarted. It gets a new
// member id; requests still waiting under the old one are fenced. In a
// stable group it keeps its assignment and nobody rebalances, unless its
// protocols change which protocol the group would select (its metadata
// may differ, a restarted consumer owns nothing yet: as in Kafka, that is
// no reason to rebalance).
func (g *group) replaceStatic(old *member, r JoinRequest, ch chan JoinResult) error {
	if !g.supports(r.ProtocolType, r.Protocols, old) {
		return ErrInconsistentProtocol
	}
	if old.joinCh != nil {
		old.joinCh <- JoinResult{Err: ErrFencedInstanceID, MemberID: old.id}
		old.joinCh = nil
	}
	if old.syncCh != nil {
		old.syncCh <- SyncResult{Err: ErrFencedInstanceID}
		old.syncCh = nil
	}
	oldID := old.id
	old.id = g.c.cfg.NewMemberID(memberIDPrefix(r))
	if g.leader == oldID {
		g.leader = old.id
	}
	g.c.log.Info("group static member rejoined", "group", g.id, "instance", r.InstanceID, "old_member", oldID, "member", old.id)
	if g.state == Stable {
		previous := old.protocols
		old.protocols = r.Protocols
		if g.selectProtocol() != g.protocol {
			old.protocols = previous
			g.update(old, r, ch)
			g.prepareRebalance()
			return nil
		}
		old.clientID, old.clientHost = r.ClientID, r.ClientHost
		old.sessionTimeout, old.rebalanceTimeout = r.SessionTimeout, r.RebalanceTimeout
		old.protocolType, old.skipAssignmentOK = r.ProtocolType, r.SkipAssignmentOK
		res := g.joinResult(old)
		if old.id == g.leader {
			res.Members = g.joinMembers()
			res.SkipAssignment = r.SkipAssignmentOK
		}
		ch <- res
		g.touch(old)
		g.storeMetadata(g.logStoreFailure)
		return nil
	}
	g.update(old, r, ch)
	switch g.state {
	case PreparingRebalance:
		g.maybeCompleteJoin()
	default:
		g.prepareRebalance()
	}
	return nil
}

// SyncRequest is a SyncGroup; Assignments (member id → assignment) is set
// by the leader only.
type SyncRequest struct {
	Group        string
	MemberID     string
	InstanceID   string
	Generation   int32
	ProtocolType string // v5+: checked when set
	Protocol     string // v5+: checked when set
	Assignments  map[string][]byte
}

// SyncResult is the answer to a SyncGroup.
type SyncResult struct {
	Err          error
	ProtocolType string
	Protocol     string
	Assignment   []byte
}

// Sync handles a SyncGroup. The result comes on the returned channel
// (buffered; one value): at once in a stable group or on error, else when
// the leader's assignment arrives.
func (c *Coordinator) Sync(r SyncRequest) <-chan SyncResult {
	ch := make(chan SyncResult, 1)
	c.mu.Lock()
	defer c.mu.Unlock()
	if err := c.sync(r, ch); err != nil {
		ch <- SyncResult{Err: err}
	}
	return ch
}

func (c *Coordinator) sync(r SyncRequest, ch chan SyncResult) error {
	g, err := c.lookup(r.Group)
	if err != nil {
		return err
	}
	if g == nil {
		return ErrUnknownMemberID
	}
	m, err := g.validate(r.MemberID, r.InstanceID, r.Generation)
	if err != nil {
		return err
	}
	if (r.ProtocolType != "" && r.ProtocolType != g.protocolType) || (r.Protocol != "" && r.Protocol != g.protocol) {
		return ErrInconsistentProtocol
	}
	switch g.state {
	case PreparingRebalance:
		return ErrRebalanceInProgress
	case CompletingRebalance:
		if m.syncCh != nil {
			m.syncCh <- SyncResult{Err: ErrRebalanceInProgress}
		}
		m.syncCh = ch
		m.synced = true
		g.touch(m)
		if m.id == g.leader && !g.storing {
			for _, o := range g.members {
				o.assignment = r.Assignments[o.id]
			}
			g.syncTimer.stop()
			g.storing = true
			gen := g.generation
			g.storeMetadata(func(err error) { g.assigned(gen, err) })
		}
	case Stable:
		g.touch(m)
		ch <- SyncResult{ProtocolType: g.protocolType, Protocol: g.protocol, Assignment: m.assignment}
	default:
		return ErrUnknownMemberID
	}
	return nil
}

// assigned completes the sync phase of generation gen once the leader's
// assignment is stored: the group is Stable and the members get their
// assignments. If it could not be stored, as in Kafka, they get the error
// (a timeout: ErrRebalanceInProgress) and the group rebalances. Nothing
// happens if the generation moved on meanwhile (its waiting syncs have
// been answered) or the group went.
func (g *group) assigned(gen int32, err error) {
	if g.c.groups[g.id] != g || g.generation != gen || g.state != CompletingRebalance || !g.storing {
		return
	}
	g.storing = false
	if err != nil {
		g.c.log.Warn("store group assignment", "group", g.id, "generation", gen, "err", err)
		if errors.Is(err, context.DeadlineExceeded) {
			err = ErrRebalanceInProgress
		}
		for _, o := range g.members {
			if o.syncCh != nil {
				o.syncCh <- SyncResult{Err: err}
				o.syncCh = nil
			}
		}
		g.prepareRebalance()
		return
	}
	g.setState(Stable)
	g.c.log.Info("group stable", "group", g.id, "generation", g.generation, "members", len(g.members))
	for _, o := range g.members {
		if o.syncCh != nil {
			o.syncCh <- SyncResult{ProtocolType: g.protocolType, Protocol: g.protocol, Assignment: o.assignment}
			o.syncCh = nil
		}
	}
}

// validate finds the member of a request carrying a generation, checking
// what Kafka checks in this order: static fencing, membership, generation.
func (g *group) validate(memberID, instanceID string, generation int32) (*member, error) {
	if instanceID != "" {
		if s := g.findInstance(instanceID); s != nil && s.id != memberID {
			return nil, ErrFencedInstanceID
		}
	}
	m := g.find(memberID)
	if m == nil {
		return nil, ErrUnknownMemberID
	}
	if generation != g.generation {
		return nil, ErrIllegalGeneration
	}
	return m, nil
}

// Heartbeat handles a Heartbeat: nil in a stable group (and while the
// leader assigns), ErrRebalanceInProgress while members must join again.
func (c *Coordinator) Heartbeat(group, memberID, instanceID string, generation int32) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	g, err := c.lookup(group)
	if err != nil {
		return err
	}
	if g == nil {
		return ErrUnknownMemberID
	}
	if g.state == Empty {
		return ErrUnknownMemberID
	}
	m, err := g.validate(memberID, instanceID, generation)
	if err != nil {
		return err
	}
	g.touch(m)
	if g.state == PreparingRebalance {
		return ErrRebalanceInProgress
	}
	return nil
}

// LeaveMember names a leaving member by member id, instance id or both.
type LeaveMember struct {
	MemberID   string
	InstanceID string
}

// Leave handles a LeaveGroup: one error per member (nil for those that
// left), or a group-level error.
func (c *Coordinator) Leave(group string, members []LeaveMember) ([]error, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	g, err := c.lookup(group)
	if err != nil {
		return nil, err
	}
	errs := make([]error, len(members))
	for i, lm := range members {
		if g == nil {
			errs[i] = ErrUnknownMemberID
			continue
		}
		errs[i] = g.leave(lm)
	}
	return errs, nil
}

func (g *group) leave(lm LeaveMember) error {
	var m *member
	if lm.InstanceID != "" {
		m = g.findInstance(lm.InstanceID)
		if m == nil {
			return ErrUnknownMemberID
		}
		if lm.MemberID != "" && m.id != lm.MemberID {
			return ErrFencedInstanceID
		}
	} else {
		if t, ok := g.pending[lm.MemberID]; ok {
			t.stop()
			delete(g.pending, lm.MemberID)
			g.maybeCompleteJoin()
			return nil
		}
		m = g.find(lm.MemberID)
		if m == nil {
			return ErrUnknownMemberID
		}
	}
	g.c.log.Info("group member left", "group", g.id, "member", m.id, "instance", m.instanceID)
	g.remove(m, ErrUnknownMemberID)
	return nil
}
