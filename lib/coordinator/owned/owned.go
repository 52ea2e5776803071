package owned

import (
	"context"
	"fmt"
	"math"
	"slices"
	"sync"
)

// PartitionFor is the partition among n of an internal topic that holds
// key (a group, a transactional id): Kafka's
// abs(javaStringHashCode(key)) % n, so a key lands on the partition number
// it would in Kafka, whose clients compute it too.
func PartitionFor(key string, n int32) int32 {
	var h int32
	for _, r := range key {
		if r >= 0x10000 { // a surrogate pair in Java's UTF-16
			r -= 0x10000
			h = 31*h + int32(0xD800+(r>>10))
			h = 31*h + int32(0xDC00+(r&0x3FF))
			continue
		}
		h = 31*h + int32(r)
	}
	if h == math.MinInt32 {
		h = 0
	} else if h < 0 {
		h = -h
	}
	return h % n
}

// Config configures a Partitions.
type Config[S any] struct {
	// Topic names the internal topic, for errors.
	Topic string
	// Mu is the coordinator's mutex, which guards the Partitions.
	Mu sync.Locker
	// Replay reads partition p, without Mu, and returns what installs what
	// it read into the coordinator: install is called with Mu held, once,
	// if p is still owned by the same load when replay is done. op is the
	// ownership being loaded.
	Replay func(p int32, op *Partition[S]) (install func(), err error)
	// The coordinator's errors: a key of a partition not owned (and a
	// write whose partition was unloaded before it was durable), a key of
	// a partition still loading, a load after Close.
	NotOwned, Loading, Closed error
	// StoreError wraps a failure of a write's wait (Wait); nil: as it is.
	StoreError func(error) error
}

// Partitions is which partitions of an internal topic a coordinator owns.
type Partitions[S any] struct {
	cfg    Config[S]
	owned  map[int32]*Partition[S]
	closed bool
}

// Partition is the ownership of one partition, from its load to its
// unload. A later load of the same partition is another Partition.
type Partition[S any] struct {
	loaded chan struct{} // closed when replay is done
	err    error         // replay failure, set before loaded is closed
	gone   context.Context
	cancel context.CancelFunc
	// State is the coordinator's own about this ownership (guarded by
	// Config.Mu), such as what came for the partition while it loaded.
	State S
}

// New returns a Partitions owning none.
func New[S any](cfg Config[S]) *Partitions[S] {
	if cfg.StoreError == nil {
		cfg.StoreError = func(err error) error { return err }
	}
	return &Partitions[S]{cfg: cfg, owned: map[int32]*Partition[S]{}}
}

// Load owns partition p and replays it, on this goroutine, or waits for
// the load already under way; it returns the replay's result.
func (ps *Partitions[S]) Load(p int32) error {
	op, fresh := ps.own(p)
	if op == nil {
		return ps.cfg.Closed
	}
	if fresh {
		ps.load(p, op)
	}
	<-op.loaded
	return op.err
}

// LoadAsync is Load in the background: p is owned (its keys answer
// Loading) when LoadAsync returns, and done, if not nil, is called with
// Load's result, without Mu.
func (ps *Partitions[S]) LoadAsync(p int32, done func(error)) {
	op, fresh := ps.own(p)
	if op == nil {
		if done != nil {
			done(ps.cfg.Closed)
		}
		return
	}
	go func() {
		if fresh {
			ps.load(p, op)
		}
		<-op.loaded
		if done != nil {
			done(op.err)
		}
	}()
}

// own registers p as owned, reporting whether it was not yet; nil once
// closed.
func (ps *Partitions[S]) own(p int32) (*Partition[S], bool) {
	ps.cfg.Mu.Lock()
	defer ps.cfg.Mu.Unlock()
	if ps.closed {
		return nil, false
	}
	if op := ps.owned[p]; op != nil {
		return op, false
	}
	op := &Partition[S]{loaded: make(chan struct{})}
	op.gone, op.cancel = context.WithCancel(context.Background())
	ps.owned[p] = op
	return op, true
}

// load replays p and installs what it read if p is still owned by op.
func (ps *Partitions[S]) load(p int32, op *Partition[S]) {
	install, err := ps.cfg.Replay(p, op)

	ps.cfg.Mu.Lock()
	defer ps.cfg.Mu.Unlock()
	defer close(op.loaded)
	if ps.owned[p] != op {
		op.err = ps.cfg.NotOwned // unloaded meanwhile
		return
	}
	if err != nil {
		op.err = fmt.Errorf("load %s-%d: %w", ps.cfg.Topic, p, err)
		op.cancel()
		delete(ps.owned, p)
		return
	}
	install()
}

// UnloadLocked gives p up: its Gone ends. It reports whether p was owned.
func (ps *Partitions[S]) UnloadLocked(p int32) bool {
	op := ps.owned[p]
	if op == nil {
		return false
	}
	op.cancel()
	delete(ps.owned, p)
	return true
}

// CloseLocked gives every partition up and refuses loads from now on. It
// reports whether it was open.
func (ps *Partitions[S]) CloseLocked() bool {
	if ps.closed {
		return false
	}
	ps.closed = true
	for _, op := range ps.owned {
		op.cancel()
	}
	ps.owned = map[int32]*Partition[S]{}
	return true
}

// ClosedLocked reports whether CloseLocked was called.
func (ps *Partitions[S]) ClosedLocked() bool { return ps.closed }

// GetLocked returns p's ownership, loading or loaded; nil when p is not
// owned.
func (ps *Partitions[S]) GetLocked(p int32) *Partition[S] { return ps.owned[p] }

// CheckLocked says whether this node serves the keys of p now: nil,
// Config.NotOwned (not owned, replay failed, or closed) or Config.Loading.
func (ps *Partitions[S]) CheckLocked(p int32) error {
	if ps.closed {
		return ps.cfg.NotOwned
	}
	op := ps.owned[p]
	if op == nil {
		return ps.cfg.NotOwned
	}
	select {
	case <-op.loaded:
		if op.err != nil {
			return ps.cfg.NotOwned
		}
		return nil
	default:
		return ps.cfg.Loading
	}
}

// WaitLoaded waits until p is loaded, or done is closed. It returns at
// once when p is not owned.
func (ps *Partitions[S]) WaitLoaded(p int32, done <-chan struct{}) {
	ps.cfg.Mu.Lock()
	op := ps.owned[p]
	ps.cfg.Mu.Unlock()
	if op == nil {
		return
	}
	select {
	case <-op.loaded:
	case <-done:
	}
}

// Owned lists the partitions owned (loaded or loading), in order.
func (ps *Partitions[S]) Owned() []int32 {
	ps.cfg.Mu.Lock()
	defer ps.cfg.Mu.Unlock()
	var out []int32
	for p := range ps.owned {
		out = append(out, p)
	}
	slices.Sort(out)
	return out
}

// Loading reports whether op's replay is not installed yet. Called with
// Config.Mu held.
func (op *Partition[S]) Loading() bool {
	select {
	case <-op.loaded:
		return false
	default:
		return true
	}
}

// Gone is a context that ends when the partition is unloaded or the
// coordinator closes.
func (op *Partition[S]) Gone() context.Context { return op.gone }

// Wait runs wait, a write's wait for durability appended under this
// ownership, without Config.Mu: nil once durable, Config.NotOwned when the
// partition is unloaded first, else wait's error through
// Config.StoreError.
func (ps *Partitions[S]) Wait(ctx context.Context, op *Partition[S], wait func(context.Context) error) error {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	defer context.AfterFunc(op.gone, cancel)()
	err := wait(ctx)
	switch {
	case err == nil:
		return nil
	case op.gone.Err() != nil:
		return ps.cfg.NotOwned
	}
	return ps.cfg.StoreError(err)
}
