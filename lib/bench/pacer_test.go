package bench

import (
	"context"
	"testing"
	"time"
)

func TestPacerSchedulesMessagesAtTheRate(t *testing.T) {
	start := time.Unix(1000, 0)
	at := func(d time.Duration) time.Time { return start.Add(d) }
	for _, tc := range []struct {
		name  string
		rate  float64
		sent  int64
		now   time.Time
		limit int64
		want  int64
	}{
		{"first message is due at the start", 1000, 0, at(0), 0, 1},
		{"nothing before the start", 1000, 0, at(-time.Millisecond), 0, 0},
		{"one per millisecond", 1000, 1, at(500 * time.Microsecond), 0, 0},
		{"second due after a millisecond", 1000, 1, at(time.Millisecond), 0, 1},
		{"behind: catch up in a burst", 1000, 1, at(10 * time.Millisecond), 0, 10},
		{"burst bounded by limit", 1000, 1, at(10 * time.Millisecond), 4, 4},
		{"ahead: nothing owed", 1000, 50, at(10 * time.Millisecond), 0, 0},
		{"unlimited owes the limit", 0, 123, at(0), 7, 7},
		{"unlimited owes one without a limit", 0, 123, at(0), 0, 1},
	} {
		t.Run(tc.name, func(t *testing.T) {
			p := NewPacer(tc.rate, start)
			p.Sent(tc.sent)
			if got := p.Due(tc.now, tc.limit); got != tc.want {
				t.Errorf("Due = %d, want %d", got, tc.want)
			}
		})
	}
}

func TestPacerNext(t *testing.T) {
	start := time.Unix(1000, 0)
	p := NewPacer(200, start)
	p.Sent(3)
	if got, want := p.Next(), start.Add(15*time.Millisecond); !got.Equal(want) {
		t.Errorf("Next = %v, want %v", got, want)
	}
}

func TestPacerWaitReturnsWhenDueOrCancelled(t *testing.T) {
	p := NewPacer(1e6, time.Now())
	n, err := p.Wait(context.Background(), 1)
	if err != nil || n != 1 {
		t.Fatalf("Wait = %d, %v; want 1, nil", n, err)
	}
	slow := NewPacer(0.001, time.Now())
	slow.Sent(1) // the next one is due in 1000 s
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if _, err := slow.Wait(ctx, 1); err != context.Canceled {
		t.Errorf("Wait on a cancelled context = %v, want context.Canceled", err)
	}
}
