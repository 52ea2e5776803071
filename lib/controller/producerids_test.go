package controller

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"testing"
	"time"

	"github.com/mqproject/mq/lib/clock"
	"github.com/mqproject/mq/lib/mqtest"
)

// fakeAllocator hands each AllocateProducerIDs call to the test, which
// answers it: an allocation is as slow as the test makes it.
type fakeAllocator struct {
	calls chan fakeAllocation
}

// fakeAllocation is one call waiting for its answer.
type fakeAllocation struct {
	n      int64
	answer chan<- fakeAnswer
}

type fakeAnswer struct {
	first int64
	err   error
}

func discardLogger() *slog.Logger { return slog.New(slog.DiscardHandler) }

func newFakeAllocator() *fakeAllocator { return &fakeAllocator{calls: make(chan fakeAllocation)} }

func (f *fakeAllocator) AllocateProducerIDs(ctx context.Context, n int64) (int64, error) {
	answer := make(chan fakeAnswer, 1)
	select {
	case f.calls <- fakeAllocation{n: n, answer: answer}:
	case <-ctx.Done():
		return 0, ctx.Err()
	}
	select {
	case a := <-answer:
		return a.first, a.err
	case <-ctx.Done():
		return 0, ctx.Err()
	}
}

// expect waits for the next call.
func (f *fakeAllocator) expect(t *testing.T) fakeAllocation {
	t.Helper()
	select {
	case a := <-f.calls:
		return a
	case <-time.After(10 * time.Second):
		t.Fatal("no allocation asked for")
		return fakeAllocation{}
	}
}

// none fails on a call waiting now.
func (f *fakeAllocator) none(t *testing.T, when string) {
	t.Helper()
	select {
	case a := <-f.calls:
		t.Fatalf("%s: an allocation of %d asked for", when, a.n)
	default:
	}
}

const testBlockSize = 100

// runProducerIDs starts run on a manual clock until the test ends.
func runProducerIDs(t *testing.T) (*ProducerIDs, *fakeAllocator, *clock.Manual) {
	t.Helper()
	alloc := newFakeAllocator()
	clk := clock.NewManual(time.Unix(1_700_000_000, 0))
	p := NewProducerIDs(alloc, clk, discardLogger(), testBlockSize)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() {
		defer close(done)
		p.Run(ctx)
	}()
	t.Cleanup(func() {
		cancel()
		<-done
	})
	return p, alloc, clk
}

// waitRemaining waits until n IDs are at hand.
func waitRemaining(t *testing.T, p *ProducerIDs, n int64) {
	t.Helper()
	mqtest.WaitFor(t, fmt.Sprintf("%d producer ids at hand", n), func() (bool, string) {
		got := p.remaining()
		return got == n, fmt.Sprintf("%d at hand", got)
	})
}

// takeNow takes an ID with no allocation answered: a take that asked the
// allocator would not return.
func takeNow(t *testing.T, p *ProducerIDs, want int64) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	id, err := p.Take(ctx)
	if err != nil || id != want {
		t.Fatalf("take: %d %v, want %d", id, err, want)
	}
}

func TestProducerIDsArePrefetchedAndTheNextBlockFetchedWhenATenthIsLeft(t *testing.T) {
	p, alloc, _ := runProducerIDs(t)
	// The first block is asked for before any request.
	a := alloc.expect(t)
	if a.n != testBlockSize {
		t.Fatalf("allocation of %d, want %d", a.n, testBlockSize)
	}
	a.answer <- fakeAnswer{first: 5000}
	waitRemaining(t, p, testBlockSize)

	for i := range int64(testBlockSize - testBlockSize/10) {
		takeNow(t, p, 5000+i)
	}
	alloc.none(t, "a tenth of the block left")
	// One fewer than a tenth left: the next block is asked for, while the
	// rest of the current one is handed out.
	takeNow(t, p, 5090)
	next := alloc.expect(t)
	var wg sync.WaitGroup
	ids := make(chan int64, testBlockSize)
	for range testBlockSize/10 - 1 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
			defer cancel()
			id, err := p.Take(ctx)
			if err != nil {
				t.Errorf("take during the allocation: %v", err)
			}
			ids <- id
		}()
	}
	wg.Wait() // with the allocation still unanswered
	close(ids)
	seen := map[int64]bool{}
	for id := range ids {
		if id < 5091 || id >= 5100 || seen[id] {
			t.Fatalf("id %d during the allocation, want each of 5091…5099 once", id)
		}
		seen[id] = true
	}

	// The block is used up: a take waits for the allocation in flight,
	// which asks no second one.
	got := make(chan int64, 1)
	go func() {
		id, err := p.Take(context.Background())
		if err != nil {
			t.Errorf("take after the block: %v", err)
		}
		got <- id
	}()
	alloc.none(t, "a take waiting for the allocation in flight")
	next.answer <- fakeAnswer{first: 9000}
	if id := <-got; id != 9000 {
		t.Fatalf("first id of the next block: %d, want 9000", id)
	}
	waitRemaining(t, p, testBlockSize-1)
}

func TestProducerIDTakesWaitForASlowAllocationEachOnItsOwnContext(t *testing.T) {
	alloc := newFakeAllocator()
	p := NewProducerIDs(alloc, clock.NewManual(time.Unix(0, 0)), discardLogger(), testBlockSize)
	// No prefetch runs: the first take allocates, the others wait for it.
	const takers = 8
	ids := make(chan int64, takers)
	for range takers {
		go func() {
			id, err := p.Take(context.Background())
			if err != nil {
				t.Errorf("take: %v", err)
			}
			ids <- id
		}()
	}
	a := alloc.expect(t)
	// A request that gives up is answered while the allocation is slow:
	// the others wait on the allocation, not on a lock.
	ctx, cancel := context.WithCancel(context.Background())
	gaveUp := make(chan error, 1)
	go func() {
		_, err := p.Take(ctx)
		gaveUp <- err
	}()
	cancel()
	select {
	case err := <-gaveUp:
		if !errors.Is(err, context.Canceled) {
			t.Fatalf("take with its context canceled: %v", err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("a take with its context canceled still waits behind the allocation")
	}
	alloc.none(t, "takers waiting for one allocation")
	a.answer <- fakeAnswer{first: 200}
	seen := map[int64]bool{}
	for range takers {
		id := <-ids
		if id < 200 || id >= 200+takers || seen[id] {
			t.Fatalf("id %d, want each of 200…%d once", id, 200+takers-1)
		}
		seen[id] = true
	}
}

func TestProducerIDAllocationErrorsKeepTheBlockAndAreRetriedWithBackoff(t *testing.T) {
	p, alloc, clk := runProducerIDs(t)
	alloc.expect(t).answer <- fakeAnswer{first: 0}
	waitRemaining(t, p, testBlockSize)
	for i := range int64(testBlockSize - testBlockSize/10 + 1) {
		takeNow(t, p, i)
	}
	unreachable := errors.New("no controller")
	alloc.expect(t).answer <- fakeAnswer{err: unreachable}
	waitTimer := func() {
		t.Helper()
		mqtest.WaitFor(t, "the retry's timer", func() (bool, string) {
			return clk.Pending() == 1, fmt.Sprintf("%d timers", clk.Pending())
		})
	}
	waitTimer()
	// The rest of the block is still handed out.
	takeNow(t, p, 91)

	clk.Advance(producerIDRetryMin)
	alloc.expect(t).answer <- fakeAnswer{err: unreachable}
	waitTimer()
	// The backoff doubled.
	clk.Advance(producerIDRetryMin)
	alloc.none(t, "half the second backoff")
	clk.Advance(producerIDRetryMin)
	alloc.expect(t).answer <- fakeAnswer{first: 7000}
	waitRemaining(t, p, testBlockSize/10-2+testBlockSize)
	for i := int64(92); i < testBlockSize; i++ {
		takeNow(t, p, i)
	}
	takeNow(t, p, 7000)
}

func TestProducerIDTakeReturnsTheAllocationErrorWhenNoIDIsLeft(t *testing.T) {
	alloc := newFakeAllocator()
	p := NewProducerIDs(alloc, clock.NewManual(time.Unix(0, 0)), discardLogger(), testBlockSize)
	unreachable := errors.New("no controller")
	errc := make(chan error, 1)
	go func() {
		_, err := p.Take(context.Background())
		errc <- err
	}()
	alloc.expect(t).answer <- fakeAnswer{err: unreachable}
	if err := <-errc; !errors.Is(err, unreachable) {
		t.Fatalf("take without a controller: %v, want %v", err, unreachable)
	}
}
