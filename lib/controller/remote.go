package controller

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"
)

// RemotePartition names one partition's remote log: the topic by ID, so a
// topic deleted and created again under the same name starts empty.
type RemotePartition struct {
	Topic     TopicID
	Partition int32
}

// RemoteSegment is one log segment copied to the remote store
// (remote.storage.enable), as its uploader recorded it.
type RemoteSegment struct {
	// BaseOffset is the segment's first offset in the remote log,
	// EndOffset its last offset.
	BaseOffset int64 `json:"base_offset"`
	EndOffset  int64 `json:"end_offset"`
	// ObjectBase is the base offset of the local segment the objects
	// were copied from, which the index entries are relative to: below
	// BaseOffset when a new leader's segment started before the remote
	// end (replicas roll segments at their own sizes), the offsets
	// before BaseOffset then being the previous segment's.
	ObjectBase int64 `json:"object_base"`
	// MaxTimestamp is the largest batch max timestamp in it, -1 for none.
	MaxTimestamp int64 `json:"max_timestamp"`
	// Size is the bytes of its data object; Skipped those of them before
	// BaseOffset (the previous segment's offsets, see ObjectBase), which
	// the remote log's size does not count.
	Size    int64 `json:"size"`
	Skipped int64 `json:"skipped,omitempty"`
	// LeaderEpoch is the leader epoch of the partition leader that
	// uploaded it.
	LeaderEpoch int32 `json:"leader_epoch"`
	// Key is the object key stem; the objects are Key plus ".log",
	// ".index", ".timeindex", ".epochs" and ".producers" (lib/tier), and
	// ".txnindex" when TxnIndex.
	Key string `json:"key"`
	// TxnIndex: the segment holds abort markers, whose aborted-transaction
	// index was uploaded with it (Key + ".txnindex"); read_committed reads
	// of the remote part need it. Segments without it hold no abort marker.
	TxnIndex bool `json:"txn_index,omitempty"`
}

// RemoteLog is the remote part of one partition's log: its segments,
// oldest first, each starting at the offset after the one before.
// Immutable like the Image holding it.
type RemoteLog struct {
	Segments []RemoteSegment
}

// StartOffset is the first offset held remotely, -1 when nothing is.
func (r *RemoteLog) StartOffset() int64 {
	if r == nil || len(r.Segments) == 0 {
		return -1
	}
	return r.Segments[0].BaseOffset
}

// EndOffset is the offset after the last one held remotely, -1 when
// nothing is.
func (r *RemoteLog) EndOffset() int64 {
	if r == nil || len(r.Segments) == 0 {
		return -1
	}
	return r.Segments[len(r.Segments)-1].EndOffset + 1
}

// Size is the bytes held remotely, each offset counted once.
func (r *RemoteLog) Size() int64 {
	var n int64
	if r != nil {
		for _, s := range r.Segments {
			n += s.Bytes()
		}
	}
	return n
}

// Bytes is the segment's bytes from BaseOffset on.
func (s RemoteSegment) Bytes() int64 { return s.Size - s.Skipped }

// Find returns the segment holding offset, and false when none does.
func (r *RemoteLog) Find(offset int64) (RemoteSegment, bool) {
	if r == nil {
		return RemoteSegment{}, false
	}
	i, _ := slices.BinarySearchFunc(r.Segments, offset, func(s RemoteSegment, o int64) int {
		switch {
		case s.EndOffset < o:
			return -1
		case s.BaseOffset > o:
			return 1
		}
		return 0
	})
	if i < len(r.Segments) && r.Segments[i].BaseOffset <= offset && offset <= r.Segments[i].EndOffset {
		return r.Segments[i], true
	}
	return RemoteSegment{}, false
}

// RemoteLog returns a partition's remote log, nil when it has none.
func (img *Image) RemoteLog(topic TopicID, partition int32) *RemoteLog {
	return img.RemoteLogs[RemotePartition{topic, partition}]
}

// Errors of the remote-log commands.
var (
	// ErrRemoteSegmentExists refuses a segment that does not start right
	// after the remote log's end: it was recorded already (by this or an
	// earlier leader), or it would leave a gap.
	ErrRemoteSegmentExists = errors.New("controller: remote segment overlaps or leaves a gap")
	// ErrInvalidRemoteDelete refuses a deletion that is not of the
	// oldest remote segments, ending at a segment boundary.
	ErrInvalidRemoteDelete = errors.New("controller: invalid remote segment deletion")
)

// remoteSegmentUploadedV1 records one uploaded segment, proposed by the
// partition's leader with its leader epoch.
type remoteSegmentUploadedV1 struct {
	Topic       TopicID       `json:"topic_id"`
	Partition   int32         `json:"partition"`
	LeaderEpoch int32         `json:"leader_epoch"`
	Segment     RemoteSegment `json:"segment"`
}

// remoteSegmentsDeletedV1 removes the oldest remote segments, those
// below Before (a segment boundary), proposed by the partition's leader
// with its leader epoch (retention).
type remoteSegmentsDeletedV1 struct {
	Topic       TopicID `json:"topic_id"`
	Partition   int32   `json:"partition"`
	LeaderEpoch int32   `json:"leader_epoch"`
	Before      int64   `json:"before"`
}

// remotePurgedV1 says the remote objects of a deleted topic are gone.
type remotePurgedV1 struct {
	Topic TopicID `json:"topic_id"`
}

// checkRemoteLeader refuses a remote-log command of a partition whose
// leader epoch in the image is not epoch: a leader that lost its
// leadership (or one elected with a view older than the image's) can
// neither record nor delete anything.
func checkRemoteLeader(img *Image, topic TopicID, partition, epoch int32) error {
	t := img.TopicsByID[topic]
	if t == nil {
		return fmt.Errorf("%w: id %s", ErrUnknownTopic, topic)
	}
	if partition < 0 || int(partition) >= len(t.Partitions) {
		return fmt.Errorf("%w: %s-%d", ErrUnknownPartition, t.Name, partition)
	}
	p := t.Partitions[partition]
	switch {
	case epoch < p.LeaderEpoch:
		return fmt.Errorf("%w: %s-%d: epoch %d, current %d", ErrStaleLeaderEpoch, t.Name, partition, epoch, p.LeaderEpoch)
	case epoch > p.LeaderEpoch:
		return fmt.Errorf("%w: %s-%d: epoch %d, current %d", ErrFencedLeaderEpoch, t.Name, partition, epoch, p.LeaderEpoch)
	}
	return nil
}

func applyRemoteSegmentUploaded(img *Image, c *remoteSegmentUploadedV1) error {
	if err := checkRemoteLeader(img, c.Topic, c.Partition, c.LeaderEpoch); err != nil {
		return err
	}
	s := c.Segment
	if s.ObjectBase < 0 || s.ObjectBase > s.BaseOffset || s.Skipped < 0 || s.Skipped > s.Size || s.EndOffset < s.BaseOffset || s.Size < 0 || s.Key == "" || s.LeaderEpoch != c.LeaderEpoch {
		return fmt.Errorf("%w: remote segment %+v", ErrInvalidCommand, s)
	}
	k := RemotePartition{c.Topic, c.Partition}
	old := img.RemoteLogs[k]
	if end := old.EndOffset(); end >= 0 && s.BaseOffset != end {
		return fmt.Errorf("%w: segment at %d, remote log ends at %d", ErrRemoteSegmentExists, s.BaseOffset, end)
	}
	next := &RemoteLog{Segments: append(slices.Clip(segmentsOf(old)), s)}
	img.RemoteLogs = maps.Clone(img.RemoteLogs)
	if img.RemoteLogs == nil {
		img.RemoteLogs = map[RemotePartition]*RemoteLog{}
	}
	img.RemoteLogs[k] = next
	return nil
}

func segmentsOf(r *RemoteLog) []RemoteSegment {
	if r == nil {
		return nil
	}
	return r.Segments
}

func applyRemoteSegmentsDeleted(img *Image, c *remoteSegmentsDeletedV1) error {
	if err := checkRemoteLeader(img, c.Topic, c.Partition, c.LeaderEpoch); err != nil {
		return err
	}
	k := RemotePartition{c.Topic, c.Partition}
	old := img.RemoteLogs[k]
	n := 0
	for _, s := range segmentsOf(old) {
		if s.EndOffset >= c.Before {
			break
		}
		n++
	}
	if n == 0 || (n < len(old.Segments) && old.Segments[n].BaseOffset != c.Before) || (n == len(old.Segments) && old.EndOffset() != c.Before) {
		return fmt.Errorf("%w: before %d", ErrInvalidRemoteDelete, c.Before)
	}
	img.RemoteLogs = maps.Clone(img.RemoteLogs)
	if n == len(old.Segments) {
		delete(img.RemoteLogs, k)
	} else {
		img.RemoteLogs[k] = &RemoteLog{Segments: slices.Clone(old.Segments[n:])}
	}
	return nil
}

// dropRemoteLogs removes a deleted topic's remote logs from the image,
// remembering its ID in RemotePurges while it had any: its objects are
// deleted from the store, then RemotePurged forgets it.
func dropRemoteLogs(img *Image, topic TopicID) {
	had := false
	for k := range img.RemoteLogs {
		if k.Topic == topic {
			had = true
			break
		}
	}
	if !had {
		return
	}
	img.RemoteLogs = maps.Clone(img.RemoteLogs)
	for k := range img.RemoteLogs {
		if k.Topic == topic {
			delete(img.RemoteLogs, k)
		}
	}
	img.RemotePurges = append(slices.Clip(img.RemotePurges), topic)
}

func applyRemotePurged(img *Image, c *remotePurgedV1, res *applyResult) error {
	i := slices.Index(img.RemotePurges, c.Topic)
	if i < 0 {
		res.unchanged = true
		return nil
	}
	img.RemotePurges = slices.Delete(slices.Clone(img.RemotePurges), i, i+1)
	if len(img.RemotePurges) == 0 {
		img.RemotePurges = nil
	}
	return nil
}

// RecordRemoteSegment records a segment the leader of a partition
// uploaded, with that leader's epoch. It is refused with
// ErrStaleLeaderEpoch or ErrFencedLeaderEpoch when epoch is not the
// partition's, and with ErrRemoteSegmentExists when the segment does
// not start at the remote log's end (recorded already).
func (c *Controller) RecordRemoteSegment(ctx context.Context, p RemotePartition, epoch int32, s RemoteSegment) error {
	_, err := c.propose(ctx, cmdRemoteSegmentUploaded, &remoteSegmentUploadedV1{Topic: p.Topic, Partition: p.Partition, LeaderEpoch: epoch, Segment: s})
	return err
}

// DeleteRemoteSegments removes the oldest remote segments of a
// partition, those below before (a segment boundary), for its leader at
// epoch (refused like RecordRemoteSegment when epoch is not current).
func (c *Controller) DeleteRemoteSegments(ctx context.Context, p RemotePartition, epoch int32, before int64) error {
	_, err := c.propose(ctx, cmdRemoteSegmentsDeleted, &remoteSegmentsDeletedV1{Topic: p.Topic, Partition: p.Partition, LeaderEpoch: epoch, Before: before})
	return err
}

// RemotePurged says a deleted topic's remote objects are gone: the
// image forgets it (Image.RemotePurges).
func (c *Controller) RemotePurged(ctx context.Context, topic TopicID) error {
	_, err := c.propose(ctx, cmdRemotePurged, &remotePurgedV1{Topic: topic})
	return err
}
