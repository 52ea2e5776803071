package broker

import (
	"context"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/mqproject/mq/lib/kafkaext"
	"github.com/mqproject/mq/lib/partition"
	"github.com/mqproject/mq/lib/server"
)

// dirHealth is the kafkaext.LogDir field of the directory.
func dirHealth(dir *partition.LogDir) kafkaext.DirHealth {
	h := kafkaext.DirHealth{Failing: dir.Failing, StorageErrors: dir.StorageErrors, CorruptRanges: dir.DamagedRanges}
	if dir.Failing {
		h.FailingSinceMillis = dir.Since.UnixMilli()
		if dir.LastErr != nil {
			h.Error = dir.LastErr.Error()
		}
	}
	return h
}

// partitionHealth is the kafkaext.LogDirPartition field of a partition, and
// whether it has anything to say.
func partitionHealth(p *partition.LogDirPartition) (kafkaext.PartitionHealth, bool) {
	if !p.Health.Failing && len(p.Damaged) == 0 && p.Cleaner == nil {
		return kafkaext.PartitionHealth{}, false
	}
	h := kafkaext.PartitionHealth{Cleaner: p.Cleaner}
	if p.Health.Failing {
		h.FailingSinceMillis = p.Health.Since.UnixMilli()
		if p.Health.Err != nil {
			h.StorageError = p.Health.Err.Error()
		}
	}
	for _, d := range p.Damaged {
		h.Damaged = append(h.Damaged, damagedRange(d))
	}
	return h, true
}

// handleDescribeLogDirs answers DescribeLogDirs: the one log directory of
// this node with the requested partitions it hosts (all of them for a null
// topic list; partitions hosted elsewhere are left out, as Kafka does),
// their sizes, the volume's total and usable bytes (v4+), and, in the
// flexible versions, mq's health fields (kafkaext.LogDir,
// kafkaext.LogDirPartition). While writes to the directory fail its error code
// is KAFKA_STORAGE_ERROR; the partitions are listed all the same.
func (b *Broker) handleDescribeLogDirs(_ context.Context, _ *server.ConnInfo, req *server.Request) server.Reply {
	r := req.Body.(*kmsg.DescribeLogDirsRequest)
	resp := r.ResponseKind().(*kmsg.DescribeLogDirsResponse)
	var want func(string, int32) bool
	if r.Topics != nil {
		set := map[topicPartition]bool{}
		for _, rt := range r.Topics {
			for _, p := range rt.Partitions {
				set[topicPartition{rt.Topic, p}] = true
			}
		}
		want = func(topic string, p int32) bool { return set[topicPartition{topic, p}] }
	}
	dir := b.parts.LogDir(want)

	rd := kmsg.NewDescribeLogDirsResponseDir()
	rd.Dir = dir.Path
	if dir.Failing {
		rd.ErrorCode = kerr.KafkaStorageError.Code
	}
	rd.TotalBytes, rd.UsableBytes = dir.TotalBytes, dir.UsableBytes
	for i := range dir.Partitions {
		p := &dir.Partitions[i]
		if n := len(rd.Topics); n == 0 || rd.Topics[n-1].Topic != p.Topic {
			rt := kmsg.NewDescribeLogDirsResponseDirTopic()
			rt.Topic = p.Topic
			rd.Topics = append(rd.Topics, rt)
		}
		rt := &rd.Topics[len(rd.Topics)-1]
		rp := kmsg.NewDescribeLogDirsResponseDirTopicPartition()
		rp.Partition, rp.Size = p.Partition, p.Size
		// OffsetLag is 0: a leader's high-water mark never passes its
		// log end offset, nor a follower's, and mq has no future logs.
		if h, ok := partitionHealth(p); ok {
			if err := kafkaext.Set(&rp.UnknownTags, kafkaext.LogDirPartition, h); err != nil {
				b.log.Error("describe log dirs", "err", err)
			}
		}
		if e, ok := b.parts.TieredExtent(p.Topic, p.Partition); ok {
			if err := kafkaext.Set(&rp.UnknownTags, kafkaext.LogDirTiered, e); err != nil {
				b.log.Error("describe log dirs", "err", err)
			}
		}
		rt.Partitions = append(rt.Partitions, rp)
	}
	if err := kafkaext.Set(&rd.UnknownTags, kafkaext.LogDir, dirHealth(&dir)); err != nil {
		b.log.Error("describe log dirs", "err", err)
	}
	if h, ok := b.parts.TierHealth(); ok {
		if err := kafkaext.Set(&rd.UnknownTags, kafkaext.LogDirTier, h); err != nil {
			b.log.Error("describe log dirs", "err", err)
		}
	}
	resp.Dirs = append(resp.Dirs, rd)
	return reply(resp)
}
