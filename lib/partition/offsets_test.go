package partition

import (
	"errors"
	"testing"

	"github.com/mqproject/mq/lib/replica"
)

// TestListOffsetsAnswersBelowWhatEachClientMayRead: a consumer's latest is
// the high-water mark, a read_committed consumer's the last stable offset,
// a follower's the log end offset; a new leader behind its epoch's start
// has no latest for consumers.
func TestListOffsetsAnswersBelowWhatEachClientMayRead(t *testing.T) {
	info := replica.ReadInfo{HighWatermark: 10, LastStableOffset: 7, LogEndOffset: 12}
	for _, tc := range []struct {
		name      string
		replicaID int32
		committed bool
		end, want int64
	}{
		{"read_uncommitted consumer", -1, false, 10, 10},
		{"read_committed consumer", -1, true, 7, 7},
		{"follower", 2, false, 10, 12},
		{"follower asking read_committed", 2, true, 10, 12},
	} {
		if end := ListEnd(info, tc.replicaID, tc.committed); end != tc.end {
			t.Errorf("%s: ListEnd = %d, want %d", tc.name, end, tc.end)
		}
		if got, err := LatestOffset(info, tc.replicaID, tc.committed); err != nil || got != tc.want {
			t.Errorf("%s: LatestOffset = %d, %v; want %d", tc.name, got, err, tc.want)
		}
	}
	info.HighWatermarkBehind = true
	if _, err := LatestOffset(info, -1, false); !errors.Is(err, replica.ErrHighWatermarkBehind) {
		t.Errorf("consumer of a leader behind: %v, want ErrHighWatermarkBehind", err)
	}
	if got, err := LatestOffset(info, 2, false); err != nil || got != 12 {
		t.Errorf("follower of a leader behind: %d, %v; want 12", got, err)
	}
}
