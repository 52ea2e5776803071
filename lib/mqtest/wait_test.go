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
		Wait{Timeout: 30 * time.Millisecond}.For(r, "the answer", func() (bool, string) {
			calls++
			return false, fmt.Sprintf("call %d", calls)
		})
		t.Error("Wait.For returned although the condition never held")
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

func TestWaitCallsOnTimeoutBeforeItFails(t *testing.T) {
	r := &fatalRecorder{TB: t}
	timedOut, beforeTheFailure := 0, false
	done := make(chan struct{})
	go func() {
		defer close(done)
		w := Wait{Timeout: 10 * time.Millisecond, OnTimeout: func() {
			timedOut++
			beforeTheFailure = r.failure == ""
		}}
		w.For(r, "nothing", func() (bool, string) { return false, "no" })
	}()
	<-done
	if timedOut != 1 || !beforeTheFailure {
		t.Fatalf("OnTimeout called %d times (before the failure: %v), want once before it", timedOut, beforeTheFailure)
	}
	if want := "timed out after 10ms waiting for nothing; last seen: no"; r.failure != want {
		t.Fatalf("failure %q, want %q", r.failure, want)
	}
}

func TestWaitDoesNotCallOnTimeoutWhenTheConditionHolds(t *testing.T) {
	n := 0
	Wait{Timeout: time.Second, OnTimeout: func() { t.Error("OnTimeout called") }}.For(t, "the third call", func() (bool, string) {
		n++
		return n == 3, fmt.Sprintf("call %d", n)
	})
}
