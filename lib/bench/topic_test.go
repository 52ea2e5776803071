package bench

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
)

// listed is a ListOffsets answer of topic t: offset and error per
// partition.
func listed(offsets map[int32]int64, errs map[int32]error) kadm.ListedOffsets {
	l := kadm.ListedOffsets{"t": {}}
	for p, o := range offsets {
		l["t"][p] = kadm.ListedOffset{Topic: "t", Partition: p, Offset: o, Err: errs[p]}
	}
	return l
}

// TestOffsetsAreAskedAgainWhilePartitionsOpen: a broker still opening
// its partitions answers LEADER_NOT_AVAILABLE for the request (kadm's
// shard errors) or NOT_LEADER_OR_FOLLOWER for a partition; the offsets
// are asked again until an answer holds none. Any other error ends the
// listing at once, and so does the end of the context.
func TestOffsetsAreAskedAgainWhilePartitionsOpen(t *testing.T) {
	notReady := fmt.Errorf("list start offsets of t: %w", &kadm.ShardErrors{Name: "ListOffsets", Errs: []kadm.ShardError{{Err: kerr.LeaderNotAvailable}}})
	answers := []func() (s, e kadm.ListedOffsets, err error){
		func() (s, e kadm.ListedOffsets, err error) { return nil, nil, notReady },
		func() (s, e kadm.ListedOffsets, err error) {
			return listed(map[int32]int64{0: 0, 1: 0}, map[int32]error{1: kerr.NotLeaderForPartition}), listed(map[int32]int64{0: 5, 1: 7}, nil), nil
		},
		func() (s, e kadm.ListedOffsets, err error) {
			return listed(map[int32]int64{0: 0, 1: 2}, nil), listed(map[int32]int64{0: 5, 1: 7}, nil), nil
		},
	}
	calls := 0
	start, end, err := retryOffsets(context.Background(), "t", 0, func(context.Context) (kadm.ListedOffsets, kadm.ListedOffsets, error) {
		calls++
		return answers[min(calls, len(answers))-1]()
	})
	if err != nil || calls != 3 {
		t.Fatalf("after %d calls: %v; want the third answer", calls, err)
	}
	if start[1] != 2 || end[0] != 5 || end[1] != 7 {
		t.Fatalf("offsets start %v end %v, want the third answer's", start, end)
	}

	calls = 0
	_, _, err = retryOffsets(context.Background(), "t", 0, func(context.Context) (kadm.ListedOffsets, kadm.ListedOffsets, error) {
		calls++
		return listed(map[int32]int64{0: 0}, map[int32]error{0: kerr.UnknownTopicOrPartition}), listed(map[int32]int64{0: 0}, nil), nil
	})
	if err == nil || calls != 1 {
		t.Fatalf("unknown topic: %d calls, %v; want one call and its error", calls, err)
	}

	ctx, cancel := context.WithTimeout(context.Background(), 50*time.Millisecond)
	defer cancel()
	_, _, err = retryOffsets(ctx, "t", time.Millisecond, func(context.Context) (kadm.ListedOffsets, kadm.ListedOffsets, error) {
		return nil, nil, notReady
	})
	if !errors.Is(err, kerr.LeaderNotAvailable) {
		t.Fatalf("never ready: %v; want the last answer's error once the context ended", err)
	}
}
