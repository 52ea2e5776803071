package pipe

import (
	"context"
	"fmt"
	"io"
	"maps"
	"slices"
	"strings"
	"sync"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/mqproject/mq/lib/kafkaext"
)

// storageReporter tells the user, once per partition and incident, that a
// partition's writes fail. kgo retries KAFKA_STORAGE_ERROR without a word
// (and drops the response's ErrorMessage), so the reporter asks the
// brokers with DescribeLogDirs, whose health fields (lib/tags) carry the
// error. Used by one goroutine at a time; last may be called from any.
type storageReporter struct {
	topic  string
	stderr io.Writer

	reported map[int32]bool // partitions whose current incident was reported

	mu       sync.Mutex
	lastLine string // the latest incident, for the line that gives up
}

// probe asks every broker about the topic's partitions and prints a line
// for each newly failing one. A failed probe prints nothing: the watch
// that calls it has its own way to tell a broker that does not answer.
func (s *storageReporter) probe(ctx context.Context, cl *kgo.Client) {
	failing, err := storageErrors(ctx, cl, s.topic)
	if err != nil {
		return
	}
	if s.reported == nil {
		s.reported = map[int32]bool{}
	}
	for p := range s.reported {
		if _, ok := failing[p]; !ok {
			delete(s.reported, p) // healthy again: a new incident is reported anew
		}
	}
	for _, p := range slices.Sorted(maps.Keys(failing)) {
		if s.reported[p] {
			continue
		}
		s.reported[p] = true
		line := fmt.Sprintf("storage error on %s-%d (%s)", s.topic, p, failing[p])
		s.mu.Lock()
		s.lastLine = line
		s.mu.Unlock()
		fmt.Fprintf(s.stderr, "mqpipe: %s; retrying\n", line)
	}
}

// last is the latest storage error reported, "" when none was.
func (s *storageReporter) last() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.lastLine
}

// storageErrors returns, by partition, the cause of the storage error of
// each partition of topic whose writes fail on some broker. The cause is
// the end of the broker's error ("no space left on device"), from mq's
// health field; for a broker without it (not mq), the log directory's
// KAFKA_STORAGE_ERROR.
func storageErrors(ctx context.Context, cl *kgo.Client, topic string) (map[int32]string, error) {
	meta := kmsg.NewPtrMetadataRequest()
	mt := kmsg.NewMetadataRequestTopic()
	mt.Topic = kmsg.StringPtr(topic)
	meta.Topics = append(meta.Topics, mt)
	mresp, err := meta.RequestWith(ctx, cl)
	if err != nil {
		return nil, err
	}
	req := kmsg.NewPtrDescribeLogDirsRequest()
	for _, t := range mresp.Topics {
		if t.Topic == nil || *t.Topic != topic {
			continue
		}
		rt := kmsg.NewDescribeLogDirsRequestTopic()
		rt.Topic = topic
		for _, p := range t.Partitions {
			rt.Partitions = append(rt.Partitions, p.Partition)
		}
		req.Topics = append(req.Topics, rt)
	}
	if len(req.Topics) == 0 {
		return nil, nil
	}
	failing := map[int32]string{}
	for _, shard := range cl.RequestSharded(ctx, req) {
		if shard.Err != nil {
			continue
		}
		resp := shard.Resp.(*kmsg.DescribeLogDirsResponse)
		for _, dir := range resp.Dirs {
			for _, rt := range dir.Topics {
				if rt.Topic != topic {
					continue
				}
				for _, rp := range rt.Partitions {
					var h kafkaext.PartitionHealth
					if ok, err := kafkaext.Get(&rp.UnknownTags, kafkaext.LogDirPartition, &h); ok && err == nil {
						if h.StorageError != "" {
							failing[rp.Partition] = errorCause(h.StorageError)
						}
						continue
					}
					if dir.ErrorCode == kerr.KafkaStorageError.Code {
						failing[rp.Partition] = fmt.Sprintf("%s in log directory %s of broker %d", kerr.KafkaStorageError.Message, dir.Dir, shard.Meta.NodeID)
					}
				}
			}
		}
	}
	return failing, nil
}

// errorCause is the last part of a wrapped error's text, which names the
// cause: "log: append at offset 7: write /d/t-0/0.log: no space left on
// device" gives "no space left on device".
func errorCause(s string) string {
	if i := strings.LastIndex(s, ": "); i >= 0 && i+2 < len(s) {
		return s[i+2:]
	}
	return s
}
