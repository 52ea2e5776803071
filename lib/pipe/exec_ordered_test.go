package pipe

import (
	"context"
	"fmt"
	"testing"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/mqproject/mq/lib/mqtest"
)

// newOrderedState is an orderedSource without a client, holding
// partition 0 of t: its per-key order and commit positions, driven by
// hand.
func newOrderedState() *orderedSource {
	s := &orderedSource{parts: map[topicPartition]*orderedPartition{}, changed: make(chan struct{}), joined: make(chan struct{})}
	s.assigned(context.Background(), nil, map[string][]int32{"t": {0}})
	return s
}

func (s *orderedSource) add(t *testing.T, keys ...string) {
	t.Helper()
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, k := range keys {
		p := s.parts[topicPartition{"t", 0}]
		off := max(p.next, 0)
		var key []byte
		if k != "" {
			key = []byte(k)
		}
		s.addLocked(&kgo.Record{Topic: "t", Partition: 0, Offset: off, Key: key})
	}
}

// take is Next that must not block.
func (s *orderedSource) take(t *testing.T) *Message {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	m, err := s.Next(ctx)
	if err != nil {
		return nil
	}
	return m
}

func (s *orderedSource) position() (int64, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.parts[topicPartition{"t", 0}].commitOffset()
}

func TestOrderedSourceRunsOneMessagePerKeyInOrder(t *testing.T) {
	s := newOrderedState()
	s.add(t, "a", "b", "a", "", "b", "")
	// Ready: the first of each key (a@0, b@1, null@3).
	var got []int64
	for m := s.take(t); m != nil; m = s.take(t) {
		got = append(got, m.Offset)
	}
	if len(got) != 3 || got[0] != 0 || got[1] != 1 || got[2] != 3 {
		t.Fatalf("first deliveries %v; want [0 1 3]", got)
	}
}

func TestOrderedSourceCommitsTheFinishedPrefix(t *testing.T) {
	s := newOrderedState()
	s.add(t, "a", "b", "c")
	a, b, c := s.take(t), s.take(t), s.take(t)
	if o, ok := s.position(); !ok || o != 0 {
		t.Fatalf("position %d %v before anything finished; want 0", o, ok)
	}
	if err := s.Accept(c); err != nil {
		t.Fatal(err)
	}
	if o, _ := s.position(); o != 0 {
		t.Fatalf("position %d with offset 0 running; want 0", o)
	}
	// A release keeps a's place: it comes next, and the prefix still
	// stops at it.
	if err := s.Release(a); err != nil {
		t.Fatal(err)
	}
	s.add(t, "d")
	again := s.take(t)
	if again != a || a.DeliveryCount != 2 {
		t.Fatalf("after a release got %v (count %d); want offset 0 again, count 2", again.Offset, again.DeliveryCount)
	}
	if err := s.Accept(a); err != nil {
		t.Fatal(err)
	}
	if o, _ := s.position(); o != 1 {
		t.Fatalf("position %d; want 1 (b runs)", o)
	}
	if err := s.Accept(b); err != nil {
		t.Fatal(err)
	}
	if o, _ := s.position(); o != 3 {
		t.Fatalf("position %d; want 3 (d waits)", o)
	}
	d := s.take(t)
	if d == nil || d.Offset != 3 {
		t.Fatalf("got %v; want offset 3", d)
	}
	if err := s.Accept(d); err != nil {
		t.Fatal(err)
	}
	if o, _ := s.position(); o != 4 {
		t.Fatalf("position %d; want 4", o)
	}
}

func TestOrderedSourceFreesAKeyOnlyWhenItsMessageIsDone(t *testing.T) {
	s := newOrderedState()
	s.add(t, "a", "a", "a")
	first := s.take(t)
	if m := s.take(t); m != nil {
		t.Fatalf("offset %d of key a delivered while offset %d runs", m.Offset, first.Offset)
	}
	if err := s.Release(first); err != nil {
		t.Fatal(err)
	}
	if m := s.take(t); m != first {
		t.Fatalf("after a release got %v; want the released message again", m)
	}
	if err := s.Accept(first); err != nil {
		t.Fatal(err)
	}
	if m := s.take(t); m == nil || m.Offset != 1 {
		t.Fatalf("got %v; want offset 1", m)
	}
}

func TestOrderedSourceRevokeDropsWhatDidNotStart(t *testing.T) {
	s := newOrderedState()
	s.add(t, "a", "b", "a")
	a := s.take(t)
	done := make(chan struct{})
	go func() {
		s.revoked(context.Background(), map[string][]int32{"t": {0}}, false)
		close(done)
	}()
	mqtest.WaitFor(t, "the partition to be revoked", func() (bool, string) {
		s.mu.Lock()
		defer s.mu.Unlock()
		p := s.parts[topicPartition{"t", 0}]
		if p == nil || p.revoked {
			return true, ""
		}
		return false, "t/0 held, not revoked"
	})
	if m := s.take(t); m != nil {
		t.Fatalf("offset %d delivered after its partition was revoked", m.Offset)
	}
	select {
	case <-done:
		t.Fatal("the revoke returned while offset 0 runs")
	default:
	}
	if err := s.Accept(a); err != nil {
		t.Fatal(err)
	}
	<-done
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.buffered != 0 || len(s.parts) != 0 {
		t.Fatalf("buffered %d, %d partitions after the revoke; want none", s.buffered, len(s.parts))
	}
}

// TestOrderedSourceWithOneSlotRunsAPartitionInOffsetOrder: with -j 1
// (take, finish, take...) two keys of five messages each run 0, 1, 2, ...
// and not 0, 5, 1, 6, ...: a key's next message, which joins the ready
// ones behind the other key's, is still taken in offset order.
func TestOrderedSourceWithOneSlotRunsAPartitionInOffsetOrder(t *testing.T) {
	s := newOrderedState()
	s.add(t, "a", "a", "a", "a", "a", "b", "b", "b", "b", "b")
	var got []int64
	for m := s.take(t); m != nil; m = s.take(t) {
		got = append(got, m.Offset)
		if err := s.Accept(m); err != nil {
			t.Fatal(err)
		}
	}
	want := []int64{0, 1, 2, 3, 4, 5, 6, 7, 8, 9}
	if fmt.Sprint(got) != fmt.Sprint(want) {
		t.Fatalf("one slot ran offsets %v, want %v", got, want)
	}
}
