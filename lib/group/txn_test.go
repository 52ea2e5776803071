package group

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/mqproject/mq/lib/clock"
)

func txnCommit(t *testing.T, c *Coordinator, pid int64, offsets map[TopicPartition]int64) {
	t.Helper()
	r := TxnCommitRequest{Group: "g", ProducerID: pid, ProducerEpoch: 3, Generation: -1}
	for tp, o := range offsets {
		r.Offsets = append(r.Offsets, CommitOffset{TopicPartition: tp, Offset: Offset{Offset: o, LeaderEpoch: -1}})
	}
	errs, err := c.TxnCommitOffsets(context.Background(), r)
	if err != nil {
		t.Fatal(err)
	}
	for _, err := range errs {
		if err != nil {
			t.Fatal(err)
		}
	}
}

func fetched(t *testing.T, c *Coordinator, tp TopicPartition) int64 {
	t.Helper()
	offs, err := c.FetchOffsets("g", []TopicPartition{tp})
	if err != nil {
		t.Fatal(err)
	}
	return offs[0].Offset.Offset
}

// TestTxnOffsetsWaitForTheirMarker: offsets committed in a transaction are
// held per producer until the transaction's marker is written to the
// group's partition; a commit marker makes them the group's, an abort
// drops them, and a coordinator replaying the partition (markers
// included) comes to the same.
func TestTxnOffsetsWaitForTheirMarker(t *testing.T) {
	store := &MemStore{}
	newCoord := func() *Coordinator {
		c := New(Config{Partitions: 1, Store: store, Clock: clock.NewManual(time.Unix(1_700_000_000, 0))})
		if err := c.Load(0); err != nil {
			t.Fatal(err)
		}
		return c
	}
	c := newCoord()
	defer func() { c.Close() }()
	a, b := TopicPartition{"a", 0}, TopicPartition{"b", 1}

	txnCommit(t, c, 10, map[TopicPartition]int64{a: 5})
	txnCommit(t, c, 11, map[TopicPartition]int64{b: 7})
	if got := fetched(t, c, a); got != -1 {
		t.Fatalf("offset visible before its transaction committed: %d", got)
	}
	if !c.HasPendingOffsets("g", a) || !c.HasPendingOffsets("g", b) {
		t.Fatal("pending transactional offsets not reported")
	}

	// Producer 10 commits, producer 11 aborts: the markers, as the
	// WriteTxnMarkers handler writes them, then its call.
	if err := store.AppendMarker(0, 10, 3, true); err != nil {
		t.Fatal(err)
	}
	c.CompleteTransaction(0, 10, 3, true)
	if err := store.AppendMarker(0, 11, 3, false); err != nil {
		t.Fatal(err)
	}
	c.CompleteTransaction(0, 11, 3, false)
	if got := fetched(t, c, a); got != 5 {
		t.Fatalf("committed transaction's offset: got %d, want 5", got)
	}
	if got := fetched(t, c, b); got != -1 {
		t.Fatalf("aborted transaction's offset visible: %d", got)
	}
	if c.HasPendingOffsets("g", a) || c.HasPendingOffsets("g", b) {
		t.Fatal("offsets still pending after their markers")
	}

	// One more transaction left open: a replay holds it pending.
	txnCommit(t, c, 12, map[TopicPartition]int64{a: 9})
	c.Close()
	c = newCoord()
	if got := fetched(t, c, a); got != 5 {
		t.Fatalf("after replay: got %d, want 5", got)
	}
	if got := fetched(t, c, b); got != -1 {
		t.Fatalf("after replay, aborted offset visible: %d", got)
	}
	if !c.HasPendingOffsets("g", a) {
		t.Fatal("after replay, the open transaction's offset is not pending")
	}
	if err := store.AppendMarker(0, 12, 3, true); err != nil {
		t.Fatal(err)
	}
	c.CompleteTransaction(0, 12, 3, true)
	if got := fetched(t, c, a); got != 9 {
		t.Fatalf("got %d, want 9", got)
	}
}

// TestTxnOffsetCommitChecksMembership: a commit naming a member or a
// generation is checked like OffsetCommit's (KIP-447); one without commits
// whatever the group's state.
func TestTxnOffsetCommitChecksMembership(t *testing.T) {
	c := New(Config{Partitions: 1, Store: &MemStore{}, Clock: clock.NewManual(time.Unix(1_700_000_000, 0))})
	defer c.Close()
	if err := c.Load(0); err != nil {
		t.Fatal(err)
	}
	_, err := c.TxnCommitOffsets(context.Background(), TxnCommitRequest{Group: "g", ProducerID: 1, MemberID: "m", Generation: 4,
		Offsets: []CommitOffset{{TopicPartition: TopicPartition{"a", 0}, Offset: Offset{Offset: 1}}}})
	if !errors.Is(err, ErrIllegalGeneration) {
		t.Fatalf("unknown member: got %v, want ErrIllegalGeneration", err)
	}
	if _, err := c.TxnCommitOffsets(context.Background(), TxnCommitRequest{Group: "", ProducerID: 1}); !errors.Is(err, ErrInvalidGroupID) {
		t.Fatalf("empty group: got %v", err)
	}
}

// TestExpiryKeepsAGroupWithPendingTxnOffsets: a group that only has
// offsets of an open transaction is not empty of offsets: expiry leaves
// it, and the commit marker finds it.
func TestExpiryKeepsAGroupWithPendingTxnOffsets(t *testing.T) {
	store := &MemStore{}
	c := New(Config{Partitions: 1, Store: store, Clock: clock.NewManual(time.Unix(1_700_000_000, 0))})
	defer c.Close()
	if err := c.Load(0); err != nil {
		t.Fatal(err)
	}
	a := TopicPartition{"a", 0}
	txnCommit(t, c, 10, map[TopicPartition]int64{a: 5})
	c.ExpireOffsets()
	c.CompleteTransaction(0, 10, 3, true)
	if got := fetched(t, c, a); got != 5 {
		t.Fatalf("after expiry and the commit marker: got %d, want 5", got)
	}
}
