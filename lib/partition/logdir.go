package partition

import (
	"path/filepath"
	"slices"
	"strings"
	"time"

	"github.com/mqproject/mq/lib/kafkaext"
	"github.com/mqproject/mq/lib/log"
	"github.com/mqproject/mq/lib/vfs"
)

// LogDirPartition is one hosted partition as its log directory describes
// it.
type LogDirPartition struct {
	Topic     string
	Partition int32
	Size      int64
	Health    log.Health
	Damaged   []log.Damage
	Cleaner   *kafkaext.CleanerState // nil: not a compacted topic
}

// LogDir is the storage state of the data directory (mq has one log
// directory per node, log.dirs), gathered from its partitions' logs.
type LogDir struct {
	Path       string
	Partitions []LogDirPartition // by topic, then partition
	// Failing is set while some partition's writes fail; Since is when
	// the earliest of those incidents began, LastErr the error of the
	// latest failure.
	Failing     bool
	Since       time.Time
	LastErr     error
	LastFailure time.Time
	// StorageErrors counts the failed writes since mqd started, and
	// DamagedRanges the damaged ranges found.
	StorageErrors, DamagedRanges uint64
	// TotalBytes and UsableBytes are the volume's, -1 when unknown.
	TotalBytes, UsableBytes int64
}

// LogDir describes the data directory with the hosted partitions want
// selects (nil: all). The directory is failing while any of its
// partitions is, whether selected or not.
func (m *Manager) LogDir(want func(topic string, partition int32) bool) LogDir {
	dir := LogDir{Path: m.cfg.Settings.DataDir, StorageErrors: m.storage.FailedAppends.Load(),
		DamagedRanges: m.storage.DamagedRanges.Load()}
	if abs, err := filepath.Abs(dir.Path); err == nil {
		dir.Path = abs
	}
	dir.TotalBytes, dir.UsableBytes = vfs.VolumeBytes(m.fs, dir.Path)
	for _, h := range m.All() {
		hl := h.Log().Health()
		if hl.Failing {
			if !dir.Failing || hl.Since.Before(dir.Since) {
				dir.Since = hl.Since
			}
			if !dir.Failing || hl.LastFailure.After(dir.LastFailure) {
				dir.LastErr, dir.LastFailure = hl.Err, hl.LastFailure
			}
			dir.Failing = true
		}
		if want == nil || want(h.Topic(), h.Partition.Partition()) {
			dir.Partitions = append(dir.Partitions, LogDirPartition{Topic: h.Topic(), Partition: h.Partition.Partition(),
				Size: h.Log().Size(), Health: hl, Damaged: h.Log().Damaged(), Cleaner: m.CleanerState(h)})
		}
	}
	slices.SortFunc(dir.Partitions, func(a, b LogDirPartition) int {
		if c := strings.Compare(a.Topic, b.Topic); c != 0 {
			return c
		}
		return int(a.Partition) - int(b.Partition)
	})
	return dir
}
