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

// slowReplay is a MemStore whose Replay reads the log, then waits for
// gate before it hands the records over: a load that read the log before
// a marker was appended.
type slowReplay struct {
	*MemStore
	read chan struct{}
	gate chan struct{}
}

func (s *slowReplay) Replay(partition int32, fn func(Entry) error) error {
	var entries []Entry
	err := s.MemStore.Replay(partition, func(e Entry) error {
		e.Key, e.Value = append([]byte(nil), e.Key...), append([]byte(nil), e.Value...)
		entries = append(entries, e)
		return nil
	})
	close(s.read)
	<-s.gate
	for _, e := range entries {
		if err := fn(e); err != nil {
			return err
		}
	}
	return err
}

// TestTransactionEndDuringLoadIsApplied: a commit marker written while
// the partition loads (after the replay read the log) still makes the
// transaction's offsets the group's.
func TestTransactionEndDuringLoadIsApplied(t *testing.T) {
	mem := &MemStore{}
	clk := clock.NewManual(time.Unix(1_700_000_000, 0))
	first := New(Config{Partitions: 1, Store: mem, Clock: clk})
	if err := first.Load(0); err != nil {
		t.Fatal(err)
	}
	a := TopicPartition{"a", 0}
	txnCommit(t, first, 10, map[TopicPartition]int64{a: 5})
	first.Close()

	store := &slowReplay{MemStore: mem, read: make(chan struct{}), gate: make(chan struct{})}
	c := New(Config{Partitions: 1, Store: store, Clock: clk})
	defer c.Close()
	loaded := make(chan error, 1)
	c.LoadAsync(0, func(err error) { loaded <- err })
	<-store.read
	if err := mem.AppendMarker(0, 10, 3, true); err != nil {
		t.Fatal(err)
	}
	c.CompleteTransaction(0, 10, 3, true)
	close(store.gate)
	if err := <-loaded; err != nil {
		t.Fatal(err)
	}
	if got := fetched(t, c, a); got != 5 {
		t.Fatalf("offset after a commit marker written during the load: got %d, want 5", got)
	}
}
