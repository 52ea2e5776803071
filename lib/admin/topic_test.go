package admin

import (
	"slices"
	"testing"
)

// TestPartitionFilterKeepsWhatNeedsAttention: --under-replicated keeps
// partitions whose ISR is short of their replicas, --unavailable those
// without a leader, both either kind; topics left with nothing go.
func TestPartitionFilterKeepsWhatNeedsAttention(t *testing.T) {
	part := func(id, leader int32, replicas, isr []int32) PartitionDescription {
		return PartitionDescription{Partition: id, Leader: leader, Replicas: replicas, ISR: isr, OfflineReplicas: []int32{}}
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
	}
	for _, tc := range []struct {
		name   string
		filter PartitionFilter
		want   []string
	}{
		{"none", PartitionFilter{}, []string{"a-0", "a-1", "a-2", "b-0", "c-0"}},
		{"under-replicated", PartitionFilter{UnderReplicated: true}, []string{"a-1", "a-2"}},
		{"unavailable", PartitionFilter{Unavailable: true}, []string{"a-2", "b-0"}},
		{"both", PartitionFilter{UnderReplicated: true, Unavailable: true}, []string{"a-1", "a-2", "b-0"}},
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
