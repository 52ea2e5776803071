package admin

import (
	"bytes"
	"fmt"
	"testing"
	"time"

	"github.com/mqproject/mq/lib/client"
)

func TestParseTopicPartitions(t *testing.T) {
	for _, tc := range []struct {
		in   string
		want string // topic and partitions; "" for a usage error
	}{
		{"t", "t []"},
		{"t:0", "t [0]"},
		{"t:0,2", "t [0 2]"},
		{"t:1-3", "t [1 2 3]"},
		{"t:0,2-4,3,0", "t [0 2 3 4]"},
		{"t:5-5", "t [5]"},
		{"a.b_c-d:1", "a.b_c-d [1]"},
		{"t:", ""},
		{":1", ""},
		{"", ""},
		{"t:x", ""},
		{"t:3-1", ""},
		{"t:-1", ""},
		{"t:1-", ""},
		{"t:+1", ""},
		{"t:1,,2", ""},
		{"t:0-99999999", ""},
	} {
		got, err := ParseTopicPartitions("test", tc.in)
		if tc.want == "" {
			if client.ExitCode(err) != client.ExitUsage {
				t.Errorf("ParseTopicPartitions(%q) = %v, %v; want a usage error", tc.in, got, err)
			}
			continue
		}
		if err != nil || fmt.Sprintf("%s %v", got.Topic, got.Partitions) != tc.want {
			t.Errorf("ParseTopicPartitions(%q) = %v, %v; want %s", tc.in, got, err, tc.want)
		}
	}
	// No list at all is every partition (nil), not none.
	if got, _ := ParseTopicPartitions("test", "t"); got.Partitions != nil {
		t.Errorf("bare topic: partitions %v, want nil (all)", got.Partitions)
	}
}

func TestMergeTopicsJoinsPartitionsOfOneTopic(t *testing.T) {
	got := mergeTopics([]TopicPartitions{
		{"a", []int32{2}}, {"b", []int32{0}}, {"a", []int32{0, 2}}, {"b", nil}, {"c", []int32{1}},
	})
	want := "[{a [0 2]} {b []} {c [1]}]"
	if fmt.Sprint(got) != want {
		t.Errorf("mergeTopics = %v, want %s", got, want)
	}
	if got[1].Partitions != nil {
		t.Errorf("b: %v, want nil (all partitions)", got[1].Partitions)
	}
}

func TestPlanOffsetKeepsWithinTheLog(t *testing.T) {
	// A partition whose log holds offsets 10..49 (end 50), committed at 20,
	// and whose first record at the asked time is at 30.
	in := resetInput{committed: 20, logStart: 10, logEnd: 50, atTime: 30}
	for _, tc := range []struct {
		name string
		spec ResetSpec
		in   resetInput
		want int64
		err  bool
	}{
		{"earliest", ResetSpec{Mode: ResetToEarliest}, in, 10, false},
		{"latest", ResetSpec{Mode: ResetToLatest}, in, 50, false},
		{"offset", ResetSpec{Mode: ResetToOffset, Offset: 25}, in, 25, false},
		{"offset before log start", ResetSpec{Mode: ResetToOffset, Offset: 3}, in, 10, false},
		{"offset past end", ResetSpec{Mode: ResetToOffset, Offset: 99}, in, 50, false},
		{"offset at end", ResetSpec{Mode: ResetToOffset, Offset: 50}, in, 50, false},
		{"time", ResetSpec{Mode: ResetToTime}, in, 30, false},
		{"time after every record", ResetSpec{Mode: ResetToTime}, resetInput{committed: 20, logStart: 10, logEnd: 50, atTime: -1}, 50, false},
		{"shift back", ResetSpec{Mode: ResetShiftBy, Shift: -2}, in, 18, false},
		{"shift forward", ResetSpec{Mode: ResetShiftBy, Shift: 5}, in, 25, false},
		{"shift before log start", ResetSpec{Mode: ResetShiftBy, Shift: -15}, in, 10, false},
		{"shift past end", ResetSpec{Mode: ResetShiftBy, Shift: 1000}, in, 50, false},
		{"shift by a huge amount back", ResetSpec{Mode: ResetShiftBy, Shift: -1 << 63}, in, 10, false},
		{"shift by a huge amount forward", ResetSpec{Mode: ResetShiftBy, Shift: 1<<63 - 1}, in, 50, false},
		{"committed below log start, shifted", ResetSpec{Mode: ResetShiftBy, Shift: 1}, resetInput{committed: 2, logStart: 10, logEnd: 50}, 10, false},
		{"shift without a committed offset", ResetSpec{Mode: ResetShiftBy, Shift: 1}, resetInput{committed: -1, logStart: 10, logEnd: 50}, -1, true},
		{"empty log", ResetSpec{Mode: ResetToOffset, Offset: 7}, resetInput{committed: -1, logStart: 0, logEnd: 0}, 0, false},
		{"unknown log", ResetSpec{Mode: ResetToEarliest}, resetInput{committed: 1, logStart: -1, logEnd: -1}, -1, true},
		{"no mode", ResetSpec{}, in, -1, true},
	} {
		got, err := planOffset(tc.spec, tc.in)
		if got != tc.want || (err != nil) != tc.err {
			t.Errorf("%s: planOffset(%v, %+v) = %d, %v; want %d (error %v)", tc.name, tc.spec, tc.in, got, err, tc.want, tc.err)
		}
	}
}

func TestParseTime(t *testing.T) {
	for _, tc := range []struct {
		in   string
		want int64 // ms since the epoch; -1 for a usage error
	}{
		{"0", 0},
		{"1714564800000", 1714564800000},
		{"2024-05-01T12:00:00Z", 1714564800000},
		{"2024-05-01T14:00:00+02:00", 1714564800000},
		{"2024-05-01T12:00:00.25Z", 1714564800250},
		{"-5", -1},
		{"2024-05-01", -1},
		{"yesterday", -1},
		{"", -1},
	} {
		got, err := ParseTime("test", tc.in)
		if tc.want < 0 {
			if client.ExitCode(err) != client.ExitUsage {
				t.Errorf("ParseTime(%q) = %v, %v; want a usage error", tc.in, got, err)
			}
			continue
		}
		if err != nil || got.UnixMilli() != tc.want {
			t.Errorf("ParseTime(%q) = %v (%d), %v; want %d", tc.in, got, got.UnixMilli(), err, tc.want)
		}
	}
}

func TestParseGroupStates(t *testing.T) {
	got, err := ParseGroupStates("test", []string{"stable,EMPTY", "Stable", " preparingrebalance"})
	if err != nil || fmt.Sprint(got) != "[Stable Empty PreparingRebalance]" {
		t.Errorf("ParseGroupStates = %v, %v", got, err)
	}
	if _, err := ParseGroupStates("test", []string{"Sleeping"}); client.ExitCode(err) != client.ExitUsage {
		t.Errorf("unknown state: %v, want a usage error", err)
	}
	if got, err := ParseGroupStates("test", nil); err != nil || got != nil {
		t.Errorf("no states: %v, %v", got, err)
	}
}

func TestResetOffsetsCheck(t *testing.T) {
	topics := []TopicPartitions{{Topic: "t"}}
	earliest := ResetSpec{Mode: ResetToEarliest}
	for _, tc := range []struct {
		name string
		req  ResetOffsets
		code int
	}{
		{"ok", ResetOffsets{Group: "g", Topics: topics, Spec: earliest}, 0},
		{"all topics", ResetOffsets{Group: "g", AllTopics: true, Spec: earliest}, 0},
		{"no group", ResetOffsets{Topics: topics, Spec: earliest}, client.ExitUsage},
		{"no topics", ResetOffsets{Group: "g", Spec: earliest}, client.ExitUsage},
		{"topics and all", ResetOffsets{Group: "g", Topics: topics, AllTopics: true, Spec: earliest}, client.ExitUsage},
		{"no mode", ResetOffsets{Group: "g", Topics: topics}, client.ExitUsage},
		{"negative offset", ResetOffsets{Group: "g", Topics: topics, Spec: ResetSpec{Mode: ResetToOffset, Offset: -1}}, client.ExitUsage},
		{"negative shift", ResetOffsets{Group: "g", Topics: topics, Spec: ResetSpec{Mode: ResetShiftBy, Shift: -1}}, 0},
	} {
		if got := client.ExitCode(tc.req.Check("group reset-offsets")); got != tc.code {
			t.Errorf("%s: exit %d, want %d", tc.name, got, tc.code)
		}
	}
	for _, tc := range []struct {
		name string
		err  error
		code int
	}{
		{"groups ok", CheckGroupNames("x", []string{"a", "b"}), 0},
		{"no groups", CheckGroupNames("x", nil), client.ExitUsage},
		{"empty group", CheckGroupNames("x", []string{""}), client.ExitUsage},
		{"group twice", CheckGroupNames("x", []string{"a", "a"}), client.ExitUsage},
	} {
		if got := client.ExitCode(tc.err); got != tc.code {
			t.Errorf("%s: exit %d (%v), want %d", tc.name, got, tc.err, tc.code)
		}
	}
}

func TestPartitionRowsJoinOwnersCommitsAndLogs(t *testing.T) {
	ms := []GroupMember{
		{MemberID: "m1", ClientID: "c1", Host: "/h1", Assignment: []TopicAssignment{{"t", []int32{1}}}},
		{MemberID: "m2", ClientID: "c2", Host: "/h2", Assignment: []TopicAssignment{{"t", []int32{0}}, {"u", []int32{0}}}},
	}
	committed := map[tp]int64{{"t", 0}: 5, {"t", 1}: 9, {"gone", 0}: 3, {"t", 2}: 12}
	facts := map[tp]partitionFact{
		{"t", 0}:     {logStart: 0, logEnd: 7},
		{"t", 1}:     {logStart: 0, logEnd: 9},
		{"t", 2}:     {logStart: 0, logEnd: 10}, // committed past the end (truncated log)
		{"u", 0}:     {logStart: 2, logEnd: 4},
		{"gone", -1}: {logStart: -1, logEnd: -1, err: "unknown topic"},
	}
	var got bytes.Buffer
	for _, r := range partitionRows(ms, committed, facts) {
		fmt.Fprintf(&got, "%s[%d] %q c=%d end=%d lag=%d lagtime=%d %s\n",
			r.Topic, r.Partition, r.MemberID, r.Committed, r.LogEndOffset, r.Lag, r.LagTimeMillis, r.Error)
	}
	want := `gone[0] "" c=3 end=-1 lag=-1 lagtime=-1 unknown topic
t[0] "m2" c=5 end=7 lag=2 lagtime=-1 
t[1] "m1" c=9 end=9 lag=0 lagtime=0 
t[2] "" c=12 end=10 lag=0 lagtime=0 
u[0] "m2" c=-1 end=4 lag=-1 lagtime=-1 
`
	if got.String() != want {
		t.Errorf("rows:\n%s\nwant:\n%s", got.String(), want)
	}
}

func TestFormatLagTime(t *testing.T) {
	for _, tc := range []struct {
		d    time.Duration
		want string
	}{
		{0, "0s"},
		{312 * time.Millisecond, "312ms"},
		{1500 * time.Millisecond, "2s"},
		{42 * time.Second, "42s"},
		{time.Hour + 2*time.Minute + 3*time.Second + 400*time.Millisecond, "1h2m3s"},
	} {
		if got := FormatLagTime(tc.d); got != tc.want {
			t.Errorf("FormatLagTime(%v) = %q, want %q", tc.d, got, tc.want)
		}
	}
}

func writeBoth(t *testing.T, r Result) (table, json string) {
	t.Helper()
	var tb, jb bytes.Buffer
	if err := Write(&tb, client.FormatTable, r); err != nil {
		t.Fatal(err)
	}
	if err := Write(&jb, client.FormatJSON, r); err != nil {
		t.Fatal(err)
	}
	return tb.String(), jb.String()
}

func TestGroupDescribeOutput(t *testing.T) {
	ds := GroupDescriptions{
		{
			Group: "g", State: "Stable", ProtocolType: "consumer", Protocol: "range",
			Members: []GroupMember{
				{MemberID: "m1", ClientID: "c1", Host: "/10.0.0.1", Assignment: []TopicAssignment{{"t", []int32{0}}}},
				{MemberID: "m2", ClientID: "c2", Host: "/10.0.0.2", InstanceID: "i2", Assignment: []TopicAssignment{}},
			},
			Partitions: []GroupPartition{
				{Topic: "t", Partition: 0, MemberID: "m1", ClientID: "c1", Host: "/10.0.0.1", Committed: 5, LogStartOffset: 0, LogEndOffset: 7, Lag: 2, LagTimeMillis: 65000},
				{Topic: "t", Partition: 1, Committed: 3, LogStartOffset: 0, LogEndOffset: 3, Lag: 0, LagTimeMillis: 0},
				{Topic: "u", Partition: 0, Committed: -1, LogStartOffset: -1, LogEndOffset: -1, Lag: -1, LagTimeMillis: -1, Error: "unknown topic"},
			},
		},
		{Group: "h", State: "Empty", ProtocolType: "consumer", Members: []GroupMember{}, Partitions: []GroupPartition{}},
	}
	table, json := writeBoth(t, ds)
	wantTable := `GROUP g  STATE Stable  PROTOCOL range  MEMBERS 2
TOPIC  PARTITION  MEMBER  CLIENT-ID  HOST       COMMITTED  END  LAG  LAG-TIME
t      0          m1      c1         /10.0.0.1  5          7    2    1m5s
t      1          -       -          -          3          3    0    0s
u      0          -       -          -          -          -    -    -
-      -          m2      c2         /10.0.0.2  -          -    -    -

GROUP h  STATE Empty  PROTOCOL -  MEMBERS 0
TOPIC  PARTITION  MEMBER  CLIENT-ID  HOST  COMMITTED  END  LAG  LAG-TIME
`
	if table != wantTable {
		t.Errorf("table:\n%s\nwant:\n%s", table, wantTable)
	}
	wantJSON := `[{"group":"g","state":"Stable","protocol_type":"consumer","protocol":"range",` +
		`"members":[{"member_id":"m1","client_id":"c1","host":"/10.0.0.1","assignment":[{"topic":"t","partitions":[0]}]},` +
		`{"member_id":"m2","instance_id":"i2","client_id":"c2","host":"/10.0.0.2","assignment":[]}],` +
		`"partitions":[{"topic":"t","partition":0,"member_id":"m1","client_id":"c1","host":"/10.0.0.1","committed":5,"log_start_offset":0,"log_end_offset":7,"lag":2,"lag_time_ms":65000},` +
		`{"topic":"t","partition":1,"member_id":"","client_id":"","host":"","committed":3,"log_start_offset":0,"log_end_offset":3,"lag":0,"lag_time_ms":0},` +
		`{"topic":"u","partition":0,"member_id":"","client_id":"","host":"","committed":-1,"log_start_offset":-1,"log_end_offset":-1,"lag":-1,"lag_time_ms":-1,"error":"unknown topic"}]},` +
		`{"group":"h","state":"Empty","protocol_type":"consumer","protocol":"","members":[],"partitions":[]}]` + "\n"
	if json != wantJSON {
		t.Errorf("json:\n%s\nwant:\n%s", json, wantJSON)
	}
	// The flat table (Table) has the group in its first column.
	header, rows := ds.Table()
	if header[0] != "GROUP" || len(rows) != 4 || rows[3][0] != "g" || rows[3][1] != "-" {
		t.Errorf("Table() = %v %v", header, rows)
	}
}

func TestResetPlanOutput(t *testing.T) {
	plan := &ResetPlan{Group: "g", Partitions: []ResetPartition{
		{Topic: "t", Partition: 0, LogStartOffset: 0, LogEndOffset: 7, Current: 5, New: 0, Result: ResultPlanned},
		{Topic: "t", Partition: 1, LogStartOffset: 0, LogEndOffset: 3, Current: -1, New: -1, Result: ResultFailed, Error: "no committed offset to shift"},
	}}
	table, json := writeBoth(t, plan)
	wantTable := `GROUP  TOPIC  PARTITION  LOG-START  LOG-END  CURRENT  NEW  RESULT
g      t      0          0          7        5        0    planned
g      t      1          0          3        -        -    failed
`
	if table != wantTable {
		t.Errorf("table:\n%s\nwant:\n%s", table, wantTable)
	}
	wantJSON := `{"group":"g","executed":false,"partitions":[` +
		`{"topic":"t","partition":0,"log_start_offset":0,"log_end_offset":7,"current":5,"new":0,"result":"planned"},` +
		`{"topic":"t","partition":1,"log_start_offset":0,"log_end_offset":3,"current":-1,"new":-1,"result":"failed","error":"no committed offset to shift"}]}` + "\n"
	if json != wantJSON {
		t.Errorf("json:\n%s\nwant:\n%s", json, wantJSON)
	}
}

func TestGroupListAndDeleteOutput(t *testing.T) {
	table, json := writeBoth(t, GroupList{{Group: "a", State: "Stable", ProtocolType: "consumer"}, {Group: "b", State: "Empty"}})
	if want := "GROUP  STATE   PROTOCOL-TYPE\na      Stable  consumer\nb      Empty   -\n"; table != want {
		t.Errorf("list table:\n%s\nwant:\n%s", table, want)
	}
	if want := `[{"group":"a","state":"Stable","protocol_type":"consumer"},{"group":"b","state":"Empty","protocol_type":""}]` + "\n"; json != want {
		t.Errorf("list json: %s", json)
	}
	table, json = writeBoth(t, GroupList{})
	if table != "GROUP  STATE  PROTOCOL-TYPE\n" || json != "[]\n" {
		t.Errorf("empty list: %q %q", table, json)
	}
	table, json = writeBoth(t, GroupResults{{Group: "a", Result: ResultDeleted}, {Group: "b", Result: ResultFailed, Error: "NON_EMPTY_GROUP: The group is not empty."}})
	if want := "GROUP  RESULT   ERROR\na      deleted  -\nb      failed   NON_EMPTY_GROUP: The group is not empty.\n"; table != want {
		t.Errorf("delete table:\n%s\nwant:\n%s", table, want)
	}
	if want := `[{"group":"a","result":"deleted"},{"group":"b","result":"failed","error":"NON_EMPTY_GROUP: The group is not empty."}]` + "\n"; json != want {
		t.Errorf("delete json: %s", json)
	}
}
