package e2e

import (
	"context"
	cryptorand "crypto/rand"
	"encoding/binary"
	"errors"
	"fmt"
	"maps"
	"math/rand"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// The disk rows of the chaos matrix: power loss (a node's disk keeps only
// what its file system wrote back or fsynced) and a full disk, on nodes
// whose data directories are ext4 loop disks (loopDisk).

// diskSize is the size of a loop disk that only has to hold a short row.
const diskSize = 64 << 20

// rowDiskSize is the size of a chaos row's loop disks: a short row's,
// and 8 MB more for every second of a long one (-chaos.duration), which
// the row's producers can write in that time (a disk that filled by
// itself would be another fault than the row's).
func rowDiskSize() int64 {
	return diskSize + int64(chaosDuration.Seconds())*(8<<20)
}

// createTopic creates topic with partitions, replication factor rf and
// configs, and waits until every partition is led with its whole ISR.
func (c *cluster) createTopic(topic string, partitions int32, rf int16, configs map[string]string) {
	c.t.Helper()
	cfg := map[string]*string{}
	for k, v := range configs {
		cfg[k] = &v
	}
	resp, err := c.admin().CreateTopic(ctxFor(c.t, time.Minute), partitions, rf, cfg, topic)
	if err == nil {
		err = resp.Err
	}
	if err != nil {
		c.t.Fatalf("create %s: %v", topic, err)
	}
	c.waitPartitions(topic, topic+" in sync", fullISR)
}

// endOffsets returns the log end offsets (high-water marks) of topic's
// partitions, waiting until every partition answers.
func (c *cluster) endOffsets(topic string, partitions int) []int64 {
	c.t.Helper()
	adm := c.admin()
	out := make([]int64, partitions)
	clusterWait.For(c.t, "the end offsets of "+topic, func() (bool, string) {
		ends, err := adm.ListEndOffsets(context.Background(), topic)
		if err != nil {
			return false, err.Error()
		}
		for p := range partitions {
			e, ok := ends.Lookup(topic, int32(p))
			if !ok || e.Err != nil {
				return false, fmt.Sprintf("ListOffsets of %s-%d: %v", topic, p, e.Err)
			}
			out[p] = e.Offset
		}
		return true, ""
	})
	return out
}

// TestPowerLossLosesWhatWasNotFsynced checks the power loss itself: one
// node, a topic with flush.policy=always and one with flush.policy=os,
// records produced to both (acks=1), the power cut. The first keeps every
// acknowledged record; the second has lost what ext4 had not written back
// (all of it, written a moment before: writeback waits 30 s). Were the
// fault a mere crash, the page cache would keep both. Should the loss
// take records the node had checkpointed as committed, the partition
// waits for an unclean election, which the test runs.
func TestPowerLossLosesWhatWasNotFsynced(t *testing.T) {
	c := startCluster(t, 1, clusterOpts{disks: map[int32]int64{1: diskSize}})
	c.createTopic("synced", 1, 1, map[string]string{"flush.policy": "always"})
	c.createTopic("unsynced", 1, 1, map[string]string{"flush.policy": "os"})
	cl := c.client(kgo.RequiredAcks(kgo.LeaderAck()), kgo.DisableIdempotentWrite())
	ctx := ctxFor(t, time.Minute)
	const n = 500
	for _, topic := range []string{"synced", "unsynced"} {
		var rs []*kgo.Record
		for i := range n {
			rs = append(rs, &kgo.Record{Topic: topic, Value: []byte(strconv.Itoa(i))})
		}
		if err := cl.ProduceSync(ctx, rs...).FirstErr(); err != nil {
			t.Fatalf("produce to %s: %v", topic, err)
		}
	}
	c.powerLoss(c.node(1))
	c.node(1).start()
	c.waitMetadata()
	electWhereLost(t, c, "unsynced", 1)
	synced, unsynced := c.endOffsets("synced", 1)[0], c.endOffsets("unsynced", 1)[0]
	t.Logf("after the power loss: flush.policy=always kept %d of %d acknowledged records, flush.policy=os %d of %d", synced, n, unsynced, n)
	if synced != n {
		t.Errorf("flush.policy=always: %d of %d acknowledged records after a power loss, want all", synced, n)
	}
	if unsynced >= n {
		t.Errorf("flush.policy=os: all %d records written a moment before the power loss survived it: the fault lost no page cache", n)
	}
}

// onDisks gives each of n nodes a loop disk of size bytes.
func onDisks(n int, size int64) map[int32]int64 {
	disks := map[int32]int64{}
	for id := range int32(n) {
		disks[id+1] = size
	}
	return disks
}

// withProps is fastFailover and more properties.
func withProps(props ...string) []string {
	return append(slices.Clone(fastFailover), props...)
}

// powerLossLeader cuts the power of a partition's leader, keeps it down
// for down and starts it again on what its disk kept.
func (n *nemesis) powerLossLeader(down time.Duration) {
	_, victim := n.victim("power loss of", down)
	n.c.powerLoss(victim)
	n.hold(down)
	victim.start()
	n.logf("node %d started on what its disk kept", victim.id)
}

// powerLossCluster cuts the power of every node at once, keeps them down
// for down and starts them together on what their disks kept.
func (n *nemesis) powerLossCluster(down time.Duration) {
	n.logf("power loss of the whole cluster for %v", down)
	n.c.powerLoss(n.c.nodes...)
	n.hold(down)
	n.c.startTogether(n.c.nodes...)
	n.logf("every node started on what its disk kept")
}

// TestChaosPowerLossOneNode (row 6a): with flush.policy=always, a
// partition's leader loses power and comes back on what its disk kept,
// then the whole cluster does; over and over. Every ISR member fsynced an
// acknowledged record before it counted for the high-water mark, so none
// is lost, and the replicas do not diverge. (The single losses alone
// could not catch a missing fsync: another replica's page cache keeps the
// records; the whole cluster's loss can, so each round has one.)
func TestChaosPowerLossOneNode(t *testing.T) {
	runChaosRow(t, chaosRow{
		name:    "power-loss-always",
		cluster: clusterOpts{props: withProps("log.flush.policy=always"), disks: onDisks(3, rowDiskSize())},
		fault: func(n *nemesis) {
			n.powerLossLeader(n.between(300*time.Millisecond, 1500*time.Millisecond))
			n.hold(n.between(500*time.Millisecond, 1500*time.Millisecond))
			n.powerLossCluster(n.between(300*time.Millisecond, time.Second))
			n.hold(n.between(500*time.Millisecond, 1500*time.Millisecond))
		},
	})
}

// recoveryPoint reads the recovery point a node's log of a partition
// checkpointed (every offset below it fsynced); 0 without a checkpoint.
func recoveryPoint(node *clusterNode, topic string, part int) (int64, error) {
	c, err := logCheckpoint(node, topic, part)
	return max(c.recoveryPoint, 0), err
}

// highWatermarkCheckpoint reads the high-water mark a node checkpointed
// for a partition; 0 when there is none.
func highWatermarkCheckpoint(node *clusterNode, topic string, part int) (int64, error) {
	c, err := logCheckpoint(node, topic, part)
	return max(c.highWatermark, 0), err
}

// partitionCheckpoint is one partition's line of a data directory's
// log-checkpoints file: recovery point and high-water mark (-1: none),
// and the leader-epoch history (epoch → start offset, and the epochs in
// order).
type partitionCheckpoint struct {
	recoveryPoint, highWatermark int64
	epochStarts                  map[int32]int64
	epochs                       []int32
}

// logCheckpoint reads a partition's line of the node's log-checkpoints
// file (lib/log: "mq log-checkpoints 1", then "DIR RECOVERY_POINT
// HIGH_WATERMARK EPOCH:START,... OWNER" lines, "-" for none, and a
// checksum line); a missing file or line is no checkpoint.
func logCheckpoint(node *clusterNode, topic string, part int) (partitionCheckpoint, error) {
	c := partitionCheckpoint{recoveryPoint: -1, highWatermark: -1, epochStarts: map[int32]int64{}}
	data, err := os.ReadFile(filepath.Join(node.dataDir, "log-checkpoints"))
	if errors.Is(err, os.ErrNotExist) {
		return c, nil
	}
	if err != nil {
		return c, err
	}
	lines := strings.Split(strings.TrimSuffix(string(data), "\n"), "\n")
	if len(lines) < 2 || lines[0] != "mq log-checkpoints 1" {
		return c, fmt.Errorf("node %d: not a log-checkpoints file: %q", node.id, data)
	}
	want := fmt.Sprintf("%s-%d", topic, part)
	offset := func(s string) (int64, error) {
		if s == "-" {
			return -1, nil
		}
		return strconv.ParseInt(s, 10, 64)
	}
	for _, line := range lines[1 : len(lines)-1] {
		f := strings.Fields(line)
		if len(f) != 5 || f[0] != want {
			continue
		}
		var err1, err2 error
		c.recoveryPoint, err1 = offset(f[1])
		c.highWatermark, err2 = offset(f[2])
		if err := errors.Join(err1, err2); err != nil {
			return c, fmt.Errorf("node %d: %q: %w", node.id, line, err)
		}
		for _, e := range strings.Split(strings.Trim(f[3], "-"), ",") {
			if e == "" {
				continue
			}
			var epoch int32
			var start int64
			if _, err := fmt.Sscanf(e, "%d:%d", &epoch, &start); err != nil {
				return c, fmt.Errorf("node %d: %q: bad epoch %q", node.id, line, e)
			}
			c.epochStarts[epoch] = start
			c.epochs = append(c.epochs, epoch)
		}
	}
	return c, nil
}

// syncedBelow is, per partition of the chaos topic, the lowest recovery
// point of the nodes' disks: below it each of them had fsynced its log,
// so whichever of them is elected leader holds it.
func syncedBelow(t *testing.T, nodes ...*clusterNode) []int64 {
	t.Helper()
	out := make([]int64, 3)
	for p := range 3 {
		out[p] = -1
		for _, node := range nodes {
			rp, err := recoveryPoint(node, chaosTopic, p)
			if err != nil {
				t.Fatal(err)
			}
			if out[p] < 0 || rp < out[p] {
				out[p] = rp
			}
		}
	}
	return out
}

// lossReport is what a power loss of the whole cluster under
// flush.policy=os took of what was acknowledged and read before it.
type lossReport struct {
	acked, lost       int // acknowledged before the loss, and of those gone
	read, takenBack   int // records read before the loss, and of those gone
	synced            []int64
	gaps, belowSynced int // violations: a loss that is not a suffix, or one below a sync point
	misplaced         int // violations: a surviving record at another offset
}

// checkLoss compares what was acknowledged (pre) and read (before) before
// the loss with the final read: per partition the survivors must be a
// prefix of the acknowledged records, each at its acknowledged offset,
// and nothing below the partition's sync point may be gone.
func checkLoss(t *testing.T, pre map[string]int64, before *observations, final map[[2]int64]string, synced []int64) lossReport {
	t.Helper()
	r := lossReport{acked: len(pre), synced: synced}
	report := func(count *int, kind, evidence string) {
		*count++
		if *count <= 20 {
			t.Errorf("%s: %s", kind, evidence)
		}
	}
	at := map[string]int64{} // "partition/value" → offset in the final read
	for o, v := range final {
		at[fmt.Sprintf("%d/%s", o[0], v)] = o[1]
	}
	survived, lostFrom := []int64{-1, -1, -1}, []int64{-1, -1, -1} // per partition: highest surviving, lowest lost
	for k, off := range pre {
		p := partitionOf(k)
		got, ok := at[k]
		switch {
		case ok && got != off:
			report(&r.misplaced, "misplaced", fmt.Sprintf("%s acknowledged at offset %d, stored at %d", k, off, got))
		case ok:
			survived[p] = max(survived[p], off)
		default:
			r.lost++
			if lostFrom[p] < 0 || off < lostFrom[p] {
				lostFrom[p] = off
			}
			if off < synced[p] {
				report(&r.belowSynced, "lost below the sync point", fmt.Sprintf("%s acknowledged at offset %d, below partition %d's recovery point %d on every replica", k, off, p, synced[p]))
			}
		}
	}
	for p := range 3 {
		if lostFrom[p] >= 0 && survived[p] > lostFrom[p] {
			report(&r.gaps, "gap", fmt.Sprintf("partition %d: the record acknowledged at offset %d is gone, the one at %d survived", p, lostFrom[p], survived[p]))
		}
	}
	before.mu.Lock()
	defer before.mu.Unlock()
	for o, v := range before.values {
		r.read++
		if final[o] != v {
			r.takenBack++
			if o[1] < synced[o[0]] {
				report(&r.belowSynced, "taken back below the sync point", fmt.Sprintf("%q read at %d/%d before the loss, gone after it", v, o[0], o[1]))
			}
		}
	}
	return r
}

// TestChaosPowerLossCluster (row 6b): with flush.policy=os (segments of
// 16 KiB, so that they roll, and their fsync moves the recovery point, a
// few times a second), every node loses power at once while three
// producers and two readers run. docs/guarantees.md promises for this
// case no more than: what was not written back may be gone. The check
// holds mq to what that means: each partition keeps a prefix of its
// acknowledged records, each at its acknowledged offset (no gap, no
// offset reused by another record); nothing below the recovery point
// every replica had checkpointed is gone, acknowledged or read; the
// cluster takes writes again (after an operator's unclean election of
// the partitions whose every ISR member lost committed records, should
// there be any) and after healing loses none of those,
// with no duplicates, no reordering and no divergence below the
// high-water mark.
func TestChaosPowerLossCluster(t *testing.T) {
	seed, length := chaosRun(0)
	t.Logf("chaos power-loss-os: seed %d (replay with -chaos.seed=%d), producing for %v", seed, seed, length)
	rng := rand.New(rand.NewSource(seed))
	c := startCluster(t, 3, clusterOpts{props: withProps("log.flush.policy=os", "log.segment.bytes=16384"), disks: onDisks(3, rowDiskSize())})
	c.createRF3(chaosTopic, 3)

	a, before := newAcked(), newObservations()
	producers := startChaosProducers(t, c, "p", a, 0)
	stopBefore := readers(c, 2, before)
	a.waitMore(t, 100)
	<-time.After(length + time.Duration(rng.Int63n(int64(length)))) // the writes' length, up to the fault

	t.Log("power loss of the whole cluster")
	c.powerLoss(c.nodes...)
	stopBefore()
	a.mu.Lock()
	pre := maps.Clone(a.offsets)
	a.mu.Unlock()
	synced := syncedBelow(t, c.nodes...)
	c.startTogether(c.nodes...)
	electWhereLost(t, c, chaosTopic, 3)
	c.waitPartitions(chaosTopic, "whole ISR after the power loss", fullISR)
	t.Logf("every node started on what its disk kept; log end offsets %v, recovery points %v", c.endOffsets(chaosTopic, 3), synced)

	after := newObservations()
	stopAfter := readers(c, 2, after)
	producers = append(producers, startChaosProducers(t, c, "q", a, 0)...)
	a.waitMore(t, 300)
	finishAll(producers)
	stopAfter()
	checkAfterLoss(t, c, "power-loss-os", seed, a, pre, before, after, synced)
}

// checkAfterLoss settles a cluster healed from a power loss and checks
// it: what was acknowledged (pre) and read (before) before the loss with
// checkLoss, what was acknowledged and read (after) since with check.
// It reports the row's figures.
func checkAfterLoss(t *testing.T, c *cluster, name string, seed int64, a *acked, pre map[string]int64, before, after *observations, synced []int64) lossReport {
	t.Helper()
	hws, logs := settle(t, c)
	final := readAll(t, c, hws, after)
	loss := checkLoss(t, pre, before, final, synced)
	postAcked := &acked{offsets: map[string]int64{}, byKey: a.byKey, attempts: a.attempts}
	for k, off := range a.offsets {
		if _, ok := pre[k]; !ok {
			postAcked.offsets[k] = off
		}
	}
	r := check(t, c, postAcked, nil, after, final, hws, logs)
	r.fault, r.seed = name, seed
	r.acknowledged += loss.acked
	r.inconsistent += loss.misplaced + len(before.inconsistent)
	r.hwRegressed += len(before.hwRegressed)
	r.lost += loss.gaps + loss.belowSynced
	t.Logf("%s: %d acknowledged before the power loss, %d of them gone (allowed: at or above the recovery points %v); %d records read before it, %d of them gone",
		name, loss.acked, loss.lost, synced, loss.read, loss.takenBack)
	recordRow(t, r)
	return loss
}

// createOn creates the chaos topic with partition p's replicas
// replicas[p] (the first is the preferred leader) and configs, and waits
// until every partition is led with its whole ISR.
func (c *cluster) createOn(replicas [][]int32, configs map[string]string) {
	c.t.Helper()
	c.createTopicOn(chaosTopic, replicas, configs)
}

// createTopicOn is createOn for any topic.
func (c *cluster) createTopicOn(topic string, replicas [][]int32, configs map[string]string) {
	c.t.Helper()
	req := kmsg.NewPtrCreateTopicsRequest()
	req.TimeoutMillis = 30000
	rt := kmsg.NewCreateTopicsRequestTopic()
	rt.Topic, rt.NumPartitions, rt.ReplicationFactor = topic, -1, -1
	for p, rs := range replicas {
		as := kmsg.NewCreateTopicsRequestTopicReplicaAssignment()
		as.Partition, as.Replicas = int32(p), rs
		rt.ReplicaAssignment = append(rt.ReplicaAssignment, as)
	}
	for k, v := range configs {
		cfg := kmsg.NewCreateTopicsRequestTopicConfig()
		cfg.Name, cfg.Value = k, kmsg.StringPtr(v)
		rt.Configs = append(rt.Configs, cfg)
	}
	req.Topics = append(req.Topics, rt)
	resp, err := req.RequestWith(ctxFor(c.t, time.Minute), c.client())
	if err == nil {
		err = kerr.ErrorForCode(resp.Topics[0].ErrorCode)
	}
	if err != nil {
		c.t.Fatalf("create %s on %v: %v", topic, replicas, err)
	}
	c.waitPartitions(topic, topic+" in sync", fullISR)
}

// ledAlone: every partition led by id with the ISR {id}.
func ledAlone(id int32) func([]partitionState) bool {
	return func(ps []partitionState) bool {
		for _, p := range ps {
			if p.leader != id || !slices.Equal(p.isr, []int32{id}) {
				return false
			}
		}
		return len(ps) == 3
	}
}

// TestChaosLastReplicaStanding (row 7, KIP-966's case): node 1 is the
// controller quorum's only voter and hosts nothing; the chaos topic's
// replicas are nodes 2, 3 and 4, min.insync.replicas=1,
// flush.policy=os, unclean leader election off, the high-water mark
// checkpointed every 200 ms. Nodes 3 and 4 crash, the ISR shrinks to
// node 2, which goes on acknowledging acks=all writes alone; then node 2
// loses power. Nodes 3 and 4 come back first and must not be elected
// (they lack what node 2 acknowledged alone): the partitions stay
// without a leader and nothing is acknowledged until node 2 is back.
// Node 2 comes back on what its disk kept: where its log ends below its
// checkpointed high-water mark it lost records it knew as committed, so
// it must not be elected either: the partition stays without a leader,
// its ISR empty, nothing acknowledged (where its log kept everything it
// knew as committed, it leads again). Then the operator's unclean
// election (ElectLeaders, kadm) elects the live replica whose log is the
// most advanced, and the cluster heals without divergence: everything
// below node 2's recovery point must be there, as a prefix. What the
// power loss took is reported, also of what nodes 3 and 4 had held.
func TestChaosLastReplicaStanding(t *testing.T) {
	seed, length := chaosRun(0)
	t.Logf("chaos last-replica: seed %d (replay with -chaos.seed=%d), producing for %v or more", seed, seed, length/2)
	rng := rand.New(rand.NewSource(seed))
	c := startCluster(t, 4, clusterOpts{voters: 1, props: withProps("log.flush.policy=os", "replica.high.watermark.checkpoint.interval.ms=200"), disks: onDisks(4, rowDiskSize())})
	last, others := c.node(2), []*clusterNode{c.node(3), c.node(4)}
	replicas := &cluster{t: t, nodes: []*clusterNode{last, others[0], others[1]}, voters: c.voters}
	c.createOn([][]int32{{2, 3, 4}, {3, 4, 2}, {4, 2, 3}}, map[string]string{"min.insync.replicas": "1", "segment.bytes": "262144"})

	a, before := newAcked(), newObservations()
	producers := startChaosProducers(t, c, "p", a, 0)
	stopBefore := readers(c, 2, before)
	a.waitMore(t, 100)
	<-time.After(length/2 + time.Duration(rng.Int63n(int64(length/2)))) // the writes' length, up to the fault
	t.Log("SIGKILL nodes 3 and 4")
	others[0].kill()
	others[1].kill()
	a.mu.Lock()
	inFullISR := maps.Clone(a.offsets) // acknowledged while all three were in sync (or about to leave)
	a.mu.Unlock()
	c.waitPartitions(chaosTopic, "node 2 alone in every ISR", ledAlone(2))
	// A few writes only: node 2's active segments still begin with records
	// nodes 3 and 4 hold too, so what the loss takes of those shows.
	a.waitMore(t, 50)
	t.Log("power loss of node 2, the last ISR member")
	c.powerLoss(last)
	stopBefore()
	a.mu.Lock()
	pre := maps.Clone(a.offsets)
	a.mu.Unlock()
	synced := syncedBelow(t, last)
	cutWrittenBack(t, last, synced)

	c.startTogether(others...) // each is up once registered
	// Until the controller fences node 2 the metadata may still name it;
	// neither then nor after may node 3 or 4 lead.
	leaderless := func() (bool, string) {
		for _, node := range c.serving() {
			ps := node.partitions(chaosTopic)
			if len(ps) != 3 {
				return false, fmt.Sprintf("node %d shows %d partitions", node.id, len(ps))
			}
			for i, p := range ps {
				if p.leader == 3 || p.leader == 4 {
					t.Fatalf("node %d shows partition %d led by node %d (ISR %v) while node 2, the last ISR member, is down", node.id, i, p.leader, p.isr)
				}
				if p.leader >= 0 {
					return false, fmt.Sprintf("node %d shows partition %d led by node %d", node.id, i, p.leader)
				}
			}
		}
		return true, ""
	}
	clusterWait.For(t, "every partition without a leader", leaderless)
	acksBefore := a.count()
	for end := time.Now().Add(3 * time.Second); time.Now().Before(end); <-time.After(100 * time.Millisecond) {
		if ok, why := leaderless(); !ok {
			t.Fatalf("after node 2 was fenced: %s", why)
		}
	}
	if got := a.count(); got != acksBefore {
		t.Errorf("%d records acknowledged while the last ISR member was down", got-acksBefore)
	}
	t.Log("nodes 3 and 4 are back; no partition had a leader for 3 s after node 2 was fenced; starting node 2")
	last.start()
	lost := lostCommitted(t, c, last)
	if len(lost) == 0 {
		t.Fatalf("node 2 reported, by the time it registered, no partition that lost records it knew as committed: the power loss took none (the row checks nothing), or node 2 opened its partitions only after registering (replay with -chaos.seed=%d)", seed)
	}
	t.Logf("node 2 lost committed records of partitions %v: they have no leader and an empty ISR", lost)
	holdLeaderless(t, c, a, lost, 2*time.Second)
	t.Logf("unclean election (ElectLeaders): leaders %v", electUnclean(t, c, chaosTopic, lost))
	after := newObservations()
	stopAfter := readers(c, 2, after)
	replicas.waitPartitions(chaosTopic, "whole ISR after the unclean election", fullISR)
	a.waitMore(t, 300)
	finishAll(producers)
	stopAfter()
	loss := checkAfterLoss(t, replicas, "last-replica", seed, a, pre, before, after, synced)
	final := map[string]bool{}
	after.mu.Lock()
	for o, v := range after.values {
		final[fmt.Sprintf("%d/%s", o[0], v)] = true
	}
	after.mu.Unlock()
	heldByOthers := 0
	for k := range inFullISR {
		if !final[k] {
			heldByOthers++
		}
	}
	t.Logf("last-replica: of %d records acknowledged while the ISR was whole (nodes 3 and 4 held them), %d are gone; of %d acknowledged by node 2 alone, %d are gone",
		len(inFullISR), heldByOthers, len(pre)-len(inFullISR), loss.lost-heldByOthers)
}

// cutWrittenBack makes sure node's power loss took records it knew as
// committed, which is the case this row is about. Under flush.policy=os
// whether it did is up to the kernel: what ext4 wrote back before the
// cut survives, and a busy machine (CI, with every package's tests at
// once) may have written everything back. Where no partition of the
// image lost any, every partition whose last segment has batches at or
// above its recovery point (what was fsynced survives any power loss)
// and below its checkpointed high-water mark loses its last such batch
// and what follows: the other outcome the same power loss could have
// had, had the kernel been slower.
func cutWrittenBack(t *testing.T, node *clusterNode, synced []int64) {
	t.Helper()
	type tail struct {
		seg     string
		end, hw int64 // the log's end on disk, the checkpointed high-water mark
		cutAt   int64 // the file position of the last batch it may lose, -1 none
		cutBase int64
	}
	tails := make([]tail, len(synced))
	for p := range synced {
		hw, err := highWatermarkCheckpoint(node, chaosTopic, p)
		if err != nil {
			t.Fatal(err)
		}
		segs, err := filepath.Glob(filepath.Join(node.dataDir, fmt.Sprintf("%s-%d", chaosTopic, p), "*.log"))
		if err != nil || len(segs) == 0 {
			t.Fatalf("node %d partition %d: segments %v (%v)", node.id, p, segs, err)
		}
		slices.Sort(segs)
		tl := tail{seg: segs[len(segs)-1], hw: hw, cutAt: -1}
		tl.end = firstOffsetOf(t, tl.seg) // where the walk finds no whole batch
		data, err := os.ReadFile(tl.seg)
		if err != nil {
			t.Fatal(err)
		}
		// RecordBatch v2: base offset at 0, length (of what follows it) at
		// 8, last offset delta at 23; a torn or zeroed tail ends the walk.
		for pos := 0; pos+61 <= len(data); {
			base := int64(binary.BigEndian.Uint64(data[pos:]))
			length := int(int32(binary.BigEndian.Uint32(data[pos+8:])))
			if length < 49 || pos+12+length > len(data) {
				break
			}
			tl.end = base + int64(int32(binary.BigEndian.Uint32(data[pos+23:]))) + 1
			if base >= synced[p] && base < hw {
				tl.cutAt, tl.cutBase = int64(pos), base
			}
			pos += 12 + length
		}
		if tl.end < hw {
			t.Logf("the power loss took records node %d knew as committed (partition %d: its log ends at %d, the checkpointed high-water mark is %d)", node.id, p, tl.end, hw)
			return
		}
		tails[p] = tl
	}
	cut := 0
	for p, tl := range tails {
		if tl.cutAt < 0 {
			continue
		}
		if err := os.Truncate(tl.seg, tl.cutAt); err != nil {
			t.Fatal(err)
		}
		cut++
		t.Logf("the kernel had written back all node %d acknowledged; partition %d loses offsets %d-%d of %s (recovery point %d, checkpointed high-water mark %d), as the power loss could have",
			node.id, p, tl.cutBase, tl.end-1, filepath.Base(tl.seg), synced[p], tl.hw)
	}
	if cut == 0 {
		t.Fatalf("node %d's power loss took nothing it knew as committed, and no partition has an unsynced batch below its checkpointed high-water mark to lose: %+v", node.id, tails)
	}
}

// lostLine is the broker's report of a partition whose log, at open,
// ended below its checkpointed high-water mark.
var lostLine = regexp.MustCompile(`msg="partition lost records it knew as committed[^"]*".* topic=` + chaosTopic + ` partition=([0-9]+) log_end_offset=([0-9]+) checkpointed_high_watermark=([0-9]+)`)

// lostCommitted returns the partitions node reports, in its log since it
// started, to have lost records it knew as committed, and waits until
// every serving node shows each of them without a leader and with an
// empty ISR, and each other partition led by node. A lost partition with
// a leader fails the test: the node must not be elected there cleanly,
// nor may anybody else (they lack what node acknowledged alone).
func lostCommitted(t *testing.T, c *cluster, node *clusterNode) []int32 {
	t.Helper()
	var lost []int32
	var evidence []string
	clusterWait.For(t, fmt.Sprintf("the partitions node %d lost leaderless, and those it kept led by it", node.id), func() (bool, string) {
		// Read again each time: a partition opened late reports late.
		lost, evidence = nil, nil
		for _, m := range lostLine.FindAllStringSubmatch(node.stderr.String(), -1) {
			p, _ := strconv.Atoi(m[1])
			lost = append(lost, int32(p))
			evidence = append(evidence, fmt.Sprintf("partition %d: log end %s, checkpointed high-water mark %s", p, m[2], m[3]))
		}
		for _, n := range c.serving() {
			ps := n.partitions(chaosTopic)
			if len(ps) != 3 {
				return false, fmt.Sprintf("node %d shows %d partitions", n.id, len(ps))
			}
			for i, p := range ps {
				switch isLost := slices.Contains(lost, int32(i)); {
				case isLost && p.leader >= 0:
					t.Fatalf("node %d shows partition %d led by node %d (ISR %v), though node %d lost committed records of it and unclean election is off", n.id, i, p.leader, p.isr, node.id)
				case !isLost && p.leader >= 0 && p.leader != node.id:
					t.Fatalf("node %d shows partition %d led by node %d (ISR %v): it lacks what node %d acknowledged alone", n.id, i, p.leader, p.isr, node.id)
				case isLost && len(p.isr) > 0:
					return false, fmt.Sprintf("node %d shows partition %d, lost on node %d, with ISR %v", n.id, i, node.id, p.isr)
				case !isLost && p.leader != node.id:
					return false, fmt.Sprintf("node %d shows partition %d, kept on node %d, with leader %d", n.id, i, node.id, p.leader)
				}
			}
		}
		return true, ""
	})
	t.Logf("node %d reports lost committed records of %v", node.id, evidence)
	return lost
}

// holdLeaderless checks for d that no serving node shows a leader for
// the partitions lost and that no write to them is acknowledged.
func holdLeaderless(t *testing.T, c *cluster, a *acked, lost []int32, d time.Duration) {
	t.Helper()
	before := make([]int, len(lost))
	for i, p := range lost {
		before[i] = a.ofPartition(p)
	}
	for end := time.Now().Add(d); time.Now().Before(end); <-time.After(100 * time.Millisecond) {
		for _, node := range c.serving() {
			ps := node.partitions(chaosTopic)
			for _, p := range lost {
				if int(p) < len(ps) && ps[p].leader >= 0 {
					t.Fatalf("node %d shows partition %d led by node %d (ISR %v): node 2 lost committed records of it and unclean election is off", node.id, p, ps[p].leader, ps[p].isr)
				}
			}
		}
	}
	for i, p := range lost {
		if n := a.ofPartition(p) - before[i]; n > 0 {
			t.Errorf("%d writes to partition %d acknowledged while it had no leader", n, p)
		}
	}
}

// ofPartition counts the acknowledged records of partition p.
func (a *acked) ofPartition(p int32) int {
	a.mu.Lock()
	defer a.mu.Unlock()
	prefix := strconv.Itoa(int(p)) + "/"
	n := 0
	for k := range a.offsets {
		if strings.HasPrefix(k, prefix) {
			n++
		}
	}
	return n
}

// electUnclean runs the operator's unclean election (ElectLeaders, live
// replica) of the partitions lost of topic, fails the test when one is
// not elected, and returns the leaders the serving nodes then show.
func electUnclean(t *testing.T, c *cluster, topic string, lost []int32) map[int32]int32 {
	t.Helper()
	set := kadm.TopicsSet{topic: {}}
	for _, p := range lost {
		set[topic][p] = struct{}{}
	}
	// The active controller elects among the replicas that reported their
	// logs, and waits only two heartbeats for reports: on a loaded machine
	// it may answer ELIGIBLE_LEADERS_NOT_AVAILABLE first, and an operator
	// asks again.
	clusterWait.For(t, "an unclean election of the lost partitions", func() (bool, string) {
		res, err := c.admin().ElectLeaders(ctxFor(t, time.Minute), kadm.ElectLiveReplica, set)
		if err != nil {
			t.Fatalf("unclean ElectLeaders: %v", err)
		}
		for _, p := range lost {
			r, ok := res[topic][p]
			switch {
			case ok && errors.Is(r.Err, kerr.EligibleLeadersNotAvailable):
				return false, fmt.Sprintf("unclean ElectLeaders of %s-%d: %v", topic, p, r.Err)
			case !ok || r.Err != nil && !errors.Is(r.Err, kerr.ElectionNotNeeded):
				t.Fatalf("unclean ElectLeaders of %s-%d: %+v", topic, p, r)
			}
		}
		return true, ""
	})
	leaders := map[int32]int32{}
	c.waitPartitions(topic, "the elected leaders", func(ps []partitionState) bool {
		for _, p := range lost {
			if int(p) >= len(ps) || ps[p].leader < 0 {
				return false
			}
			leaders[p] = ps[p].leader
		}
		return true
	})
	return leaders
}

// electWhereLost waits until every partition of topic (of n) is led or
// has no leader and an empty ISR, which is what a power loss that took
// committed records of its last ISR member leaves (docs/guarantees.md),
// and elects those uncleanly, as an operator would. It returns them.
func electWhereLost(t *testing.T, c *cluster, topic string, n int) []int32 {
	t.Helper()
	ps := c.waitPartitions(topic, "every partition led, or leaderless with an empty ISR", func(ps []partitionState) bool {
		return len(ps) == n && !slices.ContainsFunc(ps, func(p partitionState) bool { return p.leader < 0 && len(p.isr) > 0 })
	})
	var lost []int32
	for i, p := range ps {
		if p.leader < 0 {
			lost = append(lost, int32(i))
		}
	}
	if len(lost) > 0 {
		t.Logf("%s: the power loss took committed records of the last ISR member of partitions %v; unclean election: leaders %v", topic, lost, electUnclean(t, c, topic, lost))
	}
	return lost
}

// fillDisk fills node's loop disk with a ballast file while the workload
// runs, checks what a full disk does, keeps it full for full, removes the
// ballast and waits until the node is back in every ISR. While the disk is
// full: the node leaves the ISR of every partition it follows, and acks=all
// writes to those go on through the other two replicas; a partition it
// leads refuses writes with KAFKA_STORAGE_ERROR (or has moved to another
// leader), acknowledging nothing it did not store.
func (n *nemesis) fillDisk(node *clusterNode, full time.Duration) {
	n.t.Helper()
	ps := n.c.waitPartitions(chaosTopic, "a leader for every partition", func(ps []partitionState) bool {
		return len(ps) == 3 && !slices.ContainsFunc(ps, func(p partitionState) bool { return p.leader < 0 })
	})
	fillDisk(n.t, node.disk.mount)
	n.logf("filled node %d's disk (leaders %v)", node.id, leadersOf(ps))
	n.c.waitPartitionsOn(node, chaosTopic, fmt.Sprintf("node %d out of the ISR of the partitions it follows", node.id), func(ps []partitionState) bool {
		for _, p := range ps {
			if p.leader != node.id && slices.Contains(p.isr, node.id) {
				return false
			}
		}
		return len(ps) == 3
	})
	shrunk := time.Now()
	ps = n.c.waitPartitionsOn(node, chaosTopic, "partitions led", func(ps []partitionState) bool { return len(ps) == 3 })
	n.logf("node %d left the ISRs it followed in; ISRs %v", node.id, isrsOf(ps))
	clusterWait.For(n.t, fmt.Sprintf("an acks=all write acknowledged by every partition node %d does not lead", node.id), func() (bool, string) {
		for p, st := range ps {
			if st.leader != node.id && !n.acked.sentSince(int32(p), shrunk) {
				return false, fmt.Sprintf("no acks=all write to partition %d (led by node %d) acknowledged since node %d left its ISR", p, st.leader, node.id)
			}
		}
		return true, ""
	})
	for p, st := range ps {
		if st.leader == node.id {
			n.logf("a write to partition %d, led by node %d: %v", p, node.id, n.probe(p))
		}
	}
	n.hold(full)
	if err := os.Remove(filepath.Join(node.disk.mount, "filler")); err != nil {
		n.t.Fatal(err)
	}
	n.c.waitPartitions(chaosTopic, fmt.Sprintf("node %d back in every ISR", node.id), fullISR)
	n.logf("removed the ballast; node %d is back in every ISR", node.id)
}

// probe writes one record of 64 KiB (more than a segment's last block can
// hold) to partition p without retries and fails the test if it is
// acknowledged: the partition's leader has a full disk. It returns the
// error the write got. The bytes are random and sent uncompressed: 64 KiB
// of zeros, snappy-compressed by default, are a batch of 3 KB, which the
// free tail of a segment's last block may hold. Random, no two probes are
// taken for a duplicate either.
func (n *nemesis) probe(p int) error {
	n.t.Helper()
	cl := n.c.client(kgo.RecordPartitioner(kgo.ManualPartitioner()), kgo.RecordRetries(0), kgo.RequiredAcks(kgo.AllISRAcks()),
		kgo.DisableIdempotentWrite(), kgo.ProducerBatchCompression(kgo.NoCompression()))
	defer cl.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	value := make([]byte, 64<<10)
	cryptorand.Read(value) // not n.rng: the faults drawn after must not depend on how many probes ran
	err := cl.ProduceSync(ctx, &kgo.Record{Topic: chaosTopic, Partition: int32(p), Value: value}).FirstErr()
	if err == nil {
		n.t.Errorf("a 64 KiB write to partition %d was acknowledged by a leader whose disk is full", p)
	} else if !errors.Is(err, kerr.KafkaStorageError) && !errors.Is(err, kerr.NotLeaderForPartition) {
		n.t.Errorf("a write to partition %d, whose leader's disk is full: %v, want KAFKA_STORAGE_ERROR or NOT_LEADER_FOR_PARTITION", p, err)
	}
	return err
}

// leadersOf is the partitions' leaders.
func leadersOf(ps []partitionState) []int32 {
	out := make([]int32, len(ps))
	for i, p := range ps {
		out[i] = p.leader
	}
	return out
}

// isrsOf is the partitions' ISRs.
func isrsOf(ps []partitionState) [][]int32 {
	out := make([][]int32, len(ps))
	for i, p := range ps {
		out[i] = p.isr
	}
	return out
}

// TestChaosDiskFull (row 9): node 3's data directory is a small ext4
// loop disk; a ballast file fills it while the workload produces, stays a
// while and is removed (see fillDisk for what is checked meanwhile). Then
// the row's checks: nothing acknowledged is lost, nothing is served
// twice or out of order, and the replicas do not diverge: node 3 caught
// up after its failed appends.
func TestChaosDiskFull(t *testing.T) {
	runChaosRow(t, chaosRow{
		name:    "disk-full",
		cluster: clusterOpts{disks: map[int32]int64{3: rowDiskSize()}},
		fault: func(n *nemesis) {
			n.fillDisk(n.c.node(3), n.between(time.Second, 3*time.Second))
			n.hold(n.between(500*time.Millisecond, time.Second))
		},
	})
}
