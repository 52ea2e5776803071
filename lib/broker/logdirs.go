package broker

import (
	"context"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/mqproject/mq/lib/kafkaext"
	"github.com/mqproject/mq/lib/log"
	"github.com/mqproject/mq/lib/server"
	"github.com/mqproject/mq/lib/vfs"
)

// logDirPartition is one hosted partition as its log directory describes it.
type logDirPartition struct {
	topicPartition
	size    int64
	health  log.Health
	damaged []log.Damage
	cleaner *kafkaext.CleanerState // nil: not a compacted topic
}

// logDir is the storage state of the data directory (mq has one log
// directory per node, log.dirs), gathered from its partitions' logs.
type logDir struct {
	path       string
	partitions []logDirPartition // by topic, then partition
	// failing is set while some partition's writes fail; since is when
	// the earliest of those incidents began, lastErr the error of the
	// latest failure.
	failing     bool
	since       time.Time
	lastErr     error
	lastFailure time.Time
	// storageErrors counts the failed writes since mqd started, and
	// damagedRanges the damaged ranges found.
	storageErrors, damagedRanges uint64
}

// logDir describes the data directory with the hosted partitions want
// selects (nil: all). The directory is failing while any of its
// partitions is, whether selected or not.
func (d *dataPlane) logDir(want func(topicPartition) bool) logDir {
	dir := logDir{path: d.b.cfg.Settings.DataDir, storageErrors: d.storage.FailedAppends.Load(),
		damagedRanges: d.storage.DamagedRanges.Load()}
	if abs, err := filepath.Abs(dir.path); err == nil {
		dir.path = abs
	}
	for _, h := range d.all() {
		tp := topicPartition{h.Topic(), h.Partition.Partition()}
		hl := h.Log().Health()
		if hl.Failing {
			if !dir.failing || hl.Since.Before(dir.since) {
				dir.since = hl.Since
			}
			if !dir.failing || hl.LastFailure.After(dir.lastFailure) {
				dir.lastErr, dir.lastFailure = hl.Err, hl.LastFailure
			}
			dir.failing = true
		}
		if want == nil || want(tp) {
			dir.partitions = append(dir.partitions, logDirPartition{topicPartition: tp, size: h.Log().Size(), health: hl,
				damaged: h.Log().Damaged(), cleaner: d.b.cleanerState(h)})
		}
	}
	slices.SortFunc(dir.partitions, func(a, b logDirPartition) int {
		if c := strings.Compare(a.topic, b.topic); c != 0 {
			return c
		}
		return int(a.partition) - int(b.partition)
	})
	return dir
}

// dirHealth is the kafkaext.LogDir field of the directory.
func (dir *logDir) dirHealth() kafkaext.DirHealth {
	h := kafkaext.DirHealth{Failing: dir.failing, StorageErrors: dir.storageErrors, CorruptRanges: dir.damagedRanges}
	if dir.failing {
		h.FailingSinceMillis = dir.since.UnixMilli()
		if dir.lastErr != nil {
			h.Error = dir.lastErr.Error()
		}
	}
	return h
}

// partitionHealth is the kafkaext.LogDirPartition field of a partition, and
// whether it has anything to say.
func partitionHealth(p *logDirPartition) (kafkaext.PartitionHealth, bool) {
	if !p.health.Failing && len(p.damaged) == 0 && p.cleaner == nil {
		return kafkaext.PartitionHealth{}, false
	}
	h := kafkaext.PartitionHealth{Cleaner: p.cleaner}
	if p.health.Failing {
		h.FailingSinceMillis = p.health.Since.UnixMilli()
		if p.health.Err != nil {
			h.StorageError = p.health.Err.Error()
		}
	}
	for _, d := range p.damaged {
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
	var want func(topicPartition) bool
	if r.Topics != nil {
		set := map[topicPartition]bool{}
		for _, rt := range r.Topics {
			for _, p := range rt.Partitions {
				set[topicPartition{rt.Topic, p}] = true
			}
		}
		want = func(tp topicPartition) bool { return set[tp] }
	}
	dir := b.data.logDir(want)

	rd := kmsg.NewDescribeLogDirsResponseDir()
	rd.Dir = dir.path
	if dir.failing {
		rd.ErrorCode = kerr.KafkaStorageError.Code
	}
	rd.TotalBytes, rd.UsableBytes = vfs.VolumeBytes(b.data.fs, dir.path)
	for i := range dir.partitions {
		p := &dir.partitions[i]
		if n := len(rd.Topics); n == 0 || rd.Topics[n-1].Topic != p.topic {
			rt := kmsg.NewDescribeLogDirsResponseDirTopic()
			rt.Topic = p.topic
			rd.Topics = append(rd.Topics, rt)
		}
		rt := &rd.Topics[len(rd.Topics)-1]
		rp := kmsg.NewDescribeLogDirsResponseDirTopicPartition()
		rp.Partition, rp.Size = p.partition, p.size
		// OffsetLag is 0: a leader's high-water mark never passes its
		// log end offset, nor a follower's, and mq has no future logs.
		if h, ok := partitionHealth(p); ok {
			if err := kafkaext.Set(&rp.UnknownTags, kafkaext.LogDirPartition, h); err != nil {
				b.log.Error("describe log dirs", "err", err)
			}
		}
		rt.Partitions = append(rt.Partitions, rp)
	}
	if err := kafkaext.Set(&rd.UnknownTags, kafkaext.LogDir, dir.dirHealth()); err != nil {
		b.log.Error("describe log dirs", "err", err)
	}
	resp.Dirs = append(resp.Dirs, rd)
	return reply(resp)
}

// StorageCounters are the data directory's counts of storage failures
// since the broker started, for a metrics registry.
func (b *Broker) StorageCounters() *log.StorageCounters { return &b.data.storage }
