package replica

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/mqproject/mq/lib/clock"
	"github.com/mqproject/mq/lib/log"
	"github.com/mqproject/mq/lib/record"
)

var rewrite = flag.Bool("rewrite", false, "rewrite the expected output in testdata/*.txt with what the code produces")

// TestDataDriven runs the scripts testdata/*.txt: the replicas of one
// partition on several nodes, each a Partition over its own log, with a
// manual clock, driven the way the broker drives them. A script is a
// sequence of cases separated by blank lines:
//
//	<command lines>
//	----
//	<expected output>
//
// Commands ("node=" takes one node id or a list, "1,2"):
//
//	nodes 1,2,3 [lag=30s] [min-isr=2]   make the nodes (replica.lag.time.max.ms, min.insync.replicas)
//	become node=N leader=L epoch=E pepoch=P replicas=1,2,3 isr=1,2
//	                                    apply an image's partition state (Become)
//	append node=N n=K [acks=all|1]      append a batch of K records as leader
//	wait-hw node=N offset=O [epoch=E]   acks=all for a batch appended in epoch E (default: N's
//	                                    current one): ok, waiting, or the error (never blocks)
//	follower-fetch node=N id=F offset=O the leader records follower F's fetch (no data moves)
//	fetch node=F [max-bytes=B] [cut=C] [truncate-only]
//	                                    follower F's fetcher, once: truncation rounds with
//	                                    OffsetForLeaderEpoch while needed, then one fetch
//	                                    (its last C bytes cut off; none with truncate-only)
//	consume node=N offset=O             a consumer's Read at O: bytes and HW, or the error
//	offset-for-epoch node=N epoch=E     what N's OffsetForLeaderEpoch answers
//	truncate-from-leader node=F epoch=E end=O found=E2
//	reset-fetch-offset node=F epoch=E start=O end=O2
//	delete-records node=N before=O      the leader's DeleteRecords
//	advance-clock 31s
//	propose-isr node=N                  ProposeISR: the change, or none
//	isr-refused node=N [pepoch=P]       ISRProposalRefused of N's latest proposal (or of
//	                                    its latest made under partition epoch P)
//	isr-unresolved node=N [pepoch=P]    ISRProposalUnresolved of the same
//	checkpoint-hw node=N                the broker's periodic high-water mark checkpoint
//	restart node=N [clean]              kill (no final checkpoint) or close, then reopen
//	state [node=N]                      role, epochs, log end, HW, ISR, pending proposal,
//	                                    unresolved additions
//	log node=N                          the leader-epoch history and the batches
func TestDataDriven(t *testing.T) {
	files, err := filepath.Glob(filepath.Join("testdata", "*.txt"))
	if err != nil || len(files) == 0 {
		t.Fatalf("no scripts: %v", err)
	}
	for _, file := range files {
		t.Run(filepath.Base(file), func(t *testing.T) { runScript(t, file) })
	}
}

func runScript(t *testing.T, file string) {
	content, err := os.ReadFile(file)
	if err != nil {
		t.Fatal(err)
	}
	c := &cluster{t: t, clock: clock.NewManual(time.Unix(1_700_000_000, 0)), nodes: map[int32]*node{}}
	t.Cleanup(c.close)
	var out strings.Builder
	blocks := strings.Split(strings.TrimSpace(string(content)), "\n\n")
	for i, block := range blocks {
		input, want, found := strings.Cut(block, "----\n")
		if !found {
			input, want, found = strings.Cut(block, "----")
		}
		if !found {
			t.Fatalf("%s: case %d has no ---- line", file, i+1)
		}
		var got strings.Builder
		for line := range strings.SplitSeq(strings.TrimSpace(input), "\n") {
			if line = strings.TrimSpace(line); line == "" || strings.HasPrefix(line, "#") {
				continue
			}
			got.WriteString(c.run(line))
		}
		if *rewrite {
			fmt.Fprintf(&out, "%s\n----\n%s\n", strings.TrimRight(input, "\n"), strings.TrimRight(got.String(), "\n"))
			if i < len(blocks)-1 {
				out.WriteString("\n")
			}
			continue
		}
		if strings.TrimSpace(got.String()) != strings.TrimSpace(want) {
			t.Errorf("%s: case %d:\n%s\ngot:\n%s\nwant:\n%s", file, i+1, strings.TrimSpace(input), got.String(), want)
		}
	}
	if *rewrite {
		if err := os.WriteFile(file, []byte(out.String()), 0o644); err != nil {
			t.Fatal(err)
		}
	}
}

// cluster is one partition's replicas on several nodes.
type cluster struct {
	t      *testing.T
	clock  *clock.Manual
	nodes  map[int32]*node
	lag    time.Duration
	minISR int32
}

type node struct {
	id  int32
	dir string
	p   *Partition
	// proposed are the node's ISR proposals (propose-isr), latest last,
	// which isr-refused and isr-unresolved report on.
	proposed []ISRChange
}

// proposal is the ISR proposal an isr-refused or isr-unresolved line
// reports on: n's latest, or its latest under partition epoch pepoch=P.
func (a args) proposal(n *node) ISRChange {
	for _, c := range slices.Backward(n.proposed) {
		if _, ok := a.kv["pepoch"]; !ok || int64(c.PartitionEpoch) == a.int("pepoch") {
			return c
		}
	}
	a.c.t.Fatalf("node %d made no such ISR proposal", n.id)
	return ISRChange{}
}

func (c *cluster) close() {
	for _, n := range c.nodes {
		n.p.Close()
	}
}

func (c *cluster) open(n *node) {
	l, err := log.Open(n.dir, log.DefaultConfig(), log.Options{Clock: c.clock})
	if err != nil {
		c.t.Fatalf("node %d: open log: %v", n.id, err)
	}
	n.p = New(Config{Topic: "t", NodeID: n.id, MinInsyncReplicas: c.minISR, ReplicaLagTime: c.lag, Clock: c.clock}, l)
}

// args are a command line's key=value arguments and bare words.
type args struct {
	c     *cluster
	kv    map[string]string
	words []string
}

func (a args) str(key string) string {
	v, ok := a.kv[key]
	if !ok {
		a.c.t.Fatalf("missing %s=", key)
	}
	return v
}

func (a args) int(key string) int64 {
	n, err := strconv.ParseInt(a.str(key), 10, 64)
	if err != nil {
		a.c.t.Fatalf("%s=%s: %v", key, a.kv[key], err)
	}
	return n
}

func (a args) ids(key string) []int32 {
	var out []int32
	for f := range strings.SplitSeq(a.str(key), ",") {
		if f == "" {
			continue
		}
		n, err := strconv.ParseInt(f, 10, 32)
		if err != nil {
			a.c.t.Fatalf("%s=%s: %v", key, a.kv[key], err)
		}
		out = append(out, int32(n))
	}
	return out
}

func (a args) nodes() []*node {
	var out []*node
	for _, id := range a.ids("node") {
		n := a.c.nodes[id]
		if n == nil {
			a.c.t.Fatalf("no node %d", id)
		}
		out = append(out, n)
	}
	return out
}

func (a args) node() *node {
	ns := a.nodes()
	if len(ns) != 1 {
		a.c.t.Fatalf("want one node, have %s", a.kv["node"])
	}
	return ns[0]
}

func (a args) has(word string) bool { return slices.Contains(a.words, word) }

func (c *cluster) run(line string) string {
	fields := strings.Fields(line)
	a := args{c: c, kv: map[string]string{}}
	for _, f := range fields[1:] {
		if k, v, ok := strings.Cut(f, "="); ok {
			a.kv[k] = v
		} else {
			a.words = append(a.words, f)
		}
	}
	var b strings.Builder
	out := func(format string, v ...any) { fmt.Fprintf(&b, format+"\n", v...) }
	switch fields[0] {
	case "nodes":
		c.lag = DefaultReplicaLagTime
		if v, ok := a.kv["lag"]; ok {
			d, err := time.ParseDuration(v)
			if err != nil {
				c.t.Fatal(err)
			}
			c.lag = d
		}
		c.minISR = 1
		if _, ok := a.kv["min-isr"]; ok {
			c.minISR = int32(a.int("min-isr"))
		}
		a.kv["ids"] = a.words[0]
		for _, id := range a.ids("ids") {
			n := &node{id: id, dir: filepath.Join(c.t.TempDir(), fmt.Sprint(id))}
			c.open(n)
			c.nodes[id] = n
		}
		out("ok")
	case "become":
		s := PartitionState{
			Leader:         int32(a.int("leader")),
			LeaderEpoch:    int32(a.int("epoch")),
			PartitionEpoch: int32(a.int("pepoch")),
			Replicas:       a.ids("replicas"),
			ISR:            a.ids("isr"),
		}
		for _, n := range a.nodes() {
			if err := n.p.Become(s); err != nil {
				out("%d: %v", n.id, err)
			} else {
				out("%d: %s", n.id, c.state(n))
			}
		}
	case "append":
		n := a.node()
		acks := int16(1)
		if a.kv["acks"] == "all" {
			acks = -1
		}
		res, err := n.p.Append(testBatch(c.t, int(a.int("n"))), acks)
		if err != nil {
			out("error: %v", err)
			break
		}
		out("appended %d..%d, hw %d", res.BaseOffset, res.LastOffset, n.p.HighWatermark())
	case "wait-hw":
		ctx, cancel := context.WithCancel(context.Background())
		cancel()
		// In the node's leader epoch unless epoch= names the one appended in.
		n := a.node()
		epoch := n.p.Offsets().LeaderEpoch
		if _, ok := a.kv["epoch"]; ok {
			epoch = int32(a.int("epoch"))
		}
		switch err := n.p.WaitHighWatermark(ctx, a.int("offset"), epoch); {
		case err == nil:
			out("ok")
		case errors.Is(err, context.Canceled):
			out("waiting")
		default:
			out("error: %v", err)
		}
	case "follower-fetch":
		n := a.node()
		ok := n.p.RecordFollowerFetch(int32(a.int("id")), a.int("offset"))
		out("recorded %v, hw %d", ok, n.p.HighWatermark())
	case "fetch":
		maxBytes := 1 << 20
		if _, ok := a.kv["max-bytes"]; ok {
			maxBytes = int(a.int("max-bytes"))
		}
		cut := 0
		if _, ok := a.kv["cut"]; ok {
			cut = int(a.int("cut"))
		}
		for _, n := range a.nodes() {
			b.WriteString(c.fetch(n, fetchOptions{maxBytes: maxBytes, cut: cut, truncateOnly: a.has("truncate-only")}))
		}
	case "consume":
		read := func(offset int64) (log.Region, ReadInfo, error) { return a.node().p.Read(offset, 1<<20, -1) }
		if a.has("any-replica") {
			read = func(offset int64) (log.Region, ReadInfo, error) { return a.node().p.ReadAnyReplica(offset, 1<<20) }
		}
		r, info, err := read(a.int("offset"))
		if err != nil {
			out("error: %v", err)
		} else {
			out("%d bytes, hw %d", r.Len, info.HighWatermark)
			r.Release()
		}
	case "offset-for-epoch":
		end, epoch := a.node().p.Log().EndOffsetForEpoch(int32(a.int("epoch")))
		out("epoch %d ends at %d", epoch, end)
	case "truncate-from-leader":
		n := a.node()
		err := n.p.TruncateFromLeader(int32(a.int("epoch")), a.int("end"), int32(a.int("found")))
		out("%s%s", errSuffix(err), c.state(n))
	case "reset-fetch-offset":
		n := a.node()
		err := n.p.ResetFetchOffset(int32(a.int("epoch")), a.int("start"), a.int("end"))
		out("%s%s", errSuffix(err), c.state(n))
	case "delete-records":
		n := a.node()
		start, err := n.p.DeleteRecordsBefore(a.int("before"))
		out("%slog start %d", errSuffix(err), start)
	case "advance-clock":
		d, err := time.ParseDuration(a.words[0])
		if err != nil {
			c.t.Fatal(err)
		}
		c.clock.Advance(d)
		out("ok")
	case "propose-isr":
		ch, ok := a.node().p.ProposeISR(nil)
		if !ok {
			out("none")
			break
		}
		n := a.node()
		n.proposed = append(n.proposed, ch)
		out("propose isr=%s leader-epoch=%d partition-epoch=%d", ids(ch.ISR), ch.LeaderEpoch, ch.PartitionEpoch)
	case "isr-refused":
		n := a.node()
		n.p.ISRProposalRefused(a.proposal(n))
		out("%s", c.state(n))
	case "isr-unresolved":
		n := a.node()
		n.p.ISRProposalUnresolved(a.proposal(n))
		out("%s", c.state(n))
	case "checkpoint-hw":
		n := a.node()
		hw := n.p.HighWatermarkToCheckpoint()
		out("checkpointed %d%s", hw, errSuffix(n.p.Log().CheckpointHighWatermark(hw)))
	case "restart":
		for _, n := range a.nodes() {
			if a.has("clean") {
				if err := n.p.Close(); err != nil {
					c.t.Fatal(err)
				}
			} else if err := n.p.log.Close(); err != nil { // killed: no final high-water mark checkpoint
				c.t.Fatal(err)
			}
			c.open(n)
			out("%d: %s", n.id, c.state(n))
		}
	case "state":
		ns := a.c.sorted()
		if _, ok := a.kv["node"]; ok {
			ns = a.nodes()
		}
		for _, n := range ns {
			out("%d: %s", n.id, c.state(n))
		}
	case "log":
		for _, n := range a.nodes() {
			out("%d: %s", n.id, c.logContents(n))
		}
	default:
		c.t.Fatalf("unknown command %q", line)
	}
	return b.String()
}

func (c *cluster) sorted() []*node {
	var out []*node
	for _, n := range c.nodes {
		out = append(out, n)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].id < out[j].id })
	return out
}

func errSuffix(err error) string {
	if err != nil {
		return "error: " + err.Error() + "; "
	}
	return ""
}

func ids(s []int32) string {
	f := make([]string, len(s))
	for i, id := range s {
		f[i] = fmt.Sprint(id)
	}
	return strings.Join(f, ",")
}

func (c *cluster) state(n *node) string {
	s := n.p.State()
	var b strings.Builder
	if s.Role == Leader {
		b.WriteString("leader")
	} else {
		fmt.Fprintf(&b, "follower of %d", s.Leader)
	}
	fmt.Fprintf(&b, " epoch=%d pepoch=%d leo=%d hw=%d", s.LeaderEpoch, s.PartitionEpoch, s.LogEndOffset, s.HighWatermark)
	if s.LogStartOffset > 0 {
		fmt.Fprintf(&b, " start=%d", s.LogStartOffset)
	}
	fmt.Fprintf(&b, " isr=%s", ids(s.ISR))
	if s.PendingISR != nil {
		fmt.Fprintf(&b, " pending=%s", ids(s.PendingISR))
	}
	if s.UnresolvedISR != nil {
		fmt.Fprintf(&b, " unresolved=%s", ids(s.UnresolvedISR))
	}
	if s.NeedsTruncation {
		b.WriteString(" needs-truncation")
	}
	return b.String()
}

// logContents prints the leader-epoch history ("epoch@start") and the
// batches ("base..last@epoch").
func (c *cluster) logContents(n *node) string {
	l := n.p.Log()
	var b strings.Builder
	b.WriteString("epochs")
	for _, e := range l.LeaderEpochs() {
		fmt.Fprintf(&b, " %d@%d", e.Epoch, e.StartOffset)
	}
	b.WriteString("; batches")
	data, err := l.ReadBytes(l.StartOffset(), l.EndOffset(), 1<<30)
	if err != nil {
		c.t.Fatal(err)
	}
	for len(data) > 0 {
		_, rest, h, err := record.Next(data)
		if err != nil {
			c.t.Fatal(err)
		}
		fmt.Fprintf(&b, " %d..%d@%d", h.BaseOffset, h.LastOffset(), h.PartitionLeaderEpoch)
		data = rest
	}
	return b.String()
}

// testBatch builds an uncompressed batch of n records.
func testBatch(t testing.TB, n int) []byte {
	t.Helper()
	recs := make([]record.Record, n)
	for i := range recs {
		recs[i].Value = []byte(fmt.Sprintf("value-%d", i))
	}
	b, err := record.Build(record.BuildOptions{BaseTimestamp: 1_700_000_000_000}, recs)
	if err != nil {
		t.Fatal(err)
	}
	return b
}
