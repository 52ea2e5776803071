package queue

import (
	"slices"
	"strings"
	"sync"
	"time"
)

// Groups are the share groups this node coordinates: each one's
// membership (Group), in memory only. A member that loses its
// coordinator (a failover, a restart) is told it is unknown and joins
// again. Its methods are safe for concurrent use.
type Groups struct {
	mu     sync.Mutex
	groups map[string]*Group
}

// NewGroups returns no groups.
func NewGroups() *Groups { return &Groups{groups: map[string]*Group{}} }

// Heartbeat applies one member's heartbeat to group id, made on first
// use (Group.Heartbeat).
func (gs *Groups) Heartbeat(id string, hb Heartbeat, now time.Time, sessionTimeout time.Duration, counts PartitionCounts) (HeartbeatResult, error) {
	gs.mu.Lock()
	defer gs.mu.Unlock()
	g := gs.groups[id]
	if g == nil {
		g = NewGroup(id)
		gs.groups[id] = g
	}
	return g.Heartbeat(hb, now, sessionTimeout, counts)
}

// Describe returns group id's members, after expiring the silent ones,
// and its epoch; false when there is no such group.
func (gs *Groups) Describe(id string, now time.Time, sessionTimeout time.Duration, counts PartitionCounts) ([]Member, int32, bool) {
	gs.mu.Lock()
	defer gs.mu.Unlock()
	g := gs.groups[id]
	if g == nil {
		return nil, 0, false
	}
	g.Expire(now, sessionTimeout, counts)
	return g.Members(), g.Epoch, true
}

// Has says whether group id is a share group this node coordinates.
func (gs *Groups) Has(id string) bool {
	gs.mu.Lock()
	defer gs.mu.Unlock()
	return gs.groups[id] != nil
}

// GroupState is a group's id and state: Empty or Stable.
type GroupState struct {
	ID, State string
}

// List returns the groups keep accepts, by id, with their states.
func (gs *Groups) List(keep func(id string) bool) []GroupState {
	gs.mu.Lock()
	var out []GroupState
	for id, g := range gs.groups {
		if !keep(id) {
			continue
		}
		st := "Empty"
		if !g.Empty() {
			st = "Stable"
		}
		out = append(out, GroupState{ID: id, State: st})
	}
	gs.mu.Unlock()
	slices.SortFunc(out, func(a, b GroupState) int { return strings.Compare(a.ID, b.ID) })
	return out
}
