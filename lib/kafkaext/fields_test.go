package kafkaext

import (
	"reflect"
	"testing"

	"github.com/twmb/franz-go/pkg/kmsg"
)

// TestFieldsSurviveTheWire encodes a DescribeLogDirs response carrying
// mq's fields, decodes it as any client would, and reads them back.
func TestFieldsSurviveTheWire(t *testing.T) {
	dirHealth := DirHealth{Failing: true, Error: "no space left on device", FailingSinceMillis: 1700000000000, StorageErrors: 3}
	partHealth := PartitionHealth{Damaged: []DamagedRange{{FromOffset: 10, ToOffset: 20, Segment: "00000000000000000000.log",
		Position: 4096, Length: 512, Reason: "bad crc", DetectedMillis: 1700000000001}}}

	for _, version := range []int16{2, 3, 4} {
		resp := kmsg.NewPtrDescribeLogDirsResponse()
		resp.Version = version
		dir := kmsg.NewDescribeLogDirsResponseDir()
		dir.Dir = "/var/lib/mq"
		if err := Set(&dir.UnknownTags, LogDir, dirHealth); err != nil {
			t.Fatal(err)
		}
		topic := kmsg.NewDescribeLogDirsResponseDirTopic()
		topic.Topic = "t"
		part := kmsg.NewDescribeLogDirsResponseDirTopicPartition()
		if err := Set(&part.UnknownTags, LogDirPartition, partHealth); err != nil {
			t.Fatal(err)
		}
		topic.Partitions = append(topic.Partitions, part)
		dir.Topics = append(dir.Topics, topic)
		resp.Dirs = append(resp.Dirs, dir)

		got := kmsg.NewPtrDescribeLogDirsResponse()
		got.Version = version
		if err := got.ReadFrom(resp.AppendTo(nil)); err != nil {
			t.Fatalf("v%d: decode: %v", version, err)
		}
		var dh DirHealth
		if ok, err := Get(&got.Dirs[0].UnknownTags, LogDir, &dh); !ok || err != nil || !reflect.DeepEqual(dh, dirHealth) {
			t.Errorf("v%d: dir health = %+v, %v, %v; want %+v", version, dh, ok, err, dirHealth)
		}
		var ph PartitionHealth
		if ok, err := Get(&got.Dirs[0].Topics[0].Partitions[0].UnknownTags, LogDirPartition, &ph); !ok || err != nil || !reflect.DeepEqual(ph, partHealth) {
			t.Errorf("v%d: partition health = %+v, %v, %v; want %+v", version, ph, ok, err, partHealth)
		}
	}
}

func TestGetWithoutTheFieldReportsFalse(t *testing.T) {
	var tg kmsg.Tags
	var dh DirHealth
	if ok, err := Get(&tg, LogDir, &dh); ok || err != nil {
		t.Fatalf("Get on empty tags = %v, %v", ok, err)
	}
	tg.Set(LogDir, []byte("{not json"))
	if ok, err := Get(&tg, LogDir, &dh); !ok || err == nil {
		t.Fatalf("Get of a garbled field = %v, %v; want true and an error", ok, err)
	}
}

// TestSoftwareSurvivesTheWire reads mqd's name and release back from an
// ApiVersions response, at the flexible versions that carry it.
func TestSoftwareSurvivesTheWire(t *testing.T) {
	want := Software{Name: "mq", Version: "v0.4.0-3-gabc1234"}
	for _, version := range []int16{3, 4} {
		resp := kmsg.NewPtrApiVersionsResponse()
		resp.Version = version
		resp.ApiKeys = []kmsg.ApiVersionsResponseApiKey{{ApiKey: 18, MaxVersion: 4}}
		if err := Set(&resp.UnknownTags, ApiVersions, want); err != nil {
			t.Fatal(err)
		}
		got := kmsg.NewPtrApiVersionsResponse()
		got.Version = version
		if err := got.ReadFrom(resp.AppendTo(nil)); err != nil {
			t.Fatalf("v%d: decode: %v", version, err)
		}
		var sw Software
		if ok, err := Get(&got.UnknownTags, ApiVersions, &sw); !ok || err != nil || sw != want {
			t.Errorf("v%d: software = %+v, %v, %v; want %+v", version, sw, ok, err, want)
		}
		if len(got.ApiKeys) != 1 || got.ApiKeys[0].MaxVersion != 4 {
			t.Errorf("v%d: api keys %+v", version, got.ApiKeys)
		}
	}
}
