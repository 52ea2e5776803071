package record

import (
	"bytes"
	"fmt"
	"testing"
)

// MaxValueLen is exact: a batch of one record with a value that long is
// at most limit bytes, and one byte more is over, across the sizes where
// the varints grow. Size is what the record takes in the batch.
func TestMaxValueLenIsTheLargestValueThatFits(t *testing.T) {
	headers := []RecordHeader{{Key: "trace", Value: []byte("abc")}, {Key: "null"}}
	for _, limit := range []int{70, 100, 200, 1000, 16_500, 1048588, 2_097_300, 6_000_000} {
		for _, tc := range []struct {
			name    string
			key     []byte
			headers []RecordHeader
		}{{"bare", nil, nil}, {"key", []byte("some-key"), nil}, {"key and headers", []byte("k"), headers}} {
			t.Run(fmt.Sprintf("%d/%s", limit, tc.name), func(t *testing.T) {
				v := MaxValueLen(limit, tc.key, tc.headers)
				build := func(n int) int {
					r := Record{Key: tc.key, Headers: tc.headers, Value: bytes.Repeat([]byte("v"), n)}
					b := mustBuild(t, BuildOptions{}, []Record{r})
					if len(b) != HeaderSize+r.Size() {
						t.Fatalf("batch of %d bytes, HeaderSize+Size says %d", len(b), HeaderSize+r.Size())
					}
					return len(b)
				}
				if v < 0 {
					if n := build(0); n <= limit {
						t.Fatalf("MaxValueLen %d, but an empty value makes a batch of %d bytes", v, n)
					}
					return
				}
				if n := build(v); n > limit {
					t.Fatalf("value of %d bytes makes a batch of %d bytes, over %d", v, n, limit)
				}
				if n := build(v + 1); n <= limit {
					t.Fatalf("value of %d bytes makes a batch of %d bytes, within %d: MaxValueLen %d is short", v+1, n, limit, v)
				}
			})
		}
	}
}
