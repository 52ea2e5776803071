package broker

import (
	"slices"
	"testing"
	"time"

	"github.com/mqproject/mq/lib/clock"
	"github.com/mqproject/mq/lib/config"
	"github.com/mqproject/mq/lib/replica"
)

// TestRefusedPartitionsAreAskedAgainSoonThenLessOften: a leader that
// refuses a partition (it has not applied the image yet) is asked again
// within milliseconds, the delay doubling up to replica.fetch.backoff.ms;
// an accepted fetch starts the count again.
func TestRefusedPartitionsAreAskedAgainSoonThenLessOften(t *testing.T) {
	clk := clock.NewManual(time.Unix(1000, 0))
	b := &Broker{cfg: Config{Settings: config.Broker{ReplicaFetchBackoff: time.Second}}, clock: clk}
	f := newFetcher(b, fetcherKey{leader: 2}, "127.0.0.1:1")
	r := round{fp: &followed{refusedEpoch: -1}, pos: replica.FetchPosition{Leader: 2, LeaderEpoch: 3}}
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
