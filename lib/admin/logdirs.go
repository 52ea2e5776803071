package admin

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"net"
	"os"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/mqproject/mq/lib/client"
	"github.com/mqproject/mq/lib/kafkaext"
)

// LogDirDescription is one log directory of a broker in cluster describe.
type LogDirDescription struct {
	Path string `json:"path"`
	// TotalBytes and UsableBytes are the size of the volume holding the
	// directory and what is free of it; -1: unknown.
	TotalBytes  int64 `json:"total_bytes"`
	UsableBytes int64 `json:"usable_bytes"`
	// Failing is set while writes to the directory fail (a full disk, an
	// I/O error); Error is the last write error then, or the directory's
	// Kafka error for a broker that does not say more.
	Failing            bool   `json:"failing"`
	Error              string `json:"error,omitempty"`
	FailingSinceMillis int64  `json:"failing_since_ms,omitempty"`
	// StorageErrors counts the failed writes since the broker started,
	// DamagedRanges the damaged ranges of partition logs it found (mq
	// brokers only; 0 otherwise).
	StorageErrors uint64 `json:"storage_errors"`
	DamagedRanges uint64 `json:"damaged_ranges"`
	// TierUploadFailing is set while the broker's last upload of a
	// tiered partition to the remote store failed, TierError its error;
	// TierUploadLagBytes is what waits to be uploaded (mq brokers that
	// tier partitions only).
	TierUploadFailing  bool   `json:"tier_upload_failing,omitempty"`
	TierError          string `json:"tier_error,omitempty"`
	TierUploadLagBytes int64  `json:"tier_upload_lag_bytes,omitempty"`
	// Tiered: the broker said how its uploads go (it tiers partitions to
	// a remote store), so TierUploadLagBytes 0 is nothing waiting, not
	// unknown.
	Tiered bool `json:"tiered,omitempty"`
}

// TieredExtent is where a tiered partition's log is: on the leader's
// disk and in the remote store (remote.storage.enable). Offsets are -1
// where a part is empty; the end offsets are the offset after the last
// one held.
type TieredExtent struct {
	LocalStartOffset  int64 `json:"local_start_offset"`
	LocalEndOffset    int64 `json:"local_end_offset"`
	LocalBytes        int64 `json:"local_bytes"`
	RemoteStartOffset int64 `json:"remote_start_offset"`
	RemoteEndOffset   int64 `json:"remote_end_offset"`
	RemoteBytes       int64 `json:"remote_bytes"`
	RemoteSegments    int   `json:"remote_segments"`
}

// ReplicaDamage is a damaged range of one replica's log: offsets its
// broker does not serve, because their bytes failed their checks.
type ReplicaDamage struct {
	Broker     int32  `json:"broker"`
	FromOffset int64  `json:"from_offset"`
	ToOffset   int64  `json:"to_offset"` // exclusive
	Segment    string `json:"segment"`
	Position   int64  `json:"position"`
	Length     int64  `json:"length"`
	Reason     string `json:"reason"`
	// DetectedMillis is when the broker found it (Unix ms).
	DetectedMillis int64 `json:"detected_ms"`
	// Skipped: given up with records skip-damaged; consumers step over it.
	Skipped bool `json:"skipped"`
}

// ReplicaCleaner is what the log cleaner has done to one replica of a
// compacted topic's partition.
type ReplicaCleaner struct {
	Broker int32 `json:"broker"`
	// DirtyRatio is the share of the sealed segments' bytes not compacted
	// yet, from FirstDirtyOffset on.
	DirtyRatio       float64 `json:"dirty_ratio"`
	FirstDirtyOffset int64   `json:"first_dirty_offset"`
	// LastCleanedMillis is when a pass last cleaned it (Unix ms), 0: never.
	LastCleanedMillis int64 `json:"last_cleaned_ms"`
	// Passes and BytesReclaimed count the passes since its broker started
	// and the bytes they freed.
	Passes         int64 `json:"passes"`
	BytesReclaimed int64 `json:"bytes_reclaimed"`
}

// ReplicaStorageError is a replica of a partition whose writes fail.
type ReplicaStorageError struct {
	Broker             int32  `json:"broker"`
	Dir                string `json:"dir"`
	Error              string `json:"error"`
	FailingSinceMillis int64  `json:"failing_since_ms,omitempty"`
}

// logDirs is what the brokers' DescribeLogDirs answers say.
type logDirs struct {
	dirs map[int32][]LogDirDescription // by broker, sorted by path
	// failing are the replicas whose writes fail, and damaged the damaged
	// ranges of replicas, by topic and partition.
	failing map[string]map[int32][]ReplicaStorageError
	damaged map[string]map[int32][]ReplicaDamage
	cleaner map[string]map[int32][]ReplicaCleaner
	// tiered are the tiered partitions' extents by topic, partition and
	// broker.
	tiered map[string]map[int32]map[int32]TieredExtent
	// sizes are the bytes of each replica asked about, by topic,
	// partition and broker.
	sizes map[string]map[int32]map[int32]int64
	errs  map[int32]string // brokers whose answer could not be had
}

// logDirsWait bounds how long describeLogDirs waits for the brokers: a
// broker that is stopped (SIGSTOP) or cut off accepts the connection and
// never answers, and must not hang a describe of the rest.
const logDirsWait = 5 * time.Second

// describeLogDirs asks each of brokers about its log directories and the
// given topics' replicas in them (none when topics is empty). The request
// goes to each broker by id: franz-go sends a DescribeLogDirs that names
// topics to the replicas' brokers only, and one with an empty topic list
// to a single broker, so neither would reach every broker. A broker that
// cannot answer, or not within logDirsWait, gets an entry in errs; it fails
// nothing else.
func (a *Admin) describeLogDirs(ctx context.Context, brokers []int32, topics map[string][]int32) logDirs {
	req := kmsg.NewPtrDescribeLogDirsRequest()
	req.Topics = []kmsg.DescribeLogDirsRequestTopic{} // not null: null asks for every partition
	for _, t := range slices.Sorted(maps.Keys(topics)) {
		rt := kmsg.NewDescribeLogDirsRequestTopic()
		rt.Topic, rt.Partitions = t, topics[t]
		req.Topics = append(req.Topics, rt)
	}
	return a.askLogDirs(ctx, brokers, req)
}

// LogDirs is what every broker asked said of its log directories and of
// every replica in them.
type LogDirs struct {
	// Dirs are each broker's directories, sorted by path.
	Dirs map[int32][]LogDirDescription
	// Sizes are the replicas' log sizes: broker, topic, partition.
	Sizes map[int32]map[string]map[int32]int64
	// Errors says why a broker's answer could not be had.
	Errors map[int32]string
}

// DescribeAllLogDirs asks each of brokers about its log directories and
// every replica in them (mqtail's log sizes and upload lag), within
// logDirsWait, as describeLogDirs does.
func (a *Admin) DescribeAllLogDirs(ctx context.Context, brokers []int32) LogDirs {
	req := kmsg.NewPtrDescribeLogDirsRequest() // Topics null: every partition
	d := a.askLogDirs(ctx, brokers, req)
	out := LogDirs{Dirs: d.dirs, Sizes: map[int32]map[string]map[int32]int64{}, Errors: d.errs}
	for topic, parts := range d.sizes {
		for p, byBroker := range parts {
			for broker, size := range byBroker {
				if out.Sizes[broker] == nil {
					out.Sizes[broker] = map[string]map[int32]int64{}
				}
				if out.Sizes[broker][topic] == nil {
					out.Sizes[broker][topic] = map[int32]int64{}
				}
				out.Sizes[broker][topic][p] = size
			}
		}
	}
	return out
}

// askLogDirs sends req to each of brokers and reads their answers.
func (a *Admin) askLogDirs(ctx context.Context, brokers []int32, req *kmsg.DescribeLogDirsRequest) logDirs {
	ctx, wait, cancel := boundedWait(ctx, logDirsWait)
	defer cancel()
	out := logDirs{dirs: map[int32][]LogDirDescription{}, failing: map[string]map[int32][]ReplicaStorageError{},
		damaged: map[string]map[int32][]ReplicaDamage{}, cleaner: map[string]map[int32][]ReplicaCleaner{},
		sizes: map[string]map[int32]map[int32]int64{}, errs: map[int32]string{}}
	type answer struct {
		node int32
		resp kmsg.Response
		err  error
	}
	answers := make([]answer, len(brokers))
	var wg sync.WaitGroup
	for i, node := range brokers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			resp, err := a.cl.Broker(int(node)).Request(ctx, req)
			answers[i] = answer{node, resp, err}
		}()
	}
	wg.Wait()
	for _, ans := range answers {
		node := ans.node
		if ans.err != nil {
			out.errs[node] = brokerErrText(ans.err, wait)
			continue
		}
		resp := ans.resp.(*kmsg.DescribeLogDirsResponse)
		if err := kerr.ErrorForCode(resp.ErrorCode); err != nil {
			out.errs[node] = errText(err, "")
			continue
		}
		for _, rd := range resp.Dirs {
			out.dirs[node] = append(out.dirs[node], describeDir(&rd))
			for _, rt := range rd.Topics {
				for _, rp := range rt.Partitions {
					if out.sizes[rt.Topic] == nil {
						out.sizes[rt.Topic] = map[int32]map[int32]int64{}
					}
					if out.sizes[rt.Topic][rp.Partition] == nil {
						out.sizes[rt.Topic][rp.Partition] = map[int32]int64{}
					}
					out.sizes[rt.Topic][rp.Partition][node] = rp.Size
					var e kafkaext.TieredExtent
					if ok, err := kafkaext.Get(&rp.UnknownTags, kafkaext.LogDirTiered, &e); ok && err == nil {
						if out.tiered == nil {
							out.tiered = map[string]map[int32]map[int32]TieredExtent{}
						}
						if out.tiered[rt.Topic] == nil {
							out.tiered[rt.Topic] = map[int32]map[int32]TieredExtent{}
						}
						if out.tiered[rt.Topic][rp.Partition] == nil {
							out.tiered[rt.Topic][rp.Partition] = map[int32]TieredExtent{}
						}
						out.tiered[rt.Topic][rp.Partition][node] = TieredExtent(e)
					}
					var h kafkaext.PartitionHealth
					if ok, err := kafkaext.Get(&rp.UnknownTags, kafkaext.LogDirPartition, &h); !ok || err != nil {
						continue
					}
					for _, d := range h.Damaged {
						if out.damaged[rt.Topic] == nil {
							out.damaged[rt.Topic] = map[int32][]ReplicaDamage{}
						}
						out.damaged[rt.Topic][rp.Partition] = append(out.damaged[rt.Topic][rp.Partition], ReplicaDamage{
							Broker: node, FromOffset: d.FromOffset, ToOffset: d.ToOffset, Segment: d.Segment, Position: d.Position,
							Length: d.Length, Reason: d.Reason, DetectedMillis: d.DetectedMillis, Skipped: d.Skipped})
					}
					if c := h.Cleaner; c != nil {
						if out.cleaner[rt.Topic] == nil {
							out.cleaner[rt.Topic] = map[int32][]ReplicaCleaner{}
						}
						out.cleaner[rt.Topic][rp.Partition] = append(out.cleaner[rt.Topic][rp.Partition], ReplicaCleaner{
							Broker: node, DirtyRatio: c.DirtyRatio, FirstDirtyOffset: c.FirstDirtyOffset,
							LastCleanedMillis: c.LastCleanedMillis, Passes: c.Passes, BytesReclaimed: c.BytesReclaimed})
					}
					if h.StorageError == "" {
						continue
					}
					if out.failing[rt.Topic] == nil {
						out.failing[rt.Topic] = map[int32][]ReplicaStorageError{}
					}
					out.failing[rt.Topic][rp.Partition] = append(out.failing[rt.Topic][rp.Partition],
						ReplicaStorageError{Broker: node, Dir: rd.Dir, Error: h.StorageError, FailingSinceMillis: h.FailingSinceMillis})
				}
			}
		}
		slices.SortFunc(out.dirs[node], func(x, y LogDirDescription) int { return strings.Compare(x.Path, y.Path) })
	}
	for _, parts := range out.failing {
		for _, rs := range parts {
			slices.SortFunc(rs, func(x, y ReplicaStorageError) int { return int(x.Broker) - int(y.Broker) })
		}
	}
	for _, parts := range out.cleaner {
		for _, rs := range parts {
			slices.SortFunc(rs, func(x, y ReplicaCleaner) int { return int(x.Broker) - int(y.Broker) })
		}
	}
	for _, parts := range out.damaged {
		for _, ds := range parts {
			slices.SortFunc(ds, func(x, y ReplicaDamage) int {
				if x.Broker != y.Broker {
					return int(x.Broker) - int(y.Broker)
				}
				return int(x.FromOffset - y.FromOffset)
			})
		}
	}
	return out
}

// describeDir reads one directory of an answer, mq's health field first.
func describeDir(rd *kmsg.DescribeLogDirsResponseDir) LogDirDescription {
	d := LogDirDescription{Path: rd.Dir, TotalBytes: rd.TotalBytes, UsableBytes: rd.UsableBytes}
	var h kafkaext.DirHealth
	if ok, err := kafkaext.Get(&rd.UnknownTags, kafkaext.LogDir, &h); ok && err == nil {
		d.Failing, d.Error, d.FailingSinceMillis, d.StorageErrors = h.Failing, h.Error, h.FailingSinceMillis, h.StorageErrors
		d.DamagedRanges = h.CorruptRanges
	}
	var th kafkaext.TierHealth
	if ok, err := kafkaext.Get(&rd.UnknownTags, kafkaext.LogDirTier, &th); ok && err == nil {
		d.TierUploadFailing, d.TierError, d.TierUploadLagBytes, d.Tiered = th.UploadFailing, th.Error, th.UploadLagBytes, true
	}
	if err := kerr.ErrorForCode(rd.ErrorCode); err != nil {
		d.Failing = true
		if d.Error == "" {
			d.Error = errText(err, "")
		}
	}
	return d
}

// dirState is a log directory's state for a table: "ok", or "failing
// since 15:04:05: ERROR".
func dirState(d LogDirDescription) string {
	damaged := ""
	if d.DamagedRanges > 0 {
		damaged = fmt.Sprintf(" (%d damaged ranges found)", d.DamagedRanges)
	}
	if !d.Failing {
		return "ok" + damaged
	}
	s := "failing"
	if d.FailingSinceMillis > 0 {
		s += " since " + time.UnixMilli(d.FailingSinceMillis).Format(time.TimeOnly)
	}
	if d.Error != "" {
		s += ": " + d.Error
	}
	return s + damaged
}

// sizeText is a byte count for a table: "1.5GiB", "-" when unknown.
func sizeText(n int64) string {
	if n < 0 {
		return "-"
	}
	const unit = 1024
	if n < unit {
		return fmt.Sprintf("%dB", n)
	}
	v, exp := float64(n)/unit, 0
	for v >= unit && exp < 4 {
		v /= unit
		exp++
	}
	return fmt.Sprintf("%.1f%ciB", v, "KMGTP"[exp])
}

// boundedWait is ctx bounded by d, and how long that leaves: d, or less
// when ctx ends sooner (cluster health's --timeout).
func boundedWait(ctx context.Context, d time.Duration) (context.Context, time.Duration, context.CancelFunc) {
	if deadline, ok := ctx.Deadline(); ok {
		d = min(d, max(time.Until(deadline), 0).Round(100*time.Millisecond))
	}
	ctx, cancel := context.WithTimeout(ctx, d)
	return ctx, d, cancel
}

// brokerErrText says why a request to one broker got no answer:
// "unreachable: connection refused", "no answer within 5s" (wait; "no
// answer in time" when wait is 0: not known), else the error's text.
func brokerErrText(err error, wait time.Duration) string {
	switch {
	case errors.Is(err, context.DeadlineExceeded) && wait > 0:
		return "no answer within " + wait.String()
	case errors.Is(err, context.DeadlineExceeded):
		return "no answer in time"
	case client.IsUnreachable(err):
		return "unreachable: " + netCause(err)
	}
	return errText(err, "")
}

// netCause is the part of a connection error a person needs: "connection
// refused" from "dial tcp 127.0.0.1:9092: connect: connection refused".
func netCause(err error) string {
	var sys *os.SyscallError
	if errors.As(err, &sys) {
		return sys.Err.Error()
	}
	var op *net.OpError
	if errors.As(err, &op) && op.Err != nil {
		return op.Err.Error()
	}
	return err.Error()
}
