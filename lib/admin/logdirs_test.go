package admin

import (
	"bytes"
	"strings"
	"testing"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/mqproject/mq/lib/client"
	"github.com/mqproject/mq/lib/kafkaext"
)

func TestDescribeDirReadsHealthAndPlainKafkaErrors(t *testing.T) {
	mq := kmsg.NewDescribeLogDirsResponseDir()
	mq.Dir, mq.TotalBytes, mq.UsableBytes, mq.ErrorCode = "/data", 20<<20, 0, kerr.KafkaStorageError.Code
	if err := kafkaext.Set(&mq.UnknownTags, kafkaext.LogDir, kafkaext.DirHealth{Failing: true, Error: "write x: no space left on device", FailingSinceMillis: 1000, StorageErrors: 7}); err != nil {
		t.Fatal(err)
	}
	got := describeDir(&mq)
	want := LogDirDescription{Path: "/data", TotalBytes: 20 << 20, UsableBytes: 0, Failing: true,
		Error: "write x: no space left on device", FailingSinceMillis: 1000, StorageErrors: 7}
	if got != want {
		t.Errorf("mq dir: %+v, want %+v", got, want)
	}

	kafka := kmsg.NewDescribeLogDirsResponseDir()
	kafka.Dir, kafka.ErrorCode = "/k", kerr.KafkaStorageError.Code
	if got := describeDir(&kafka); !got.Failing || !strings.HasPrefix(got.Error, "KAFKA_STORAGE_ERROR") || got.TotalBytes != -1 {
		t.Errorf("Kafka's offline dir: %+v", got)
	}
	ok := kmsg.NewDescribeLogDirsResponseDir()
	ok.Dir = "/ok"
	if got := describeDir(&ok); got.Failing || got.Error != "" {
		t.Errorf("healthy dir: %+v", got)
	}
}

func TestClusterTableShowsLogDirState(t *testing.T) {
	d := ClusterDescription{ClusterID: "c", Controller: 1, Brokers: []BrokerDescription{
		{ID: 1, Host: "h", Port: 9092, Controller: true, Version: "v", LogDirs: []LogDirDescription{
			{Path: "/data", TotalBytes: 20 << 20, UsableBytes: 1536, Failing: true, Error: "no space left on device"},
		}},
		{ID: 2, Host: "h2", Port: 9092, Version: "v", LogDirs: []LogDirDescription{{Path: "/d2", TotalBytes: 3 << 30, UsableBytes: 1 << 30}}},
		{ID: 3, Host: "h3", Port: 9092, Version: "v", LogDirsError: "UNSUPPORTED_VERSION: ..."},
	}}
	var out bytes.Buffer
	if err := Write(&out, client.FormatTable, d); err != nil {
		t.Fatal(err)
	}
	for _, line := range []string{
		"BROKER  LOG-DIR  USABLE  TOTAL    STATE",
		"1       /data    1.5KiB  20.0MiB  failing: no space left on device",
		"2       /d2      1.0GiB  3.0GiB   ok",
		"3       ?        -       -        UNSUPPORTED_VERSION: ...",
	} {
		if !strings.Contains(out.String(), line+"\n") {
			t.Errorf("table lacks %q:\n%s", line, out.String())
		}
	}
}

func TestTopicTableHasWritesColumnOnlyWhenSomeFail(t *testing.T) {
	healthy := TopicDescriptions{{Topic: "t", Partitions: []PartitionDescription{{Partition: 0, Leader: 1, Replicas: []int32{1}, ISR: []int32{1}}}}}
	if header, _ := healthy.Table(); len(header) != 8 {
		t.Errorf("healthy topic header %q", header)
	}
	failing := TopicDescriptions{{Topic: "t", Partitions: []PartitionDescription{
		{Partition: 0, Leader: 1, Replicas: []int32{1}, ISR: []int32{1}, StorageErrors: []ReplicaStorageError{
			{Broker: 1, Dir: "/d", Error: "log: append at offset 5: write /d/t-0/0.log: no space left on device"}}},
		{Partition: 1, Leader: 1, Replicas: []int32{1}, ISR: []int32{1}},
	}}}
	header, rows := failing.Table()
	if header[len(header)-1] != "WRITES" || rows[0][len(header)-1] != "failing on 1 (no space left on device)" || rows[1][len(header)-1] != "ok" {
		t.Errorf("failing topic: %q %q", header, rows)
	}
}
