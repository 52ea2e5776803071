package partition

import (
	"testing"

	"github.com/mqproject/mq/lib/log"
	"github.com/mqproject/mq/lib/record"
	"github.com/mqproject/mq/lib/replica"
)

// TestShareSourceReadsWholeBatchesUpToMaxBytes: a share-partition's read
// returns whole batches from the one holding the offset asked, at least
// the first however large, no more than maxBytes after it, and the offset
// after the last one.
func TestShareSourceReadsWholeBatchesUpToMaxBytes(t *testing.T) {
	l, err := log.Open(t.TempDir(), log.DefaultConfig(), log.Options{})
	if err != nil {
		t.Fatal(err)
	}
	p := replica.New(replica.Config{Topic: "q", Partition: 0, NodeID: 1, MinInsyncReplicas: 1}, l)
	defer p.Close()
	if err := p.Become(replica.PartitionState{Leader: 1, Replicas: []int32{1}, ISR: []int32{1}}); err != nil {
		t.Fatal(err)
	}
	var size int
	for range 3 { // offsets 0-1, 2-3, 4-5
		batch, err := record.Build(record.BuildOptions{}, []record.Record{{Value: []byte("a")}, {Value: []byte("b")}})
		if err != nil {
			t.Fatal(err)
		}
		size = len(batch)
		if _, err := p.Append(batch, 1); err != nil {
			t.Fatal(err)
		}
	}
	src := ShareSource{&Hosted{Partition: p}}
	if start, hw := src.Offsets(); start != 0 || hw != 6 {
		t.Fatalf("Offsets = %d, %d; want 0, 6", start, hw)
	}
	for _, tc := range []struct {
		offset            int64
		maxBytes          int
		batches, wantNext int64
	}{
		{0, 1, 1, 2},          // the first batch whole, however large
		{1, size, 1, 2},       // from the batch holding the offset
		{0, 2 * size, 2, 4},   // as many whole batches as fit
		{2, 2*size + 1, 2, 6}, // not a part of one more
		{6, size, 0, 6},       // nothing at the high-water mark
	} {
		buf, next, err := src.ReadBatches(tc.offset, tc.maxBytes)
		if err != nil {
			t.Fatalf("ReadBatches(%d, %d): %v", tc.offset, tc.maxBytes, err)
		}
		if int64(len(buf)) != tc.batches*int64(size) || next != tc.wantNext {
			t.Errorf("ReadBatches(%d, %d) = %d bytes, next %d; want %d batches, next %d", tc.offset, tc.maxBytes, len(buf), next, tc.batches, tc.wantNext)
		}
	}
}
