package replica

import (
	"bytes"
	"context"
	"slices"
	"testing"
	"time"

	"github.com/mqproject/mq/lib/clock"
	"github.com/mqproject/mq/lib/record"
)

// TestRefusedPartitionsAreAskedAgainSoonThenLessOften: a leader that
// refuses a partition (it has not applied the image yet) is asked again
// within milliseconds, the delay doubling up to replica.fetch.backoff.ms;
// an accepted fetch starts the count again.
func TestRefusedPartitionsAreAskedAgainSoonThenLessOften(t *testing.T) {
	clk := clock.NewManual(time.Unix(1000, 0))
	f := NewFetcher(FetcherConfig{Leader: 2, Backoff: time.Second, Clock: clk}, nil)
	r := round{fp: &followed{refusedEpoch: -1}, pos: FetchPosition{Leader: 2, LeaderEpoch: 3}}
	var got []time.Duration
	for range 10 {
		f.refuse(r)
		got = append(got, r.fp.retryAt.Sub(clk.Now()))
	}
	ms := time.Millisecond
	want := []time.Duration{5 * ms, 10 * ms, 20 * ms, 40 * ms, 80 * ms, 160 * ms, 320 * ms, 640 * ms, time.Second, time.Second}
	if !slices.Equal(got, want) {
		t.Errorf("retry delays %v, want %v", got, want)
	}
	if r.fp.refusedEpoch != 3 {
		t.Errorf("refused at epoch %d, want 3", r.fp.refusedEpoch)
	}
	f.accepted(r)
	f.refuse(r)
	if d := r.fp.retryAt.Sub(clk.Now()); d != 5*ms {
		t.Errorf("after an accepted fetch the next refusal waits %v, want 5ms", d)
	}
}

// TestThrottledPartitionsWaitForTheQuota: with the follower side of the
// throttle used up, the throttled partitions are left out of the fetch
// and the others go on, their fetch held by the leader no longer than
// the quota takes to give again; when only throttled ones are left, the
// round waits until the quota gives again rather than spin.
func TestThrottledPartitionsWaitForTheQuota(t *testing.T) {
	clk := clock.NewManual(time.Unix(1000, 0))
	q := NewQuota(clk)
	f := NewFetcher(FetcherConfig{Leader: 2, Clock: clk, Quota: q}, nil)
	throttled := round{k: Key{Partition: 0}, pos: FetchPosition{Leader: 2, Throttled: true}}
	free := round{k: Key{Partition: 1}, pos: FetchPosition{Leader: 2}}
	throttle := func(rs []round) []round {
		kept, reserved := f.throttle(rs)
		q.Settle(reserved, 0)
		return kept
	}
	keys := func(rs []round) (out []int32) {
		for _, r := range rs {
			out = append(out, r.k.Partition)
		}
		return out
	}

	if got := keys(throttle([]round{throttled, free})); !slices.Equal(got, []int32{0, 1}) {
		t.Fatalf("unlimited: fetched %v, want both", got)
	}
	q.SetRate(1000) // starts empty
	if got := keys(throttle([]round{throttled, free})); !slices.Equal(got, []int32{1}) || !f.heldUntil.IsZero() {
		t.Fatalf("over quota: fetched %v (held until %v), want only the un-throttled one", got, f.heldUntil)
	}
	// The fetch of the others waits for the leader's news no longer than
	// the quota takes to give again.
	if f.heldFor != quotaQuantum {
		t.Fatalf("the others' fetch may wait %v, want %v", f.heldFor, quotaQuantum)
	}
	if got := throttle([]round{throttled}); len(got) != 0 || !f.heldUntil.Equal(clk.Now().Add(quotaQuantum)) {
		t.Fatalf("only throttled ones over quota: fetched %v, held until %v, want none until a quantum is earned", keys(got), f.heldUntil)
	}
	f.heldUntil = time.Time{}
	clk.Advance(quotaQuantum)
	if got := keys(throttle([]round{throttled})); !slices.Equal(got, []int32{0}) {
		t.Fatalf("with an allowance: fetched %v", got)
	}
	if c := q.Counts(); c.Holds != 2 {
		t.Fatalf("holds %d, want 2", c.Holds)
	}
}

// streamUpstream is a leader whose log never ends: a Fetch of a
// partition answers whole batches of batch from the fetch offset on, as
// many as fit in the query's MaxBytes (replica.fetch.max.bytes, 1 MiB,
// when 0), the first whole even when larger. during, when set, runs
// while the fetch is in flight.
type streamUpstream struct {
	t      *testing.T
	batch  []byte
	during func()
}

func (u *streamUpstream) Fetch(_ context.Context, qs []FetchQuery, _ time.Duration) ([]Fetched, error) {
	if u.during != nil {
		u.during()
	}
	out := make([]Fetched, 0, len(qs))
	for _, q := range qs {
		limit := int(q.MaxBytes)
		if limit <= 0 {
			limit = 1 << 20
		}
		var records []byte
		offset := q.FetchOffset
		for len(records) == 0 || len(records)+len(u.batch) <= limit {
			b := bytes.Clone(u.batch)
			record.SetBaseOffset(b, offset)
			record.SetPartitionLeaderEpoch(b, q.LeaderEpoch)
			records = append(records, b...)
			h, err := record.ParseHeader(b)
			if err != nil {
				u.t.Fatal(err)
			}
			offset = h.LastOffset() + 1
		}
		out = append(out, Fetched{Key: q.Key, Records: records, HighWatermark: q.FetchOffset, LogStartOffset: 0})
	}
	return out, nil
}

func (u *streamUpstream) EndOffsets(context.Context, []EpochQuery) ([]EpochEnd, error) {
	return nil, nil
}
func (u *streamUpstream) LogRanges(context.Context, []RangeQuery) ([]LogRange, error) {
	return nil, nil
}
func (u *streamUpstream) Refetch(context.Context, []RefetchQuery) ([]RefetchGrant, error) {
	return nil, nil
}

// throttledFollower returns a follower of partition n led by node 2, out
// of the ISR and named in follower.replication.throttled.replicas.
func throttledFollower(t *testing.T, n int32) *Partition {
	t.Helper()
	p, _ := newPartition(t, Config{Partition: n})
	if err := p.Become(PartitionState{Leader: 2, LeaderEpoch: 3, Replicas: []int32{1, 2}, ISR: []int32{2}}); err != nil {
		t.Fatal(err)
	}
	if err := p.TruncateFromLeader(3, -1, -1); err != nil {
		t.Fatal(err)
	}
	p.SetThrottled(false, true)
	if pos, _ := p.FetchPosition(); !pos.Throttled {
		t.Fatal("the follower is not throttled")
	}
	return p
}

// TestThrottledFollowerOwesAtMostOneBatch: a throttled follower asks its
// leader for no more than its quota allows, so the quota never owes more
// than one batch (the first comes whole), whatever replica.fetch.max.bytes
// is: with more, the follower would move nothing while it repaid, and the
// leader, seeing no demand, would take the throttle for idle. That holds
// for several throttled partitions in one fetch, and for two Fetchers
// (two leaders, or num.replica.fetchers) fetching at once on the node's
// one quota. The rate still holds.
func TestThrottledFollowerOwesAtMostOneBatch(t *testing.T) {
	recs := make([]record.Record, 8)
	for i := range recs {
		recs[i].Value = bytes.Repeat([]byte{'x'}, 2000)
	}
	batch, err := record.Build(record.BuildOptions{BaseTimestamp: 1_700_000_000_000}, recs)
	if err != nil {
		t.Fatal(err)
	}
	const rate = 1 << 20 // a quantum of 52 kB: three batches and a bit
	for _, tc := range []struct {
		name                 string
		partitions, fetchers int
	}{
		{"one partition", 1, 1},
		{"three partitions in a fetch", 3, 1},
		{"two fetchers at once", 1, 2},
	} {
		t.Run(tc.name, func(t *testing.T) {
			clk := clock.NewManual(time.Unix(1000, 0))
			q := NewQuota(clk)
			q.SetRate(rate)
			var fetchers []*Fetcher
			var ups []*streamUpstream
			for i := range tc.fetchers {
				up := &streamUpstream{t: t, batch: batch}
				f := NewFetcher(FetcherConfig{Leader: 2, Clock: clk, Quota: q}, up)
				var parts []*Partition
				for j := range tc.partitions {
					parts = append(parts, throttledFollower(t, int32(i*tc.partitions+j)))
				}
				f.Set(parts)
				fetchers, ups = append(fetchers, f), append(ups, up)
			}
			debt := func() float64 {
				q.mu.Lock()
				defer q.mu.Unlock()
				return -q.tokens
			}
			worst := 0.0
			check := func() {
				worst = max(worst, debt())
			}
			if tc.fetchers == 2 {
				// The second Fetcher runs a round while the first one's
				// fetch is in flight.
				ups[0].during = func() {
					if _, _, err := fetchers[1].round(context.Background()); err != nil {
						t.Error(err)
					}
					check()
				}
			}
			const secs = 10
			for end := clk.Now().Add(secs * time.Second); clk.Now().Before(end); {
				did, next, err := fetchers[0].round(context.Background())
				if err != nil {
					t.Fatal(err)
				}
				check()
				if !did && !next.IsZero() {
					clk.Set(next)
				} else {
					clk.Advance(10 * time.Millisecond)
				}
			}
			if limit := float64(len(batch)); worst > limit {
				t.Errorf("the quota owed %.0f bytes, want at most one batch (%d)", worst, len(batch))
			}
			moved := float64(q.Counts().Bytes)
			if want := float64(rate * secs); moved < want*0.9 || moved > want*1.05+float64(len(batch)) {
				t.Errorf("moved %.0f bytes in %d s at %d B/s, want about %.0f", moved, secs, rate, want)
			}
		})
	}
}
