package bench

import (
	"math"
	"math/bits"
	"sync/atomic"
	"time"
)

// subBits sets the histogram's precision: values below 2^subBits are
// counted exactly, larger ones in buckets 2^(subBits-1) to an octave, so a
// bucket is at most 1/64 of its lower bound wide.
const subBits = 7

const (
	subCount  = 1 << subBits       // exact buckets, then bucket offset of the first octave
	halfCount = 1 << (subBits - 1) // buckets per octave
	// bucketCount covers every non-negative int64.
	bucketCount = subCount + (63-subBits)*halfCount
)

// Hist is a histogram of non-negative durations (or any int64 values).
// Record may be called concurrently with itself; the readers (Count,
// Quantile, Max, Merge's source) must not race with Record.
type Hist struct {
	counts [bucketCount]atomic.Uint64
	n      atomic.Uint64
	sum    atomic.Int64
	max    atomic.Int64
	min    atomic.Int64 // stored as value+1 so that the zero Hist means "none"
}

// bucketOf returns the bucket index of v ≥ 0.
func bucketOf(v int64) int {
	if v < subCount {
		return int(v)
	}
	shift := bits.Len64(uint64(v)) - subBits // ≥ 1
	mantissa := int(v>>shift) - halfCount    // in [0, halfCount)
	return subCount + (shift-1)*halfCount + mantissa
}

// bucketHigh is the largest value counted in bucket i.
func bucketHigh(i int) int64 {
	if i < subCount {
		return int64(i)
	}
	shift := (i-subCount)/halfCount + 1
	mantissa := int64((i-subCount)%halfCount + halfCount)
	high := (mantissa+1)<<shift - 1
	if high < 0 { // the last bucket reaches past MaxInt64
		return math.MaxInt64
	}
	return high
}

// Record counts one value; negative values count as 0.
func (h *Hist) Record(v int64) {
	v = max(v, 0)
	h.counts[bucketOf(v)].Add(1)
	h.n.Add(1)
	h.sum.Add(v)
	for {
		m := h.max.Load()
		if v <= m || h.max.CompareAndSwap(m, v) {
			break
		}
	}
	for {
		m := h.min.Load()
		if (m != 0 && v+1 >= m) || h.min.CompareAndSwap(m, v+1) {
			break
		}
	}
}

// RecordDuration counts d in nanoseconds.
func (h *Hist) RecordDuration(d time.Duration) { h.Record(int64(d)) }

// Count is the number of values recorded.
func (h *Hist) Count() uint64 { return h.n.Load() }

// Max is the largest value recorded, 0 when none.
func (h *Hist) Max() int64 { return h.max.Load() }

// Min is the smallest value recorded, 0 when none.
func (h *Hist) Min() int64 { return max(h.min.Load()-1, 0) }

// Mean is the average of the values recorded, 0 when none.
func (h *Hist) Mean() float64 {
	n := h.n.Load()
	if n == 0 {
		return 0
	}
	return float64(h.sum.Load()) / float64(n)
}

// Quantile returns the value below or at which a fraction q (0..1) of the
// recorded values lie: the upper bound of the bucket holding the value of
// rank ⌈q·n⌉, but never above Max nor below Min (and exactly Min for the
// first rank). It is 0 when nothing was recorded.
func (h *Hist) Quantile(q float64) int64 {
	n := h.n.Load()
	if n == 0 {
		return 0
	}
	rank := uint64(math.Ceil(q * float64(n)))
	rank = min(max(rank, 1), n)
	if rank == 1 {
		return h.Min()
	}
	var seen uint64
	for i := range h.counts {
		seen += h.counts[i].Load()
		if seen >= rank {
			return min(max(bucketHigh(i), h.Min()), h.Max())
		}
	}
	return h.Max()
}

// Merge adds the values of o to h.
func (h *Hist) Merge(o *Hist) {
	if o.n.Load() == 0 {
		return
	}
	for i := range o.counts {
		if c := o.counts[i].Load(); c != 0 {
			h.counts[i].Add(c)
		}
	}
	h.n.Add(o.n.Load())
	h.sum.Add(o.sum.Load())
	if m := o.Max(); m > h.max.Load() {
		h.max.Store(m)
	}
	if m := o.min.Load(); h.min.Load() == 0 || m < h.min.Load() {
		h.min.Store(m)
	}
}

// Latency is a histogram's summary in milliseconds, as reported.
type Latency struct {
	P50  float64 `json:"p50"`
	P99  float64 `json:"p99"`
	P999 float64 `json:"p99.9"`
	Max  float64 `json:"max"`
}

// Latency summarizes a histogram of nanoseconds.
func (h *Hist) Latency() *Latency {
	ms := func(ns int64) float64 { return float64(ns) / 1e6 }
	return &Latency{
		P50:  ms(h.Quantile(0.50)),
		P99:  ms(h.Quantile(0.99)),
		P999: ms(h.Quantile(0.999)),
		Max:  ms(h.Max()),
	}
}
