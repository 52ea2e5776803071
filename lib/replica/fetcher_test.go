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
