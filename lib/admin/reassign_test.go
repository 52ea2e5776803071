package admin

import (
	"bytes"
	"fmt"
	"strings"
	"testing"

	"github.com/mqproject/mq/lib/client"
)

func TestParseRate(t *testing.T) {
	for _, tc := range []struct {
		in   string
		want int64 // 0: a usage error
	}{
		{"1048576", 1048576},
		{"10MB", 10_000_000},
		{"10mb", 10_000_000},
		{"512KiB", 512 << 10},
		{"1.5MiB/s", 3 << 19},
		{"2G", 2_000_000_000},
		{"100B", 100},
		{"0", 0},
		{"0.1", 0},
		{"", 0},
		{"MB", 0},
		{"10 parsecs", 0},
		{"-5MB", 0},
	} {
		got, err := ParseRate("--throttle", tc.in)
		if tc.want == 0 {
			if client.ExitCode(err) != client.ExitUsage {
				t.Errorf("ParseRate(%q) = %d, %v; want a usage error", tc.in, got, err)
			}
			continue
		}
		if err != nil || got != tc.want {
			t.Errorf("ParseRate(%q) = %d, %v; want %d", tc.in, got, err, tc.want)
		}
	}
}

func TestParseBrokerIDs(t *testing.T) {
	if got, err := ParseBrokerIDs("--brokers", "1, 2,4"); err != nil || joinIDs(got) != "1,2,4" {
		t.Errorf("1, 2,4: %v %v", got, err)
	}
	for _, bad := range []string{"", "1,,2", "a", "1,1", "-1"} {
		if _, err := ParseBrokerIDs("--brokers", bad); client.ExitCode(err) != client.ExitUsage {
			t.Errorf("%q: %v, want a usage error", bad, err)
		}
	}
}

// A second plan's throttled replicas join the first's; "*" stays.
func TestMergeReplicaList(t *testing.T) {
	for _, tc := range []struct {
		have  string
		pairs []string
		want  string
	}{
		{"", []string{"0:1", "0:2"}, "0:1,0:2"},
		{"0:1,1:3", []string{"0:1", "2:4"}, "0:1,1:3,2:4"},
		{"*", []string{"0:1"}, "*"},
	} {
		if got := mergeReplicaList(tc.have, tc.pairs); got != tc.want {
			t.Errorf("mergeReplicaList(%q, %v) = %q, want %q", tc.have, tc.pairs, got, tc.want)
		}
	}
}

// A move's progress is what its adding replicas hold against its leader.
func TestProgressOfAMove(t *testing.T) {
	s := &partitionState{replicas: []int32{1, 2, 3, 4}, leader: 1, moving: true, adding: []int32{4}, removing: []int32{3}}
	m := progressOf("t", 0, s, map[int32]int64{1: 1000, 2: 990, 3: 1000, 4: 250})
	if m.Copied != 250 || m.Total != 1000 || m.Remaining() != 750 || m.Percent() != 25 || m.ETA() != "-" {
		t.Errorf("progress %+v: copied %d of %d, %d%%, eta %s", m, m.Copied, m.Total, m.Percent(), m.ETA())
	}
	m.Rate = 75
	if m.ETA() != "10s" {
		t.Errorf("eta at 75 B/s for 750 B: %s", m.ETA())
	}
	m.Rate = 500 // 1.5s, not truncated to 1s before rounding
	if m.ETA() != "2s" {
		t.Errorf("eta at 500 B/s for 750 B: %s", m.ETA())
	}
	m.Silent = []int32{4}
	if m.ETA() != "-" || m.silence() != " (waiting for broker 4: fenced or not answering)" {
		t.Errorf("a move onto a silent broker: eta %s, %q", m.ETA(), m.silence())
	}
	// The leader itself is being added (a new preferred leader has not
	// taken over): the largest replica not adding is the one to reach.
	s = &partitionState{replicas: []int32{4, 5, 1}, leader: 4, moving: true, adding: []int32{4, 5}}
	m = progressOf("t", 0, s, map[int32]int64{1: 800, 4: 800, 5: 1200})
	if m.Copied != 1600 || m.Total != 1600 || m.Percent() != 100 || m.ETA() != "0s" {
		t.Errorf("progress %+v", m)
	}
}

// On a terminal each refresh replaces the table drawn before.
func TestRedrawReplacesTheTable(t *testing.T) {
	var b bytes.Buffer
	progress := []MoveProgress{{Topic: "t", Partition: 0, Adding: []int32{4}, Copied: 512, Total: 2048, Rate: 512}}
	n := redraw(&b, 0, nil, progress)
	if n != 3 || strings.Contains(b.String(), "\x1b[") || !strings.Contains(b.String(), "25%") || !strings.Contains(b.String(), "1 moving, 1.5KiB to go") {
		t.Fatalf("first draw (%d lines):\n%s", n, b.String())
	}
	b.Reset()
	n = redraw(&b, n, []string{"t:1: complete, on 1,2,4"}, nil)
	if n != 0 || !strings.HasPrefix(b.String(), "\x1b[3A\x1b[J") || !strings.Contains(b.String(), "t:1: complete") {
		t.Fatalf("second draw (%d lines): %q", n, b.String())
	}
}

// A proposal prints the partitions that move, and its JSON holds both
// plans in Kafka's format.
func TestProposalOutput(t *testing.T) {
	p := Proposal{
		Plan:     NewPlan([]PlanPartition{{Topic: "t", Partition: 0, Replicas: []int32{4, 2}}}),
		Current:  NewPlan([]PlanPartition{{Topic: "t", Partition: 0, Replicas: []int32{1, 2}}}),
		Replicas: 1, Bytes: 2048, Partitions: 3,
	}
	var b bytes.Buffer
	if err := Write(&b, client.FormatTable, p); err != nil {
		t.Fatal(err)
	}
	if want := "TOPIC  PARTITION  REPLICAS  TARGET\nt      0          1,2       4,2\n"; b.String() != want {
		t.Errorf("table\n%s\nwant\n%s", b.String(), want)
	}
	b.Reset()
	if err := Write(&b, client.FormatJSON, p); err != nil {
		t.Fatal(err)
	}
	want := `{"plan":{"version":1,"partitions":[{"topic":"t","partition":0,"replicas":[4,2],"log_dirs":["any","any"]}]},` +
		`"current":{"version":1,"partitions":[{"topic":"t","partition":0,"replicas":[1,2],"log_dirs":["any","any"]}]},"replicas":1,"bytes":2048,"partitions":3}` + "\n"
	if b.String() != want {
		t.Errorf("JSON\n%s\nwant\n%s", b.String(), want)
	}
	if s := p.Summary(); s != "1 of 3 partitions change, 1 replicas move, 2.0KiB to copy" {
		t.Errorf("summary %q", s)
	}
	if s := (Proposal{Plan: NewPlan(nil), Partitions: 3}).Summary(); !strings.HasPrefix(s, "nothing to move") {
		t.Errorf("empty proposal's summary %q", s)
	}
}

func TestBrokerLoadsOutput(t *testing.T) {
	rack := "a"
	ls := BrokerLoads{
		{ID: 1, Host: "h", Port: 9092, Rack: &rack, State: BrokerAlive, Replicas: 3, Leaders: 2, PreferredLeaders: 1, Bytes: 3 << 20},
		{ID: 2, Host: "h", Port: 9093, State: BrokerFenced, Replicas: 1, Bytes: -1, BytesError: "not asked: the broker is fenced"},
	}
	var b bytes.Buffer
	if err := Write(&b, client.FormatTable, ls); err != nil {
		t.Fatal(err)
	}
	want := "BROKER  RACK  STATE   REPLICAS  LEADERS  PREFERRED  BYTES\n" +
		"1       a     alive   3         2        1          3.0MiB\n" +
		"2       -     fenced  1         0        0          ? (not asked: the broker is fenced)\n"
	if b.String() != want {
		t.Errorf("table\n%s\nwant\n%s", b.String(), want)
	}
	b.Reset()
	if err := Write(&b, client.FormatJSON, ls[:1]); err != nil {
		t.Fatal(err)
	}
	if want := `[{"id":1,"host":"h","port":9092,"rack":"a","state":"alive","replicas":3,"leaders":2,"preferred_leaders":1,"bytes":3145728}]` + "\n"; b.String() != want {
		t.Errorf("JSON\n%s\nwant\n%s", b.String(), want)
	}
}

// clusterOf is a cluster state holding the partitions given, by
// "topic:partition".
func clusterOf(parts map[string]*partitionState) clusterState {
	c := clusterState{parts: map[string]map[int32]*partitionState{}}
	for k, s := range parts {
		t, p := splitName(k)
		if c.parts[t] == nil {
			c.parts[t] = map[int32]*partitionState{}
		}
		c.parts[t][p] = s
	}
	return c
}

// A throttle covers, on the leader side, the replicas a moving partition
// had before its move and, on the follower side, those it gains, also
// when the move runs already (a second --execute changing the rate).
func TestThrottleScope(t *testing.T) {
	c := clusterOf(map[string]*partitionState{
		"t:0": {replicas: []int32{1, 2, 3}},
		"t:1": {replicas: []int32{4, 5, 2, 3}, moving: true, adding: []int32{4, 5}, removing: []int32{2, 3}},
		"t:2": {replicas: []int32{2, 3}},
		"u:0": {replicas: []int32{1}},
	})
	plan := NewPlan([]PlanPartition{
		{Topic: "t", Partition: 0, Replicas: []int32{4, 2, 3}},
		{Topic: "t", Partition: 1, Replicas: []int32{4, 5}},
		{Topic: "t", Partition: 2, Replicas: []int32{2, 3}}, // there already
		{Topic: "u", Partition: 0, Replicas: []int32{6}},
	})
	brokers, leader, follower := throttleScope(c, plan)
	if got := fmt.Sprint(brokers, leader, follower); got != "[1 2 3 4 5 6] map[t:[0:1 0:2 0:3 1:2 1:3] u:[0:1]] map[t:[0:4 1:4 1:5] u:[0:6]]" {
		t.Errorf("scope: %s", got)
	}
}

func TestVerdict(t *testing.T) {
	for _, tc := range []struct {
		s              partitionState
		target         []int32
		result, detail string
	}{
		{partitionState{replicas: []int32{4, 2, 3}}, []int32{4, 2, 3}, ResultComplete, ""},
		{partitionState{replicas: []int32{2, 3, 4}}, []int32{4, 2, 3}, ResultFailed, "not moving"},
		{partitionState{replicas: []int32{4, 1, 2}, moving: true, adding: []int32{4}, removing: []int32{1}}, []int32{4, 2}, ResultRunning, ""},
		{partitionState{replicas: []int32{5, 1, 2}, moving: true, adding: []int32{5}, removing: []int32{1}}, []int32{4, 2}, ResultRunning, "moving to 5,2"},
	} {
		result, detail := verdict(&tc.s, tc.target)
		if result != tc.result || !strings.HasPrefix(detail, tc.detail) || (tc.detail == "") != (detail == "") {
			t.Errorf("%+v to %v: %s %q, want %s %q", tc.s, tc.target, result, detail, tc.result, tc.detail)
		}
	}
}
