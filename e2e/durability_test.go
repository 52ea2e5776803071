package e2e

import (
	"context"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/mqproject/mq/lib/mqtest"
)

func adminFor(t testing.TB, cl *kgo.Client) *kadm.Client {
	t.Helper()
	return kadm.NewClient(cl)
}

// TestRestartKeepsTopicsConfigsMessagesAndProducerState stops mqd cleanly
// and starts it again on the same directory.
func TestRestartKeepsTopicsConfigsMessagesAndProducerState(t *testing.T) {
	b := startBroker(t, brokerOpts{})
	ctx := ctxFor(t, 2*time.Minute)
	adm := b.admin()
	if _, err := adm.CreateTopic(ctx, 3, 1, map[string]*string{"retention.ms": kadm.StringPtr("3600000")}, "keep"); err != nil {
		t.Fatal(err)
	}
	cl := b.client(kgo.DefaultProduceTopic("keep"), kgo.RecordPartitioner(kgo.ManualPartitioner()))
	for i := 0; i < 30; i++ {
		r := &kgo.Record{Partition: int32(i % 3), Value: []byte(strconv.Itoa(i))}
		if err := cl.ProduceSync(ctx, r).FirstErr(); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := adm.DeleteRecords(ctx, kadm.Offsets{"keep": {0: {Topic: "keep", Partition: 0, At: 4}}}); err != nil {
		t.Fatal(err)
	}

	// An idempotent producer's state: sequence numbers of partition 0.
	pid, epoch := initProducerID(t, ctx, cl)
	produceRaw(t, ctx, cl, "keep", 1, pid, epoch, 0, "seq0")

	b.restart(false)

	adm = b.admin()
	td, err := adm.ListTopics(ctx, "keep")
	if err != nil || td["keep"].Err != nil {
		t.Fatalf("list after restart: %v %v", err, td["keep"].Err)
	}
	if got := len(td["keep"].Partitions); got != 3 {
		t.Fatalf("partitions after restart: %d, want 3", got)
	}
	rc, err := adm.DescribeTopicConfigs(ctx, "keep")
	if err != nil {
		t.Fatal(err)
	}
	c, err := rc.On("keep", nil)
	if err != nil {
		t.Fatal(err)
	}
	found := false
	for _, e := range c.Configs {
		if e.Key == "retention.ms" {
			found = true
			if e.MaybeValue() != "3600000" {
				t.Fatalf("retention.ms after restart: %q", e.MaybeValue())
			}
		}
	}
	if !found {
		t.Fatal("retention.ms override lost in restart")
	}
	starts, err := adm.ListStartOffsets(ctx, "keep")
	if err != nil {
		t.Fatal(err)
	}
	if o, _ := starts.Lookup("keep", 0); o.Offset != 4 {
		t.Fatalf("log start offset of keep/0 after restart: %d, want 4", o.Offset)
	}
	ends, err := adm.ListEndOffsets(ctx, "keep")
	if err != nil {
		t.Fatal(err)
	}
	if o, _ := ends.Lookup("keep", 1); o.Offset != 11 {
		t.Fatalf("end offset of keep/1 after restart: %d, want 11", o.Offset)
	}

	// The retried batch is recognised as a duplicate after the restart: it
	// is answered with its original offset and not written again.
	cl = b.client()
	if off := produceRaw(t, ctx, cl, "keep", 1, pid, epoch, 0, "seq0"); off != 10 {
		t.Fatalf("retried batch after restart answered with offset %d, want 10", off)
	}
	if off := produceRaw(t, ctx, cl, "keep", 1, pid, epoch, 1, "seq1"); off != 11 {
		t.Fatalf("next batch after restart at offset %d, want 11", off)
	}
	vals := consumeAll(t, b.client(), "keep", 26+2)
	if len(vals) != 28 {
		t.Fatalf("read %d records", len(vals))
	}
}

// TestSIGKILLLosesNothingAcknowledged kills mqd, running with flush policy
// always, while a producer with acks=all writes, then checks that every
// acknowledged record is read back at its acknowledged offset.
func TestSIGKILLLosesNothingAcknowledged(t *testing.T) {
	b := startBroker(t, brokerOpts{props: []string{"log.flush.policy=always"}})
	ctx := ctxFor(t, 3*time.Minute)
	if _, err := b.admin().CreateTopic(ctx, 2, 1, nil, "crash"); err != nil {
		t.Fatal(err)
	}
	type ack struct {
		partition int32
		offset    int64
	}
	var (
		mu    sync.Mutex
		acked = map[string]ack{}
	)
	pctx, stopProducing := context.WithCancel(ctx)
	cl := b.client(kgo.DefaultProduceTopic("crash"), kgo.RequiredAcks(kgo.AllISRAcks()), kgo.RecordRetries(3))
	done := make(chan struct{})
	go func() {
		defer close(done)
		for i := 0; pctx.Err() == nil; i++ {
			v := strconv.Itoa(i)
			cl.Produce(pctx, &kgo.Record{Key: []byte(v), Value: []byte(v)}, func(r *kgo.Record, err error) {
				if err == nil {
					mu.Lock()
					acked[string(r.Value)] = ack{r.Partition, r.Offset}
					mu.Unlock()
				}
			})
		}
	}()
	mqtest.Wait{Timeout: 2 * time.Minute}.For(t, "20000 records acknowledged", func() (bool, string) {
		mu.Lock()
		defer mu.Unlock()
		return len(acked) >= 20000, strconv.Itoa(len(acked)) + " acknowledged"
	})
	b.kill()
	stopProducing()
	<-done
	cl.Close()

	mu.Lock()
	want := make(map[string]ack, len(acked))
	for k, v := range acked {
		want[k] = v
	}
	mu.Unlock()

	b.start()
	c := b.client(kgo.ConsumeTopics("crash"), kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()))
	ends, err := b.admin().ListEndOffsets(ctx, "crash")
	if err != nil {
		t.Fatal(err)
	}
	remaining := map[int32]int64{}
	ends.Each(func(o kadm.ListedOffset) { remaining[o.Partition] = o.Offset })
	got := map[string]ack{}
	for {
		left := int64(0)
		for _, n := range remaining {
			left += n
		}
		if left == 0 {
			break
		}
		fs := c.PollFetches(ctx)
		if ctx.Err() != nil {
			t.Fatalf("timed out reading back; %d records left", left)
		}
		fs.EachError(func(tp string, p int32, err error) { t.Fatalf("fetch %s/%d: %v", tp, p, err) })
		fs.EachRecord(func(r *kgo.Record) {
			got[string(r.Value)] = ack{r.Partition, r.Offset}
			remaining[r.Partition]--
		})
	}
	for v, a := range want {
		g, ok := got[v]
		if !ok {
			t.Fatalf("acknowledged record %s (%d/%d) lost", v, a.partition, a.offset)
		}
		if g != a {
			t.Fatalf("record %s acknowledged at %d/%d, read at %d/%d", v, a.partition, a.offset, g.partition, g.offset)
		}
	}
	t.Logf("%d acknowledged records, all read back; %d records in the log", len(want), len(got))
}

// initProducerID asks for an idempotent producer id.
func initProducerID(t *testing.T, ctx context.Context, cl *kgo.Client) (int64, int16) {
	t.Helper()
	req := kmsg.NewPtrInitProducerIDRequest()
	req.TransactionTimeoutMillis = 60000
	resp, err := req.RequestWith(ctx, cl)
	if err != nil {
		t.Fatal(err)
	}
	if resp.ErrorCode != 0 {
		t.Fatalf("InitProducerId error %d", resp.ErrorCode)
	}
	return resp.ProducerID, resp.ProducerEpoch
}

// produceRaw sends one single-record idempotent batch with the given
// sequence number and returns the base offset the broker answers with.
func produceRaw(t *testing.T, ctx context.Context, cl *kgo.Client, topic string, partition int32, pid int64, epoch int16, seq int32, value string) int64 {
	t.Helper()
	p := produceBatch(t, ctx, cl, -1, topic, partition, encodeBatch(pid, epoch, seq, []byte(value)))
	if p.ErrorCode != 0 {
		t.Fatalf("produce seq %d: error code %d", seq, p.ErrorCode)
	}
	return p.BaseOffset
}

// produceBatch sends one batch to a partition in a Produce request of the
// given version (-1: the highest both sides know), acks=all, and returns
// the partition's answer.
func produceBatch(t *testing.T, ctx context.Context, cl *kgo.Client, version int16, topic string, partition int32, batch []byte) kmsg.ProduceResponseTopicPartition {
	t.Helper()
	req := kmsg.NewPtrProduceRequest()
	if version >= 0 {
		req.Version = version
	}
	req.Acks, req.TimeoutMillis = -1, 10000
	rt := kmsg.NewProduceRequestTopic()
	rt.Topic = topic
	rp := kmsg.NewProduceRequestTopicPartition()
	rp.Partition, rp.Records = partition, batch
	rt.Partitions = append(rt.Partitions, rp)
	req.Topics = append(req.Topics, rt)
	resp, err := req.RequestWith(ctx, cl)
	if err != nil {
		t.Fatal(err)
	}
	return resp.Topics[0].Partitions[0]
}
