package replica

import (
	"slices"
	"testing"
	"time"

	"github.com/mqproject/mq/lib/clock"
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
	keys := func(rs []round) (out []int32) {
		for _, r := range rs {
			out = append(out, r.k.Partition)
		}
		return out
	}

	if got := keys(f.throttle([]round{throttled, free})); !slices.Equal(got, []int32{0, 1}) {
		t.Fatalf("unlimited: fetched %v, want both", got)
	}
	q.SetRate(1000) // starts empty
	if got := keys(f.throttle([]round{throttled, free})); !slices.Equal(got, []int32{1}) || !f.heldUntil.IsZero() {
		t.Fatalf("over quota: fetched %v (held until %v), want only the un-throttled one", got, f.heldUntil)
	}
	// The fetch of the others waits for the leader's news no longer than
	// the quota takes to give again.
	if f.heldFor != quotaQuantum {
		t.Fatalf("the others' fetch may wait %v, want %v", f.heldFor, quotaQuantum)
	}
	if got := f.throttle([]round{throttled}); len(got) != 0 || !f.heldUntil.Equal(clk.Now().Add(quotaQuantum)) {
		t.Fatalf("only throttled ones over quota: fetched %v, held until %v, want none until a quantum is earned", keys(got), f.heldUntil)
	}
	f.heldUntil = time.Time{}
	clk.Advance(quotaQuantum)
	if got := keys(f.throttle([]round{throttled})); !slices.Equal(got, []int32{0}) {
		t.Fatalf("with an allowance: fetched %v", got)
	}
	if c := q.Counts(); c.Holds != 2 {
		t.Fatalf("holds %d, want 2", c.Holds)
	}
}
