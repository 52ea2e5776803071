package replica

import (
	"testing"
	"time"

	"github.com/mqproject/mq/lib/clock"
)

// TestProposeResignation: a leader whose log has a damaged range proposes
// to hand the partition over when another ISR member holds it, once until
// the controller answers, again only replica.lag.time.max.ms after a
// refusal; alone in its ISR, or as a follower, it proposes nothing.
func TestProposeResignation(t *testing.T) {
	c := clock.NewManual(time.Unix(1_700_000_000, 0))
	p := New(Config{Topic: "t", NodeID: self, Clock: c, ReplicaLagTime: 10 * time.Second}, damagedLog(t))
	t.Cleanup(func() { p.Close() })
	if _, ok := p.ProposeResignation(); ok {
		t.Fatal("a replica that is no leader proposed to resign")
	}
	alone := PartitionState{Leader: self, LeaderEpoch: 4, Replicas: []int32{1, 2}, ISR: []int32{self}}
	if err := p.Become(alone); err != nil {
		t.Fatal(err)
	}
	if _, ok := p.ProposeResignation(); ok {
		t.Fatal("a leader alone in its ISR proposed to resign (nobody is known to hold the range)")
	}
	whole := PartitionState{Leader: self, LeaderEpoch: 4, PartitionEpoch: 1, Replicas: []int32{1, 2}, ISR: []int32{1, 2}}
	if err := p.Become(whole); err != nil {
		t.Fatal(err)
	}
	r, ok := p.ProposeResignation()
	if !ok || r.LeaderEpoch != 4 || r.PartitionEpoch != 1 || r.Damage.From != 2 {
		t.Fatalf("resignation %+v, %v; want one under epochs 4/1 for the damage from 2", r, ok)
	}
	if _, ok := p.ProposeResignation(); ok {
		t.Fatal("a second resignation while the first is pending")
	}
	p.ResignationRefused()
	if _, ok := p.ProposeResignation(); ok {
		t.Fatal("a resignation right after a refusal")
	}
	c.Advance(10 * time.Second)
	if _, ok := p.ProposeResignation(); !ok {
		t.Fatal("no resignation replica.lag.time.max.ms after a refusal")
	}
	// The controller's answer: another leader, this replica out of the ISR.
	if err := p.Become(PartitionState{Leader: 2, LeaderEpoch: 5, PartitionEpoch: 2, Replicas: []int32{1, 2}, ISR: []int32{2}}); err != nil {
		t.Fatal(err)
	}
	if _, ok := p.ProposeResignation(); ok {
		t.Fatal("a follower proposed to resign")
	}
}
