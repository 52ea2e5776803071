package bench

import (
	"math"
	"math/rand/v2"
	"slices"
	"sync"
	"testing"
	"time"
)

func TestHistBucketsCoverValuesWithBoundedError(t *testing.T) {
	for _, v := range []int64{0, 1, 127, 128, 129, 255, 256, 1000, 123456, 1e9, 1 << 40, math.MaxInt64} {
		i := bucketOf(v)
		high := bucketHigh(i)
		if high < v {
			t.Errorf("value %d: bucket %d ends at %d, below it", v, i, high)
		}
		if i > 0 && bucketHigh(i-1) >= v {
			t.Errorf("value %d: previous bucket %d ends at %d, so it belongs there", v, i-1, bucketHigh(i-1))
		}
		if v >= subCount && float64(high-v) > float64(v)/halfCount {
			t.Errorf("value %d: bucket high %d is more than 1/%d above", v, high, halfCount)
		}
		if i >= bucketCount {
			t.Errorf("value %d: bucket %d out of range %d", v, i, bucketCount)
		}
	}
}

func TestHistQuantiles(t *testing.T) {
	for _, tc := range []struct {
		name   string
		values []int64
		q      float64
		want   int64
		tol    float64 // relative
	}{
		{"empty", nil, 0.5, 0, 0},
		{"one value", []int64{42}, 0.99, 42, 0},
		{"exact small values p50", seq(1, 100), 0.50, 50, 0},
		{"exact small values p99", seq(1, 100), 0.99, 99, 0},
		{"max is exact", []int64{5, 7, 1_000_003}, 1, 1_000_003, 0},
		{"p0 is the minimum", []int64{1_000_003, 2_000_000}, 0, 1_000_003, 0},
		{"large values p50", scale(seq(1, 1000), 1000), 0.50, 500_000, 1.0 / 64},
		{"large values p99.9", scale(seq(1, 1000), 1000), 0.999, 999_000, 1.0 / 64},
		{"negative counts as zero", []int64{-5}, 0.5, 0, 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var h Hist
			for _, v := range tc.values {
				h.Record(v)
			}
			got := h.Quantile(tc.q)
			if diff := math.Abs(float64(got - tc.want)); diff > tc.tol*float64(tc.want) {
				t.Errorf("Quantile(%v) = %d, want %d (±%.1f%%)", tc.q, got, tc.want, tc.tol*100)
			}
		})
	}
}

func TestHistAgreesWithSortedSample(t *testing.T) {
	seed := uint64(time.Now().UnixNano())
	t.Logf("seed %d", seed)
	r := rand.New(rand.NewPCG(seed, 0))
	var h Hist
	vals := make([]int64, 100_000)
	for i := range vals {
		vals[i] = int64(r.ExpFloat64() * 1e6) // ~1 ms mean, in ns
		h.Record(vals[i])
	}
	slices.Sort(vals)
	for _, q := range []float64{0.5, 0.9, 0.99, 0.999} {
		exact := vals[int(math.Ceil(q*float64(len(vals))))-1]
		got := h.Quantile(q)
		if got < exact || float64(got-exact) > float64(exact)/halfCount+1 {
			t.Errorf("q %v: got %d, exact %d", q, got, exact)
		}
	}
	if h.Max() != vals[len(vals)-1] || h.Min() != vals[0] || h.Count() != uint64(len(vals)) {
		t.Errorf("max/min/count = %d/%d/%d, want %d/%d/%d", h.Max(), h.Min(), h.Count(), vals[len(vals)-1], vals[0], len(vals))
	}
}

func TestHistConcurrentRecordAndMerge(t *testing.T) {
	var h, other Hist
	var wg sync.WaitGroup
	for g := range 4 {
		wg.Go(func() {
			for i := range 1000 {
				h.Record(int64(g*1000 + i))
			}
		})
	}
	wg.Wait()
	other.Record(10_000_000)
	h.Merge(&other)
	if h.Count() != 4001 || h.Max() != 10_000_000 || h.Min() != 0 {
		t.Errorf("count %d max %d min %d", h.Count(), h.Max(), h.Min())
	}
	if want := (float64(3999*4000/2) + 1e7) / 4001; math.Abs(h.Mean()-want) > 1e-6 {
		t.Errorf("mean %v, want %v", h.Mean(), want)
	}
}

func TestLatencyIsInMilliseconds(t *testing.T) {
	var h Hist
	h.RecordDuration(1500 * time.Microsecond)
	l := h.Latency()
	if l.Max != 1.5 || l.P50 != 1.5 {
		t.Errorf("latency %+v, want 1.5 ms", l)
	}
}

func seq(from, to int64) []int64 {
	var s []int64
	for v := from; v <= to; v++ {
		s = append(s, v)
	}
	return s
}

func scale(s []int64, k int64) []int64 {
	for i := range s {
		s[i] *= k
	}
	return s
}
