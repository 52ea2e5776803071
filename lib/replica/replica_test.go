package replica

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/mqproject/mq/lib/clock"
	"github.com/mqproject/mq/lib/log"
	"github.com/mqproject/mq/lib/record"
)

const self = 1

func newPartition(t *testing.T, cfg Config) (*Partition, *clock.Manual) {
	t.Helper()
	l, err := log.Open(t.TempDir(), log.DefaultConfig(), log.Options{})
	if err != nil {
		t.Fatal(err)
	}
	c := clock.NewManual(time.Unix(1_700_000_000, 0))
	cfg.Topic, cfg.NodeID = "t", self
	if cfg.Clock == nil {
		cfg.Clock = c
	}
	p := New(cfg, l)
	t.Cleanup(func() { p.Close() })
	return p, c
}

// batch builds an uncompressed batch of n records.
func batch(t testing.TB, n int) []byte {
	t.Helper()
	recs := make([]record.Record, n)
	for i := range recs {
		recs[i].Value = []byte(fmt.Sprintf("value-%d", i))
	}
	b, err := record.Build(record.BuildOptions{BaseTimestamp: 1_700_000_000_000}, recs)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func mustBecome(t *testing.T, p *Partition, epoch, leader int32, replicas, isr []int32) {
	t.Helper()
	if err := p.Become(PartitionState{Leader: leader, LeaderEpoch: epoch, Replicas: replicas, ISR: isr}); err != nil {
		t.Fatalf("Become(%d, %d, %v, %v): %v", epoch, leader, replicas, isr, err)
	}
}

func TestSingleReplicaHighWatermarkFollowsEveryAppend(t *testing.T) {
	p, _ := newPartition(t, Config{})
	mustBecome(t, p, 0, self, []int32{self}, []int32{self})
	var next int64
	for i, n := range []int{1, 3, 7} {
		res, err := p.Append(batch(t, n), -1)
		if err != nil {
			t.Fatal(err)
		}
		if res.BaseOffset != next || res.LastOffset != next+int64(n)-1 {
			t.Fatalf("append %d: offsets %d..%d, want %d..%d", i, res.BaseOffset, res.LastOffset, next, next+int64(n)-1)
		}
		next += int64(n)
		if hw := p.HighWatermark(); hw != next {
			t.Fatalf("append %d: high-water mark %d, want %d", i, hw, next)
		}
		if err := p.WaitHighWatermark(context.Background(), res.LastOffset, res.LeaderEpoch); err != nil {
			t.Fatal(err)
		}
	}
}

func TestAppendChecksRoleAndMinInsyncReplicas(t *testing.T) {
	tests := []struct {
		name     string
		leader   int32
		replicas []int32
		isr      []int32
		minISR   int32
		acks     int16
		want     error
	}{
		{"leader alone acks=all", self, []int32{1}, []int32{1}, 1, -1, nil},
		{"follower refuses", 2, []int32{1, 2}, []int32{1, 2}, 1, 1, ErrNotLeader},
		{"no leader refuses", -1, []int32{1, 2}, nil, 1, 1, ErrNotLeader},
		{"isr below min acks=all", self, []int32{1, 2}, []int32{1}, 2, -1, ErrNotEnoughReplicas},
		{"isr below min acks=1 is fine", self, []int32{1, 2}, []int32{1}, 2, 1, nil},
		{"isr below min acks=0 is fine", self, []int32{1, 2}, []int32{1}, 2, 0, nil},
		{"isr at min acks=all", self, []int32{1, 2}, []int32{1, 2}, 2, -1, nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			p, _ := newPartition(t, Config{MinInsyncReplicas: tt.minISR})
			mustBecome(t, p, 0, tt.leader, tt.replicas, tt.isr)
			_, err := p.Append(batch(t, 1), tt.acks)
			if !errors.Is(err, tt.want) {
				t.Fatalf("Append: %v, want %v", err, tt.want)
			}
			if tt.want != nil && p.Log().EndOffset() != 0 {
				t.Fatalf("refused append wrote: log end %d", p.Log().EndOffset())
			}
		})
	}
}

func TestBecomeNeverGoesBackInEpoch(t *testing.T) {
	p, _ := newPartition(t, Config{})
	mustBecome(t, p, 5, self, []int32{1, 2}, []int32{1, 2})
	if err := p.Become(PartitionState{Leader: 2, LeaderEpoch: 4, Replicas: []int32{1, 2}, ISR: []int32{2}}); !errors.Is(err, ErrStaleLeaderEpoch) {
		t.Fatalf("Become with older epoch: %v, want ErrStaleLeaderEpoch", err)
	}
	if s := p.State(); s.LeaderEpoch != 5 || s.Role != Leader || !slices.Equal(s.ISR, []int32{1, 2}) {
		t.Fatalf("state changed by a stale Become: %+v", s)
	}
	// Same epoch: the controller changed the ISR only.
	mustBecome(t, p, 5, self, []int32{1, 2}, []int32{1})
	if s := p.State(); !slices.Equal(s.ISR, []int32{1}) {
		t.Fatalf("ISR %v after same-epoch Become, want [1]", s.ISR)
	}
	mustBecome(t, p, 6, 2, []int32{1, 2}, []int32{1, 2})
	if p.IsLeader() || p.LeaderEpoch() != 6 {
		t.Fatalf("after Become(6, 2): leader %v epoch %d", p.IsLeader(), p.LeaderEpoch())
	}
}

func TestCheckLeaderEpoch(t *testing.T) {
	p, _ := newPartition(t, Config{})
	mustBecome(t, p, 3, self, []int32{1}, []int32{1})
	for _, tt := range []struct {
		epoch int32
		want  error
	}{{-1, nil}, {3, nil}, {2, ErrFencedLeaderEpoch}, {4, ErrUnknownLeaderEpoch}} {
		if err := p.CheckLeaderEpoch(tt.epoch); !errors.Is(err, tt.want) {
			t.Errorf("CheckLeaderEpoch(%d) = %v, want %v", tt.epoch, err, tt.want)
		}
	}
}

func TestHighWatermarkIsSmallestISRLogEnd(t *testing.T) {
	p, _ := newPartition(t, Config{})
	mustBecome(t, p, 0, self, []int32{1, 2, 3}, []int32{1, 2, 3})
	for range 3 {
		if _, err := p.Append(batch(t, 2), -1); err != nil {
			t.Fatal(err)
		}
	}
	steps := []struct {
		replica int32
		offset  int64
		wantHW  int64
	}{
		{2, 4, 0}, // 3 has not fetched yet
		{3, 2, 2},
		{3, 6, 4},
		{2, 6, 6},
		{4, 100, 6}, // not a replica: ignored
	}
	for _, s := range steps {
		p.RecordFollowerFetch(s.replica, s.offset)
		if hw := p.HighWatermark(); hw != s.wantHW {
			t.Fatalf("after replica %d fetched at %d: high-water mark %d, want %d", s.replica, s.offset, hw, s.wantHW)
		}
	}
	// The ISR shrinks to {1, 2}: nothing changes, both are at 6. New appends
	// then need only replica 2.
	mustBecome(t, p, 0, self, []int32{1, 2, 3}, []int32{1, 2})
	res, err := p.Append(batch(t, 1), -1)
	if err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- p.WaitHighWatermark(context.Background(), res.LastOffset, res.LeaderEpoch) }()
	select {
	case err := <-done:
		t.Fatalf("acks=all wait returned %v before the follower fetched", err)
	case <-time.After(20 * time.Millisecond):
	}
	p.RecordFollowerFetch(2, res.LastOffset+1)
	if err := <-done; err != nil {
		t.Fatal(err)
	}
}

func TestWaitHighWatermarkEnds(t *testing.T) {
	tests := []struct {
		name   string
		action func(p *Partition)
		want   error
	}{
		{"deadline", func(p *Partition) {}, context.DeadlineExceeded},
		{"leadership lost", func(p *Partition) {
			p.Become(PartitionState{Leader: 2, LeaderEpoch: 1, Replicas: []int32{1, 2}, ISR: []int32{2}})
		}, ErrNotLeader},
		{"closed", func(p *Partition) { p.Close() }, ErrClosed},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			p, _ := newPartition(t, Config{})
			mustBecome(t, p, 0, self, []int32{1, 2}, []int32{1, 2})
			if _, err := p.Append(batch(t, 1), -1); err != nil {
				t.Fatal(err)
			}
			ctx, cancel := context.WithTimeout(context.Background(), 50*time.Millisecond)
			defer cancel()
			done := make(chan error, 1)
			go func() { done <- p.WaitHighWatermark(ctx, 0, 0) }()
			tt.action(p)
			if err := <-done; !errors.Is(err, tt.want) {
				t.Fatalf("WaitHighWatermark: %v, want %v", err, tt.want)
			}
		})
	}
}

func TestReplicaLagBookkeeping(t *testing.T) {
	p, clock := newPartition(t, Config{ReplicaLagTime: 10 * time.Second})
	mustBecome(t, p, 0, self, []int32{1, 2, 3}, []int32{1, 2})
	if _, err := p.Append(batch(t, 5), 1); err != nil {
		t.Fatal(err)
	}
	clock.Advance(5 * time.Second)
	p.RecordFollowerFetch(2, 5) // caught up
	p.RecordFollowerFetch(3, 0) // far behind, outside the ISR
	if c, ok := p.ProposeISR(nil); ok {
		t.Fatalf("proposed %+v, want nothing", c)
	}
	clock.Advance(11 * time.Second)
	c, ok := p.ProposeISR(nil)
	if !ok || !slices.Equal(c.ISR, []int32{1}) {
		t.Fatalf("after 11s without a fetch: proposed %+v %v, want ISR [1]", c, ok)
	}
	if _, ok := p.ProposeISR(nil); ok {
		t.Fatal("proposed again while a proposal is pending")
	}
	p.ISRProposalRefused(c)
	p.RecordFollowerFetch(2, 5)
	if c, ok := p.ProposeISR(nil); ok {
		t.Fatalf("after a caught-up fetch: proposed %+v, want nothing", c)
	}
	if hw := p.HighWatermark(); hw != 5 {
		t.Fatalf("high-water mark %d, want 5", hw)
	}
	p.RecordFollowerFetch(3, 5)
	if c, ok := p.ProposeISR(nil); !ok || !slices.Equal(c.ISR, []int32{1, 2, 3}) {
		t.Fatalf("proposed %+v %v, want ISR [1 2 3]", c, ok)
	}
	if got := p.FollowerOffset(3); got != 5 {
		t.Fatalf("FollowerOffset(3) = %d, want 5", got)
	}
	// A follower proposes nothing.
	mustBecome(t, p, 1, 2, []int32{1, 2, 3}, []int32{2})
	if c, ok := p.ProposeISR(nil); ok {
		t.Fatalf("follower proposed %+v", c)
	}
}

// TestInState: a replica is in the state it became, and not in one with
// another leader, leader epoch or partition epoch.
func TestInState(t *testing.T) {
	p, _ := newPartition(t, Config{})
	s := PartitionState{Leader: self, LeaderEpoch: 3, PartitionEpoch: 5, Replicas: []int32{1, 2}, ISR: []int32{1, 2}}
	if p.InState(s) {
		t.Fatal("a new replica is in a state it never became")
	}
	if err := p.Become(s); err != nil {
		t.Fatal(err)
	}
	if !p.InState(s) {
		t.Fatalf("not in the state it became: %+v", s)
	}
	for _, other := range []PartitionState{
		{Leader: 2, LeaderEpoch: 3, PartitionEpoch: 5},
		{Leader: self, LeaderEpoch: 4, PartitionEpoch: 5},
		{Leader: self, LeaderEpoch: 3, PartitionEpoch: 6},
	} {
		if p.InState(other) {
			t.Errorf("in state %+v after becoming %+v", other, s)
		}
	}
}

// TestProposeISRAddsOnlyEligibleFollowers checks that a caught-up
// follower whose broker may not join an ISR (fenced, shutting down) is
// not proposed, while an unresolved one still is: its refusal settles it.
func TestProposeISRAddsOnlyEligibleFollowers(t *testing.T) {
	p, _ := newPartition(t, Config{ReplicaLagTime: 10 * time.Second})
	mustBecome(t, p, 0, self, []int32{1, 2, 3}, []int32{1})
	if _, err := p.Append(batch(t, 5), 1); err != nil {
		t.Fatal(err)
	}
	p.RecordFollowerFetch(2, 5)
	p.RecordFollowerFetch(3, 5)
	not3 := func(r int32) bool { return r != 3 }
	c, ok := p.ProposeISR(not3)
	if !ok || !slices.Equal(c.ISR, []int32{1, 2}) {
		t.Fatalf("proposed %+v %v, want ISR [1 2]: broker 3 may not join", c, ok)
	}
	// Unresolved, 2 is proposed again even when its broker may not join.
	p.ISRProposalUnresolved(c)
	none := func(int32) bool { return false }
	if c, ok := p.ProposeISR(none); !ok || !slices.Equal(c.ISR, []int32{1, 2}) {
		t.Fatalf("with 2 unresolved: proposed %+v %v, want ISR [1 2]", c, ok)
	}
}

// TestGrantRefetchOnlyOutsideTheISR: a leader lets a follower with a
// damaged log cut it only when the follower is in none of its ISRs
// (committed, being added, unresolved); refused, the follower leaves the
// ISR at the next proposal however caught up it looks, and once granted
// it stays out until a fetch at or below the cut shows that it cut. A
// chaos row lost acknowledged records when a follower cut its log just
// after its leader had added it to the ISR, its own image not showing it
// yet, and was then elected.
func TestGrantRefetchOnlyOutsideTheISR(t *testing.T) {
	p, _ := newPartition(t, Config{ReplicaLagTime: 10 * time.Second})
	mustBecome(t, p, 0, self, []int32{1, 2, 3}, []int32{1, 2})
	if _, err := p.Append(batch(t, 5), 1); err != nil {
		t.Fatal(err)
	}
	p.RecordFollowerFetch(2, 5)
	p.RecordFollowerFetch(3, 5)
	grant := func(r int32, at int64, want bool, why string) {
		t.Helper()
		if ok, err := p.GrantRefetch(r, 0, at); err != nil || ok != want {
			t.Fatalf("%s: GrantRefetch(%d) = %v, %v; want %v", why, r, ok, err, want)
		}
	}
	propose := func(want []int32, why string) ISRChange {
		t.Helper()
		c, ok := p.ProposeISR(nil)
		if !ok || !slices.Equal(c.ISR, want) {
			t.Fatalf("%s: proposed %+v %v, want ISR %v", why, c, ok, want)
		}
		return c
	}
	grant(2, 2, false, "2 in the committed ISR")
	c := propose([]int32{1, 3}, "2 refused leaves though caught up; 3 joins")
	grant(3, 3, false, "3 being added")
	p.ISRProposalUnresolved(c)
	grant(3, 3, false, "3 unresolved")
	if err := p.Become(PartitionState{Leader: self, PartitionEpoch: 1, Replicas: []int32{1, 2, 3}, ISR: []int32{1, 3}}); err != nil {
		t.Fatal(err)
	}
	grant(2, 2, true, "2 out of every ISR")
	propose([]int32{1}, "3 refused leaves; 2 granted does not join")
	if err := p.Become(PartitionState{Leader: self, PartitionEpoch: 2, Replicas: []int32{1, 2, 3}, ISR: []int32{1}}); err != nil {
		t.Fatal(err)
	}
	p.RecordFollowerFetch(2, 5) // caught up by the look of it, but not cut yet
	if c, ok := p.ProposeISR(nil); ok {
		t.Fatalf("2 granted and not cut: proposed %+v, want nothing", c)
	}
	p.RecordFollowerFetch(2, 2) // cut
	p.RecordFollowerFetch(2, 5) // and caught up again
	propose([]int32{1, 2}, "2 cut and caught up rejoins")

	if _, err := p.GrantRefetch(2, 1, 2); !errors.Is(err, ErrUnknownLeaderEpoch) {
		t.Fatalf("newer epoch: %v, want ErrUnknownLeaderEpoch", err)
	}
	if _, err := p.GrantRefetch(9, 0, 2); !errors.Is(err, ErrNotLeader) {
		t.Fatalf("not a replica: %v, want ErrNotLeader", err)
	}
	mustBecome(t, p, 1, 2, []int32{1, 2, 3}, []int32{1, 2})
	if _, err := p.GrantRefetch(3, 1, 2); !errors.Is(err, ErrNotLeader) {
		t.Fatalf("on a follower: %v, want ErrNotLeader", err)
	}
}

func TestReadStopsConsumersAtHighWatermark(t *testing.T) {
	p, _ := newPartition(t, Config{})
	mustBecome(t, p, 0, self, []int32{1, 2}, []int32{1, 2})
	for range 2 {
		if _, err := p.Append(batch(t, 2), 1); err != nil {
			t.Fatal(err)
		}
	}
	p.RecordFollowerFetch(2, 2) // HW 2, log end 4
	tests := []struct {
		name      string
		offset    int64
		replicaID int32
		wantLen   bool
		wantErr   error
	}{
		{"consumer below HW", 0, -1, true, nil},
		{"consumer at HW", 2, -1, false, nil},
		{"consumer between HW and log end", 3, -1, false, nil},
		{"consumer past log end", 5, -1, false, log.ErrOffsetOutOfRange},
		{"follower above HW", 2, 2, true, nil},
		{"follower at log end", 4, 2, false, nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r, info, err := p.Read(tt.offset, 1<<20, tt.replicaID)
			if !errors.Is(err, tt.wantErr) {
				t.Fatalf("Read: %v, want %v", err, tt.wantErr)
			}
			defer r.Release()
			if (r.Len > 0) != tt.wantLen {
				t.Fatalf("Read(%d) region %+v, want data %v", tt.offset, r, tt.wantLen)
			}
			if tt.replicaID < 0 && r.Len > 0 && r.LastOffset >= info.HighWatermark {
				t.Fatalf("consumer read up to %d, high-water mark %d", r.LastOffset, info.HighWatermark)
			}
		})
	}
	if _, _, err := p.Read(0, 100, -1); err != nil {
		t.Fatal(err)
	}
	mustBecome(t, p, 1, 2, []int32{1, 2}, []int32{2})
	if _, _, err := p.Read(0, 100, -1); !errors.Is(err, ErrNotLeader) {
		t.Fatalf("Read on a follower: %v, want ErrNotLeader", err)
	}
}

func TestDeleteRecordsBeforeStopsAtHighWatermark(t *testing.T) {
	p, _ := newPartition(t, Config{})
	mustBecome(t, p, 0, self, []int32{1}, []int32{1})
	for range 3 {
		if _, err := p.Append(batch(t, 2), 1); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := p.DeleteRecordsBefore(7); !errors.Is(err, log.ErrOffsetOutOfRange) {
		t.Fatalf("DeleteRecordsBefore past HW: %v, want ErrOffsetOutOfRange", err)
	}
	start, err := p.DeleteRecordsBefore(3)
	if err != nil || start != 3 {
		t.Fatalf("DeleteRecordsBefore(3) = %d, %v; want 3", start, err)
	}
	if _, _, err := p.Read(2, 100, -1); !errors.Is(err, log.ErrOffsetOutOfRange) {
		t.Fatalf("Read below log start: %v, want ErrOffsetOutOfRange", err)
	}
	if start, err := p.DeleteRecordsBefore(1); err != nil || start != 3 {
		t.Fatalf("DeleteRecordsBefore below start = %d, %v; want 3, nil", start, err)
	}
}

// TestConcurrentAppendersAndWaiters runs many acks=all appenders, readers
// long-polling on Changed, and ISR changes at once (run with -race).
func TestConcurrentAppendersAndWaiters(t *testing.T) {
	p, _ := newPartition(t, Config{})
	mustBecome(t, p, 0, self, []int32{1}, []int32{1})
	const appenders, perAppender, recordsPerBatch = 8, 15, 3
	const total = appenders * perAppender * recordsPerBatch
	var wg sync.WaitGroup
	var seen sync.Map
	var dup atomic.Int64
	for a := range appenders {
		wg.Go(func() {
			for i := range perAppender {
				res, err := p.Append(batch(t, recordsPerBatch), -1)
				if err != nil {
					t.Errorf("appender %d batch %d: %v", a, i, err)
					return
				}
				if _, loaded := seen.LoadOrStore(res.BaseOffset, true); loaded {
					dup.Add(1)
				}
				ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
				err = p.WaitHighWatermark(ctx, res.LastOffset, res.LeaderEpoch)
				cancel()
				if err != nil {
					t.Errorf("wait for %d: %v", res.LastOffset, err)
					return
				}
			}
		})
	}
	// Readers follow the high-water mark by waiting on Changed, the way a
	// fetch long-poll does, until they have seen everything.
	for range 4 {
		wg.Go(func() {
			var offset int64
			deadline := time.After(10 * time.Second)
			for offset < total {
				ch := p.Changed()
				r, _, err := p.Read(offset, 1<<20, -1)
				if err != nil {
					t.Errorf("read at %d: %v", offset, err)
					return
				}
				if r.Len > 0 {
					offset = r.LastOffset + 1
					r.Release()
					continue
				}
				select {
				case <-ch:
				case <-deadline:
					t.Errorf("reader stuck at %d of %d", offset, total)
					return
				}
			}
		})
	}
	// Same-epoch ISR updates race with the appends.
	wg.Go(func() {
		for range 50 {
			if err := p.Become(PartitionState{Leader: self, Replicas: []int32{1}, ISR: []int32{1}}); err != nil {
				t.Error(err)
				return
			}
		}
	})
	wg.Wait()
	if dup.Load() != 0 {
		t.Fatalf("%d base offsets handed out twice", dup.Load())
	}
	if hw := p.HighWatermark(); hw != total {
		t.Fatalf("high-water mark %d, want %d", hw, total)
	}
}

func TestCloseWakesChangedWaiters(t *testing.T) {
	p, _ := newPartition(t, Config{})
	mustBecome(t, p, 0, self, []int32{1}, []int32{1})
	ch := p.Changed()
	p.Close()
	select {
	case <-ch:
	case <-time.After(5 * time.Second):
		t.Fatal("Changed channel not closed by Close")
	}
	select {
	case <-p.Changed():
	default:
		t.Fatal("Changed after Close returns an open channel")
	}
	if _, err := p.Append(batch(t, 1), 1); err == nil {
		t.Fatal("Append after Close succeeded")
	}
}

// A follower's fetch made in another leader epoch than the leader's is
// refused by the read itself (fenced or unknown epoch), and its fetch
// position is not recorded: the follower's records at that offset may be
// another leadership's.
func TestReadInEpochChecksTheEpochItRecordsIn(t *testing.T) {
	p, _ := newPartition(t, Config{})
	mustBecome(t, p, 3, self, []int32{1, 2}, []int32{1, 2})
	if _, err := p.Append(batch(t, 4), -1); err != nil {
		t.Fatal(err)
	}
	for epoch, want := range map[int32]error{2: ErrFencedLeaderEpoch, 4: ErrUnknownLeaderEpoch} {
		if _, _, err := p.ReadInEpoch(4, 1<<20, 2, epoch); !errors.Is(err, want) {
			t.Errorf("follower fetch in epoch %d: %v, want %v", epoch, err, want)
		}
		if got := p.FollowerOffset(2); got != -1 {
			t.Fatalf("follower fetch in epoch %d recorded offset %d", epoch, got)
		}
	}
	if _, _, err := p.ReadInEpoch(4, 1<<20, 2, 3); err != nil {
		t.Fatal(err)
	}
	if got, hw := p.FollowerOffset(2), p.HighWatermark(); got != 4 || hw != 4 {
		t.Fatalf("follower fetch in epoch 3: recorded %d, high-water mark %d; want 4 and 4", got, hw)
	}
}

// TestThrottleOnlyOutOfISR: KIP-73 throttles only replicas out of the
// ISR. On the leader a follower being added (pending, unresolved) is no
// longer throttled, so acks=all never waits for a throttled follower; a
// throttled follower over quota reads nothing and still has its fetch
// recorded.
func TestThrottleOnlyOutOfISR(t *testing.T) {
	p, _ := newPartition(t, Config{ReplicaLagTime: 10 * time.Second})
	mustBecome(t, p, 0, self, []int32{1, 2, 3}, []int32{1, 2})
	if _, err := p.Append(batch(t, 5), 1); err != nil {
		t.Fatal(err)
	}
	if p.LeaderThrottled(3) {
		t.Fatal("throttled with no throttle set")
	}
	p.SetThrottled(true, false)
	if !p.LeaderThrottled(3) || p.LeaderThrottled(2) {
		t.Fatalf("leader side: 3 (out of the ISR) throttled %v, 2 (in it) %v", p.LeaderThrottled(3), p.LeaderThrottled(2))
	}
	r, _, err := p.ReadInEpoch(0, 0, 3, 0)
	if err != nil || r.Len != 0 {
		t.Fatalf("a follower's read of 0 bytes: %d bytes, %v", r.Len, err)
	}
	if got := p.FollowerOffset(3); got != 0 {
		t.Fatalf("the throttled follower's fetch was not recorded: offset %d", got)
	}
	p.RecordFollowerFetch(3, 5)
	c, ok := p.ProposeISR(func(int32) bool { return true })
	if !ok || !slices.Contains(c.ISR, 3) {
		t.Fatalf("proposed %+v %v, want 3 added", c, ok)
	}
	if p.LeaderThrottled(3) {
		t.Fatal("a follower being added to the ISR is still throttled")
	}

	f, _ := newPartition(t, Config{})
	f.SetThrottled(false, true)
	mustBecome(t, f, 0, 2, []int32{1, 2}, []int32{2})
	if pos, _ := f.FetchPosition(); !pos.Throttled {
		t.Fatal("follower out of the ISR not throttled")
	}
	mustBecome(t, f, 0, 2, []int32{1, 2}, []int32{1, 2})
	if pos, _ := f.FetchPosition(); pos.Throttled {
		t.Fatal("follower in the ISR throttled")
	}
}

// A change that arrives after the partition closed (a follower's append
// under way when a reassignment removed the replica, a fetch recorded as
// a leader is closed) has nobody left to wake: it must not close the
// closed channel again. It did, and a broker panicked in the rebalance
// chaos row.
func TestChangesAfterCloseDoNotPanic(t *testing.T) {
	p, _ := newPartition(t, Config{})
	mustBecome(t, p, 0, self, []int32{self}, []int32{self})
	changed := p.Changed()
	if !p.markClosed() {
		t.Fatal("markClosed of an open partition")
	}
	select {
	case <-changed:
	default:
		t.Fatal("closing did not wake a waiter")
	}
	p.mu.Lock()
	p.notifyLocked()
	p.notifyLocked()
	p.mu.Unlock()
	select {
	case <-p.Changed():
	default:
		t.Fatal("a closed partition's Changed blocks")
	}
}

// A fetch naming a replica id that is not a follower (an unknown broker,
// a broker outside the replica set, the leader itself) reads nothing past
// the high-water mark and never moves it or the ISR: a client posing as
// a follower gets NOT_LEADER_OR_FOLLOWER and no records.
func TestReadByNonReplicaIsRefusedAndMovesNothing(t *testing.T) {
	p, _ := newPartition(t, Config{ReplicaLagTime: 10 * time.Second})
	mustBecome(t, p, 0, self, []int32{self, 2, 3}, []int32{self, 2, 3})
	if _, err := p.Append(batch(t, 5), 1); err != nil {
		t.Fatal(err)
	}
	for _, id := range []int32{999, 4, self} {
		r, _, err := p.Read(0, 1<<20, id)
		if !errors.Is(err, ErrNotReplica) || !errors.Is(err, ErrNotLeader) || r.Len != 0 {
			t.Fatalf("Read as replica %d: %d bytes, %v; want ErrNotReplica and nothing", id, r.Len, err)
		}
		if _, err := p.GrantRefetch(id, 0, 0); !errors.Is(err, ErrNotReplica) {
			t.Fatalf("GrantRefetch(%d): %v, want ErrNotReplica", id, err)
		}
	}
	if hw := p.HighWatermark(); hw != 0 {
		t.Fatalf("high-water mark %d after fetches by non-replicas, want 0", hw)
	}
	if c, ok := p.ProposeISR(nil); ok {
		t.Fatalf("proposed %+v after fetches by non-replicas, want nothing", c)
	}
	// The real followers still read past the mark and move it.
	for _, id := range []int32{2, 3} {
		if r, _, err := p.Read(0, 1<<20, id); err != nil || r.Len == 0 {
			t.Fatalf("Read as follower %d: %d bytes, %v", id, r.Len, err)
		}
		if _, _, err := p.Read(5, 1<<20, id); err != nil {
			t.Fatal(err)
		}
	}
	if hw := p.HighWatermark(); hw != 5 {
		t.Fatalf("high-water mark %d after the followers fetched, want 5", hw)
	}
}

func TestReadCommittedStopsAtTheLastStableOffset(t *testing.T) {
	p, _ := newPartition(t, Config{})
	mustBecome(t, p, 0, self, []int32{1, 2}, []int32{1, 2})
	txn, err := record.Build(record.BuildOptions{BaseTimestamp: 1_700_000_000_000, Idempotent: true, Transactional: true, ProducerID: 3},
		[]record.Record{{Value: []byte("in a transaction")}})
	if err != nil {
		t.Fatal(err)
	}
	for _, b := range [][]byte{batch(t, 2), txn, batch(t, 2)} { // offsets 0-1, 2, 3-4
		if _, err := p.Append(b, 1); err != nil {
			t.Fatal(err)
		}
	}
	p.RecordFollowerFetch(2, 4) // HW 4
	r, info, err := p.ReadCommitted(0, 1<<20, -1, false)
	if err != nil {
		t.Fatal(err)
	}
	defer r.Release()
	if info.HighWatermark != 4 || info.LastStableOffset != 2 || r.LastOffset != 1 {
		t.Fatalf("read_committed: region to %d, info %+v; want up to 1 with LSO 2", r.LastOffset, info)
	}
	// Records deleted past the open transaction's start: the LSO is the
	// log start, not an offset no read may ask for.
	if _, err := p.DeleteRecordsBefore(3); err != nil {
		t.Fatal(err)
	}
	if info := p.Offsets(); info.LastStableOffset != 3 {
		t.Fatalf("after deleting records before 3: %+v, want the LSO at the log start", info)
	}
	if _, err := p.Append(record.BuildMarker(record.Marker{ProducerID: 3, Commit: true}, 0), 1); err != nil {
		t.Fatal(err)
	}
	if info := p.Offsets(); info.LastStableOffset != 4 {
		t.Fatalf("after the commit: %+v, want the LSO at the high-water mark", info)
	}
	p.RecordFollowerFetch(2, 6)
	if info := p.Offsets(); info.LastStableOffset != 6 || info.HighWatermark != 6 {
		t.Fatalf("with the marker replicated: %+v", info)
	}
}
