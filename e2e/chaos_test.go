package e2e

import (
	"bytes"
	"cmp"
	"context"
	"crypto/sha256"
	"encoding/binary"
	"flag"
	"fmt"
	"math/rand"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// The chaos rows (issue: fault injection) run a workload on a 3-node
// cluster while a nemesis injects process faults, heal the cluster and
// check what was acknowledged against what is stored. `make test` runs
// them short; `make chaos` runs them for -chaos.duration each.
var (
	chaosSeed     = flag.Int64("chaos.seed", 0, "seed of the chaos rows' nemesis (0: a new one, printed)")
	chaosDuration = flag.Duration("chaos.duration", 0, "how long each chaos row injects faults (0: the short form)")
)

// chaosShort is how long a row injects faults in the short form.
const chaosShort = 5 * time.Second

const chaosTopic = "chaos"

// chaosResult is one row's figures.
type chaosResult struct {
	fault                                                             string
	seed                                                              int64
	operations, acknowledged                                          int
	lost, duplicates, reordered, inconsistent, divergent, hwRegressed int
	// rowChecks counts the violations of the row's own checks (chaosSide).
	rowChecks int
	// belowMinISR counts writes acknowledged while the nemesis had seen
	// the partition's ISR below min.insync.replicas.
	belowMinISR int
	// notes are a row's own figures (chaosNotes: the soak's memory and files).
	notes string
}

func (r chaosResult) String() string {
	s := fmt.Sprintf("%-14s seed %-20d ops %6d  acked %6d  lost %d  dup %d  reordered %d  inconsistent %d  divergent %d  hw-regressions %d  below-min-isr %d  row-checks %d",
		r.fault, r.seed, r.operations, r.acknowledged, r.lost, r.duplicates, r.reordered, r.inconsistent, r.divergent, r.hwRegressed, r.belowMinISR, r.rowChecks)
	if r.notes != "" {
		s += "  (" + r.notes + ")"
	}
	return s
}

func (r chaosResult) violations() int {
	return r.lost + r.duplicates + r.reordered + r.inconsistent + r.divergent + r.hwRegressed + r.belowMinISR + r.rowChecks
}

// chaosRows collects the rows of this run for the summary TestMain prints.
var chaosRows struct {
	sync.Mutex
	rows []chaosResult
}

// printChaosSummary prints the rows run and their totals, if any ran.
func printChaosSummary() {
	chaosRows.Lock()
	defer chaosRows.Unlock()
	if len(chaosRows.rows) == 0 {
		return
	}
	var total chaosResult
	total.fault = "total"
	fmt.Println("chaos summary:")
	for _, r := range chaosRows.rows {
		fmt.Println("chaos:", r)
		total.operations += r.operations
		total.acknowledged += r.acknowledged
		total.lost += r.lost
		total.duplicates += r.duplicates
		total.reordered += r.reordered
		total.inconsistent += r.inconsistent
		total.divergent += r.divergent
		total.hwRegressed += r.hwRegressed
		total.rowChecks += r.rowChecks
		total.belowMinISR += r.belowMinISR
	}
	verdict := "no violation"
	if n := total.violations(); n > 0 {
		verdict = fmt.Sprintf("%d violations", n)
	}
	fmt.Printf("chaos: %d rows, %d operations, %d acknowledged: %s\n", len(chaosRows.rows), total.operations, total.acknowledged, verdict)
}

// nemesis injects process faults into a cluster, its choices drawn from
// a seeded source (the processes' timing is not replayed, the faults'
// order and lengths are).
type nemesis struct {
	t     *testing.T
	c     *cluster
	rng   *rand.Rand
	begun time.Time
	// obs is the row's observations, for faults that read too.
	obs *observations
	// rounds counts the faults injected so far.
	rounds int
	acked  *acked // what the row's producers had acknowledged
	// belowMinISR is every write the nemesis saw acknowledged while the
	// ISR was below min.insync.replicas, for check.
	belowMinISR []string
}

// between is a random duration in [lo, hi).
func (n *nemesis) between(lo, hi time.Duration) time.Duration {
	return lo + time.Duration(n.rng.Int63n(int64(hi-lo)))
}

// hold lets a fault last d (a fault's length, not a wait for a condition).
func (n *nemesis) hold(d time.Duration) { <-time.After(d) }

func (n *nemesis) logf(format string, args ...any) {
	n.t.Logf("nemesis +%v: %s", time.Since(n.begun).Round(time.Millisecond), fmt.Sprintf(format, args...))
}

// victim picks a random partition, waits until it has a leader and
// returns the partition and its leader, logging what is done to it.
func (n *nemesis) victim(what string, d time.Duration) (int, *clusterNode) {
	part := n.rng.Intn(3)
	ps := n.c.waitPartitions(chaosTopic, fmt.Sprintf("a leader for partition %d", part), func(ps []partitionState) bool {
		return len(ps) == 3 && ps[part].leader >= 0
	})
	n.logf("%s node %d, leader of partition %d at epoch %d, for %v", what, ps[part].leader, part, ps[part].epoch, d)
	return part, n.c.node(ps[part].leader)
}

// killLeader SIGKILLs a partition's leader, keeps it down for down and
// starts it again.
func (n *nemesis) killLeader(down time.Duration) {
	_, victim := n.victim("SIGKILL", down)
	victim.kill()
	n.hold(down)
	victim.start()
	n.logf("node %d started", victim.id)
}

// pauseLeader SIGSTOPs a partition's leader for stopped (longer than the
// session timeout), waits until another leads the partition, and
// continues it. It first waits for the whole ISR, as the cuts do
// (nemesis.inSync): a leader paused as its ISR's only member leaves no
// one to take over until it continues.
func (n *nemesis) pauseLeader(stopped time.Duration) {
	n.inSync()
	part, victim := n.victim("SIGSTOP", stopped)
	victim.pause()
	n.hold(stopped)
	next := n.c.waitPartitions(chaosTopic, fmt.Sprintf("a new leader of partition %d", part), func(ps []partitionState) bool {
		return len(ps) == 3 && ps[part].leader >= 0 && ps[part].leader != victim.id
	})
	victim.cont()
	n.logf("SIGCONT node %d; partition %d is led by node %d at epoch %d", victim.id, part, next[part].leader, next[part].epoch)
}

// observations is every read of the workload's readers and of the final
// read: the value seen at each (partition, offset), and the violations
// found while reading.
type observations struct {
	mu           sync.Mutex
	values       map[[2]int64]string // (partition, offset) → value, as first read
	inconsistent []string
	hwRegressed  []string
	reads        int
}

func newObservations() *observations { return &observations{values: map[[2]int64]string{}} }

// record notes one record read by reader.
func (o *observations) record(reader string, r *kgo.Record) {
	o.mu.Lock()
	defer o.mu.Unlock()
	o.reads++
	at := [2]int64{int64(r.Partition), r.Offset}
	v, seen := o.values[at]
	switch {
	case !seen:
		o.values[at] = string(r.Value)
	case v != string(r.Value):
		o.inconsistent = append(o.inconsistent, fmt.Sprintf("%s read %q at %d/%d (leader epoch %d), an earlier read had %q",
			reader, r.Value, r.Partition, r.Offset, r.LeaderEpoch, v))
	}
}

// fromStart assigns every partition of the chaos topic from offset 0.
func fromStart() kgo.Opt {
	offsets := map[int32]kgo.Offset{}
	for p := range int32(3) {
		offsets[p] = kgo.NewOffset().At(0)
	}
	return kgo.ConsumePartitions(map[string]map[int32]kgo.Offset{chaosTopic: offsets})
}

// reader reads every partition from offset 0 in assign mode, recording
// every record and checking its fetches' high-water marks never go back.
func reader(ctx context.Context, c *cluster, name string, o *observations) {
	cl := c.client(fromStart(), kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()), kgo.FetchMaxWait(500*time.Millisecond))
	hw := map[int32]int64{}
	for ctx.Err() == nil {
		fs := cl.PollFetches(ctx)
		fs.EachPartition(func(p kgo.FetchTopicPartition) {
			for _, r := range p.Records {
				o.record(name, r)
			}
			if p.Err != nil || p.HighWatermark <= 0 {
				return
			}
			if last := hw[p.Partition]; p.HighWatermark < last {
				o.mu.Lock()
				o.hwRegressed = append(o.hwRegressed, fmt.Sprintf("%s saw partition %d's high-water mark go from %d to %d",
					name, p.Partition, last, p.HighWatermark))
				o.mu.Unlock()
			}
			hw[p.Partition] = max(hw[p.Partition], p.HighWatermark)
		})
	}
}

// batchInfo is one record batch of a replica's log files.
type batchInfo struct {
	base, last int64
	epoch      int32
	bytes      []byte
}

// replicaLog reads a partition's segments from a node's data directory
// (the test owns it; the node must be quiet) as its batches.
func replicaLog(node *clusterNode, part int) ([]batchInfo, error) {
	dir := filepath.Join(node.dataDir, fmt.Sprintf("%s-%d", chaosTopic, part))
	files, err := filepath.Glob(filepath.Join(dir, "*.log"))
	if err != nil {
		return nil, err
	}
	slices.Sort(files)   // 20-digit base offsets sort as numbers
	out := []batchInfo{} // not nil: the node hosts the partition (settle)
	for _, f := range files {
		data, err := os.ReadFile(f)
		if err != nil {
			return nil, err
		}
		for len(data) >= 61 { // a v2 batch header
			size := 12 + int(binary.BigEndian.Uint32(data[8:12]))
			if size < 61 || size > len(data) {
				break // a torn tail: not part of the log
			}
			base := int64(binary.BigEndian.Uint64(data[0:8]))
			out = append(out, batchInfo{base: base, last: base + int64(binary.BigEndian.Uint32(data[23:27])),
				epoch: int32(binary.BigEndian.Uint32(data[12:16])), bytes: data[:size]})
			data = data[size:]
		}
	}
	return out, nil
}

// logEnd is the offset after a log's last batch.
func logEnd(bs []batchInfo) int64 {
	if len(bs) == 0 {
		return 0
	}
	return bs[len(bs)-1].last + 1
}

// below returns the batches that start below hw and their bytes' hash.
func below(bs []batchInfo, hw int64) ([]batchInfo, [32]byte) {
	h := sha256.New()
	var out []batchInfo
	for _, b := range bs {
		if b.base >= hw {
			break
		}
		out = append(out, b)
		h.Write(b.bytes)
	}
	var sum [32]byte
	h.Sum(sum[:0])
	return out, sum
}

// epochAt is the leader epoch of the batch holding offset, -1 if none.
func epochAt(bs []batchInfo, offset int64) int32 {
	for _, b := range bs {
		if b.base <= offset && offset <= b.last {
			return b.epoch
		}
	}
	return -1
}

// settle waits until every partition is fully in sync and every
// replica's log ends at the leader's high-water mark, and returns the
// marks and every node's logs: logs[i][p] is nil where node i is not a
// replica of partition p (a cluster of more nodes than replicas).
func settle(t *testing.T, c *cluster) ([]int64, [][][]batchInfo) {
	t.Helper()
	final := c.waitPartitions(chaosTopic, "whole ISR after healing", fullISR)
	adm := c.admin()
	hws := make([]int64, 3)
	logs := make([][][]batchInfo, len(c.nodes)) // node index → partition → batches
	clusterWait.For(t, "every replica's log to end at the high-water mark", func() (bool, string) {
		ends, err := adm.ListEndOffsets(context.Background(), chaosTopic)
		if err != nil {
			return false, err.Error()
		}
		for p := range 3 {
			e, ok := ends.Lookup(chaosTopic, int32(p))
			if !ok || e.Err != nil {
				return false, fmt.Sprintf("ListOffsets of partition %d: %v", p, e.Err)
			}
			hws[p] = e.Offset
		}
		for i, node := range c.nodes {
			logs[i] = make([][]batchInfo, 3)
			for p := range 3 {
				if !slices.Contains(final[p].replicas, node.id) {
					continue
				}
				bs, err := replicaLog(node, p)
				if err != nil {
					return false, err.Error()
				}
				if end := logEnd(bs); end != hws[p] {
					return false, fmt.Sprintf("node %d's log of partition %d ends at %d, the high-water mark is %d", node.id, p, end, hws[p])
				}
				logs[i][p] = bs
			}
		}
		return true, ""
	})
	return hws, logs
}

// readAll reads every partition from offset 0 up to its high-water mark
// once more, recording into o, and returns what it read.
func readAll(t *testing.T, c *cluster, hws []int64, o *observations) map[[2]int64]string {
	t.Helper()
	cl := c.client(fromStart())
	ctx := ctxFor(t, 2*time.Minute)
	got := map[[2]int64]string{}
	next := make([]int64, 3)
	for p := range 3 {
		for next[p] < hws[p] {
			fs := cl.PollFetches(ctx)
			if ctx.Err() != nil {
				t.Fatalf("final read: partition %d read to %d of %d", p, next[p], hws[p])
			}
			fs.EachRecord(func(r *kgo.Record) {
				o.record("final read", r)
				got[[2]int64{int64(r.Partition), r.Offset}] = string(r.Value)
				next[r.Partition] = max(next[r.Partition], r.Offset+1)
			})
		}
	}
	return got
}

// readEveryReplica reads every partition from offset 0 to its high-water
// mark through every node once more, each node serving its own replica
// (Fetch v11 and later is served by followers too, KIP-392), recording
// into o: a replica that serves other bytes at an offset than the others
// is an inconsistent read.
func readEveryReplica(t *testing.T, c *cluster, hws []int64, o *observations) {
	t.Helper()
	ctx := ctxFor(t, 2*time.Minute)
	for _, node := range c.nodes {
		m, err := node.metadata(ctx)
		if err != nil {
			t.Fatalf("node %d: metadata: %v", node.id, err)
		}
		var id [16]byte
		hosts := map[int32]bool{}
		for _, mt := range m.Topics {
			if mt.Topic != nil && *mt.Topic == chaosTopic {
				id = mt.TopicID
				for _, mp := range mt.Partitions {
					hosts[mp.Partition] = slices.Contains(mp.Replicas, node.id)
				}
			}
		}
		name := fmt.Sprintf("node %d's replica", node.id)
		for p := range int32(3) {
			for next := int64(0); hosts[p] && next < hws[p]; {
				req := kmsg.NewPtrFetchRequest()
				req.ReplicaID, req.MaxWaitMillis, req.MinBytes, req.MaxBytes = -1, 200, 1, 1<<20
				rt := kmsg.NewFetchRequestTopic()
				rt.Topic, rt.TopicID = chaosTopic, id
				rp := kmsg.NewFetchRequestTopicPartition()
				rp.Partition, rp.FetchOffset, rp.PartitionMaxBytes, rp.CurrentLeaderEpoch = p, next, 1<<20, -1
				rt.Partitions = append(rt.Partitions, rp)
				req.Topics = append(req.Topics, rt)
				resp, err := req.RequestWith(ctx, node.direct.SeedBrokers()[0])
				if err != nil {
					t.Fatalf("%s of partition %d: fetch at %d of %d: %v", name, p, next, hws[p], err)
				}
				if len(resp.Topics) != 1 || len(resp.Topics[0].Partitions) != 1 {
					t.Fatalf("%s of partition %d: a fetch answer for %d topics", name, p, len(resp.Topics))
				}
				fp, _ := kgo.ProcessFetchPartition(kgo.ProcessFetchPartitionOpts{Offset: next, Topic: chaosTopic, Partition: p},
					&resp.Topics[0].Partitions[0], kgo.DefaultDecompressor(), nil)
				if fp.Err != nil {
					t.Fatalf("%s of partition %d: fetch at %d: %v", name, p, next, fp.Err)
				}
				for _, r := range fp.Records {
					if r.Offset < hws[p] {
						o.record(name, r)
					}
					next = max(next, r.Offset+1)
				}
			}
		}
	}
}

// partitionOf is the partition of an acked key "partition/value".
func partitionOf(k string) int {
	p, _ := strconv.Atoi(k[:strings.IndexByte(k, '/')])
	return p
}

// check compares what was acknowledged (a) with the final read and the
// replicas' files, adds the writes a nemesis saw acknowledged below
// min.insync.replicas, reports every violation with its evidence and
// returns the row's figures.
func check(t *testing.T, c *cluster, a *acked, belowMinISR []string, o *observations, final map[[2]int64]string, hws []int64, logs [][][]batchInfo) chaosResult {
	t.Helper()
	var r chaosResult
	report := func(count *int, kind, evidence string) {
		*count++
		if *count <= 20 {
			t.Errorf("%s: %s", kind, evidence)
		}
	}
	epochs := func(p int, off int64) string {
		var s []string
		for i := range c.nodes {
			if logs[i][p] != nil {
				s = append(s, fmt.Sprintf("node %d epoch %d", c.nodes[i].id, epochAt(logs[i][p], off)))
			}
		}
		return strings.Join(s, ", ")
	}
	for _, e := range belowMinISR {
		report(&r.belowMinISR, "acknowledged below min.insync.replicas", e)
	}
	a.mu.Lock()
	defer a.mu.Unlock()
	r.operations, r.acknowledged = a.attempts, len(a.offsets)

	where := map[string][]int64{} // "partition/value" → offsets it is stored at
	for at, v := range final {
		k := fmt.Sprintf("%d/%s", at[0], v)
		where[k] = append(where[k], at[1])
	}
	for k, offs := range where {
		if len(offs) > 1 {
			slices.Sort(offs)
			p := partitionOf(k)
			report(&r.duplicates, "duplicate", fmt.Sprintf("%s stored at offsets %v (%s)", k, offs, epochs(p, offs[0])))
		}
	}
	for k, off := range a.offsets {
		p := partitionOf(k)
		if got := final[[2]int64{int64(p), off}]; fmt.Sprintf("%d/%s", p, got) != k {
			report(&r.lost, "lost", fmt.Sprintf("%s acknowledged at offset %d; stored there: %q, the value is at offsets %v (batch at %d: %s)",
				k, off, got, where[k], off, epochs(p, off)))
		}
	}
	for key, vs := range a.byKey {
		for i := 1; i < len(vs); i++ {
			prev, cur := where[vs[i-1]], where[vs[i]]
			if len(prev) > 0 && len(cur) > 0 && cur[0] <= prev[0] {
				report(&r.reordered, "reordered", fmt.Sprintf("key %s: %s at offset %d, before %s at offset %d", key, vs[i], cur[0], vs[i-1], prev[0]))
			}
		}
	}
	o.mu.Lock()
	for _, e := range o.inconsistent {
		report(&r.inconsistent, "inconsistent offsets", e)
	}
	for _, e := range o.hwRegressed {
		report(&r.hwRegressed, "HW regression", e)
	}
	o.mu.Unlock()
	for p := range 3 {
		first := slices.IndexFunc(logs, func(l [][]batchInfo) bool { return l[p] != nil })
		if first < 0 {
			report(&r.divergent, "divergence", fmt.Sprintf("partition %d: no replica's log was read", p))
			continue
		}
		ref, refSum := below(logs[first][p], hws[p])
		for i := first + 1; i < len(c.nodes); i++ {
			if logs[i][p] == nil {
				continue
			}
			bs, sum := below(logs[i][p], hws[p])
			if sum == refSum {
				continue
			}
			at := "a batch missing on one side"
			for j := range min(len(bs), len(ref)) {
				if !bytes.Equal(bs[j].bytes, ref[j].bytes) {
					at = fmt.Sprintf("the batch at offset %d (node %d: %d-%d epoch %d; node %d: %d-%d epoch %d)",
						ref[j].base, c.nodes[first].id, ref[j].base, ref[j].last, ref[j].epoch, c.nodes[i].id, bs[j].base, bs[j].last, bs[j].epoch)
					break
				}
			}
			report(&r.divergent, "divergence", fmt.Sprintf("partition %d below the high-water mark %d: node %d and node %d differ first at %s",
				p, hws[p], c.nodes[first].id, c.nodes[i].id, at))
		}
	}
	return r
}

// chaosRow is one row of the matrix: the cluster it runs on and the
// fault its nemesis injects until the row's time is up.
type chaosRow struct {
	name string
	// nodes is the cluster's size; 0: 3.
	nodes int
	// cluster configures the cluster; its props default to fastFailover.
	cluster clusterOpts
	// fault injects one fault and heals it before it returns (the
	// nemesis calls it again until the row's time is up).
	fault func(n *nemesis)
	// pace spaces each producer key's records (0: as fast as they are
	// acknowledged), for long runs: the checker keeps every record.
	pace time.Duration
	// short is how long the short form injects faults; 0: chaosShort.
	short time.Duration
	// topicOn, when set, places the chaos topic's partitions on these
	// brokers (RF and min.insync.replicas=2 as createRF3); nil: the
	// controller places them.
	topicOn [][]int32
	// side, when set, starts the row's own workload next to the
	// producers and readers, once the chaos topic exists.
	side func(t *testing.T, c *cluster) chaosSide
}

// chaosSide is a row's own workload and checks.
type chaosSide interface {
	// stop ends the workload; the cluster is healed.
	stop()
	// check checks the row's own invariants once the cluster has
	// settled (hws and logs as settle returned them), reports each
	// violation with its evidence and returns how many it found.
	check(t *testing.T, hws []int64, logs [][][]batchInfo) int
}

// chaosNotes is a chaosSide that also has figures for the row's line.
type chaosNotes interface {
	notes() string
}

// runChaosRow runs one row: a cluster with fast failover, a 3-partition
// RF=3 min.insync.replicas=2 topic, three idempotent acks=all producers
// and two readers; the row's fault is injected until its time is up; then
// the cluster is healed, settled, read once more and checked.
func runChaosRow(t *testing.T, row chaosRow) {
	seed, length := chaosRun(row.short)
	if row.nodes == 0 {
		row.nodes = 3
	}
	if row.cluster.props == nil {
		row.cluster.props = fastFailover
	}
	name := row.name
	t.Logf("chaos %s: seed %d (replay with -chaos.seed=%d), faults for %v", name, seed, seed, length)
	c := startCluster(t, row.nodes, row.cluster)
	if row.topicOn != nil {
		c.createTopicOn(chaosTopic, row.topicOn, map[string]string{"min.insync.replicas": "2"})
		c.waitPartitions(chaosTopic, chaosTopic+" in sync", fullISR)
	} else {
		c.createRF3(chaosTopic, 3)
	}

	a, o := newAcked(), newObservations()
	producers := startChaosProducers(t, c, "p", a, row.pace)
	stopReaders := readers(c, 2, o)
	defer stopReaders()
	a.waitMore(t, 100)
	var side chaosSide
	if row.side != nil {
		side = row.side(t, c)
	}

	n := &nemesis{t: t, c: c, rng: rand.New(rand.NewSource(seed)), begun: time.Now(), obs: o, acked: a}
	for end := time.Now().Add(length); time.Now().Before(end); n.rounds++ {
		row.fault(n)
	}
	c.heal()
	a.waitMore(t, 100) // the healed cluster takes writes
	finishAll(producers)
	if side != nil {
		side.stop()
	}
	stopReaders()

	hws, logs := settle(t, c)
	final := readAll(t, c, hws, o)
	readEveryReplica(t, c, hws, o)
	r := check(t, c, a, n.belowMinISR, o, final, hws, logs)
	if side != nil {
		r.rowChecks = side.check(t, hws, logs)
	}
	r.fault, r.seed = name, seed
	if nr, ok := side.(chaosNotes); ok {
		r.notes = nr.notes()
	}
	recordRow(t, r)
}

// startChaosProducers starts the three idempotent acks=all producers of a
// chaos row on the chaos topic, named prefix0-, prefix1- and prefix2-,
// each key's records pace apart (startPacedProducer).
func startChaosProducers(t *testing.T, c *cluster, prefix string, a *acked, pace time.Duration) []*producer {
	var out []*producer
	for i := range 3 {
		out = append(out, startPacedProducer(t, c.client(kgo.RequiredAcks(kgo.AllISRAcks())), chaosTopic, fmt.Sprintf("%s%d-", prefix, i), a, pace))
	}
	return out
}

// finishAll stops producers and waits for their calls in flight.
func finishAll(producers []*producer) {
	for _, p := range producers {
		p.finish()
	}
}

// readers runs n readers into o until the returned stop is called, or
// the test ends.
func readers(c *cluster, n int, o *observations) (stop func()) {
	ctx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	for i := range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			reader(ctx, c, fmt.Sprintf("reader %d", i), o)
		}()
	}
	stop = func() { cancel(); wg.Wait() }
	c.t.Cleanup(stop)
	return stop
}

// chaosRun is a row's seed (-chaos.seed, or a new one) and how long its
// faults last (-chaos.duration, or its short form: short, 0 for
// chaosShort).
func chaosRun(short time.Duration) (seed int64, length time.Duration) {
	seed = *chaosSeed
	if seed == 0 {
		seed = time.Now().UnixNano()
	}
	length = *chaosDuration
	if length == 0 {
		length = cmp.Or(short, chaosShort)
	}
	return seed, length
}

// recordRow fails the test on the row's violations, with its seed for the
// replay, logs its line and keeps it for the summary.
func recordRow(t *testing.T, r chaosResult) {
	t.Helper()
	if r.violations() > 0 {
		t.Errorf("chaos %s: %d violations; replay with -chaos.seed=%d", r.fault, r.violations(), r.seed)
	}
	t.Log("chaos:", r)
	chaosRows.Lock()
	chaosRows.rows = append(chaosRows.rows, r)
	chaosRows.Unlock()
}

// TestChaosNoFault (row 1): without faults the checker finds nothing.
func TestChaosNoFault(t *testing.T) {
	parallel(t)
	runChaosRow(t, chaosRow{name: "none", fault: func(n *nemesis) { n.hold(time.Second) }})
}

// TestChaosKillLeaders (row 2): a partition's leader is SIGKILLed every
// few seconds and restarted shortly after; nothing acknowledged is lost.
func TestChaosKillLeaders(t *testing.T) {
	parallel(t)
	runChaosRow(t, chaosRow{name: "kill-leader", fault: func(n *nemesis) {
		n.killLeader(n.between(300*time.Millisecond, 1500*time.Millisecond))
		n.hold(n.between(time.Second, 3*time.Second))
	}})
}

// TestChaosPauseLeader (row 3): a partition's leader is SIGSTOPped past
// broker.session.timeout.ms, another is elected, and the old one is
// continued. It must not have acknowledged anything after the newer epoch
// began (no acknowledged record is lost) and must have truncated to the
// epoch boundary (its log below the high-water mark equals the others').
func TestChaosPauseLeader(t *testing.T) {
	runChaosRow(t, chaosRow{name: "pause-leader", fault: func(n *nemesis) {
		n.pauseLeader(n.between(2500*time.Millisecond, 4*time.Second)) // broker.session.timeout.ms=2000
		n.hold(n.between(time.Second, 2*time.Second))
	}})
}
