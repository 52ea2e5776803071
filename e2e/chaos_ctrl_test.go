package e2e

import (
	"cmp"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// Rows 5 and 8 of the chaos matrix: the controller quorum's leader killed
// during topic creation and leader moves, and a replica's log corrupted
// while it is down.

// TestChaosControllerChurn (row 5): the controller quorum's leader is
// SIGKILLed and restarted again and again, and now and then a broker is
// shut down (SIGTERM, its leaderships move away) and restarted, while
// topics are created one after another and preferred leaders elected
// back. Every acknowledged topic exists whole on every node, a failed one
// exists whole or not at all, and no (partition, leader epoch) ever had
// two leaders: not in any node's Metadata, not in the replicas'
// leader-epoch checkpoints, not in the batches of the logs.
func TestChaosControllerChurn(t *testing.T) {
	runChaosRow(t, chaosRow{name: "controller", short: 15 * time.Second, side: startTopicChurn, fault: func(n *nemesis) {
		if n.rng.Intn(3) == 0 {
			n.shutDownBroker(n.between(300*time.Millisecond, time.Second))
		} else {
			n.killController(n.between(300*time.Millisecond, 1500*time.Millisecond))
		}
		n.hold(n.between(500*time.Millisecond, 1500*time.Millisecond))
	}})
}

// quorumLeader asks the serving nodes (DescribeQuorum) which node leads
// the controller quorum, and waits until one names a leader.
func (c *cluster) quorumLeader() int32 {
	c.t.Helper()
	var leader int32 = -1
	clusterWait.For(c.t, "a node to name the quorum's leader", func() (bool, string) {
		for _, node := range c.serving() {
			ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
			leader = node.quorumLeader(ctx)
			cancel()
			if leader > 0 {
				return true, ""
			}
		}
		return false, "no node names the quorum's leader"
	})
	return leader
}

// quorumLeader is the leader of the controller quorum as this node's
// DescribeQuorum answer names it, -1 when it does not answer or knows
// none. It uses the node's own client (metadata's), not a new one.
func (n *clusterNode) quorumLeader(ctx context.Context) int32 {
	if _, err := n.metadata(ctx); err != nil {
		return -1
	}
	req := kmsg.NewPtrDescribeQuorumRequest()
	rt := kmsg.NewDescribeQuorumRequestTopic()
	rt.Topic = "__cluster_metadata"
	rt.Partitions = []kmsg.DescribeQuorumRequestTopicPartition{kmsg.NewDescribeQuorumRequestTopicPartition()}
	req.Topics = append(req.Topics, rt)
	resp, err := req.RequestWith(ctx, n.direct)
	if err != nil || len(resp.Topics) != 1 || len(resp.Topics[0].Partitions) != 1 || resp.Topics[0].Partitions[0].ErrorCode != 0 {
		return -1
	}
	return resp.Topics[0].Partitions[0].LeaderID
}

// killController SIGKILLs the controller quorum's leader, keeps it down
// for down and starts it again.
func (n *nemesis) killController(down time.Duration) {
	victim := n.c.node(n.c.quorumLeader())
	n.logf("SIGKILL node %d, the controller quorum's leader, for %v", victim.id, down)
	victim.kill()
	n.hold(down)
	victim.start()
	n.logf("node %d started", victim.id)
}

// shutDownBroker shuts a random node down (SIGTERM: it moves its
// leaderships away first), keeps it down for down and starts it again.
func (n *nemesis) shutDownBroker(down time.Duration) {
	victim := n.c.nodes[n.rng.Intn(len(n.c.nodes))]
	n.logf("SIGTERM node %d for %v", victim.id, down)
	victim.stop()
	n.hold(down)
	victim.start()
	n.logf("node %d started", victim.id)
}

// churnPrefix names the topics topicChurn creates.
const churnPrefix = "churn-"

// topicCreation is one CreateTopics of topicChurn and its outcome.
type topicCreation struct {
	name       string
	partitions int32
	err        error // nil: acknowledged
}

// leaderAt is a (topic, partition, leader epoch) of a Metadata answer.
type leaderAt struct {
	topic            string
	partition, epoch int32
}

// topicChurn is row 5's own workload: topics created one after another
// (RF=3), preferred leaders elected back every so often, and every node's
// Metadata polled for the leader of each (partition, leader epoch).
type topicChurn struct {
	c      *cluster
	cancel context.CancelFunc
	wg     sync.WaitGroup

	mu        sync.Mutex
	creations []topicCreation
	leaders   map[leaderAt]map[int32]bool // → the leaders any node named
	polls     int
	elections int // ElectLeaders calls that moved at least one leader
}

// startTopicChurn starts row 5's workload.
func startTopicChurn(t *testing.T, c *cluster) chaosSide {
	ctx, cancel := context.WithCancel(context.Background())
	w := &topicChurn{c: c, cancel: cancel, leaders: map[leaderAt]map[int32]bool{}}
	adm := kadm.NewClient(c.client(kgo.RetryTimeout(10 * time.Second)))
	t.Cleanup(func() { cancel(); w.wg.Wait() }) // a test that fails early
	w.wg.Add(2 + len(c.nodes))
	go func() { defer w.wg.Done(); w.create(ctx, adm) }()
	go func() { defer w.wg.Done(); w.elect(ctx, adm) }()
	for _, node := range c.nodes {
		go func() { defer w.wg.Done(); w.poll(ctx, node) }()
	}
	return w
}

// create creates topics of 1 to 3 partitions one after another, at most
// one every 100 ms, noting which were acknowledged.
func (w *topicChurn) create(ctx context.Context, adm *kadm.Client) {
	pace := time.NewTicker(100 * time.Millisecond)
	defer pace.Stop()
	for i := 0; ctx.Err() == nil; i++ {
		tc := topicCreation{name: churnPrefix + strconv.Itoa(i), partitions: int32(1 + i%3)}
		cctx, cancel := context.WithTimeout(ctx, 20*time.Second)
		resp, err := adm.CreateTopic(cctx, tc.partitions, 3, nil, tc.name)
		cancel()
		if err == nil {
			err = resp.Err
		}
		if errors.Is(err, kerr.TopicAlreadyExists) {
			err = nil // a retry of a creation that had committed; no other creates this name
		}
		tc.err = err
		w.mu.Lock()
		w.creations = append(w.creations, tc)
		w.mu.Unlock()
		select {
		case <-ctx.Done():
		case <-pace.C:
		}
	}
}

// elect asks for preferred leaders of every partition every 700 ms: the
// leaderships a killed or shut-down node lost move back to it.
func (w *topicChurn) elect(ctx context.Context, adm *kadm.Client) {
	pace := time.NewTicker(700 * time.Millisecond)
	defer pace.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-pace.C:
		}
		ectx, cancel := context.WithTimeout(ctx, 5*time.Second)
		res, err := adm.ElectLeaders(ectx, kadm.ElectPreferredReplica, nil)
		cancel()
		if err != nil {
			continue
		}
		moved := false
		for _, ps := range res {
			for _, r := range ps {
				moved = moved || r.Err == nil
			}
		}
		if moved {
			w.mu.Lock()
			w.elections++
			w.mu.Unlock()
		}
	}
}

// poll asks node for Metadata every 50 ms and notes the leader of every
// (partition, leader epoch) it names.
func (w *topicChurn) poll(ctx context.Context, node *clusterNode) {
	pace := time.NewTicker(50 * time.Millisecond)
	defer pace.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-pace.C:
		}
		mctx, cancel := context.WithTimeout(ctx, time.Second)
		m, err := node.metadata(mctx)
		cancel()
		if err != nil {
			continue
		}
		w.noteLeaders(m)
	}
}

// noteLeaders notes the leaders of a Metadata answer.
func (w *topicChurn) noteLeaders(m *kmsg.MetadataResponse) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.polls++
	for _, t := range m.Topics {
		if t.Topic == nil || t.ErrorCode != 0 {
			continue
		}
		for _, p := range t.Partitions {
			if p.Leader < 0 || p.ErrorCode != 0 {
				continue
			}
			at := leaderAt{*t.Topic, p.Partition, p.LeaderEpoch}
			if w.leaders[at] == nil {
				w.leaders[at] = map[int32]bool{}
			}
			w.leaders[at][p.Leader] = true
		}
	}
}

// stop ends the creations, elections and polls, and waits for them.
func (w *topicChurn) stop() {
	w.cancel()
	w.wg.Wait()
}

// check checks the topics created, the leaders polled and the replicas'
// leader-epoch histories.
func (w *topicChurn) check(t *testing.T, _ []int64, logs [][][]batchInfo) int {
	t.Helper()
	violations := 0
	report := func(kind, evidence string) {
		violations++
		if violations <= 20 {
			t.Errorf("%s: %s", kind, evidence)
		}
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	acked, failures := 0, map[string]int{}
	for _, tc := range w.creations {
		if tc.err == nil {
			acked++
		} else {
			failures[tc.err.Error()]++
		}
	}
	for e, n := range failures {
		t.Logf("row 5: %d creations failed with: %s", n, e)
	}
	t.Logf("row 5: %d topic creations, %d acknowledged; %d preferred elections moved leaders; %d Metadata answers naming %d (partition, epoch) leaders",
		len(w.creations), acked, w.elections, w.polls, len(w.leaders))
	if acked == 0 {
		report("no topic created", fmt.Sprintf("none of %d creations was acknowledged", len(w.creations)))
	}

	for _, e := range w.checkTopics() {
		report("topic", e)
	}
	for at, leaders := range w.leaders {
		if len(leaders) > 1 {
			report("two leaders in one epoch", fmt.Sprintf("%s-%d at leader epoch %d was led by nodes %v (Metadata)",
				at.topic, at.partition, at.epoch, slices.Sorted(maps.Keys(leaders))))
		}
	}
	for _, e := range checkEpochHistories(w.c, logs) {
		report("leader epochs", e)
	}
	return violations
}

// topicView is one churn topic as one node's Metadata shows it: its
// partitions, and whether each has a leader and three replicas.
type topicView struct {
	partitions, whole int
}

// churnTopics returns the churn topics of node's Metadata.
func churnTopics(node *clusterNode) (map[string]topicView, error) {
	m, err := node.metadata(context.Background())
	if err != nil {
		return nil, err
	}
	out := map[string]topicView{}
	for _, t := range m.Topics {
		if t.Topic == nil || t.ErrorCode != 0 || !strings.HasPrefix(*t.Topic, churnPrefix) {
			continue
		}
		v := topicView{partitions: len(t.Partitions)}
		for _, p := range t.Partitions {
			if p.ErrorCode == 0 && p.Leader >= 0 && len(p.Replicas) == 3 {
				v.whole++
			}
		}
		out[*t.Topic] = v
	}
	return out, nil
}

// checkTopics waits until every node shows the same churn topics, each
// whole, and then checks them against the creations: an acknowledged one
// is there with its partitions, a failed one is there whole or not at
// all. It returns the violations; if the nodes never agree, what the
// last look found.
func (w *topicChurn) checkTopics() []string {
	var problems []string
	deadline := time.Now().Add(clusterReadyTimeout)
	tick := time.NewTicker(50 * time.Millisecond)
	defer tick.Stop()
	for {
		problems = w.topicProblems()
		if len(problems) == 0 || time.Now().After(deadline) {
			return problems
		}
		<-tick.C
	}
}

// topicProblems is one look at every node's churn topics.
func (w *topicChurn) topicProblems() []string {
	var out []string
	views := make([]map[string]topicView, len(w.c.nodes))
	for i, node := range w.c.nodes {
		v, err := churnTopics(node)
		if err != nil {
			return []string{fmt.Sprintf("node %d: Metadata: %v", node.id, err)}
		}
		views[i] = v
	}
	asked := map[string]topicCreation{}
	for _, tc := range w.creations {
		asked[tc.name] = tc
	}
	for i, v := range views {
		id := w.c.nodes[i].id
		for name, tv := range v {
			tc, ok := asked[name]
			switch {
			case !ok:
				out = append(out, fmt.Sprintf("node %d shows %s, which was never asked for", id, name))
			case tv.partitions != int(tc.partitions) || tv.whole != tv.partitions:
				out = append(out, fmt.Sprintf("node %d shows %s (asked with %d partitions, creation error %v) with %d partitions, %d of them led with 3 replicas",
					id, name, tc.partitions, tc.err, tv.partitions, tv.whole))
			}
			if _, everywhere := views[0][name]; !everywhere && i > 0 {
				out = append(out, fmt.Sprintf("node %d shows %s, node 1 does not", id, name))
			}
		}
		for _, tc := range w.creations {
			if _, ok := v[tc.name]; tc.err == nil && !ok {
				out = append(out, fmt.Sprintf("node %d lacks %s, whose creation was acknowledged", id, tc.name))
			}
			if _, ok := v[tc.name]; tc.err != nil && !ok && i > 0 {
				if _, on1 := views[0][tc.name]; on1 {
					out = append(out, fmt.Sprintf("node %d lacks %s (creation failed: %v), node 1 shows it", id, tc.name, tc.err))
				}
			}
		}
	}
	return out
}

// epochFrom is the epoch of the entry of a history covering offset, -1
// below the first.
func epochFrom(starts map[int32]int64, order []int32, offset int64) int32 {
	e := int32(-1)
	for _, epoch := range order {
		if starts[epoch] > offset {
			break
		}
		e = epoch
	}
	return e
}

// checkEpochHistories checks the replicas' leader-epoch histories, as
// their log checkpoints hold them once the settled nodes were stopped: an
// epoch starts at the same offset on every replica
// that has it, and every batch of the chaos topic lies in its own epoch's
// part of its replica's history. Two leaders writing in one epoch would
// break one or the other (or the byte comparison of the logs). It
// returns the violations.
func checkEpochHistories(c *cluster, logs [][][]batchInfo) []string {
	var out []string
	// A node writes its logs' histories to its log checkpoints now and
	// then, and all of them as it stops.
	var wg sync.WaitGroup
	for _, node := range c.nodes {
		wg.Go(node.stop)
	}
	wg.Wait()
	type first struct {
		node  int32
		start int64
	}
	seen := map[string]map[int32]first{} // partition directory → epoch → first replica's start
	for n, node := range c.nodes {
		dirs, err := filepath.Glob(filepath.Join(node.dataDir, "*-[0-9]*"))
		if err != nil {
			return append(out, err.Error())
		}
		for _, dir := range dirs {
			name := filepath.Base(dir)
			i := strings.LastIndexByte(name, '-')
			part, _ := strconv.Atoi(name[i+1:])
			ck, err := logCheckpoint(node, name[:i], part)
			starts, order := ck.epochStarts, ck.epochs
			if err != nil {
				out = append(out, fmt.Sprintf("node %d: %v", node.id, err))
				continue
			}
			if seen[name] == nil {
				seen[name] = map[int32]first{}
			}
			for _, e := range order {
				f, ok := seen[name][e]
				switch {
				case !ok:
					seen[name][e] = first{node.id, starts[e]}
				case f.start != starts[e]:
					out = append(out, fmt.Sprintf("%s: epoch %d starts at offset %d on node %d, at %d on node %d",
						name, e, f.start, f.node, starts[e], node.id))
				}
			}
			if name[:i] != chaosTopic || part >= len(logs[n]) {
				continue
			}
			for _, b := range logs[n][part] {
				if want := epochFrom(starts, order, b.base); want != b.epoch {
					out = append(out, fmt.Sprintf("node %d: %s: the batch at offsets %d-%d has leader epoch %d, its history says %d there",
						node.id, name, b.base, b.last, b.epoch, want))
				}
			}
		}
	}
	return out
}

// TestChaosCorruptSegment (row 8): while one replica of a partition is
// shut down — a follower, or in other rounds the partition's leader — its
// log is damaged: bytes flipped inside a batch in the middle of a sealed
// segment, or (other rounds) its active segment cut inside a batch; then
// it is started again. The damage must never be served (the checker's
// inconsistent and lost checks, and a read from the start through the
// damaged replica once it leads again), and the replica must get its
// bytes back: below the high-water mark they equal the others' (the
// divergence check).
func TestChaosCorruptSegment(t *testing.T) {
	d := &corruption{}
	runChaosRow(t, chaosRow{
		name:    "corrupt",
		short:   12 * time.Second,
		cluster: clusterOpts{props: append(slices.Clone(fastFailover), "log.segment.bytes=16384")},
		side:    func(t *testing.T, c *cluster) chaosSide { return d },
		fault:   d.inject,
	})
}

// corruption is row 8's fault and the violations its reads found.
type corruption struct {
	mu       sync.Mutex
	withheld []string // reads through a damaged replica that did not get every record
	rounds   map[string]int
}

// stop does nothing: row 8 has no workload of its own, its reads are
// part of its fault.
func (d *corruption) stop() {}

// check reports the reads through a damaged replica that stopped short.
func (d *corruption) check(t *testing.T, _ []int64, _ [][][]batchInfo) int {
	t.Helper()
	d.mu.Lock()
	defer d.mu.Unlock()
	t.Logf("row 8: damage injected %v", d.rounds)
	for i, e := range d.withheld {
		if i < 20 {
			t.Errorf("withheld: %s", e)
		}
	}
	return len(d.withheld)
}

// inject shuts a replica of a random partition down, damages its log,
// starts it again and waits until it is back in the ISR. Rounds take
// turns: the damage is a flipped batch of a sealed segment or a cut
// active segment, and the replica a follower or (every other pair of
// rounds) the leader, which is then made leader again (preferred
// election) and read from the start.
func (d *corruption) inject(n *nemesis) {
	flip, formerLeader := n.rounds%2 == 0, n.rounds/2%2 == 1
	part := n.rng.Intn(3)
	ps := n.c.waitPartitions(chaosTopic, "every replica in sync", fullISR)
	victim := n.c.node(ps[part].replicas[0])
	if formerLeader {
		ps = n.c.electPreferred(n.t, part, victim.id)
	} else {
		followers := slices.DeleteFunc(slices.Clone(ps[part].replicas), func(id int32) bool { return id == ps[part].leader })
		victim = n.c.node(followers[n.rng.Intn(len(followers))])
	}
	role := "follower"
	if formerLeader {
		role = "leader"
	}
	dir := filepath.Join(victim.dataDir, fmt.Sprintf("%s-%d", chaosTopic, part))
	// A sealed segment in the middle to damage.
	clusterWait.For(n.t, fmt.Sprintf("node %d's partition %d to have 3 segments", victim.id, part), func() (bool, string) {
		files, err := segmentFiles(dir)
		return len(files) >= 3, fmt.Sprintf("node %d's partition %d has segments %v (%v)", victim.id, part, files, err)
	})
	n.logf("SIGTERM node %d, %s of partition %d at epoch %d", victim.id, role, part, ps[part].epoch)
	victim.stop()
	n.hold(n.between(300*time.Millisecond, time.Second)) // the others take more records
	var what string
	var err error
	if flip {
		what, err = flipSealedBatch(dir)
	} else {
		what, err = cutActiveSegment(dir)
	}
	if err != nil {
		n.t.Fatalf("damage node %d's partition %d: %v", victim.id, part, err)
	}
	n.logf("node %d: %s", victim.id, what)
	d.mu.Lock()
	if d.rounds == nil {
		d.rounds = map[string]int{}
	}
	d.rounds[fmt.Sprintf("%s/flip=%v", role, flip)]++
	d.mu.Unlock()
	victim.start()
	repaired, saw := awaitRepair(victim, part, clusterReadyTimeout)
	n.logf("node %d started: %s", victim.id, saw)
	n.c.waitPartitions(chaosTopic, "the damaged replica back in sync", fullISR)
	n.logf("node %d back in the ISR of partition %d", victim.id, part)
	// A former leader leads again only once it has cut and re-fetched its
	// damage: elected before its scrubber found the damage, it would
	// withhold the range from consumers for good (the open case:
	// nothing moves leadership off a damaged leader yet).
	if formerLeader && repaired {
		n.c.electPreferred(n.t, part, victim.id)
		d.readThrough(n, part, victim)
	}
}

// awaitRepair waits up to d for node to say (in its log) that it cut
// partition part's log before the damage to fetch it again, and reports
// whether it did and what it saw. Not seeing it is no failure here: the
// checks after healing judge the bytes.
func awaitRepair(node *clusterNode, part int, d time.Duration) (bool, string) {
	started := time.Now()
	want := fmt.Sprintf("partition=%s-%d", chaosTopic, part)
	tick := time.NewTicker(20 * time.Millisecond)
	defer tick.Stop()
	for time.Since(started) < d {
		for _, l := range strings.Split(node.stderr.String(), "\n") {
			if strings.Contains(l, "damaged range cut off") && strings.Contains(l, want) {
				return true, fmt.Sprintf("the damage cut off after %v", time.Since(started).Round(time.Millisecond))
			}
		}
		<-tick.C
	}
	return false, fmt.Sprintf("no repair within %v", d)
}

// electPreferred elects the preferred replica of a chaos partition
// (want) and waits until every node shows it leading.
func (c *cluster) electPreferred(t *testing.T, part int, want int32) []partitionState {
	t.Helper()
	adm := c.admin()
	var ps []partitionState
	clusterWait.For(t, fmt.Sprintf("node %d to lead partition %d", want, part), func() (bool, string) {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		if _, err := adm.ElectLeaders(ctx, kadm.ElectPreferredReplica, kadm.TopicsSet{chaosTopic: {int32(part): {}}}); err != nil {
			return false, err.Error()
		}
		for _, node := range c.serving() {
			ps = node.partitions(chaosTopic)
			if len(ps) <= part || ps[part].leader != want {
				return false, fmt.Sprintf("node %d shows partition %d as %+v, want node %d leading", node.id, part, ps, want)
			}
		}
		return true, ""
	})
	return ps
}

// readThrough reads a chaos partition from offset 0 to its high-water
// mark through its leader (the damaged replica), noting every record in
// the row's observations and a read that stops short as withheld.
func (d *corruption) readThrough(n *nemesis, part int, leader *clusterNode) {
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	var hw kadm.ListedOffset
	adm := n.c.admin()
	clusterWait.For(n.t, fmt.Sprintf("the high-water mark of partition %d", part), func() (bool, string) {
		ends, err := adm.ListEndOffsets(ctx, chaosTopic)
		if err != nil {
			return false, err.Error()
		}
		var ok bool
		hw, ok = ends.Lookup(chaosTopic, int32(part))
		return ok && hw.Err == nil, fmt.Sprintf("ListOffsets of partition %d: %v", part, hw.Err)
	})
	cl := n.c.client(kgo.ConsumePartitions(map[string]map[int32]kgo.Offset{chaosTopic: {int32(part): kgo.NewOffset().At(0)}}))
	defer cl.Close()
	name := fmt.Sprintf("read through node %d", leader.id)
	next := int64(0)
	var fetchErr error
	for next < hw.Offset && fetchErr == nil && ctx.Err() == nil {
		fs := cl.PollFetches(ctx)
		fs.EachRecord(func(r *kgo.Record) {
			n.obs.record(name, r)
			next = max(next, r.Offset+1)
		})
		fs.EachError(func(_ string, _ int32, err error) {
			if !errors.Is(err, context.DeadlineExceeded) {
				fetchErr = err
			}
		})
	}
	n.logf("%s: partition %d read to %d of %d (%v)", name, part, next, hw.Offset, fetchErr)
	if next < hw.Offset {
		d.mu.Lock()
		d.withheld = append(d.withheld, fmt.Sprintf("%s: partition %d read to offset %d of the high-water mark %d: %v",
			name, part, next, hw.Offset, cmp.Or(fetchErr, ctx.Err())))
		d.mu.Unlock()
	}
}

// batchAt is a batch of a segment file: where it is and its offsets.
type batchAt struct {
	pos, size  int
	base, last int64
}

// segmentBatches parses a segment file's data into its whole batches.
func segmentBatches(data []byte) []batchAt {
	var out []batchAt
	for pos := 0; len(data)-pos >= 61; {
		size := 12 + int(binary.BigEndian.Uint32(data[pos+8:pos+12]))
		if size < 61 || pos+size > len(data) {
			break
		}
		base := int64(binary.BigEndian.Uint64(data[pos : pos+8]))
		out = append(out, batchAt{pos: pos, size: size, base: base, last: base + int64(binary.BigEndian.Uint32(data[pos+23:pos+27]))})
		pos += size
	}
	return out
}

// segmentFiles lists a partition directory's segments, oldest first.
func segmentFiles(dir string) ([]string, error) {
	files, err := filepath.Glob(filepath.Join(dir, "*.log"))
	slices.Sort(files)
	return files, err
}

// flipSealedBatch inverts four bytes in the records of the middle batch
// of the middle sealed segment of a partition directory (the node is
// down), and says what it did.
func flipSealedBatch(dir string) (string, error) {
	files, err := segmentFiles(dir)
	if err != nil {
		return "", err
	}
	if len(files) < 2 {
		return "", fmt.Errorf("%s: %d segments, no sealed one", dir, len(files))
	}
	f := files[(len(files)-1)/2]
	data, err := os.ReadFile(f)
	if err != nil {
		return "", err
	}
	bs := segmentBatches(data)
	if len(bs) == 0 {
		return "", fmt.Errorf("%s: no batch", f)
	}
	b := bs[len(bs)/2]
	at := b.pos + 61 + (b.size-61)/2 - 2
	for i := at; i < at+4 && i < b.pos+b.size; i++ {
		data[i] ^= 0xff
	}
	if err := os.WriteFile(f, data, 0o644); err != nil {
		return "", err
	}
	return fmt.Sprintf("flipped 4 bytes at position %d of sealed segment %s (%d of %d), in the batch of offsets %d-%d",
		at, filepath.Base(f), slices.Index(files, f)+1, len(files), b.base, b.last), nil
}

// cutActiveSegment cuts the last segment holding a batch in the middle
// of its last batch (the node is down), and says what it did.
func cutActiveSegment(dir string) (string, error) {
	files, err := segmentFiles(dir)
	if err != nil {
		return "", err
	}
	for i := len(files) - 1; i >= 0; i-- {
		data, err := os.ReadFile(files[i])
		if err != nil {
			return "", err
		}
		bs := segmentBatches(data)
		if len(bs) == 0 {
			continue
		}
		b := bs[len(bs)-1]
		cut := b.pos + b.size/2
		if err := os.Truncate(files[i], int64(cut)); err != nil {
			return "", err
		}
		return fmt.Sprintf("cut segment %s (%d of %d) from %d to %d bytes, inside the batch of offsets %d-%d",
			filepath.Base(files[i]), i+1, len(files), len(data), cut, b.base, b.last), nil
	}
	return "", fmt.Errorf("%s: no segment holds a batch", dir)
}
