package mqtest

import (
	"fmt"
	"runtime"
	"sync/atomic"
	"testing"
	"time"
)

func TestWaitForReturnsOnceTheConditionHolds(t *testing.T) {
	var n atomic.Int32
	go func() {
		for range 5 {
			time.Sleep(time.Millisecond)
			n.Add(1)
		}
	}()
	calls := 0
	WaitFor(t, "five increments", func() (bool, string) {
		calls++
		v := n.Load()
		return v == 5, fmt.Sprintf("%d increments", v)
	})
	if calls < 2 {
		t.Fatalf("cond called %d times; want it polled until it held", calls)
	}
}

func TestWaitForDoesNotPauseWhenTheConditionHoldsAtOnce(t *testing.T) {
	calls := 0
	WaitFor(t, "nothing", func() (bool, string) { calls++; return true, "" })
	if calls != 1 {
		t.Fatalf("cond called %d times, want 1", calls)
	}
}

// fatalRecorder is a testing.TB that records Fatalf and stops the
// goroutine that called it, as testing.T does.
type fatalRecorder struct {
	testing.TB
	failure string
}

func (r *fatalRecorder) Helper() {}

func (r *fatalRecorder) Fatalf(format string, args ...any) {
	r.failure = fmt.Sprintf(format, args...)
	runtime.Goexit()
}

func TestWaitForFailsWithWhatAndTheLastStateSeen(t *testing.T) {
	r := &fatalRecorder{TB: t}
	calls := 0
	done := make(chan struct{})
	go func() {
		defer close(done)
		waitFor(r, "the answer", func() (bool, string) {
			calls++
			return false, fmt.Sprintf("call %d", calls)
		}, 30*time.Millisecond)
		t.Error("waitFor returned although the condition never held")
	}()
	<-done
	want := fmt.Sprintf("timed out after 30ms waiting for the answer; last seen: call %d", calls)
	if r.failure != want {
		t.Fatalf("failure %q, want %q", r.failure, want)
	}
	if calls < 2 {
		t.Fatalf("cond called %d times in 30ms; want it polled", calls)
	}
}
