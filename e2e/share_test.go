package e2e

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/mqproject/mq/lib/mqtest"
)

// shareHolderEnv makes this test binary a share consumer that acquires
// records once, prints their values and then holds them without ever
// acknowledging, until it is killed (see shareHolderMain). TestMain runs
// it before anything else.
const shareHolderEnv = "MQ_E2E_SHARE_HOLDER"

// shareHolderMain is the child process of TestShareConsumerKilledHoldingLeases:
// MQ_E2E_SHARE_HOLDER is "broker group topic maxRecords".
func shareHolderMain(spec string) int {
	f := strings.Fields(spec)
	max, _ := strconv.Atoi(f[3])
	cl, err := kgo.NewClient(kgo.SeedBrokers(f[0]), kgo.ShareGroup(f[1]), kgo.ConsumeTopics(f[2]),
		kgo.ShareMaxRecords(int32(max)), kgo.ShareMaxRecordsStrict())
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	for {
		fs := cl.PollFetches(ctx)
		if ctx.Err() != nil {
			return 1
		}
		var vals []string
		fs.EachRecord(func(r *kgo.Record) { vals = append(vals, string(r.Value)) })
		if len(vals) > 0 {
			fmt.Println("held " + strings.Join(vals, " "))
			select {} // hold the leases until SIGKILL
		}
	}
}

// shareProps: small internal topics, so a single node sets up at once.
var shareProps = []string{"group.initial.rebalance.delay.ms=0", "offsets.topic.num.partitions=4", "share.coordinator.state.topic.num.partitions=4"}

func setShareConfigs(t *testing.T, cl *kgo.Client, group string, kv ...string) {
	t.Helper()
	req := kmsg.NewPtrIncrementalAlterConfigsRequest()
	res := kmsg.NewIncrementalAlterConfigsRequestResource()
	res.ResourceType, res.ResourceName = kmsg.ConfigResourceTypeGroupConfig, group
	for i := 0; i < len(kv); i += 2 {
		c := kmsg.NewIncrementalAlterConfigsRequestResourceConfig()
		c.Name, c.Value = kv[i], kmsg.StringPtr(kv[i+1])
		res.Configs = append(res.Configs, c)
	}
	req.Resources = append(req.Resources, res)
	resp, err := req.RequestWith(ctxFor(t, 10*time.Second), cl)
	if err != nil {
		t.Fatal(err)
	}
	if err := kerr.ErrorForCode(resp.Resources[0].ErrorCode); err != nil {
		t.Fatalf("set group configs: %v", err)
	}
}

func produceValues(t *testing.T, cl *kgo.Client, topic string, from, to int) {
	t.Helper()
	ctx := ctxFor(t, 30*time.Second)
	var recs []*kgo.Record
	for i := from; i < to; i++ {
		recs = append(recs, &kgo.Record{Topic: topic, Value: []byte(strconv.Itoa(i))})
	}
	if err := cl.ProduceSync(ctx, recs...).FirstErr(); err != nil {
		t.Fatal(err)
	}
}

// shareTally counts what share consumers accepted.
type shareTally struct {
	mu       sync.Mutex
	accepted map[string]int
	counts   map[string]int32 // value → delivery count when accepted
	changed  chan struct{}
}

func newShareTally() *shareTally {
	return &shareTally{accepted: map[string]int{}, counts: map[string]int32{}, changed: make(chan struct{}, 1)}
}

func (s *shareTally) distinct() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return len(s.accepted)
}

// run consumes with one share consumer until ctx ends, accepting every
// record.
func (s *shareTally) run(ctx context.Context, t *testing.T, cl *kgo.Client) {
	for {
		fs := cl.PollFetches(ctx)
		if ctx.Err() != nil {
			return
		}
		fs.EachRecord(func(r *kgo.Record) {
			r.Ack(kgo.AckAccept)
			s.mu.Lock()
			s.accepted[string(r.Value)]++
			s.counts[string(r.Value)] = r.DeliveryCount()
			s.mu.Unlock()
		})
		select {
		case s.changed <- struct{}{}:
		default:
		}
	}
}

// waitDistinct waits until n distinct values were accepted.
func (s *shareTally) waitDistinct(t *testing.T, n int, d time.Duration) {
	t.Helper()
	deadline := time.NewTimer(d)
	defer deadline.Stop()
	for s.distinct() < n {
		select {
		case <-s.changed:
		case <-deadline.C:
			t.Fatalf("accepted %d distinct records of %d", s.distinct(), n)
		}
	}
}

// consumers starts n share consumers of group on topic, stopped at the
// end of the test (or by the returned stop, which flushes their acks).
func (s *shareTally) consumers(t *testing.T, b *broker, group, topic string, n int) (stop func()) {
	return s.consumersOf(t, b.client, group, topic, n)
}

// consumersOf is consumers with clients from newClient.
func (s *shareTally) consumersOf(t *testing.T, newClient func(...kgo.Opt) *kgo.Client, group, topic string, n int) (stop func()) {
	ctx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	var cls []*kgo.Client
	for i := 0; i < n; i++ {
		cl := newClient(kgo.ShareGroup(group), kgo.ConsumeTopics(topic), kgo.ShareMaxRecords(25), kgo.ClientID(fmt.Sprintf("share-%d", i)))
		cls = append(cls, cl)
		wg.Add(1)
		go func() { defer wg.Done(); s.run(ctx, t, cl) }()
	}
	var once sync.Once
	stop = func() {
		once.Do(func() {
			cancel()
			wg.Wait()
			for _, cl := range cls {
				fctx, fcancel := context.WithTimeout(context.Background(), 10*time.Second)
				cl.FlushAcks(fctx)
				fcancel()
				cl.Close()
			}
		})
	}
	t.Cleanup(stop)
	return stop
}

func TestShareConsumersAcknowledgeEveryRecordOnce(t *testing.T) {
	b := startBroker(t, brokerOpts{props: shareProps})
	adm := b.admin()
	if _, err := adm.CreateTopic(ctxFor(t, 10*time.Second), 1, 1, nil, "jobs"); err != nil {
		t.Fatal(err)
	}
	cl := b.client()
	setShareConfigs(t, cl, "workers", "share.auto.offset.reset", "earliest")
	const n = 2000
	produceValues(t, cl, "jobs", 0, n)
	tally := newShareTally()
	stop := tally.consumers(t, b, "workers", "jobs", 4)
	tally.waitDistinct(t, n, 60*time.Second)
	stop()
	for i := 0; i < n; i++ {
		if c := tally.accepted[strconv.Itoa(i)]; c != 1 {
			t.Errorf("record %d accepted %d times", i, c)
		}
	}
}

func TestShareConsumerKilledHoldingLeases(t *testing.T) {
	parallel(t)
	b := startBroker(t, brokerOpts{props: shareProps})
	if _, err := b.admin().CreateTopic(ctxFor(t, 10*time.Second), 1, 1, nil, "jobs"); err != nil {
		t.Fatal(err)
	}
	cl := b.client()
	setShareConfigs(t, cl, "workers", "share.auto.offset.reset", "earliest", "share.record.lock.duration.ms", "3000")
	const n = 500
	produceValues(t, cl, "jobs", 0, n)

	// A consumer process acquires 50 records and is SIGKILLed holding them.
	self, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	holder := exec.Command(self)
	holder.Env = append(os.Environ(), fmt.Sprintf("%s=%s workers jobs 50", shareHolderEnv, b.addr))
	out, err := holder.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	holder.Stderr = os.Stderr
	if err := holder.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { holder.Process.Kill(); holder.Wait() })
	lineCh := make(chan string, 1)
	go func() {
		sc := bufio.NewScanner(out)
		if sc.Scan() {
			lineCh <- sc.Text()
		}
		close(lineCh)
	}()
	var held []string
	select {
	case line, ok := <-lineCh:
		if !ok || !strings.HasPrefix(line, "held ") {
			t.Fatalf("the holder said %q", line)
		}
		held = strings.Fields(strings.TrimPrefix(line, "held "))
	case <-time.After(30 * time.Second):
		t.Fatal("the holder acquired nothing in 30s")
	}
	if err := holder.Process.Kill(); err != nil {
		t.Fatal(err)
	}
	holder.Wait()

	// Three consumers get everything: the held records once their locks
	// expire, delivered a second time.
	tally := newShareTally()
	stop := tally.consumers(t, b, "workers", "jobs", 3)
	tally.waitDistinct(t, n, 60*time.Second)
	stop()
	for i := 0; i < n; i++ {
		if c := tally.accepted[strconv.Itoa(i)]; c != 1 {
			t.Errorf("record %d accepted %d times", i, c)
		}
	}
	for _, v := range held {
		if c := tally.counts[v]; c != 2 {
			t.Errorf("held record %s accepted at delivery %d, want 2", v, c)
		}
	}
	if len(held) != 50 {
		t.Errorf("the holder held %d records, want 50", len(held))
	}
}

func TestShareStateSurvivesBrokerCrash(t *testing.T) {
	b := startBroker(t, brokerOpts{props: shareProps})
	b.keepAddr = true // the consumers reconnect to the same address
	if _, err := b.admin().CreateTopic(ctxFor(t, 10*time.Second), 1, 1, nil, "jobs"); err != nil {
		t.Fatal(err)
	}
	cl := b.client()
	setShareConfigs(t, cl, "workers", "share.auto.offset.reset", "earliest")
	const n = 1000
	produceValues(t, cl, "jobs", 0, n)

	// The first half, accepted and flushed, then mqd is SIGKILLed.
	first := newShareTally()
	stop := first.consumers(t, b, "workers", "jobs", 2)
	first.waitDistinct(t, n/2, 60*time.Second)
	stop()
	cl.Close()
	b.restart(true)

	// Consumers run while mqd is SIGKILLed again under them.
	second := newShareTally()
	stop = second.consumers(t, b, "workers", "jobs", 3)
	want := n - first.distinct()
	second.waitDistinct(t, min(want, want/2+1), 60*time.Second)
	b.restart(true)
	t.Cleanup(func() {
		if t.Failed() {
			t.Logf("mqd's log since the last start:\n%s", b.stderr.String())
		}
	})
	second.waitDistinct(t, want, 90*time.Second)
	stop()
	checkAcrossFault(t, n, first, second, "the first crash")
}

// checkAcrossFault checks records 0…n-1 after a fault: each accepted
// before it (by before) or after it (by after), none by both.
func checkAcrossFault(t *testing.T, n int, before, after *shareTally, fault string) {
	t.Helper()
	for i := 0; i < n; i++ {
		v := strconv.Itoa(i)
		f, s := before.accepted[v], after.accepted[v]
		switch {
		case f+s == 0:
			t.Errorf("record %d lost", i)
		case f > 0 && s > 0:
			t.Errorf("record %d, accepted and flushed before %s, delivered again", i, fault)
		}
	}
}

// TestShareStateSurvivesLeaderFailover: the share-partition's leader is
// SIGKILLed; its successor loads the state from __share_group_state, led
// by a third node, so both the writes before and the load and writes
// after go through another node (the remote path of share_store.go).
func TestShareStateSurvivesLeaderFailover(t *testing.T) {
	parallel(t)
	props := append(append([]string{}, fastFailover...), "offsets.topic.num.partitions=4", "share.coordinator.state.topic.num.partitions=1")
	c := startCluster(t, 3, clusterOpts{props: props})
	cl := c.client()
	setShareConfigs(t, cl, "workers", "share.auto.offset.reset", "earliest", "share.record.lock.duration.ms", "5000")
	// A first share fetch creates __share_group_state; its leader is S.
	stateLeader := warmShareState(t, c, "workers", 3)
	var others []int32
	for id := int32(1); id <= 3; id++ {
		if id != stateLeader {
			others = append(others, id)
		}
	}
	c.createTopicOn("jobs", [][]int32{{others[0], others[1], stateLeader}}, nil)
	const n = 1000
	produceValues(t, cl, "jobs", 0, n)

	first := newShareTally()
	stop := first.consumersOf(t, c.client, "workers", "jobs", 2)
	first.waitDistinct(t, n/3, 60*time.Second)
	stop()
	c.node(others[0]).kill()
	clusterWait.For(t, fmt.Sprintf("node %d to lead jobs", others[1]), func() (bool, string) {
		ps := c.node(others[1]).partitions("jobs")
		return len(ps) == 1 && ps[0].leader == others[1], fmt.Sprintf("jobs partitions %v", ps)
	})

	second := newShareTally()
	stop = second.consumersOf(t, c.client, "workers", "jobs", 3)
	second.waitDistinct(t, n-first.distinct(), 90*time.Second)
	stop()
	checkAcrossFault(t, n, first, second, "the failover")
}

// TestShareDeadLettersAndReplay: records rejected, or released on their
// last delivery, land in the dead-letter topic once, with the documented
// headers; mqctl queue shows them and dlq replay puts them back.
func TestShareDeadLettersAndReplay(t *testing.T) {
	b := startBroker(t, brokerOpts{props: shareProps})
	if _, err := b.admin().CreateTopic(ctxFor(t, 10*time.Second), 1, 1, nil, "jobs"); err != nil {
		t.Fatal(err)
	}
	cl := b.client()
	setShareConfigs(t, cl, "workers", "share.auto.offset.reset", "earliest", "share.delivery.count.limit", "3",
		"errors.deadletterqueue.topic.name", "jobs.dlq")
	const n = 40
	producing := time.Now()
	produceValues(t, cl, "jobs", 0, n)
	produced := time.Now()

	// Values ≡ 0 mod 5 are rejected, ≡ 1 released every time; the rest
	// accepted.
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	consumer := b.client(kgo.ShareGroup("workers"), kgo.ConsumeTopics("jobs"))
	go func() {
		for ctx.Err() == nil {
			fs := consumer.PollFetches(ctx)
			fs.EachRecord(func(r *kgo.Record) {
				v, _ := strconv.Atoi(string(r.Value))
				switch {
				case v%5 == 0:
					r.Ack(kgo.AckReject)
				case v%5 == 1:
					r.Ack(kgo.AckRelease)
				default:
					r.Ack(kgo.AckAccept)
				}
			})
		}
	}()
	type described struct {
		Group      string `json:"group"`
		Partitions []struct {
			StartOffset int64 `json:"start_offset"`
			InFlight    int64 `json:"in_flight"`
		} `json:"partitions"`
		DeadLetterTopic string `json:"dead_letter_topic"`
		DeadLetters     int64  `json:"dead_letters"`
		Members         []any  `json:"members"`
	}
	var last string
	mqtest.Wait{Timeout: 60 * time.Second}.For(t, "the queue described with its dead letters", func() (bool, string) {
		r := runTool(t, 30*time.Second, "", "mqctl", "-b", b.addr, "queue", "describe", "-o", "json", "workers")
		last = r.stdout + r.stderr
		var ds []described
		if r.code != 0 || json.Unmarshal([]byte(r.stdout), &ds) != nil || len(ds) != 1 || len(ds[0].Partitions) != 1 {
			return false, last
		}
		d := ds[0]
		return d.Partitions[0].StartOffset == n && d.DeadLetters == 16 && d.DeadLetterTopic == "jobs.dlq" && len(d.Members) == 1, last
	})
	list := runTool(t, 30*time.Second, "", "mqctl", "-b", b.addr, "queue", "list")
	if list.code != 0 || !strings.Contains(list.stdout, "workers") {
		t.Fatalf("queue list: %d %s %s", list.code, list.stdout, list.stderr)
	}

	// The dead-letter topic holds each failed record once, as it was, with
	// the source and the reason.
	dl := b.client(kgo.ConsumeTopics("jobs.dlq"), kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()))
	seen := map[string]bool{}
	dctx := ctxFor(t, 30*time.Second)
	for len(seen) < 16 {
		fs := dl.PollFetches(dctx)
		if dctx.Err() != nil {
			t.Fatalf("read %d dead letters of 16", len(seen))
		}
		fs.EachRecord(func(r *kgo.Record) {
			h := map[string]string{}
			for _, hd := range r.Headers {
				h[hd.Key] = string(hd.Value)
			}
			v, _ := strconv.Atoi(string(r.Value))
			wantCount, wantErr := "1", "rejected by the consumer"
			if v%5 == 1 {
				wantCount, wantErr = "3", "released at the delivery attempt limit"
			}
			if seen[string(r.Value)] || v%5 > 1 || h["mq.dlq.source.topic"] != "jobs" || h["mq.dlq.source.partition"] != "0" ||
				h["mq.dlq.source.offset"] != string(r.Value) || h["mq.dlq.group"] != "workers" ||
				h["mq.dlq.delivery.count"] != wantCount || h["mq.dlq.error"] != wantErr {
				t.Errorf("dead letter %s (again: %v): headers %v", r.Value, seen[string(r.Value)], h)
			}
			seen[string(r.Value)] = true
		})
	}

	// Replay them: back on jobs, as they were.
	cancel()
	replay := runTool(t, 30*time.Second, "", "mqctl", "-b", b.addr, "queue", "dlq", "replay", "--group", "workers", "-o", "json")
	if replay.code != 0 || !strings.Contains(replay.stdout, `"replayed":16`) {
		t.Fatalf("dlq replay: %d %s %s", replay.code, replay.stdout, replay.stderr)
	}
	ends, err := b.admin().ListEndOffsets(ctxFor(t, 10*time.Second), "jobs")
	if err != nil {
		t.Fatal(err)
	}
	if o, _ := ends.Lookup("jobs", 0); o.Offset != n+16 {
		t.Fatalf("jobs ends at %d after the replay, want %d", o.Offset, n+16)
	}
	back := b.client(kgo.ConsumePartitions(map[string]map[int32]kgo.Offset{"jobs": {0: kgo.NewOffset().At(n)}}))
	replayed := map[string]bool{}
	bctx := ctxFor(t, 30*time.Second)
	for len(replayed) < 16 {
		fs := back.PollFetches(bctx)
		if bctx.Err() != nil {
			t.Fatalf("read %d replayed records of 16", len(replayed))
		}
		fs.EachRecord(func(r *kgo.Record) {
			if !seen[string(r.Value)] || replayed[string(r.Value)] || len(r.Headers) != 0 {
				t.Errorf("replayed record %s (a dead letter: %v, twice: %v) with headers %v", r.Value, seen[string(r.Value)], replayed[string(r.Value)], r.Headers)
			}
			replayed[string(r.Value)] = true
		})
	}

	// With the consumer gone (its share session closed), the replayed
	// records wait at the share-partition's start, available, and the
	// oldest of them is as old as the record it was.
	consumer.Close()
	var q []struct {
		Partitions []struct {
			StartOffset  int64 `json:"start_offset"`
			Available    int64 `json:"available"`
			Acquired     int64 `json:"acquired"`
			OldestMillis int64 `json:"oldest_unacked_ms"`
		} `json:"partitions"`
	}
	mqtest.Wait{Timeout: 30 * time.Second}.For(t, "the replayed records available at the start", func() (bool, string) {
		asked := time.Now()
		r := runTool(t, 30*time.Second, "", "mqctl", "-b", b.addr, "queue", "describe", "-o", "json", "workers")
		if r.code != 0 || json.Unmarshal([]byte(r.stdout), &q) != nil || len(q) != 1 || len(q[0].Partitions) != 1 {
			return false, r.stdout + r.stderr
		}
		p := q[0].Partitions[0]
		oldest := time.Duration(p.OldestMillis) * time.Millisecond
		if p.StartOffset != n || p.Available != 16 || p.Acquired != 0 {
			return false, r.stdout
		}
		if low, high := asked.Sub(produced), time.Since(producing); oldest < low-time.Millisecond || oldest > high+time.Millisecond {
			t.Fatalf("oldest unacknowledged is %v old; its record was produced between %v and %v ago", oldest, low, high)
		}
		return true, ""
	})

	noGroup := runTool(t, 30*time.Second, "", "mqctl", "-b", b.addr, "queue", "dlq", "replay", "--group", "nobody")
	if noGroup.code != 2 || !strings.Contains(noGroup.stderr, "no dead-letter topic") {
		t.Fatalf("replay of a group without a dead-letter topic: %d %q", noGroup.code, noGroup.stderr)
	}
}

// TestShareGroupOffsetsAcrossNodes: kadm's AlterShareGroupOffsets and
// DeleteShareGroupOffsets go to the group's coordinator, which passes
// them to the node leading the partition (another one here).
func TestShareGroupOffsetsAcrossNodes(t *testing.T) {
	parallel(t)
	c := startCluster(t, 3, clusterOpts{props: []string{"group.initial.rebalance.delay.ms=0", "offsets.topic.num.partitions=1", "share.coordinator.state.topic.num.partitions=2"}})
	cl := c.client()
	adm := c.admin()
	setShareConfigs(t, cl, "workers", "share.auto.offset.reset", "earliest")
	var coord int32 = -1
	clusterWait.For(t, "the coordinator of workers", func() (bool, string) {
		r, ok := adm.FindGroupCoordinators(ctxFor(t, 10*time.Second), "workers")["workers"]
		if !ok || r.Err != nil {
			return false, fmt.Sprint(r)
		}
		coord = r.NodeID
		return coord > 0, fmt.Sprint(r)
	})
	var others []int32
	for id := int32(1); id <= 3; id++ {
		if id != coord {
			others = append(others, id)
		}
	}
	c.createTopicOn("jobs", [][]int32{{others[0], coord, others[1]}}, nil)
	const n = 20
	produceValues(t, cl, "jobs", 0, n)
	consumeAll := func(want int) *shareTally {
		t.Helper()
		tally := newShareTally()
		stop := tally.consumersOf(t, c.client, "workers", "jobs", 1)
		tally.waitDistinct(t, want, 60*time.Second)
		stop()
		return tally
	}
	consumeAll(n)
	ctx := ctxFor(t, 30*time.Second)
	var lastErr error
	mqtest.Wait{Timeout: 30 * time.Second}.For(t, "the share group's offsets altered", func() (bool, string) { // the consumer's leave reaches the coordinator
		res, err := adm.AlterShareGroupOffsets(ctx, "workers", kadm.Offsets{"jobs": {0: {Topic: "jobs", Partition: 0, At: 12}}})
		if err == nil {
			err = res.Error()
		}
		lastErr = err
		return err == nil, fmt.Sprint(lastErr)
	})
	after := consumeAll(n - 12)
	for i := 0; i < n; i++ {
		if got, want := after.accepted[strconv.Itoa(i)], map[bool]int{true: 1, false: 0}[i >= 12]; got != want {
			t.Errorf("after the alter record %d accepted %d times, want %d", i, got, want)
		}
	}
	mqtest.Wait{Timeout: 30 * time.Second}.For(t, "the share group's offsets deleted", func() (bool, string) {
		res, err := adm.DeleteShareGroupOffsets(ctx, "workers", "jobs")
		if err == nil {
			err = res.Error()
		}
		return err == nil, fmt.Sprint(err)
	})
	consumeAll(n)
}

// warmShareState has share group consume one record of a new topic
// "warmup" (replication factor rf), which creates __share_group_state
// with one partition (share.coordinator.state.topic.num.partitions=1),
// and returns that partition's leader.
func warmShareState(t *testing.T, c *cluster, group string, rf int16) int32 {
	t.Helper()
	c.createTopic("warmup", 1, rf, nil)
	produceValues(t, c.client(), "warmup", 0, 1)
	warm := newShareTally()
	stop := warm.consumersOf(t, c.client, group, "warmup", 1)
	warm.waitDistinct(t, 1, 60*time.Second)
	stop()
	var leader int32 = -1
	clusterWait.For(t, "a leader of __share_group_state", func() (bool, string) {
		ps := c.nodes[0].partitions("__share_group_state")
		if len(ps) != 1 || ps[0].leader < 0 {
			return false, fmt.Sprintf("state topic partitions %v", ps)
		}
		leader = ps[0].leader
		return true, ""
	})
	return leader
}
