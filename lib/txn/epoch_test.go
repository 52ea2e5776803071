package txn

import (
	"context"
	"testing"
	"time"

	"github.com/mqproject/mq/lib/record"
)

// TestExhaustedEpochMovesToANewProducerID: at the last epoch of a
// producer id, InitProducerId hands out a new producer id at epoch 0, and
// a transaction.version 2 end writes its markers with the reserved last
// epoch of the old id and gives the producer the new id.
func TestExhaustedEpochMovesToANewProducerID(t *testing.T) {
	s := newScript()
	defer s.c.Close()
	ctx := context.Background()
	stored := func(id string, m Metadata) {
		t.Helper()
		m.ID, m.Timeout, m.Update, m.PrevProducerID, m.NextProducerID, m.NextEpoch, m.LastEpoch = id, time.Minute, s.clock.Now(), -1, -1, -1, -1
		b, err := record.Build(record.BuildOptions{}, []record.Record{{Key: encodeKey(id), Value: encodeValue(&m)}})
		if err != nil {
			t.Fatal(err)
		}
		if _, err := s.store.Append(s.c.Partition(id), b); err != nil {
			t.Fatal(err)
		}
	}
	stored("old", Metadata{ProducerID: 7, Epoch: maxEpoch, State: CompleteCommit})
	stored("v2", Metadata{ProducerID: 8, Epoch: maxEpoch, State: Empty, Version2: true})
	s.c.Close()
	s.start()

	id, epoch, err := s.c.InitProducerID(ctx, InitRequest{ID: "old", Timeout: time.Minute, ProducerID: -1, ProducerEpoch: -1})
	if err != nil || id == 7 || epoch != 0 {
		t.Fatalf("InitProducerId at the last epoch: %d/%d %v, want a new id at epoch 0", id, epoch, err)
	}

	if err := s.c.AddPartitions(ctx, "v2", 8, maxEpoch, []TopicPartition{{"a", 0}}); err != nil {
		t.Fatal(err)
	}
	id, epoch, err = s.c.EndTxn(ctx, EndRequest{ID: "v2", ProducerID: 8, ProducerEpoch: maxEpoch, Commit: true, Version2: true})
	if err != nil || id == 8 || epoch != 0 {
		t.Fatalf("EndTxn v5 at the last epoch: %d/%d %v, want a new id at epoch 0", id, epoch, err)
	}
	s.settle(t)
	want := "marker v2 commit pid=8 epoch=32767 v2 a-0\n"
	if got := s.markers.collect(); got != want {
		t.Errorf("markers: %q, want %q", got, want)
	}
	d, err := s.c.Describe("v2")
	if err != nil || d.State != CompleteCommit || d.ProducerID != id || d.ProducerEpoch != 0 {
		t.Errorf("after the end: %+v %v, want CompleteCommit of %d at epoch 0", d, err, id)
	}
	// The producer goes on with the new id; a retry of the end with the
	// old one is answered with it too.
	if gotID, gotEpoch, err := s.c.EndTxn(ctx, EndRequest{ID: "v2", ProducerID: 8, ProducerEpoch: maxEpoch, Commit: true, Version2: true}); err != nil || gotID != id || gotEpoch != 0 {
		t.Errorf("retried end: %d/%d %v", gotID, gotEpoch, err)
	}
	if err := s.c.AddPartitions(ctx, "v2", id, 0, []TopicPartition{{"a", 1}}); err != nil {
		t.Errorf("the new id's transaction: %v", err)
	}
}
