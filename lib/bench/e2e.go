package bench

import (
	"context"
	"encoding/binary"
	"errors"
	"io"
	"math/bits"
	"math/rand/v2"
	"runtime/debug"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/mqproject/mq/lib/client"
)

// e2eHeader is the part of an e2e value that carries the probe: the run's
// id, the message's sequence number and its send time in nanoseconds
// after the run's start, each a big-endian uint64.
const e2eHeader = 24

// warmUpSeq marks the message that opens the run: the measurement starts
// once the consumer has seen it, so connection and metadata set-up are not
// timed.
const warmUpSeq = ^uint64(0)

// MinE2EValueSize is the smallest value an e2e run can send.
const MinE2EValueSize = e2eHeader

// E2EConfig is an end-to-end latency run.
type E2EConfig struct {
	Topic string
	// Rate is the messages per second the producer sends at; Duration how
	// long it sends.
	Rate     float64
	Duration time.Duration
	// ValueSize is the size of each value, at least MinE2EValueSize.
	ValueSize int
	// Late is the latency above which a message counts as late.
	Late time.Duration
	// Wait is how long the consumer may take, after the last
	// acknowledgment, to receive every acknowledged message; those it has
	// not received by then are lost.
	Wait     time.Duration
	Producer ProducerSettings
	Consumer ConsumerSettings
	// Progress, when not nil, gets a progress line about once a second.
	Progress io.Writer
	// GCMemoryLimit, when > 0, turns this process's garbage collector off
	// for the run except at this heap size (after one collection at the
	// start), so that collections do not land in the latencies measured.
	// The collector's settings are restored afterwards.
	GCMemoryLimit int64
}

// quietGC collects once and returns the free memory to the system (so
// that the runtime's scavenger does not do it during the run, after
// earlier runs of a suite grew the heap), then turns the collector off
// except at limit bytes of heap. It returns what restores the previous
// settings.
func quietGC(limit int64) (restore func()) {
	debug.FreeOSMemory()
	percent := debug.SetGCPercent(-1)
	old := debug.SetMemoryLimit(limit)
	return func() {
		debug.SetMemoryLimit(old)
		debug.SetGCPercent(percent)
	}
}

// E2E sends messages at a fixed rate while a consumer reads the topic
// live, and measures the time from each send to its receipt. The send time
// travels in the message, so both ends must share a clock: they are one
// process.
func E2E(ctx context.Context, dial Dialer, cfg E2EConfig) (*Result, error) {
	if cfg.ValueSize < MinE2EValueSize {
		return nil, client.Usagef("--value-size: e2e needs at least %d bytes", MinE2EValueSize)
	}
	if cfg.Rate <= 0 || cfg.Duration <= 0 {
		return nil, client.Usagef("e2e needs a positive --rate and --duration")
	}
	admin, err := dial()
	if err != nil {
		return nil, err
	}
	_, end, err := partitionOffsets(ctx, admin, cfg.Topic)
	admin.Close()
	if err != nil {
		return nil, err
	}
	offsets := map[int32]kgo.Offset{}
	for p, e := range end {
		offsets[p] = kgo.NewOffset().At(e)
	}
	consumer, err := dial(append(cfg.Consumer.opts(), kgo.ConsumePartitions(map[string]map[int32]kgo.Offset{cfg.Topic: offsets}))...)
	if err != nil {
		return nil, err
	}
	defer consumer.Close()
	popts, err := cfg.Producer.opts()
	if err != nil {
		return nil, err
	}
	producer, err := dial(append(popts, kgo.DefaultProduceTopic(cfg.Topic))...)
	if err != nil {
		return nil, err
	}
	defer producer.Close()

	if cfg.GCMemoryLimit > 0 {
		defer quietGC(cfg.GCMemoryLimit)()
	}
	total := int64(cfg.Rate * cfg.Duration.Seconds())
	total = max(total, 1)
	runID := rand.Uint64()
	t0 := time.Now()
	words := (total + 63) / 64
	acked := make([]atomic.Uint64, words)
	var (
		hist               Hist
		received, dups     atomic.Int64
		late, ackedN, fail atomic.Int64
		firstErr           atomic.Pointer[error]
	)
	seen := make([]uint64, words) // consumer goroutine only
	warm := make(chan struct{})
	allIn := make(chan struct{}, 1)
	cctx, stopConsumer := context.WithCancel(ctx)
	defer stopConsumer()
	var consumerErr atomic.Pointer[error]
	var cwg sync.WaitGroup
	cwg.Go(func() {
		warmed := false
		for {
			fs := consumer.PollFetches(cctx)
			if cctx.Err() != nil {
				return
			}
			fs.EachError(func(_ string, _ int32, err error) {
				if !errors.Is(err, context.Canceled) {
					consumerErr.CompareAndSwap(nil, &err)
				}
			})
			now := time.Since(t0)
			fs.EachRecord(func(r *kgo.Record) {
				v := r.Value
				if len(v) >= e2eHeader && binary.BigEndian.Uint64(v) == runID {
					seq := binary.BigEndian.Uint64(v[8:])
					switch {
					case seq == warmUpSeq:
						if !warmed {
							warmed = true
							close(warm)
						}
					case seq < uint64(total) && seen[seq/64]&(1<<(seq%64)) == 0:
						seen[seq/64] |= 1 << (seq % 64)
						lat := now - time.Duration(binary.BigEndian.Uint64(v[16:]))
						hist.RecordDuration(lat)
						if cfg.Late > 0 && lat > cfg.Late {
							late.Add(1)
						}
						if received.Add(1) == total {
							allIn <- struct{}{}
						}
					default:
						dups.Add(1)
					}
				}
				r.Recycle()
			})
			if consumerErr.Load() != nil {
				return
			}
		}
	})
	stop := func() { stopConsumer(); cwg.Wait() }
	defer stop()

	values := newValuePool(cfg.ValueSize)
	bufs := sync.Pool{New: func() any { return &kgo.Record{Value: make([]byte, cfg.ValueSize)} }}
	fill := func(r *kgo.Record, seq uint64, rng *rand.Rand) {
		v := r.Value[:cfg.ValueSize]
		copy(v[e2eHeader:], values.next(rng)[e2eHeader:])
		binary.BigEndian.PutUint64(v, runID)
		binary.BigEndian.PutUint64(v[8:], seq)
		binary.BigEndian.PutUint64(v[16:], uint64(time.Since(t0)))
		r.Value = v
	}
	rng := rand.New(rand.NewPCG(runID, 1))

	// Warm up: one message through, so that both clients are connected.
	wr := bufs.Get().(*kgo.Record)
	fill(wr, warmUpSeq, rng)
	if err := producer.ProduceSync(ctx, wr).FirstErr(); err != nil {
		return nil, client.Failf("e2e warm-up produce: %v", err)
	}
	select {
	case <-warm:
	case <-time.After(30 * time.Second):
		if p := consumerErr.Load(); p != nil {
			return nil, client.Failf("e2e consumer: %v", *p)
		}
		return nil, client.Failf("e2e warm-up: the consumer did not receive the first message within 30s")
	case <-ctx.Done():
		return nil, ctx.Err()
	}

	promise := func(r *kgo.Record, err error) {
		seq := binary.BigEndian.Uint64(r.Value[8:])
		if err != nil {
			fail.Add(1)
			firstErr.CompareAndSwap(nil, &err)
		} else {
			acked[seq/64].Or(1 << (seq % 64))
			ackedN.Add(1)
		}
		v := r.Value
		*r = kgo.Record{Value: v[:cap(v)]}
		bufs.Put(r)
	}
	progress := startProgress(cfg.Progress, "e2e", total, received.Load)
	defer progress()
	begin := time.Now()
	pacer := NewPacer(cfg.Rate, begin)
	var produceErr error
	for sent := int64(0); sent < total; {
		due, err := pacer.Wait(ctx, total-sent)
		if err != nil {
			produceErr = err
			break
		}
		for range due {
			r := bufs.Get().(*kgo.Record)
			fill(r, uint64(sent), rng)
			producer.Produce(ctx, r, promise)
			sent++
		}
		pacer.Sent(due)
	}
	sending := time.Since(begin)
	if produceErr == nil {
		produceErr = producer.Flush(ctx)
	}
	if produceErr != nil {
		return nil, produceErr
	}
	if ackedN.Load() > 0 {
		select {
		case <-allIn:
		case <-time.After(cfg.Wait):
		case <-ctx.Done():
			return nil, ctx.Err()
		}
	}
	stop()
	progress()

	var lost int64
	for i := range acked {
		lost += int64(bits.OnesCount64(acked[i].Load() &^ seen[i]))
	}
	res := &Result{
		Test:     "e2e",
		Topic:    cfg.Topic,
		Messages: received.Load(),
		Bytes:    received.Load() * int64(cfg.ValueSize),
		Seconds:  sending.Seconds(),
		Latency:  hist.Latency(),
		Failed:   fail.Load(),
		Late:     late.Load(),
		Lost:     lost,
		Settings: map[string]string{
			"rate":       strconv.FormatFloat(cfg.Rate, 'f', -1, 64),
			"duration":   cfg.Duration.String(),
			"value_size": strconv.Itoa(cfg.ValueSize),
			"late":       cfg.Late.String(),
			"wait":       cfg.Wait.String(),
		},
	}
	cfg.Producer.settings(res.Settings)
	cfg.Consumer.settings(res.Settings)
	res.finish()
	switch {
	case consumerErr.Load() != nil:
		return res, client.Failf("e2e consumer: %v", *consumerErr.Load())
	case lost > 0:
		return res, client.Failf("%d acknowledged messages never arrived within %s", lost, cfg.Wait)
	case res.Failed > 0:
		return res, client.Failf("%d of %d messages not acknowledged: %v", res.Failed, total, *firstErr.Load())
	}
	return res, nil
}
