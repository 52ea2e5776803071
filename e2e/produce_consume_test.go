package e2e

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
)

// roundTrip produces n keyed messages with kgo's default options (idempotent,
// snappy, sticky key partitioning) to a new topic of `partitions`
// partitions, reads them back from the start with another client, and checks
// that every message is there once, at the offset it was acknowledged at,
// with its key and value, and that each partition's offsets are dense.
func roundTrip(t *testing.T, producer, consumer func(...kgo.Opt) *kgo.Client, topic string, partitions int32, n int) {
	t.Helper()
	ctx := ctxFor(t, 5*time.Minute)
	adm := adminFor(t, producer())
	if _, err := adm.CreateTopic(ctx, partitions, 1, nil, topic); err != nil {
		t.Fatalf("create topic: %v", err)
	}

	type ack struct {
		partition int32
		offset    int64
	}
	acks := make([]ack, n)
	var (
		wg       sync.WaitGroup
		errMu    sync.Mutex
		firstErr error
	)
	p := producer(kgo.DefaultProduceTopic(topic))
	for i := 0; i < n; i++ {
		i := i
		wg.Add(1)
		r := &kgo.Record{Key: []byte("k" + strconv.Itoa(i%997)), Value: []byte(strconv.Itoa(i))}
		p.Produce(ctx, r, func(r *kgo.Record, err error) {
			defer wg.Done()
			if err != nil {
				errMu.Lock()
				if firstErr == nil {
					firstErr = fmt.Errorf("record %d: %w", i, err)
				}
				errMu.Unlock()
				return
			}
			acks[i] = ack{r.Partition, r.Offset}
		})
	}
	wg.Wait()
	if firstErr != nil {
		t.Fatalf("produce: %v", firstErr)
	}

	c := consumer(kgo.ConsumeTopics(topic), kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()))
	seen := make([]bool, n)
	next := make(map[int32]int64) // next expected offset per partition
	got := 0
	for got < n {
		fs := c.PollFetches(ctx)
		if err := ctx.Err(); err != nil {
			t.Fatalf("consumed %d of %d before timeout", got, n)
		}
		fs.EachError(func(tp string, p int32, err error) {
			t.Fatalf("fetch %s/%d: %v", tp, p, err)
		})
		fs.EachRecord(func(r *kgo.Record) {
			if want := next[r.Partition]; r.Offset != want {
				t.Fatalf("partition %d: offset %d after %d, want dense offsets", r.Partition, r.Offset, want-1)
			}
			next[r.Partition] = r.Offset + 1
			i, err := strconv.Atoi(string(r.Value))
			if err != nil || i < 0 || i >= n {
				t.Fatalf("unexpected value %q at %d/%d", r.Value, r.Partition, r.Offset)
			}
			if seen[i] {
				t.Fatalf("message %d read twice", i)
			}
			seen[i] = true
			if a := acks[i]; a.partition != r.Partition || a.offset != r.Offset {
				t.Fatalf("message %d acknowledged at %d/%d, read at %d/%d", i, a.partition, a.offset, r.Partition, r.Offset)
			}
			if want := "k" + strconv.Itoa(i%997); string(r.Key) != want {
				t.Fatalf("message %d: key %q, want %q", i, r.Key, want)
			}
			got++
		})
	}
	var total int64
	for _, o := range next {
		total += o
	}
	if total != int64(n) {
		t.Fatalf("partitions hold %d messages, want %d", total, n)
	}
}

func TestMillionKeyedMessagesOverTCP(t *testing.T) {
	n := 1_000_000
	if testing.Short() {
		n = 20_000
	}
	b := startBroker(t, brokerOpts{})
	roundTrip(t, b.client, b.client, "million-tcp", 4, n)
}

func TestKeyedMessagesOverUnixSocket(t *testing.T) {
	parallel(t)
	n := 1_000_000
	if testing.Short() {
		n = 20_000
	}
	b := startBroker(t, brokerOpts{})
	roundTrip(t, b.unixClient, b.unixClient, "million-unix", 4, n)
}

func TestOversizedMessageIsRefusedAndPartitionStaysUsable(t *testing.T) {
	b := startBroker(t, brokerOpts{props: []string{"message.max.bytes=10000"}})
	ctx := ctxFor(t, time.Minute)
	cl := b.client(kgo.DefaultProduceTopic("big"), kgo.AllowAutoTopicCreation(), kgo.ProducerBatchCompression(kgo.NoCompression()), kgo.RecordRetries(2))
	mustProduce(t, cl, "big", "before")

	err := cl.ProduceSync(ctx, &kgo.Record{Value: make([]byte, 20000)}).FirstErr()
	if !errors.Is(err, kerr.MessageTooLarge) {
		t.Fatalf("oversized produce: got %v, want MESSAGE_TOO_LARGE", err)
	}
	mustProduce(t, cl, "big", "after")
	vals := consumeAll(t, b.client(), "big", 2)
	if vals[0] != "before" || vals[1] != "after" {
		t.Fatalf("read back %q, want [before after]", vals)
	}
}

func TestUnknownTopicWithAutoCreateOff(t *testing.T) {
	b := startBroker(t, brokerOpts{props: []string{"auto.create.topics.enable=false"}})
	ctx := ctxFor(t, time.Minute)
	cl := b.client(kgo.DefaultProduceTopic("nope"), kgo.UnknownTopicRetries(1))
	err := cl.ProduceSync(ctx, &kgo.Record{Value: []byte("x")}).FirstErr()
	if !errors.Is(err, kerr.UnknownTopicOrPartition) {
		t.Fatalf("produce to unknown topic: got %v, want UNKNOWN_TOPIC_OR_PARTITION", err)
	}
	topics, err := b.admin().ListTopics(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if topics.Has("nope") {
		t.Fatal("topic was created although auto.create.topics.enable=false")
	}
}

// mustProduce writes one value synchronously.
func mustProduce(t *testing.T, cl *kgo.Client, topic, value string) kgo.Record {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	r, err := cl.ProduceSync(ctx, &kgo.Record{Topic: topic, Value: []byte(value)}).First()
	if err != nil {
		t.Fatalf("produce %q: %v", value, err)
	}
	return *r
}

// consumeAll reads n records of topic from the start and returns their values.
func consumeAll(t *testing.T, base *kgo.Client, topic string, n int) []string {
	t.Helper()
	ctx := ctxFor(t, time.Minute)
	opts := base.Opts()
	cl, err := kgo.NewClient(append(opts, kgo.ConsumeTopics(topic), kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()))...)
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	var vals []string
	for len(vals) < n {
		fs := cl.PollFetches(ctx)
		if ctx.Err() != nil {
			t.Fatalf("read %d of %d records: %q", len(vals), n, vals)
		}
		fs.EachError(func(tp string, p int32, err error) { t.Fatalf("fetch %s/%d: %v", tp, p, err) })
		fs.EachRecord(func(r *kgo.Record) { vals = append(vals, string(r.Value)) })
	}
	return vals
}
