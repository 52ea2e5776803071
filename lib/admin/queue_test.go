package admin

import (
	"strings"
	"testing"
)

func TestQueueDescriptionsTable(t *testing.T) {
	ds := QueueDescriptions{{
		Group: "workers", State: "Stable", DeadLetterTopic: "jobs.dlq", DeadLetters: 3,
		Members: []QueueMember{{MemberID: "m1", ClientID: "c1", Host: "/127.0.0.1", Epoch: 4,
			Assignment: []TopicAssignment{{Topic: "jobs", Partitions: []int32{0, 1}}}}},
		Partitions: []QueuePartition{
			{Topic: "jobs", Partition: 0, StartOffset: 10, LogEndOffset: 25, InFlight: 5, Available: 12, Acquired: 3, Archived: 1, OldestUnackedMillis: 90_000},
			{Topic: "jobs", Partition: 1, StartOffset: -1, LogEndOffset: 0},
		},
	}}
	var b strings.Builder
	if err := ds.WriteTable(&b); err != nil {
		t.Fatal(err)
	}
	out := b.String()
	for _, want := range []string{
		"group workers: Stable, 1 members, dead letters: jobs.dlq (3 records)",
		"m1", "jobs-0,jobs-1",
		"START-OFFSET", "OLDEST-UNACKED",
	} {
		if !strings.Contains(out, want) {
			t.Errorf("table lacks %q:\n%s", want, out)
		}
	}
	_, rows := ds.Table()
	if len(rows) != 2 || rows[0][3] != "10" || rows[0][6] != "12" || rows[0][9] == "-" || rows[1][3] != "-" || rows[1][9] != "-" {
		t.Errorf("rows %v", rows)
	}
}
