package queue

import (
	"errors"
	"maps"
	"slices"
	"sort"
	"time"
)

// Errors of share group membership.
var (
	ErrUnknownMember     = errors.New("queue: unknown member id")
	ErrFencedMemberEpoch = errors.New("queue: fenced member epoch")
	ErrInvalidHeartbeat  = errors.New("queue: invalid heartbeat")
)

// Member is one member of a share group, as the coordinator knows it.
type Member struct {
	ID         string
	ClientID   string
	ClientHost string
	Rack       *string
	// Epoch is the member epoch: the group epoch at which its assignment
	// last changed.
	Epoch  int32
	Topics []string // subscribed topic names, sorted
	// Assignment is the partitions of each topic the member reads.
	Assignment map[string][]int32

	prevEpoch int32 // the epoch before, still accepted (a lost response)
	lastSeen  time.Time
	sent      bool // Assignment has been sent since it last changed
}

// Group is a share group's membership and assignment (KIP-932's
// ShareGroupHeartbeat). Like Partition it is pure: time and the topics'
// partition counts come in as arguments. It is not safe for concurrent
// use.
//
// The assignment gives every partition of a subscribed topic to at least
// one member: with fewer members than partitions each member gets a
// share of the partitions, with more each partition is read by several
// members (share groups allow any number per partition).
type Group struct {
	ID string
	// Epoch is the group epoch: it grows whenever an assignment changes.
	Epoch   int32
	members map[string]*Member
}

// NewGroup returns an empty share group.
func NewGroup(id string) *Group { return &Group{ID: id, members: map[string]*Member{}} }

// Heartbeat is one ShareGroupHeartbeat request.
type Heartbeat struct {
	MemberID    string
	MemberEpoch int32    // 0 joins, -1 leaves
	Topics      []string // nil: unchanged
	Rack        *string
	ClientID    string
	ClientHost  string
}

// HeartbeatResult is the answer to a heartbeat.
type HeartbeatResult struct {
	MemberEpoch int32
	// Assignment is set when the member has not been sent its current
	// assignment yet; nil means unchanged.
	Assignment map[string][]int32
}

// PartitionCounts tells how many partitions a topic has (0: no such
// topic).
type PartitionCounts func(topic string) int32

// Heartbeat applies a member's heartbeat at now. Members not seen for
// sessionTimeout are dropped first.
func (g *Group) Heartbeat(hb Heartbeat, now time.Time, sessionTimeout time.Duration, counts PartitionCounts) (HeartbeatResult, error) {
	g.Expire(now, sessionTimeout, counts)
	if hb.MemberID == "" {
		return HeartbeatResult{}, errors.Join(ErrInvalidHeartbeat, errors.New("empty member id"))
	}
	m := g.members[hb.MemberID]
	switch {
	case hb.MemberEpoch == -1:
		if m == nil {
			return HeartbeatResult{}, ErrUnknownMember
		}
		delete(g.members, hb.MemberID)
		g.assign(counts)
		return HeartbeatResult{MemberEpoch: -1}, nil
	case hb.MemberEpoch == 0:
		if m == nil {
			if hb.Topics == nil {
				return HeartbeatResult{}, errors.Join(ErrInvalidHeartbeat, errors.New("joining without subscribed topics"))
			}
			m = &Member{ID: hb.MemberID}
			g.members[hb.MemberID] = m
		}
		// A rejoin (epoch 0 from a known member) starts over.
		m.sent = false
	case m == nil:
		return HeartbeatResult{}, ErrUnknownMember
	case hb.MemberEpoch != m.Epoch && hb.MemberEpoch != m.prevEpoch:
		return HeartbeatResult{}, ErrFencedMemberEpoch
	case hb.MemberEpoch != m.Epoch:
		m.sent = false // it missed the answer that moved it on
	}
	m.lastSeen = now
	m.ClientID, m.ClientHost = hb.ClientID, hb.ClientHost
	if hb.Rack != nil {
		m.Rack = hb.Rack
	}
	if hb.Topics != nil {
		m.Topics = slices.Sorted(slices.Values(hb.Topics))
		m.Topics = slices.Compact(m.Topics)
	}
	g.assign(counts)
	res := HeartbeatResult{MemberEpoch: m.Epoch}
	if !m.sent {
		res.Assignment = m.Assignment
		if res.Assignment == nil {
			res.Assignment = map[string][]int32{}
		}
		m.sent = true
	}
	return res, nil
}

// Expire drops the members not seen for sessionTimeout.
func (g *Group) Expire(now time.Time, sessionTimeout time.Duration, counts PartitionCounts) {
	changed := false
	for id, m := range g.members {
		if !now.Before(m.lastSeen.Add(sessionTimeout)) {
			delete(g.members, id)
			changed = true
		}
	}
	if changed {
		g.assign(counts)
	}
}

// assign recomputes every member's assignment; a member whose assignment
// changes gets a new epoch.
func (g *Group) assign(counts PartitionCounts) {
	ids := slices.Sorted(maps.Keys(g.members))
	target := map[string]map[string][]int32{}
	topics := map[string][]string{} // topic → subscribed members, sorted
	for _, id := range ids {
		target[id] = map[string][]int32{}
		for _, t := range g.members[id].Topics {
			topics[t] = append(topics[t], id)
		}
	}
	for t, ms := range topics {
		n := counts(t)
		if n <= 0 {
			continue
		}
		if len(ms) >= int(n) {
			for i, id := range ms {
				target[id][t] = []int32{int32(i) % n}
			}
			continue
		}
		for p := int32(0); p < n; p++ {
			id := ms[int(p)%len(ms)]
			target[id][t] = append(target[id][t], p)
		}
	}
	bumped := false
	for _, id := range ids {
		m := g.members[id]
		if m.Assignment != nil && equalAssignment(m.Assignment, target[id]) {
			continue
		}
		if !bumped {
			g.Epoch++
			bumped = true
		}
		m.prevEpoch, m.Epoch = m.Epoch, g.Epoch
		m.Assignment = target[id]
		m.sent = false
	}
}

func equalAssignment(a, b map[string][]int32) bool {
	return maps.EqualFunc(a, b, func(x, y []int32) bool { return slices.Equal(x, y) })
}

// Members returns the members, sorted by ID. The values are copies.
func (g *Group) Members() []Member {
	out := make([]Member, 0, len(g.members))
	for _, m := range g.members {
		c := *m
		c.Topics = slices.Clone(m.Topics)
		c.Assignment = maps.Clone(m.Assignment)
		out = append(out, c)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].ID < out[j].ID })
	return out
}

// Empty says whether the group has no members.
func (g *Group) Empty() bool { return len(g.members) == 0 }
