package broker

import (
	"context"
	"fmt"
	"path/filepath"
	"strings"
	"testing"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/mqproject/mq/lib/kafkaext"
	"github.com/mqproject/mq/lib/record"
	"github.com/mqproject/mq/lib/vfs/faultfs"
)

// describeLogDirs sends DescribeLogDirs for topics (nil: all) at version v
// and returns the one directory of the answer.
func describeLogDirs(t *testing.T, tb *testBroker, v int16, topics []kmsg.DescribeLogDirsRequestTopic) kmsg.DescribeLogDirsResponseDir {
	t.Helper()
	req := kmsg.NewPtrDescribeLogDirsRequest()
	req.Topics = topics
	resp := tb.do(t, v, req).(*kmsg.DescribeLogDirsResponse)
	if resp.ErrorCode != 0 || len(resp.Dirs) != 1 {
		t.Fatalf("v%d: error %d, %d dirs, want one", v, resp.ErrorCode, len(resp.Dirs))
	}
	return resp.Dirs[0]
}

// partitionSizes maps "topic-partition" to the size a directory reports.
func partitionSizes(dir kmsg.DescribeLogDirsResponseDir) map[string]int64 {
	out := map[string]int64{}
	for _, rt := range dir.Topics {
		for _, rp := range rt.Partitions {
			out[fmt.Sprintf("%s-%d", rt.Topic, rp.Partition)] = rp.Size
		}
	}
	return out
}

func TestFullDiskIsAStorageErrorWithHealthInDescribeLogDirs(t *testing.T) {
	ffs := faultfs.New(nil)
	tb := startBrokerFS(t, "", nil, ffs)
	tb.createTopic(t, "t", 2, nil)
	batch := func() []byte { return testBatch(t, record.BuildOptions{}, "v", 3) }
	for p := range int32(2) {
		if got := produce(t, tb, "t", p, -1, batch()); got.ErrorCode != 0 {
			t.Fatalf("produce to t-%d: %+v", p, got)
		}
	}

	// Partition 0's disk is full.
	ffs.NoSpaceAfter(filepath.Join("t-0", "00000000000000000000.log"), 0)
	for range 3 {
		got := produce(t, tb, "t", 0, -1, batch())
		if err := kerr.ErrorForCode(got.ErrorCode); err != kerr.KafkaStorageError {
			t.Fatalf("produce to a full disk: %v, want KAFKA_STORAGE_ERROR", err)
		}
		if got.ErrorMessage == nil || !strings.Contains(*got.ErrorMessage, "no space left on device") {
			t.Fatalf("produce error message %v, want it to say the disk is full", got.ErrorMessage)
		}
	}
	if got := produce(t, tb, "t", 1, -1, batch()); got.ErrorCode != 0 {
		t.Fatalf("produce to t-1 while t-0 fails: %+v", got)
	}
	var errLines []string
	for _, line := range strings.Split(tb.logs.String(), "\n") {
		if strings.Contains(line, "level=ERROR") {
			errLines = append(errLines, line)
		}
	}
	if len(errLines) != 1 || !strings.Contains(errLines[0], "topic=t partition=0") || !strings.Contains(errLines[0], "no space left on device") {
		t.Fatalf("error lines %q, want one naming t-0 and the error", errLines)
	}

	for v := int16(0); v <= 5; v++ {
		dir := describeLogDirs(t, tb, v, nil)
		if err := kerr.ErrorForCode(dir.ErrorCode); err != kerr.KafkaStorageError {
			t.Fatalf("v%d: directory error %v, want KAFKA_STORAGE_ERROR while failing", v, err)
		}
		if !filepath.IsAbs(dir.Dir) {
			t.Fatalf("v%d: directory %q is not absolute", v, dir.Dir)
		}
		sizes := partitionSizes(dir)
		for _, tp := range []topicPartition{{"t", 0}, {"t", 1}} {
			want := tb.parts.Lookup(tp.topic, tp.partition).Log().Size()
			if got, ok := sizes[fmt.Sprintf("%s-%d", tp.topic, tp.partition)]; !ok || got != want || want == 0 {
				t.Fatalf("v%d: %s-%d size %d (listed %v), want %d", v, tp.topic, tp.partition, got, ok, want)
			}
		}
		if v >= 4 && (dir.TotalBytes <= 0 || dir.UsableBytes < 0 || dir.UsableBytes > dir.TotalBytes) {
			t.Fatalf("v%d: total %d, usable %d bytes", v, dir.TotalBytes, dir.UsableBytes)
		}
		var dh kafkaext.DirHealth
		ok, err := kafkaext.Get(&dir.UnknownTags, kafkaext.LogDir, &dh)
		if v < 2 {
			if ok {
				t.Fatalf("v%d carries tags", v)
			}
			continue
		}
		if !ok || err != nil || !dh.Failing || !strings.Contains(dh.Error, "no space left on device") ||
			dh.StorageErrors != 3 || dh.FailingSinceMillis <= 0 {
			t.Fatalf("v%d: dir health %+v (%v, %v)", v, dh, ok, err)
		}
		for _, rt := range dir.Topics {
			for _, rp := range rt.Partitions {
				var ph kafkaext.PartitionHealth
				ok, err := kafkaext.Get(&rp.UnknownTags, kafkaext.LogDirPartition, &ph)
				switch {
				case err != nil:
					t.Fatal(err)
				case rp.Partition == 0 && (!ok || !strings.Contains(ph.StorageError, "no space left on device") || ph.FailingSinceMillis != dh.FailingSinceMillis):
					t.Fatalf("v%d: t-0 health %+v (%v), want its storage error", v, ph, ok)
				case rp.Partition == 1 && ok:
					t.Fatalf("v%d: healthy t-1 has health %+v", v, ph)
				}
			}
		}
	}

	// One partition asked for; the directory still says it is failing.
	dir := describeLogDirs(t, tb, 4, []kmsg.DescribeLogDirsRequestTopic{{Topic: "t", Partitions: []int32{1}}, {Topic: "none", Partitions: []int32{0}}})
	if sizes := partitionSizes(dir); len(sizes) != 1 || sizes["t-1"] == 0 || dir.ErrorCode != kerr.KafkaStorageError.Code {
		t.Fatalf("describe t-1 alone: %v, error %d", sizes, dir.ErrorCode)
	}

	// Space again: the next write clears both states.
	ffs.Clear()
	if got := produce(t, tb, "t", 0, -1, batch()); got.ErrorCode != 0 {
		t.Fatalf("produce after space came back: %+v", got)
	}
	dir = describeLogDirs(t, tb, 5, nil)
	var dh kafkaext.DirHealth
	if _, err := kafkaext.Get(&dir.UnknownTags, kafkaext.LogDir, &dh); err != nil || dir.ErrorCode != 0 || dh.Failing || dh.Error != "" || dh.StorageErrors != 3 {
		t.Fatalf("after recovery: error %d, health %+v (%v)", dir.ErrorCode, dh, err)
	}
	if !strings.Contains(tb.logs.String(), "appends recovered") || !strings.Contains(tb.logs.String(), "failed_appends=3") {
		t.Fatalf("no recovery line counting 3 failures in:\n%s", tb.logs.String())
	}
	if n := tb.parts.Storage().FailedAppends.Load(); n != 3 {
		t.Fatalf("storage counter %d, want 3", n)
	}
}

func TestDescribeLogDirsWithKadm(t *testing.T) {
	ffs := faultfs.New(nil)
	tb := startBrokerFS(t, "", nil, ffs)
	tb.createTopic(t, "k", 1, nil)
	_, adm := startAdminClient(t, tb.Broker)
	ctx := context.Background()
	if got := produce(t, tb, "k", 0, -1, testBatch(t, record.BuildOptions{}, "v", 2)); got.ErrorCode != 0 {
		t.Fatal(got)
	}
	all, err := adm.DescribeAllLogDirs(ctx, nil)
	if err != nil {
		t.Fatal(err)
	}
	dirs := all[1]
	if len(dirs) != 1 {
		t.Fatalf("log dirs of node 1: %v", all)
	}
	for _, d := range dirs {
		if d.Err != nil || d.Dir != tb.dir || d.TotalBytes <= 0 || d.Topics["k"][0].Size == 0 {
			t.Fatalf("healthy dir: %+v", d)
		}
	}

	ffs.NoSpaceAfter(".log", 0)
	if got := produce(t, tb, "k", 0, -1, testBatch(t, record.BuildOptions{}, "v", 2)); got.ErrorCode != kerr.KafkaStorageError.Code {
		t.Fatal(got)
	}
	one, err := adm.DescribeBrokerLogDirs(ctx, 1, kadm.TopicsSet{"k": {0: {}}})
	if err != nil {
		t.Fatal(err)
	}
	d := one[tb.dir]
	if d.Err != kerr.KafkaStorageError || d.Topics["k"][0].Size == 0 {
		t.Fatalf("failing dir: %+v", d)
	}
}
