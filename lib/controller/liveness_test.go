package controller

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/mqproject/mq/lib/clock"
)

// manualStart is where the manual clocks of these tests start.
var manualStart = time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)

// onManualClock is a single-voter controller whose clock a test moves:
// the active controller's checks due on the way run in Advance, before it
// returns, so a test sees their effect at once.
type onManualClock struct {
	t     *testing.T
	c     *Controller
	clock *clock.Manual
	ctx   context.Context
}

// openOnManualClock opens a single-voter controller on a manual clock
// reading manualStart, its Config changed by tweak, and registers brokers
// 1..brokers; it returns their epochs.
func openOnManualClock(t *testing.T, brokers int32, tweak func(*Config)) (*onManualClock, map[int32]int64) {
	t.Helper()
	m := &onManualClock{t: t, clock: clock.NewManual(manualStart)}
	cfg := Config{NodeID: 1, Dir: t.TempDir(), Clock: m.clock}
	if tweak != nil {
		tweak(&cfg)
	}
	c, err := Open(cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	t.Cleanup(cancel)
	m.c, m.ctx = c, ctx
	epochs := map[int32]int64{}
	for id := int32(1); id <= brokers; id++ {
		if epochs[id], err = c.RegisterBroker(ctx, Broker{ID: id, Host: "h", Port: 9090 + id}); err != nil {
			t.Fatal(err)
		}
	}
	return m, epochs
}

// heartbeat sends broker id's heartbeat at epoch, its node caught up
// with the image.
func (m *onManualClock) heartbeat(id int32, epoch int64) HeartbeatResult {
	m.t.Helper()
	res, err := m.c.Heartbeat(m.ctx, Heartbeat{BrokerID: id, BrokerEpoch: epoch, AppliedVersion: m.c.Image().Version})
	if err != nil {
		m.t.Fatalf("heartbeat of broker %d: %v", id, err)
	}
	return res
}

// TestSilentBrokerIsFencedAtTheFirstCheckPastItsSessionTimeout steps the
// active controller's session checks one at a time: a broker silent for
// exactly its session timeout is still alive, and the first check after
// that fences it, while a broker that heartbeats between checks stays.
func TestSilentBrokerIsFencedAtTheFirstCheckPastItsSessionTimeout(t *testing.T) {
	for _, session := range []time.Duration{
		20 * time.Millisecond,   // checks every 10ms, the shortest
		2500 * time.Millisecond, // every 625ms: the timeout falls on the fourth
		9 * time.Second,         // every second, the longest; Kafka's default
	} {
		t.Run(session.String(), func(t *testing.T) {
			m, epochs := openOnManualClock(t, 2, func(c *Config) { c.BrokerSessionTimeout = session })
			if _, err := m.c.CreateTopic(m.ctx, CreateTopic{Name: "led-by-1", Assignments: [][]int32{{1, 2}}}); err != nil {
				t.Fatal(err)
			}
			m.heartbeat(1, epochs[1])
			m.heartbeat(2, epochs[2])
			lastHeartbeat := m.clock.Now()
			interval := m.c.sessionCheckInterval()
			for {
				m.clock.Advance(interval)
				silence := m.clock.Now().Sub(lastHeartbeat)
				img := m.c.Image()
				if fenced := img.Brokers[1].Fenced; fenced != (silence > session) {
					t.Fatalf("broker 1 after %v of silence (session timeout %v, a check every %v): fenced=%v", silence, session, interval, fenced)
				}
				if img.Brokers[2].Fenced {
					t.Fatalf("broker 2, heartbeating before every check, fenced after %v", silence)
				}
				if img.Brokers[1].Fenced {
					if p := img.Partition("led-by-1", 0); p.Leader != 2 || !slices.Equal(p.ISR, []int32{2}) || p.LeaderEpoch != 1 {
						t.Fatalf("led-by-1 after broker 1 was fenced: %+v, want broker 2 leading alone in leader epoch 1", p)
					}
					return
				}
				m.heartbeat(2, epochs[2])
			}
		})
	}
}

// TestFencedBrokerLeadershipsMoveAndAHeartbeatUnfencesIt: a fenced
// broker's partitions go to the first live ISR member in replica order
// and it leaves the ISRs; once it heartbeats again with its node caught
// up with its registration, it is unfenced.
func TestFencedBrokerLeadershipsMoveAndAHeartbeatUnfencesIt(t *testing.T) {
	const session = 4 * time.Second
	m, epochs := openOnManualClock(t, 4, func(c *Config) { c.BrokerSessionTimeout = session })
	if _, err := m.c.CreateTopic(m.ctx, CreateTopic{Name: "led-by-4", Assignments: [][]int32{{4, 1, 2}, {4, 3, 1}}}); err != nil {
		t.Fatal(err)
	}
	for id := int32(1); id <= 4; id++ {
		m.heartbeat(id, epochs[id])
	}
	// 4 falls silent; the others heartbeat every second.
	for range 5 {
		m.clock.Advance(time.Second)
		for id := int32(1); id <= 3; id++ {
			m.heartbeat(id, epochs[id])
		}
	}
	img := m.c.Image()
	if !img.Brokers[4].Fenced || img.Brokers[1].Fenced || img.Brokers[2].Fenced || img.Brokers[3].Fenced {
		t.Fatalf("after 5s of silence from broker 4 alone: brokers %+v, want 4 fenced only", img.Brokers)
	}
	p0, p1 := img.Partition("led-by-4", 0), img.Partition("led-by-4", 1)
	if p0.Leader != 1 || p0.LeaderEpoch != 1 || !slices.Equal(p0.ISR, []int32{1, 2}) || p1.Leader != 3 || !slices.Equal(p1.ISR, []int32{3, 1}) {
		t.Fatalf("partitions after broker 4 was fenced: %+v %+v", p0, p1)
	}

	// A heartbeat from a node that has not applied the registration yet
	// leaves the broker fenced; a caught-up one unfences it.
	res, err := m.c.Heartbeat(m.ctx, Heartbeat{BrokerID: 4, BrokerEpoch: epochs[4], AppliedVersion: uint64(epochs[4]) - 1})
	if err != nil || !res.Fenced || !m.c.Image().Brokers[4].Fenced {
		t.Fatalf("heartbeat behind the registration: %+v, %v; want still fenced", res, err)
	}
	if res := m.heartbeat(4, epochs[4]); res.Fenced || m.c.Image().Brokers[4].Fenced {
		t.Fatalf("caught-up heartbeat: %+v, broker %+v; want unfenced", res, m.c.Image().Brokers[4])
	}
}

// TestLeaderImbalanceCheckRunsEveryInterval: with auto.leader.rebalance.enable
// the active controller moves a partition's leadership back to its
// preferred replica at the leader-imbalance check, not before; without
// it, never.
func TestLeaderImbalanceCheckRunsEveryInterval(t *testing.T) {
	const interval = 30 * time.Second
	for _, rebalance := range []bool{true, false} {
		t.Run(fmt.Sprintf("rebalance=%v", rebalance), func(t *testing.T) {
			m, epochs := openOnManualClock(t, 2, func(c *Config) {
				c.AutoLeaderRebalance = rebalance
				c.LeaderImbalanceCheckInterval = interval
				c.BrokerSessionTimeout = 10 * time.Second
			})
			if _, err := m.c.CreateTopic(m.ctx, CreateTopic{Name: "t", Assignments: [][]int32{{1, 2}}}); err != nil {
				t.Fatal(err)
			}
			// Broker 2 leads; broker 1, the preferred replica, is in sync.
			if err := m.c.OverridePartition(m.ctx, PartitionOverride{Topic: "t", Leader: 2, ISR: []int32{2, 1}, LeaderEpoch: 1}); err != nil {
				t.Fatal(err)
			}
			leader := func() int32 { return m.c.Image().Partition("t", 0).Leader }
			// Step a second at a time, both brokers heartbeating, to a
			// nanosecond before the check.
			for range interval / time.Second {
				m.heartbeat(1, epochs[1])
				m.heartbeat(2, epochs[2])
				m.clock.Advance(time.Second - time.Nanosecond)
				if l := leader(); l != 2 {
					t.Fatalf("leader %d at %v, before the check, want 2", l, m.clock.Now().Sub(manualStart))
				}
				m.clock.Advance(time.Nanosecond)
			}
			want := int32(2)
			if rebalance {
				want = 1
			}
			if l := leader(); l != want {
				t.Fatalf("leader %d after the check's interval, want %d", l, want)
			}
		})
	}
}

// TestHeartbeatWhileAnnouncingCounts: between becoming the Raft leader
// and applying its election record, a controller asks a heartbeat to be
// sent again, but its session has started, and the heartbeat counts.
func TestHeartbeatWhileAnnouncingCounts(t *testing.T) {
	m, epochs := openOnManualClock(t, 1, nil)
	m.c.active.Store(false) // as between LeaderCh and the election record
	defer m.c.active.Store(true)
	m.clock.Advance(time.Second)
	if _, err := m.c.heartbeatLocal(m.ctx, Heartbeat{BrokerID: 1, BrokerEpoch: epochs[1]}); !errors.Is(err, errRetry) {
		t.Fatalf("heartbeat while announcing: %v, want errRetry", err)
	}
	s, ok := m.c.live.get(1)
	if !ok || !s.heartbeated || !s.lastHeartbeat.Equal(m.clock.Now()) || s.beats != 1 {
		t.Fatalf("broker 1's session after a heartbeat while announcing: %+v", s)
	}
}
