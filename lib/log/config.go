package log

import (
	"fmt"
	"log/slog"
	"math"
	"time"

	"github.com/mqproject/mq/lib/clock"
	"github.com/mqproject/mq/lib/vfs"
)

// FlushPolicy says when appended bytes are fsynced (mq's log.flush.policy,
// topic config flush.policy).
type FlushPolicy int

const (
	// FlushOS leaves writeback to the page cache; the log fsyncs on segment
	// roll, Flush and Close. A crash of the machine (not of the process) can
	// lose acknowledged batches.
	FlushOS FlushPolicy = iota
	// FlushInterval fsyncs every Config.FlushInterval in the background.
	FlushInterval
	// FlushAlways makes Append return only once its bytes are fsynced.
	// Concurrent appends share one fsync (group commit).
	FlushAlways
)

func (p FlushPolicy) String() string {
	switch p {
	case FlushOS:
		return "os"
	case FlushInterval:
		return "interval"
	case FlushAlways:
		return "always"
	}
	return fmt.Sprintf("FlushPolicy(%d)", int(p))
}

// ParseFlushPolicy parses "os", "interval" or "always".
func ParseFlushPolicy(s string) (FlushPolicy, error) {
	switch s {
	case "os":
		return FlushOS, nil
	case "interval":
		return FlushInterval, nil
	case "always":
		return FlushAlways, nil
	}
	return FlushOS, fmt.Errorf("log: unknown flush policy %q (want os, interval or always)", s)
}

// Config holds the per-log settings, named after Kafka's topic configs.
// Start from DefaultConfig: SegmentBytes, SegmentMS, IndexIntervalBytes and
// FlushInterval take their default when zero or negative, but a zero
// RetentionMS or RetentionBytes means what it says (keep nothing in closed
// segments).
type Config struct {
	// SegmentBytes is segment.bytes: the active segment is rolled before an
	// append that would make it larger. At most 2 GiB - 1 (index positions
	// are 32-bit). Default 1 GiB.
	SegmentBytes int64
	// SegmentMS is segment.ms: the active segment is rolled before an
	// append when its first batch's max timestamp is older than this many
	// milliseconds. Default 7 days.
	SegmentMS int64
	// RetentionMS is retention.ms: closed segments whose largest timestamp
	// is older are deleted by EnforceRetention. -1 keeps them forever.
	// Default 7 days.
	RetentionMS int64
	// RetentionBytes is retention.bytes: EnforceRetention deletes the oldest
	// closed segments while the log would stay at least this big without
	// them. -1 (the default) is unlimited.
	RetentionBytes int64
	// IndexIntervalBytes is index.interval.bytes: the offset index gets an
	// entry every this many bytes of log. Default 4096.
	IndexIntervalBytes int32
	// FlushPolicy is flush.policy (broker: log.flush.policy).
	FlushPolicy FlushPolicy
	// FlushInterval is log.flush.interval.ms, used by FlushInterval.
	// Default 1s.
	FlushInterval time.Duration
	// LogAppendTime is message.timestamp.type=LogAppendTime: Append stamps
	// each batch with the clock's time.
	LogAppendTime bool
	// RemoteStorage is remote.storage.enable: the log's closed segments
	// are copied to a remote store (lib/tier), and EnforceRetention
	// applies LocalRetentionMS and LocalRetentionBytes instead of the
	// retention above, to the segments below the remote end
	// (SetRemoteEnd) only: a segment not recorded as uploaded stays.
	RemoteStorage bool
	// LocalRetentionMS and LocalRetentionBytes are local.retention.ms and
	// local.retention.bytes, resolved (-2, "as retention", already
	// replaced by the retention's value); -1 is unlimited.
	LocalRetentionMS, LocalRetentionBytes int64
}

// Defaults.
const (
	DefaultSegmentBytes       = 1 << 30
	DefaultSegmentMS          = 7 * 24 * 60 * 60 * 1000
	DefaultRetentionMS        = 7 * 24 * 60 * 60 * 1000
	DefaultIndexIntervalBytes = 4096
	DefaultFlushInterval      = time.Second
)

// DefaultConfig returns Kafka's defaults and FlushOS.
func DefaultConfig() Config {
	return Config{
		SegmentBytes:       DefaultSegmentBytes,
		SegmentMS:          DefaultSegmentMS,
		RetentionMS:        DefaultRetentionMS,
		RetentionBytes:     -1,
		IndexIntervalBytes: DefaultIndexIntervalBytes,
		FlushPolicy:        FlushOS,
		FlushInterval:      DefaultFlushInterval,
	}
}

func (c Config) normalized() Config {
	if c.SegmentBytes <= 0 {
		c.SegmentBytes = DefaultSegmentBytes
	}
	if c.SegmentBytes > math.MaxInt32 {
		c.SegmentBytes = math.MaxInt32
	}
	if c.SegmentMS <= 0 {
		c.SegmentMS = DefaultSegmentMS
	}
	if c.IndexIntervalBytes <= 0 {
		c.IndexIntervalBytes = DefaultIndexIntervalBytes
	}
	if c.FlushInterval <= 0 {
		c.FlushInterval = DefaultFlushInterval
	}
	return c
}

// Options are the log's environment.
type Options struct {
	FS vfs.FS // nil: the real file system (vfs.OS)
	// Files bounds the segment file descriptors this log keeps open,
	// together with the other logs given the same value (a broker's
	// log.max.open.files); nil: one Files shared by every log of the
	// process opened without one, bounded by DefaultMaxOpenFiles.
	Files  *Files
	Clock  clock.Clock  // nil: real time
	Logger *slog.Logger // nil: silent
	// Counters, when set, count the log's storage failures together with
	// those of the other logs given the same value.
	Counters *StorageCounters
	// Clean is what the Close of the previous run left of this log
	// (Log.CleanShutdown), nil when unknown. When the files agree with it
	// (the recovery point checkpoint, the active segment's size, its last
	// batch headers: see trustCleanLocked), Open runs no recovery scan,
	// keeps the indexes on disk and rewrites no checkpoint; otherwise it
	// recovers as after a crash. Bytes it did not scan are checked before
	// they are served, as those of closed segments always are.
	Clean *CleanShutdown
	// DirDurable says the caller has made the log directory's entry in
	// its parent durable already (one fsync for many new logs); Open
	// then does not fsync the parent.
	DirDurable bool
	// Synced says the caller synced the whole file system (syncfs) after
	// the last process that wrote the log stopped, as a restart after a
	// crash may: what the files hold now is durable, so Open rewrites only
	// the checkpoints whose contents its recovery changes.
	Synced bool
	// Batch, when not nil, defers the fsyncs of the checkpoints Open and
	// the calls after it write until Batch.Commit (see SyncBatch): the
	// log must not be served before.
	Batch *SyncBatch
	// Checkpoints, when not nil, keeps the log's recovery point,
	// leader-epoch history and high-water mark together with those of
	// the other logs of its data directory, in one file (see
	// Checkpoints); nil: in files of the log's own.
	Checkpoints *Checkpoints
	// Owner names what the log belongs to (a broker gives the topic ID),
	// for its Checkpoints entry: a caller finding a directory whose entry
	// names another owner (Checkpoints.Owner) knows that an earlier log of
	// the same name left it. No spaces; "" names none.
	Owner string
}
