package pipe

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/mqproject/mq/lib/client"
	"github.com/mqproject/mq/lib/record"
)

// ProduceConfig is one run of `mqpipe produce`.
type ProduceConfig struct {
	Broker string          // the -b value; empty: $MQ_BROKER, then the defaults
	TLS    client.TLSFiles // --tls-ca, --tls-cert, --tls-key
	Topic  string          // -t
	Files  []string        // inputs in order; none, or "-": standard input
	// WholeFiles (--whole-file) sends each input whole as one message, as
	// kcat -P FILE does, instead of one message per line.
	WholeFiles bool

	KeyDelim  string             // -K: split each line into key and value at the first DELIM
	Key       []byte             // -k: the key of every message (nil: none)
	Partition int32              // -p: the partition of every message; -1: by key
	Headers   []kgo.RecordHeader // -H: added to every message
	NUL       bool               // -0: messages end in NUL, not newline
	JSON      bool               // --format json: each line is a JSON envelope
	// NullEmpty (-Z, kcat's -Z) sends an empty value as a null one (a
	// tombstone, with a key) and an empty key as a null key; without it
	// both stay empty, which is not null.
	NullEmpty bool
	// Tombstones (--tombstone) are keys to send a tombstone (a null
	// value) for, in order, instead of reading any input.
	Tombstones [][]byte

	Compression string        // -z: none, gzip, snappy, lz4 or zstd
	Acks        string        // --acks: all, leader or none
	Linger      time.Duration // --linger: how long a partition's batch waits for more messages
	// AckTimeout (--ack-timeout) is how long a message may wait for its
	// acknowledgment before mqpipe gives up: exit 3 when the broker does
	// not answer, exit 1 when it answers but refuses (kgo retries such
	// errors, KAFKA_STORAGE_ERROR among them, without end); 0 waits
	// forever.
	AckTimeout time.Duration

	Report   bool // --report: print "partition offset" per acknowledged message
	Progress bool // draw a progress line on Stderr (a terminal)

	Stdin          io.Reader
	Stdout, Stderr io.Writer
}

// Acks are the --acks values.
const Acks = "all, leader or none"

// Codecs are the -z values.
const Codecs = "none, gzip, snappy, lz4 or zstd"

// maxDetails is how many failed messages are described one per line on
// stderr; the rest are only counted and listed by line number.
const maxDetails = 10

// ParseHeader reads a -H value, NAME=VALUE.
func ParseHeader(s string) (kgo.RecordHeader, error) {
	k, v, ok := strings.Cut(s, "=")
	if !ok || k == "" {
		return kgo.RecordHeader{}, client.Usagef("header %q: want NAME=VALUE", s)
	}
	return kgo.RecordHeader{Key: k, Value: []byte(v)}, nil
}

// producerOpts turns the producer flags into kgo options, or a usage error.
func (cfg *ProduceConfig) producerOpts() ([]kgo.Opt, error) {
	// A producer's timeouts: behind a frozen leader it moves on soon
	// after the cluster has elected another.
	opts := append(client.ProducerTimeouts(),
		kgo.DefaultProduceTopic(cfg.Topic),
		kgo.RecordPartitioner(Partitioner()),
		kgo.ProducerLinger(cfg.Linger),
		kgo.AllowAutoTopicCreation(),
	)
	switch cfg.Acks {
	case "all", "-1", "":
		opts = append(opts, kgo.RequiredAcks(kgo.AllISRAcks()))
	case "leader", "1":
		opts = append(opts, kgo.RequiredAcks(kgo.LeaderAck()), kgo.DisableIdempotentWrite())
	case "none", "0":
		opts = append(opts, kgo.RequiredAcks(kgo.NoAck()), kgo.DisableIdempotentWrite())
	default:
		return nil, client.Usagef("--acks %q: want %s", cfg.Acks, Acks)
	}
	var codec kgo.CompressionCodec
	switch cfg.Compression {
	case "none", "":
		codec = kgo.NoCompression()
	case "gzip":
		codec = kgo.GzipCompression()
	case "snappy":
		codec = kgo.SnappyCompression()
	case "lz4":
		codec = kgo.Lz4Compression()
	case "zstd":
		codec = kgo.ZstdCompression()
	default:
		return nil, client.Usagef("-z %q: want %s", cfg.Compression, Codecs)
	}
	opts = append(opts, kgo.ProducerBatchCompression(codec))
	if cfg.Linger < 0 {
		return nil, client.Usagef("--linger %v: must not be negative", cfg.Linger)
	}
	return opts, nil
}

func (cfg *ProduceConfig) check() error {
	switch {
	case cfg.Topic == "":
		return client.Usagef("produce: -t TOPIC is required")
	case cfg.KeyDelim != "" && cfg.Key != nil:
		return client.Usagef("produce: -K and -k exclude each other")
	case cfg.JSON && (cfg.KeyDelim != "" || cfg.Key != nil):
		return client.Usagef("produce: --format json takes keys from the JSON; drop -K and -k")
	case cfg.Partition < -1:
		return client.Usagef("produce: -p %d: partitions are numbered from 0", cfg.Partition)
	case cfg.JSON && cfg.NullEmpty:
		return client.Usagef(`produce: --format json writes a null as null ("value":null); drop -Z`)
	case cfg.Tombstones != nil && (cfg.JSON || cfg.KeyDelim != "" || cfg.Key != nil || cfg.NUL):
		return client.Usagef("produce: --tombstone reads no input; drop --format json, -K, -k and -0")
	case cfg.WholeFiles && cfg.NUL:
		return client.Usagef("produce: --whole-file sends each input as one message: drop -0")
	case cfg.Tombstones != nil && cfg.WholeFiles:
		return client.Usagef("produce: --tombstone reads no input; drop --whole-file")
	case cfg.Tombstones != nil && len(cfg.Files) > 0:
		return client.Usagef("produce: --tombstone reads no input; drop the FILE arguments")
	case cfg.AckTimeout < 0:
		return client.Usagef("produce: --ack-timeout %v: must not be negative", cfg.AckTimeout)
	}
	for _, k := range cfg.Tombstones {
		if len(k) == 0 {
			return client.Usagef(`produce: --tombstone "": a tombstone needs a key (compaction deletes the records of that key)`)
		}
	}
	return nil
}

// input is one source of messages.
type input struct {
	name string // "" for standard input
	r    io.Reader
}

// Produce sends every message of the inputs to the topic and waits until
// each is acknowledged. It returns nil only if all were; otherwise an
// *client.Error (ExitFailure) that counts the messages not acknowledged and
// lists their line numbers, after describing the first few on Stderr.
func Produce(ctx context.Context, cfg ProduceConfig) error {
	if err := cfg.check(); err != nil {
		return err
	}
	opts, err := cfg.producerOpts()
	if err != nil {
		return err
	}
	var inputs []input
	if cfg.Tombstones == nil {
		var closeInputs func()
		if inputs, closeInputs, err = openInputs(cfg.Files, cfg.Stdin); err != nil {
			return err
		}
		defer closeInputs()
	}

	addrs, err := client.ResolveTLS(cfg.Broker, cfg.TLS)
	if err != nil {
		return err
	}
	maxBytes, err := topicLimits(ctx, addrs, cfg.Topic, cfg.Partition)
	if err != nil {
		return err
	}
	// A topic may allow batches larger than a request mqpipe writes; its
	// batches are then capped to what fits in one (maxBatchBytes).
	capped := maxBytes > maxBatchBytes
	maxBytes = min(maxBytes, maxBatchBytes)
	// kgo counts the 4-byte length that precedes a batch in the request
	// against its limit; the broker counts the batch alone.
	opts = append(opts, kgo.BrokerMaxWriteBytes(maxWriteBytes), kgo.ProducerBatchMaxBytes(maxBytes+batchLengthPrefix))
	cl, err := client.NewClient(addrs, opts...)
	if err != nil {
		return err
	}
	defer cl.Close()

	t := newTracker(cfg, inputs, int(maxBytes))
	t.capped = capped
	defer t.stop()
	// The watch ends the wait for acknowledgments (Flush) when mqd stops
	// answering, or answers but acknowledges nothing for --ack-timeout.
	flushCtx, cancelFlush := context.WithCancel(ctx)
	defer cancelFlush()
	aborted := make(chan error, 1)
	stopWatch := t.watch(ctx, cl, addrs, func(err error) { aborted <- err; cancelFlush() })
	defer stopWatch()
	done := make(chan error, 1)
	go func() {
		if cfg.Tombstones != nil {
			done <- t.produceTombstones(ctx, cl)
			return
		}
		done <- t.produceAll(ctx, cl, inputs)
	}()
	select {
	case err = <-done:
	case <-ctx.Done():
		// The reader may be blocked on a pipe that never closes; leave it.
		return ctx.Err()
	case aerr := <-aborted:
		return t.giveUp(aerr)
	}
	if ferr := cl.Flush(flushCtx); ferr != nil {
		select {
		case aerr := <-aborted:
			return t.giveUp(aerr)
		default:
			return ferr
		}
	}
	t.finish()
	if err != nil {
		return client.Failf("%v (%s)", err, t.summary())
	}
	return t.result()
}

// Timing of the watch on outstanding messages.
const (
	// storageProbeAfter is how long the oldest outstanding message waits
	// before the watch asks the brokers whether the topic's partitions
	// fail to write (kgo retries KAFKA_STORAGE_ERROR without telling).
	storageProbeAfter = time.Second
	// maxWatchTick bounds the period of the watch.
	maxWatchTick = time.Second
)

// watch guards against waiting forever: kgo retries unacknowledged
// messages without end, when the broker is gone as when it answers but
// refuses them. Once the oldest outstanding message has waited
// storageProbeAfter it asks the brokers for the storage health of the
// topic's partitions and prints one line for each partition whose writes
// fail. Once it has waited cfg.AckTimeout (when set) it pings the broker
// and calls abort with the reason: unreachable (exit 3), or answering
// without acknowledging (exit 1). It returns the function that stops it.
func (t *tracker) watch(ctx context.Context, cl *kgo.Client, addrs []client.Addr, abort func(error)) (stop func()) {
	period := maxWatchTick
	probeAfter := storageProbeAfter
	if d := t.cfg.AckTimeout; d > 0 {
		period = min(max(d/4, 10*time.Millisecond), maxWatchTick)
		probeAfter = min(probeAfter, d/2)
	}
	ctx, cancel := context.WithCancel(ctx)
	finished := make(chan struct{})
	go func() {
		defer close(finished)
		tick := time.NewTicker(period)
		defer tick.Stop()
		storage := storageReporter{topic: t.cfg.Topic, stderr: t.cfg.Stderr}
		for {
			select {
			case <-ctx.Done():
				return
			case now := <-tick.C:
				waited := t.oldestWait(now)
				if waited < probeAfter {
					continue
				}
				storage.probe(ctx, cl)
				if t.cfg.AckTimeout <= 0 || waited < t.cfg.AckTimeout {
					continue
				}
				if err := client.Ping(ctx, cl, addrs); client.ExitCode(err) == client.ExitUnreachable {
					abort(err)
					return
				}
				why := "mqd answers but acknowledged none of them"
				if s := storage.last(); s != "" {
					why = "mqd answers but refuses them: " + s
				}
				abort(client.Failf("messages waited %v for an acknowledgment (--ack-timeout); %s", t.cfg.AckTimeout, why))
				return
			}
		}
	}()
	return func() { cancel(); <-finished }
}

// giveUp is the error for a run the watch ended: its reason, then which
// messages were not acknowledged. Messages still waiting count as failed;
// promises that fire later (when the client closes) change nothing. The
// report lines of the messages acknowledged before are printed.
func (t *tracker) giveUp(reason error) error {
	t.mu.Lock()
	t.gaveUp = true
	refs := make([]lineRef, 0, len(t.pending))
	for seq, p := range t.pending {
		refs = append(refs, p.ref)
		t.reports[seq] = report{}
	}
	t.pending = map[int64]pendingMsg{}
	sortLineRefs(refs)
	for _, ref := range refs {
		t.failed++
		if len(t.lines) < maxLineRefs {
			t.lines = append(t.lines, ref)
		}
	}
	if t.out != nil {
		t.printReportsLocked()
	}
	t.mu.Unlock()
	t.finish()
	code := client.ExitCode(reason)
	return &client.Error{Code: code, Err: fmt.Errorf("%v; %s", reason, t.summary())}
}

// oldestWait is how long the oldest message handed to the client and not
// settled has waited at now; 0 when there is none.
func (t *tracker) oldestWait(now time.Time) time.Duration {
	t.mu.Lock()
	defer t.mu.Unlock()
	for ; t.oldest < t.sent; t.oldest++ {
		if p, ok := t.pending[t.oldest]; ok {
			return now.Sub(p.at)
		}
	}
	return 0
}

// openInputs opens the named files ("-": standard input; none: standard
// input alone) before anything is sent, so a missing file sends nothing.
func openInputs(names []string, stdin io.Reader) ([]input, func(), error) {
	if len(names) == 0 {
		names = []string{"-"}
	}
	var files []*os.File
	closeAll := func() {
		for _, f := range files {
			f.Close()
		}
	}
	var inputs []input
	for _, name := range names {
		if name == "-" {
			inputs = append(inputs, input{r: stdin})
			continue
		}
		f, err := os.Open(name)
		if err != nil {
			closeAll()
			return nil, nil, client.Failf("%v", err)
		}
		files = append(files, f)
		inputs = append(inputs, input{name: name, r: f})
	}
	return inputs, closeAll, nil
}

// topicLimits checks that the broker answers and returns the largest
// record batch the topic accepts (max.message.bytes, else the broker's
// message.max.bytes for a topic yet to be created). It fails early when
// the topic does not exist and cannot be auto-created, or has no
// partition p.
func topicLimits(ctx context.Context, addrs []client.Addr, topic string, p int32) (int32, error) {
	cl, err := client.NewClient(addrs)
	if err != nil {
		return 0, err
	}
	defer cl.Close()
	if err := client.Ping(ctx, cl, addrs); err != nil {
		return 0, err
	}
	adm := kadm.NewClient(cl)
	details, err := listTopics(ctx, adm, topic)
	if err != nil {
		return 0, client.Failf("describe topic %s: %v", topic, err)
	}
	if td, ok := details[topic]; ok && td.Err == nil {
		if n := int32(len(td.Partitions)); p >= n {
			return 0, client.Failf("topic %s has %d partition%s; there is no partition %d", topic, n, plural(int(n)), p)
		}
		rcs, err := adm.DescribeTopicConfigs(ctx, topic)
		if err == nil {
			if v, ok := configValue(rcs, topic, "max.message.bytes"); ok {
				return v, nil
			}
		}
	}
	brokers, err := adm.ListBrokers(ctx)
	if err != nil || len(brokers) == 0 {
		return 0, client.Failf("list brokers: %v", err)
	}
	id := brokers[0].NodeID
	rcs, err := adm.DescribeBrokerConfigs(ctx, id)
	if err != nil {
		return 0, client.Failf("describe broker %d configs: %v", id, err)
	}
	if td, ok := details[topic]; !ok || errors.Is(td.Err, kerr.UnknownTopicOrPartition) {
		if v, ok := configString(rcs, strconv.Itoa(int(id)), "auto.create.topics.enable"); ok && v == "false" {
			return 0, client.Failf("topic %s does not exist (and auto.create.topics.enable is false)", topic)
		}
	}
	if v, ok := configValue(rcs, strconv.Itoa(int(id)), "message.max.bytes"); ok {
		return v, nil
	}
	return 1048588, nil // Kafka's default message.max.bytes
}

func configString(rcs kadm.ResourceConfigs, name, key string) (string, bool) {
	for _, rc := range rcs {
		if rc.Name != name || rc.Err != nil {
			continue
		}
		for _, c := range rc.Configs {
			if c.Key == key && c.Value != nil {
				return *c.Value, true
			}
		}
	}
	return "", false
}

func configValue(rcs kadm.ResourceConfigs, name, key string) (int32, bool) {
	s, ok := configString(rcs, name, key)
	if !ok {
		return 0, false
	}
	v, err := strconv.ParseInt(s, 10, 32)
	if err != nil || v <= 0 {
		return 0, false
	}
	return int32(v), true
}

func plural(n int) string {
	if n == 1 {
		return ""
	}
	return "s"
}

// lineRef names a message by its input and line number.
type lineRef struct {
	input int // index into the inputs
	line  int
}

// tracker counts messages and their fates, and prints --report lines in
// input order. Promises call it from kgo's promise goroutine, the reader
// from its own; mu guards everything below it.
type tracker struct {
	cfg      ProduceConfig
	maxBytes int
	// capped is set when maxBytes is mqpipe's own limit (maxBatchBytes),
	// below the topic's max.message.bytes.
	capped   bool
	names    []string // input names ("" for stdin), for line references; fixed
	progress *Progress

	mu       sync.Mutex
	pending  map[int64]pendingMsg // messages handed to the client and not yet settled, by sequence number
	sent     int64                // the sequence number of the next message handed to the client
	oldest   int64                // no message below it is pending (oldestWait moves it)
	gaveUp   bool                 // the watch gave up: later outcomes are ignored
	read     int                  // messages read
	failed   int                  // messages sent and not acknowledged
	lines    []lineRef            // the first failed ones, for the summary
	unsent   int                  // messages refused before they were sent (reject)
	unsentAt []lineRef            // the first of those, for the summary
	hinted   bool                 // the JSON envelope was explained (reject)
	details  int                  // failures described on stderr so far
	next     int64                // the sequence number of the next report line
	reports  map[int64]report
	out      *bufio.Writer // Stdout, for --report
	stopTick func()        // stops the report flusher; nil without --report
	stopOnce sync.Once
}

// pendingMsg is a message waiting for its acknowledgment.
type pendingMsg struct {
	ref lineRef
	at  time.Time // when it was handed to the client
}

// report is the outcome of one produced message, waiting for its turn to
// be printed.
type report struct {
	ok        bool
	partition int32
	offset    int64
}

// maxLineRefs bounds the failed line numbers kept for the summary.
const maxLineRefs = 10000

func newTracker(cfg ProduceConfig, inputs []input, maxBytes int) *tracker {
	t := &tracker{cfg: cfg, maxBytes: maxBytes, reports: map[int64]report{}, pending: map[int64]pendingMsg{}}
	for _, in := range inputs {
		t.names = append(t.names, in.name)
	}
	if cfg.Progress {
		t.progress = NewProgress(cfg.Stderr, nil)
	}
	if cfg.Report {
		t.out = bufio.NewWriterSize(cfg.Stdout, 64<<10)
		// Report lines of a slow stream get out within a moment.
		tick := time.NewTicker(100 * time.Millisecond)
		stopTick := make(chan struct{})
		go func() {
			for {
				select {
				case <-tick.C:
					t.mu.Lock()
					t.out.Flush()
					t.mu.Unlock()
				case <-stopTick:
					return
				}
			}
		}()
		t.stopTick = func() {
			tick.Stop()
			close(stopTick)
		}
	}
	return t
}

func (t *tracker) stop() {
	t.stopOnce.Do(func() {
		if t.stopTick != nil {
			t.stopTick()
		}
	})
}

// produceAll reads every input and hands its messages to the client. It
// returns the first error reading an input; messages already read are
// still delivered.
func (t *tracker) produceAll(ctx context.Context, cl *kgo.Client, inputs []input) error {
	var delim byte = '\n'
	if t.cfg.NUL {
		delim = 0
	}
	limit := t.maxBytes
	if t.cfg.JSON {
		limit = 6*t.maxBytes + 1<<20 // escapes and base64 make JSON larger than the bytes it carries
	}
	var a arena
	if t.cfg.WholeFiles {
		return t.produceWhole(ctx, cl, inputs, limit)
	}
	for i, in := range inputs {
		lr := NewLineReader(in.r, delim, limit)
		for {
			msg, err := lr.Next()
			if err == io.EOF {
				break
			}
			var tooLarge *TooLargeError
			if errors.As(err, &tooLarge) {
				t.count()
				t.reject(lineRef{i, tooLarge.Line}, t.tooLarge(tooLarge.Size, nil))
				continue
			}
			if err != nil {
				return fmt.Errorf("read %s: %w", t.inputName(i), err)
			}
			if t.cfg.JSON && len(bytes.TrimSpace(msg)) == 0 {
				continue // blank lines between JSON objects are not messages
			}
			t.count()
			rec, err := t.record(msg, &a)
			if err != nil {
				t.reject(lineRef{i, lr.Line()}, err)
				continue
			}
			t.send(ctx, cl, rec, lineRef{i, lr.Line()})
		}
	}
	return nil
}

// produceWhole hands the client each input as one message (--whole-file);
// an input over limit is refused unread past it. Failures name the input
// as its line 1.
func (t *tracker) produceWhole(ctx context.Context, cl *kgo.Client, inputs []input, limit int) error {
	for i, in := range inputs {
		msg, err := io.ReadAll(io.LimitReader(in.r, int64(limit)+1))
		if err != nil {
			return fmt.Errorf("read %s: %w", t.inputName(i), err)
		}
		t.count()
		if len(msg) > limit {
			t.reject(lineRef{i, 1}, t.tooLarge(len(msg), nil))
			continue
		}
		var a arena
		rec, err := t.record(msg, &a)
		if err != nil {
			t.reject(lineRef{i, 1}, err)
			continue
		}
		t.send(ctx, cl, rec, lineRef{i, 1})
	}
	return nil
}

// produceTombstones hands the client a tombstone for each --tombstone key;
// failures name the n-th key as line n.
func (t *tracker) produceTombstones(ctx context.Context, cl *kgo.Client) error {
	for i, key := range t.cfg.Tombstones {
		t.count()
		rec := &kgo.Record{Key: key, Partition: t.cfg.Partition}
		if len(t.cfg.Headers) > 0 {
			rec.Headers = append(rec.Headers, t.cfg.Headers...)
		}
		t.send(ctx, cl, rec, lineRef{0, i + 1})
	}
	return nil
}

// send hands rec, read at ref, to the client.
func (t *tracker) send(ctx context.Context, cl *kgo.Client, rec *kgo.Record, ref lineRef) {
	t.mu.Lock()
	s := t.sent
	t.sent++
	t.pending[s] = pendingMsg{ref: ref, at: time.Now()}
	t.mu.Unlock()
	t.progress.Add(len(rec.Value))
	cl.Produce(ctx, rec, func(r *kgo.Record, err error) { t.acked(s, ref, r, err) })
}

// record builds the record for one message.
func (t *tracker) record(msg []byte, a *arena) (*kgo.Record, error) {
	var rec *kgo.Record
	if t.cfg.JSON {
		var err error
		if rec, err = DecodeJSON(msg); err != nil {
			return nil, envelopeError{err}
		}
	} else {
		rec = &kgo.Record{Partition: -1}
		value := a.copy(msg)
		if t.cfg.KeyDelim != "" {
			if i := bytes.Index(value, []byte(t.cfg.KeyDelim)); i >= 0 {
				rec.Key = value[:i:i]
				value = value[i+len(t.cfg.KeyDelim):]
			}
		} else if t.cfg.Key != nil {
			rec.Key = t.cfg.Key
		}
		rec.Value = value
		if t.cfg.NullEmpty {
			if len(rec.Key) == 0 {
				rec.Key = nil
			}
			if len(rec.Value) == 0 {
				rec.Value = nil
			}
		}
	}
	if t.cfg.Partition >= 0 {
		rec.Partition = t.cfg.Partition
	}
	if len(t.cfg.Headers) > 0 {
		rec.Headers = append(rec.Headers, t.cfg.Headers...)
	}
	return rec, nil
}

// maxWriteBytes is the largest request mqpipe writes: Kafka's default
// socket.request.max.bytes (100 MiB), which is also kgo's default and
// what a broker reads unless told otherwise. maxBatchBytes is the largest
// batch it sends, leaving room in the request for its header and the
// topic's name: a topic whose max.message.bytes is larger gets batches of
// this size.
const (
	maxWriteBytes = 100 << 20
	maxBatchBytes = maxWriteBytes - 64<<10
)

// batchLengthPrefix is the size of the length of a record batch in a
// produce request, which kgo's ProducerBatchMaxBytes counts and the
// broker's max.message.bytes does not.
const batchLengthPrefix = 4

// tooLarge explains the refusal of a message of size bytes (key and
// value) as too large for the topic: max.message.bytes counts the whole
// record batch, so a value must be smaller by the batch header and the
// record's framing (about 75 bytes for a 1 MB value without key or
// headers). rec is the record built for the message, nil for a line too
// long to be read, whose key and headers are then those of every message
// (-k, -H), or part of the line (-K).
func (t *tracker) tooLarge(size int, rec *kgo.Record) error {
	key, headers := t.cfg.Key, t.cfg.Headers
	if rec != nil {
		key, headers = rec.Key, rec.Headers
	}
	hs := make([]record.RecordHeader, len(headers))
	for i, h := range headers {
		hs[i] = record.RecordHeader{Key: h.Key, Value: h.Value}
	}
	limit := fmt.Sprintf("max.message.bytes (%d) limits the whole record batch, a %d-byte header and each record with its framing",
		t.maxBytes, record.HeaderSize)
	if t.capped {
		limit = fmt.Sprintf("mqpipe sends batches of at most %d bytes (one request of %d), a %d-byte header and each record with its framing",
			t.maxBytes, maxWriteBytes, record.HeaderSize)
	}
	what := "message"
	if len(key) > 0 {
		what = "message (key and value)"
	}
	fit := record.MaxValueLen(t.maxBytes, key, hs)
	if rec != nil && len(rec.Value) <= fit {
		// It fitted as sent: the broker's copy, in the topic's
		// compression.type, did not.
		return fmt.Errorf("%s of %d bytes refused by topic %s: %s, and its batch did not fit once stored in the topic's compression.type",
			what, size, t.cfg.Topic, limit)
	}
	var fits string
	switch {
	case rec == nil && t.cfg.KeyDelim != "":
		fits = fmt.Sprintf("a key and value of at most about %d bytes together fit", fit)
	case len(key) > 0 && len(hs) > 0:
		fits = fmt.Sprintf("with this key and these headers a value of at most %d bytes fits", fit)
	case len(key) > 0:
		fits = fmt.Sprintf("with this key a value of at most %d bytes fits", fit)
	case len(hs) > 0:
		fits = fmt.Sprintf("with these headers a value of at most %d bytes fits", fit)
	default:
		fits = fmt.Sprintf("a value of at most %d bytes fits", fit)
	}
	return fmt.Errorf("%s of %d bytes does not fit in topic %s: %s, so %s", what, size, t.cfg.Topic, limit, fits)
}

func (t *tracker) count() {
	t.mu.Lock()
	t.read++
	t.mu.Unlock()
}

// acked is the promise of the message with sequence number seq.
func (t *tracker) acked(seq int64, ref lineRef, r *kgo.Record, err error) {
	if errors.Is(err, kerr.MessageTooLarge) {
		err = t.tooLarge(len(r.Key)+len(r.Value), r)
	} else if err != nil && r.Partition >= 0 && strings.Contains(err.Error(), "partitioning choice") {
		err = fmt.Errorf("topic %s has no partition %d", t.cfg.Topic, r.Partition)
	}
	t.mu.Lock()
	gaveUp := t.gaveUp
	if !gaveUp {
		delete(t.pending, seq)
		if t.out != nil {
			t.reports[seq] = report{ok: err == nil, partition: r.Partition, offset: r.Offset}
			t.printReportsLocked()
		}
	}
	t.mu.Unlock()
	if err != nil && !gaveUp {
		t.fail(ref, err)
	}
}

// printReportsLocked prints the report lines whose turn has come.
func (t *tracker) printReportsLocked() {
	for {
		rep, ok := t.reports[t.next]
		if !ok {
			return
		}
		delete(t.reports, t.next)
		t.next++
		if rep.ok {
			var b [32]byte
			line := strconv.AppendInt(b[:0], int64(rep.partition), 10)
			line = append(line, ' ')
			line = strconv.AppendInt(line, rep.offset, 10)
			line = append(line, '\n')
			t.out.Write(line)
		}
	}
}

// fail counts a message that was sent and not acknowledged and describes
// it, unless enough have been described already.
func (t *tracker) fail(ref lineRef, err error) {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.failed++
	if len(t.lines) < maxLineRefs {
		t.lines = append(t.lines, ref)
	}
	t.describeLocked(ref, err)
}

// envelopeError is a line that --format json could not read as the JSON
// envelope.
type envelopeError struct{ err error }

func (e envelopeError) Error() string { return e.err.Error() }
func (e envelopeError) Unwrap() error { return e.err }

// envelopeHint ends the first envelopeError described: plain JSON lines
// are a common input, and the decoder's "unknown field" alone does not
// say what was expected.
const envelopeHint = ` (--format json reads mqpipe's JSON envelope, one object per line such as {"key":"k","value":"v","headers":[]}: see "JSON envelope" in mqpipe --help; to send each line as it is, leave --format json out)`

// reject counts a message refused before it was sent (a line too long,
// a line that is not a JSON envelope) and describes it: it was never
// offered to the broker, so it is "not sent", not "not acknowledged".
func (t *tracker) reject(ref lineRef, err error) {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.unsent++
	if len(t.unsentAt) < maxLineRefs {
		t.unsentAt = append(t.unsentAt, ref)
	}
	if errors.As(err, new(envelopeError)) && !t.hinted {
		t.hinted = true
		err = fmt.Errorf("%w%s", err, envelopeHint)
	}
	t.describeLocked(ref, err)
}

// describeLocked prints a failed message's line, unless enough have been.
func (t *tracker) describeLocked(ref lineRef, err error) {
	t.details++
	switch {
	case t.details <= maxDetails:
		fmt.Fprintf(t.cfg.Stderr, "mqpipe: %s: %v\n", t.refName(ref), err)
	case t.details == maxDetails+1:
		fmt.Fprintf(t.cfg.Stderr, "mqpipe: more messages failed; the summary lists their lines\n")
	}
}

// finish flushes the report and ends the progress line.
func (t *tracker) finish() {
	t.stop()
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.out != nil {
		t.out.Flush()
	}
	t.progress.Done()
}

// result is nil when every message was acknowledged.
func (t *tracker) result() error {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.failed == 0 && t.unsent == 0 {
		return nil
	}
	return client.Failf("%s", t.summaryLocked())
}

func (t *tracker) summary() string {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.summaryLocked()
}

func (t *tracker) summaryLocked() string {
	if t.failed == 0 && t.unsent == 0 {
		return fmt.Sprintf("all %d message%s read were acknowledged", t.read, plural(t.read))
	}
	var parts []string
	if t.unsent > 0 {
		parts = append(parts, fmt.Sprintf("%d of %d message%s not sent: %s", t.unsent, t.read, plural(t.read), t.lineList(t.unsentAt, t.unsent)))
	}
	if t.failed > 0 {
		parts = append(parts, fmt.Sprintf("%d of %d message%s not acknowledged: %s", t.failed, t.read, plural(t.read), t.lineList(t.lines, t.failed)))
	}
	return strings.Join(parts, "; ")
}

// lineList lists the lines kept of count failed ones, consecutive ones as
// ranges: "lines 3, 7-9", or "a.txt:3, b.txt:1-2" for several inputs.
func (t *tracker) lineList(kept []lineRef, count int) string {
	refs := append([]lineRef(nil), kept...)
	sortLineRefs(refs)
	const maxRanges = 20
	var parts []string
	for i := 0; i < len(refs); {
		j := i
		for j+1 < len(refs) && refs[j+1].input == refs[i].input && refs[j+1].line == refs[j].line+1 {
			j++
		}
		if len(parts) == maxRanges {
			parts = append(parts, "…")
			break
		}
		p := t.refPrefix(refs[i].input) + strconv.Itoa(refs[i].line)
		if j > i {
			p += "-" + strconv.Itoa(refs[j].line)
		}
		parts = append(parts, p)
		i = j + 1
	}
	if len(kept) < count && (len(parts) == 0 || parts[len(parts)-1] != "…") {
		parts = append(parts, "…")
	}
	word := "line "
	if t.cfg.Tombstones != nil {
		word = "tombstone "
	}
	if len(kept) > 1 {
		word = word[:len(word)-1] + "s "
	}
	if len(t.names) > 1 {
		word = ""
	}
	return word + strings.Join(parts, ", ")
}

// refName is "line 3", or "a.txt:3" when there are several inputs, or
// `tombstone 3 (key "k")` for the third --tombstone.
func (t *tracker) refName(ref lineRef) string {
	if t.cfg.Tombstones != nil && ref.line >= 1 && ref.line <= len(t.cfg.Tombstones) {
		return fmt.Sprintf("tombstone %d (key %q)", ref.line, t.cfg.Tombstones[ref.line-1])
	}
	if p := t.refPrefix(ref.input); p != "" {
		return p + strconv.Itoa(ref.line)
	}
	return "line " + strconv.Itoa(ref.line)
}

func (t *tracker) refPrefix(i int) string {
	if len(t.names) <= 1 {
		return ""
	}
	return t.inputName(i) + ":"
}

func (t *tracker) inputName(i int) string {
	if i < len(t.names) && t.names[i] != "" {
		return t.names[i]
	}
	return "stdin"
}

func sortLineRefs(refs []lineRef) {
	slices.SortFunc(refs, func(a, b lineRef) int {
		if a.input != b.input {
			return a.input - b.input
		}
		return a.line - b.line
	})
}

// arena hands out copies of messages carved from large blocks, so that
// reading a million short lines makes a few hundred allocations, not a
// million. kgo keeps each value until it is acknowledged; a block is
// freed when all its values are.
type arena struct{ block []byte }

const arenaBlock = 256 << 10

func (a *arena) copy(b []byte) []byte {
	if len(b) == 0 {
		return []byte{} // an empty message, not a null one
	}
	if len(b) > arenaBlock/16 {
		return append(make([]byte, 0, len(b)), b...)
	}
	if cap(a.block)-len(a.block) < len(b) {
		a.block = make([]byte, 0, arenaBlock)
	}
	start := len(a.block)
	a.block = append(a.block, b...)
	return a.block[start:len(a.block):len(a.block)]
}
