package replica

import (
	"sync"
	"testing"
	"time"
)

// TestLatencyWindowP99IsTheSlowestPercent: the 99th percentile of a
// window is the bucket end of its slowest percent, within a quarter of
// the true value, and Drain starts a new window.
func TestLatencyWindowP99IsTheSlowestPercent(t *testing.T) {
	for _, tc := range []struct {
		name    string
		fast    int // observed at 1 ms
		slow    int // observed at 80 ms
		wantP99 time.Duration
	}{
		{"empty", 0, 0, 0},
		{"all fast", 1000, 0, time.Millisecond},
		{"two percent slow", 980, 20, 80 * time.Millisecond},
		{"one percent slow", 990, 10, time.Millisecond},
		{"one sample", 0, 1, 80 * time.Millisecond},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var w LatencyWindow
			for range tc.fast {
				w.Observe(time.Millisecond)
			}
			for range tc.slow {
				w.Observe(80 * time.Millisecond)
			}
			s := w.Drain()
			if s.Count != uint64(tc.fast+tc.slow) {
				t.Errorf("count %d, want %d", s.Count, tc.fast+tc.slow)
			}
			if s.P99 < tc.wantP99 || s.P99 > tc.wantP99*5/4 {
				t.Errorf("p99 %v, want %v to a quarter above", s.P99, tc.wantP99)
			}
			if next := w.Drain(); next != (LatencySummary{}) {
				t.Errorf("the next window holds %+v, want nothing", next)
			}
		})
	}
}

// TestLatencyBucketsCoverEveryDuration: every duration falls in a bucket
// whose end is above it and at most a quarter (or a microsecond) above,
// and the buckets are in order.
func TestLatencyBucketsCoverEveryDuration(t *testing.T) {
	for d := time.Duration(0); d < latencyMax; d = d*9/8 + time.Microsecond {
		i := latencyBucket(d)
		upper := latencyUpper(i)
		if upper <= d.Truncate(time.Microsecond) || upper > max(d*5/4, d+time.Microsecond)+time.Microsecond {
			t.Fatalf("%v: bucket %d ends at %v", d, i, upper)
		}
		if i > 0 && latencyUpper(i-1) > d {
			t.Fatalf("%v: bucket %d, yet the one before ends at %v", d, i, latencyUpper(i-1))
		}
	}
	if i := latencyBucket(time.Hour); i != latencyBuckets-1 {
		t.Errorf("an hour in bucket %d, want the last (%d)", i, latencyBuckets-1)
	}
	if i := latencyBucket(-time.Second); i != 0 {
		t.Errorf("a negative duration in bucket %d, want 0", i)
	}
}

// TestLatencyWindowLosesNothingToConcurrentDrains: durations observed
// while windows are drained are each counted once.
func TestLatencyWindowLosesNothingToConcurrentDrains(t *testing.T) {
	var w LatencyWindow
	const writers, each = 4, 5000
	var wg sync.WaitGroup
	for range writers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range each {
				w.Observe(time.Duration(i) * time.Microsecond)
			}
		}()
	}
	done := make(chan struct{})
	var total uint64
	go func() {
		defer close(done)
		for range 100 {
			total += w.Drain().Count
		}
	}()
	wg.Wait()
	<-done
	total += w.Drain().Count
	if total != writers*each {
		t.Fatalf("counted %d durations, want %d", total, writers*each)
	}
}

// TestLatencyWindowObserveAllocatesNothing: Observe is on the produce
// path.
func TestLatencyWindowObserveAllocatesNothing(t *testing.T) {
	var w LatencyWindow
	if n := testing.AllocsPerRun(100, func() { w.Observe(3 * time.Millisecond) }); n != 0 {
		t.Fatalf("Observe allocated %.1f times", n)
	}
}
