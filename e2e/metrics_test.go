package e2e

import (
	"encoding/json"
	"io"
	"net/http"
	"os"
	"regexp"
	"slices"
	"sort"
	"strconv"
	"strings"
	"testing"
	"time"

	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"
	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"
)

// documentedMetrics is every metric docs/metrics.md lists, with its type:
// the e2e test checks that a real mqd serves each of them, and that the
// page lists exactly these, so the code and the page cannot drift apart.
var documentedMetrics = map[string]dto.MetricType{
	"mq_requests_total":                    dto.MetricType_COUNTER,
	"mq_request_errors_total":              dto.MetricType_COUNTER,
	"mq_request_duration_seconds":          dto.MetricType_HISTOGRAM,
	"mq_topic_bytes_in_total":              dto.MetricType_COUNTER,
	"mq_topic_bytes_out_total":             dto.MetricType_COUNTER,
	"mq_topic_messages_in_total":           dto.MetricType_COUNTER,
	"mq_topic_messages_out_total":          dto.MetricType_COUNTER,
	"mq_partition_high_watermark":          dto.MetricType_GAUGE,
	"mq_partition_log_end_offset":          dto.MetricType_GAUGE,
	"mq_partition_log_start_offset":        dto.MetricType_GAUGE,
	"mq_partition_size_bytes":              dto.MetricType_GAUGE,
	"mq_partition_leader":                  dto.MetricType_GAUGE,
	"mq_partitions_under_replicated":       dto.MetricType_GAUGE,
	"mq_partitions_reassigning":            dto.MetricType_GAUGE,
	"mq_partitions_offline":                dto.MetricType_GAUGE,
	"mq_isr_shrinks_total":                 dto.MetricType_COUNTER,
	"mq_isr_expands_total":                 dto.MetricType_COUNTER,
	"mq_isr_proposals_unconfirmed_total":   dto.MetricType_COUNTER,
	"mq_replication_throttled_bytes_total": dto.MetricType_COUNTER,
	"mq_replication_throttle_holds_total":  dto.MetricType_COUNTER,
	"mq_replication_throttle_rate_bytes":   dto.MetricType_GAUGE,
	"mq_controller_leader_id":              dto.MetricType_GAUGE,
	"mq_raft_state":                        dto.MetricType_GAUGE,
	"mq_controller_is_leader":              dto.MetricType_GAUGE,
	"mq_controller_broker_fencings_total":  dto.MetricType_COUNTER,
	"mq_groups":                            dto.MetricType_GAUGE,
	"mq_group_lag_messages":                dto.MetricType_GAUGE,
	"mq_group_lag_seconds":                 dto.MetricType_GAUGE,
	"mq_fsync_duration_seconds":            dto.MetricType_HISTOGRAM,
	"mq_connections":                       dto.MetricType_GAUGE,
	"mq_connections_accepted_total":        dto.MetricType_COUNTER,
	"mq_connections_refused_total":         dto.MetricType_COUNTER,
	"mq_authentication_failures_total":     dto.MetricType_COUNTER,
	"mq_request_bytes_reserved":            dto.MetricType_GAUGE,
	"mq_request_bytes_waiting":             dto.MetricType_GAUGE,
	"mq_log_segment_files_open":            dto.MetricType_GAUGE,
	"mq_tier_upload_lag_bytes":             dto.MetricType_GAUGE,
	"mq_tier_upload_failing":               dto.MetricType_GAUGE,
	"mq_tier_segments_uploaded_total":      dto.MetricType_COUNTER,
	"mq_tier_uploaded_bytes_total":         dto.MetricType_COUNTER,
	"mq_tier_upload_failures_total":        dto.MetricType_COUNTER,
	"mq_tier_segments_deleted_total":       dto.MetricType_COUNTER,
	"mq_tier_remote_read_bytes_total":      dto.MetricType_COUNTER,
	"mq_tier_remote_read_errors_total":     dto.MetricType_COUNTER,
	"mq_tier_store_gets_total":             dto.MetricType_COUNTER,
	"mq_log_segment_files_opened_total":    dto.MetricType_COUNTER,
	"mq_log_segment_files_evicted_total":   dto.MetricType_COUNTER,
	"go_goroutines":                        dto.MetricType_GAUGE,
	"process_resident_memory_bytes":        dto.MetricType_GAUGE,
}

// shareMetrics are the share-group metrics docs/metrics.md lists, with
// their types: TestMetricsShowShareGroups checks them (the per-partition
// ones have series only while a share group has state).
var shareMetrics = map[string]dto.MetricType{
	"mq_share_groups":                       dto.MetricType_GAUGE,
	"mq_share_group_in_flight_records":      dto.MetricType_GAUGE,
	"mq_share_group_available_records":      dto.MetricType_GAUGE,
	"mq_share_group_acquired_records":       dto.MetricType_GAUGE,
	"mq_share_group_archived_records":       dto.MetricType_GAUGE,
	"mq_share_group_oldest_unacked_seconds": dto.MetricType_GAUGE,
	"mq_share_group_dead_letters_total":     dto.MetricType_COUNTER,
}

// partitionSeries are the metrics with a partition label when
// metrics.partition.series is true, and without any when it is false.
var partitionSeries = []string{
	"mq_partition_high_watermark", "mq_partition_log_end_offset", "mq_partition_log_start_offset",
	"mq_partition_size_bytes", "mq_partition_leader",
}

// startMetricsBroker starts mqd with --metrics on a free port and returns
// it with the metrics' host:port.
func startMetricsBroker(t *testing.T, props ...string) (*broker, string) {
	t.Helper()
	addr, err := freeAddr()
	if err != nil {
		t.Fatal(err)
	}
	p := &mqdProc{dataDir: t.TempDir(), props: props, args: []string{"--metrics", "tcp://" + addr}}
	if err := p.start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := p.cleanup(); err != nil {
			t.Error(err)
		}
	})
	return &broker{mqdProc: p, t: t}, addr
}

// scrape reads /metrics and parses it as Prometheus' text format.
func scrape(t *testing.T, addr string) map[string]*dto.MetricFamily {
	t.Helper()
	resp, err := http.Get("http://" + addr + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		b, _ := io.ReadAll(resp.Body)
		t.Fatalf("GET /metrics: %s\n%s", resp.Status, b)
	}
	parser := expfmt.NewTextParser(model.UTF8Validation)
	families, err := parser.TextToMetricFamilies(resp.Body)
	if err != nil {
		t.Fatalf("parse /metrics: %v", err)
	}
	return families
}

// sample returns the value of the series of family name whose labels are
// exactly labels (k=v pairs), and whether there is one.
func sample(families map[string]*dto.MetricFamily, name string, labels ...string) (float64, bool) {
	mf := families[name]
	if mf == nil {
		return 0, false
	}
	want := slices.Clone(labels)
	sort.Strings(want)
	for _, m := range mf.GetMetric() {
		var got []string
		for _, l := range m.GetLabel() {
			got = append(got, l.GetName()+"="+l.GetValue())
		}
		sort.Strings(got)
		if !slices.Equal(got, want) {
			continue
		}
		switch mf.GetType() {
		case dto.MetricType_COUNTER:
			return m.GetCounter().GetValue(), true
		case dto.MetricType_GAUGE:
			return m.GetGauge().GetValue(), true
		case dto.MetricType_HISTOGRAM:
			return float64(m.GetHistogram().GetSampleCount()), true
		}
	}
	return 0, false
}

// produceLagging creates topic with two partitions, produces n records
// to each, stamped an hour ago, and commits for group an offset below
// the high-water mark on partition 0 and at it on partition 1.
func produceLagging(t *testing.T, b *broker, topic, group string, n int) {
	t.Helper()
	ctx := ctxFor(t, 30*time.Second)
	adm := b.admin()
	if _, err := adm.CreateTopic(ctx, 2, 1, nil, topic); err != nil {
		t.Fatal(err)
	}
	cl := b.client(kgo.RecordPartitioner(kgo.ManualPartitioner()))
	stamp := time.Now().Add(-time.Hour)
	var records []*kgo.Record
	for p := range int32(2) {
		for i := range n {
			records = append(records, &kgo.Record{Topic: topic, Partition: p, Value: []byte(strconv.Itoa(i)), Timestamp: stamp.Add(time.Duration(i) * time.Second)})
		}
	}
	if err := cl.ProduceSync(ctx, records...).FirstErr(); err != nil {
		t.Fatal(err)
	}
	offsets := kadm.Offsets{}
	offsets.Add(kadm.Offset{Topic: topic, Partition: 0, At: 3, LeaderEpoch: -1})
	offsets.Add(kadm.Offset{Topic: topic, Partition: 1, At: int64(n), LeaderEpoch: -1})
	resp, err := adm.CommitOffsets(ctx, group, offsets)
	if err == nil {
		err = resp.Error()
	}
	if err != nil {
		t.Fatal(err)
	}
	// Consume a little, for the traffic out.
	consumer := b.client(kgo.ConsumePartitions(map[string]map[int32]kgo.Offset{topic: {0: kgo.NewOffset().At(0)}}))
	fs := consumer.PollFetches(ctx)
	if err := fs.Err(); err != nil {
		t.Fatal(err)
	}
}

// TestMetricsEndpointServesEveryDocumentedMetric scrapes a real mqd
// started with --metrics after traffic and a lagging group: every
// documented metric is there with its type, the values match what was
// done, the lag matches mqctl group describe, and docs/metrics.md lists
// the same metrics as the test.
func TestMetricsEndpointServesEveryDocumentedMetric(t *testing.T) {
	b, metricsAddr := startMetricsBroker(t, append([]string{"auto.create.topics.enable=false"}, groupProps...)...)
	const topic, group, n = "metered", "lagging", 10
	produceLagging(t, b, topic, group, n)
	// An error for mq_request_errors_total: a topic that does not exist.
	if _, err := b.admin().ListEndOffsets(ctxFor(t, 10*time.Second), "no-such-topic"); err != nil {
		t.Fatal(err)
	}

	// The lag in time moves with the clock: read mqctl's and the scrape
	// between two clock readings, and allow exactly the time between them.
	before := time.Now()
	res := runTool(t, 30*time.Second, "", "mqctl", "-b", b.addr, "group", "describe", group, "-o", "json")
	if res.code != 0 {
		t.Fatalf("mqctl group describe: exit %d\n%s", res.code, res.stderr)
	}
	families := scrape(t, metricsAddr)
	elapsed := time.Since(before)

	for name, typ := range documentedMetrics {
		mf := families[name]
		switch {
		case mf == nil:
			t.Errorf("%s: not served", name)
		case mf.GetType() != typ:
			t.Errorf("%s: served as a %v, documented as a %v", name, mf.GetType(), typ)
		case len(mf.GetMetric()) == 0:
			t.Errorf("%s: no series", name)
		}
	}
	for name := range families {
		_, share := shareMetrics[name]
		if _, ok := documentedMetrics[name]; strings.HasPrefix(name, "mq_") && !ok && !share {
			t.Errorf("%s: served but not documented", name)
		}
	}

	want := []struct {
		name   string
		labels []string
		value  float64
	}{
		{"mq_partition_high_watermark", []string{"topic=" + topic, "partition=0"}, n},
		{"mq_partition_log_end_offset", []string{"topic=" + topic, "partition=1"}, n},
		{"mq_partition_log_start_offset", []string{"topic=" + topic, "partition=0"}, 0},
		{"mq_partition_leader", []string{"topic=" + topic, "partition=0"}, 1},
		{"mq_topic_messages_in_total", []string{"topic=" + topic}, 2 * n},
		// The consumer's n records of partition 0, and mqctl's read of
		// the batch there from the committed offset 3 on, for its time.
		{"mq_topic_messages_out_total", []string{"topic=" + topic}, n + n - 3},
		{"mq_partitions_under_replicated", nil, 0},
		{"mq_partitions_reassigning", nil, 0},
		{"mq_partitions_offline", nil, 0},
		{"mq_controller_leader_id", nil, 1},
		{"mq_controller_is_leader", nil, 1},
		{"mq_raft_state", []string{"state=leader"}, 1},
		{"mq_raft_state", []string{"state=follower"}, 0},
		{"mq_groups", []string{"state=Empty"}, 1},
		{"mq_group_lag_messages", []string{"group=" + group, "topic=" + topic, "partition=1"}, 0},
		{"mq_group_lag_seconds", []string{"group=" + group, "topic=" + topic, "partition=1"}, 0},
	}
	for _, w := range want {
		if v, ok := sample(families, w.name, w.labels...); !ok || v != w.value {
			t.Errorf("%s%v = %v (present: %v), want %v", w.name, w.labels, v, ok, w.value)
		}
	}
	positive := []struct {
		name   string
		labels []string
	}{
		{"mq_requests_total", []string{"api=Produce"}},
		{"mq_requests_total", []string{"api=Fetch"}},
		{"mq_request_duration_seconds", []string{"api=Produce"}},
		{"mq_request_errors_total", []string{"api=Metadata", "error=UNKNOWN_TOPIC_OR_PARTITION"}},
		{"mq_topic_bytes_in_total", []string{"topic=" + topic}},
		{"mq_topic_bytes_out_total", []string{"topic=" + topic}},
		{"mq_partition_size_bytes", []string{"topic=" + topic, "partition=0"}},
		{"mq_fsync_duration_seconds", nil},
		{"mq_connections", nil},
		{"mq_connections_accepted_total", nil},
		{"mq_log_segment_files_open", nil},
		{"mq_log_segment_files_opened_total", nil},
	}
	for _, p := range positive {
		if v, ok := sample(families, p.name, p.labels...); !ok || v <= 0 {
			t.Errorf("%s%v = %v (present: %v), want more than 0", p.name, p.labels, v, ok)
		}
	}

	// The lag equals what mqctl group describe reports.
	ps := checkLagAsDescribed(t, families, group, res.stdout, elapsed)
	if len(ps) != 2 {
		t.Errorf("mqctl group describe shows %d partitions of %s, want 2", len(ps), group)
	}
	for _, p := range ps {
		if p.Partition == 0 && (p.Lag != n-3 || p.LagTimeMill < time.Hour.Milliseconds()-n*1000) {
			t.Errorf("partition 0: lag %d, %d ms; want %d records, about an hour", p.Lag, p.LagTimeMill, n-3)
		}
	}

	// docs/metrics.md lists exactly the metrics of the table above.
	page, err := os.ReadFile("../docs/metrics.md")
	if err != nil {
		t.Fatal(err)
	}
	documented := map[string]bool{}
	for _, m := range regexp.MustCompile("(?m)^\\| `([a-z_]+)` \\| ([a-z]+) \\|").FindAllStringSubmatch(string(page), -1) {
		documented[m[1]] = true
		typ, ok := documentedMetrics[m[1]]
		if !ok {
			typ, ok = shareMetrics[m[1]]
		}
		if ok && !strings.EqualFold(typ.String(), m[2]) {
			t.Errorf("docs/metrics.md: %s is a %s, the test says a %v", m[1], m[2], typ)
		}
	}
	for name := range documentedMetrics {
		if !documented[name] {
			t.Errorf("docs/metrics.md does not list %s", name)
		}
	}
	for name := range shareMetrics {
		if !documented[name] {
			t.Errorf("docs/metrics.md does not list %s", name)
		}
	}
	for name := range documented {
		_, share := shareMetrics[name]
		if _, ok := documentedMetrics[name]; !ok && !share {
			t.Errorf("docs/metrics.md lists %s, which the test does not check", name)
		}
	}
}

// TestMetricsWithoutPartitionSeries: metrics.partition.series=false drops
// every series with a partition label, and the group lag becomes one
// series per group.
func TestMetricsWithoutPartitionSeries(t *testing.T) {
	b, metricsAddr := startMetricsBroker(t, append([]string{"metrics.partition.series=false"}, groupProps...)...)
	const topic, group, n = "unlabelled", "behind", 10
	produceLagging(t, b, topic, group, n)
	families := scrape(t, metricsAddr)
	for name, mf := range families {
		for _, m := range mf.GetMetric() {
			for _, l := range m.GetLabel() {
				if l.GetName() == "partition" {
					t.Errorf("%s has a partition series with metrics.partition.series=false", name)
				}
			}
		}
	}
	for _, name := range partitionSeries {
		if families[name] != nil {
			t.Errorf("%s is served with metrics.partition.series=false", name)
		}
	}
	if v, ok := sample(families, "mq_group_lag_messages", "group="+group); !ok || v != n-3 {
		t.Errorf("mq_group_lag_messages{group=%s} = %v (present: %v), want %d (summed)", group, v, ok, n-3)
	}
	if v, ok := sample(families, "mq_group_lag_seconds", "group="+group); !ok || v < 3500 {
		t.Errorf("mq_group_lag_seconds{group=%s} = %v (present: %v), want about an hour", group, v, ok)
	}
	if v, ok := sample(families, "mq_topic_messages_in_total", "topic="+topic); !ok || v != 2*n {
		t.Errorf("mq_topic_messages_in_total{topic=%s} = %v (present: %v), want %d", topic, v, ok, 2*n)
	}
}

// TestMetricsBadAddressIsAUsageError: --metrics with something that is
// not tcp://host:port exits 2 with one line on stderr.
func TestMetricsBadAddressIsAUsageError(t *testing.T) {
	for _, bad := range []string{"nonsense", "unix:///tmp/metrics.sock", "tcp://host"} {
		res := runTool(t, 30*time.Second, "", "mqd", "--data-dir", t.TempDir(), "--metrics", bad)
		if res.code != 2 || strings.Count(res.stderr, "\n") != 1 || !strings.Contains(res.stderr, "metrics") {
			t.Errorf("mqd --metrics %s: exit %d, stderr %q; want exit 2 and one line", bad, res.code, res.stderr)
		}
	}
}

// describedLag is one partition of mqctl group describe -o json.
type describedLag struct {
	Topic       string `json:"topic"`
	Partition   int32  `json:"partition"`
	Lag         int64  `json:"lag"`
	LagTimeMill int64  `json:"lag_time_ms"`
}

// checkLagAsDescribed checks that every partition of group that mqctl
// group describe -o json reported (described, read elapsed before the
// scrape's end) has lag series equal to it, and returns those partitions.
func checkLagAsDescribed(t *testing.T, families map[string]*dto.MetricFamily, group, described string, elapsed time.Duration) []describedLag {
	t.Helper()
	var groups []struct {
		Partitions []describedLag `json:"partitions"`
	}
	if err := json.Unmarshal([]byte(described), &groups); err != nil || len(groups) != 1 || len(groups[0].Partitions) == 0 {
		t.Fatalf("mqctl group describe -o json: %v\n%s", err, described)
	}
	for _, p := range groups[0].Partitions {
		labels := []string{"group=" + group, "topic=" + p.Topic, "partition=" + strconv.Itoa(int(p.Partition))}
		messages, ok := sample(families, "mq_group_lag_messages", labels...)
		if !ok || int64(messages) != p.Lag {
			t.Errorf("mq_group_lag_messages%v = %v (present: %v), mqctl says %d", labels, messages, ok, p.Lag)
		}
		seconds, ok := sample(families, "mq_group_lag_seconds", labels...)
		if !ok {
			t.Errorf("mq_group_lag_seconds%v: not served", labels)
			continue
		}
		// Both are whole milliseconds of the same record's age, mqctl's
		// read first: the scrape's may be older by the time between them.
		diff := int64(seconds*1000+0.5) - p.LagTimeMill
		if p.Lag == 0 && (seconds != 0 || p.LagTimeMill != 0) || diff < 0 || diff > elapsed.Milliseconds()+1 {
			t.Errorf("mq_group_lag_seconds%v = %v, mqctl says %d ms, read %v apart", labels, seconds, p.LagTimeMill, elapsed)
		}
	}
	return groups[0].Partitions
}
