package txn

import (
	"cmp"
	"context"
	"errors"
	"slices"
	"sync"
	"testing"
	"time"
)

// fakePeers answers WriteTxnMarkers: each partition in fail fails that
// many times first.
type fakePeers struct {
	mu    sync.Mutex
	fail  map[TopicPartition]int
	sent  map[int32][]TopicPartition
	calls int
}

func (f *fakePeers) WriteTxnMarkers(_ context.Context, node int32, _ Marker, tps []TopicPartition) ([]TopicPartition, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.calls++
	var failed []TopicPartition
	for _, tp := range tps {
		if f.fail[tp] > 0 {
			f.fail[tp]--
			failed = append(failed, tp)
			continue
		}
		f.sent[node] = append(f.sent[node], tp)
	}
	if len(failed) > 0 {
		return failed, errors.New("not yet")
	}
	return nil, nil
}

func (f *fakePeers) AddPartitionsToTxn(context.Context, int32, string, int64, int16, []TopicPartition, bool) (map[TopicPartition]int16, error) {
	return nil, errors.New("not used")
}

// The marker writer sends each partition's marker to its leader, again
// for those that failed or had no leader, and counts a partition whose
// topic is gone as written.
func TestMarkerWriterRetriesUntilEveryPartitionHasItsMarker(t *testing.T) {
	a0, a1, b0, gone := TopicPartition{"a", 0}, TopicPartition{"a", 1}, TopicPartition{"b", 0}, TopicPartition{"deleted", 0}
	peers := &fakePeers{fail: map[TopicPartition]int{a1: 2}, sent: map[int32][]TopicPartition{}}
	var mu sync.Mutex
	leaderless := 1 // b0 has no leader at the first round
	w := &MarkerWriter{
		Peers: peers,
		Leader: func(tp TopicPartition) (int32, bool) {
			mu.Lock()
			defer mu.Unlock()
			switch tp {
			case gone:
				return -1, false
			case b0:
				if leaderless > 0 {
					leaderless--
					return -1, true
				}
				return 3, true
			}
			return tp.Partition + 1, true
		},
	}
	var written []TopicPartition
	ctx, cancel := context.WithTimeout(t.Context(), 10*time.Second)
	defer cancel()
	err := w.Write(ctx, Marker{Partitions: []TopicPartition{a0, a1, b0, gone}}, func(tps []TopicPartition) {
		mu.Lock()
		defer mu.Unlock()
		written = append(written, tps...)
	})
	if err != nil {
		t.Fatal(err)
	}
	slices.SortFunc(written, func(x, y TopicPartition) int {
		return cmp.Or(cmp.Compare(x.Topic, y.Topic), cmp.Compare(x.Partition, y.Partition))
	})
	if want := []TopicPartition{a0, a1, b0, gone}; !slices.Equal(written, want) {
		t.Fatalf("written %v, want %v", written, want)
	}
	if !slices.Equal(peers.sent[1], []TopicPartition{a0}) || !slices.Equal(peers.sent[2], []TopicPartition{a1}) || !slices.Equal(peers.sent[3], []TopicPartition{b0}) {
		t.Fatalf("sent %v", peers.sent)
	}
	if peers.calls < 4 {
		t.Fatalf("%d requests: a1 failed twice, so at least 4", peers.calls)
	}
}

// A Write whose context ends (the coordinator lost the partition) stops
// with the context's error.
func TestMarkerWriterStopsWithItsContext(t *testing.T) {
	tp := TopicPartition{"a", 0}
	w := &MarkerWriter{Peers: &fakePeers{fail: map[TopicPartition]int{tp: 1 << 30}, sent: map[int32][]TopicPartition{}},
		Leader: func(TopicPartition) (int32, bool) { return 1, true }}
	ctx, cancel := context.WithTimeout(t.Context(), 300*time.Millisecond)
	defer cancel()
	if err := w.Write(ctx, Marker{Partitions: []TopicPartition{tp}}, nil); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("Write: %v", err)
	}
}
