package replica

import (
	"testing"

	"github.com/mqproject/mq/lib/log"
	"github.com/mqproject/mq/lib/vfs"
	"github.com/mqproject/mq/lib/vfs/crashfs"
)

// openCrashLog opens the log of dir on fsys with flush.policy=os: appends
// reach only the page cache until a segment rolls or the log closes.
func openCrashLog(t *testing.T, fsys vfs.FS) *log.Log {
	t.Helper()
	cfg := log.DefaultConfig()
	cfg.FlushPolicy = log.FlushOS
	l, err := log.Open("p", cfg, log.Options{FS: fsys})
	if err != nil {
		t.Fatal(err)
	}
	return l
}

// TestPowerLossBelowCheckpointedHighWatermarkIsLostCommitted: a lone
// leader acknowledges records (its high-water mark follows its log end),
// checkpoints the high-water mark (fsynced) and loses power before its
// log is flushed. Reopened, the replica knows it lost records it had
// counted as committed, with the evidence; a log that kept everything up
// to its checkpoint did not lose any.
func TestPowerLossBelowCheckpointedHighWatermarkIsLostCommitted(t *testing.T) {
	fsys := crashfs.New(crashfs.Strict, 1)
	p := New(Config{Topic: "t", NodeID: self}, openCrashLog(t, fsys))
	mustBecome(t, p, 0, self, []int32{self, 2}, []int32{self})
	for range 3 {
		if _, err := p.Append(batch(t, 4), -1); err != nil {
			t.Fatal(err)
		}
	}
	if lost := p.LostCommitted(); lost.Lost() {
		t.Fatalf("a fresh log: LostCommitted %+v", lost)
	}
	if err := p.Log().CheckpointHighWatermark(p.HighWatermarkToCheckpoint()); err != nil {
		t.Fatal(err)
	}
	rebooted := fsys.Crash()
	p.Close()

	after := New(Config{Topic: "t", NodeID: self}, openCrashLog(t, rebooted))
	defer after.Close()
	lost := after.LostCommitted()
	if !lost.Lost() || lost.HighWatermark != 12 || lost.EndOffset != after.Log().EndOffset() || lost.EndOffset >= 12 {
		t.Fatalf("after the power loss: LostCommitted %+v, log end %d; want the checkpoint 12 above the log end", lost, after.Log().EndOffset())
	}
	if hw := after.HighWatermark(); hw != lost.EndOffset {
		t.Fatalf("high-water mark %d, want the log end %d", hw, lost.EndOffset)
	}

	// Closed cleanly, the log is flushed up to its checkpoint: nothing lost.
	flushed := crashfs.New(crashfs.Strict, 2)
	q := New(Config{Topic: "t", NodeID: self}, openCrashLog(t, flushed))
	mustBecome(t, q, 0, self, []int32{self}, []int32{self})
	if _, err := q.Append(batch(t, 4), -1); err != nil {
		t.Fatal(err)
	}
	if err := q.Close(); err != nil {
		t.Fatal(err)
	}
	reopened := New(Config{Topic: "t", NodeID: self}, openCrashLog(t, flushed.Crash()))
	defer reopened.Close()
	if lost := reopened.LostCommitted(); lost.Lost() {
		t.Fatalf("after a clean close: LostCommitted %+v", lost)
	}
}

// TestTruncationBelowHighWatermarkIsNoLoss: a follower cut below its
// checkpointed high-water mark by a leader elected uncleanly (which lacks
// records this one had counted as committed) checkpoints the lowered mark
// at once, so that a power loss right after is not taken for a loss of
// committed records.
func TestTruncationBelowHighWatermarkIsNoLoss(t *testing.T) {
	fsys := crashfs.New(crashfs.Strict, 3)
	p := New(Config{Topic: "t", NodeID: self}, openCrashLog(t, fsys))
	if err := p.Become(PartitionState{Leader: 2, LeaderEpoch: 3, Replicas: []int32{1, 2, 3}, ISR: []int32{1, 2}}); err != nil {
		t.Fatal(err)
	}
	if err := p.TruncateFromLeader(3, -1, -1); err != nil {
		t.Fatal(err)
	}
	if _, err := p.AppendFromLeader(3, leaderBatches(t, 3, 2, 3, 1), 6, 0); err != nil {
		t.Fatal(err)
	}
	if err := p.Log().CheckpointHighWatermark(p.HighWatermarkToCheckpoint()); err != nil {
		t.Fatal(err)
	}
	// Broker 3, which had offsets 0 and 1 only, was elected uncleanly.
	if err := p.Become(PartitionState{Leader: 3, LeaderEpoch: 4, Replicas: []int32{1, 2, 3}, ISR: []int32{3}}); err != nil {
		t.Fatal(err)
	}
	if err := p.TruncateFromLeader(4, 2, 3); err != nil {
		t.Fatal(err)
	}
	if err := p.Log().Flush(); err != nil {
		t.Fatal(err)
	}
	rebooted := fsys.Crash()
	p.Close()
	after := New(Config{Topic: "t", NodeID: self}, openCrashLog(t, rebooted))
	defer after.Close()
	if end := after.Log().EndOffset(); end != 2 {
		t.Fatalf("log end %d after the truncation to 2 and a flush", end)
	}
	if lost := after.LostCommitted(); lost.Lost() {
		t.Fatalf("LostCommitted %+v after a truncation by the leader", lost)
	}
}
