package replica

import (
	"math/bits"
	"sync/atomic"
	"time"
)

// LatencyWindow counts durations (how long acks=all produces waited for
// the high-water mark) in a histogram of fixed buckets, and hands them
// over one window at a time: Drain returns what was observed since the
// previous Drain and starts the next window. The auto replication
// throttle reads it to tell whether replication is slowing clients down.
//
// Observe is one atomic add, without allocation or lock, and may be
// called from any goroutine while Drain runs; a duration observed during
// a Drain counts in that window or the next, never in neither. Drain is
// meant for one caller at a time.
//
// The buckets are quarters of powers of two of microseconds (1 µs apart
// below 4 µs), so that a quantile is known within a quarter of its
// value, up to latencyMax; longer durations count as latencyMax.
type LatencyWindow struct {
	buckets [latencyBuckets]atomic.Uint64
}

// latencyMax is the longest duration a LatencyWindow tells apart, about
// 18 minutes: 2^30 µs.
const latencyMax = (1 << 30) * time.Microsecond

// latencyBuckets: 4 single microseconds, then 4 buckets for each power of
// two from 2^2 to 2^29 µs.
const latencyBuckets = 4 + 4*28

// latencyBucket is the bucket of d.
func latencyBucket(d time.Duration) int {
	us := uint64(max(d, 0) / time.Microsecond)
	if us < 4 {
		return int(us)
	}
	exp := bits.Len64(us) - 1 // 2^exp <= us < 2^(exp+1), exp >= 2
	quarter := int(us>>(exp-2)) & 3
	return min(4+(exp-2)*4+quarter, latencyBuckets-1)
}

// latencyUpper is the end of bucket i (its durations are below it).
func latencyUpper(i int) time.Duration {
	if i < 4 {
		return time.Duration(i+1) * time.Microsecond
	}
	exp, quarter := (i-4)/4+2, (i-4)%4
	return time.Duration(uint64(5+quarter)<<(exp-2)) * time.Microsecond
}

// Observe counts d in the current window.
func (w *LatencyWindow) Observe(d time.Duration) {
	w.buckets[latencyBucket(d)].Add(1)
}

// LatencySummary is what a LatencyWindow counted in one window.
type LatencySummary struct {
	// Count is the durations observed.
	Count uint64
	// P99 is the 99th percentile, rounded up to the end of its bucket (at
	// most a quarter above the true value); 0 when Count is 0.
	P99 time.Duration
}

// Drain returns the summary of the window since the previous Drain and
// empties it.
func (w *LatencyWindow) Drain() LatencySummary {
	var counts [latencyBuckets]uint64
	var total uint64
	for i := range w.buckets {
		counts[i] = w.buckets[i].Swap(0)
		total += counts[i]
	}
	if total == 0 {
		return LatencySummary{}
	}
	// The rank of the 99th percentile: the smallest n with n >= 0.99 total.
	rank := total - total/100
	var seen uint64
	for i, n := range counts {
		seen += n
		if seen >= rank {
			return LatencySummary{Count: total, P99: latencyUpper(i)}
		}
	}
	return LatencySummary{Count: total, P99: latencyUpper(latencyBuckets - 1)}
}
