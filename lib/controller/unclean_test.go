package controller

import (
	"context"
	"errors"
	"slices"
	"strconv"
	"testing"
	"time"

	"github.com/mqproject/mq/lib/clock"
)

func TestChooseUncleanPicksTheMostAdvancedLiveReplica(t *testing.T) {
	img := emptyImage()
	img.Brokers = map[int32]Broker{1: {ID: 1}, 2: {ID: 2}, 3: {ID: 3}, 4: {ID: 4, Fenced: true}}
	p := Partition{Replicas: []int32{1, 2, 3, 4}, ISR: []int32{4}, Leader: -1}
	at := func(epoch int32, offset int64) ReplicaPosition {
		return ReplicaPosition{LastEpoch: epoch, EndOffset: offset}
	}
	for _, tc := range []struct {
		name    string
		reports map[int32]ReplicaPosition
		waiting []int32 // live replicas without a report still waited for
		want    int32   // -1: nothing chosen
	}{
		{"largest end offset", map[int32]ReplicaPosition{1: at(2, 10), 2: at(2, 30), 3: at(2, 20)}, nil, 2},
		{"later epoch beats a larger offset", map[int32]ReplicaPosition{1: at(3, 10), 2: at(2, 30), 3: at(2, 20)}, nil, 1},
		{"equals: replica order", map[int32]ReplicaPosition{1: at(2, 10), 2: at(2, 30), 3: at(2, 30)}, nil, 2},
		{"a fenced replica is no candidate", map[int32]ReplicaPosition{1: at(2, 10), 4: at(9, 99)}, nil, 1},
		{"one not waited for is skipped", map[int32]ReplicaPosition{3: at(1, 5)}, nil, 3},
		{"one waited for holds the election", map[int32]ReplicaPosition{1: at(2, 10), 3: at(2, 30)}, []int32{2}, -1},
		{"no report, nothing", nil, nil, -1},
	} {
		t.Run(tc.name, func(t *testing.T) {
			position := func(id int32) (ReplicaPosition, bool) { pos, ok := tc.reports[id]; return pos, ok }
			waiting := func(id int32) bool {
				for _, w := range tc.waiting {
					if w == id {
						return true
					}
				}
				return false
			}
			leader, pos, ok := chooseUnclean(img, p, position, waiting)
			if leader != tc.want || ok != (tc.want >= 0) {
				t.Fatalf("chose %d (%v), want %d", leader, ok, tc.want)
			}
			if ok && pos != tc.reports[leader] {
				t.Errorf("position %+v, want the one %d reported, %+v", pos, leader, tc.reports[leader])
			}
		})
	}
}

// TestUncleanElectionWaitsForReports steps the active controller's
// checks with a manual clock: a live replica that has not reported is
// waited for two heartbeat intervals, then the most advanced of those
// that reported wins.
func TestUncleanElectionWaitsForReports(t *testing.T) {
	// a and b allow unclean elections (the static default); c does not,
	// but an operator's election ignores that.
	f := fenceLastMember(t, true, []string{"a", "b", "c"}, func(topic string) map[string]string {
		if topic == "c" {
			return map[string]string{UncleanLeaderElectionConfig: "false"}
		}
		return nil
	})
	c, ctx, heartbeat, advance := f.c, f.ctx, f.heartbeat, f.advance
	leaders := func() (int32, int32) {
		img := c.Image()
		return img.Partition("a", 0).Leader, img.Partition("b", 0).Leader
	}
	// The check that fenced 1 saw the partitions offline, at f.fencedAt.
	if a, b := leaders(); a != -1 || b != -1 {
		t.Fatalf("after 1 was fenced: leaders %d and %d, want none (unclean elections wait for reports)", a, b)
	}
	electC := func() error {
		t.Helper()
		res, err := c.ElectLeaders(ctx, ElectUnclean, []TopicPartition{{"c", 0}})
		if err != nil {
			t.Fatal(err)
		}
		return res[TopicPartition{"c", 0}]
	}
	if err := electC(); !errors.Is(err, ErrEligibleLeadersNotAvailable) {
		t.Fatalf("operator's unclean election before any report: %v, want ErrEligibleLeadersNotAvailable", err)
	}

	heartbeat(2, position("a", 5), position("b", 7), position("c", 4))
	advance(time.Second) // the next check
	if a, b := leaders(); a != -1 || b != -1 {
		t.Fatalf("with 3 not reported yet: leaders %d and %d, want none", a, b)
	}
	if err := electC(); err != nil {
		t.Fatalf("operator's unclean election with 2's report: %v", err)
	}
	if p := c.Image().Partition("c", 0); p.Leader != 2 {
		t.Fatalf("c after the operator's election: %+v, want leader 2 at once (the only report)", p)
	}
	heartbeat(3, position("a", 9)) // 3 reports a only
	advance(time.Second)
	if a, b := leaders(); a != 3 || b != -1 {
		t.Fatalf("with every report on a: leaders %d and %d, want 3 (ahead of 2) and none (3 still waited for)", a, b)
	}
	advance(time.Second)
	if _, b := leaders(); b != -1 {
		t.Fatalf("b a check before two intervals passed: leader %d, want none (3 still waited for)", b)
	}
	advance(time.Second)
	if since := f.clock.Now().Sub(f.fencedAt); since != 2*f.c.cfg.BrokerHeartbeatInterval {
		t.Fatalf("test out of step: %v since b was seen offline, want two heartbeat intervals", since)
	}
	if p := c.Image().Partition("b", 0); p.Leader != 2 || len(p.ISR) != 1 || p.ISR[0] != 2 {
		t.Fatalf("b after waiting two intervals: %+v, want leader 2 and ISR [2], the only report", p)
	}
}

// TestLostReplicaLeadsOnlyAfterAnUncleanElection drives a controller
// through KIP-966's case: the last ISR member is fenced and registers
// again having lost committed records. It is not elected, though alive
// and the ISR's only member; the partitions keep no leader, with an
// empty ISR, until an unclean election (the controller's own where the
// topic allows it, the operator's elsewhere) picks the most advanced
// live replica, which may be the one that lost records.
func TestLostReplicaLeadsOnlyAfterAnUncleanElection(t *testing.T) {
	f := fenceLastMember(t, false, []string{"loose", "strict"}, func(topic string) map[string]string {
		return map[string]string{UncleanLeaderElectionConfig: strconv.FormatBool(topic == "loose")}
	}) // 1, the last ISR member, loses power
	c, ctx, epochs, heartbeat := f.c, f.ctx, f.epochs, f.heartbeat
	var err error

	lost := []LostReplica{{Topic: "loose", Partition: 0, EndOffset: 5, HighWatermark: 9}, {Topic: "strict", Partition: 0, EndOffset: 8, HighWatermark: 9}}
	if epochs[1], err = c.RegisterBrokerAfterLoss(ctx, Broker{ID: 1, Host: "h", Port: 9092}, lost); err != nil {
		t.Fatal(err)
	}
	state := func(topic string) Partition { return *c.Image().Partition(topic, 0) }
	for _, topic := range []string{"loose", "strict"} {
		if p := state(topic); p.Leader != -1 || len(p.ISR) != 0 {
			t.Fatalf("%s after 1 registered with lost records: %+v, want no leader and an empty ISR", topic, p)
		}
	}
	heartbeat(1) // a heartbeat elects nothing either
	if p := state("strict"); p.Leader != -1 {
		t.Fatalf("strict after 1's heartbeat: %+v, want no leader", p)
	}

	heartbeat(1, position("loose", 5), position("strict", 8))
	heartbeat(2, position("loose", 7), position("strict", 7))
	heartbeat(3, position("loose", 3), position("strict", 3))
	f.advance(time.Second) // the next check
	if p := state("loose"); p.Leader != 2 || !slices.Equal(p.ISR, []int32{2}) {
		t.Fatalf("loose after the controller's unclean election: %+v, want 2, the most advanced, with ISR [2]", p)
	}
	if p := state("strict"); p.Leader != -1 {
		t.Fatalf("strict after the controller's unclean election: %+v, want none (its config forbids)", p)
	}
	res, err := c.ElectLeaders(ctx, ElectUnclean, []TopicPartition{{"strict", 0}})
	if err != nil || res[TopicPartition{"strict", 0}] != nil {
		t.Fatalf("operator's unclean election of strict: %v, %v", err, res)
	}
	if p := state("strict"); p.Leader != 1 || !slices.Equal(p.ISR, []int32{1}) {
		t.Fatalf("strict after the operator's unclean election: %+v, want 1, the most advanced though it lost records, with ISR [1]", p)
	}
}

// lastMemberFenced is a controller of one node on a manual clock, with
// brokers 1-3 registered, after fenceLastMember.
type lastMemberFenced struct {
	t      *testing.T
	c      *Controller
	clock  *clock.Manual
	ctx    context.Context
	epochs map[int32]int64 // the brokers' registrations
	// fencedAt is when the check that fenced 1 ran.
	fencedAt time.Time
}

// fenceLastMember opens the controller (unclean.leader.election.enable's
// static default uncleanDefault; a session timeout of 10s, so a check
// every second; heartbeats every 2s), creates topics on replicas 1, 2, 3
// with the configs configs gives, shrinks their ISRs to 1 (2 and 3 fell
// out of sync: 1 alone has every acknowledged record), and lets 1's
// session expire while 2 and 3 keep heartbeating: the controller's check
// fences 1, and the partitions are left without a leader.
func fenceLastMember(t *testing.T, uncleanDefault bool, topics []string, configs func(topic string) map[string]string) *lastMemberFenced {
	t.Helper()
	m, epochs := openOnManualClock(t, 3, func(c *Config) {
		c.BrokerSessionTimeout, c.BrokerHeartbeatInterval = 10*time.Second, 2*time.Second
		c.UncleanLeaderElection = uncleanDefault
	})
	f := &lastMemberFenced{t: t, c: m.c, clock: m.clock, ctx: m.ctx, epochs: epochs}
	c, ctx := f.c, f.ctx
	if err := c.CatchUp(ctx); err != nil {
		t.Fatalf("CatchUp on the leader: %v", err)
	}
	for _, topic := range topics {
		if _, err := c.CreateTopic(ctx, CreateTopic{Name: topic, Assignments: [][]int32{{1, 2, 3}}, Configs: configs(topic)}); err != nil {
			t.Fatal(err)
		}
		if _, err := c.AlterPartition(ctx, AlterPartition{Topic: topic, Leader: 1, ISR: []int32{1}}); err != nil {
			t.Fatal(err)
		}
	}
	for id := int32(1); id <= 3; id++ {
		f.heartbeat(id)
	}
	f.advance(6 * time.Second)
	f.heartbeat(2)
	f.heartbeat(3)
	f.advance(5 * time.Second) // 1 has been silent for 11s: the check at 11s fences it
	if !c.Image().Brokers[1].Fenced {
		t.Fatalf("broker 1 not fenced after 11s of silence: %+v", c.Image().Brokers[1])
	}
	f.fencedAt = f.clock.Now()
	return f
}

// advance moves the manual clock on by d: the controller's checks due on
// the way run, at their due times, before it returns.
func (f *lastMemberFenced) advance(d time.Duration) { f.clock.Advance(d) }

// heartbeat sends broker id's heartbeat at its registration's epoch, with
// the positions of its replicas without a leader.
func (f *lastMemberFenced) heartbeat(id int32, offline ...ReplicaPosition) {
	f.t.Helper()
	if _, err := f.c.Heartbeat(f.ctx, Heartbeat{BrokerID: id, BrokerEpoch: f.epochs[id], Offline: offline}); err != nil {
		f.t.Fatal(err)
	}
}

// position is a report of partition 0 of topic ending at offset, in epoch 0.
func position(topic string, offset int64) ReplicaPosition {
	return ReplicaPosition{Topic: topic, Partition: 0, LastEpoch: 0, EndOffset: offset}
}
