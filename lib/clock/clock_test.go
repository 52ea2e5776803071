package clock

import (
	"testing"
	"time"
)

var start = time.Date(2025, 1, 2, 3, 4, 5, 0, time.UTC)

func TestManualFiresInOrderAtTheirTimes(t *testing.T) {
	c := NewManual(start)
	var got []string
	c.AfterFunc(3*time.Second, func() { got = append(got, "b@"+c.Now().Sub(start).String()) })
	c.AfterFunc(time.Second, func() { got = append(got, "a@"+c.Now().Sub(start).String()) })
	stopped := c.AfterFunc(2*time.Second, func() { got = append(got, "never") })
	if !stopped.Stop() || stopped.Stop() {
		t.Fatal("Stop of a pending AfterFunc: want true, then false")
	}
	timer := c.NewTimer(2 * time.Second)
	c.Advance(1500 * time.Millisecond)
	select {
	case <-timer.C():
		t.Fatal("timer fired early")
	default:
	}
	c.Advance(5 * time.Second)
	if want := []string{"a@1s", "b@3s"}; len(got) != 2 || got[0] != want[0] || got[1] != want[1] {
		t.Fatalf("AfterFuncs ran %v, want %v", got, want)
	}
	select {
	case at := <-timer.C():
		if !at.Equal(start.Add(2 * time.Second)) {
			t.Fatalf("timer delivered %v, want its due time", at)
		}
	default:
		t.Fatal("timer did not fire")
	}
	if c.Pending() != 0 {
		t.Fatalf("%d pending after everything fired", c.Pending())
	}
	if timer.Reset(time.Second) || c.Pending() != 1 {
		t.Fatal("Reset of a fired timer: want false, and it pending again")
	}
}

func TestManualTickerKeepsOneTickPending(t *testing.T) {
	c := NewManual(start)
	tk := c.NewTicker(time.Second)
	c.Advance(3500 * time.Millisecond) // three ticks due, one kept
	select {
	case at := <-tk.C():
		if !at.Equal(start.Add(time.Second)) {
			t.Fatalf("first tick at %v", at)
		}
	default:
		t.Fatal("no tick")
	}
	select {
	case <-tk.C():
		t.Fatal("ticks piled up")
	default:
	}
	c.Advance(time.Second)
	select {
	case <-tk.C():
	default:
		t.Fatal("no tick after the next second")
	}
	tk.Stop()
	c.Advance(10 * time.Second)
	select {
	case <-tk.C():
		t.Fatal("tick after Stop")
	default:
	}
}

func TestRealTimerFires(t *testing.T) {
	tm := Real().NewTimer(time.Millisecond)
	<-tm.C()
	done := make(chan struct{})
	Real().AfterFunc(time.Millisecond, func() { close(done) })
	<-done
}
