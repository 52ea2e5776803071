package e2e

import (
	"bufio"
	"context"
	"fmt"
	"hash/fnv"
	"maps"
	"math/rand"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
	"golang.org/x/sys/unix"
)

// chaosGroup is the consumer group of the group chaos row.
const chaosGroup = "chaos-workers"

// groupSession is the members' session timeout: mq's
// group.min.session.timeout.ms (6 s, not a broker property), so that a
// killed member's partitions move on as soon as the broker allows.
const groupSession = 6 * time.Second

// groupMembers is how many members the row keeps running, one per
// partition of the topic.
const groupMembers = 3

// groupFigures are the group row's own figures: its chaosResult's notes
// and, their violations, its row checks.
type groupFigures struct {
	memberKills, coordinatorKills, memberExits int
	// midBatch: members killed in the middle of a batch; reprinted: of
	// those, how many had their last record printed again by another.
	midBatch, reprinted            int
	deliveries, redelivered, polls int
	longestGap                     time.Duration // the longest time no member printed a record
	regressed, skipped, undrained  int
}

func (g groupFigures) String() string {
	return fmt.Sprintf("members killed %d (mid-batch %d, reprinted %d)  coordinators killed %d  member exits %d  delivered %d  redelivered %d  longest stall %v  commit polls %d  commit-regressions %d  skipped %d  undrained %d",
		g.memberKills, g.midBatch, g.reprinted, g.coordinatorKills, g.memberExits, g.deliveries, g.redelivered, g.longestGap.Round(100*time.Millisecond), g.polls, g.regressed, g.skipped, g.undrained)
}

func (g groupFigures) violations() int { return g.regressed + g.skipped + g.undrained }

// deliveries is every record the group's members printed, kept small
// (a long row prints millions): per partition and offset, the member
// that printed it first and a hash of the value it printed; the further
// prints of an offset (redeliveries) aside. A member printing another
// value than one printed before at that offset, or than what is stored
// there at the end, is an inconsistency.
type deliveries struct {
	mu           sync.Mutex
	first        [3][]uint16 // partition → offset → the first member to print it (m<N> is N), 0: none yet
	hash         [3][]uint64 // partition → offset → the hash of the value first printed there
	again        map[[2]int64][]uint16
	count        int
	inconsistent []string
	// lastAt and longestGap: when the last record was printed, and the
	// longest time no member printed one (the group's worst stall).
	lastAt     time.Time
	longestGap time.Duration
	gapFrom    time.Time        // when the longest gap began
	kills      []midBatchKill   // the members killed in the middle of a batch
	latest     map[uint16]int64 // the offset of each member's last printed record
}

// midBatchKill is a member SIGKILLed in the middle of a batch, and the
// last record it printed.
type midBatchKill struct {
	member    uint16
	partition int32
	offset    int64
}

func newDeliveries() *deliveries {
	return &deliveries{again: map[[2]int64][]uint16{}, latest: map[uint16]int64{}}
}

// valueHash is the hash deliveries keep of a value.
func valueHash(v string) uint64 {
	h := fnv.New64a()
	h.Write([]byte(v))
	return h.Sum64()
}

// add notes that member printed value at partition's offset.
func (d *deliveries) add(member uint16, partition int32, offset int64, value string) {
	h := valueHash(value)
	d.mu.Lock()
	defer d.mu.Unlock()
	if n := offset + 1 - int64(len(d.first[partition])); n > 0 {
		d.first[partition] = append(d.first[partition], make([]uint16, n)...)
		d.hash[partition] = append(d.hash[partition], make([]uint64, n)...)
	}
	switch first := d.first[partition][offset]; {
	case first == 0:
		d.first[partition][offset], d.hash[partition][offset] = member, h
	default:
		at := [2]int64{int64(partition), offset}
		d.again[at] = append(d.again[at], member)
		if d.hash[partition][offset] != h {
			d.inconsistent = append(d.inconsistent, fmt.Sprintf("m%d printed %q at %d/%d, m%d had printed another value there",
				member, value, partition, offset, first))
		}
	}
	d.count++
	d.latest[member] = offset
	now := time.Now()
	if gap := now.Sub(d.lastAt); !d.lastAt.IsZero() && gap > d.longestGap {
		d.longestGap, d.gapFrom = gap, d.lastAt
	}
	d.lastAt = now
}

// printedFirst is the member that printed partition's offset first, 0
// for none; mu held.
func (d *deliveries) printedFirst(partition int32, offset int64) uint16 {
	if offset < 0 || offset >= int64(len(d.first[partition])) {
		return 0
	}
	return d.first[partition][offset]
}

// lastOffset is the offset of the last record member printed, -1 if none.
func (d *deliveries) lastOffset(member uint16) int64 {
	d.mu.Lock()
	defer d.mu.Unlock()
	if off, ok := d.latest[member]; ok {
		return off
	}
	return -1
}

// printed reports whether some member printed partition's offset.
func (d *deliveries) printed(partition int32, offset int64) bool {
	d.mu.Lock()
	defer d.mu.Unlock()
	return d.printedFirst(partition, offset) != 0
}

// checkStored compares the first value printed at each offset with the
// one stored there (stored: the final read), and returns the
// inconsistencies, those seen while printing first.
func (d *deliveries) checkStored(stored map[[2]int64]string) []string {
	d.mu.Lock()
	defer d.mu.Unlock()
	out := slices.Clone(d.inconsistent)
	for p := range int32(3) {
		for off, member := range d.first[p] {
			v, ok := stored[[2]int64{int64(p), int64(off)}]
			if member != 0 && (!ok || valueHash(v) != d.hash[p][off]) {
				out = append(out, fmt.Sprintf("m%d printed another value at %d/%d than the %q stored there", member, p, off, v))
			}
		}
	}
	return out
}

// logKills logs, for each member SIGKILLed mid-batch, who printed its
// last record (again, once the group moved on: a redelivery), and the
// group's longest stall, as times since begun.
func (d *deliveries) logKills(t *testing.T, begun time.Time) {
	d.mu.Lock()
	kills := slices.Clone(d.kills)
	from, gap := d.gapFrom, d.longestGap
	d.mu.Unlock()
	for _, k := range kills {
		t.Logf("member m%d was SIGKILLed in the middle of a batch; its last printed record %d/%d was printed by %s", k.member, k.partition, k.offset,
			d.printedIn(k.partition, k.offset, k.offset+1))
	}
	t.Logf("the longest stall: no member printed a record from +%v to +%v", from.Sub(begun).Round(time.Millisecond),
		from.Add(gap).Sub(begun).Round(time.Millisecond))
}

// printedIn says which members printed the offsets [from, to) of
// partition, as evidence: "m1 ×12, m4 ×3", or "nobody".
func (d *deliveries) printedIn(partition int32, from, to int64) string {
	d.mu.Lock()
	defer d.mu.Unlock()
	n := map[uint16]int{}
	for off := from; off < to; off++ {
		if m := d.printedFirst(partition, off); m != 0 {
			n[m]++
		}
		for _, m := range d.again[[2]int64{int64(partition), off}] {
			n[m]++
		}
	}
	if len(n) == 0 {
		return "nobody"
	}
	var out []string
	for _, m := range slices.Sorted(maps.Keys(n)) {
		out = append(out, fmt.Sprintf("m%d ×%d", m, n[m]))
	}
	return strings.Join(out, ", ")
}

// groupMember is one member of the group: a mqpipe consume -g process
// that prints each record as "partition offset value" and commits what
// it printed after each batch, so that what it printed before a SIGKILL
// is what it processed, committed or not. Its stdout is a pipe of
// memberPipeSize bytes, which the test can stop reading: the member then
// blocks in the middle of printing a batch longer than that.
type groupMember struct {
	id     uint16 // its name is m<id>
	name   string
	cmd    *exec.Cmd
	stdout *os.File // the pipe's read end
	stderr *lockedBuffer
	killed atomic.Bool // the test killed it
	// paused stops the reader before its next line, until resume.
	paused atomic.Bool
	resume chan struct{}
	done   chan struct{} // closed when stdout is read to its end and the process reaped
	// last is the last record it printed, and exitErr its exit, once done.
	last    [2]int64
	exitErr error
}

// memberPipeSize is the size of a member's stdout pipe: the smallest
// Linux allows (a page), a few hundred printed records.
const memberPipeSize = 4096

// startMember starts member m<id> printing into d.
func startMember(t *testing.T, c *cluster, id uint16, d *deliveries) *groupMember {
	t.Helper()
	m := &groupMember{id: id, name: fmt.Sprintf("m%d", id), stderr: &lockedBuffer{}, resume: make(chan struct{}, 1),
		done: make(chan struct{}), last: [2]int64{-1, -1}}
	m.cmd = exec.Command(filepath.Join(binDir, "mqpipe"), "consume", "-b", c.bootstrapList(), "-t", chaosTopic,
		"-g", chaosGroup, "-f", `%p %o %s\n`, "--line-buffered", "--session-timeout", groupSession.String())
	m.cmd.Stderr = m.stderr
	r, w, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	m.stdout, m.cmd.Stdout = r, w
	if err := m.pipeControl(func(fd int) error {
		_, err := unix.FcntlInt(uintptr(fd), unix.F_SETPIPE_SZ, memberPipeSize)
		return err
	}); err != nil {
		t.Fatalf("member %s: set its stdout's pipe size: %v", m.name, err)
	}
	err = m.cmd.Start()
	w.Close()
	if err != nil {
		t.Fatalf("start member %s: %v", m.name, err)
	}
	go m.read(t, d)
	t.Cleanup(m.kill)
	return m
}

// pipeControl runs fn on the file descriptor of the member's stdout pipe.
func (m *groupMember) pipeControl(fn func(fd int) error) error {
	rc, err := m.stdout.SyscallConn()
	if err != nil {
		return err
	}
	var ferr error
	if err := rc.Control(func(fd uintptr) { ferr = fn(int(fd)) }); err != nil {
		return err
	}
	return ferr
}

// pipeFull reports whether the member's stdout pipe is full (less than a
// record's line free): the member is blocked printing.
func (m *groupMember) pipeFull() bool {
	var n int
	err := m.pipeControl(func(fd int) error {
		var err error
		n, err = unix.IoctlGetInt(fd, unix.TIOCINQ) // FIONREAD: the bytes waiting in the pipe
		return err
	})
	return err == nil && n > memberPipeSize-64
}

// read takes the member's printed records into d until its stdout ends,
// then reaps the process.
func (m *groupMember) read(t *testing.T, d *deliveries) {
	defer close(m.done)
	defer m.stdout.Close()
	sc := bufio.NewScanner(m.stdout)
	for {
		if m.paused.Load() {
			<-m.resume
		}
		if !sc.Scan() {
			break
		}
		f := strings.SplitN(sc.Text(), " ", 3)
		p, perr := strconv.ParseInt(f[0], 10, 32)
		var off int64
		var oerr error
		if len(f) == 3 {
			off, oerr = strconv.ParseInt(f[1], 10, 64)
		}
		if len(f) != 3 || perr != nil || oerr != nil || p < 0 || p >= 3 {
			t.Errorf("member %s printed %q, not \"partition offset value\"", m.name, sc.Text())
			continue
		}
		d.add(m.id, int32(p), off, f[2])
		m.last = [2]int64{p, off}
	}
	m.exitErr = m.cmd.Wait()
}

// exited reports whether the process has ended.
func (m *groupMember) exited() bool {
	select {
	case <-m.done:
		return true
	default:
		return false
	}
}

// kill SIGKILLs the member now (if it still runs) and waits until it is
// reaped and its output read.
func (m *groupMember) kill() {
	m.killed.Store(true)
	m.cmd.Process.Kill()
	<-m.done
}

// midBatchWait bounds how long the nemesis waits for a continued member
// to fill its stdout pipe; one whose backlog fits (or that lost its
// partitions meanwhile) is SIGKILLed then, perhaps between batches.
const midBatchWait = 2 * time.Second

// groupNemesis is the nemesis of the group row: it kills members and the
// group coordinator's broker, and keeps groupMembers members running.
type groupNemesis struct {
	*nemesis
	cl      *kgo.Client  // for FindCoordinator
	adm     *kadm.Client // cl's, for the high-water marks
	d       *deliveries
	members []*groupMember
	started uint16
	figures *groupFigures
}

// ensureMembers starts members until groupMembers run, noting the ones
// that exited without being killed (with what they said).
func (n *groupNemesis) ensureMembers() {
	live := n.members[:0]
	for _, m := range n.members {
		if !m.exited() {
			live = append(live, m)
			continue
		}
		if !m.killed.Load() {
			n.figures.memberExits++
			n.logf("member %s exited by itself (%v): %s", m.name, m.exitErr, tail(m.stderr.String(), 5))
		}
	}
	n.members = live
	for len(n.members) < groupMembers {
		n.started++
		n.members = append(n.members, startMember(n.t, n.c, n.started, n.d))
	}
}

// killMember SIGKILLs a random member in the middle of a batch and
// starts a new one. The member is SIGSTOPped for a moment (well within
// its session) so that a backlog builds up, the test stops reading its
// stdout, and it is continued: it fetches the backlog as one batch, fills
// its stdout pipe and blocks printing, before the batch is committed; it
// is SIGKILLed there. What it printed into the pipe is read after.
func (n *groupNemesis) killMember() {
	m := n.busiest()
	stopped := n.between(time.Second, 2500*time.Millisecond)
	m.paused.Store(true)
	m.cmd.Process.Signal(syscall.SIGSTOP)
	n.hold(stopped)
	m.cmd.Process.Signal(syscall.SIGCONT)
	full := false
	deadline := time.Now().Add(midBatchWait)
	tick := time.NewTicker(10 * time.Millisecond)
	for !full && !m.exited() && time.Now().Before(deadline) {
		<-tick.C
		full = m.pipeFull()
	}
	tick.Stop()
	m.killed.Store(true)
	m.cmd.Process.Kill()
	m.paused.Store(false)
	m.resume <- struct{}{}
	<-m.done
	if full {
		n.d.mu.Lock()
		n.d.kills = append(n.d.kills, midBatchKill{m.id, int32(m.last[0]), m.last[1]})
		n.d.mu.Unlock()
		n.logf("member %s SIGSTOPped for %v, continued and SIGKILLed printing its backlog (its stdout full) after %d/%d", m.name, stopped, m.last[0], m.last[1])
	} else {
		n.logf("member %s SIGSTOPped for %v, continued, did not fill its stdout within %v: SIGKILLed after %d/%d", m.name, stopped, midBatchWait, m.last[0], m.last[1])
	}
	n.figures.memberKills++
	n.ensureMembers()
}

// busiest is the member that printed the highest offset last (a member
// of the partition with the most records, whose backlog fills its pipe
// soonest); a random one when none printed yet.
func (n *groupNemesis) busiest() *groupMember {
	best := n.members[n.rng.Intn(len(n.members))]
	var bestOffset int64 = -1
	for _, m := range n.members {
		if off := n.d.lastOffset(m.id); off > bestOffset {
			best, bestOffset = m, off
		}
	}
	return best
}

// coordinator asks the cluster which node coordinates the group.
func coordinator(ctx context.Context, cl *kgo.Client) (int32, error) {
	req := kmsg.NewPtrFindCoordinatorRequest()
	req.CoordinatorKey = chaosGroup
	resp, err := req.RequestWith(ctx, cl)
	if err != nil {
		return -1, err
	}
	if err := kerr.ErrorForCode(resp.ErrorCode); err != nil {
		return -1, err
	}
	return resp.NodeID, nil
}

// killCoordinator SIGKILLs the broker coordinating the group, keeps it
// down for down and starts it again.
func (n *groupNemesis) killCoordinator(down time.Duration) {
	var id int32
	clusterWait.For(n.t, "the group's coordinator", func() (bool, string) {
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
		defer cancel()
		var err error
		id, err = coordinator(ctx, n.cl)
		return err == nil, fmt.Sprintf("FindCoordinator %s: %v", chaosGroup, err)
	})
	victim := n.c.node(id)
	n.logf("SIGKILL node %d, the coordinator of group %s, for %v", id, chaosGroup, down)
	victim.kill()
	n.figures.coordinatorKills++
	n.hold(down)
	victim.start()
	n.logf("node %d started", id)
}

// commitPoller polls the group's committed offsets through the whole row
// and notes every step back: an offset lower than the one polled before
// (a partition without one, once it had one, is at -1).
type commitPoller struct {
	seed    int64
	begun   time.Time
	adm     *kadm.Client
	cl      *kgo.Client
	d       *deliveries
	mu      sync.Mutex
	last    [3]int64     // the committed offset last polled per partition
	seenAt  [3]time.Time // when last was polled
	polls   int
	regress []string
}

// newCommitPoller returns a poller whose evidence gives times since begun.
func newCommitPoller(c *cluster, seed int64, begun time.Time, d *deliveries) *commitPoller {
	cl := c.client()
	p := &commitPoller{seed: seed, begun: begun, adm: kadm.NewClient(cl), cl: cl, d: d}
	for i := range p.last {
		p.last[i] = -1
	}
	return p
}

// run polls until ctx ends.
func (p *commitPoller) run(ctx context.Context) {
	tick := time.NewTicker(50 * time.Millisecond)
	defer tick.Stop()
	for ctx.Err() == nil {
		p.poll(ctx)
		select {
		case <-ctx.Done():
		case <-tick.C:
		}
	}
}

// poll fetches the committed offsets once (a failed fetch, while the
// coordinator moves, is no observation).
func (p *commitPoller) poll(ctx context.Context) {
	ctx, cancel := context.WithTimeout(ctx, 3*time.Second)
	defer cancel()
	resp, err := p.adm.FetchOffsets(ctx, chaosGroup)
	if err != nil {
		return
	}
	coord, err := coordinator(ctx, p.cl)
	who := fmt.Sprintf("node %d", coord)
	if err != nil {
		who = "unknown: " + err.Error()
	}
	now := time.Now()
	p.mu.Lock()
	defer p.mu.Unlock()
	p.polls++
	for part := range int32(3) {
		o, ok := resp.Lookup(chaosTopic, part)
		if !ok {
			// None committed: once there was one, it is lost.
			o = kadm.OffsetResponse{Offset: kadm.Offset{Topic: chaosTopic, Partition: part, At: -1}}
		}
		if o.Err != nil {
			continue
		}
		if o.At < p.last[part] {
			p.regress = append(p.regress, fmt.Sprintf("seed %d: partition %d's committed offset went from %d (polled at +%v) to %d (polled at +%v; FindCoordinator says %s); offsets %d-%d were printed by %s",
				p.seed, part, p.last[part], p.seenAt[part].Sub(p.begun).Round(time.Millisecond), o.At, now.Sub(p.begun).Round(time.Millisecond),
				who, max(o.At, 0), p.last[part]-1, p.d.printedIn(part, max(o.At, 0), p.last[part])))
		}
		// After a step back the next is measured from there: each
		// step is reported once.
		p.last[part], p.seenAt[part] = o.At, now
	}
}

// committed fetches the group's committed offsets of the chaos topic now
// (-1: none).
func committed(ctx context.Context, adm *kadm.Client) ([]int64, error) {
	resp, err := adm.FetchOffsets(ctx, chaosGroup)
	if err != nil {
		return nil, err
	}
	out := []int64{-1, -1, -1}
	for part := range int32(3) {
		if o, ok := resp.Lookup(chaosTopic, part); ok {
			if o.Err != nil {
				return nil, o.Err
			}
			out[part] = o.At
		}
	}
	return out, nil
}

// drain waits, at most d, until the group has committed every partition
// to its high-water mark, and returns the committed offsets last seen.
func drain(t *testing.T, adm *kadm.Client, hws []int64, d time.Duration) []int64 {
	t.Helper()
	deadline := time.Now().Add(d)
	tick := time.NewTicker(50 * time.Millisecond)
	defer tick.Stop()
	last := []int64{-1, -1, -1}
	for time.Now().Before(deadline) {
		ctx, cancel := context.WithTimeout(context.Background(), 3*time.Second)
		got, err := committed(ctx, adm)
		cancel()
		if err == nil {
			last = got
			if slices.Equal(got, hws) {
				break
			}
		}
		<-tick.C
	}
	return last
}

// checkGroup checks what the group printed and committed: no committed
// offset went back, every offset below a partition's final committed
// offset was printed by some member, what was printed is what is stored,
// and the group committed everything below the high-water marks. It
// completes g (the nemesis's figures so far) and adds to r's
// inconsistencies.
func checkGroup(t *testing.T, r *chaosResult, g *groupFigures, d *deliveries, p *commitPoller, final, hws []int64, stored map[[2]int64]string) {
	t.Helper()
	seed := r.seed
	report := func(count *int, n int, kind, evidence string) {
		*count += n
		if *count <= 20 {
			t.Errorf("%s: %s", kind, evidence)
		}
	}
	for _, e := range d.checkStored(stored) {
		report(&r.inconsistent, 1, "inconsistent delivery", fmt.Sprintf("seed %d: %s", seed, e))
	}
	p.mu.Lock()
	g.polls = p.polls
	for _, e := range p.regress {
		report(&g.regressed, 1, "committed offset went back", e)
	}
	p.mu.Unlock()
	d.mu.Lock()
	g.deliveries = d.count
	for _, ms := range d.again {
		g.redelivered += len(ms)
	}
	g.midBatch = len(d.kills)
	for _, k := range d.kills {
		if len(d.again[[2]int64{int64(k.partition), k.offset}]) > 0 {
			g.reprinted++
		}
	}
	g.longestGap = d.longestGap
	d.mu.Unlock()
	for part := range int32(3) {
		if final[part] != hws[part] {
			report(&g.undrained, 1, "not drained", fmt.Sprintf("seed %d: partition %d's committed offset is %d after draining, its high-water mark %d",
				seed, part, final[part], hws[part]))
		}
		for off := int64(0); off < final[part]; {
			if d.printed(part, off) {
				off++
				continue
			}
			from := off
			for off < final[part] && !d.printed(part, off) {
				off++
			}
			report(&g.skipped, int(off-from), "skipped", fmt.Sprintf("seed %d: partition %d's offsets %d-%d (%d records, the first %q) are below the final committed offset %d and no member printed them; offset %d was printed by %s, offset %d by %s",
				seed, part, from, off-1, off-from, stored[[2]int64{int64(part), from}], final[part],
				from-1, d.printedIn(part, from-1, from), off, d.printedIn(part, off, off+1)))
		}
	}
}

// runGroupChaosRow runs the group row: a 3-node cluster, a 3-partition
// RF=3 min.insync.replicas=2 topic with an acks=all producer, and a
// group of groupMembers mqpipe processes consuming it; fault is injected
// until the row's time is up. Then the cluster is healed, the producer
// stops, the group drains, and what it printed and committed is checked
// (at least once), as well as the topic itself as the other rows do.
func runGroupChaosRow(t *testing.T, name string, fault func(n *groupNemesis)) {
	seed, length := chaosRun(0)
	t.Logf("chaos %s: seed %d (replay with -chaos.seed=%d), faults for %v", name, seed, seed, length)
	c := startCluster(t, 3, clusterOpts{props: fastFailover})
	c.createRF3(chaosTopic, 3)

	a, o := newAcked(), newObservations()
	d := newDeliveries()
	// One producer, not the other rows' three: the group needs a steady
	// stream, not a fast one, and every record is held several times by
	// the checkers (a long row would outgrow testMaxRSS). Its eight keys
	// fall on all three partitions (4 on 0, 2 on 1, 2 on 2).
	producer := startProducer(t, c.client(kgo.RequiredAcks(kgo.AllISRAcks())), chaosTopic, "p0-", a)
	a.waitMore(t, 100)
	var figures groupFigures
	cl := c.client()
	n := &groupNemesis{nemesis: &nemesis{t: t, c: c, rng: rand.New(rand.NewSource(seed)), begun: time.Now()},
		cl: cl, adm: kadm.NewClient(cl), d: d, figures: &figures}
	n.ensureMembers()
	poller := newCommitPoller(c, seed, n.begun, d)
	ctx, stopPolling := context.WithCancel(context.Background())
	polled := make(chan struct{})
	go func() { defer close(polled); poller.run(ctx) }()
	defer func() { stopPolling(); <-polled }()
	clusterWait.For(t, "100 records printed by the group", func() (bool, string) {
		d.mu.Lock()
		defer d.mu.Unlock()
		return d.count >= 100, fmt.Sprintf("the group printed %d records", d.count)
	})

	for end := time.Now().Add(length); time.Now().Before(end); {
		fault(n)
	}
	c.heal()
	n.ensureMembers()
	a.waitMore(t, 100) // the healed cluster takes writes
	producer.finish()
	hws, logs := settle(t, c)
	t.Logf("high-water marks %v", hws)
	final := drain(t, n.adm, hws, clusterReadyTimeout)
	stopPolling()
	<-polled
	n.ensureMembers() // notes members that exited by themselves
	for _, m := range n.members {
		m.kill()
	}

	d.logKills(t, n.begun)
	stored := readAll(t, c, hws, o)
	readEveryReplica(t, c, hws, o)
	r := check(t, c, a, nil, o, stored, hws, logs)
	r.fault, r.seed = name, seed
	checkGroup(t, &r, &figures, d, poller, final, hws, stored)
	r.rowChecks += figures.violations()
	r.notes = figures.String()
	recordRow(t, r)
}

// TestChaosGroupMembersAndCoordinator (row 10): members of a consumer
// group (separate processes) are SIGKILLed mid-batch and replaced, and
// the group coordinator's broker is SIGKILLed and restarted; each round
// does both, so the short form (one round) has each once.
// The group's committed offsets never go back, no record below them is
// skipped (redeliveries are allowed, and counted), and once healed the
// group drains the topic to its high-water marks.
func TestChaosGroupMembersAndCoordinator(t *testing.T) {
	runGroupChaosRow(t, "group", func(n *groupNemesis) {
		n.killMember()
		n.hold(n.between(time.Second, 2*time.Second))
		n.killCoordinator(n.between(time.Second, 3*time.Second))
		n.hold(n.between(time.Second, 2*time.Second))
	})
}
