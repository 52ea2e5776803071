package e2e

import (
	"context"
	"fmt"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/mqproject/mq/lib/mqtest"
)

// TestManyPartitionsSurviveSIGKILLMidProduce creates 500 partitions in
// one CreateTopics, produces to all of them with flush.policy=always,
// SIGKILLs mqd while the producer is still writing, and checks that every
// acknowledged record is there after the restart (the recovery of each log
// past its recovery point), and again after a clean restart (the
// clean-shutdown record).
func TestManyPartitionsSurviveSIGKILLMidProduce(t *testing.T) {
	const partitions = 500
	start := time.Now()
	b := startBroker(t, brokerOpts{props: []string{"log.flush.policy=always"}})
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	resp, err := b.admin().CreateTopic(ctx, partitions, 1, nil, "many")
	if err != nil || resp.Err != nil {
		t.Fatalf("create: %v %v", err, resp.Err)
	}

	t.Logf("%v: created", time.Since(start))
	var mu sync.Mutex
	acked := map[int32][]string{} // partition → values acknowledged, in order
	total := 0
	prod := b.client(kgo.RecordPartitioner(kgo.ManualPartitioner()), kgo.RequiredAcks(kgo.AllISRAcks()),
		kgo.RecordRetries(0), kgo.ProducerLinger(time.Millisecond))
	pctx, stopProducing := context.WithCancel(ctx)
	done := make(chan struct{})
	go func() {
		defer close(done)
		for i := 0; pctx.Err() == nil; i++ {
			p := int32(i % partitions)
			v := strconv.Itoa(i)
			prod.Produce(pctx, &kgo.Record{Topic: "many", Partition: p, Value: []byte(v)}, func(r *kgo.Record, err error) {
				if err != nil {
					return
				}
				mu.Lock()
				acked[p] = append(acked[p], v)
				total++
				mu.Unlock()
			})
			if i%500 == 499 {
				// Keep the in-flight window small, so the kill lands
				// among appends rather than after them.
				prod.Flush(pctx)
			}
		}
	}()
	mqtest.Wait{Timeout: time.Minute}.For(t, fmt.Sprintf("%d records acknowledged", 2*partitions), func() (bool, string) {
		mu.Lock()
		defer mu.Unlock()
		return total >= 2*partitions, fmt.Sprintf("%d acknowledged", total)
	})
	b.kill() // mid-produce
	stopProducing()
	<-done
	prod.Close()
	mu.Lock()
	want := acked
	mu.Unlock()
	t.Logf("%v: %d records acknowledged before SIGKILL", time.Since(start), total)

	b.start()
	t.Logf("%v: restarted after SIGKILL", time.Since(start))
	checkAllPresent(t, b, partitions, want)
	t.Logf("%v: all present", time.Since(start))
	b.restart(false)
	t.Logf("%v: restarted after SIGTERM", time.Since(start))
	checkAllPresent(t, b, partitions, want)
	t.Logf("%v: all present", time.Since(start))
}

// checkAllPresent reads every partition of "many" from the start and
// checks that each partition begins with the values of want, in order.
func checkAllPresent(t *testing.T, b *broker, partitions int32, want map[int32][]string) {
	t.Helper()
	checkAllPresentIn(t, b, "many", partitions, want)
}

// checkAllPresentIn is checkAllPresent for topic.
func checkAllPresentIn(t *testing.T, b *broker, topic string, partitions int32, want map[int32][]string) {
	t.Helper()
	offsets := map[string]map[int32]kgo.Offset{topic: {}}
	for p := range partitions {
		offsets[topic][p] = kgo.NewOffset().AtStart()
	}
	cl := b.client(kgo.ConsumePartitions(offsets), kgo.FetchMaxWait(100*time.Millisecond))
	defer cl.Close()
	got := map[int32][]string{}
	missing := func() (int32, int) {
		for p := range partitions {
			if len(got[p]) < len(want[p]) {
				return p, len(want[p]) - len(got[p])
			}
		}
		return -1, 0
	}
	mqtest.Wait{Timeout: time.Minute}.For(t, "every acknowledged record read back", func() (bool, string) {
		ctx, cancel := context.WithTimeout(context.Background(), time.Second)
		defer cancel()
		cl.PollFetches(ctx).EachRecord(func(r *kgo.Record) { got[r.Partition] = append(got[r.Partition], string(r.Value)) })
		p, n := missing()
		return p < 0, fmt.Sprintf("partition %d lacks %d acknowledged records", p, n)
	})
	for p := range partitions {
		for i, v := range want[p] {
			if got[p][i] != v {
				t.Fatalf("partition %d offset %d: %q, acknowledged %q there", p, i, got[p][i], v)
			}
		}
	}
}

// TestManyPartitionsServeWhileOpening restarts mqd after a SIGKILL with
// 2,000 partitions to recover while a producer keeps writing to all of
// them: mqd listens before its partitions are open and answers those not
// open yet with a retriable error, so the producer (kgo's default
// retries) surfaces no error, and every record it had acknowledged
// (flush.policy=always) before and during the restart is there after.
func TestManyPartitionsServeWhileOpening(t *testing.T) {
	parallel(t)
	const partitions = 2000
	start := time.Now()
	b := startBroker(t, brokerOpts{props: []string{"log.flush.policy=always"}})
	b.keepAddr = true // the producer reconnects to the same address
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	resp, err := b.admin().CreateTopic(ctx, partitions, 1, nil, "many")
	if err != nil || resp.Err != nil {
		t.Fatalf("create: %v %v", err, resp.Err)
	}
	var mu sync.Mutex
	acked := map[int32][]string{}
	var surfaced []error
	prod := b.client(kgo.RecordPartitioner(kgo.ManualPartitioner()), kgo.RequiredAcks(kgo.AllISRAcks()),
		kgo.ProducerLinger(time.Millisecond), kgo.RecordDeliveryTimeout(2*time.Minute))
	produce := func(round int) {
		for p := range int32(partitions) {
			v := fmt.Sprintf("%d-%d", round, p)
			prod.Produce(ctx, &kgo.Record{Topic: "many", Partition: p, Value: []byte(v)}, func(r *kgo.Record, err error) {
				mu.Lock()
				defer mu.Unlock()
				if err != nil {
					surfaced = append(surfaced, fmt.Errorf("partition %d: %w", p, err))
					return
				}
				acked[p] = append(acked[p], v)
			})
		}
	}
	produce(0)
	if err := prod.Flush(ctx); err != nil {
		t.Fatal(err)
	}
	b.kill()
	t.Logf("%v: %d partitions written, killed", time.Since(start), partitions)

	// Produce while mqd starts: the rounds are in flight, retried, when
	// it listens and its partitions open.
	started := make(chan error, 1)
	go func() { started <- b.mqdProc.start() }()
	for round := 1; round <= 3; round++ {
		produce(round)
	}
	if err := <-started; err != nil {
		t.Fatal(err)
	}
	t.Logf("%v: restarted", time.Since(start))
	produce(4)
	if err := prod.Flush(ctx); err != nil {
		t.Fatal(err)
	}
	mu.Lock()
	errs, want := surfaced, acked
	mu.Unlock()
	if len(errs) > 0 {
		t.Fatalf("%d produce errors surfaced to the client, the first: %v", len(errs), errs[0])
	}
	for p := range int32(partitions) {
		if len(want[p]) != 5 {
			t.Fatalf("partition %d: %d records acknowledged, want 5", p, len(want[p]))
		}
	}
	checkAllPresent(t, b, partitions, want)
	t.Logf("%v: all present", time.Since(start))
}
