package metrics

import (
	"fmt"
	"io"
	"net/http"
	"slices"
	"sort"
	"strings"
	"testing"
	"time"

	dto "github.com/prometheus/client_model/go"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/mqproject/mq/lib/server"
)

type fixedSource struct {
	snap  Snapshot
	asked []bool // the partitionSeries of each call
}

func (f *fixedSource) MetricsSnapshot(partitionSeries bool) Snapshot {
	f.asked = append(f.asked, partitionSeries)
	return f.snap
}

var fixed = Snapshot{
	Topics: []TopicTraffic{{Topic: "t", BytesIn: 100, MessagesIn: 10, BytesOut: 50, MessagesOut: 5}},
	Partitions: []Partition{
		{Topic: "t", Partition: 0, HighWatermark: 7, LogEndOffset: 9, LogStartOffset: 2, SizeBytes: 4096, Leader: true},
		{Topic: "t", Partition: 1, HighWatermark: 3, LogEndOffset: 3, LogStartOffset: 0, SizeBytes: 10, Leader: false},
	},
	UnderReplicated: 1, Reassigning: 6, Offline: 2, ISRShrinks: 3, ISRExpands: 4, ISRUnconfirmed: 5,
	LeaderThrottle: Throttle{Bytes: 8, Rate: 1 << 20}, FollowerThrottle: Throttle{Holds: 9, Rate: 1 << 21},
	ControllerLeaderID: 2, RaftState: "follower",
	BrokerFencings: map[string]uint64{"session_timeout": 6, "process_gone": 7},
	Groups: []Group{
		{Group: "g", State: "Stable", Lag: []GroupLag{
			{Topic: "t", Partition: 0, Messages: 4, Seconds: 1.5},
			{Topic: "t", Partition: 1, Messages: 0, Seconds: 0},
		}},
		{Group: "h", State: "Empty", Lag: []GroupLag{{Topic: "t", Partition: 0, Messages: 1, Seconds: 2.25}}},
		{Group: "e", State: "Empty"},
	},
	Connections: 3, ConnectionsAccepted: 17, ConnectionsRefused: map[string]uint64{"max_connections": 2, "max_connections_per_ip": 1},
	RequestBytesReserved: 1024, RequestBytesWaiting: 2048, AuthenticationFailures: 4,
	SegmentFilesOpen: 5, SegmentFilesOpened: 40, SegmentFilesEvicted: 35,
}

// gather returns every sample of the mq_ families as "name{k=v,...}" →
// value (histograms as their count), and each family's type.
func gather(t *testing.T, m *Metrics) (map[string]float64, map[string]dto.MetricType) {
	t.Helper()
	mfs, err := m.Registry().Gather()
	if err != nil {
		t.Fatal(err)
	}
	values, types := map[string]float64{}, map[string]dto.MetricType{}
	for _, mf := range mfs {
		if !strings.HasPrefix(mf.GetName(), "mq_") {
			continue
		}
		types[mf.GetName()] = mf.GetType()
		for _, s := range mf.GetMetric() {
			var labels []string
			for _, l := range s.GetLabel() {
				labels = append(labels, l.GetName()+"="+l.GetValue())
			}
			sort.Strings(labels)
			key := mf.GetName() + "{" + strings.Join(labels, ",") + "}"
			switch mf.GetType() {
			case dto.MetricType_COUNTER:
				values[key] = s.GetCounter().GetValue()
			case dto.MetricType_GAUGE:
				values[key] = s.GetGauge().GetValue()
			case dto.MetricType_HISTOGRAM:
				values[key] = float64(s.GetHistogram().GetSampleCount())
			}
		}
	}
	return values, types
}

func TestCollectorShowsTheSnapshot(t *testing.T) {
	src := &fixedSource{snap: fixed}
	m := New(Config{Source: src, PartitionSeries: true})
	got, types := gather(t, m)
	want := map[string]float64{
		"mq_topic_bytes_in_total{topic=t}":                            100,
		"mq_topic_messages_in_total{topic=t}":                         10,
		"mq_topic_bytes_out_total{topic=t}":                           50,
		"mq_topic_messages_out_total{topic=t}":                        5,
		"mq_partition_high_watermark{partition=0,topic=t}":            7,
		"mq_partition_log_end_offset{partition=0,topic=t}":            9,
		"mq_partition_log_start_offset{partition=0,topic=t}":          2,
		"mq_partition_size_bytes{partition=0,topic=t}":                4096,
		"mq_partition_leader{partition=0,topic=t}":                    1,
		"mq_partition_leader{partition=1,topic=t}":                    0,
		"mq_partition_high_watermark{partition=1,topic=t}":            3,
		"mq_partitions_under_replicated{}":                            1,
		"mq_partitions_reassigning{}":                                 6,
		"mq_partitions_offline{}":                                     2,
		"mq_isr_shrinks_total{}":                                      3,
		"mq_isr_expands_total{}":                                      4,
		"mq_isr_proposals_unconfirmed_total{}":                        5,
		"mq_replication_throttled_bytes_total{side=leader}":           8,
		"mq_replication_throttle_holds_total{side=follower}":          9,
		"mq_replication_throttle_rate_bytes{side=leader}":             1 << 20,
		"mq_replication_throttle_rate_bytes{side=follower}":           1 << 21,
		"mq_controller_leader_id{}":                                   2,
		"mq_controller_is_leader{}":                                   0,
		"mq_raft_state{state=follower}":                               1,
		"mq_raft_state{state=leader}":                                 0,
		"mq_raft_state{state=candidate}":                              0,
		"mq_raft_state{state=shutdown}":                               0,
		"mq_controller_broker_fencings_total{reason=session_timeout}": 6,
		"mq_controller_broker_fencings_total{reason=process_gone}":    7,
		"mq_groups{state=Stable}":                                     1,
		"mq_groups{state=Empty}":                                      2,
		"mq_groups{state=Dead}":                                       0,
		"mq_groups{state=PreparingRebalance}":                         0,
		"mq_groups{state=CompletingRebalance}":                        0,
		"mq_group_lag_messages{group=g,partition=0,topic=t}":          4,
		"mq_group_lag_seconds{group=g,partition=0,topic=t}":           1.5,
		"mq_group_lag_messages{group=g,partition=1,topic=t}":          0,
		"mq_group_lag_seconds{group=h,partition=0,topic=t}":           2.25,
		"mq_connections{}":                                            3,
		"mq_connections_accepted_total{}":                             17,
		"mq_authentication_failures_total{}":                          4,
		"mq_connections_refused_total{limit=max_connections}":         2,
		"mq_connections_refused_total{limit=max_connections_per_ip}":  1,
		"mq_log_segment_files_open{}":                                 5,
		"mq_log_segment_files_opened_total{}":                         40,
		"mq_log_segment_files_evicted_total{}":                        35,
	}
	for k, v := range want {
		if g, ok := got[k]; !ok || g != v {
			t.Errorf("%s = %v (present %v), want %v", k, g, ok, v)
		}
	}
	for name, typ := range map[string]dto.MetricType{
		"mq_topic_bytes_in_total": dto.MetricType_COUNTER, "mq_partition_high_watermark": dto.MetricType_GAUGE,
		"mq_isr_shrinks_total": dto.MetricType_COUNTER, "mq_group_lag_seconds": dto.MetricType_GAUGE,
		"mq_connections_accepted_total": dto.MetricType_COUNTER, "mq_connections_refused_total": dto.MetricType_COUNTER,
		"mq_request_bytes_reserved": dto.MetricType_GAUGE, "mq_request_bytes_waiting": dto.MetricType_GAUGE, "mq_controller_broker_fencings_total": dto.MetricType_COUNTER,
		"mq_authentication_failures_total": dto.MetricType_COUNTER,
		"mq_log_segment_files_open":        dto.MetricType_GAUGE, "mq_log_segment_files_evicted_total": dto.MetricType_COUNTER,
	} {
		if types[name] != typ {
			t.Errorf("%s is a %v, want a %v", name, types[name], typ)
		}
	}
	if !slices.Equal(src.asked, []bool{true}) {
		t.Errorf("source asked %v, want one call for partition series", src.asked)
	}
}

func TestWithoutPartitionSeriesGroupLagIsPerGroup(t *testing.T) {
	src := &fixedSource{snap: fixed}
	m := New(Config{Source: src, PartitionSeries: false})
	got, _ := gather(t, m)
	for k := range got {
		if strings.Contains(k, "partition=") {
			t.Errorf("%s: a partition series with metrics.partition.series=false", k)
		}
	}
	want := map[string]float64{
		"mq_group_lag_messages{group=g}":   4,   // summed
		"mq_group_lag_seconds{group=g}":    1.5, // the largest
		"mq_group_lag_messages{group=h}":   1,
		"mq_group_lag_seconds{group=h}":    2.25,
		"mq_partitions_under_replicated{}": 1,
	}
	for k, v := range want {
		if g, ok := got[k]; !ok || g != v {
			t.Errorf("%s = %v (present %v), want %v", k, g, ok, v)
		}
	}
	if _, ok := got["mq_group_lag_messages{group=e}"]; ok {
		t.Error("a group with no committed offsets has a lag series")
	}
	if !slices.Equal(src.asked, []bool{false}) {
		t.Errorf("source asked %v, want one call without partition series", src.asked)
	}
}

func TestShareGroupSeriesPerPartitionOrPerGroup(t *testing.T) {
	snap := fixed
	snap.ShareGroups = []ShareGroup{{Group: "q", State: "Stable"}, {Group: "r", State: "Empty"}, {Group: "s", State: "Empty"}}
	snap.ShareGroupPartitions = []SharePartition{
		{Group: "q", Topic: "t", Partition: 0, InFlight: 10, Available: 7, Acquired: 2, Archived: 1, OldestUnackedSeconds: 4.5, DeadLetters: 3},
		{Group: "q", Topic: "t", Partition: 1, InFlight: 1, Available: 5, Acquired: 1, OldestUnackedSeconds: 9, DeadLetters: 1},
	}
	got, types := gather(t, New(Config{Source: &fixedSource{snap: snap}, PartitionSeries: true}))
	for k, v := range map[string]float64{
		"mq_share_groups{state=Stable}":                                      1,
		"mq_share_groups{state=Empty}":                                       2,
		"mq_share_group_in_flight_records{group=q,partition=0,topic=t}":      10,
		"mq_share_group_available_records{group=q,partition=1,topic=t}":      5,
		"mq_share_group_acquired_records{group=q,partition=0,topic=t}":       2,
		"mq_share_group_archived_records{group=q,partition=0,topic=t}":       1,
		"mq_share_group_oldest_unacked_seconds{group=q,partition=1,topic=t}": 9,
		"mq_share_group_dead_letters_total{group=q,partition=0,topic=t}":     3,
	} {
		if g, ok := got[k]; !ok || g != v {
			t.Errorf("%s = %v (present %v), want %v", k, g, ok, v)
		}
	}
	if types["mq_share_group_dead_letters_total"] != dto.MetricType_COUNTER || types["mq_share_group_in_flight_records"] != dto.MetricType_GAUGE {
		t.Errorf("types: %v", types)
	}
	got, _ = gather(t, New(Config{Source: &fixedSource{snap: snap}, PartitionSeries: false}))
	for k, v := range map[string]float64{
		"mq_share_group_in_flight_records{group=q}":      11, // summed
		"mq_share_group_available_records{group=q}":      12,
		"mq_share_group_acquired_records{group=q}":       3,
		"mq_share_group_archived_records{group=q}":       1,
		"mq_share_group_oldest_unacked_seconds{group=q}": 9, // the largest
		"mq_share_group_dead_letters_total{group=q}":     4,
	} {
		if g, ok := got[k]; !ok || g != v {
			t.Errorf("without partition series: %s = %v (present %v), want %v", k, g, ok, v)
		}
	}
}

func TestAnsweredCountsRequestsLatencyAndErrors(t *testing.T) {
	m := New(Config{APINames: map[int16]string{16384: "SkipDamaged"}})
	produce := kmsg.NewPtrProduceResponse()
	pt := kmsg.NewProduceResponseTopic()
	for _, code := range []int16{0, kerr.NotLeaderForPartition.Code, kerr.NotLeaderForPartition.Code} {
		pp := kmsg.NewProduceResponseTopicPartition()
		pp.ErrorCode = code
		pt.Partitions = append(pt.Partitions, pp)
	}
	produce.Topics = append(produce.Topics, pt)
	m.Answered(0, 2*time.Millisecond, server.Response{Msg: produce})
	m.Answered(0, 3*time.Millisecond, server.Response{Msg: kmsg.NewPtrProduceResponse()})
	// A pre-encoded fetch says its errors itself.
	m.Answered(1, time.Millisecond, server.Response{ErrorCodes: []int16{kerr.OffsetOutOfRange.Code}})
	m.Answered(16384, time.Millisecond, server.Response{})
	m.Answered(3, time.Millisecond, server.Response{Msg: &kmsg.MetadataResponse{Topics: []kmsg.MetadataResponseTopic{{ErrorCode: 999}}}})
	m.ObserveFsync(5 * time.Millisecond)

	got, types := gather(t, m)
	want := map[string]float64{
		"mq_requests_total{api=Produce}":                                      2,
		"mq_requests_total{api=Fetch}":                                        1,
		"mq_requests_total{api=SkipDamaged}":                                  1,
		"mq_request_duration_seconds{api=Produce}":                            2,
		"mq_request_errors_total{api=Produce,error=NOT_LEADER_FOR_PARTITION}": 2,
		"mq_request_errors_total{api=Fetch,error=OFFSET_OUT_OF_RANGE}":        1,
		"mq_request_errors_total{api=Metadata,error=UNKNOWN_SERVER_ERROR}":    1,
		"mq_fsync_duration_seconds{}":                                         1,
	}
	for k, v := range want {
		if g, ok := got[k]; !ok || g != v {
			t.Errorf("%s = %v (present %v), want %v", k, g, ok, v)
		}
	}
	if types["mq_request_duration_seconds"] != dto.MetricType_HISTOGRAM || types["mq_fsync_duration_seconds"] != dto.MetricType_HISTOGRAM {
		t.Errorf("durations are not histograms: %v", types)
	}
}

func TestServeAnswersMetricsOverHTTP(t *testing.T) {
	m := New(Config{Source: &fixedSource{snap: fixed}, PartitionSeries: true})
	addr, stop, err := m.Serve("tcp://127.0.0.1:0", nil)
	if err != nil {
		t.Fatal(err)
	}
	defer stop()
	resp, err := http.Get(fmt.Sprintf("http://%s/metrics", addr))
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	for _, want := range []string{"# TYPE mq_connections gauge", "mq_connections 3", "go_goroutines", "process_"} {
		if !strings.Contains(string(body), want) {
			t.Errorf("/metrics has no %q", want)
		}
	}
}

// BenchmarkAnswered is what a request pays for metrics: a count, a
// latency observation, and a look at the response's error codes.
func BenchmarkAnswered(b *testing.B) {
	m := New(Config{})
	produce := kmsg.NewPtrProduceResponse()
	pt := kmsg.NewProduceResponseTopic()
	pt.Partitions = append(pt.Partitions, kmsg.NewProduceResponseTopicPartition())
	produce.Topics = append(produce.Topics, pt)
	resp := server.Response{Msg: produce}
	b.ReportAllocs()
	b.RunParallel(func(pb *testing.PB) {
		for pb.Next() {
			m.Answered(0, time.Millisecond, resp)
		}
	})
}
