package controller

import (
	"context"
	"errors"
	"log/slog"
	"sync"
	"time"

	"github.com/mqproject/mq/lib/clock"
)

// ProducerIDBlockSize is how many producer IDs a broker takes from the
// controller at a time.
const ProducerIDBlockSize = 1000

// Backoff of Run after a failed allocation: it starts at
// producerIDRetryMin and doubles up to producerIDRetryMax.
const (
	producerIDRetryMin = 100 * time.Millisecond
	producerIDRetryMax = 5 * time.Second
)

// ProducerIDAllocator reserves blocks of producer IDs that no other
// broker is given; *Controller is the real one. ProducerIDs
// calls it once at a time.
type ProducerIDAllocator interface {
	AllocateProducerIDs(ctx context.Context, n int64) (first int64, err error)
}

// ProducerIDs is a broker's supply of producer IDs: it hands them out from
// blocks the controller allocated, so that InitProducerId needs no
// controller while a block
// lasts. Up to two blocks are held: the current one and the next, fetched
// ahead once fewer than a tenth of the current one is left, so that a
// block is almost always at hand, also while the controller quorum is
// lost for a while.
//
// Fetching ahead is Run's job, which lib/node runs on a goroutine of its
// own from the broker's registration on. Take only allocates itself when
// no ID is at hand and no allocation is in flight (a supply nobody runs
// the prefetch for, or one whose prefetch keeps failing). Take and Run may
// be called concurrently. At most one
// allocation is in flight; mu is never held across it, and whoever needs
// its block waits for it on its own context.
type ProducerIDs struct {
	alloc ProducerIDAllocator
	clock clock.Clock
	log   *slog.Logger
	size  int64 // IDs per block

	// wake tells Run that a block is wanted (1-buffered: a wake-up
	// already pending is enough).
	wake chan struct{}

	mu         sync.Mutex
	next, end  int64 // [next, end) of the current block is still free
	spareFirst int64 // the next block is [spareFirst, spareFirst+size)…
	spare      bool  // …when spare is set
	// fetch is the allocation in flight, nil when none.
	fetch *producerIDFetch
}

// producerIDFetch is one allocation: done is closed when it ended, with
// err set before.
type producerIDFetch struct {
	done chan struct{}
	err  error
}

func NewProducerIDs(alloc ProducerIDAllocator, clk clock.Clock, log *slog.Logger, size int64) *ProducerIDs {
	return &ProducerIDs{alloc: alloc, clock: clk, log: log, size: size, wake: make(chan struct{}, 1)}
}

// Take returns a producer ID no one else was given. It needs the
// controller only when no ID is at hand; then it waits, up to ctx, for
// the allocation in flight, or runs one.
func (p *ProducerIDs) Take(ctx context.Context) (int64, error) {
	for {
		p.mu.Lock()
		if p.next >= p.end && p.spare {
			p.next, p.end, p.spare = p.spareFirst, p.spareFirst+p.size, false
		}
		if p.next < p.end {
			id := p.next
			p.next++
			if p.wantedLocked() {
				p.signal()
			}
			p.mu.Unlock()
			return id, nil
		}
		p.mu.Unlock()
		mine, err := p.allocate(ctx)
		if err != nil {
			// Another request's allocation that ended with its context
			// says nothing about the controller: try again.
			if !mine && ctx.Err() == nil && isContextError(err) {
				continue
			}
			return 0, err
		}
	}
}

// Run keeps a block at hand until ctx ends: it allocates one at once, and
// the next whenever Take finds the current one running low. A failed
// allocation is tried again after a backoff on the clock; the IDs still
// at hand are handed out meanwhile.
func (p *ProducerIDs) Run(ctx context.Context) {
	backoff := producerIDRetryMin
	failing := false
	for {
		p.mu.Lock()
		wanted := p.wantedLocked()
		p.mu.Unlock()
		if !wanted {
			select {
			case <-p.wake:
				continue
			case <-ctx.Done():
				return
			}
		}
		mine, err := p.allocate(ctx)
		if ctx.Err() != nil {
			return
		}
		if !mine && isContextError(err) {
			continue // a request's allocation that it gave up on
		}
		if err == nil {
			if failing {
				p.log.Info("allocating producer ids again")
				failing = false
			}
			backoff = producerIDRetryMin
			continue
		}
		if !failing {
			p.log.Warn("cannot allocate producer ids; trying again, handing out those at hand meanwhile", "err", err)
			failing = true
		}
		t := p.clock.NewTimer(backoff)
		select {
		case <-t.C():
		case <-ctx.Done():
			t.Stop()
			return
		}
		backoff = min(2*backoff, producerIDRetryMax)
	}
}

// wantedLocked: fewer than a tenth of the current block is left and no
// next block is held. p.mu is held.
func (p *ProducerIDs) wantedLocked() bool {
	return !p.spare && p.end-p.next < max(p.size/10, 1)
}

// signal wakes Run, unless a wake-up is pending already.
func (p *ProducerIDs) signal() {
	select {
	case p.wake <- struct{}{}:
	default:
	}
}

// allocate waits for the allocation in flight, or, when there is none and
// a block is wanted, runs one with ctx (mine). It returns that
// allocation's error, or ctx's when ctx ends first.
func (p *ProducerIDs) allocate(ctx context.Context) (mine bool, err error) {
	p.mu.Lock()
	if f := p.fetch; f != nil {
		p.mu.Unlock()
		select {
		case <-f.done:
			return false, f.err
		case <-ctx.Done():
			return false, ctx.Err()
		}
	}
	if !p.wantedLocked() {
		p.mu.Unlock()
		return false, nil
	}
	f := &producerIDFetch{done: make(chan struct{})}
	p.fetch = f
	p.mu.Unlock()

	first, err := p.alloc.AllocateProducerIDs(ctx, p.size)

	p.mu.Lock()
	if err == nil {
		if p.next >= p.end {
			p.next, p.end = first, first+p.size
		} else {
			p.spareFirst, p.spare = first, true
		}
		p.log.Info("allocated producer ids", "first", first, "count", p.size)
	}
	f.err = err
	p.fetch = nil
	close(f.done)
	p.mu.Unlock()
	return true, err
}

// remaining is how many IDs are at hand, the next block's included.
func (p *ProducerIDs) remaining() int64 {
	p.mu.Lock()
	defer p.mu.Unlock()
	n := p.end - p.next
	if p.spare {
		n += p.size
	}
	return n
}

func isContextError(err error) bool {
	return errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded)
}
