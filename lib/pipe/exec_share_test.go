package pipe

import (
	"context"
	"errors"
	"sync"
	"testing"

	"github.com/twmb/franz-go/pkg/kgo"
)

// fakeShare stands in for the share consumer: polls hand out the
// batches given, acknowledgements are recorded.
type fakeShare struct {
	mu      sync.Mutex
	batches [][]*kgo.Record
	acks    map[int64]kgo.AckStatus
	dead    []*kgo.Record
	deadErr error
	unacked func() int // delivered and not acknowledged
	atPoll  []int      // unacked() at each poll
}

func newFakeShare(batches ...[]*kgo.Record) (*fakeShare, *shareSource) {
	f := &fakeShare{batches: batches, acks: map[int64]kgo.AckStatus{}}
	s := &shareSource{group: "g", dlq: "dead", max: 2, changed: make(chan struct{})}
	f.unacked = func() int { s.mu.Lock(); defer s.mu.Unlock(); return s.out }
	s.pollRecords = func(ctx context.Context, n int) kgo.Fetches {
		f.mu.Lock()
		defer f.mu.Unlock()
		f.atPoll = append(f.atPoll, f.unacked())
		if len(f.batches) == 0 {
			return kgo.NewErrFetch(context.Canceled)
		}
		b := f.batches[0]
		f.batches = f.batches[1:]
		return kgo.Fetches{{Topics: []kgo.FetchTopic{{Topic: "t", Partitions: []kgo.FetchPartition{{Partition: 0, Records: b}}}}}}
	}
	s.ackRecord = func(r *kgo.Record, st kgo.AckStatus) {
		f.mu.Lock()
		defer f.mu.Unlock()
		f.acks[r.Offset] = st
	}
	s.produceSync = func(_ context.Context, r *kgo.Record) error {
		f.mu.Lock()
		defer f.mu.Unlock()
		if f.deadErr != nil {
			return f.deadErr
		}
		f.dead = append(f.dead, r)
		return nil
	}
	return f, s
}

func records(offsets ...int64) []*kgo.Record {
	var rs []*kgo.Record
	for _, o := range offsets {
		rs = append(rs, &kgo.Record{Topic: "t", Offset: o, Value: []byte("v")})
	}
	return rs
}

func TestShareSourcePollsOnlyWhenTheLastPollWasAcknowledged(t *testing.T) {
	f, s := newFakeShare(records(0, 1), records(2))
	ctx := context.Background()
	m0, err := s.Next(ctx)
	if err != nil {
		t.Fatal(err)
	}
	m1, err := s.Next(ctx)
	if err != nil {
		t.Fatal(err)
	}
	// With records out, Next may not poll: asked with a done context it
	// returns without a message (and a poll would show in atPoll).
	done, cancel := context.WithCancel(ctx)
	cancel()
	if m, err := s.Next(done); err == nil {
		t.Fatalf("offset %d delivered while offsets 0 and 1 were not acknowledged", m.Offset)
	}
	if err := s.Accept(m0); err != nil {
		t.Fatal(err)
	}
	if m, err := s.Next(done); err == nil {
		t.Fatalf("offset %d delivered while offset 1 was not acknowledged", m.Offset)
	}
	if err := s.Release(m1); err != nil {
		t.Fatal(err)
	}
	m2, err := s.Next(ctx)
	if err != nil || m2.Offset != 2 {
		t.Fatalf("got offset %d; want 2", m2.Offset)
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	for i, n := range f.atPoll {
		if n != 0 {
			t.Errorf("poll %d came with %d records unacknowledged (kgo would accept them)", i+1, n)
		}
	}
	if f.acks[0] != kgo.AckAccept || f.acks[1] != kgo.AckRelease {
		t.Errorf("acks %v; want 0 accepted, 1 released", f.acks)
	}
}

func TestShareSourceKeepsRecordsPolledWithADoneContext(t *testing.T) {
	_, s := newFakeShare(records(5))
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	m, err := s.Next(ctx)
	if err != nil || m.Offset != 5 {
		t.Fatalf("Next with a done context: %v, %v; want offset 5 (a later poll would accept it unrun)", m, err)
	}
}

func TestShareSourceFailDeadLettersThenAccepts(t *testing.T) {
	f, s := newFakeShare(records(0, 1))
	ctx := context.Background()
	m0, _ := s.Next(ctx)
	m1, _ := s.Next(ctx)
	m0.DeliveryCount = 5
	if err := s.Fail(m0, "exit status 1"); err != nil {
		t.Fatal(err)
	}
	f.mu.Lock()
	f.deadErr = errors.New("broker down")
	f.mu.Unlock()
	if err := s.Fail(m1, "exit status 1"); err == nil {
		t.Fatal("a dead letter that could not be written: want an error")
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	if len(f.dead) != 1 || f.acks[0] != kgo.AckAccept {
		t.Errorf("dead %d, ack of 0 %v; want one dead letter, then accepted", len(f.dead), f.acks[0])
	}
	if f.acks[1] != kgo.AckRelease {
		t.Errorf("ack of 1 %v; want released (delivered again) when its dead letter failed", f.acks[1])
	}
}

func TestShareSourceRejectsWithoutADeadLetterTopic(t *testing.T) {
	f, s := newFakeShare(records(0))
	s.dlq = ""
	m, _ := s.Next(context.Background())
	if err := s.Fail(m, "exit status 1"); err != nil {
		t.Fatal(err)
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.acks[0] != kgo.AckReject || len(f.dead) != 0 {
		t.Errorf("ack %v, %d dead letters; want rejected, none", f.acks[0], len(f.dead))
	}
}
