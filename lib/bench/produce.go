package bench

import (
	"cmp"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/mqproject/mq/lib/client"
)

// Dialer makes a kgo client for the broker under test with opts added to
// the connection's own; lib/client.NewClient over resolved addresses is
// the usual one. Every client a run makes is closed by the run.
type Dialer func(opts ...kgo.Opt) (*kgo.Client, error)

// KeySize is the size of the keys produced: a big-endian uint64 key number.
const KeySize = 8

// ProducerSettings are the kgo producer settings a run uses.
type ProducerSettings struct {
	// Acks is -1 (all in-sync replicas), 0 or 1.
	Acks int16
	// Compression is none, snappy, lz4, zstd or gzip.
	Compression string
	// Linger is kgo.ProducerLinger: how long a partition's batch waits for
	// more records (0: send as soon as the previous request is answered).
	Linger time.Duration
	// BatchBytes is kgo.ProducerBatchMaxBytes; 0 keeps kgo's default.
	BatchBytes int32
	// MaxBuffered is kgo.MaxBufferedRecords per producer; 0 keeps kgo's
	// default.
	MaxBuffered int
	// Partitioner is how messages without a key pick their partition:
	// "uniform" (or ""): 64 KiB of messages to one partition, then a random
	// other; "adaptive": kgo's default, which picks the next partition by
	// its backlog and scans every partition of the topic to find it, on
	// each switch. Keyed messages are hashed to their partition by both.
	Partitioner string
}

// Partitioner is the kgo partitioner a ProducerSettings.Partitioner names,
// or a usage error for a name it does not know.
func Partitioner(name string) (kgo.Partitioner, error) {
	switch name {
	case "uniform", "":
		return kgo.UniformBytesPartitioner(64<<10, false, true, nil), nil
	case "adaptive":
		return kgo.UniformBytesPartitioner(64<<10, true, true, nil), nil
	}
	return nil, client.Usagef("--partitioner: want uniform or adaptive, not %q", name)
}

// opts are the kgo options for s.
func (s ProducerSettings) opts() ([]kgo.Opt, error) {
	codec, err := parseCompression(s.Compression)
	if err != nil {
		return nil, err
	}
	opts := append(client.ProducerTimeouts(), kgo.ProducerLinger(s.Linger), kgo.ProducerBatchCompression(codec), kgo.RecordRetries(10))
	partitioner, err := Partitioner(s.Partitioner)
	if err != nil {
		return nil, err
	}
	opts = append(opts, kgo.RecordPartitioner(partitioner))
	switch s.Acks {
	case -1:
		opts = append(opts, kgo.RequiredAcks(kgo.AllISRAcks()))
	case 0, 1:
		// kgo's idempotent producer needs acks=all.
		acks := kgo.NoAck()
		if s.Acks == 1 {
			acks = kgo.LeaderAck()
		}
		opts = append(opts, kgo.RequiredAcks(acks), kgo.DisableIdempotentWrite(), kgo.MaxProduceRequestsInflightPerBroker(5))
	default:
		return nil, client.Usagef("--acks: want all, -1, 0 or 1, not %d", s.Acks)
	}
	if s.BatchBytes > 0 {
		opts = append(opts, kgo.ProducerBatchMaxBytes(s.BatchBytes))
	}
	if s.MaxBuffered > 0 {
		opts = append(opts, kgo.MaxBufferedRecords(s.MaxBuffered))
	}
	return opts, nil
}

// settings describes s for a Result.
func (s ProducerSettings) settings(m map[string]string) {
	acks := strconv.Itoa(int(s.Acks))
	if s.Acks == -1 {
		acks = "all"
	}
	m["acks"] = acks
	m["compression"] = s.Compression
	m["partitioner"] = cmp.Or(s.Partitioner, "uniform")
	m["linger"] = s.Linger.String()
	m["batch_max_bytes"] = "kgo default"
	if s.BatchBytes > 0 {
		m["batch_max_bytes"] = strconv.Itoa(int(s.BatchBytes))
	}
	m["max_buffered_records"] = "kgo default"
	if s.MaxBuffered > 0 {
		m["max_buffered_records"] = strconv.Itoa(s.MaxBuffered)
	}
}

// parseCompression reads a codec name.
func parseCompression(name string) (kgo.CompressionCodec, error) {
	switch name {
	case "none", "":
		return kgo.NoCompression(), nil
	case "snappy":
		return kgo.SnappyCompression(), nil
	case "lz4":
		return kgo.Lz4Compression(), nil
	case "zstd":
		return kgo.ZstdCompression(), nil
	case "gzip":
		return kgo.GzipCompression(), nil
	}
	return kgo.CompressionCodec{}, client.Usagef("--compression: unknown codec %q (want none, snappy, lz4, zstd or gzip)", name)
}

// ProduceConfig is a produce run.
type ProduceConfig struct {
	Topic string
	// Messages is how many messages to produce in all.
	Messages int64
	// ValueSize is the size of each random value.
	ValueSize int
	// Keys is the number of distinct keys, drawn at random; 0 sends
	// messages without keys.
	Keys int64
	// Producers is how many clients produce at once, each its share of
	// Messages and Rate over its own connection.
	Producers int
	// Rate is the target rate in messages per second over all producers;
	// 0 is as fast as possible.
	Rate     float64
	Producer ProducerSettings
	// TransactionSize, when positive, makes each producer transactional
	// (a transactional id of its own): it commits a transaction every
	// TransactionSize of its messages, and the rest in a last one. It
	// needs Producer.Acks -1.
	TransactionSize int64
	// Progress, when not nil, gets a progress line about once a second.
	Progress io.Writer
}

// Produce produces cfg.Messages messages, waits for every
// acknowledgment and measures throughput and the latency from each
// Produce call to its acknowledgment. An error means nothing useful was
// measured; failed messages are counted in Result.Failed (the caller
// decides whether that fails the run).
func Produce(ctx context.Context, dial Dialer, cfg ProduceConfig) (*Result, error) {
	if cfg.Producers < 1 {
		cfg.Producers = 1
	}
	opts, err := cfg.Producer.opts()
	if err != nil {
		return nil, err
	}
	opts = append(opts, kgo.DefaultProduceTopic(cfg.Topic))
	if cfg.TransactionSize > 0 && cfg.Producer.Acks != -1 {
		return nil, client.Usagef("--transaction-size: transactions need --acks all")
	}
	clients := make([]*kgo.Client, cfg.Producers)
	defer func() {
		for _, cl := range clients {
			if cl != nil {
				cl.Close()
			}
		}
	}()
	runID := time.Now().UnixNano()
	for i := range clients {
		o := opts
		if cfg.TransactionSize > 0 {
			o = append(o[:len(o):len(o)], kgo.TransactionalID(fmt.Sprintf("mqbench-%d-%d", runID, i)))
		}
		if clients[i], err = dial(o...); err != nil {
			return nil, err
		}
	}
	values := newValuePool(cfg.ValueSize)
	var (
		hist     Hist
		acked    atomic.Int64
		failed   atomic.Int64
		firstErr atomic.Pointer[error]
	)
	recs := sync.Pool{New: func() any { return &kgo.Record{Key: make([]byte, KeySize)} }}
	promise := func(r *kgo.Record, err error) {
		if err != nil {
			failed.Add(1)
			firstErr.CompareAndSwap(nil, &err)
		} else {
			hist.RecordDuration(time.Since(r.Timestamp))
			acked.Add(1)
		}
		key := r.Key
		*r = kgo.Record{Key: key[:cap(key)]}
		recs.Put(r)
	}

	stop := startProgress(cfg.Progress, "produce", cfg.Messages, acked.Load)
	defer stop()
	start := time.Now()
	var wg sync.WaitGroup
	errs := make([]error, len(clients))
	for i, cl := range clients {
		n := cfg.Messages / int64(len(clients))
		if int64(i) < cfg.Messages%int64(len(clients)) {
			n++
		}
		wg.Go(func() {
			pacer := NewPacer(cfg.Rate/float64(len(clients)), start)
			rng := rand.New(rand.NewPCG(uint64(i), uint64(start.UnixNano())))
			txn := newTxnRound(ctx, cl, cfg.TransactionSize)
			if err := txn.begin(); err != nil {
				errs[i] = err
				return
			}
			for sent := int64(0); sent < n; {
				due, err := pacer.Wait(ctx, n-sent)
				if err != nil {
					errs[i] = err
					return
				}
				due = txn.limit(due)
				for range due {
					r := recs.Get().(*kgo.Record)
					if cfg.Keys > 0 {
						binary.BigEndian.PutUint64(r.Key, uint64(rng.Int64N(cfg.Keys)))
					} else {
						r.Key = nil
					}
					r.Value = values.next(rng)
					r.Timestamp = time.Now()
					cl.Produce(ctx, r, promise)
				}
				pacer.Sent(due)
				sent += due
				if err := txn.sent(due, sent == n); err != nil {
					errs[i] = err
					return
				}
			}
			errs[i] = cl.Flush(ctx)
		})
	}
	wg.Wait()
	elapsed := time.Since(start)
	stop()
	if err := errors.Join(errs...); err != nil {
		return nil, err
	}
	res := &Result{
		Test:     "produce",
		Topic:    cfg.Topic,
		Messages: acked.Load(),
		Seconds:  elapsed.Seconds(),
		Latency:  hist.Latency(),
		Failed:   failed.Load(),
		Settings: map[string]string{},
	}
	keySize := 0
	if cfg.Keys > 0 {
		keySize = KeySize
	}
	res.Bytes = res.Messages * int64(keySize+cfg.ValueSize)
	cfg.Producer.settings(res.Settings)
	res.Settings["producers"] = strconv.Itoa(cfg.Producers)
	res.Settings["value_size"] = strconv.Itoa(cfg.ValueSize)
	if cfg.TransactionSize > 0 {
		res.Settings["transaction_size"] = strconv.FormatInt(cfg.TransactionSize, 10)
	}
	res.Settings["keys"] = strconv.FormatInt(cfg.Keys, 10)
	if cfg.Rate > 0 {
		res.Settings["rate"] = strconv.FormatFloat(cfg.Rate, 'f', -1, 64)
	}
	res.finish()
	if p := firstErr.Load(); p != nil && res.Messages == 0 {
		return res, client.Failf("no message acknowledged: %v", *p)
	}
	if p := firstErr.Load(); p != nil {
		return res, client.Failf("%d of %d messages not acknowledged: %v", res.Failed, cfg.Messages, *p)
	}
	return res, nil
}

// txnRound is a producer's transactions: every size messages it flushes
// and commits the transaction and begins the next. size 0: none, every
// method does nothing.
type txnRound struct {
	ctx  context.Context
	cl   *kgo.Client
	size int64
	open int64 // messages in the open transaction
}

func newTxnRound(ctx context.Context, cl *kgo.Client, size int64) *txnRound {
	return &txnRound{ctx: ctx, cl: cl, size: size}
}

func (t *txnRound) begin() error {
	if t.size <= 0 {
		return nil
	}
	if err := t.cl.BeginTransaction(); err != nil {
		return fmt.Errorf("begin transaction: %w", err)
	}
	return nil
}

// limit is how many of due messages fit the open transaction.
func (t *txnRound) limit(due int64) int64 {
	if t.size <= 0 {
		return due
	}
	return min(due, t.size-t.open)
}

// sent counts n messages produced; a full transaction, or the last
// (done), is committed, and unless done the next begun.
func (t *txnRound) sent(n int64, done bool) error {
	if t.size <= 0 {
		return nil
	}
	t.open += n
	if t.open < t.size && !done {
		return nil
	}
	if err := t.cl.Flush(t.ctx); err != nil {
		return err
	}
	if err := t.cl.EndTransaction(t.ctx, kgo.TryCommit); err != nil {
		return fmt.Errorf("commit transaction: %w", err)
	}
	t.open = 0
	if done {
		return nil
	}
	return t.begin()
}

// valuePool hands out random values without allocating: windows of one
// random buffer, at random offsets. The windows are read-only; kgo only
// reads values.
type valuePool struct {
	buf  []byte
	size int
}

func newValuePool(size int) *valuePool {
	buf := make([]byte, max(1<<20, 4*size))
	r := rand.New(rand.NewPCG(1, 2))
	for i := 0; i+8 <= len(buf); i += 8 {
		binary.LittleEndian.PutUint64(buf[i:], r.Uint64())
	}
	return &valuePool{buf: buf, size: size}
}

func (v *valuePool) next(r *rand.Rand) []byte {
	off := r.IntN(len(v.buf) - v.size + 1)
	return v.buf[off : off+v.size : off+v.size]
}
