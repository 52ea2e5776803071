package tier

import (
	"context"
	"fmt"
	"slices"
	"testing"

	"github.com/mqproject/mq/lib/record"
)

// TestRemoteAbortedTxnsAnswerAsTheLocalLog: transactions of two
// producers, interleaved, every third aborted, over many small segments
// (a transaction's records in one segment, its marker in a later one);
// after Sync, the remote aborted-transaction indexes answer every read
// [from, upto) as the local log does, and only segments holding an abort
// marker have one.
func TestRemoteAbortedTxnsAnswerAsTheLocalLog(t *testing.T) {
	for name, url := range storeURLs(t) {
		t.Run(name, func(t *testing.T) {
			ctx := context.Background()
			f := newFixture(t, url)
			seq := map[int64]int32{}
			appendTxn := func(pid int64) {
				recs := []record.Record{{Value: fmt.Appendf(nil, "p%d-%d-%040d", pid, seq[pid], 0)}}
				b, err := record.Build(record.BuildOptions{Idempotent: true, Transactional: true, ProducerID: pid, BaseSequence: seq[pid], BaseTimestamp: 1000}, recs)
				if err != nil {
					t.Fatal(err)
				}
				seq[pid]++
				if _, err := f.log.Append(b, 0); err != nil {
					t.Fatal(err)
				}
			}
			marker := func(pid int64, commit bool) {
				if _, err := f.log.AppendMarker(record.Marker{ProducerID: pid, Commit: commit}, 0); err != nil {
					t.Fatal(err)
				}
			}
			for i := range 40 {
				for range 6 {
					appendTxn(7)
					appendTxn(8)
				}
				marker(7, i%3 != 1)
				appendTxn(8)
				marker(8, i%3 != 2)
			}
			f.appendBatches(t, 30) // the last transactions' segments close
			if err := f.tier.Sync(ctx, f.partition(0)); err != nil {
				t.Fatal(err)
			}
			rl := f.ctrl.Image().RemoteLog(f.id.Topic, 0)
			withIndex := 0
			for _, s := range rl.Segments {
				idx, err := f.log.SegmentTxnIndex(s.ObjectBase)
				if err != nil {
					t.Fatal(err)
				}
				if s.TxnIndex != (len(idx) > 0) {
					t.Fatalf("segment %d-%d: TxnIndex %v, %d local index bytes", s.BaseOffset, s.EndOffset, s.TxnIndex, len(idx))
				}
				if s.TxnIndex {
					withIndex++
				}
			}
			if withIndex == 0 || withIndex == len(rl.Segments) {
				t.Fatalf("%d of %d remote segments with an aborted-transaction index", withIndex, len(rl.Segments))
			}
			for from := int64(0); from < rl.EndOffset(); from += 3 {
				for _, n := range []int64{1, 10, 100} {
					upto := min(from+n, rl.EndOffset())
					want := f.log.AbortedTxns(nil, from, upto)
					got, complete, err := f.tier.AbortedTxns(ctx, rl, nil, from, upto)
					if err != nil {
						t.Fatal(err)
					}
					if !complete {
						got = f.log.AbortedTxns(got, max(from, rl.EndOffset()), upto)
					}
					if !slices.Equal(got, want) {
						t.Fatalf("aborted in [%d, %d): remote %+v, local %+v", from, upto, got, want)
					}
				}
			}
			if got, _, _ := f.tier.AbortedTxns(ctx, rl, nil, 0, rl.EndOffset()); len(got) == 0 {
				t.Fatal("no aborted transaction found remotely")
			}
		})
	}
}

// TestLastOffset: the last offset of whole batches.
func TestLastOffset(t *testing.T) {
	var b []byte
	if LastOffset(b) != -1 {
		t.Fatal("none")
	}
	for i := range 3 {
		batch, err := record.Build(record.BuildOptions{BaseOffset: int64(10 * i)}, []record.Record{{Value: []byte("a")}, {Value: []byte("b"), OffsetDelta: 1}})
		if err != nil {
			t.Fatal(err)
		}
		b = append(b, batch...)
	}
	if got := LastOffset(b); got != 21 {
		t.Fatalf("last offset %d, want 21", got)
	}
}
