package pipe

import (
	"strings"
	"testing"
	"time"
)

type fakeClock struct{ t time.Time }

func (c *fakeClock) now() time.Time { return c.t }

func TestProgressStaysQuietForShortWork(t *testing.T) {
	var out strings.Builder
	clock := &fakeClock{t: time.Unix(1000, 0)}
	p := NewProgress(&out, clock.now)
	for i := 0; i < 1000; i++ {
		p.Add(10)
	}
	clock.t = clock.t.Add(999 * time.Millisecond)
	p.Add(10)
	p.Done()
	if out.Len() != 0 {
		t.Errorf("drew %q for work shorter than the delay", out.String())
	}
}

func TestProgressDrawsAndEndsTheLine(t *testing.T) {
	var out strings.Builder
	clock := &fakeClock{t: time.Unix(1000, 0)}
	p := NewProgress(&out, clock.now)
	clock.t = clock.t.Add(2 * time.Second)
	for i := 0; i < 100000; i++ {
		p.Add(10)
	}
	if !strings.HasPrefix(out.String(), "\r1 messages, 0.0 MB, 0 msgs/s\x1b[K") {
		t.Errorf("first draw: %q", out.String())
	}
	out.Reset()
	p.Done()
	if want := "\r100000 messages, 1.0 MB, 50000 msgs/s\x1b[K\n"; out.String() != want {
		t.Errorf("Done drew %q, want %q", out.String(), want)
	}
}

func TestNilProgressDoesNothing(t *testing.T) {
	var p *Progress = NewProgress(nil, nil)
	p.Add(1)
	p.Done()
}
