package controller

import (
	"bytes"
	"errors"
	"testing"
)

func remoteSeg(base, end int64, epoch int32) RemoteSegment {
	return RemoteSegment{BaseOffset: base, ObjectBase: base, EndOffset: end, MaxTimestamp: base, Size: 100, LeaderEpoch: epoch, Key: "k"}
}

// TestRemoteLogCommands checks the remote-log metadata rules: segments
// are recorded once, in order, by the current leader only; deletions
// take the oldest segments, by the current leader only; a deleted
// topic's remote logs wait in RemotePurges; snapshots keep all of it.
func TestRemoteLogCommands(t *testing.T) {
	tf := newTestFSM(t)
	tf.must(cmdControllerElected, &controllerElectedV1{NodeID: 1, ClusterID: "c"})
	for id := int32(1); id <= 3; id++ {
		tf.must(cmdRegisterBroker, broker(id))
	}
	tf.must(cmdCreateTopic, createTopic("orders", 1, 1, 3))
	id := topicID(1)
	up := func(epoch int32, s RemoteSegment) applyResult {
		return tf.do(cmdRemoteSegmentUploaded, &remoteSegmentUploadedV1{Topic: id, Partition: 0, LeaderEpoch: epoch, Segment: s})
	}
	del := func(epoch int32, before int64) applyResult {
		return tf.do(cmdRemoteSegmentsDeleted, &remoteSegmentsDeletedV1{Topic: id, Partition: 0, LeaderEpoch: epoch, Before: before})
	}
	for _, s := range []RemoteSegment{remoteSeg(0, 9, 0), remoteSeg(10, 19, 0), remoteSeg(20, 29, 0)} {
		if res := up(0, s); res.err != nil {
			t.Fatalf("upload %+v: %v", s, res.err)
		}
	}
	if res := up(0, remoteSeg(10, 19, 0)); !errors.Is(res.err, ErrRemoteSegmentExists) {
		t.Fatalf("second upload of a segment: %v, want ErrRemoteSegmentExists", res.err)
	}
	if res := up(0, remoteSeg(40, 49, 0)); !errors.Is(res.err, ErrRemoteSegmentExists) {
		t.Fatalf("upload leaving a gap: %v, want ErrRemoteSegmentExists", res.err)
	}
	// Leadership moves: epoch 0 is stale from now on.
	p := *tf.f.Image().Partition("orders", 0)
	tf.must(cmdResignLeadership, &resignLeadershipV1{Topic: "orders", Partition: 0, Leader: p.Leader, LeaderEpoch: p.LeaderEpoch, PartitionEpoch: p.PartitionEpoch})
	epoch := tf.f.Image().Partition("orders", 0).LeaderEpoch
	if res := del(0, 20); !errors.Is(res.err, ErrStaleLeaderEpoch) {
		t.Fatalf("delete by the old leader: %v, want ErrStaleLeaderEpoch", res.err)
	}
	if res := up(0, remoteSeg(30, 39, 0)); !errors.Is(res.err, ErrStaleLeaderEpoch) {
		t.Fatalf("upload by the old leader: %v, want ErrStaleLeaderEpoch", res.err)
	}
	if res := del(epoch+1, 20); !errors.Is(res.err, ErrFencedLeaderEpoch) {
		t.Fatalf("delete with a future epoch: %v, want ErrFencedLeaderEpoch", res.err)
	}
	if res := del(epoch, 15); !errors.Is(res.err, ErrInvalidRemoteDelete) {
		t.Fatalf("delete inside a segment: %v, want ErrInvalidRemoteDelete", res.err)
	}
	if res := del(epoch, 20); res.err != nil {
		t.Fatal(res.err)
	}
	r := tf.f.Image().RemoteLog(id, 0)
	if r.StartOffset() != 20 || r.EndOffset() != 30 || r.Size() != 100 {
		t.Fatalf("remote log after delete: %+v", r.Segments)
	}
	if s, ok := r.Find(25); !ok || s.BaseOffset != 20 {
		t.Fatalf("Find(25) = %+v %v", s, ok)
	}
	if _, ok := r.Find(5); ok {
		t.Fatal("Find(5) found a deleted segment")
	}

	var snap bytes.Buffer
	if err := writeSnapshot(&snap, tf.f.Image()); err != nil {
		t.Fatal(err)
	}
	img, err := readSnapshot(&snap)
	if err != nil {
		t.Fatal(err)
	}
	if got := img.RemoteLog(id, 0); got.StartOffset() != 20 || got.EndOffset() != 30 {
		t.Fatalf("remote log after a snapshot: %+v", got)
	}

	tf.must(cmdDeleteTopic, &deleteTopicV1{Name: "orders"})
	img = tf.f.Image()
	if img.RemoteLog(id, 0) != nil || len(img.RemotePurges) != 1 || img.RemotePurges[0] != id {
		t.Fatalf("after deleting the topic: remote %+v, purges %v", img.RemoteLog(id, 0), img.RemotePurges)
	}
	tf.must(cmdRemotePurged, &remotePurgedV1{Topic: id})
	if img := tf.f.Image(); img.RemotePurges != nil {
		t.Fatalf("purges after RemotePurged: %v", img.RemotePurges)
	}
}
