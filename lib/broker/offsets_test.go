package broker

import (
	"testing"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/mqproject/mq/lib/record"
)

func listOffsets(t *testing.T, tb *testBroker, version int16, topic string, partition int32, ts int64) kmsg.ListOffsetsResponseTopicPartition {
	t.Helper()
	req := kmsg.NewPtrListOffsetsRequest()
	rt := kmsg.NewListOffsetsRequestTopic()
	rt.Topic = topic
	rp := kmsg.NewListOffsetsRequestTopicPartition()
	rp.Partition, rp.Timestamp = partition, ts
	rt.Partitions = append(rt.Partitions, rp)
	req.Topics = append(req.Topics, rt)
	return tb.do(t, version, req).(*kmsg.ListOffsetsResponse).Topics[0].Partitions[0]
}

func TestListOffsets(t *testing.T) {
	tb := startBroker(t, "", nil)
	tb.createTopic(t, "lo", 1, nil)
	// Batches at timestamps 1000, 5000 (the max), 3000.
	for _, ts := range []int64{1000, 5000, 3000} {
		if got := produce(t, tb, "lo", 0, 1, testBatch(t, record.BuildOptions{BaseTimestamp: ts}, "x", 2)); got.ErrorCode != 0 {
			t.Fatal(kerr.ErrorForCode(got.ErrorCode))
		}
	}
	epoch := tb.parts.Lookup("lo", 0).LeaderEpoch()
	tests := []struct {
		name       string
		version    int16
		ts         int64
		wantOffset int64
		wantTS     int64
	}{
		{"earliest", 8, -2, 0, -1},
		{"latest", 8, -1, 6, -1},
		{"earliest local", 8, -4, 0, -1},
		{"max timestamp", 8, -3, 2, 5000},
		{"timestamp before all", 8, 10, 0, 1000},
		{"timestamp exact", 8, 3000, 2, 5000},
		{"timestamp between", 8, 1001, 2, 5000},
		{"timestamp after all", 8, 6000, -1, -1},
		{"latest, old version", 1, -1, 6, -1},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := listOffsets(t, tb, tt.version, "lo", 0, tt.ts)
			if got.ErrorCode != 0 || got.Offset != tt.wantOffset || got.Timestamp != tt.wantTS {
				t.Fatalf("got %v offset %d timestamp %d, want offset %d timestamp %d",
					kerr.ErrorForCode(got.ErrorCode), got.Offset, got.Timestamp, tt.wantOffset, tt.wantTS)
			}
			if tt.version >= 4 && got.LeaderEpoch != epoch {
				t.Fatalf("leader epoch %d, want %d", got.LeaderEpoch, epoch)
			}
		})
	}
	if got := listOffsets(t, tb, 8, "nope", 0, -1); got.ErrorCode != kerr.UnknownTopicOrPartition.Code {
		t.Fatalf("unknown topic: %v", kerr.ErrorForCode(got.ErrorCode))
	}
}

func deleteRecords(t *testing.T, tb *testBroker, topic string, partition int32, offset int64) kmsg.DeleteRecordsResponseTopicPartition {
	t.Helper()
	req := kmsg.NewPtrDeleteRecordsRequest()
	req.TimeoutMillis = 5000
	rt := kmsg.NewDeleteRecordsRequestTopic()
	rt.Topic = topic
	rp := kmsg.NewDeleteRecordsRequestTopicPartition()
	rp.Partition, rp.Offset = partition, offset
	rt.Partitions = append(rt.Partitions, rp)
	req.Topics = append(req.Topics, rt)
	return tb.do(t, 2, req).(*kmsg.DeleteRecordsResponse).Topics[0].Partitions[0]
}

func TestDeleteRecordsThenFetchBelowIsOutOfRange(t *testing.T) {
	tb := startBroker(t, "", nil)
	id := tb.createTopic(t, "dr", 1, nil)
	for range 4 {
		produce(t, tb, "dr", 0, 1, testBatch(t, record.BuildOptions{}, "x", 2))
	}
	if got := deleteRecords(t, tb, "dr", 0, 9); got.ErrorCode != kerr.OffsetOutOfRange.Code {
		t.Fatalf("delete past the high-water mark: %v, want OFFSET_OUT_OF_RANGE", kerr.ErrorForCode(got.ErrorCode))
	}
	if got := deleteRecords(t, tb, "dr", 0, 3); got.ErrorCode != 0 || got.LowWatermark != 3 {
		t.Fatalf("delete before 3: %v low watermark %d", kerr.ErrorForCode(got.ErrorCode), got.LowWatermark)
	}
	if got := fetchOne(t, tb, 12, fetchRequest("dr", id, 0, 2, 0)); got.ErrorCode != kerr.OffsetOutOfRange.Code {
		t.Fatalf("fetch below the log start: %v, want OFFSET_OUT_OF_RANGE", kerr.ErrorForCode(got.ErrorCode))
	}
	got := fetchOne(t, tb, 12, fetchRequest("dr", id, 0, 3, 0))
	if got.ErrorCode != 0 || got.LogStartOffset != 3 {
		t.Fatalf("fetch at the log start: %v log start %d", kerr.ErrorForCode(got.ErrorCode), got.LogStartOffset)
	}
	if got := listOffsets(t, tb, 8, "dr", 0, -2); got.Offset != 3 {
		t.Fatalf("earliest after delete: %d, want 3", got.Offset)
	}
	// -1: up to the high-water mark.
	if got := deleteRecords(t, tb, "dr", 0, -1); got.ErrorCode != 0 || got.LowWatermark != 8 {
		t.Fatalf("delete up to the high-water mark: %v low watermark %d", kerr.ErrorForCode(got.ErrorCode), got.LowWatermark)
	}
	if got := deleteRecords(t, tb, "nope", 0, 1); got.ErrorCode != kerr.UnknownTopicOrPartition.Code {
		t.Fatalf("unknown topic: %v", kerr.ErrorForCode(got.ErrorCode))
	}
}
