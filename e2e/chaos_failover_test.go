package e2e

import (
	"bufio"
	"cmp"
	"context"
	"flag"
	"fmt"
	"io"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// The failover row (TestChaosFailover) measures how long clients stall
// when a broker is lost, on a cluster with mqd's default settings.
var chaosFailoverRuns = flag.Int("chaos.failover.runs", 10, "how many brokers the failover row kills (or stops) in each of its series")

const (
	// failoverBound is the longest a client may stall when a broker is
	// SIGKILLed: a scenario whose worst run takes longer fails.
	failoverBound = 5 * time.Second
	// pauseBound is how long after a SIGSTOP the frozen leader may keep
	// its leadership: nobody can tell it from a slow one before
	// broker.session.timeout.ms (9 s by default) has passed, found at the
	// controller's next session check (at most 1 s later); that and a
	// margin. The clients' stalls behind a frozen leader are reported,
	// not bounded: a request already sent to it is given up only at the
	// client's own timeout (kgo: the produce timeout, 10 s, plus its
	// request timeout overhead, 10 s; mqpipe, lib/client: 9 s and
	// 3 s), which no broker can shorten, and every request the client
	// sends the frozen broker before its metadata names the new leader
	// waits the overhead again.
	pauseBound = 12 * time.Second
	// failoverWait bounds one recovery from a kill: a client that has
	// not recovered by then counts as this long, and the series goes on.
	failoverWait = clusterReadyTimeout
	// pauseWait is failoverWait for a stopped leader, which stays stopped
	// until every client recovered: past it the figure says no more, and
	// the series would take too long.
	pauseWait = 30 * time.Second
	// failoverPace spaces each producer's records to each partition: the
	// resolution of the figures.
	failoverPace = 10 * time.Millisecond
	// fastMetadataAge is the kgo.MetadataMinAge of the row's "kgo-fast"
	// clients; the "kgo-default" ones keep kgo's 5 s.
	fastMetadataAge = 250 * time.Millisecond
	// kgoMetadataMinAge is kgo's default MetadataMinAge: after a refresh,
	// a client with kgo's defaults does not ask for metadata again within
	// it, whatever fails (settle).
	kgoMetadataMinAge = 5 * time.Second
	// settleMargin is how much longer than kgoMetadataMinAge settle waits.
	settleMargin = time.Second
)

// refreshes notes when a client last read a Metadata response (a
// kgo.HookBrokerRead), for failoverSeries.settle, and keeps its last
// reads and failed requests of every kind, which a run over its bound
// logs (since).
type refreshes struct {
	last atomic.Int64 // unix nanoseconds

	mu     sync.Mutex
	events []string // "15:04:05.000 Metadata from 2" and the like, the last maxEvents
}

const maxEvents = 64

func (r *refreshes) OnBrokerRead(b kgo.BrokerMetadata, key int16, _ int, _, _ time.Duration, err error) {
	now := time.Now()
	if key == 3 && err == nil { // Metadata
		r.last.Store(now.UnixNano())
	}
	if key != 3 && err == nil {
		return // only Metadata answers and failures tell how a client found its leader
	}
	e := fmt.Sprintf("%s %s from %d", now.Format("15:04:05.000"), kmsg.NameForKey(key), b.NodeID)
	if err != nil {
		e += ": " + err.Error()
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	r.events = append(r.events, e)
	if len(r.events) > maxEvents {
		r.events = r.events[len(r.events)-maxEvents:]
	}
}

// since returns the events kept at or after t.
func (r *refreshes) since(t time.Time) []string {
	from := t.Format("15:04:05.000")
	r.mu.Lock()
	defer r.mu.Unlock()
	var out []string
	for _, e := range r.events {
		if e[:len(from)] >= from {
			out = append(out, e)
		}
	}
	return out
}

// mark is what one client awaits in one run: its first record on
// partition part that was produced after a moment (a sequence number of
// its own from, or for kcat an append time after), acknowledged or read.
type mark struct {
	part  int32
	from  int64
	after time.Time
	once  sync.Once
	at    time.Time // when it came; set before done is closed
	done  chan struct{}
}

func newMark(part int32, from int64, after time.Time) *mark {
	return &mark{part: part, from: from, after: after, done: make(chan struct{})}
}

// hit notes the awaited record's coming at at; later calls do nothing.
func (m *mark) hit(at time.Time) { m.once.Do(func() { m.at = at; close(m.done) }) }

// pacedProducer produces to each partition of the chaos topic every
// failoverPace, asynchronously: an idempotent acks=all kgo producer with
// several records in flight, as an application writing a steady stream
// does. Its records are "NAME-SEQ", keyed "NAMEk<partition>", one
// sequence number for the three records of a tick.
type pacedProducer struct {
	name string
	cl   *kgo.Client
	a    *acked
	mu   sync.Mutex // guards next and the storing of mark
	next int64      // the sequence number of the next tick
	mark atomic.Pointer[mark]
	stop chan struct{}
	done chan struct{}
}

// startPacedFailoverProducer starts a producer named name with opts (on
// top of acks=all and manual partitioning), noting what is acknowledged
// in a. It stops when the test ends, if finish did not stop it before.
func startPacedFailoverProducer(t *testing.T, c *cluster, name string, a *acked, opts ...kgo.Opt) *pacedProducer {
	cl := c.client(append([]kgo.Opt{kgo.RequiredAcks(kgo.AllISRAcks()), kgo.RecordPartitioner(kgo.ManualPartitioner())}, opts...)...)
	p := &pacedProducer{name: name, cl: cl, a: a, stop: make(chan struct{}), done: make(chan struct{})}
	go p.run()
	t.Cleanup(p.halt)
	return p
}

func (p *pacedProducer) run() {
	defer close(p.done)
	tick := time.NewTicker(failoverPace)
	defer tick.Stop()
	for {
		select {
		case <-p.stop:
			return
		case <-tick.C:
		}
		p.mu.Lock()
		seq := p.next
		p.next++
		p.mu.Unlock()
		for part := range int32(3) {
			key := fmt.Sprintf("%sk%d", p.name, part)
			v := fmt.Sprintf("%s-%d", p.name, seq)
			began := time.Now()
			p.a.mu.Lock()
			p.a.attempts++
			p.a.mu.Unlock()
			p.cl.Produce(context.Background(), &kgo.Record{Topic: chaosTopic, Partition: part, Key: []byte(key), Value: []byte(v)}, func(r *kgo.Record, err error) {
				now := time.Now()
				p.a.mu.Lock()
				if err != nil {
					p.a.failed = append(p.a.failed, fmt.Errorf("%d/%s: %w", part, v, err))
				} else {
					k := fmt.Sprintf("%d/%s", r.Partition, v)
					p.a.offsets[k] = r.Offset
					p.a.sent[k] = began
					p.a.byKey[key] = append(p.a.byKey[key], k)
				}
				p.a.mu.Unlock()
				if m := p.mark.Load(); err == nil && m != nil && m.part == r.Partition && seq >= m.from {
					m.hit(now)
				}
			})
		}
	}
}

// nextSeq is the sequence number of the next tick: every record numbered
// from it is produced after nextSeq returned.
func (p *pacedProducer) nextSeq() int64 {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.next
}

// arm returns a mark for the first acknowledgement of a record of part
// produced from now on.
func (p *pacedProducer) arm(part int32, _ time.Time) *mark {
	p.mu.Lock()
	defer p.mu.Unlock()
	m := newMark(part, p.next, time.Time{})
	p.mark.Store(m)
	return m
}

// halt stops producing; what is in flight stays with the client.
func (p *pacedProducer) halt() {
	select {
	case <-p.stop:
	default:
		close(p.stop)
	}
	<-p.done
}

// finish stops producing and waits until everything produced is
// acknowledged or failed.
func (p *pacedProducer) finish(t *testing.T) {
	t.Helper()
	p.halt()
	if err := p.cl.Flush(ctxFor(t, 2*time.Minute)); err != nil {
		t.Fatalf("producer %s: flush: %v", p.name, err)
	}
}

// sequenced splits a record value "NAME-SEQ".
func sequenced(v []byte) (name string, seq int64, ok bool) {
	i := strings.LastIndexByte(string(v), '-')
	if i < 0 {
		return "", 0, false
	}
	seq, err := strconv.ParseInt(string(v[i+1:]), 10, 64)
	return string(v[:i]), seq, err == nil
}

// failoverReader reads the chaos topic, as an assigned consumer or as a
// group's member, and awaits the records of one producer (src) produced
// after a mark's sequence number, and kcat's appended after a mark's
// time (the topic stamps LogAppendTime).
type failoverReader struct {
	cl       *kgo.Client
	o        *observations
	src      *pacedProducer
	mark     atomic.Pointer[mark]
	kcatMark atomic.Pointer[mark]
	cancel   context.CancelFunc
	done     chan struct{}
}

func startFailoverReader(t *testing.T, c *cluster, o *observations, src *pacedProducer, opts ...kgo.Opt) *failoverReader {
	ctx, cancel := context.WithCancel(context.Background())
	r := &failoverReader{cl: c.client(opts...), o: o, src: src, cancel: cancel, done: make(chan struct{})}
	go r.run(ctx)
	t.Cleanup(r.halt)
	return r
}

func (r *failoverReader) run(ctx context.Context) {
	defer close(r.done)
	for ctx.Err() == nil {
		fs := r.cl.PollFetches(ctx)
		now := time.Now()
		fs.EachRecord(func(rec *kgo.Record) {
			r.o.record("consumer", rec)
			name, seq, ok := sequenced(rec.Value)
			if !ok {
				return
			}
			if m := r.mark.Load(); m != nil && name == r.src.name && m.part == rec.Partition && seq >= m.from {
				m.hit(now)
			}
			if m := r.kcatMark.Load(); m != nil && name == "kcat" && m.part == rec.Partition && rec.Timestamp.After(m.after) {
				m.hit(rec.Timestamp)
			}
		})
	}
}

// arm returns a mark for the first read of a record of part that src
// produces from now on.
func (r *failoverReader) arm(part int32, _ time.Time) *mark {
	m := newMark(part, r.src.nextSeq(), time.Time{})
	r.mark.Store(m)
	return m
}

// armKcat returns a mark for the first record kcat appends to part after
// after, as its append time.
func (r *failoverReader) armKcat(part int32, after time.Time) *mark {
	m := newMark(part, 0, after)
	r.kcatMark.Store(m)
	return m
}

func (r *failoverReader) halt() { r.cancel(); <-r.done }

// pipedProducers is one producing process per partition of the chaos
// topic, each fed the line "NAME-SEQ" on its standard input every
// failoverPace: kcat -P, mqpipe produce.
type pipedProducers struct {
	name   string // the lines' prefix, and the processes' in errors
	procs  []*exec.Cmd
	stdins []io.WriteCloser
	stderr []*lockedBuffer
	exited []chan error // each process's exit, once reaped
	mu     sync.Mutex   // guards next; held while a tick's lines are written
	next   int64        // the sequence number of the next tick
	stop   chan struct{}
	done   chan struct{}
}

// startPiped starts command(part) for each partition and feeds them; a
// report, when not nil, reads a process's standard output to its end
// before the process is reaped. They stop when the test ends, if finish
// did not stop them before.
func startPiped(t *testing.T, name string, command func(part int32) *exec.Cmd, report func(part int32, out io.Reader)) *pipedProducers {
	p := &pipedProducers{name: name, stop: make(chan struct{}), done: make(chan struct{})}
	for part := range int32(3) {
		cmd := command(part)
		in, err := cmd.StdinPipe()
		if err != nil {
			t.Fatal(err)
		}
		read := make(chan struct{})
		if report != nil {
			out, err := cmd.StdoutPipe()
			if err != nil {
				t.Fatal(err)
			}
			go func() {
				defer close(read)
				report(part, out)
			}()
		} else {
			close(read)
		}
		errOut := &lockedBuffer{}
		cmd.Stderr = errOut
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		exited := make(chan error, 1)
		go func() {
			<-read // Wait closes stdout: the report is read first
			exited <- cmd.Wait()
		}()
		p.procs, p.stdins, p.stderr = append(p.procs, cmd), append(p.stdins, in), append(p.stderr, errOut)
		p.exited = append(p.exited, exited)
	}
	go p.feed()
	t.Cleanup(func() {
		p.halt()
		for _, proc := range p.procs {
			proc.Process.Kill() // an error: it has exited already
		}
		for _, exited := range p.exited {
			<-exited
		}
	})
	return p
}

func (p *pipedProducers) feed() {
	defer close(p.done)
	tick := time.NewTicker(failoverPace)
	defer tick.Stop()
	for {
		select {
		case <-p.stop:
			return
		case <-tick.C:
		}
		p.mu.Lock()
		seq := p.next
		p.next++
		for _, in := range p.stdins {
			fmt.Fprintf(in, "%s-%d\n", p.name, seq)
		}
		p.mu.Unlock()
	}
}

func (p *pipedProducers) halt() {
	select {
	case <-p.stop:
	default:
		close(p.stop)
	}
	<-p.done
}

// finish ends the processes' input and waits until every one has got
// what it read acknowledged and exited 0.
func (p *pipedProducers) finish(t *testing.T) {
	t.Helper()
	p.halt()
	for i, in := range p.stdins {
		in.Close()
		select {
		case err := <-p.exited[i]:
			p.exited[i] <- err // for the cleanup
			if err != nil {
				t.Errorf("%s of partition %d: %v\n%s", p.name, i, err, tail(p.stderr[i].String(), 20))
			}
		case <-time.After(2 * time.Minute):
			p.procs[i].Process.Kill()
			t.Errorf("%s of partition %d did not exit within 2 minutes of its input's end\n%s", p.name, i, tail(p.stderr[i].String(), 20))
		}
	}
}

// startKcatProducer starts one kcat -P per partition of the chaos topic
// (acks=all, idempotent), fed "kcat-SEQ" lines.
func startKcatProducer(t *testing.T, c *cluster) *pipedProducers {
	path, err := exec.LookPath("kcat")
	if err != nil {
		t.Skip("kcat not installed (CI installs it: apt-get install kcat)")
	}
	return startPiped(t, "kcat", func(part int32) *exec.Cmd {
		return exec.Command(path, "-b", c.bootstrapList(), "-P", "-t", chaosTopic, "-p", strconv.Itoa(int(part)),
			"-X", "acks=all", "-X", "enable.idempotence=true",
			// Once each node was killed in turn, librdkafka may hold no
			// connection up (it reconnects as needed) and say all
			// brokers are down, on which kcat exits without -E.
			"-E")
	}, nil)
}

// mqpipeProducer is one `mqpipe produce -p PARTITION --report` per
// partition of the chaos topic (acks=all, mqpipe's defaults otherwise),
// fed "mqpipe-SEQ" lines. mqpipe reports each line it got acknowledged,
// in input order, so the Nth report line of a partition says line N-1
// (sequence number N-1) was acknowledged; it flushes its report every
// 100 ms, the resolution of its figures.
type mqpipeProducer struct {
	*pipedProducers
	mark atomic.Pointer[mark]
}

func startMqpipeProducer(t *testing.T, c *cluster) *mqpipeProducer {
	m := &mqpipeProducer{}
	m.pipedProducers = startPiped(t, "mqpipe", func(part int32) *exec.Cmd {
		return exec.Command(filepath.Join(binDir, "mqpipe"), "produce", "-b", c.bootstrapList(), "-t", chaosTopic,
			"-p", strconv.Itoa(int(part)), "--report")
	}, m.readReport)
	return m
}

// readReport reads partition part's report lines and hits the mark at
// the line of its first sequence number.
func (m *mqpipeProducer) readReport(part int32, out io.Reader) {
	lines := bufio.NewScanner(out)
	for seq := int64(0); lines.Scan(); seq++ {
		if mk := m.mark.Load(); mk != nil && mk.part == part && seq >= mk.from {
			mk.hit(time.Now())
		}
	}
}

// arm returns a mark for the first acknowledgement of a line of part
// written from now on.
func (m *mqpipeProducer) arm(part int32, _ time.Time) *mark {
	m.mu.Lock()
	defer m.mu.Unlock()
	mk := newMark(part, m.next, time.Time{})
	m.mark.Store(mk)
	return mk
}

// scenario is one client's figures across a series: how long after each
// kill (or stop) it got its first record through.
type scenario struct {
	name  string        // "leader-kill kgo-default"
	bound time.Duration // 0: reported, not bounded
	arm   func(part int32, after time.Time) *mark
	times []time.Duration
	// wait bounds a run (0: failoverWait); missed counts the runs it had
	// not recovered in it, each counted as wait.
	wait   time.Duration
	missed int
}

// await waits for m at most the scenario's wait from begun and notes
// the time from begun.
func (s *scenario) await(t *testing.T, m *mark, begun time.Time) {
	wait := cmp.Or(s.wait, failoverWait)
	select {
	case <-m.done:
		s.times = append(s.times, m.at.Sub(begun))
	case <-time.After(time.Until(begun.Add(wait))):
		s.times = append(s.times, wait)
		s.missed++
		if s.bound == 0 { // reported, not bounded: its line counts the miss
			t.Logf("%s: no record of partition %d through within %v", s.name, m.part, wait)
			return
		}
		t.Errorf("%s: no record of partition %d through within %v", s.name, m.part, wait)
	}
}

// report logs the scenario's line, prints it for make chaos's summary,
// and fails the test when its worst run passed the bound. row-checks is
// 1 when it did.
func (s *scenario) report(t *testing.T) {
	t.Helper()
	ts := slices.Clone(s.times)
	slices.Sort(ts)
	if len(ts) == 0 {
		return
	}
	median, worst := ts[len(ts)/2], ts[len(ts)-1]
	if len(ts)%2 == 0 {
		median = (ts[len(ts)/2-1] + ts[len(ts)/2]) / 2
	}
	over := 0
	for _, d := range ts {
		if s.bound > 0 && d > s.bound {
			over++
		}
	}
	checks := 0
	if s.bound > 0 && worst > s.bound {
		checks = 1
		t.Errorf("failover %s: the worst of %d runs took %v, over the %v bound (%d runs over it; median %v)",
			s.name, len(ts), worst.Round(time.Millisecond), s.bound, over, median.Round(time.Millisecond))
	}
	past := "" // a missed run's figure is only a lower bound
	if s.missed > 0 {
		past = ">"
	}
	bound := "none"
	if s.bound > 0 {
		bound = fmt.Sprintf("%.0fs", s.bound.Seconds())
	}
	line := fmt.Sprintf("failover %s runs %d median %.1fs worst %s%.1fs bound %s over-bound %d missed %d row-checks %d",
		s.name, len(ts), median.Seconds(), past, worst.Seconds(), bound, over, s.missed, checks)
	t.Log(line)
	fmt.Println("chaos:", line)
}

// failoverSeries is one cluster with default settings, the chaos topic
// (3 partitions, each led by its preferred replica: partition p by node
// p+1), a checker of everything the kgo producers had acknowledged, and
// the scenarios measured on it.
type failoverSeries struct {
	t         *testing.T
	c         *cluster
	a         *acked
	o         *observations
	scenarios []*scenario
	finishers []func(t *testing.T)
	// refreshes are those of the clients with kgo's default
	// MetadataMinAge (watched).
	refreshes []*refreshes
}

// watched is the option that has settle wait for a client with kgo's
// default MetadataMinAge.
func (s *failoverSeries) watched() kgo.Opt {
	r := &refreshes{}
	s.refreshes = append(s.refreshes, r)
	return kgo.WithHooks(r)
}

func newFailoverSeries(t *testing.T, configs map[string]string) *failoverSeries {
	c := startCluster(t, 3, clusterOpts{})
	cfg := map[string]string{"min.insync.replicas": "2"}
	for k, v := range configs {
		cfg[k] = v
	}
	c.createOn([][]int32{{1, 2, 3}, {2, 3, 1}, {3, 1, 2}}, cfg)
	return &failoverSeries{t: t, c: c, a: newAcked(), o: newObservations()}
}

// producers starts the two kgo producers, kgo's default MetadataMinAge
// and the short one, and their scenarios (bound and wait as scenario's);
// it returns the short one.
func (s *failoverSeries) producers(what string, bound, wait time.Duration) *pacedProducer {
	def := startPacedFailoverProducer(s.t, s.c, "default", s.a, s.watched())
	fast := startPacedFailoverProducer(s.t, s.c, "fast", s.a, kgo.MetadataMinAge(fastMetadataAge))
	s.scenarios = append(s.scenarios,
		&scenario{name: what + " kgo-default", bound: bound, wait: wait, arm: def.arm},
		&scenario{name: what + " kgo-fast", bound: bound, wait: wait, arm: fast.arm})
	s.finishers = append(s.finishers, def.finish, fast.finish)
	return fast
}

// steady waits until every scenario's client gets its records of part
// through, each knowing part's leader, then settles.
func (s *failoverSeries) steady(part int32) {
	s.t.Helper()
	deadline := time.Now().Add(failoverWait)
	for _, sc := range s.scenarios {
		m := sc.arm(part, time.Now())
		select {
		case <-m.done:
		case <-time.After(time.Until(deadline)):
			s.t.Fatalf("%s: no record of partition %d through within %v of a steady cluster", sc.name, part, failoverWait)
		}
	}
	s.settle()
}

// settle waits until none of the clients with kgo's default
// MetadataMinAge has read metadata within that age and a margin (a
// refresh kgo deferred to the end of the age, after a failure, comes
// first and starts the wait again), so that a fault finds
// each in its steady state, as a client that has run for a while is
// (kgo refreshes every 5 minutes when nothing fails), and not in the few
// seconds after a refresh, when kgo would not ask again before the age
// has passed however soon the cluster names the new leader. The
// preferred-leader election before each run causes such a refresh. What
// a fault in those seconds costs is docs/operations.md's (Failover).
func (s *failoverSeries) settle() {
	s.t.Helper()
	deadline := time.Now().Add(failoverWait)
	for {
		var wait time.Duration
		for _, r := range s.refreshes {
			wait = max(wait, time.Until(time.Unix(0, r.last.Load()).Add(kgoMetadataMinAge+settleMargin)))
		}
		if wait <= 0 {
			return
		}
		if time.Now().Add(wait).After(deadline) {
			s.t.Fatalf("the clients kept refreshing their metadata for %v of a steady cluster", failoverWait)
		}
		time.Sleep(wait) // a known span of time, not a condition
	}
}

// leaderMoved polls the survivors' Metadata from now on, and sends when
// one first names a leader of part other than victim (the zero time if
// none does within pauseWait).
func (s *failoverSeries) leaderMoved(part int32, victim *clusterNode) <-chan time.Time {
	at := make(chan time.Time, 1)
	go func() {
		tick := time.NewTicker(failoverPace)
		defer tick.Stop()
		deadline := time.Now().Add(pauseWait)
		for time.Now().Before(deadline) {
			for _, n := range s.c.nodes {
				if n == victim {
					continue
				}
				ps := n.partitions(chaosTopic)
				if int(part) < len(ps) && ps[part].leader >= 0 && ps[part].leader != victim.id {
					at <- time.Now()
					return
				}
			}
			<-tick.C
		}
		at <- time.Time{}
	}()
	return at
}

// note records a run whose awaited moment came at at (zero: not within
// the scenario's wait).
func (s *scenario) note(t *testing.T, at, begun time.Time) {
	wait := cmp.Or(s.wait, pauseWait)
	if at.IsZero() {
		s.times = append(s.times, wait)
		s.missed++
		t.Errorf("%s: not within %v", s.name, wait)
		return
	}
	s.times = append(s.times, at.Sub(begun))
}

// measure notes, for every scenario, the time from begun (the fault) to
// its first record of part through.
func (s *failoverSeries) measure(part int32, begun time.Time) {
	marks := make([]*mark, len(s.scenarios))
	for i, sc := range s.scenarios {
		marks[i] = sc.arm(part, begun)
	}
	for i, sc := range s.scenarios {
		sc.await(s.t, marks[i], begun)
	}
	var got []string
	over := false
	for _, sc := range s.scenarios {
		took := sc.times[len(sc.times)-1]
		got = append(got, fmt.Sprintf("%s %v", sc.name, took.Round(time.Millisecond)))
		over = over || (sc.bound > 0 && took > sc.bound)
	}
	s.t.Logf("partition %d: %s", part, strings.Join(got, ", "))
	if over {
		// What the clients with kgo's MetadataMinAge heard after the
		// fault, to tell a stale answer from a slow election.
		for i, r := range s.refreshes {
			s.t.Logf("partition %d, client %d of kgo's defaults after the fault at %s: %s", part, i,
				begun.Format("15:04:05.000"), strings.Join(r.since(begun), "; "))
		}
	}
}

// inSync waits until the chaos topic has its whole ISR again.
func (s *failoverSeries) inSync() {
	s.t.Helper()
	s.c.waitPartitions(chaosTopic, "whole ISR", fullISR)
}

// finish stops the clients, settles the cluster and checks what the kgo
// producers had acknowledged as the other rows do (nothing lost,
// duplicated or reordered, no divergent replica: a leader stopped, then
// continued, acknowledged nothing it lost), then reports every scenario.
func (s *failoverSeries) finish(name string) {
	t := s.t
	t.Helper()
	for _, f := range s.finishers {
		f(t)
	}
	hws, logs := settle(t, s.c)
	final := readAll(t, s.c, hws, s.o)
	readEveryReplica(t, s.c, hws, s.o)
	r := check(t, s.c, s.a, nil, s.o, final, hws, logs)
	// The faults come in turn, not from a seed: the line says so, lest
	// its "seed 0" be taken for a replay.
	r.fault, r.notes = name, "faults in turn, no seed"
	if n := len(s.a.failed); n > 0 {
		t.Logf("%d produce calls failed (not acknowledged); the first: %v", n, s.a.failed[0])
	}
	if r.violations() > 0 {
		t.Errorf("chaos %s: %d violations", name, r.violations())
	}
	t.Log("chaos:", r)
	chaosRows.Lock()
	chaosRows.rows = append(chaosRows.rows, r)
	chaosRows.Unlock()
	for _, sc := range s.scenarios {
		sc.report(t)
	}
}

// TestChaosFailover (row 12) measures how long clients stall when a
// broker is lost, on a 3-node cluster with mqd's default settings, the
// chaos topic with RF=3 and min.insync.replicas=2. Each series kills (or
// stops) a broker -chaos.failover.runs times, each time once every
// client gets its records through, and restarts it and waits for the
// whole ISR before the next; a run's figure, per client, is the time
// from the fault to the first of its records produced after the fault
// acknowledged (producers) or read (consumers):
//   - leader-kill: the leader of a partition SIGKILLed, the nodes in
//     turn: kgo producers with kgo's default MetadataMinAge (5 s) and
//     with 250 ms, kcat (librdkafka, idempotent, acks=all; its figure is
//     the append time of its first record after the kill, the topic
//     stamping LogAppendTime), and an assigned kgo consumer (kgo's
//     defaults) awaiting the 250 ms producer's records;
//   - controller-leader-kill: the same with the leader being the active
//     controller, the kgo producers;
//   - coordinator-kill: the broker coordinating a kgo consumer group
//     (kgo's defaults, commits after every poll), also the leader of a
//     partition: the first record read from that partition, and the
//     first commit begun after the kill acknowledged;
//   - leader-pause: the leader SIGSTOPped, the kgo producers and one
//     mqpipe produce per partition (acks=all, its report timing each
//     acknowledgement); it is continued once all recovered, or after
//     pauseWait (a missed run). Each run also logs when a survivor's
//     Metadata first named another leader.
//
// A killed broker's scenario fails when its worst run passes
// failoverBound, a stopped one's when it passes pauseBound. Every series
// ends with the other rows' checks of what was acknowledged. The row
// does not inject for -chaos.duration: it takes as long as its runs; it
// runs only when -chaos.duration or -chaos.failover.runs is given (make
// chaos), as it takes minutes.
func TestChaosFailover(t *testing.T) {
	given := false
	flag.Visit(func(f *flag.Flag) { given = given || f.Name == "chaos.duration" || f.Name == "chaos.failover.runs" })
	if !given {
		t.Skip("the failover row runs under make chaos (-chaos.duration or -chaos.failover.runs)")
	}
	runs := *chaosFailoverRuns
	t.Run("leader-kill", func(t *testing.T) {
		s := newFailoverSeries(t, map[string]string{"message.timestamp.type": "LogAppendTime"})
		fast := s.producers("leader-kill", failoverBound, 0)
		k := startKcatProducer(t, s.c)
		reader := startFailoverReader(t, s.c, s.o, fast, fromStart(), s.watched())
		s.scenarios = append(s.scenarios,
			&scenario{name: "leader-kill kcat", bound: failoverBound, arm: reader.armKcat},
			&scenario{name: "leader-kill consumer", bound: failoverBound, arm: reader.arm})
		s.finishers = append([]func(*testing.T){k.finish}, s.finishers...)
		s.finishers = append(s.finishers, func(*testing.T) { reader.halt() })
		for i := range runs {
			part := int32(i % 3)
			victim := s.c.node(part + 1)
			s.c.electPreferred(t, int(part), victim.id)
			s.steady(part)
			begun := time.Now()
			victim.kill()
			s.measure(part, begun)
			victim.start()
			s.inSync()
		}
		s.finish("failover-leader-kill")
	})
	t.Run("controller-leader-kill", func(t *testing.T) {
		s := newFailoverSeries(t, nil)
		s.producers("controller-leader-kill", failoverBound, 0)
		for range runs {
			id := s.c.quorumLeader()
			part := id - 1
			s.c.electPreferred(t, int(part), id)
			s.steady(part)
			if now := s.c.quorumLeader(); now != id {
				t.Logf("the controller moved from node %d to node %d before the kill", id, now)
			}
			victim := s.c.node(id)
			begun := time.Now()
			victim.kill()
			s.measure(part, begun)
			victim.start()
			s.inSync()
		}
		s.finish("failover-controller-kill")
	})
	t.Run("coordinator-kill", func(t *testing.T) {
		s := newFailoverSeries(t, nil)
		fast := startPacedFailoverProducer(t, s.c, "fast", s.a, kgo.MetadataMinAge(fastMetadataAge))
		s.finishers = append(s.finishers, fast.finish)
		member := startFailoverReader(t, s.c, s.o, fast, kgo.ConsumerGroup(chaosGroup), kgo.ConsumeTopics(chaosTopic),
			kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()), kgo.DisableAutoCommit(), s.watched())
		commits := startCommitter(t, member.cl)
		s.scenarios = append(s.scenarios,
			&scenario{name: "coordinator-kill group-consume", bound: failoverBound, arm: member.arm},
			&scenario{name: "coordinator-kill group-commit", bound: failoverBound, arm: commits.arm})
		s.finishers = append(s.finishers, func(*testing.T) { commits.halt(); member.halt() })
		cl := s.c.client()
		for range runs {
			var id int32
			clusterWait.For(t, "the group's coordinator", func() (bool, string) {
				ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
				defer cancel()
				var err error
				id, err = coordinator(ctx, cl)
				return err == nil, fmt.Sprintf("FindCoordinator %s: %v", chaosGroup, err)
			})
			part := id - 1
			s.c.electPreferred(t, int(part), id)
			s.steady(part)
			victim := s.c.node(id)
			begun := time.Now()
			victim.kill()
			s.measure(part, begun)
			victim.start()
			s.inSync()
			if s.c.node(1).partitions("__consumer_offsets") != nil {
				s.c.waitPartitions("__consumer_offsets", "whole ISR of __consumer_offsets", fullISR)
			}
		}
		s.finish("failover-coordinator-kill")
	})
	t.Run("leader-pause", func(t *testing.T) {
		s := newFailoverSeries(t, nil)
		s.producers("leader-pause", 0, pauseWait)
		mp := startMqpipeProducer(t, s.c)
		s.scenarios = append(s.scenarios, &scenario{name: "leader-pause mqpipe", wait: pauseWait, arm: mp.arm})
		s.finishers = append(s.finishers, mp.finish)
		moved := &scenario{name: "leader-pause leadership", bound: pauseBound}
		for i := range runs {
			part := int32(i % 3)
			victim := s.c.node(part + 1)
			s.c.electPreferred(t, int(part), victim.id)
			s.steady(part)
			begun := time.Now()
			victim.pause()
			movedAt := s.leaderMoved(part, victim)
			s.measure(part, begun)
			moved.note(t, <-movedAt, begun)
			t.Logf("partition %d: leadership moved after %v", part, moved.times[len(moved.times)-1].Round(time.Millisecond))
			victim.cont()
			s.inSync()
		}
		moved.report(t)
		s.finish("failover-leader-pause")
	})
}

// committer commits a group member's consumed offsets again and again,
// a call failoverPace after the one before returned, and awaits the
// first call begun after a mark that the coordinator acknowledges.
type committer struct {
	cl     *kgo.Client
	mu     sync.Mutex // orders a call's beginning against arm
	gen    int64      // counts the calls begun
	mark   atomic.Pointer[mark]
	cancel context.CancelFunc
	done   chan struct{}
}

func startCommitter(t *testing.T, cl *kgo.Client) *committer {
	ctx, cancel := context.WithCancel(context.Background())
	c := &committer{cl: cl, cancel: cancel, done: make(chan struct{})}
	go c.run(ctx)
	t.Cleanup(c.halt)
	return c
}

func (c *committer) run(ctx context.Context) {
	defer close(c.done)
	tick := time.NewTicker(failoverPace)
	defer tick.Stop()
	for ctx.Err() == nil {
		c.mu.Lock()
		call := c.gen
		c.gen++
		c.mu.Unlock()
		// A call with nothing to commit sends nothing: it does not count.
		acked := false
		c.cl.CommitOffsetsSync(ctx, c.cl.UncommittedOffsets(), func(_ *kgo.Client, req *kmsg.OffsetCommitRequest, resp *kmsg.OffsetCommitResponse, err error) {
			if err != nil || len(req.Topics) == 0 {
				return
			}
			for _, rt := range resp.Topics {
				for _, rp := range rt.Partitions {
					if rp.ErrorCode != 0 {
						return
					}
				}
			}
			acked = true
		})
		if m := c.mark.Load(); acked && m != nil && call >= m.from {
			m.hit(time.Now())
		}
		select {
		case <-ctx.Done():
		case <-tick.C:
		}
	}
}

// arm returns a mark for the first commit begun from now on that is
// acknowledged.
func (c *committer) arm(part int32, _ time.Time) *mark {
	c.mu.Lock()
	defer c.mu.Unlock()
	m := newMark(part, c.gen, time.Time{})
	c.mark.Store(m)
	return m
}

func (c *committer) halt() { c.cancel(); <-c.done }
