package queue

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/mqproject/mq/lib/clock"
	"github.com/mqproject/mq/lib/record"
)

// memStore is a Store of one partition in memory. While hold is off a
// write is durable at once; while it is on, each write's Pending waits
// until the test sends its outcome on the heldWrite's done (nil:
// durable, an error: failed), and written gets a send per write.
type memStore struct {
	mu      sync.Mutex
	batches [][]byte
	hold    bool
	held    []*heldWrite
	written chan struct{} // a send per write while held
}

type heldWrite struct {
	done chan error
}

func (w *heldWrite) Wait(ctx context.Context) error {
	select {
	case err := <-w.done:
		return err
	case <-ctx.Done():
		return ctx.Err()
	}
}

type durable struct{}

func (durable) Wait(context.Context) error { return nil }

func (s *memStore) PartitionCount(context.Context) (int32, error) { return 1, nil }

func (s *memStore) Write(_ context.Context, _ int32, batch []byte) (Pending, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if !s.hold {
		s.batches = append(s.batches, append([]byte(nil), batch...))
		return durable{}, nil
	}
	w := &heldWrite{done: make(chan error, 1)}
	s.held = append(s.held, w)
	s.written <- struct{}{}
	// A failed write may or may not be durable; keeping it out is one of
	// the two outcomes, and the one that shows a reload.
	return &storedOnSuccess{s: s, batch: append([]byte(nil), batch...), w: w}, nil
}

// storedOnSuccess stores its batch when its held write succeeds.
type storedOnSuccess struct {
	s     *memStore
	batch []byte
	w     *heldWrite
	once  sync.Once
	err   error
}

func (p *storedOnSuccess) Wait(ctx context.Context) error {
	p.once.Do(func() {
		p.err = p.w.Wait(ctx)
		if p.err == nil {
			p.s.mu.Lock()
			p.s.batches = append(p.s.batches, p.batch)
			p.s.mu.Unlock()
		}
	})
	return p.err
}

func (s *memStore) Read(_ context.Context, _ int32, fn func(key, value []byte) error) error {
	s.mu.Lock()
	batches := append([][]byte(nil), s.batches...)
	s.mu.Unlock()
	for _, b := range batches {
		if err := record.Iterate(b, 0, func(r *record.Record) error { return fn(r.Key, r.Value) }); err != nil {
			return err
		}
	}
	return nil
}

// memSource is a topic partition of n records, one per batch, all below
// the high-water mark.
type memSource struct {
	batches [][]byte
}

func newMemSource(t *testing.T, n int) *memSource {
	t.Helper()
	s := &memSource{}
	for i := range n {
		b, err := record.Build(record.BuildOptions{BaseOffset: int64(i), BaseTimestamp: 1}, []record.Record{{Value: []byte(fmt.Sprint(i))}})
		if err != nil {
			t.Fatal(err)
		}
		s.batches = append(s.batches, b)
	}
	return s
}

func (s *memSource) String() string           { return "t-0" }
func (s *memSource) LeaderEpoch() int32       { return 1 }
func (s *memSource) Offsets() (int64, int64)  { return 0, int64(len(s.batches)) }
func (s *memSource) Changed() <-chan struct{} { return make(chan struct{}) }
func (s *memSource) ReadBatches(offset int64, maxBytes int) ([]byte, int64, error) {
	var out []byte
	next := offset
	for next < int64(len(s.batches)) && (len(out) == 0 || len(out)+len(s.batches[next]) <= maxBytes) {
		out = append(out, s.batches[next]...)
		next++
	}
	return out, next, nil
}

var testTP = TP{TopicID: [16]byte{1}, Partition: 0}

func newTestLeader(store Store, src Source) *Leader {
	return NewLeader(LeaderConfig{
		Store:   store,
		Resolve: func(TP) (Source, error) { return src, nil },
		Clock:   clock.NewManual(time.Unix(1_700_000_000, 0)),
	})
}

func fetchOf(member string, epoch int32) FetchRequest {
	return FetchRequest{Group: "g", Member: member, SessionEpoch: epoch, Partitions: []TP{testTP},
		MaxRecords: 10, Settings: Settings{Queue: DefaultConfig(), Earliest: true}}
}

// TestFailedStateWriteWithholdsTheRecords: records acquired by a fetch
// whose state write does not become durable are not handed out, and the
// next fetch starts from the durable state: the same records, delivered
// for the first time.
func TestFailedStateWriteWithholdsTheRecords(t *testing.T) {
	store := &memStore{written: make(chan struct{}, 16)}
	l := newTestLeader(store, newMemSource(t, 3))
	ctx := context.Background()
	// The first fetch loads the share-partition and writes its start
	// (durable), then the acquisition, which fails.
	store.mu.Lock()
	store.hold = true
	store.mu.Unlock()
	done := make(chan []Result, 1)
	go func() {
		res, err := l.Fetch(ctx, fetchOf("m", 0))
		if err != nil {
			t.Error(err)
		}
		done <- res
	}()
	for i := range 3 { // the index, the start, the acquisition
		<-store.written
		store.mu.Lock()
		w := store.held[i]
		store.mu.Unlock()
		if i < 2 {
			w.done <- nil
		} else {
			w.done <- errors.New("not durable")
		}
	}
	res := <-done
	if len(res) != 1 || res[0].Err == nil || len(res[0].Leases) != 0 || len(res[0].Records) != 0 {
		t.Fatalf("fetch with a failed state write: %+v, want an error and no records", res)
	}
	store.mu.Lock()
	store.hold = false
	store.mu.Unlock()
	res, err := l.Fetch(ctx, fetchOf("m", 1))
	if err != nil {
		t.Fatal(err)
	}
	if len(res) != 1 || res[0].Err != nil || len(res[0].Leases) != 1 {
		t.Fatalf("next fetch: %+v, want one lease", res)
	}
	if l := res[0].Leases[0]; l.First != 0 || l.Last != 2 || l.Deliveries != 1 {
		t.Fatalf("next fetch leased %+v, want offsets 0-2 on their first delivery", l)
	}
}

// TestStateWritesAreWaitedForWithoutTheLock: while one member's fetch
// waits for its state write to become durable, another member's request
// on the same share-partition goes on: the share-partition's mutex is
// held while the state is written, not while the write becomes durable.
func TestStateWritesAreWaitedForWithoutTheLock(t *testing.T) {
	store := &memStore{written: make(chan struct{}, 16)}
	l := newTestLeader(store, newMemSource(t, 3))
	ctx := context.Background()
	// Load the share-partition (durable at once).
	if _, err := l.Fetch(ctx, FetchRequest{Group: "g", Member: "a", SessionEpoch: 0, Partitions: []TP{testTP},
		MaxRecords: 1, Settings: Settings{Queue: DefaultConfig(), Earliest: true}}); err != nil {
		t.Fatal(err)
	}
	store.mu.Lock()
	store.hold = true
	store.mu.Unlock()
	first := make(chan []Result, 1)
	go func() {
		res, _ := l.Fetch(ctx, FetchRequest{Group: "g", Member: "a", SessionEpoch: 1, Partitions: []TP{testTP},
			MaxRecords: 1, Settings: Settings{Queue: DefaultConfig(), Earliest: true}})
		first <- res
	}()
	<-store.written // a's state is written, its wait held
	second := make(chan []Result, 1)
	go func() {
		res, _ := l.Fetch(ctx, FetchRequest{Group: "g", Member: "b", SessionEpoch: 0, Partitions: []TP{testTP},
			MaxRecords: 1, Settings: Settings{Queue: DefaultConfig(), Earliest: true}})
		second <- res
	}()
	select {
	case <-store.written: // b got through the share-partition's mutex
	case <-time.After(10 * time.Second):
		t.Fatal("a second member's fetch is blocked while the first one's state write is waited for")
	}
	store.mu.Lock()
	held := append([]*heldWrite(nil), store.held...)
	store.mu.Unlock()
	for _, w := range held {
		w.done <- nil
	}
	ra, rb := <-first, <-second
	if len(ra) != 1 || len(ra[0].Leases) != 1 || len(rb) != 1 || len(rb[0].Leases) != 1 || ra[0].Leases[0].First == rb[0].Leases[0].First {
		t.Fatalf("a got %+v, b got %+v: want one different record each", ra, rb)
	}
}
