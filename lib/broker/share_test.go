package broker

import (
	"context"
	"errors"
	"fmt"
	"net"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/mqproject/mq/lib/config"
	"github.com/mqproject/mq/lib/controller"
	"github.com/mqproject/mq/lib/queue"
	"github.com/mqproject/mq/lib/server"
)

// setGroupConfigs sets share group configs through IncrementalAlterConfigs
// on the GROUP resource, as Kafka's tools do.
func setGroupConfigs(t *testing.T, cl *kgo.Client, group string, kv ...string) {
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
	resp, err := req.RequestWith(context.Background(), cl)
	if err != nil {
		t.Fatal(err)
	}
	if err := kerr.ErrorForCode(resp.Resources[0].ErrorCode); err != nil {
		t.Fatalf("alter group configs: %v (%s)", err, optString(resp.Resources[0].ErrorMessage))
	}
}

func TestGroupConfigsValidatedAndDescribed(t *testing.T) {
	tb := startBroker(t, "", nil)
	addr := serve(t, tb)
	cl := newClient(t, addr)
	setGroupConfigs(t, cl, "g", "share.auto.offset.reset", "earliest")
	req := kmsg.NewPtrIncrementalAlterConfigsRequest()
	res := kmsg.NewIncrementalAlterConfigsRequestResource()
	res.ResourceType, res.ResourceName = kmsg.ConfigResourceTypeGroupConfig, "g"
	c := kmsg.NewIncrementalAlterConfigsRequestResourceConfig()
	c.Name, c.Value = "share.auto.offset.reset", kmsg.StringPtr("sometimes")
	res.Configs = append(res.Configs, c)
	req.Resources = append(req.Resources, res)
	resp, err := req.RequestWith(context.Background(), cl)
	if err != nil || resp.Resources[0].ErrorCode != kerr.InvalidConfig.Code {
		t.Fatalf("bad value: %v %+v", err, resp)
	}
	dreq := kmsg.NewPtrDescribeConfigsRequest()
	dres := kmsg.NewDescribeConfigsRequestResource()
	dres.ResourceType, dres.ResourceName = kmsg.ConfigResourceTypeGroupConfig, "g"
	dreq.Resources = append(dreq.Resources, dres)
	dresp, err := dreq.RequestWith(context.Background(), cl)
	if err != nil {
		t.Fatal(err)
	}
	got := map[string]string{}
	for _, c := range dresp.Resources[0].Configs {
		got[c.Name] = optString(c.Value)
	}
	if got["share.auto.offset.reset"] != "earliest" || got["share.record.lock.duration.ms"] != "30000" {
		t.Fatalf("described %v", got)
	}
}

// shareConsume runs consumers share consumers of group on topic until
// they have accepted want records between them, and returns how often
// each value was delivered.
func shareConsume(t *testing.T, addr, group, topic string, consumers, want int) map[string]int {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	pollCtx, stopPolls := context.WithCancel(ctx)
	defer stopPolls()
	var mu sync.Mutex
	seen := map[string]int{}
	total := 0
	done := make(chan struct{})
	var wg sync.WaitGroup
	var clients []*kgo.Client
	defer func() {
		for _, cl := range clients {
			cl.Close() // leaves the group
		}
	}()
	for i := range consumers {
		cl := newClient(t, addr, kgo.ShareGroup(group), kgo.ShareMaxRecords(10), kgo.ConsumeTopics(topic), kgo.ClientID(fmt.Sprintf("c%d", i)))
		clients = append(clients, cl)
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				fs := cl.PollFetches(pollCtx)
				if pollCtx.Err() != nil {
					return
				}
				fs.EachRecord(func(r *kgo.Record) {
					r.Ack(kgo.AckAccept)
					mu.Lock()
					seen[string(r.Value)]++
					total++
					if total == want {
						close(done)
						stopPolls()
					}
					mu.Unlock()
				})
				if pollCtx.Err() != nil {
					if err := cl.FlushAcks(ctx); err != nil {
						t.Errorf("flush acks: %v", err)
					}
					return
				}
			}
		}()
	}
	select {
	case <-done:
	case <-ctx.Done():
		mu.Lock()
		t.Errorf("consumed %d of %d records", total, want)
		mu.Unlock()
	}
	wg.Wait()
	return seen
}

// startShareQueue starts a broker with one-partition internal topics and
// topic q of one partition, and sets share group g's configs (key,
// value, …); it returns the broker, its address, q's id and a client.
func startShareQueue(t *testing.T, configs ...string) (*testBroker, string, controller.TopicID, *kgo.Client) {
	t.Helper()
	tb := startBroker(t, "", func(s *config.Broker) { s.OffsetsTopicNumPartitions = 1; s.ShareStateTopicPartitions = 1 })
	addr := serve(t, tb)
	id := tb.createTopic(t, "q", 1, nil)
	cl := newClient(t, addr)
	setGroupConfigs(t, cl, "g", configs...)
	return tb, addr, id, cl
}

func TestShareGroupConsumersShareAPartition(t *testing.T) {
	tb, addr, _, _ := startShareQueue(t, "share.auto.offset.reset", "earliest")
	const n = 300
	produceN(t, addr, "q", n)
	seen := shareConsume(t, addr, "g", "q", 3, n)
	for i := range n {
		if seen[strconv.Itoa(i)] != 1 {
			t.Errorf("record %d delivered %d times", i, seen[strconv.Itoa(i)])
		}
	}
	// The share-partition's start moved past everything acknowledged.
	tb.waitFor(t, "start offset at the end", func() bool {
		return shareStart(t, tb, queue.Key{Group: "g", TopicID: tb.ctrl.Image().Topics["q"].ID, Partition: 0}) == n
	})
}

// shareStart is the start offset of a share-partition's durable state,
// -1 when it has none.
func shareStart(t *testing.T, tb *testBroker, k queue.Key) int64 {
	t.Helper()
	snap, found, err := tb.shares.Load(ctxTimeout(t, 10*time.Second), k)
	if err != nil {
		t.Fatal(err)
	}
	if !found {
		return -1
	}
	return snap.Start
}

// rawShareFetch acquires records for member through a ShareFetch of its
// own, outside any kgo consumer: a member that then goes silent.
func rawShareFetch(t *testing.T, cl *kgo.Client, group, member string, topicID [16]byte, maxRecords int32) []kmsg.ShareFetchResponseTopicPartitionAcquiredRecord {
	t.Helper()
	req := kmsg.NewPtrShareFetchRequest()
	req.GroupID, req.MemberID = &group, &member
	req.MaxRecords, req.BatchSize, req.MaxWaitMillis = maxRecords, maxRecords, 1000
	req.Topics = []kmsg.ShareFetchRequestTopic{{TopicID: topicID, Partitions: []kmsg.ShareFetchRequestTopicPartition{{Partition: 0, PartitionMaxBytes: 1 << 20}}}}
	resp, err := req.RequestWith(ctxTimeout(t, 10*time.Second), cl.Broker(1))
	if err != nil {
		t.Fatal(err)
	}
	if err := kerr.ErrorForCode(resp.ErrorCode); err != nil {
		t.Fatalf("share fetch: %v", err)
	}
	var out []kmsg.ShareFetchResponseTopicPartitionAcquiredRecord
	for _, rt := range resp.Topics {
		for _, rp := range rt.Partitions {
			if err := kerr.ErrorForCode(rp.ErrorCode); err != nil {
				t.Fatalf("share fetch partition: %v", err)
			}
			out = append(out, rp.AcquiredRecords...)
		}
	}
	return out
}

func TestShareLocksOfASilentMemberExpire(t *testing.T) {
	_, addr, id, cl := startShareQueue(t, "share.auto.offset.reset", "earliest", "share.record.lock.duration.ms", "1000")
	const n = 50
	produceN(t, addr, "q", n)
	got := rawShareFetch(t, cl, "g", "silent", id, 20)
	if len(got) != 1 || got[0].FirstOffset != 0 || got[0].LastOffset != 19 || got[0].DeliveryCount != 1 {
		t.Fatalf("acquired %+v, want 0-19 once", got)
	}
	// A consumer gets the other 30 at once and, after the lock ends, the
	// 20 the silent member held, delivered a second time.
	seen := map[string]int{}
	counts := map[int32]int{}
	cl2 := newClient(t, addr, kgo.ShareGroup("g"), kgo.ConsumeTopics("q"))
	ctx := ctxTimeout(t, 30*time.Second)
	for len(seen) < n {
		fs := cl2.PollFetches(ctx)
		if ctx.Err() != nil {
			t.Fatalf("consumed %d of %d", len(seen), n)
		}
		fs.EachRecord(func(r *kgo.Record) {
			r.Ack(kgo.AckAccept)
			seen[string(r.Value)]++
			counts[r.DeliveryCount()]++
		})
	}
	if err := cl2.FlushAcks(ctx); err != nil {
		t.Fatal(err)
	}
	if counts[1] != 30 || counts[2] != 20 {
		t.Fatalf("delivery counts %v, want 30 first deliveries and 20 second ones", counts)
	}
	for v, c := range seen {
		if c != 1 {
			t.Errorf("record %s accepted %d times", v, c)
		}
	}
}

func TestShareStateSurvivesARestart(t *testing.T) {
	dir := t.TempDir()
	mod := func(s *config.Broker) { s.OffsetsTopicNumPartitions = 1; s.ShareStateTopicPartitions = 1 }
	tb := startBroker(t, dir, mod)
	addr := serve(t, tb)
	id := tb.createTopic(t, "q", 1, nil)
	cl := newClient(t, addr)
	setGroupConfigs(t, cl, "g", "share.auto.offset.reset", "earliest", "share.record.lock.duration.ms", "60000")
	const n = 100
	produceN(t, addr, "q", n)
	// 40 accepted, 20 held by a member when the broker stops.
	accepted := map[string]bool{}
	c1 := newClient(t, addr, kgo.ShareGroup("g"), kgo.ShareMaxRecords(40), kgo.ShareMaxRecordsStrict(), kgo.ConsumeTopics("q"))
	ctx := ctxTimeout(t, 30*time.Second)
	for len(accepted) < 40 {
		fs := c1.PollFetches(ctx)
		if ctx.Err() != nil {
			t.Fatal("first consumer timed out")
		}
		fs.EachRecord(func(r *kgo.Record) {
			if len(accepted) < 40 {
				r.Ack(kgo.AckAccept)
				accepted[string(r.Value)] = true
			} else {
				r.Ack(kgo.AckRelease)
			}
		})
	}
	if err := c1.FlushAcks(ctx); err != nil {
		t.Fatal(err)
	}
	c1.Close()
	held := rawShareFetch(t, cl, "g", "held", id, 20)
	if len(held) == 0 {
		t.Fatal("the silent member acquired nothing")
	}
	cl.Close()
	if err := tb.Close(); err != nil {
		t.Fatal(err)
	}
	tb.ctrl.Close()

	tb = startBroker(t, dir, mod)
	addr = serve(t, tb)
	rest := map[string]int{}
	c2 := newClient(t, addr, kgo.ShareGroup("g"), kgo.ConsumeTopics("q"))
	ctx = ctxTimeout(t, 30*time.Second)
	for len(rest) < n-40 {
		fs := c2.PollFetches(ctx)
		if ctx.Err() != nil {
			t.Fatalf("after the restart consumed %d of %d", len(rest), n-40)
		}
		fs.EachRecord(func(r *kgo.Record) {
			r.Ack(kgo.AckAccept)
			rest[string(r.Value)]++
			if accepted[string(r.Value)] {
				t.Errorf("record %s accepted before the restart delivered again", r.Value)
			}
		})
	}
	if err := c2.FlushAcks(ctx); err != nil {
		t.Fatal(err)
	}
	for v, c := range rest {
		if c != 1 {
			t.Errorf("record %s delivered %d times after the restart", v, c)
		}
	}
}

func TestShareDeadLetters(t *testing.T) {
	tb, addr, id, _ := startShareQueue(t, "share.auto.offset.reset", "earliest", "share.delivery.count.limit", "2",
		"errors.deadletterqueue.topic.name", "q.dlq")
	const n = 30
	produceN(t, addr, "q", n)
	// Values ending in 0 are rejected, in 1 released every time (so they
	// run out of attempts), the rest accepted.
	c := newClient(t, addr, kgo.ShareGroup("g"), kgo.ConsumeTopics("q"))
	ctx := ctxTimeout(t, 30*time.Second)
	key := queue.Key{Group: "g", TopicID: id, Partition: 0}
	for {
		if shareStart(t, tb, key) == n {
			break
		}
		fs := c.PollFetches(ctxTimeout(t, time.Second))
		if ctx.Err() != nil {
			t.Fatal("the share-partition never finished")
		}
		fs.EachRecord(func(r *kgo.Record) {
			v, _ := strconv.Atoi(string(r.Value))
			switch v % 10 {
			case 0:
				r.Ack(kgo.AckReject)
			case 1:
				r.Ack(kgo.AckRelease)
			default:
				r.Ack(kgo.AckAccept)
			}
		})
		c.FlushAcks(ctx)
	}
	recs := consume(t, addr, "q.dlq", 6)
	if hw := tb.parts.Lookup("q.dlq", 0).HighWatermark(); hw != 6 || len(recs) != 6 {
		t.Fatalf("dead-letter topic holds %d records (%d read), want 6", hw, len(recs))
	}
	for _, r := range recs {
		h := map[string]string{}
		for _, hd := range r.Headers {
			h[hd.Key] = string(hd.Value)
		}
		v, _ := strconv.Atoi(string(r.Value))
		wantCount, wantErr := "1", "rejected by the consumer"
		if v%10 == 1 {
			wantCount, wantErr = "2", "released at the delivery attempt limit"
		}
		if v%10 > 1 || h["mq.dlq.source.topic"] != "q" || h["mq.dlq.source.partition"] != "0" || h["mq.dlq.source.offset"] != string(r.Value) ||
			h["mq.dlq.group"] != "g" || h["mq.dlq.delivery.count"] != wantCount || h["mq.dlq.error"] != wantErr {
			t.Errorf("dead letter %s: headers %v", r.Value, h)
		}
	}
}

// BenchmarkShareConsumers measures share-group throughput on one
// partition with 1, 4 and 16 consumers accepting every record: b.N
// records per run, produced before the consumers start.
func BenchmarkShareConsumers(b *testing.B) {
	for _, consumers := range []int{1, 4, 16} {
		b.Run(fmt.Sprintf("consumers=%d", consumers), func(b *testing.B) {
			tb := startBroker(b, "", func(s *config.Broker) { s.OffsetsTopicNumPartitions = 1; s.ShareStateTopicPartitions = 1 })
			addr := serveTB(b, tb)
			tb.createTopic(b, "q", 1, nil)
			admin, err := kgo.NewClient(kgo.SeedBrokers(addr))
			if err != nil {
				b.Fatal(err)
			}
			defer admin.Close()
			group := "bench"
			req := kmsg.NewPtrIncrementalAlterConfigsRequest()
			res := kmsg.NewIncrementalAlterConfigsRequestResource()
			res.ResourceType, res.ResourceName = kmsg.ConfigResourceTypeGroupConfig, group
			c := kmsg.NewIncrementalAlterConfigsRequestResourceConfig()
			c.Name, c.Value = "share.auto.offset.reset", kmsg.StringPtr("earliest")
			res.Configs = append(res.Configs, c)
			req.Resources = append(req.Resources, res)
			if _, err := req.RequestWith(context.Background(), admin); err != nil {
				b.Fatal(err)
			}
			ctx := context.Background()
			value := make([]byte, 100)
			for i := 0; i < b.N; i++ {
				admin.Produce(ctx, &kgo.Record{Topic: "q", Value: value}, nil)
			}
			if err := admin.Flush(ctx); err != nil {
				b.Fatal(err)
			}
			b.ResetTimer()
			var mu sync.Mutex
			total := 0
			done := make(chan struct{})
			pollCtx, cancel := context.WithCancel(ctx)
			var wg sync.WaitGroup
			for i := 0; i < consumers; i++ {
				cl, err := kgo.NewClient(kgo.SeedBrokers(addr), kgo.ShareGroup(group), kgo.ConsumeTopics("q"))
				if err != nil {
					b.Fatal(err)
				}
				wg.Add(1)
				go func() {
					defer wg.Done()
					defer cl.Close()
					for pollCtx.Err() == nil {
						fs := cl.PollFetches(pollCtx)
						n := fs.NumRecords()
						fs.EachRecord(func(r *kgo.Record) { r.Ack(kgo.AckAccept) })
						mu.Lock()
						total += n
						if total >= b.N && n > 0 {
							select {
							case <-done:
							default:
								close(done)
							}
						}
						mu.Unlock()
					}
				}()
			}
			<-done
			b.StopTimer()
			cancel()
			wg.Wait()
			b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "records/s")
		})
	}
}

// serveTB is serve for benchmarks.
func serveTB(b *testing.B, tb *testBroker) string {
	b.Helper()
	srv, err := server.New(server.Config{Listeners: []string{"tcp://127.0.0.1:0"}}, tb.Broker)
	if err != nil {
		b.Fatal(err)
	}
	if err := srv.Start(); err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { srv.Close() })
	addr := strings.TrimPrefix(srv.Addrs()[0], "tcp://")
	_, portStr, _ := net.SplitHostPort(addr)
	port, _ := strconv.Atoi(portStr)
	tb.register(b, int32(port))
	return addr
}

func TestShareRequestsRefuseBadInput(t *testing.T) {
	_, addr, id, cl := startShareQueue(t, "share.auto.offset.reset", "earliest")
	produceN(t, addr, "q", 5)
	br := cl.Broker(1)
	ctx := ctxTimeout(t, 20*time.Second)
	fetch := func(group, member *string, epoch int32, acks []kmsg.ShareFetchRequestTopicPartitionAcknowledgementBatch) *kmsg.ShareFetchResponse {
		t.Helper()
		req := kmsg.NewPtrShareFetchRequest()
		req.GroupID, req.MemberID, req.ShareSessionEpoch, req.MaxRecords = group, member, epoch, 10
		req.Topics = []kmsg.ShareFetchRequestTopic{{TopicID: id, Partitions: []kmsg.ShareFetchRequestTopicPartition{{Partition: 0, AcknowledgementBatches: acks}}}}
		resp, err := req.RequestWith(ctx, br)
		if err != nil {
			t.Fatal(err)
		}
		return resp
	}
	g, m := kmsg.StringPtr("g"), kmsg.StringPtr("m")
	if r := fetch(nil, m, 0, nil); r.ErrorCode != kerr.InvalidRequest.Code {
		t.Errorf("no group: %v", kerr.ErrorForCode(r.ErrorCode))
	}
	if r := fetch(g, m, 3, nil); r.ErrorCode != kerr.ShareSessionNotFound.Code {
		t.Errorf("no session: %v", kerr.ErrorForCode(r.ErrorCode))
	}
	if r := fetch(g, m, 0, nil); r.ErrorCode != 0 || len(r.Topics) != 1 || len(r.Topics[0].Partitions[0].AcquiredRecords) != 1 {
		t.Fatalf("open a session: %+v", r)
	}
	if r := fetch(g, m, 5, nil); r.ErrorCode != kerr.InvalidShareSessionEpoch.Code {
		t.Errorf("wrong epoch: %v", kerr.ErrorForCode(r.ErrorCode))
	}
	// Acknowledging offsets the member does not hold, or types that do not
	// fit the range, is refused per partition; the records stay acquired.
	r := fetch(g, m, 1, []kmsg.ShareFetchRequestTopicPartitionAcknowledgementBatch{{FirstOffset: 0, LastOffset: 9, AcknowledgeTypes: []int8{1}}})
	if code := r.Topics[0].Partitions[0].AcknowledgeErrorCode; code != kerr.InvalidRecordState.Code {
		t.Errorf("ack beyond what is held: %v", kerr.ErrorForCode(code))
	}
	r = fetch(g, m, 2, []kmsg.ShareFetchRequestTopicPartitionAcknowledgementBatch{{FirstOffset: 0, LastOffset: 2, AcknowledgeTypes: []int8{1, 1}}})
	if code := r.Topics[0].Partitions[0].AcknowledgeErrorCode; code != kerr.InvalidRequest.Code {
		t.Errorf("two types for three offsets: %v", kerr.ErrorForCode(code))
	}
	ack := kmsg.NewPtrShareAcknowledgeRequest()
	ack.GroupID, ack.MemberID = g, m
	if resp, err := ack.RequestWith(ctx, br); err != nil || resp.ErrorCode != kerr.InvalidShareSessionEpoch.Code {
		t.Errorf("acknowledge at epoch 0: %v %v", err, resp)
	}
	// Heartbeats: a member must join with topics, and an unknown member or
	// a stale epoch is refused.
	hb := func(member string, epoch int32, topics []string) int16 {
		req := kmsg.NewPtrShareGroupHeartbeatRequest()
		req.GroupID, req.MemberID, req.MemberEpoch, req.SubscribedTopicNames = "g", member, epoch, topics
		resp, err := req.RequestWith(ctx, cl)
		if err != nil {
			t.Fatal(err)
		}
		return resp.ErrorCode
	}
	if code := hb("a", 0, nil); code != kerr.InvalidRequest.Code {
		t.Errorf("join without topics: %v", kerr.ErrorForCode(code))
	}
	if code := hb("a", 4, nil); code != kerr.UnknownMemberID.Code {
		t.Errorf("unknown member: %v", kerr.ErrorForCode(code))
	}
	if code := hb("a", 0, []string{"q"}); code != 0 {
		t.Errorf("join: %v", kerr.ErrorForCode(code))
	}
	if code := hb("a", 9, nil); code != kerr.FencedMemberEpoch.Code {
		t.Errorf("stale epoch: %v", kerr.ErrorForCode(code))
	}
}

func TestShareGroupOffsetsAlteredAndDeleted(t *testing.T) {
	tb, addr, _, cl := startShareQueue(t, "share.auto.offset.reset", "earliest")
	const n = 20
	produceN(t, addr, "q", n)
	seen := shareConsume(t, addr, "g", "q", 1, n)
	if len(seen) != n {
		t.Fatalf("consumed %d of %d", len(seen), n)
	}
	adm := kadm.NewClient(cl)
	ctx := ctxTimeout(t, 20*time.Second)
	startOf := func() int64 {
		t.Helper()
		offs, err := adm.DescribeShareGroupOffsets(ctx, "g")
		if err != nil {
			t.Fatal(err)
		}
		o, ok := offs["g"].Offsets.Lookup("q", 0)
		if !ok || o.Err != nil {
			t.Fatalf("describe share offsets: %+v", offs)
		}
		return o.StartOffset
	}
	if s := startOf(); s != n {
		t.Fatalf("start offset %d after consuming everything, want %d", s, n)
	}
	// A live member blocks changes.
	live := newClient(t, addr, kgo.ShareGroup("g"), kgo.ConsumeTopics("q"))
	tb.waitFor(t, "a member", func() bool {
		ds, err := adm.DescribeShareGroups(ctx, "g")
		return err == nil && len(ds["g"].Members) == 1
	})
	res, err := adm.AlterShareGroupOffsets(ctx, "g", kadm.Offsets{"q": {0: {Topic: "q", Partition: 0, At: 12}}})
	if err == nil {
		err = res.Error()
	}
	if !errors.Is(err, kerr.NonEmptyGroup) {
		t.Fatalf("altered the offsets of a group with a member: %v, want NON_EMPTY_GROUP", err)
	}
	live.Close()
	tb.waitFor(t, "the member gone", func() bool {
		ds, err := adm.DescribeShareGroups(ctx, "g")
		return err == nil && len(ds["g"].Members) == 0
	})
	res, err = adm.AlterShareGroupOffsets(ctx, "g", kadm.Offsets{"q": {0: {Topic: "q", Partition: 0, At: 12}}})
	if err != nil || res.Error() != nil {
		t.Fatalf("alter: %v %v", err, res.Error())
	}
	if s := startOf(); s != 12 {
		t.Fatalf("start offset %d after the alter, want 12", s)
	}
	if again := shareConsume(t, addr, "g", "q", 1, n-12); len(again) != n-12 || again["12"] != 1 || again["11"] != 0 {
		t.Fatalf("after the alter consumed %v", again)
	}
	dres, err := adm.DeleteShareGroupOffsets(ctx, "g", "q")
	if err != nil || dres.Error() != nil {
		t.Fatalf("delete: %v %v", err, dres.Error())
	}
	if offs, err := adm.DescribeShareGroupOffsets(ctx, "g"); err != nil {
		t.Fatal(err)
	} else if o, ok := offs["g"].Offsets.Lookup("q", 0); ok {
		t.Fatalf("after the delete the group still has state for q: %+v", o)
	}
	if again := shareConsume(t, addr, "g", "q", 1, n); len(again) != n {
		t.Fatalf("after the delete consumed %d, want all %d again", len(again), n)
	}
}

// TestOneGroupIDIsOneGroupType: a share group's heartbeat for the id of a
// consumer group with committed offsets is GROUP_ID_NOT_FOUND, and a
// consumer group's commit for the id of a share group is refused too.
func TestOneGroupIDIsOneGroupType(t *testing.T) {
	_, _, _, cl := startShareQueue(t)
	ctx := ctxTimeout(t, 10*time.Second)
	commit := func(group string) int16 {
		req := kmsg.NewPtrOffsetCommitRequest()
		req.Group, req.Generation = group, -1
		req.Topics = []kmsg.OffsetCommitRequestTopic{{Topic: "q", Partitions: []kmsg.OffsetCommitRequestTopicPartition{{Partition: 0, Offset: 0}}}}
		resp, err := req.RequestWith(ctx, cl)
		if err != nil {
			t.Fatal(err)
		}
		return resp.Topics[0].Partitions[0].ErrorCode
	}
	heartbeat := func(group string) int16 {
		req := kmsg.NewPtrShareGroupHeartbeatRequest()
		req.GroupID, req.MemberID, req.MemberEpoch, req.SubscribedTopicNames = group, "m", 0, []string{"q"}
		resp, err := req.RequestWith(ctx, cl)
		if err != nil {
			t.Fatal(err)
		}
		return resp.ErrorCode
	}
	if code := commit("consumers"); code != 0 {
		t.Fatalf("commit for consumer group: %v", kerr.ErrorForCode(code))
	}
	if code := heartbeat("consumers"); code != kerr.GroupIDNotFound.Code {
		t.Errorf("share heartbeat for a consumer group's id: %v, want GROUP_ID_NOT_FOUND", kerr.ErrorForCode(code))
	}
	if code := heartbeat("queue"); code != 0 {
		t.Fatalf("share heartbeat: %v", kerr.ErrorForCode(code))
	}
	if code := commit("queue"); code != kerr.GroupIDNotFound.Code {
		t.Errorf("commit for a share group's id: %v, want GROUP_ID_NOT_FOUND", kerr.ErrorForCode(code))
	}
}
