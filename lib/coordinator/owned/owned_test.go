package owned

import (
	"errors"
	"sync"
	"testing"
)

var (
	errNotOwned = errors.New("not owned")
	errLoading  = errors.New("loading")
	errClosed   = errors.New("closed")
)

// replays is a Config.Replay whose replays wait for the test: each
// replay of a partition sends on started and returns what comes on
// finish; installed counts the installs.
type replays struct {
	started   chan int32
	finish    chan error
	installed int
}

func newPartitions(mu *sync.Mutex, r *replays) *Partitions[struct{}] {
	return New(Config[struct{}]{
		Topic: "__t", Mu: mu, NotOwned: errNotOwned, Loading: errLoading, Closed: errClosed,
		Replay: func(p int32, _ *Partition[struct{}]) (func(), error) {
			r.started <- p
			if err := <-r.finish; err != nil {
				return nil, err
			}
			return func() { r.installed++ }, nil
		},
	})
}

func TestPartitionLoadingThenLoaded(t *testing.T) {
	var mu sync.Mutex
	r := &replays{started: make(chan int32), finish: make(chan error)}
	ps := newPartitions(&mu, r)
	done := make(chan error, 1)
	ps.LoadAsync(3, func(err error) { done <- err })
	<-r.started
	mu.Lock()
	if err := ps.CheckLocked(3); err != errLoading {
		t.Errorf("while replaying: %v, want %v", err, errLoading)
	}
	if err := ps.CheckLocked(4); err != errNotOwned {
		t.Errorf("a partition not owned: %v, want %v", err, errNotOwned)
	}
	mu.Unlock()
	r.finish <- nil
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	mu.Lock()
	defer mu.Unlock()
	if err := ps.CheckLocked(3); err != nil || r.installed != 1 {
		t.Errorf("loaded: %v, %d installs, want nil and 1", err, r.installed)
	}
}

func TestUnloadDuringReplayInstallsNothing(t *testing.T) {
	var mu sync.Mutex
	r := &replays{started: make(chan int32), finish: make(chan error)}
	ps := newPartitions(&mu, r)
	done := make(chan error, 1)
	ps.LoadAsync(0, func(err error) { done <- err })
	<-r.started
	mu.Lock()
	op := ps.GetLocked(0)
	ps.UnloadLocked(0)
	mu.Unlock()
	if op.Gone().Err() == nil {
		t.Error("an unloaded partition's Gone has not ended")
	}
	r.finish <- nil
	if err := <-done; err != errNotOwned {
		t.Errorf("load: %v, want %v", err, errNotOwned)
	}
	if r.installed != 0 {
		t.Errorf("%d installs of an unloaded partition's replay", r.installed)
	}
}

func TestFailedReplayGivesThePartitionUp(t *testing.T) {
	var mu sync.Mutex
	r := &replays{started: make(chan int32, 1), finish: make(chan error, 1)}
	ps := newPartitions(&mu, r)
	broken := errors.New("broken")
	r.finish <- broken
	if err := ps.Load(1); !errors.Is(err, broken) {
		t.Fatalf("load: %v, want %v", err, broken)
	}
	<-r.started
	if got := ps.Owned(); len(got) != 0 {
		t.Errorf("owned after a failed replay: %v", got)
	}
	r.finish <- nil
	if err := ps.Load(1); err != nil {
		t.Fatalf("load again: %v", err)
	}
	<-r.started
	mu.Lock()
	ps.CloseLocked()
	mu.Unlock()
	if err := ps.Load(1); err != errClosed {
		t.Errorf("load after close: %v, want %v", err, errClosed)
	}
}
