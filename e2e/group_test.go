package e2e

import (
	"context"
	"errors"
	"fmt"
	"net"
	"os/exec"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/mqproject/mq/lib/mqtest"
)

// groupProps are the broker settings of the group tests: no initial
// rebalance delay and a small __consumer_offsets, so groups form at once.
var groupProps = []string{"group.initial.rebalance.delay.ms=0", "offsets.topic.num.partitions=8"}

// killableDialer hands out connections that kill cuts at once: the client
// can then neither heartbeat nor send LeaveGroup (new dials fail too), as
// if its process had died. That is how the tests kill a group member
// without letting it leave.
type killableDialer struct {
	mu     sync.Mutex
	dead   bool
	conns  []net.Conn
	dialer net.Dialer
}

func (d *killableDialer) dial(ctx context.Context, network, addr string) (net.Conn, error) {
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.dead {
		return nil, errors.New("killed")
	}
	c, err := d.dialer.DialContext(ctx, network, addr)
	if err == nil {
		d.conns = append(d.conns, c)
	}
	return c, err
}

func (d *killableDialer) kill() {
	d.mu.Lock()
	defer d.mu.Unlock()
	d.dead = true
	for _, c := range d.conns {
		c.Close()
	}
}

// processed is what one consumer did with one record.
type processed struct {
	consumer  string
	partition int32
	offset    int64
	value     int
}

// ledger collects every record the group's members processed, and the
// offsets each member committed.
type ledger struct {
	mu        sync.Mutex
	records   []processed
	distinct  map[[2]int64]bool
	committed map[string]map[int32]int64 // consumer → partition → last committed offset
	cond      *sync.Cond                 // broadcast on every add
}

func newLedger() *ledger {
	l := &ledger{distinct: map[[2]int64]bool{}, committed: map[string]map[int32]int64{}}
	l.cond = sync.NewCond(&l.mu)
	return l
}

func (l *ledger) add(p processed) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.records = append(l.records, p)
	l.distinct[[2]int64{int64(p.partition), p.offset}] = true
	l.cond.Broadcast()
}

// waitBelow blocks until fewer than window of the first produced records
// are unprocessed, or ctx ends: it keeps the producer just ahead of the
// consumers, so that production lasts through every membership change.
func (l *ledger) waitBelow(ctx context.Context, produced, window int) {
	stop := context.AfterFunc(ctx, func() {
		l.mu.Lock()
		l.cond.Broadcast()
		l.mu.Unlock()
	})
	defer stop()
	l.mu.Lock()
	defer l.mu.Unlock()
	for produced-len(l.distinct) >= window && ctx.Err() == nil {
		l.cond.Wait()
	}
}

func (l *ledger) count() int {
	l.mu.Lock()
	defer l.mu.Unlock()
	return len(l.distinct)
}

func (l *ledger) commit(consumer string, offsets map[string]map[int32]kgo.EpochOffset) {
	l.mu.Lock()
	defer l.mu.Unlock()
	m := l.committed[consumer]
	if m == nil {
		m = map[int32]int64{}
		l.committed[consumer] = m
	}
	for _, ps := range offsets {
		for p, o := range ps {
			m[p] = max(m[p], o.Offset)
		}
	}
}

// groupConsumer is one member of the group under test: it processes each
// polled batch into the ledger, then commits synchronously, and only then
// lets a rebalance happen (BlockRebalanceOnPoll), so that a member that
// leaves cleanly never causes a duplicate.
type groupConsumer struct {
	name     string
	cl       *kgo.Client
	dialer   *killableDialer
	killed   atomic.Bool
	killNext atomic.Bool // die after processing the next batch
	stop     context.CancelFunc
	done     chan struct{}
}

func startGroupConsumer(t *testing.T, b *broker, l *ledger, name, groupID, topic string, balancer kgo.GroupBalancer) *groupConsumer {
	t.Helper()
	gc := &groupConsumer{name: name, dialer: &killableDialer{}, done: make(chan struct{})}
	cl, err := kgo.NewClient(
		kgo.SeedBrokers(b.addr), kgo.Dialer(gc.dialer.dial), kgo.ClientID(name),
		kgo.ConsumerGroup(groupID), kgo.ConsumeTopics(topic), kgo.Balancers(balancer),
		kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()),
		kgo.DisableAutoCommit(), kgo.BlockRebalanceOnPoll(),
		kgo.SessionTimeout(6*time.Second), kgo.HeartbeatInterval(300*time.Millisecond),
		kgo.RebalanceTimeout(15*time.Second), kgo.FetchMaxWait(200*time.Millisecond),
		kgo.RetryTimeout(5*time.Second),
		kgo.OnPartitionsRevoked(func(ctx context.Context, cl *kgo.Client, _ map[string][]int32) {
			if gc.killed.Load() {
				return
			}
			commitSync(ctx, cl, l, name)
		}),
	)
	if err != nil {
		t.Fatal(err)
	}
	gc.cl = cl
	t.Cleanup(cl.Close)
	ctx, cancel := context.WithCancel(context.Background())
	gc.stop = cancel
	// Stop the loop before the client closes (cleanups run last first):
	// polling a closed client returns at once, and a loop left spinning
	// on it for the rest of the package starts a goroutine in kgo per
	// poll, which under -race costs memory that is never given back.
	t.Cleanup(func() {
		cancel()
		<-gc.done
	})
	go func() {
		defer close(gc.done)
		// Close waits for a rebalance blocked on the last poll.
		defer cl.AllowRebalance()
		for ctx.Err() == nil {
			fs := cl.PollFetches(ctx)
			if gc.killed.Load() || fs.IsClientClosed() {
				return
			}
			fs.EachRecord(func(r *kgo.Record) {
				v, _ := strconv.Atoi(string(r.Value))
				l.add(processed{consumer: name, partition: r.Partition, offset: r.Offset, value: v})
			})
			if gc.killNext.Load() && fs.NumRecords() > 0 {
				// Die after processing, before committing: what it
				// processed since its last commit is redelivered.
				gc.killed.Store(true)
				gc.dialer.kill()
				return
			}
			commitSync(ctx, cl, l, name)
			cl.AllowRebalance()
		}
	}()
	return gc
}

func commitSync(ctx context.Context, cl *kgo.Client, l *ledger, name string) {
	offsets := cl.UncommittedOffsets()
	if len(offsets) == 0 {
		return
	}
	var failed bool
	cl.CommitOffsetsSync(ctx, offsets, func(_ *kgo.Client, _ *kmsg.OffsetCommitRequest, resp *kmsg.OffsetCommitResponse, err error) {
		if err != nil {
			failed = true
			return
		}
		for _, t := range resp.Topics {
			for _, p := range t.Partitions {
				if p.ErrorCode != 0 {
					delete(offsets[t.Topic], p.Partition)
				}
			}
		}
	})
	if !failed {
		l.commit(name, offsets)
	}
}

// leave stops the consumer cleanly: it commits and sends LeaveGroup.
func (gc *groupConsumer) leave() {
	gc.stop()
	<-gc.done
	gc.cl.Close()
}

// kill stops the consumer as a crash would: right after it processed a
// batch and before it commits, with no LeaveGroup (or, if it gets no
// batch within 10s, wherever it is).
func (gc *groupConsumer) kill() {
	gc.killNext.Store(true)
	select {
	case <-gc.done:
	case <-time.After(10 * time.Second):
		gc.killed.Store(true)
		gc.dialer.kill()
		gc.stop()
		<-gc.done
	}
}

// assignments describes the group: member client id → partitions.
func assignments(ctx context.Context, adm *kadm.Client, groupID string) (string, map[string][]int32, error) {
	gs, err := adm.DescribeGroups(ctx, groupID)
	if err != nil {
		return "", nil, err
	}
	g := gs[groupID]
	if g.Err != nil {
		return "", nil, g.Err
	}
	out := map[string][]int32{}
	for _, m := range g.Members {
		ca, _ := m.Assigned.AsConsumer()
		var ps []int32
		if ca != nil {
			for _, t := range ca.Topics {
				ps = append(ps, t.Partitions...)
			}
		}
		slices.Sort(ps)
		out[m.ClientID] = ps
	}
	return g.State, out, nil
}

// waitBalanced waits until the group is stable with the named members,
// each owning want partitions.
func waitBalanced(t *testing.T, adm *kadm.Client, groupID string, members []string, want int) map[string][]int32 {
	t.Helper()
	var got map[string][]int32
	mqtest.Wait{Timeout: 45 * time.Second}.For(t, fmt.Sprintf("%v to own %d partitions each", members, want), func() (bool, string) {
		state, a, err := assignments(context.Background(), adm, groupID)
		if err != nil {
			return false, err.Error()
		}
		got = a
		seen := fmt.Sprintf("%s %v", state, a)
		if state != "Stable" || len(a) != len(members) {
			return false, seen
		}
		for _, m := range members {
			if len(a[m]) != want {
				return false, seen
			}
		}
		return true, seen
	})
	return got
}

func TestGroupMembersJoinAndLeaveWhileProducing(t *testing.T) {
	parallel(t)
	for _, tc := range []struct {
		name     string
		balancer kgo.GroupBalancer
	}{
		{"cooperative-sticky", kgo.CooperativeStickyBalancer()},
		{"range", kgo.RangeBalancer()},
	} {
		t.Run(tc.name, func(t *testing.T) {
			b := startBroker(t, brokerOpts{props: groupProps})
			adm := kadm.NewClient(b.client())
			topic, groupID := "jl-"+tc.name, "g-"+tc.name
			ctx := ctxFor(t, 120*time.Second)
			if _, err := adm.CreateTopic(ctx, 6, 1, nil, topic); err != nil {
				t.Fatal(err)
			}
			const total = 200_000
			l := newLedger()
			consumers := map[string]*groupConsumer{}
			start := func(name string) {
				consumers[name] = startGroupConsumer(t, b, l, name, groupID, topic, tc.balancer)
			}
			for _, n := range []string{"c0", "c1", "c2"} {
				start(n)
			}
			waitBalanced(t, adm, groupID, []string{"c0", "c1", "c2"}, 2)

			// Produce in the background, values numbered in produce order,
			// at most 20,000 records ahead of the consumers.
			producer := b.client(kgo.DefaultProduceTopic(topic), kgo.RecordPartitioner(kgo.RoundRobinPartitioner()),
				kgo.ProducerLinger(5*time.Millisecond), kgo.MaxBufferedRecords(20_000))
			produceErr := make(chan error, 1)
			go func() {
				var first error
				var once sync.Once
				for i := range total {
					if i%1000 == 0 {
						l.waitBelow(ctx, i, 20_000)
					}
					producer.Produce(ctx, &kgo.Record{Value: []byte(strconv.Itoa(i))}, func(_ *kgo.Record, err error) {
						if err != nil {
							once.Do(func() { first = err })
						}
					})
				}
				if err := producer.Flush(ctx); err != nil && first == nil {
					first = err
				}
				produceErr <- first
			}()
			progress := func(n int) {
				mqtest.Wait{Timeout: 45 * time.Second}.For(t, fmt.Sprintf("%d records processed", n), func() (bool, string) {
					c := l.count()
					return c >= n, strconv.Itoa(c)
				})
			}

			progress(20_000)
			start("c3") // joins
			progress(50_000)
			consumers["c1"].leave() // leaves cleanly
			progress(80_000)
			consumers["c2"].kill() // dies without leaving
			killedAt := l.count()
			start("c4") // joins while c2's session has not expired yet
			progress(min(killedAt+20_000, total))
			if err := <-produceErr; err != nil {
				t.Fatalf("produce: %v", err)
			}
			polls, group := 0, ""
			mqtest.Wait{Timeout: 60 * time.Second}.For(t, "every record processed", func() (bool, string) {
				c := l.count()
				if c == total {
					return true, ""
				}
				if polls++; polls%100 == 1 { // every 2s: describing is not free
					state, a, err := assignments(ctx, adm, groupID)
					group = fmt.Sprintf("group %s %v %v; lag %v", state, a, err, groupLag(ctx, adm, groupID))
				}
				return false, fmt.Sprintf("%d records; %s", c, group)
			})
			waitBalanced(t, adm, groupID, []string{"c0", "c3", "c4"}, 2)

			l.mu.Lock()
			defer l.mu.Unlock()
			// Per-partition order: each consumer saw each partition's
			// offsets increasing, with values increasing with them.
			type key struct {
				consumer  string
				partition int32
			}
			last := map[key]processed{}
			valueAt := map[[2]int64]int{}
			times := map[[2]int64]int{}
			for _, p := range l.records {
				k := key{p.consumer, p.partition}
				if prev, ok := last[k]; ok && (p.offset <= prev.offset || p.value <= prev.value) {
					t.Fatalf("%s: partition %d went from offset %d (value %d) to %d (value %d)",
						p.consumer, p.partition, prev.offset, prev.value, p.offset, p.value)
				}
				last[k] = p
				at := [2]int64{int64(p.partition), p.offset}
				if v, ok := valueAt[at]; ok && v != p.value {
					t.Fatalf("partition %d offset %d has values %d and %d", p.partition, p.offset, v, p.value)
				}
				valueAt[at] = p.value
				times[at]++
			}
			// None lost: every value produced was processed.
			values := make([]bool, total)
			for _, v := range valueAt {
				values[v] = true
			}
			for v, ok := range values {
				if !ok {
					t.Fatalf("value %d was never processed", v)
				}
			}
			// Duplicates only of what the killed member processed after its
			// last commit of that partition.
			killedCommits := l.committed["c2"]
			killedSaw := map[[2]int64]bool{}
			for _, p := range l.records {
				if p.consumer == "c2" {
					killedSaw[[2]int64{int64(p.partition), p.offset}] = true
				}
			}
			dups := 0
			for at, n := range times {
				if n == 1 {
					continue
				}
				dups++
				if !killedSaw[at] || at[1] < killedCommits[int32(at[0])] {
					t.Errorf("partition %d offset %d processed %d times; killed member committed %d there (saw it: %v)",
						at[0], at[1], n, killedCommits[int32(at[0])], killedSaw[at])
				}
			}
			t.Logf("%d records processed, %d redelivered after the kill", len(l.records), dups)
		})
	}
}

// groupLag describes a group's committed offsets and lag, for failures.
func groupLag(ctx context.Context, adm *kadm.Client, groupID string) string {
	lags, err := adm.Lag(ctx, groupID)
	if err != nil {
		return err.Error()
	}
	var b strings.Builder
	lags.Each(func(l kadm.DescribedGroupLag) {
		for _, ps := range l.Lag {
			for _, p := range ps {
				owner := "-"
				if p.Member != nil {
					owner = p.Member.ClientID
				}
				fmt.Fprintf(&b, " %d@%d/lag%d(%s)", p.Partition, p.Commit.At, p.Lag, owner)
			}
		}
	})
	return b.String()
}

func TestGroupStaticMemberRestartKeepsPartitions(t *testing.T) {
	b := startBroker(t, brokerOpts{props: groupProps})
	adm := kadm.NewClient(b.client())
	ctx := ctxFor(t, 60*time.Second)
	if _, err := adm.CreateTopic(ctx, 6, 1, nil, "static"); err != nil {
		t.Fatal(err)
	}
	var mu sync.Mutex
	rebalances := 0               // callbacks of s0 and s1
	owned := map[string][]int32{} // member → partitions, as its callbacks say
	track := func(name string, ps map[string][]int32, add bool) {
		mu.Lock()
		defer mu.Unlock()
		if name != "s2" {
			rebalances++
		}
		for _, p := range ps["static"] {
			owned[name] = slices.DeleteFunc(owned[name], func(o int32) bool { return o == p })
			if add {
				owned[name] = append(owned[name], p)
			}
		}
		slices.Sort(owned[name])
	}
	newMember := func(name string) *kgo.Client {
		cl, err := kgo.NewClient(kgo.SeedBrokers(b.addr), kgo.ClientID(name), kgo.InstanceID(name),
			kgo.ConsumerGroup("static-g"), kgo.ConsumeTopics("static"),
			kgo.SessionTimeout(20*time.Second), kgo.HeartbeatInterval(300*time.Millisecond),
			kgo.OnPartitionsRevoked(func(_ context.Context, _ *kgo.Client, ps map[string][]int32) { track(name, ps, false) }),
			kgo.OnPartitionsAssigned(func(_ context.Context, _ *kgo.Client, ps map[string][]int32) { track(name, ps, true) }),
		)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(cl.Close)
		go func() {
			for {
				if fs := cl.PollFetches(ctx); fs.IsClientClosed() || ctx.Err() != nil {
					return
				}
			}
		}()
		return cl
	}
	// settled waits until every member's callbacks agree with the group's
	// assignment, and returns the callback count then.
	settled := func(want map[string][]int32) int {
		var n int
		mqtest.Wait{Timeout: 30 * time.Second}.For(t, "members to see their assignment", func() (bool, string) {
			mu.Lock()
			defer mu.Unlock()
			n = rebalances
			for m, ps := range want {
				if !slices.Equal(owned[m], ps) {
					return false, fmt.Sprint(owned)
				}
			}
			return true, ""
		})
		return n
	}
	s0 := newMember("s0")
	newMember("s1")
	s2 := newMember("s2")
	before := waitBalanced(t, adm, "static-g", []string{"s0", "s1", "s2"}, 2)
	callbacks := settled(before)
	_, generation := s0.GroupMetadata()

	// s2 restarts: a static member sends no LeaveGroup on close, and its
	// new incarnation joins under the same instance id.
	s2.Close()
	mu.Lock()
	owned["s2"] = nil
	mu.Unlock()
	newMember("s2")
	after := waitBalanced(t, adm, "static-g", []string{"s0", "s1", "s2"}, 2)
	afterCallbacks := settled(after)
	for _, m := range []string{"s0", "s1", "s2"} {
		if !slices.Equal(before[m], after[m]) {
			t.Errorf("%s owned %v before the restart, %v after", m, before[m], after[m])
		}
	}
	gs, err := adm.DescribeGroups(ctx, "static-g")
	if err != nil {
		t.Fatal(err)
	}
	var s2Member string
	for _, m := range gs["static-g"].Members {
		if m.ClientID == "s2" {
			s2Member = m.MemberID
		}
	}
	if !strings.HasPrefix(s2Member, "s2-") {
		t.Errorf("s2's member id %q does not start with its instance id", s2Member)
	}
	if _, g := s0.GroupMetadata(); g != generation {
		t.Errorf("generation went from %d to %d: the group rebalanced", generation, g)
	}
	if afterCallbacks != callbacks {
		t.Errorf("the other members saw %d revoke/assign callbacks after s2 restarted", afterCallbacks-callbacks)
	}
}

func TestGroupCommittedOffsetsSurviveKill(t *testing.T) {
	b := startBroker(t, brokerOpts{props: groupProps})
	adm := kadm.NewClient(b.client())
	ctx := ctxFor(t, 60*time.Second)
	if _, err := adm.CreateTopic(ctx, 3, 1, nil, "durable"); err != nil {
		t.Fatal(err)
	}
	producer := b.client(kgo.DefaultProduceTopic("durable"), kgo.RecordPartitioner(kgo.RoundRobinPartitioner()))
	for i := range 300 {
		if err := producer.ProduceSync(ctx, &kgo.Record{Value: []byte(strconv.Itoa(i))}).FirstErr(); err != nil {
			t.Fatal(err)
		}
	}
	consumer := b.client(kgo.ConsumerGroup("durable-g"), kgo.ConsumeTopics("durable"),
		kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()), kgo.DisableAutoCommit())
	got := 0
	for got < 150 {
		fs := consumer.PollRecords(ctx, 150-got)
		if err := fs.Err0(); err != nil {
			t.Fatal(err)
		}
		got += fs.NumRecords()
	}
	if err := consumer.CommitUncommittedOffsets(ctx); err != nil {
		t.Fatal(err)
	}
	want, err := adm.FetchOffsets(ctx, "durable-g")
	if err != nil || want.Error() != nil {
		t.Fatalf("fetch offsets: %v %v", err, want.Error())
	}
	consumer.Close()

	b.restart(true) // SIGKILL

	adm = kadm.NewClient(b.client())
	var after kadm.OffsetResponses
	mqtest.Wait{Timeout: 30 * time.Second}.For(t, "offsets after restart", func() (bool, string) {
		after, err = adm.FetchOffsets(ctx, "durable-g")
		if err == nil {
			err = after.Error()
		}
		return err == nil, fmt.Sprint(err)
	})
	var sum int64
	want.Each(func(o kadm.OffsetResponse) {
		a, _ := after.Lookup(o.Topic, o.Partition)
		if a.At != o.At {
			t.Errorf("%s/%d: committed %d before the kill, %d after", o.Topic, o.Partition, o.At, a.At)
		}
		sum += a.At
	})
	if sum != 150 {
		t.Errorf("committed offsets sum to %d, want 150", sum)
	}
	// A member of the group resumes after the commit.
	resumed := b.client(kgo.ConsumerGroup("durable-g"), kgo.ConsumeTopics("durable"))
	seen := 0
	for seen < 150 {
		fs := resumed.PollFetches(ctx)
		if err := fs.Err0(); err != nil {
			t.Fatal(err)
		}
		fs.EachRecord(func(r *kgo.Record) {
			if o, _ := after.Lookup(r.Topic, r.Partition); r.Offset < o.At {
				t.Errorf("resumed at %d/%d, below the commit %d", r.Partition, r.Offset, o.At)
			}
			seen++
		})
	}
}

func TestKcatBalancedConsumer(t *testing.T) {
	path, err := exec.LookPath("kcat")
	if err != nil {
		t.Skip("kcat not installed")
	}
	b := startBroker(t, brokerOpts{props: groupProps})
	adm := kadm.NewClient(b.client())
	ctx := ctxFor(t, 60*time.Second)
	if _, err := adm.CreateTopic(ctx, 2, 1, nil, "kcat-g"); err != nil {
		t.Fatal(err)
	}
	producer := b.client(kgo.DefaultProduceTopic("kcat-g"))
	for i := range 100 {
		if err := producer.ProduceSync(ctx, &kgo.Record{Value: fmt.Appendf(nil, "m%d", i)}).FirstErr(); err != nil {
			t.Fatal(err)
		}
	}
	cmd := exec.CommandContext(ctx, path, "-b", b.addr, "-G", "kcat-group", "-c", "100",
		"-X", "auto.offset.reset=earliest", "-f", "%p %o %s\n", "kcat-g")
	var stderr strings.Builder
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("kcat: %v\n%s", err, stderr.String())
	}
	lines := strings.Split(strings.TrimSpace(string(out)), "\n")
	if len(lines) != 100 {
		t.Fatalf("kcat printed %d lines, want 100:\n%s\n%s", len(lines), out, stderr.String())
	}
	// kcat commits what it consumed when it leaves.
	mqtest.WaitFor(t, "kcat's commits", func() (bool, string) {
		offs, err := adm.FetchOffsets(ctx, "kcat-group")
		if err != nil {
			return false, err.Error()
		}
		var sum int64
		offs.Each(func(o kadm.OffsetResponse) { sum += o.At })
		return sum == 100, fmt.Sprint(sum)
	})
}

// TestDeletedTopicTakesGroupOffsets: the groups' committed offsets of a
// topic go with the topic, as in Kafka, so a topic created again under
// the same name starts without the old topic's positions (sarama's
// functional tests recreate their topics and expect so); other topics'
// offsets stay, and a restart replays the deletion.
func TestDeletedTopicTakesGroupOffsets(t *testing.T) {
	b := startBroker(t, brokerOpts{})
	ctx := ctxFor(t, 2*time.Minute)
	adm := b.admin()
	for _, topic := range []string{"reborn", "kept"} {
		if _, err := adm.CreateTopic(ctx, 2, 1, nil, topic); err != nil {
			t.Fatal(err)
		}
	}
	var readers, others kadm.Offsets
	readers.AddOffset("reborn", 0, 5, -1)
	readers.AddOffset("reborn", 1, 7, -1)
	readers.AddOffset("kept", 0, 3, -1)
	others.AddOffset("reborn", 1, 2, -1)
	for group, o := range map[string]kadm.Offsets{"readers": readers, "others": others} {
		if resp, err := adm.CommitOffsets(ctx, group, o); err != nil || resp.Error() != nil {
			t.Fatalf("commit %s: %v %v", group, err, resp.Error())
		}
	}

	if resp, err := adm.DeleteTopics(ctx, "reborn"); err != nil || resp.Error() != nil {
		t.Fatalf("delete: %v %v", err, resp.Error())
	}
	tick := time.NewTicker(50 * time.Millisecond)
	defer tick.Stop()
	for {
		resp, err := adm.CreateTopic(ctx, 2, 1, nil, "reborn")
		if err == nil && resp.Err == nil {
			break
		}
		select {
		case <-ctx.Done():
			t.Fatalf("creating the topic again: %v %v", err, resp.Err)
		case <-tick.C:
		}
	}

	// committed describes the groups' offsets, "" once they are as
	// they should be.
	committed := func() string {
		var wrong []string
		for _, group := range []string{"readers", "others"} {
			fetched, err := adm.FetchOffsets(ctx, group)
			if err != nil || fetched.Error() != nil {
				return fmt.Sprintf("fetch %s: %v %v", group, err, fetched.Error())
			}
			fetched.Each(func(o kadm.OffsetResponse) {
				if o.Topic == "reborn" || group != "readers" || o.Partition != 0 || o.At != 3 {
					wrong = append(wrong, fmt.Sprintf("%s %s/%d@%d", group, o.Topic, o.Partition, o.At))
				}
			})
			if _, ok := fetched.Lookup("kept", 0); group == "readers" && !ok {
				wrong = append(wrong, "readers lost kept/0")
			}
		}
		return strings.Join(wrong, ", ")
	}
	await := func(when string) {
		for {
			got := committed()
			if got == "" {
				return
			}
			select {
			case <-ctx.Done():
				t.Fatalf("the groups' offsets %s: %s", when, got)
			case <-tick.C:
			}
		}
	}
	await("after the topic was deleted and created again")

	b.restart(false)
	adm = b.admin()
	await("after a restart")
}
