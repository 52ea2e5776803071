package e2e

import (
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// startSlowFencing starts n nodes with slowFencing. The nodes left
// running when the test ends are killed: with a dead peer still counted
// alive, a node stopping after another has stopped has no quorum to end
// its controlled shutdown with.
func startSlowFencing(t *testing.T, n int) *cluster {
	t.Helper()
	c := startCluster(t, n, clusterOpts{props: slowFencing})
	t.Cleanup(func() {
		for _, node := range c.nodes {
			if node.running() {
				node.kill()
			}
		}
	})
	return c
}

// slowFencing keeps a killed node unfenced for the whole test: the
// controller counts it alive, its partitions keep it as their leader, as
// a machine that vanished (no probe can prove its process gone) in the
// first seconds under the default session timeout, or for good once the
// quorum is lost. The controller does not probe the killed process. A
// controlled shutdown waits up to a session for a controller, so the
// nodes stopping together at the end (the last one has no quorum left)
// are given a shorter one than the harness's 30 s.
var slowFencing = []string{"broker.session.timeout.ms=600000", "broker.process.probe.enable=false", "controlled.shutdown.timeout.ms=5000"}

// topicDescription is mqctl topic describe -o json, the fields checked.
type topicDescription []struct {
	Topic      string `json:"topic"`
	Partitions []struct {
		Partition      int32  `json:"partition"`
		Leader         int32  `json:"leader"`
		LogStartOffset int64  `json:"log_start_offset"`
		HighWatermark  int64  `json:"high_watermark"`
		Error          string `json:"error"`
	} `json:"partitions"`
}

// describeTopic runs mqctl topic describe -o json against brokers.
func describeTopic(t *testing.T, brokers, topic string) (topicDescription, toolResult) {
	t.Helper()
	res := runTool(t, 60*time.Second, "", "mqctl", "topic", "describe", "-b", brokers, topic, "-o", "json")
	var d topicDescription
	if res.code == 0 || res.code == 1 {
		if err := json.Unmarshal([]byte(res.stdout), &d); err != nil {
			t.Fatalf("topic describe -o json (exit %d): %v\n%s\n%s", res.code, err, res.stdout, res.stderr)
		}
	}
	return d, res
}

// startIncidentCluster starts three nodes that fence a dead node only
// after the test, with topic "orders": partition p has one replica, on
// node p+1, and three records.
func startIncidentCluster(t *testing.T) *cluster {
	t.Helper()
	c := startSlowFencing(t, 3)
	c.createTopicOn("orders", [][]int32{{1}, {2}, {3}}, nil)
	cl := c.client(kgo.RecordPartitioner(kgo.ManualPartitioner()))
	defer cl.Close()
	ctx := ctxFor(t, time.Minute)
	for p := range int32(3) {
		for i := range 3 {
			r := &kgo.Record{Topic: "orders", Partition: p, Value: []byte(fmt.Sprint(i))}
			if err := cl.ProduceSync(ctx, r).FirstErr(); err != nil {
				t.Fatalf("produce to orders/%d: %v", p, err)
			}
		}
	}
	return c
}

// TestTopicDescribeDescribesTheLiveLeadersWhileOthersAreDown: a leader
// that does not answer leaves its partitions' offsets unknown, with the
// reason, and the partitions of the live leaders are described; with one
// node down and with the quorum lost.
func TestTopicDescribeDescribesTheLiveLeadersWhileOthersAreDown(t *testing.T) {
	c := startIncidentCluster(t)
	check := func(brokers string, down ...int32) {
		t.Helper()
		d, res := describeTopic(t, brokers, "orders")
		if res.code != 0 || len(d) != 1 || len(d[0].Partitions) != 3 {
			t.Fatalf("topic describe with %v down: exit %d\nstdout: %s\nstderr: %s", down, res.code, res.stdout, res.stderr)
		}
		for _, p := range d[0].Partitions {
			isDown := false
			for _, id := range down {
				isDown = isDown || p.Leader == id
			}
			want := fmt.Sprintf("leader %d unreachable", p.Leader)
			switch {
			case isDown && (p.HighWatermark != -1 || p.LogStartOffset != -1 || !strings.Contains(p.Error, want)):
				t.Errorf("orders/%d, leader %d down: %+v, want unknown offsets and %q", p.Partition, p.Leader, p, want)
			case !isDown && (p.HighWatermark != 3 || p.LogStartOffset != 0 || p.Error != ""):
				t.Errorf("orders/%d, leader %d alive: %+v, want offsets 0 and 3, no error", p.Partition, p.Leader, p)
			}
		}
		table := runTool(t, 60*time.Second, "", "mqctl", "topic", "describe", "-b", brokers, "orders")
		t.Logf("mqctl topic describe orders, %v down: exit %d\n%s%s", down, table.code, table.stdout, table.stderr)
		if table.code != 0 || !strings.Contains(table.stdout, "ERROR") || !strings.Contains(table.stdout, fmt.Sprintf("leader %d unreachable", down[0])) {
			t.Errorf("topic describe table: exit %d\nstdout: %s\nstderr: %s", table.code, table.stdout, table.stderr)
		}
		// --unavailable: the partitions of the leaders that do not
		// answer, which a client cannot use any more than leaderless ones.
		un := runTool(t, 60*time.Second, "", "mqctl", "topic", "describe", "-b", brokers, "orders", "--unavailable", "-o", "json")
		var only topicDescription
		if un.code == 0 {
			if err := json.Unmarshal([]byte(un.stdout), &only); err != nil {
				t.Fatalf("topic describe --unavailable -o json: %v\n%s", err, un.stdout)
			}
		}
		var got []int32
		for _, d := range only {
			for _, p := range d.Partitions {
				got = append(got, p.Leader)
			}
		}
		slices.Sort(got)
		if want := slices.Sorted(slices.Values(down)); un.code != 0 || !slices.Equal(got, want) {
			t.Errorf("topic describe --unavailable with %v down: exit %d, leaders %v, want %v\n%s", down, un.code, got, want, un.stderr)
		}
	}

	c.node(3).kill()
	// The dead nodes stay in the broker list, as in a script's $B: one
	// broker that answers is enough.
	check(c.bootstrapList(), 3)
	c.node(2).kill() // the quorum is lost: no leader moves any more
	check(c.bootstrapList(), 2, 3)

	// No broker at all is unreachable, exit 3.
	c.node(1).kill()
	if res := runTool(t, 60*time.Second, "", "mqctl", "topic", "describe", "-b", c.bootstrapList(), "orders"); res.code != 3 {
		t.Errorf("every node down: exit %d, stderr %q; want 3", res.code, res.stderr)
	}
}

// clusterDescription is mqctl cluster describe -o json, the fields checked.
type clusterDescription struct {
	Brokers []struct {
		ID      int32  `json:"id"`
		State   string `json:"state"`
		Error   string `json:"error"`
		LogDirs []struct {
			Path string `json:"path"`
		} `json:"log_dirs"`
		LogDirsError string `json:"log_dirs_error"`
	} `json:"brokers"`
}

// TestClusterDescribeShowsEveryBrokersLogDirs: every call lists every
// broker's log directories; a broker that does not answer is listed as
// unreachable, and the others' directories are still shown.
func TestClusterDescribeShowsEveryBrokersLogDirs(t *testing.T) {
	c := startSlowFencing(t, 3)
	describe := func(brokers string) clusterDescription {
		t.Helper()
		res := runTool(t, 60*time.Second, "", "mqctl", "cluster", "describe", "-b", brokers, "-o", "json")
		var d clusterDescription
		if res.code != 0 {
			t.Fatalf("cluster describe: exit %d\nstdout: %s\nstderr: %s", res.code, res.stdout, res.stderr)
		}
		if err := json.Unmarshal([]byte(res.stdout), &d); err != nil {
			t.Fatalf("cluster describe -o json: %v\n%s", err, res.stdout)
		}
		return d
	}
	// The request went to one broker, a different one per call: several
	// calls show whether every broker is asked each time.
	for range 4 {
		d := describe(c.bootstrapList())
		if len(d.Brokers) != 3 {
			t.Fatalf("cluster describe: %+v, want 3 brokers", d)
		}
		for _, b := range d.Brokers {
			if len(b.LogDirs) != 1 || b.LogDirsError != "" || b.State != "alive" {
				t.Fatalf("broker %d: %+v, want alive with its one log directory", b.ID, b)
			}
		}
	}

	c.node(3).kill()
	d := describe(c.node(1).addr + "," + c.node(2).addr)
	for _, b := range d.Brokers {
		switch {
		case b.ID == 3 && (b.State != "unreachable" || !strings.Contains(b.LogDirsError, "unreachable") || !strings.Contains(b.Error, "unreachable")):
			t.Errorf("killed broker 3: %+v, want state unreachable, its log directories unreachable", b)
		case b.ID != 3 && (len(b.LogDirs) != 1 || b.State != "alive"):
			t.Errorf("broker %d: %+v, want alive with its one log directory", b.ID, b)
		}
	}
	table := runTool(t, 60*time.Second, "", "mqctl", "cluster", "describe", "-b", c.node(1).addr)
	t.Logf("mqctl cluster describe, node 3 down: exit %d\n%s%s", table.code, table.stdout, table.stderr)
	if table.code != 0 || !strings.Contains(table.stdout, "unreachable") {
		t.Errorf("cluster describe table: exit %d\nstdout: %s\nstderr: %s", table.code, table.stdout, table.stderr)
	}
}

// TestClusterHealthReportsAnIncidentAtOnceAndQuorumLossWithinItsTimeout:
// a killed node is reported by the first check, before the controller
// fences it, as one line that counts the partitions it affects; with a
// majority of the voters down, the check reports the lost quorum, within
// its --timeout.
func TestClusterHealthReportsAnIncidentAtOnceAndQuorumLossWithinItsTimeout(t *testing.T) {
	c := startSlowFencing(t, 3)
	c.createTopicOn("orders", [][]int32{{1, 2, 3}, {2, 3, 1}, {3, 1, 2}}, nil)
	if h, res := clusterHealth(t, c.bootstrapList()); res.code != 0 || !h.Healthy {
		t.Fatalf("cluster health before the kill: exit %d: %s%s", res.code, res.stdout, res.stderr)
	}
	// The victims are the voters that do not lead the quorum, so that the
	// first kill leaves the quorum as it was.
	leader := c.raftLeader(t)
	var victims []*clusterNode
	for _, n := range c.nodes {
		if n.id != leader {
			victims = append(victims, n)
		}
	}

	victims[0].kill()
	h, res := clusterHealth(t, c.node(leader).addr+","+victims[1].addr)
	if res.code != 1 || len(h.Problems) != 1 {
		t.Fatalf("cluster health, node %d killed: exit %d, want 1 problem\nstdout: %s\nstderr: %s", victims[0].id, res.code, res.stdout, res.stderr)
	}
	p := h.Problems[0]
	var user []string
	for _, part := range p.Partitions {
		if !part.Internal {
			user = append(user, fmt.Sprintf("%s/%d offline=%v", part.Topic, part.Partition, part.Offline))
		}
	}
	// Node victims[0] holds a replica of every partition and leads one.
	led := int(victims[0].id - 1)
	if p.Kind != "unreachable_broker" || p.Broker != victims[0].id || len(user) != 3 || !strings.Contains(user[led], "offline=true") ||
		!strings.Contains(p.Detail, fmt.Sprintf("broker %d unreachable", victims[0].id)) {
		t.Errorf("problem %+v (user partitions %v), want broker %d unreachable with the 3 partitions of orders, orders/%d offline", p, user, victims[0].id, led)
	}
	table := runTool(t, 60*time.Second, "", "mqctl", "cluster", "health", "-b", c.node(leader).addr)
	t.Logf("mqctl cluster health, node %d killed: exit %d\n%s%s", victims[0].id, table.code, table.stdout, table.stderr)
	if table.code != 1 || strings.Count(table.stdout, "\n") != 1 || !strings.Contains(table.stdout, "partitions under-replicated, 2 user") {
		t.Errorf("cluster health table, node %d killed: exit %d, want one line\nstdout: %s\nstderr: %s", victims[0].id, table.code, table.stdout, table.stderr)
	}

	victims[1].kill()
	h, res = clusterHealth(t, c.node(leader).addr, "--timeout", "3s")
	var kinds []string
	for _, p := range h.Problems {
		kinds = append(kinds, p.Kind)
	}
	if res.code != 1 || !slices.Contains(kinds, "controller_no_quorum") {
		t.Errorf("cluster health, nodes %d and %d killed: exit %d, problems %v, want controller_no_quorum\nstdout: %s\nstderr: %s",
			victims[0].id, victims[1].id, res.code, kinds, res.stdout, res.stderr)
	}
	table = runTool(t, 60*time.Second, "", "mqctl", "cluster", "health", "-b", c.node(leader).addr, "--timeout", "3s")
	t.Logf("mqctl cluster health --timeout 3s, nodes %d and %d killed: exit %d\n%s%s", victims[0].id, victims[1].id, table.code, table.stdout, table.stderr)
}

// groupDescription is mqctl group describe -o json, the fields checked.
type groupDescription []struct {
	Group      string `json:"group"`
	Partitions []struct {
		Topic        string `json:"topic"`
		Partition    int32  `json:"partition"`
		Committed    int64  `json:"committed"`
		LogEndOffset int64  `json:"log_end_offset"`
		Lag          int64  `json:"lag"`
		Error        string `json:"error"`
	} `json:"partitions"`
}

// TestGroupDescribeShowsTheLagOnTheLiveLeadersWhileOneIsDown: a leader
// that does not answer leaves its partition's lag unknown, with the
// reason; the group's other partitions are described, and cluster health
// --max-lag still judges them.
func TestGroupDescribeShowsTheLagOnTheLiveLeadersWhileOneIsDown(t *testing.T) {
	c := startIncidentCluster(t)
	ctx := ctxFor(t, time.Minute)
	adm := c.admin()
	var commit kadm.Offsets
	for p := range int32(3) {
		commit.AddOffset("orders", p, 1, -1)
	}
	if resp, err := adm.CommitOffsets(ctx, "billing", commit); err != nil || resp.Error() != nil {
		t.Fatalf("commit: %v %v", err, resp.Error())
	}
	req := kmsg.NewPtrFindCoordinatorRequest()
	req.CoordinatorKey = "billing"
	resp, err := req.RequestWith(ctx, c.client())
	if err != nil || resp.ErrorCode != 0 {
		t.Fatalf("find coordinator: %v %v", err, kerr.ErrorForCode(resp.ErrorCode))
	}
	// The victim leads one partition of orders and is not the group's
	// coordinator.
	victim := c.node(1 + resp.NodeID%3)
	victim.kill()
	var live []string
	for _, n := range c.nodes {
		if n != victim {
			live = append(live, n.addr)
		}
	}
	// The coordinator is found through any broker, the dead one too: a
	// few runs make sure that is not the end of the describe.
	for range 3 {
		res := runTool(t, 60*time.Second, "", "mqctl", "group", "describe", "billing", "-b", strings.Join(live, ","), "-o", "json")
		var d groupDescription
		if res.code != 0 {
			t.Fatalf("group describe, node %d down: exit %d\nstdout: %s\nstderr: %s", victim.id, res.code, res.stdout, res.stderr)
		}
		if err := json.Unmarshal([]byte(res.stdout), &d); err != nil || len(d) != 1 || len(d[0].Partitions) != 3 {
			t.Fatalf("group describe -o json: %v\n%s", err, res.stdout)
		}
		for _, p := range d[0].Partitions {
			down := p.Partition == victim.id-1
			switch {
			case down && (p.Lag != -1 || !strings.Contains(p.Error, fmt.Sprintf("leader %d unreachable", victim.id))):
				t.Errorf("orders/%d, its leader %d down: %+v, want an unknown lag and why", p.Partition, victim.id, p)
			case !down && (p.Lag != 2 || p.Error != ""):
				t.Errorf("orders/%d: %+v, want a lag of 2", p.Partition, p)
			}
		}
	}
	// Every group: the dead broker's are not listed, which is said; the
	// others are described.
	res := runTool(t, 60*time.Second, "", "mqctl", "group", "describe", "-b", strings.Join(live, ","))
	if res.code != 1 || !strings.Contains(res.stdout, "billing") || !strings.Contains(res.stderr, fmt.Sprintf("the groups of broker %d not listed", victim.id)) {
		t.Errorf("group describe (every group), node %d down: exit %d, want 1 with billing described\nstdout: %s\nstderr: %s", victim.id, res.code, res.stdout, res.stderr)
	}
	h, res := clusterHealth(t, strings.Join(live, ","), "--max-lag", "1ms", "--group", "billing")
	lagging := 0
	for _, p := range h.Problems {
		switch {
		case p.Kind == "lagging_group" && p.Group == "billing" && p.Partition != victim.id-1:
			lagging++
		case p.Kind == "unreachable_broker" && p.Broker == victim.id:
		default:
			t.Errorf("cluster health --max-lag: unexpected problem %+v", p)
		}
	}
	if res.code != 1 || lagging != 2 {
		t.Errorf("cluster health --max-lag 1ms --group billing, node %d down: exit %d, want the 2 live partitions lagging\nstdout: %s\nstderr: %s",
			victim.id, res.code, res.stdout, res.stderr)
	}
}
