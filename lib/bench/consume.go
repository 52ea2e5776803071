package bench

import (
	"context"
	"errors"
	"fmt"
	"io"
	"math/bits"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/mqproject/mq/lib/client"
)

// ConsumerSettings are the kgo consumer settings a run uses.
type ConsumerSettings struct {
	// FetchMaxBytes is kgo.FetchMaxBytes (per fetch response); 0 keeps
	// kgo's default.
	FetchMaxBytes int32
	// FetchMaxPartitionBytes is kgo.FetchMaxPartitionBytes; 0 keeps kgo's
	// default.
	FetchMaxPartitionBytes int32
	// FetchMaxWait is kgo.FetchMaxWait: how long the broker may hold a
	// fetch with nothing new; 0 keeps kgo's default.
	FetchMaxWait time.Duration
}

func (s ConsumerSettings) opts() []kgo.Opt {
	opts := []kgo.Opt{kgo.WithPools(newRecordPool())}
	if s.FetchMaxBytes > 0 {
		opts = append(opts, kgo.FetchMaxBytes(s.FetchMaxBytes))
	}
	if s.FetchMaxPartitionBytes > 0 {
		opts = append(opts, kgo.FetchMaxPartitionBytes(s.FetchMaxPartitionBytes))
	}
	if s.FetchMaxWait > 0 {
		opts = append(opts, kgo.FetchMaxWait(s.FetchMaxWait))
	}
	return opts
}

func (s ConsumerSettings) settings(m map[string]string) {
	def := func(v int64) string {
		if v <= 0 {
			return "kgo default"
		}
		return strconv.FormatInt(v, 10)
	}
	m["fetch_max_bytes"] = def(int64(s.FetchMaxBytes))
	m["fetch_max_partition_bytes"] = def(int64(s.FetchMaxPartitionBytes))
	if s.FetchMaxWait > 0 {
		m["fetch_max_wait"] = s.FetchMaxWait.String()
	}
}

// ConsumeConfig is a consume run.
type ConsumeConfig struct {
	Topic string
	// Messages is how many messages each consumer reads, from the start of
	// every partition; 0 means every message there when the run starts.
	Messages int64
	// Consumers is how many consumers read the whole topic at once
	// (fan-out), each in a consumer group of its own (a fresh one per run,
	// reading from the start), or, with Direct, each reading every
	// partition without a group.
	Consumers int
	// Direct reads partitions without joining consumer groups: the same
	// fetch load, without the group protocol (for brokers without groups).
	Direct   bool
	Consumer ConsumerSettings
	// Progress, when not nil, gets a progress line about once a second.
	Progress io.Writer
}

// Consume reads cfg.Messages messages from the start of the topic with
// each of cfg.Consumers consumers at once and measures the total rate.
func Consume(ctx context.Context, dial Dialer, cfg ConsumeConfig) (*Result, error) {
	if cfg.Consumers < 1 {
		cfg.Consumers = 1
	}
	admin, err := dial()
	if err != nil {
		return nil, err
	}
	start, end, err := partitionOffsets(ctx, admin, cfg.Topic)
	admin.Close()
	if err != nil {
		return nil, err
	}
	want := cfg.Messages
	if want <= 0 {
		for p, e := range end {
			want += e - start[p]
		}
		if want == 0 {
			return nil, client.Failf("topic %s is empty: nothing to consume (produce first, or give --messages to wait for new ones)", cfg.Topic)
		}
	}
	offsets := map[int32]kgo.Offset{}
	for p, s := range start {
		offsets[p] = kgo.NewOffset().At(s)
	}
	clients := make([]*kgo.Client, cfg.Consumers)
	defer func() {
		for _, cl := range clients {
			if cl != nil {
				cl.Close()
			}
		}
	}()
	// In group mode the clock starts once every consumer has its
	// partitions: joining (and the broker's initial rebalance delay) is
	// not consumption.
	assigned := make(chan struct{}, len(clients))
	run := strconv.FormatInt(time.Now().UnixNano(), 36)
	for i := range clients {
		opts := cfg.Consumer.opts()
		if cfg.Direct {
			opts = append(opts, kgo.ConsumePartitions(map[string]map[int32]kgo.Offset{cfg.Topic: offsets}))
		} else {
			var once sync.Once
			opts = append(opts,
				kgo.ConsumerGroup(fmt.Sprintf("mqbench-%s-%d", run, i)),
				kgo.ConsumeTopics(cfg.Topic),
				kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()),
				kgo.DisableAutoCommit(),
				kgo.OnPartitionsAssigned(func(context.Context, *kgo.Client, map[string][]int32) {
					once.Do(func() { assigned <- struct{}{} })
				}))
		}
		if clients[i], err = dial(opts...); err != nil {
			return nil, err
		}
	}
	if !cfg.Direct {
		for range clients {
			select {
			case <-assigned:
			case <-ctx.Done():
				return nil, ctx.Err()
			}
		}
	}

	var total, bytes atomic.Int64
	stop := startProgress(cfg.Progress, "consume", want*int64(cfg.Consumers), total.Load)
	defer stop()
	errs := make([]error, len(clients))
	began := time.Now()
	var wg sync.WaitGroup
	for i, cl := range clients {
		wg.Go(func() {
			var n, b int64
			for n < want {
				fs := cl.PollFetches(ctx)
				if err := ctx.Err(); err != nil {
					errs[i] = err
					return
				}
				var ferr error
				fs.EachError(func(topic string, p int32, err error) {
					if ferr == nil && !errors.Is(err, context.Canceled) {
						ferr = err
					}
				})
				if ferr != nil {
					errs[i] = client.Failf("consume %s: %v", cfg.Topic, ferr)
					return
				}
				var got, size int64
				fs.EachRecord(func(r *kgo.Record) {
					got++
					size += int64(len(r.Key) + len(r.Value))
					r.Recycle()
				})
				n += got
				b += size
				total.Add(got)
			}
			bytes.Add(b)
		})
	}
	wg.Wait()
	elapsed := time.Since(began)
	stop()
	if err := errors.Join(errs...); err != nil {
		return nil, err
	}
	res := &Result{
		Test:      "consume",
		Topic:     cfg.Topic,
		Messages:  total.Load(),
		Bytes:     bytes.Load(),
		Seconds:   elapsed.Seconds(),
		Consumers: cfg.Consumers,
		Settings:  map[string]string{"consumers": strconv.Itoa(cfg.Consumers), "mode": consumeMode(cfg.Direct)},
	}
	cfg.Consumer.settings(res.Settings)
	res.finish()
	return res, nil
}

// consumeMode says how a consume run's consumers read, for its report.
func consumeMode(direct bool) string {
	if direct {
		return "direct (group-less), each consumer reads every partition"
	}
	return "one consumer group per consumer, each reading every partition"
}

// recordPool recycles the record slices kgo decodes fetched records into,
// so that a consumer does not allocate per record.
//
// kgo asks for one slice per record batch, exactly as long as the batch,
// and a fetch holds its batches' slices at once until they are consumed:
// thousands of short ones for a fetch spread over thousands of partitions,
// a few long ones (a 1 MB batch of 100-byte records is 8,000 of them) for
// a fetch of one partition. So slices come in size classes, and each
// class keeps up to poolRecordsPerClass records' worth of free slices, or
// poolSlicesPerClass slices, whichever is more: enough for every
// partition's batch of a many-partition fetch, and for every batch of a
// 16 MiB fetch of one partition and the fetch buffered behind it. A class
// never holds more free slices than were in use at once, so its bound
// only caps what a burst of odd sizes leaves behind.
//
// Classes are powers of two up to poolSlabRecords records (a batch of 3
// records takes a slice of 4, not of 256), then poolSubClasses steps per
// power of two (a batch of 8,196 takes 9,216, not 16,384): kgo.Record
// holds pointers, so every garbage collection scans a slice in use or
// free whole, and a new one is zeroed whole.
//
// New slices of the classes under poolSlabRecords are cut from slabs of
// poolSlabRecords records, a slab per class: the first fetch over 10,000
// partitions asks for tens of thousands of slices of a few records, and
// each was an allocation of its own, typed and zeroed one by one. A slab
// is kept alive by any slice cut from it, so at most a slab per class
// more is held than the slices in use and free.
type recordPool struct {
	mu   sync.Mutex
	free [poolClasses][][]kgo.Record // free[c]: slices of class c's size
	slab [poolClasses][]kgo.Record   // slab[c]: what is left to cut slices of class c from
}

const (
	poolSlabBits        = 10
	poolSlabRecords     = 1 << poolSlabBits
	poolSubBits         = 3
	poolSubClasses      = 1 << poolSubBits
	poolMaxBits         = 30 // larger slices are not pooled
	poolClasses         = poolSlabBits + 1 + (poolMaxBits-poolSlabBits)*poolSubClasses
	poolRecordsPerClass = 1 << 16
	poolSlicesPerClass  = 64
)

func newRecordPool() *recordPool { return &recordPool{} }

// poolClass is the size class of a slice of n records and that class's
// size, the smallest class size >= n; c is -1 for a slice too large to
// pool.
func poolClass(n int) (c, size int) {
	if n <= poolSlabRecords {
		if n <= 1 {
			return 0, 1
		}
		c = bits.Len(uint(n - 1))
		return c, 1 << c
	}
	e := bits.Len(uint(n-1)) - 1 // 1<<e < n <= 1<<(e+1)
	if e >= poolMaxBits {
		return -1, n
	}
	step := 1 << (e - poolSubBits)
	k := (n - 1<<e + step - 1) / step // 1..poolSubClasses
	return poolSlabBits + 1 + (e-poolSlabBits)*poolSubClasses + k - 1, 1<<e + k*step
}

// GetRecords implements kgo.PoolRecords.
func (p *recordPool) GetRecords(n int) []kgo.Record {
	c, size := poolClass(n)
	if c < 0 {
		return make([]kgo.Record, n)
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	if free := p.free[c]; len(free) > 0 {
		s := free[len(free)-1]
		free[len(free)-1] = nil
		p.free[c] = free[:len(free)-1]
		return s[:n]
	}
	if size >= poolSlabRecords {
		return make([]kgo.Record, n, size)
	}
	if len(p.slab[c]) < size {
		p.slab[c] = make([]kgo.Record, poolSlabRecords)
	}
	s := p.slab[c][:n:size]
	p.slab[c] = p.slab[c][size:]
	return s
}

// PutRecords implements kgo.PoolRecords. A slice whose capacity is not
// one of the pool's class sizes (not one it made) is dropped.
func (p *recordPool) PutRecords(s []kgo.Record) {
	c, size := poolClass(cap(s))
	if c < 0 || cap(s) != size {
		return
	}
	p.mu.Lock()
	if len(p.free[c]) < max(poolRecordsPerClass/size, poolSlicesPerClass) {
		p.free[c] = append(p.free[c], s[:0])
	}
	p.mu.Unlock()
}
