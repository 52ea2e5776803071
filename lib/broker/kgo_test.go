package broker

import (
	"context"
	"crypto/rand"
	"errors"
	"fmt"
	"net"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/mqproject/mq/lib/config"
	"github.com/mqproject/mq/lib/server"
)

// serve starts a server for tb on a free port of 127.0.0.1, registers the
// broker with that port, and returns the address.
func serve(t *testing.T, tb *testBroker) string {
	t.Helper()
	srv, err := server.New(server.Config{Listeners: []string{"tcp://127.0.0.1:0"}}, tb.Broker)
	if err != nil {
		t.Fatal(err)
	}
	if err := srv.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { srv.Close() })
	addr := strings.TrimPrefix(srv.Addrs()[0], "tcp://")
	_, portStr, err := net.SplitHostPort(addr)
	if err != nil {
		t.Fatal(err)
	}
	port, _ := strconv.Atoi(portStr)
	tb.register(t, int32(port))
	return addr
}

func newClient(t *testing.T, addr string, opts ...kgo.Opt) *kgo.Client {
	t.Helper()
	cl, err := kgo.NewClient(append([]kgo.Opt{kgo.SeedBrokers(addr)}, opts...)...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(cl.Close)
	return cl
}

func ctxTimeout(t *testing.T, d time.Duration) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), d)
	t.Cleanup(cancel)
	return ctx
}

// consume reads n records from the start of topic.
func consume(t *testing.T, addr, topic string, n int) []*kgo.Record {
	t.Helper()
	cl := newClient(t, addr, kgo.ConsumeTopics(topic), kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()))
	ctx := ctxTimeout(t, 20*time.Second)
	var out []*kgo.Record
	for len(out) < n {
		fs := cl.PollFetches(ctx)
		if err := ctx.Err(); err != nil {
			t.Fatalf("consumed %d of %d records: %v", len(out), n, err)
		}
		fs.EachError(func(topic string, p int32, err error) {
			t.Fatalf("fetch %s-%d: %v", topic, p, err)
		})
		out = append(out, fs.Records()...)
	}
	return out
}

func TestKgoProduceConsumeRoundTrip(t *testing.T) {
	tb := startBroker(t, "", func(s *config.Broker) { s.NumPartitions = 2 })
	addr := serve(t, tb)
	// Default options (idempotent, snappy); the topic is auto-created
	// through Metadata, which kgo asks for only with AllowAutoTopicCreation.
	cl := newClient(t, addr, kgo.DefaultProduceTopic("round"), kgo.AllowAutoTopicCreation())
	ctx := ctxTimeout(t, 20*time.Second)
	const n = 200
	for i := range n {
		cl.Produce(ctx, &kgo.Record{Key: []byte(strconv.Itoa(i % 7)), Value: []byte(fmt.Sprintf("v%d", i))}, func(r *kgo.Record, err error) {
			if err != nil {
				t.Errorf("produce %s: %v", r.Value, err)
			}
		})
	}
	if err := cl.Flush(ctx); err != nil {
		t.Fatal(err)
	}
	recs := consume(t, addr, "round", n)
	seen := map[string]bool{}
	last := map[int32]int64{0: -1, 1: -1}
	for _, r := range recs {
		seen[string(r.Value)] = true
		if r.Offset <= last[r.Partition] {
			t.Fatalf("partition %d: offset %d after %d", r.Partition, r.Offset, last[r.Partition])
		}
		last[r.Partition] = r.Offset
	}
	if len(seen) != n {
		t.Fatalf("consumed %d distinct values, want %d", len(seen), n)
	}
}

// A kgo consumer fetches in a session: after the full fetch that creates
// it, its requests name only the partitions whose offsets moved, and
// every record still arrives, with fetches too small for all partitions
// at once.
func TestKgoConsumerFetchesInASession(t *testing.T) {
	const partitions, perPartition = 32, 10
	tb := startBroker(t, "", func(s *config.Broker) { s.NumPartitions = partitions })
	addr := serve(t, tb)
	ctx := ctxTimeout(t, 30*time.Second)
	producer := newClient(t, addr, kgo.DefaultProduceTopic("sess"), kgo.AllowAutoTopicCreation(), kgo.RecordPartitioner(kgo.ManualPartitioner()))
	produceRound := func(round int) {
		t.Helper()
		for p := range int32(partitions) {
			for i := range perPartition {
				producer.Produce(ctx, &kgo.Record{Partition: p, Value: []byte(fmt.Sprintf("%d-%d-%d", round, p, i))}, func(r *kgo.Record, err error) {
					if err != nil {
						t.Errorf("produce %s: %v", r.Value, err)
					}
				})
			}
		}
		if err := producer.Flush(ctx); err != nil {
			t.Fatal(err)
		}
	}
	consumer := newClient(t, addr, kgo.ConsumeTopics("sess"), kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()),
		kgo.FetchMaxBytes(2048), kgo.FetchMaxPartitionBytes(2048))
	seen := map[string]bool{}
	readAll := func(want int) {
		t.Helper()
		for len(seen) < want {
			fs := consumer.PollFetches(ctx)
			if err := ctx.Err(); err != nil {
				t.Fatalf("consumed %d of %d records: %v", len(seen), want, err)
			}
			fs.EachError(func(topic string, p int32, err error) { t.Fatalf("fetch %s-%d: %v", topic, p, err) })
			fs.EachRecord(func(r *kgo.Record) {
				if seen[string(r.Value)] {
					t.Fatalf("record %s read twice", r.Value)
				}
				seen[string(r.Value)] = true
			})
		}
	}
	produceRound(0)
	readAll(partitions * perPartition)
	produceRound(1)
	readAll(2 * partitions * perPartition)

	counts := &tb.sessions.consumers
	full, incremental, named := counts.full.Load(), counts.incremental.Load(), counts.incrementalPartitions.Load()
	if full < 1 || incremental < 1 || named >= incremental*partitions {
		t.Fatalf("%d sessions created, %d incremental fetches naming %d partitions: want incremental fetches naming fewer than all %d partitions each",
			full, incremental, named, partitions)
	}
}

func TestKgoAcksLevels(t *testing.T) {
	tb := startBroker(t, "", nil)
	addr := serve(t, tb)
	tb.createTopic(t, "levels", 1, nil)
	total := 0
	for _, tt := range []struct {
		name string
		opts []kgo.Opt
	}{
		{"all", []kgo.Opt{kgo.RequiredAcks(kgo.AllISRAcks())}},
		{"leader", []kgo.Opt{kgo.RequiredAcks(kgo.LeaderAck()), kgo.DisableIdempotentWrite()}},
		{"none", []kgo.Opt{kgo.RequiredAcks(kgo.NoAck()), kgo.DisableIdempotentWrite()}},
	} {
		cl := newClient(t, addr, append(tt.opts, kgo.DefaultProduceTopic("levels"))...)
		ctx := ctxTimeout(t, 20*time.Second)
		for i := range 10 {
			if err := cl.ProduceSync(ctx, &kgo.Record{Value: []byte(fmt.Sprintf("%s-%d", tt.name, i))}).FirstErr(); err != nil {
				t.Fatalf("acks=%s: %v", tt.name, err)
			}
		}
		total += 10
	}
	// acks=0 does not wait; the consumer sees everything anyway.
	if recs := consume(t, addr, "levels", total); len(recs) != total {
		t.Fatalf("consumed %d, want %d", len(recs), total)
	}
}

func TestKgoMessageTooLargeAndUnknownTopic(t *testing.T) {
	tb := startBroker(t, "", func(s *config.Broker) { s.AutoCreateTopics = false })
	addr := serve(t, tb)
	tb.createTopic(t, "tiny", 1, map[string]string{"max.message.bytes": "1000"})
	cl := newClient(t, addr, kgo.RecordRetries(2), kgo.UnknownTopicRetries(1))
	ctx := ctxTimeout(t, 20*time.Second)
	big := make([]byte, 5000)
	rand.Read(big) // incompressible: snappy must not shrink it below the limit
	err := cl.ProduceSync(ctx, &kgo.Record{Topic: "tiny", Value: big}).FirstErr()
	if !errors.Is(err, kerr.MessageTooLarge) {
		t.Fatalf("oversized record: %v, want MESSAGE_TOO_LARGE", err)
	}
	err = cl.ProduceSync(ctx, &kgo.Record{Topic: "absent", Value: []byte("x")}).FirstErr()
	if !errors.Is(err, kerr.UnknownTopicOrPartition) {
		t.Fatalf("unknown topic: %v, want UNKNOWN_TOPIC_OR_PARTITION", err)
	}
}

func TestKadmListAndDeleteRecords(t *testing.T) {
	tb := startBroker(t, "", nil)
	addr := serve(t, tb)
	tb.createTopic(t, "adm", 1, nil)
	cl := newClient(t, addr, kgo.DefaultProduceTopic("adm"))
	ctx := ctxTimeout(t, 20*time.Second)
	for i := range 10 {
		if err := cl.ProduceSync(ctx, &kgo.Record{Value: []byte{byte(i)}}).FirstErr(); err != nil {
			t.Fatal(err)
		}
	}
	adm := kadm.NewClient(cl)
	ends, err := adm.ListEndOffsets(ctx, "adm")
	if err != nil {
		t.Fatal(err)
	}
	if o, _ := ends.Lookup("adm", 0); o.Err != nil || o.Offset != 10 {
		t.Fatalf("end offset %+v, want 10", o)
	}
	del, err := adm.DeleteRecords(ctx, kadm.Offsets{"adm": {0: kadm.Offset{Topic: "adm", Partition: 0, At: 4}}})
	if err != nil {
		t.Fatal(err)
	}
	if r, _ := del.Lookup("adm", 0); r.Err != nil || r.LowWatermark != 4 {
		t.Fatalf("delete records: %+v", r)
	}
	starts, err := adm.ListStartOffsets(ctx, "adm")
	if err != nil {
		t.Fatal(err)
	}
	if o, _ := starts.Lookup("adm", 0); o.Offset != 4 {
		t.Fatalf("start offset %+v, want 4", o)
	}
	if recs := consume(t, addr, "adm", 6); recs[0].Offset != 4 {
		t.Fatalf("first record consumed at %d, want 4", recs[0].Offset)
	}
}
