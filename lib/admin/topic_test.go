package admin

import (
	"maps"
	"slices"
	"strings"
	"testing"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"

	"github.com/mqproject/mq/lib/client"
)

// TestPartitionFilterKeepsWhatNeedsAttention: --under-replicated keeps
// partitions whose ISR is short of their replicas, --unavailable those
// without a leader, both either kind; topics left with nothing go.
func TestPartitionFilterKeepsWhatNeedsAttention(t *testing.T) {
	part := func(id, leader int32, replicas, isr []int32) PartitionDescription {
		return PartitionDescription{Partition: id, Leader: leader, Replicas: replicas, ISR: isr, OfflineReplicas: []int32{}}
	}
	silent := func(p PartitionDescription) PartitionDescription {
		p.leaderSilent, p.Error = true, "leader 3 unreachable: connection refused"
		return p
	}
	ds := TopicDescriptions{
		{Topic: "a", Partitions: []PartitionDescription{
			part(0, 1, []int32{1, 2, 3}, []int32{1, 2, 3}), // healthy
			part(1, 2, []int32{1, 2, 3}, []int32{2, 3}),    // under-replicated
			part(2, -1, []int32{1, 2, 3}, []int32{1}),      // offline and short
		}},
		{Topic: "b", Partitions: []PartitionDescription{
			part(0, -1, []int32{3}, []int32{3}), // offline, ISR whole
		}},
		{Topic: "c", Partitions: []PartitionDescription{part(0, 1, []int32{1}, []int32{1})}},
		{Topic: "d", Partitions: []PartitionDescription{silent(part(0, 3, []int32{3, 1}, []int32{3, 1}))}}, // leader does not answer
	}
	for _, tc := range []struct {
		name   string
		filter PartitionFilter
		want   []string
	}{
		{"none", PartitionFilter{}, []string{"a-0", "a-1", "a-2", "b-0", "c-0", "d-0"}},
		{"under-replicated", PartitionFilter{UnderReplicated: true}, []string{"a-1", "a-2"}},
		{"unavailable", PartitionFilter{Unavailable: true}, []string{"a-2", "b-0", "d-0"}},
		{"both", PartitionFilter{UnderReplicated: true, Unavailable: true}, []string{"a-1", "a-2", "b-0", "d-0"}},
	} {
		// filter works on its own copy: the input stays whole.
		in := slices.Clone(ds)
		for i := range in {
			in[i].Partitions = slices.Clone(in[i].Partitions)
		}
		var got []string
		for _, d := range in.filter(tc.filter) {
			for _, p := range d.Partitions {
				got = append(got, d.Topic+"-"+itoa(p.Partition))
			}
		}
		if !slices.Equal(got, tc.want) {
			t.Errorf("%s: %v, want %v", tc.name, got, tc.want)
		}
	}
	header, rows := TopicDescriptions{{Topic: "x", Partitions: []PartitionDescription{
		{Partition: 0, Leader: -1, Replicas: []int32{1, 2}, ISR: []int32{1}, OfflineReplicas: []int32{1, 2}, LogStartOffset: -1, HighWatermark: -1},
	}}}.Table()
	if !slices.Equal(header[:6], []string{"TOPIC", "PARTITION", "LEADER", "REPLICAS", "ISR", "OFFLINE"}) ||
		!slices.Equal(rows[0], []string{"x", "0", "none", "1,2", "1", "1,2", "?", "?"}) {
		t.Errorf("table %q %q", header, rows)
	}
}

// TestUnsettledAsksAgainOnlyWhatALiveBrokerMayMend: a partition is asked
// about again when a live broker gave it a retriable answer (its leader
// opening it after a restart, a leader that moved) and, for a command
// that needs its offsets, when it has no leader; never for a leader that
// did not answer or an unknown topic.
func TestUnsettledAsksAgainOnlyWhatALiveBrokerMayMend(t *testing.T) {
	details := func(leader int32, err error) kadm.TopicDetails {
		return kadm.TopicDetails{"s10": {Topic: "s10", Partitions: kadm.PartitionDetails{
			0: {Topic: "s10", Partition: 0, Leader: 1},
			3: {Topic: "s10", Partition: 3, Leader: leader, Err: err},
		}}}
	}
	answered := map[tp]leaderOffsets{{"s10", 0}: {start: 0, end: 5}}
	with := func(o leaderOffsets) map[tp]leaderOffsets {
		m := maps.Clone(answered)
		m[tp{"s10", 3}] = o
		return m
	}
	for _, tc := range []struct {
		name       string
		details    kadm.TopicDetails
		offsets    map[tp]leaderOffsets
		needLeader bool
		want       string // "": settled
	}{
		{"all answered", details(2, nil), with(leaderOffsets{start: 0, end: 1}), false, ""},
		{"leader opening the partition", details(2, kerr.LeaderNotAvailable), answered, false, "topic s10 partition 3: LEADER_NOT_AVAILABLE"},
		{"no leader, a describe", details(-1, kerr.LeaderNotAvailable), answered, false, ""},
		{"no leader, a reset", details(-1, kerr.LeaderNotAvailable), answered, true, "topic s10 partition 3: LEADER_NOT_AVAILABLE"},
		{"leader moved", details(2, nil), with(leaderOffsets{start: -1, end: -1, err: "high-water mark: NOT_LEADER_FOR_PARTITION", retriable: kerr.NotLeaderForPartition}), false,
			"topic s10 partition 3: leader 2: NOT_LEADER_FOR_PARTITION"},
		{"leader unreachable", details(2, nil), with(leaderOffsets{start: -1, end: -1, err: "leader 2 unreachable: connection refused"}), true, ""},
		{"unknown topic", kadm.TopicDetails{"s10": {Topic: "s10", Err: kerr.UnknownTopicOrPartition}}, nil, true, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			err := unsettled(tc.details, tc.offsets, tc.needLeader)
			switch {
			case tc.want == "" && err != nil:
				t.Errorf("unsettled: %v, want settled", err)
			case tc.want != "" && (err == nil || !strings.HasPrefix(err.Error(), tc.want) || !client.Retriable(err)):
				t.Errorf("unsettled: %v, want a retriable %q", err, tc.want)
			}
		})
	}
}
