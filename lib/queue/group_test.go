package queue

import (
	"errors"
	"fmt"
	"maps"
	"reflect"
	"testing"
	"time"
)

func counts(m map[string]int32) PartitionCounts { return func(t string) int32 { return m[t] } }

func TestGroupAssignsEveryPartitionAndSharesThem(t *testing.T) {
	tests := []struct {
		members    int
		partitions int32
		want       map[string][]int32 // member → partitions of topic "t"
	}{
		{1, 3, map[string][]int32{"m0": {0, 1, 2}}},
		{2, 3, map[string][]int32{"m0": {0, 2}, "m1": {1}}},
		{3, 1, map[string][]int32{"m0": {0}, "m1": {0}, "m2": {0}}},
		{4, 2, map[string][]int32{"m0": {0}, "m1": {1}, "m2": {0}, "m3": {1}}},
	}
	for _, tt := range tests {
		t.Run(fmt.Sprintf("%d members %d partitions", tt.members, tt.partitions), func(t *testing.T) {
			g := NewGroup("g")
			c := counts(map[string]int32{"t": tt.partitions})
			for i := 0; i < tt.members; i++ {
				if _, err := g.Heartbeat(Heartbeat{MemberID: fmt.Sprintf("m%d", i), Topics: []string{"t"}}, t0, time.Minute, c); err != nil {
					t.Fatal(err)
				}
			}
			got := map[string][]int32{}
			for _, m := range g.Members() {
				got[m.ID] = m.Assignment["t"]
			}
			if !reflect.DeepEqual(got, tt.want) {
				t.Fatalf("assignment %v, want %v", got, tt.want)
			}
		})
	}
}

func TestGroupEpochsAndAssignmentDelivery(t *testing.T) {
	g := NewGroup("g")
	c := counts(map[string]int32{"t": 2})
	r, err := g.Heartbeat(Heartbeat{MemberID: "a", Topics: []string{"t"}}, t0, time.Minute, c)
	if err != nil || r.MemberEpoch != 1 || !reflect.DeepEqual(r.Assignment, map[string][]int32{"t": {0, 1}}) {
		t.Fatalf("join: %+v %v", r, err)
	}
	r, err = g.Heartbeat(Heartbeat{MemberID: "a", MemberEpoch: 1}, t0, time.Minute, c)
	if err != nil || r.MemberEpoch != 1 || r.Assignment != nil {
		t.Fatalf("steady heartbeat: %+v %v", r, err)
	}
	// b joins: a's assignment shrinks, so a gets a new epoch and its new
	// assignment on its next heartbeat.
	if _, err := g.Heartbeat(Heartbeat{MemberID: "b", Topics: []string{"t"}}, t0, time.Minute, c); err != nil {
		t.Fatal(err)
	}
	r, err = g.Heartbeat(Heartbeat{MemberID: "a", MemberEpoch: 1}, t0, time.Minute, c)
	if err != nil || r.MemberEpoch != 2 || !reflect.DeepEqual(r.Assignment, map[string][]int32{"t": {0}}) {
		t.Fatalf("after b joined: %+v %v", r, err)
	}
	// An epoch older than the previous one is fenced; an unknown member is
	// unknown.
	if _, err := g.Heartbeat(Heartbeat{MemberID: "a", MemberEpoch: 7}, t0, time.Minute, c); !errors.Is(err, ErrFencedMemberEpoch) {
		t.Fatalf("stale epoch: %v", err)
	}
	if _, err := g.Heartbeat(Heartbeat{MemberID: "zz", MemberEpoch: 3}, t0, time.Minute, c); !errors.Is(err, ErrUnknownMember) {
		t.Fatalf("unknown member: %v", err)
	}
	if _, err := g.Heartbeat(Heartbeat{MemberID: "c"}, t0, time.Minute, c); !errors.Is(err, ErrInvalidHeartbeat) {
		t.Fatalf("join without topics: %v", err)
	}
	// b leaves: a gets everything back.
	if r, err := g.Heartbeat(Heartbeat{MemberID: "b", MemberEpoch: -1}, t0, time.Minute, c); err != nil || r.MemberEpoch != -1 {
		t.Fatalf("leave: %+v %v", r, err)
	}
	r, _ = g.Heartbeat(Heartbeat{MemberID: "a", MemberEpoch: 2}, t0, time.Minute, c)
	if !reflect.DeepEqual(r.Assignment, map[string][]int32{"t": {0, 1}}) {
		t.Fatalf("after b left: %+v", r)
	}
}

func TestGroupExpiresSilentMembers(t *testing.T) {
	g := NewGroup("g")
	c := counts(map[string]int32{"t": 1})
	g.Heartbeat(Heartbeat{MemberID: "a", Topics: []string{"t"}}, t0, 10*time.Second, c)
	g.Heartbeat(Heartbeat{MemberID: "b", Topics: []string{"t"}}, t0.Add(5*time.Second), 10*time.Second, c)
	g.Expire(t0.Add(10*time.Second), 10*time.Second, c)
	ms := g.Members()
	if len(ms) != 1 || ms[0].ID != "b" {
		t.Fatalf("members after a's session ended: %+v", ms)
	}
	if _, err := g.Heartbeat(Heartbeat{MemberID: "a", MemberEpoch: 1}, t0.Add(11*time.Second), 10*time.Second, c); !errors.Is(err, ErrUnknownMember) {
		t.Fatalf("expired member's heartbeat: %v", err)
	}
	// New partitions reach the members.
	c = counts(map[string]int32{"t": 2})
	r, _ := g.Heartbeat(Heartbeat{MemberID: "b", MemberEpoch: g.Members()[0].Epoch}, t0.Add(12*time.Second), 10*time.Second, c)
	if !maps.EqualFunc(r.Assignment, map[string][]int32{"t": {0, 1}}, func(a, b []int32) bool { return reflect.DeepEqual(a, b) }) {
		t.Fatalf("after the topic grew: %+v", r)
	}
}
