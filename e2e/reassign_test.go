package e2e

import (
	"encoding/json"
	"fmt"
	"io"
	"math"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/mqproject/mq/lib/mqtest"
)

// mqctl runs mqctl against the cluster.
func (c *cluster) mqctl(t *testing.T, timeout time.Duration, args ...string) toolResult {
	t.Helper()
	return runTool(t, timeout, "", "mqctl", append([]string{"-b", c.bootstrapList()}, args...)...)
}

// writePlan writes a reassignment plan in Kafka's JSON to a file of the
// test's and returns its path.
func writePlan(t *testing.T, name, text string) string {
	t.Helper()
	p := filepath.Join(t.TempDir(), name)
	if err := os.WriteFile(p, []byte(text), 0o644); err != nil {
		t.Fatal(err)
	}
	return p
}

// wantUsageLine fails t unless res is a usage error (exit 2) said in one line
// on stderr, with nothing on stdout, mentioning want.
func wantUsageLine(t *testing.T, what string, res toolResult, want string) {
	t.Helper()
	if res.code != 2 || res.stdout != "" || strings.Count(res.stderr, "\n") != 1 || !strings.Contains(res.stderr, want) {
		t.Errorf("%s: exit %d, stdout %q, stderr %q; want exit 2 and one line saying %q", what, res.code, res.stdout, res.stderr, want)
	}
}

// TestReassignMovesAPartitionOntoANewBrokerUnderLoad: a partition on
// brokers 1,2,3, its leader 1 included, moves onto 4,2,3 with mqctl
// partition reassign --execute --watch while an acks=all producer writes
// to it; --verify then says it is complete, every acknowledged record is
// read back at its offset, and the producer goes on.
func TestReassignMovesAPartitionOntoANewBrokerUnderLoad(t *testing.T) {
	c := startCluster(t, 4, clusterOpts{voters: 3})
	c.createTopicOn("moving", [][]int32{{1, 2, 3}}, map[string]string{"min.insync.replicas": "2"})
	a := newAcked()
	p := startProducer(t, c.client(kgo.RequiredAcks(kgo.AllISRAcks())), "moving", "", a)
	a.waitMore(t, 300)

	// Plans that cannot be right are refused before anything changes.
	for _, tc := range []struct{ plan, want string }{
		{`{"version":1,"partitions":[{"topic":"nope","partition":0,"replicas":[1,2,3]}]}`, `topic "nope"`},
		{`{"version":1,"partitions":[{"topic":"moving","partition":5,"replicas":[1,2,3]}]}`, "moving:5"},
		{`{"version":1,"partitions":[{"topic":"moving","partition":0,"replicas":[1,2,9]}]}`, "broker 9 is not in the cluster"},
		{`{"version":1,"partitions":[{"topic":"moving","partition":0,"replicas":[1,2,2]}]}`, "broker 2 is listed twice"},
	} {
		res := c.mqctl(t, time.Minute, "partition", "reassign", "--execute", writePlan(t, "bad.json", tc.plan))
		wantUsageLine(t, tc.plan, res, tc.want)
	}

	plan := writePlan(t, "plan.json", `{"version":1,"partitions":[{"topic":"moving","partition":0,"replicas":[4,2,3],"log_dirs":["any","any","any"]}]}`)
	res := c.mqctl(t, 3*time.Minute, "partition", "reassign", "--execute", plan, "--watch")
	if res.code != 0 || !strings.Contains(res.stdout, "started") {
		t.Fatalf("execute --watch: exit %d\nstdout: %s\nstderr: %s", res.code, res.stdout, res.stderr)
	}
	// The current assignment comes first on stderr, to roll back with.
	if !strings.Contains(res.stderr, `{"version":1,"partitions":[{"topic":"moving","partition":0,"replicas":[1,2,3],"log_dirs":["any","any","any"]}]}`) ||
		!strings.Contains(res.stderr, "moving:0: complete, on 4,2,3") {
		t.Errorf("execute --watch's stderr lacks the current assignment or the end of the move:\n%s", res.stderr)
	}
	res = c.mqctl(t, time.Minute, "partition", "reassign", "--verify", plan, "-o", "json")
	var verified []struct {
		Topic    string  `json:"topic"`
		Replicas []int32 `json:"replicas"`
		Result   string  `json:"result"`
	}
	if err := json.Unmarshal([]byte(res.stdout), &verified); res.code != 0 || err != nil || len(verified) != 1 || verified[0].Result != "complete" {
		t.Fatalf("verify: exit %d, %v\nstdout: %s\nstderr: %s", res.code, err, res.stdout, res.stderr)
	}
	a.waitMore(t, 300) // producing goes on, led by 4
	p.finish()
	ps := c.waitPartitions("moving", "moving:0 on 4,2,3 in sync", func(ps []partitionState) bool {
		return slices.Equal(ps[0].replicas, []int32{4, 2, 3}) && fullISR(ps)
	})
	t.Logf("moved under load: leader now %d, %d records acknowledged, %d produce calls failed", ps[0].leader, a.count(), len(a.failed))
	a.verify(t, c, "moving")
	if res := c.mqctl(t, time.Minute, "partition", "reassignments"); res.code != 0 || res.stdout != "TOPIC  PARTITION  REPLICAS  ADDING  REMOVING\n" {
		t.Errorf("reassignments after the move: exit %d, stdout %q, stderr %q", res.code, res.stdout, res.stderr)
	}
}

// TestReassignStuckMoveIsVerifiedListedAndCancelled: a move onto a broker
// that is down cannot end: --verify exits 1 saying it is in progress,
// reassignments lists it, --watch shows it, and --cancel puts the
// partition back on its replicas; --verify then says it failed.
func TestReassignStuckMoveIsVerifiedListedAndCancelled(t *testing.T) {
	parallel(t)
	c := startCluster(t, 4, clusterOpts{voters: 3})
	c.createTopicOn("stuck", [][]int32{{1, 2}, {2, 3}}, nil)
	c.node(4).stop()
	plan := writePlan(t, "plan.json", `{"version":1,"partitions":[{"topic":"stuck","partition":0,"replicas":[1,4]}]}`)
	if res := c.mqctl(t, time.Minute, "partition", "reassign", "--execute", plan); res.code != 0 {
		t.Fatalf("execute: exit %d\nstdout: %s\nstderr: %s", res.code, res.stdout, res.stderr)
	}
	res := c.mqctl(t, time.Minute, "partition", "reassign", "--verify", plan)
	if res.code != 1 || !strings.Contains(res.stdout, "in progress") || !strings.Contains(res.stderr, "1 of 1 partitions still moving") {
		t.Errorf("verify of a stuck move: exit %d\nstdout: %s\nstderr: %s", res.code, res.stdout, res.stderr)
	}
	res = c.mqctl(t, time.Minute, "partition", "reassign", "--list", "-o", "json")
	if want := `[{"topic":"stuck","partition":0,"replicas":[1,4,2],"adding":[4],"removing":[2]}]` + "\n"; res.code != 0 || res.stdout != want {
		t.Errorf("list: exit %d, stdout %q, want %q; stderr %q", res.code, res.stdout, want, res.stderr)
	}
	// A move is not under-replication (KIP-352): topic describe shows it
	// in a MOVING column and --under-replicated leaves it out.
	res = c.mqctl(t, time.Minute, "topic", "describe", "stuck")
	if res.code != 0 || !strings.Contains(res.stdout, "MOVING") || !strings.Contains(res.stdout, "+4 -2") {
		t.Errorf("topic describe of a moving partition: exit %d\nstdout: %s\nstderr: %s", res.code, res.stdout, res.stderr)
	}
	res = c.mqctl(t, time.Minute, "topic", "describe", "--under-replicated", "stuck", "-o", "json")
	if res.code != 0 || strings.Contains(res.stdout, `"partition":0`) {
		t.Errorf("topic describe --under-replicated lists the moving partition: exit %d\nstdout: %s\nstderr: %s", res.code, res.stdout, res.stderr)
	}
	// A second --execute of the running plan leaves it to run.
	// Its rollback is the set before the move, and the cancel is what
	// restores its order exactly.
	if res := c.mqctl(t, time.Minute, "partition", "reassign", "--execute", plan); res.code != 0 || !strings.Contains(res.stdout, "moving") ||
		!strings.Contains(res.stderr, `"replicas":[1,2]`) || !strings.Contains(res.stderr, "stuck:0 is moving already") {
		t.Errorf("execute again: exit %d\nstdout: %s\nstderr: %s", res.code, res.stdout, res.stderr)
	}
	// --watch on a terminal draws the move's progress, and redraws it;
	// it ends by itself when the move does (cancelled below).
	ptmx, tty := mqtest.Terminal(t)
	screen := &lockedBuffer{}
	go io.Copy(screen, ptmx) // ends when the test closes ptmx
	watch := exec.Command(filepath.Join(binDir, "mqctl"), "-b", c.bootstrapList(), "partition", "reassign", "--watch")
	watch.Stderr = tty
	if err := watch.Start(); err != nil {
		t.Fatal(err)
	}
	watched := make(chan error, 1)
	go func() { watched <- watch.Wait() }()
	t.Cleanup(func() { watch.Process.Kill() })
	mqtest.WaitFor(t, "the watch's progress table, drawn twice", func() (bool, string) {
		s := screen.String()
		return strings.Contains(s, "ADDING") && strings.Contains(s, "1 moving") && strings.Contains(s, "waiting for 4") && strings.Contains(s, "\x1b[3A\x1b[J"), s
	})

	res = c.mqctl(t, time.Minute, "partition", "reassign", "--cancel", plan)
	if res.code != 0 || !strings.Contains(res.stdout, "cancelled") {
		t.Fatalf("cancel: exit %d\nstdout: %s\nstderr: %s", res.code, res.stdout, res.stderr)
	}
	var watchErr error
	mqtest.WaitFor(t, "the watch to end after the cancel", func() (bool, string) {
		select {
		case watchErr = <-watched:
			return true, ""
		default:
			return false, screen.String()
		}
	})
	if watchErr != nil || !strings.Contains(screen.String(), "stuck:0: no longer moving, on 1,2") {
		t.Errorf("watch: %v, screen %q", watchErr, screen.String())
	}
	c.waitPartitions("stuck", "stuck:0 back on 1,2", func(ps []partitionState) bool {
		return slices.Equal(ps[0].replicas, []int32{1, 2}) && fullISR(ps)
	})
	res = c.mqctl(t, time.Minute, "partition", "reassign", "--verify", plan)
	if res.code != 1 || !strings.Contains(res.stderr, "stuck:0: not moving, and its replicas are not the plan's") {
		t.Errorf("verify of a cancelled move: exit %d\nstdout: %s\nstderr: %s", res.code, res.stdout, res.stderr)
	}
	if res := c.mqctl(t, time.Minute, "partition", "reassign", "--cancel", "-t", "stuck"); res.code != 0 {
		t.Errorf("cancel with nothing moving: exit %d\nstdout: %s\nstderr: %s", res.code, res.stdout, res.stderr)
	}
	if res := c.mqctl(t, time.Minute, "partition", "reassign", "--watch"); res.code != 0 || !strings.Contains(res.stderr, "no partition is moving") {
		t.Errorf("watch with nothing moving: exit %d\nstdout: %s\nstderr: %s", res.code, res.stdout, res.stderr)
	}
}

// brokerLoads is broker describe -o json.
func brokerLoads(t *testing.T, c *cluster) map[int32]int {
	t.Helper()
	res := c.mqctl(t, time.Minute, "broker", "describe", "-o", "json")
	var loads []struct {
		ID       int32 `json:"id"`
		Replicas int   `json:"replicas"`
		Bytes    int64 `json:"bytes"`
	}
	if err := json.Unmarshal([]byte(res.stdout), &loads); res.code != 0 || err != nil {
		t.Fatalf("broker describe: exit %d, %v\nstdout: %s\nstderr: %s", res.code, err, res.stdout, res.stderr)
	}
	out := map[int32]int{}
	for _, l := range loads {
		out[l.ID] = l.Replicas
	}
	return out
}

// TestRebalanceFillsANewBroker: topics placed on brokers 1 to 3 only;
// cluster rebalance --dry-run shows moves onto broker 4 and moves
// nothing, cluster rebalance moves them and waits, broker 4 then holds
// its share, and a second rebalance has nothing to do.
func TestRebalanceFillsANewBroker(t *testing.T) {
	parallel(t)
	c := startCluster(t, 4, clusterOpts{voters: 3})
	c.createTopicOn("spread", [][]int32{{1, 2}, {2, 3}, {3, 1}, {1, 2}, {2, 3}, {3, 1}}, nil)
	cl := c.client(kgo.DefaultProduceTopic("spread"))
	for i := range 600 {
		if err := cl.ProduceSync(ctxFor(t, time.Minute), &kgo.Record{Value: fmt.Appendf(nil, "%0100d", i)}).FirstErr(); err != nil {
			t.Fatal(err)
		}
	}
	before := brokerLoads(t, c)

	// --generate's plan is Kafka's JSON, onto every broker named.
	res := c.mqctl(t, time.Minute, "partition", "reassign", "--generate", "--brokers", "1,2,3,4", "-t", "spread")
	type planned struct {
		Topic    string   `json:"topic"`
		Replicas []int32  `json:"replicas"`
		LogDirs  []string `json:"log_dirs"`
	}
	var plan struct {
		Version    int       `json:"version"`
		Partitions []planned `json:"partitions"`
	}
	onto4 := func(p planned) bool { return slices.Contains(p.Replicas, 4) && len(p.LogDirs) == len(p.Replicas) }
	if err := json.Unmarshal([]byte(res.stdout), &plan); res.code != 0 || err != nil || plan.Version != 1 ||
		!slices.ContainsFunc(plan.Partitions, onto4) || !strings.Contains(res.stderr, `"replicas":[1,2]`) {
		t.Fatalf("generate: exit %d, %v\nstdout: %s\nstderr: %s", res.code, err, res.stdout, res.stderr)
	}

	res = c.mqctl(t, time.Minute, "cluster", "rebalance", "--dry-run")
	if res.code != 0 || !strings.Contains(res.stdout, "spread") || !strings.Contains(res.stderr, "replicas move") || !strings.Contains(res.stderr, "dry run") {
		t.Fatalf("rebalance --dry-run: exit %d\nstdout: %s\nstderr: %s", res.code, res.stdout, res.stderr)
	}
	if after := brokerLoads(t, c); after[4] != before[4] {
		t.Fatalf("--dry-run moved replicas onto broker 4: %v, then %v", before, after)
	}

	res = c.mqctl(t, 3*time.Minute, "cluster", "rebalance")
	if res.code != 0 || !strings.Contains(res.stderr, "every move is complete") {
		t.Fatalf("rebalance: exit %d\nstdout: %s\nstderr: %s", res.code, res.stdout, res.stderr)
	}
	c.waitPartitions("spread", "spread in sync", fullISR)
	after := brokerLoads(t, c)
	lo, hi := after[1], after[1]
	for _, n := range after {
		lo, hi = min(lo, n), max(hi, n)
	}
	if hi-lo > 1 || after[4] <= before[4] {
		t.Errorf("replicas per broker after the rebalance %v (before %v): want broker 4 filled, all within one", after, before)
	}

	res = c.mqctl(t, time.Minute, "cluster", "rebalance")
	if res.code != 0 || res.stdout != "" || !strings.Contains(res.stderr, "nothing to move") {
		t.Errorf("second rebalance: exit %d\nstdout: %s\nstderr: %s", res.code, res.stdout, res.stderr)
	}
}

// TestDecommissionedBrokerStopsWithNothingOffline: broker decommission 4
// moves every replica off broker 4 while a producer writes; stopped then,
// it leaves no partition offline or under-replicated. Decommissioning
// another broker then is refused: two brokers cannot hold three replicas.
func TestDecommissionedBrokerStopsWithNothingOffline(t *testing.T) {
	parallel(t)
	c := startCluster(t, 4, clusterOpts{voters: 3})
	c.createRF3("retire", 4)
	a := newAcked()
	p := startProducer(t, c.client(kgo.RequiredAcks(kgo.AllISRAcks())), "retire", "", a)
	a.waitMore(t, 200)
	if n := brokerLoads(t, c)[4]; n == 0 {
		t.Fatalf("broker 4 holds no replica to move")
	}

	res := c.mqctl(t, 3*time.Minute, "broker", "decommission", "4")
	if res.code != 0 || !strings.Contains(res.stderr, "broker 4 holds no replica: it can be stopped") {
		t.Fatalf("decommission: exit %d\nstdout: %s\nstderr: %s", res.code, res.stdout, res.stderr)
	}
	if n := brokerLoads(t, c)[4]; n != 0 {
		t.Fatalf("broker 4 holds %d replicas after its decommission", n)
	}
	c.node(4).stop()
	a.waitMore(t, 200)
	p.finish()
	ps := c.waitPartitions("retire", "retire led and in sync without broker 4", fullISR)
	for i, part := range ps {
		if len(part.replicas) != 3 || slices.Contains(part.replicas, 4) {
			t.Errorf("retire:%d on %v: want 3 replicas, none on broker 4", i, part.replicas)
		}
	}
	a.verify(t, c, "retire")

	res = c.mqctl(t, time.Minute, "broker", "decommission", "3")
	wantUsageLine(t, "decommission 3 of 3 live brokers", res, "2 live brokers would be left")
}

// configValues reads configs of a topic or broker with config get -o
// json: name → value ("" when unset).
func configValues(t *testing.T, c *cluster, args ...string) map[string]string {
	t.Helper()
	res := c.mqctl(t, time.Minute, append(append([]string{"config", "get"}, args...), "-o", "json")...)
	var d struct {
		Configs []struct {
			Name   string  `json:"name"`
			Value  *string `json:"value"`
			Source string  `json:"source"`
		} `json:"configs"`
	}
	if err := json.Unmarshal([]byte(res.stdout), &d); res.code != 0 || err != nil {
		t.Fatalf("config get %v: exit %d, %v\nstdout: %s\nstderr: %s", args, res.code, err, res.stdout, res.stderr)
	}
	out := map[string]string{}
	for _, cfg := range d.Configs {
		if cfg.Value != nil && strings.HasPrefix(cfg.Source, "DYNAMIC") {
			out[cfg.Name] = *cfg.Value
		}
	}
	return out
}

// TestReassignThrottleIsSetChangedAndRemoved: --execute --throttle sets
// Kafka's throttle configs for a move (held running: the broker it adds
// is down), a second --execute of the running plan changes the rate, and
// --cancel removes them all.
func TestReassignThrottleIsSetChangedAndRemoved(t *testing.T) {
	c := startCluster(t, 4, clusterOpts{voters: 3})
	c.createTopicOn("slow", [][]int32{{1, 2}}, nil)
	c.node(4).stop()
	plan := writePlan(t, "plan.json", `{"version":1,"partitions":[{"topic":"slow","partition":0,"replicas":[1,4]}]}`)
	res := c.mqctl(t, time.Minute, "partition", "reassign", "--execute", plan, "--throttle", "1MB")
	if res.code != 0 || !strings.Contains(res.stdout, "started") || !strings.Contains(res.stderr, "throttled to") {
		t.Fatalf("execute --throttle: exit %d\nstdout: %s\nstderr: %s", res.code, res.stdout, res.stderr)
	}
	topic := configValues(t, c, "topic", "slow")
	if topic["leader.replication.throttled.replicas"] != "0:1,0:2" || topic["follower.replication.throttled.replicas"] != "0:4" {
		t.Errorf("topic slow's throttled replicas: %v, want leader 0:1,0:2 and follower 0:4", topic)
	}
	for _, b := range []string{"1", "2"} {
		if got := configValues(t, c, "broker", b); got["leader.replication.throttled.rate"] != "1000000" || got["follower.replication.throttled.rate"] != "1000000" {
			t.Errorf("broker %s's throttle rates: %v, want 1000000", b, got)
		}
	}

	res = c.mqctl(t, time.Minute, "partition", "reassign", "--execute", plan, "--throttle", "2MiB")
	if res.code != 0 || !strings.Contains(res.stdout, "moving") {
		t.Fatalf("execute with a new --throttle: exit %d\nstdout: %s\nstderr: %s", res.code, res.stdout, res.stderr)
	}
	if got := configValues(t, c, "broker", "1"); got["leader.replication.throttled.rate"] != "2097152" {
		t.Errorf("broker 1's rate after the new --throttle: %v, want 2097152", got)
	}
	if topic := configValues(t, c, "topic", "slow"); topic["leader.replication.throttled.replicas"] != "0:1,0:2" {
		t.Errorf("topic slow's throttled replicas after the new --throttle: %v", topic)
	}

	res = c.mqctl(t, time.Minute, "partition", "reassign", "--cancel", plan)
	if res.code != 0 || !strings.Contains(res.stderr, "throttles") {
		t.Fatalf("cancel: exit %d\nstdout: %s\nstderr: %s", res.code, res.stdout, res.stderr)
	}
	if topic := configValues(t, c, "topic", "slow"); len(topic) != 0 {
		t.Errorf("topic slow's dynamic configs after the cancel: %v, want none", topic)
	}
	for _, b := range []string{"1", "2"} {
		if got := configValues(t, c, "broker", b); got["leader.replication.throttled.rate"] != "" || got["follower.replication.throttled.rate"] != "" {
			t.Errorf("broker %s's throttle rates after the cancel: %v, want none", b, got)
		}
	}
}

// TestThrottleRateReachesABrokerThatIsDown: a broker's dynamic configs
// are the cluster's, so --throttle sets the rate of a broker that is
// down through one that answers, and the broker applies it when it
// starts; --verify, once the move is done, removes it the same way from
// a broker that is down again.
func TestThrottleRateReachesABrokerThatIsDown(t *testing.T) {
	parallel(t)
	metricsAddrs := freeAddrs(t, 4)
	c := startCluster(t, 4, clusterOpts{voters: 3, nodeProps: func(id int32) []string {
		return []string{"metrics.listen=tcp://" + metricsAddrs[id-1]}
	}})
	c.createTopicOn("slow", [][]int32{{1, 2}}, nil)
	c.waitPartitions("slow", "in sync", fullISR)
	down := c.node(4)
	down.stop()
	plan := writePlan(t, "plan.json", `{"version":1,"partitions":[{"topic":"slow","partition":0,"replicas":[1,4]}]}`)
	res := c.mqctl(t, time.Minute, "partition", "reassign", "--execute", plan, "--throttle", "1MB")
	if res.code != 0 {
		t.Fatalf("execute --throttle with broker 4 down: exit %d\nstdout: %s\nstderr: %s", res.code, res.stdout, res.stderr)
	}
	if !strings.Contains(res.stderr, "brokers 4 are fenced or do not answer: their throttle rate is set through broker") {
		t.Errorf("execute --throttle with broker 4 down does not say how broker 4 got its rate:\n%s", res.stderr)
	}

	down.start()
	followerRate := func() (float64, string) {
		v, ok := sample(scrape(t, metricsAddrs[3]), "mq_replication_throttle_rate_bytes", "side=follower")
		return v, fmt.Sprintf("found %v, %.0f", ok, v)
	}
	clusterWait.For(t, "broker 4, started, to apply the rate set while it was down", func() (bool, string) {
		v, seen := followerRate()
		return v == 1e6, seen
	})
	if got := configValues(t, c, "broker", "4"); got["leader.replication.throttled.rate"] != "1000000" || got["follower.replication.throttled.rate"] != "1000000" {
		t.Errorf("broker 4's throttle rates as it describes them: %v, want 1000000", got)
	}

	c.waitPartitions("slow", "the move done", func(ps []partitionState) bool {
		return slices.Equal(ps[0].replicas, []int32{1, 4}) && fullISR(ps)
	})
	down.stop()
	res = c.mqctl(t, time.Minute, "partition", "reassign", "--verify", plan)
	if res.code != 0 {
		t.Fatalf("verify: exit %d\nstdout: %s\nstderr: %s", res.code, res.stdout, res.stderr)
	}
	down.start()
	clusterWait.For(t, "broker 4, started, without the rate removed while it was down", func() (bool, string) {
		v, seen := followerRate()
		return math.IsInf(v, 1), seen
	})
}
