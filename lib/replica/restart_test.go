package replica

import (
	"errors"
	"io"
	"testing"

	"github.com/mqproject/mq/lib/log"
	"github.com/mqproject/mq/lib/vfs/crashfs"
)

// fetchRound runs follower f's fetcher once against leader l, as the
// broker's fetcher does: the truncation rounds a new leadership needs,
// then one fetch, or ResetFetchOffset when the leader answers that the
// offset is out of its range. It returns ResetFetchOffset's error.
func fetchRound(t *testing.T, f, l *Partition) error {
	t.Helper()
	pos, ok := f.FetchPosition()
	if !ok {
		t.Fatal("the follower has no fetch position")
	}
	for pos.NeedsTruncation {
		end, found := l.Log().EndOffsetForEpoch(pos.LastFetchedEpoch)
		if err := f.TruncateFromLeader(pos.LeaderEpoch, end, found); err != nil {
			t.Fatal(err)
		}
		pos, _ = f.FetchPosition()
	}
	if err := l.CheckLeaderEpoch(pos.LeaderEpoch); err != nil {
		t.Fatal(err)
	}
	r, info, err := l.Read(pos.FetchOffset, 1<<20, f.cfg.NodeID)
	if errors.Is(err, log.ErrOffsetOutOfRange) {
		return f.ResetFetchOffset(pos.LeaderEpoch, info.LogStartOffset, info.LogEndOffset)
	}
	if err != nil {
		t.Fatal(err)
	}
	var data []byte
	if r.Len > 0 {
		data, err = io.ReadAll(io.NewSectionReader(&r, 0, r.Len))
		r.Release()
		if err != nil {
			t.Fatal(err)
		}
	}
	if _, err := f.AppendFromLeader(pos.LeaderEpoch, data, info.HighWatermark, info.LogStartOffset); err != nil {
		t.Fatal(err)
	}
	return nil
}

// TestFollowerKeepsWhatItsLeaderLostInTheSameEpoch: leader 1
// (flush.policy=os) and follower 2 commit offsets 0..11 in epoch 0, and
// the leader loses power before it flushed them, or checkpointed its
// high-water mark (so it cannot tell it lost anything). Should it come
// back leading in epoch 0 (the broker keeps a restarted node from leading
// before its registration moved its epoch, but this is the replica's own
// defence), the follower's fetch at 12 is out of the leader's range: the
// follower must not cut its log to the leader's end, which would leave
// the acknowledged records on no replica. Once the controller gives the
// partition a new epoch, led by the follower, the former leader gets them
// back.
func TestFollowerKeepsWhatItsLeaderLostInTheSameEpoch(t *testing.T) {
	fsys := crashfs.New(crashfs.Strict, 7)
	epoch0 := PartitionState{Leader: 1, LeaderEpoch: 0, PartitionEpoch: 0, Replicas: []int32{1, 2}, ISR: []int32{1, 2}}
	leader := New(Config{Topic: "t", NodeID: 1}, openCrashLog(t, fsys))
	fl, err := log.Open(t.TempDir(), log.DefaultConfig(), log.Options{})
	if err != nil {
		t.Fatal(err)
	}
	follower := New(Config{Topic: "t", NodeID: 2}, fl)
	defer follower.Close()
	if err := leader.Become(epoch0); err != nil {
		t.Fatal(err)
	}
	if err := follower.Become(epoch0); err != nil {
		t.Fatal(err)
	}
	var last log.AppendResult
	for range 3 {
		if last, err = leader.Append(batch(t, 4), -1); err != nil {
			t.Fatal(err)
		}
	}
	for range 2 { // the records, then the high-water mark
		if err := fetchRound(t, follower, leader); err != nil {
			t.Fatal(err)
		}
	}
	if !leader.Acknowledged(last.LastOffset, last.LeaderEpoch) || follower.HighWatermark() != 12 {
		t.Fatalf("setup: offsets 0..11 not committed (leader hw %d, follower hw %d)", leader.HighWatermark(), follower.HighWatermark())
	}

	rebooted := fsys.Crash()
	leader.Close()
	leader = New(Config{Topic: "t", NodeID: 1}, openCrashLog(t, rebooted))
	defer leader.Close()
	if end := leader.Log().EndOffset(); end >= 12 {
		t.Fatalf("setup: the power loss kept the leader's log up to %d", end)
	}
	if err := leader.Become(epoch0); err != nil {
		t.Fatal(err)
	}
	if err := fetchRound(t, follower, leader); !errors.Is(err, ErrLeaderLostRecords) {
		t.Errorf("fetch from a leader whose log shrank within the epoch: %v, want ErrLeaderLostRecords", err)
	}
	if end := follower.Log().EndOffset(); end != 12 {
		t.Fatalf("the follower cut its log from 12 to %d: offsets %d..11, acknowledged, are on no replica", end, end)
	}

	// The controller moves the leadership to the follower in epoch 1.
	epoch1 := PartitionState{Leader: 2, LeaderEpoch: 1, PartitionEpoch: 1, Replicas: []int32{1, 2}, ISR: []int32{2}}
	if err := follower.Become(epoch1); err != nil {
		t.Fatal(err)
	}
	if err := leader.Become(epoch1); err != nil {
		t.Fatal(err)
	}
	for range 2 {
		if err := fetchRound(t, leader, follower); err != nil {
			t.Fatal(err)
		}
	}
	if end, hw := leader.Log().EndOffset(), leader.HighWatermark(); end != 12 || hw != 12 {
		t.Errorf("the former leader, following in epoch 1: log end %d, high-water mark %d; want 12 and 12", end, hw)
	}
}
