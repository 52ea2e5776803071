package tail

import (
	"testing"
	"time"

	"github.com/mqproject/mq/lib/admin"
)

var t0 = time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)

// sampleAt is a one-broker cluster with topic "t" (partition 0 led by
// broker 1, replicas 1,2 and ISR isr) at high-water mark hw and log size
// size, and group "g" committed at committed.
func sampleAt(at time.Time, hw, size, committed int64, isr []int32) Sample {
	lag := hw - committed
	return Sample{
		Time: at,
		Cluster: admin.ClusterDescription{ClusterID: "c", Controller: 1, Brokers: []admin.BrokerDescription{
			{ID: 1, Host: "h", Port: 9092, State: admin.BrokerAlive, Controller: true, PartitionsLed: 1},
			{ID: 2, Host: "h", Port: 9093, State: admin.BrokerFenced},
		}},
		Topics: admin.TopicDescriptions{{Topic: "t", Partitions: []admin.PartitionDescription{
			{Partition: 0, Leader: 1, Replicas: []int32{1, 2}, ISR: isr, OfflineReplicas: []int32{}, LogStartOffset: 0, HighWatermark: hw},
		}}},
		Groups: admin.GroupDescriptions{{Group: "g", State: admin.StateEmpty, Members: []admin.GroupMember{}, Partitions: []admin.GroupPartition{
			{Topic: "t", Partition: 0, Committed: committed, LogStartOffset: 0, LogEndOffset: hw, Lag: lag, LagTimeMillis: 1500},
		}}},
		LogSizes: map[int32]map[string]map[int32]int64{1: {"t": {0: size}}, 2: {"t": {0: size / 2}}},
	}
}

func TestTrackerRatesComeFromTheDeltasBetweenSamples(t *testing.T) {
	tr := NewTracker(time.Minute)
	first := tr.Observe(sampleAt(t0, 100, 1000, 100, []int32{1, 2}))
	p := first.Topics[0].Partitions[0]
	if p.MessagesInPerSec != nil || p.BytesInPerSec != nil || first.IntervalMillis != 0 {
		t.Fatalf("first sample: rates %v %v interval %d, want none", p.MessagesInPerSec, p.BytesInPerSec, first.IntervalMillis)
	}
	if p.SizeBytes != 1000 {
		t.Errorf("size %d, want the leader's 1000", p.SizeBytes)
	}
	snap := tr.Observe(sampleAt(t0.Add(2*time.Second), 300, 5000, 100, []int32{1, 2}))
	p = snap.Topics[0].Partitions[0]
	if p.MessagesInPerSec == nil || *p.MessagesInPerSec != 100 {
		t.Errorf("messages/s %v, want 100 (200 records in 2s)", p.MessagesInPerSec)
	}
	if p.BytesInPerSec == nil || *p.BytesInPerSec != 2000 {
		t.Errorf("bytes/s %v, want 2000 (the leader's 4000 bytes in 2s)", p.BytesInPerSec)
	}
	if b := snap.Brokers[0]; b.BytesInPerSec == nil || *b.BytesInPerSec != 2000 {
		t.Errorf("broker 1 bytes in %v, want 2000", b.BytesInPerSec)
	}
	if b := snap.Brokers[1]; b.BytesInPerSec == nil || *b.BytesInPerSec != 0 || b.BytesOutPerSec != nil {
		t.Errorf("broker 2 (leads nothing, no metrics): in %v out %v, want 0 and null", b.BytesInPerSec, b.BytesOutPerSec)
	}
	if snap.IntervalMillis != 2000 {
		t.Errorf("interval %d, want 2000", snap.IntervalMillis)
	}
	// Retention shrinking the log is no negative rate: unknown.
	snap = tr.Observe(sampleAt(t0.Add(3*time.Second), 300, 10, 100, []int32{1, 2}))
	if r := snap.Topics[0].Partitions[0].BytesInPerSec; r != nil {
		t.Errorf("bytes/s after the log shrank: %v, want null", *r)
	}
}

func TestTrackerMarksUnderReplicatedAndOfflinePartitions(t *testing.T) {
	tr := NewTracker(time.Minute)
	s := sampleAt(t0, 10, 10, 10, []int32{1})
	s.Topics[0].Partitions = append(s.Topics[0].Partitions, admin.PartitionDescription{
		Partition: 1, Leader: -1, Replicas: []int32{1, 2}, ISR: []int32{}, OfflineReplicas: []int32{1, 2}, LogStartOffset: -1, HighWatermark: -1})
	snap := tr.Observe(s)
	ps := snap.Topics[0].Partitions
	if !ps[0].UnderReplicated || ps[0].Offline {
		t.Errorf("ISR 1 of replicas 1,2: under-replicated %v offline %v, want true false", ps[0].UnderReplicated, ps[0].Offline)
	}
	if !ps[1].Offline {
		t.Errorf("no leader: offline %v, want true", ps[1].Offline)
	}
	if snap.Topics[0].UnderReplicated != 2 || snap.Topics[0].Offline != 1 {
		t.Errorf("topic counts under-replicated %d offline %d, want 2 1", snap.Topics[0].UnderReplicated, snap.Topics[0].Offline)
	}
	in := tr.Observe(sampleAt(t0.Add(time.Second), 10, 10, 10, []int32{1, 2}))
	if in.Topics[0].Partitions[0].UnderReplicated {
		t.Error("full ISR still marked under-replicated")
	}
	// A move adding broker 3, not in sync yet, is no under-replication.
	moving := sampleAt(t0.Add(2*time.Second), 10, 10, 10, []int32{1, 2})
	moving.Topics[0].Partitions[0].Replicas = []int32{1, 2, 3}
	moving.Topics[0].Partitions[0].Adding = []int32{3}
	if tr.Observe(moving).Topics[0].Partitions[0].UnderReplicated {
		t.Error("a partition whose move adds a replica not yet in sync is marked under-replicated")
	}
}

func TestTrackerStalledOnlyWhenTheWindowShowsNoProgressWithLag(t *testing.T) {
	const window = 5 * time.Second
	cases := []struct {
		name      string
		committed func(i int) int64
		hw        func(i int) int64
		samples   int
		want      bool
	}{
		{"stuck with lag over the whole window", func(int) int64 { return 10 }, func(i int) int64 { return 20 + int64(i) }, 7, true},
		{"stuck with lag, window not yet covered", func(int) int64 { return 10 }, func(int) int64 { return 20 }, 5, false},
		{"committing slowly", func(i int) int64 { return 10 + int64(i/3) }, func(int) int64 { return 100 }, 7, false},
		{"caught up and idle", func(int) int64 { return 20 }, func(int) int64 { return 20 }, 7, false},
		{"lag reached zero once in the window", func(int) int64 { return 10 }, func(i int) int64 {
			if i == 3 {
				return 10
			}
			return 20
		}, 7, false},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			tr := NewTracker(window)
			var snap Snapshot
			for i := range c.samples {
				snap = tr.Observe(sampleAt(t0.Add(time.Duration(i)*time.Second), c.hw(i), 0, c.committed(i), []int32{1, 2}))
			}
			g := snap.Groups[0]
			if g.Partitions[0].Stalled != c.want || g.Stalled != c.want {
				t.Errorf("stalled: partition %v group %v, want %v (history %v)", g.Partitions[0].Stalled, g.Stalled, c.want, g.Partitions[0].LagHistory)
			}
		})
	}
}

func TestTrackerKeepsTheWindowOfLagHistory(t *testing.T) {
	tr := NewTracker(3 * time.Second)
	var snap Snapshot
	for i := range 10 {
		snap = tr.Observe(sampleAt(t0.Add(time.Duration(i)*time.Second), 100, 0, int64(90-i), []int32{1, 2}))
	}
	// Samples at 6, 7, 8, 9 s: the window (6..9] and the last one at its
	// start.
	want := []int64{16, 17, 18, 19}
	got := snap.Groups[0].Partitions[0].LagHistory
	if len(got) != len(want) {
		t.Fatalf("history %v, want %v", got, want)
	}
	for i := range want {
		if got[i] != want[i] {
			t.Fatalf("history %v, want %v", got, want)
		}
	}
	// A group that is gone takes its history with it.
	s := sampleAt(t0.Add(10*time.Second), 100, 0, 80, []int32{1, 2})
	s.Groups = nil
	tr.Observe(s)
	if len(tr.lag) != 0 {
		t.Errorf("history of a group no longer described kept: %v", tr.lag)
	}
}

func TestSparklineScalesToTheLargestAndFitsTheWidth(t *testing.T) {
	cases := []struct {
		values []int64
		width  int
		want   string
	}{
		{nil, 10, ""},
		{[]int64{0, 0, 0}, 10, "▁▁▁"},
		{[]int64{0, 4, 8}, 10, "▁▅█"},
		{[]int64{5, 5}, 10, "██"},
		{[]int64{1, 8, 1, 1, 1, 2, 1, 1}, 4, "█▂▃▂"}, // each column the largest of two; above zero is above the floor
		{[]int64{1, 2, 3}, 0, ""},
	}
	for _, c := range cases {
		if got := Sparkline(c.values, c.width); got != c.want {
			t.Errorf("Sparkline(%v, %d) = %q, want %q", c.values, c.width, got, c.want)
		}
	}
}

// A sample whose topics could not be read shows the last ones read with
// no rates, and the next good sample measures from the last good one.
func TestTrackerMeasuresRatesAcrossAStaleSample(t *testing.T) {
	tr := NewTracker(time.Minute)
	tr.Observe(sampleAt(t0, 100, 0, 100, []int32{1, 2}))
	stale := sampleAt(t0.Add(time.Second), 100, 0, 100, []int32{1, 2})
	stale.TopicsStale, stale.GroupsStale = true, true
	snap := tr.Observe(stale)
	if r := snap.Topics[0].Partitions[0].MessagesInPerSec; r != nil {
		t.Errorf("stale sample has a rate: %v", *r)
	}
	if h := snap.Groups[0].Partitions[0].LagHistory; len(h) != 1 {
		t.Errorf("stale groups extended the history: %v", h)
	}
	snap = tr.Observe(sampleAt(t0.Add(4*time.Second), 400, 0, 100, []int32{1, 2}))
	if r := snap.Topics[0].Partitions[0].MessagesInPerSec; r == nil || *r != 75 {
		t.Errorf("rate after a stale sample %v, want 75 (300 records in the 4s since the last good sample)", r)
	}
	if snap.IntervalMillis != 3000 {
		t.Errorf("interval %d, want 3000 (since the previous sample)", snap.IntervalMillis)
	}
}

func TestTrackerMarksTheBrokersThatDoNotAnswerAndNoControllerWithoutQuorum(t *testing.T) {
	s := sampleAt(t0, 100, 1000, 100, []int32{1, 2})
	s.Unreachable = map[int32]string{1: "connection refused"}
	s.QuorumLost = true
	snap := NewTracker(time.Minute).Observe(s)
	if b := snap.Brokers[0]; b.State != BrokerUnreachable || b.Controller {
		t.Errorf("broker 1, not answering, named controller before the quorum was lost: %+v, want unreachable and not controller", b)
	}
	if b := snap.Brokers[1]; b.State != admin.BrokerFenced {
		t.Errorf("broker 2: state %q, want fenced still", b.State)
	}
	if !snap.QuorumLost || snap.Controller != -1 {
		t.Errorf("quorum lost %v, controller %d; want true and -1", snap.QuorumLost, snap.Controller)
	}
}

func TestTrackerSumsEachBrokersUploadLagAndTheTableMarksFailingUploads(t *testing.T) {
	s := sampleAt(t0, 100, 1000, 100, []int32{1, 2})
	s.LogDirs = map[int32][]admin.LogDirDescription{
		1: {{Path: "/a", Tiered: true, TierUploadLagBytes: 3 << 20, TierUploadFailing: true, TierError: "store down"}, {Path: "/b", Tiered: true, TierUploadLagBytes: 1 << 20}},
		2: {{Path: "/a"}}, // tiers nothing: its lag is unknown, not 0
	}
	snap := NewTracker(time.Minute).Observe(s)
	b1, b2 := snap.Brokers[0], snap.Brokers[1]
	if b1.UploadLagBytes == nil || *b1.UploadLagBytes != 4<<20 || !b1.UploadFailing || b1.UploadError != "store down" {
		t.Errorf("broker 1: upload lag %v, failing %v (%q); want 4 MiB, failing, store down", b1.UploadLagBytes, b1.UploadFailing, b1.UploadError)
	}
	if b2.UploadLagBytes != nil || b2.UploadFailing {
		t.Errorf("broker 2, which tiers nothing: upload lag %v, failing %v; want null and not failing", b2.UploadLagBytes, b2.UploadFailing)
	}
	tab := brokerTable(snap, 0)
	col := len(tab.header) - 1
	if tab.header[col] != "UPLOAD-LAG" {
		t.Fatalf("brokers table header %v: the last column is not UPLOAD-LAG", tab.header)
	}
	if c := tab.rows[0].cells[col]; c.text != sizeCell(4<<20).text+" failing" || c.kind != bad {
		t.Errorf("broker 1's upload lag cell %+v, want %q marked bad", c, sizeCell(4<<20).text+" failing")
	}
	if c := tab.rows[1].cells[col]; c.text != "-" || c.kind != dim {
		t.Errorf("broker 2's upload lag cell %+v, want a dim -", c)
	}
}
