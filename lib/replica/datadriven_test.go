package replica

import (
	"context"
	"errors"
	"fmt"
	"path/filepath"
	"slices"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/cockroachdb/datadriven"

	"github.com/mqproject/mq/lib/clock"
	"github.com/mqproject/mq/lib/log"
	"github.com/mqproject/mq/lib/mqtest/dd"
	"github.com/mqproject/mq/lib/record"
	"github.com/mqproject/mq/lib/vfs/faultfs"
)

// TestDataDriven runs the scripts testdata/*.txt: the replicas of one
// partition on several nodes, each a Partition over its own log, with a
// manual clock, driven the way the broker drives them (lib/mqtest/dd: the
// format, go test -rewrite).
//
// Commands ("node=" takes one node id or a list, "node=(1,2)"):
//
//	nodes ids=(1,2,3) [lag=30s] [min-isr=2]
//	                                    make the nodes (replica.lag.time.max.ms, min.insync.replicas)
//	become node=N leader=L epoch=E pepoch=P replicas=(1,2,3) isr=(1,2)
//	                                    apply an image's partition state (Become)
//	append node=N n=K [acks=all|1]      append a batch of K records as leader
//	wait-hw node=N offset=O [epoch=E]   acks=all for a batch appended in epoch E (default: N's
//	                                    current one): ok, waiting, or the error (never blocks)
//	follower-fetch node=N id=F offset=O the leader records follower F's fetch (no data moves)
//	fetch node=F [max-bytes=B] [cut=C] [truncate-only]
//	                                    rounds of follower F's Fetcher (the loop the broker
//	                                    runs) against its leader in memory: refetch of damage
//	                                    and truncation while needed, then one fetch (the
//	                                    answer's last C bytes cut off; none with
//	                                    truncate-only); a refusal ends it, and the partition
//	                                    waits for its retry time (advance-clock)
//	consume node=N offset=O [any-replica]
//	                                    a consumer's Read at O (ReadAnyReplica with
//	                                    any-replica): bytes and HW, or the error
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
//	damage node=N offset=O              a bad byte in the batch of O on disk; N restarts and
//	                                    its scrubber finds the damaged range
//	state [node=N]                      role, epochs, log end, HW, ISR, pending proposal,
//	                                    unresolved additions
//	log node=N                          the leader-epoch history and the batches
func TestDataDriven(t *testing.T) {
	dd.Run(t, "testdata", func(t *testing.T) dd.Runner {
		c := &cluster{t: t, clock: clock.NewManual(time.Unix(1_700_000_000, 0)), nodes: map[int32]*node{}}
		t.Cleanup(c.close)
		return c.run
	})
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
	// fetchers are the node's replica Fetchers by leader (fetch).
	fetchers map[int32]*nodeFetcher
	// fs is the file system of the node's log, which disk-full fills.
	fs *faultfs.FS
}

// proposal is the ISR proposal an isr-refused or isr-unresolved command
// reports on: n's latest, or its latest under partition epoch pepoch=P.
func (c *cluster) proposal(d *datadriven.TestData, n *node) ISRChange {
	var pepoch int32
	anyEpoch := !d.MaybeScanArgs(c.t, "pepoch", &pepoch)
	for _, ch := range slices.Backward(n.proposed) {
		if anyEpoch || ch.PartitionEpoch == pepoch {
			return ch
		}
	}
	d.Fatalf(c.t, "node %d made no such ISR proposal", n.id)
	return ISRChange{}
}

func (c *cluster) close() {
	for _, n := range c.nodes {
		n.p.Close()
	}
}

func (c *cluster) open(n *node) {
	if n.fs == nil {
		n.fs = faultfs.New(nil)
	}
	l, err := log.Open(n.dir, log.DefaultConfig(), log.Options{FS: n.fs, Clock: c.clock})
	if err != nil {
		c.t.Fatalf("node %d: open log: %v", n.id, err)
	}
	n.p = New(Config{Topic: "t", NodeID: n.id, MinInsyncReplicas: c.minISR, ReplicaLagTime: c.lag, Clock: c.clock}, l)
}

// nodesArg returns the nodes that node= names.
func (c *cluster) nodesArg(d *datadriven.TestData) []*node {
	var ids []int32
	d.ScanArgs(c.t, "node", &ids)
	var out []*node
	for _, id := range ids {
		n := c.nodes[id]
		if n == nil {
			d.Fatalf(c.t, "no node %d", id)
		}
		out = append(out, n)
	}
	return out
}

// nodeArg returns the one node that node= names.
func (c *cluster) nodeArg(d *datadriven.TestData) *node {
	ns := c.nodesArg(d)
	if len(ns) != 1 {
		d.Fatalf(c.t, "want one node, have %d", len(ns))
	}
	return ns[0]
}

// int64Arg returns the value of key=, which the command must have.
func (c *cluster) int64Arg(d *datadriven.TestData, key string) int64 {
	var v int64
	d.ScanArgs(c.t, key, &v)
	return v
}

// int32Arg returns the value of key=, which the command must have.
func (c *cluster) int32Arg(d *datadriven.TestData, key string) int32 {
	var v int32
	d.ScanArgs(c.t, key, &v)
	return v
}

// run runs one command of a script and returns what it prints.
func (c *cluster) run(t *testing.T, d *datadriven.TestData) string {
	var b strings.Builder
	out := func(format string, v ...any) { fmt.Fprintf(&b, format+"\n", v...) }
	switch d.Cmd {
	case "nodes":
		c.lag, c.minISR = DefaultReplicaLagTime, 1
		d.MaybeScanArgs(t, "lag", &c.lag)
		d.MaybeScanArgs(t, "min-isr", &c.minISR)
		var ids []int32
		d.ScanArgs(t, "ids", &ids)
		for _, id := range ids {
			n := &node{id: id, dir: filepath.Join(t.TempDir(), fmt.Sprint(id))}
			c.open(n)
			c.nodes[id] = n
		}
		out("ok")
	case "become":
		s := PartitionState{
			Leader:         c.int32Arg(d, "leader"),
			LeaderEpoch:    c.int32Arg(d, "epoch"),
			PartitionEpoch: c.int32Arg(d, "pepoch"),
		}
		d.ScanArgs(t, "replicas", &s.Replicas)
		d.ScanArgs(t, "isr", &s.ISR)
		for _, n := range c.nodesArg(d) {
			if err := n.p.Become(s); err != nil {
				out("%d: %v", n.id, err)
			} else {
				out("%d: %s", n.id, c.state(n))
			}
		}
	case "append":
		n := c.nodeArg(d)
		acks, required := "1", int16(1)
		if d.MaybeScanArgs(t, "acks", &acks); acks == "all" {
			required = -1
		}
		res, err := n.p.Append(testBatch(t, int(c.int64Arg(d, "n"))), required)
		if err != nil {
			out("error: %v", err)
			break
		}
		out("appended %d..%d, hw %d", res.BaseOffset, res.LastOffset, n.p.HighWatermark())
	case "wait-hw":
		ctx, cancel := context.WithCancel(context.Background())
		cancel()
		// In the node's leader epoch unless epoch= names the one appended in.
		n := c.nodeArg(d)
		epoch := n.p.Offsets().LeaderEpoch
		d.MaybeScanArgs(t, "epoch", &epoch)
		switch err := n.p.WaitHighWatermark(ctx, c.int64Arg(d, "offset"), epoch); {
		case err == nil:
			out("ok")
		case errors.Is(err, context.Canceled):
			out("waiting")
		default:
			out("error: %v", err)
		}
	case "follower-fetch":
		n := c.nodeArg(d)
		ok := n.p.RecordFollowerFetch(c.int32Arg(d, "id"), c.int64Arg(d, "offset"))
		out("recorded %v, hw %d", ok, n.p.HighWatermark())
	case "fetch":
		o := fetchOptions{maxBytes: 1 << 20, truncateOnly: d.HasArg("truncate-only")}
		d.MaybeScanArgs(t, "max-bytes", &o.maxBytes)
		d.MaybeScanArgs(t, "cut", &o.cut)
		for _, n := range c.nodesArg(d) {
			b.WriteString(c.fetch(n, o))
		}
	case "consume":
		n := c.nodeArg(d)
		read := func(offset int64) (log.Region, ReadInfo, error) { return n.p.Read(offset, 1<<20, -1) }
		if d.HasArg("any-replica") {
			read = func(offset int64) (log.Region, ReadInfo, error) { return n.p.ReadAnyReplica(offset, 1<<20) }
		}
		r, info, err := read(c.int64Arg(d, "offset"))
		if err != nil {
			out("error: %v", err)
		} else {
			out("%d bytes, hw %d", r.Len, info.HighWatermark)
			r.Release()
		}
	case "offset-for-epoch":
		end, epoch := c.nodeArg(d).p.Log().EndOffsetForEpoch(c.int32Arg(d, "epoch"))
		out("epoch %d ends at %d", epoch, end)
	case "truncate-from-leader":
		n := c.nodeArg(d)
		err := n.p.TruncateFromLeader(c.int32Arg(d, "epoch"), c.int64Arg(d, "end"), c.int32Arg(d, "found"))
		out("%s%s", errSuffix(err), c.state(n))
	case "reset-fetch-offset":
		n := c.nodeArg(d)
		err := n.p.ResetFetchOffset(c.int32Arg(d, "epoch"), c.int64Arg(d, "start"), c.int64Arg(d, "end"))
		out("%s%s", errSuffix(err), c.state(n))
	case "delete-records":
		n := c.nodeArg(d)
		start, err := n.p.DeleteRecordsBefore(c.int64Arg(d, "before"))
		out("%slog start %d", errSuffix(err), start)
	case "advance-clock":
		if len(d.CmdArgs) != 1 {
			d.Fatalf(t, "advance-clock takes one duration")
		}
		c.clock.Advance(dd.Duration(t, d))
		out("ok")
	case "propose-isr":
		n := c.nodeArg(d)
		ch, ok := n.p.ProposeISR(nil)
		if !ok {
			out("none")
			break
		}
		n.proposed = append(n.proposed, ch)
		out("propose isr=%s leader-epoch=%d partition-epoch=%d", ids(ch.ISR), ch.LeaderEpoch, ch.PartitionEpoch)
	case "isr-refused":
		n := c.nodeArg(d)
		n.p.ISRProposalRefused(c.proposal(d, n))
		out("%s", c.state(n))
	case "isr-unresolved":
		n := c.nodeArg(d)
		n.p.ISRProposalUnresolved(c.proposal(d, n))
		out("%s", c.state(n))
	case "checkpoint-hw":
		n := c.nodeArg(d)
		hw := n.p.HighWatermarkToCheckpoint()
		out("checkpointed %d%s", hw, errSuffix(n.p.Log().CheckpointHighWatermark(hw)))
	case "damage":
		// Flip a record byte of the batch holding offset= in n's log file,
		// as a bad disk would, restart n and let the scrubber find it.
		n := c.nodeArg(d)
		c.damage(n, c.int64Arg(d, "offset"))
		for _, dr := range n.p.Log().Damaged() {
			out("damaged %s", dr.String())
		}
		out("%s", c.state(n))
	case "restart":
		for _, n := range c.nodesArg(d) {
			if d.HasArg("clean") {
				if err := n.p.Close(); err != nil {
					t.Fatal(err)
				}
			} else if err := n.p.log.Close(); err != nil { // killed: no final high-water mark checkpoint
				t.Fatal(err)
			}
			c.open(n)
			out("%d: %s", n.id, c.state(n))
		}
	case "disk-full":
		// Writes to n's segment files fail with ENOSPC until disk-ok.
		n := c.nodeArg(d)
		n.fs.NoSpaceAfter(".log", 0)
		out("ok")
	case "disk-ok":
		n := c.nodeArg(d)
		n.fs.Clear()
		out("ok")
	case "state":
		ns := c.sorted()
		if d.HasArg("node") {
			ns = c.nodesArg(d)
		}
		for _, n := range ns {
			out("%d: %s", n.id, c.state(n))
		}
	case "log":
		for _, n := range c.nodesArg(d) {
			out("%d: %s", n.id, c.logContents(n))
		}
	default:
		d.Fatalf(t, "unknown command %q", d.Cmd)
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
