package pipe

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"strconv"
	"syscall"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/mqproject/mq/lib/client"
)

// ConsumeConfig is one run of `mqpipe consume`.
type ConsumeConfig struct {
	Broker     string          // the -b value; empty: $MQ_BROKER, then the defaults
	TLS        client.TLSFiles // --tls-ca, --tls-cert, --tls-key
	Topics     []string        // -t: names, and regexes that start with ^ (topicSpec)
	Partitions []int32         // -p: only these partitions of each topic; none: all
	Offset     OffsetSpec      // -o: where to start
	Count      int64           // -c: stop after this many messages; 0: no limit
	Exit       bool            // -e: stop at the high-water marks seen at the start
	// Until (-o e@TIME): stop each partition before its first record at
	// or after this time, or at the high-water mark it had at the start
	// when it has none (as -e); zero: no such end. Not with a group.
	Until time.Time

	Format       *Format // -f; nil: DefaultFormat (or "%s\0" with NUL)
	JSON         bool    // --json: print JSON envelopes (AppendJSON)
	KcatJSON     bool    // -J: print records as kcat -J does (AppendKcatJSON)
	ShowNull     bool    // -Z: print a null key, value or header value as NullText (JSON prints null anyway)
	NUL          bool    // -0: end each message with NUL instead of newline
	LineBuffered bool    // flush after every message (else after each fetch)

	Group          string        // -g: join this consumer group and commit
	Commit         string        // --commit: CommitWritten (default), CommitPeriodic or CommitNone
	SessionTimeout time.Duration // --session-timeout; 0: DefaultSessionTimeout

	Stdout, Stderr io.Writer
}

func (cfg *ConsumeConfig) check() error {
	switch {
	case len(cfg.Topics) == 0:
		return client.Usagef("consume: -t TOPIC is required")
	case cfg.JSON && cfg.Format != nil:
		return client.Usagef("consume: --json and -f exclude each other")
	case cfg.KcatJSON && cfg.Format != nil:
		return client.Usagef("consume: -J and -f exclude each other")
	case cfg.KcatJSON && cfg.JSON:
		return client.Usagef("consume: -J (kcat's JSON) and --json (mqpipe's envelope) exclude each other")
	case cfg.NUL && cfg.Format != nil:
		return client.Usagef(`consume: -0 and -f exclude each other (end the format with \0)`)
	case cfg.Count < 0:
		return client.Usagef("consume: -c %d: want a count of messages", cfg.Count)
	case cfg.Offset.Kind == OffsetStored && cfg.Group == "":
		return client.Usagef("consume: -o stored needs -g GROUP")
	case cfg.Group != "" && len(cfg.Partitions) > 0:
		return client.Usagef("consume: -p and -g exclude each other (the group assigns partitions)")
	case cfg.Group != "" && !cfg.Until.IsZero():
		return client.Usagef("consume: -o e@TIME reads the partitions directly: not with -g")
	case cfg.Group == "" && cfg.Commit != "":
		return client.Usagef("consume: --commit needs -g GROUP")
	case cfg.Commit != "" && cfg.Commit != CommitWritten && cfg.Commit != CommitPeriodic && cfg.Commit != CommitNone:
		return client.Usagef("consume: --commit %q: want %s", cfg.Commit, CommitModes)
	}
	if _, err := parseTopics(cfg.Topics); err != nil {
		return err
	}
	for _, p := range cfg.Partitions {
		if p < 0 {
			return client.Usagef("consume: -p %d: partitions are numbered from 0", p)
		}
	}
	return nil
}

// writer prints records in the chosen format. The consume loop owns it;
// brokers is also updated by kgo's fetch goroutines, and locks.
type writer struct {
	out           *bufio.Writer
	format        *Format
	json          bool
	kcat          bool
	brokers       *fetchBrokers            // with kcat: which broker each partition was fetched from
	polledBrokers map[topicPartition]int32 // with kcat: those of the last poll's partitions
	broker        int32                    // with kcat: the broker of the partition being written
	term          byte
	lineBuffered  bool
	buf           []byte
}

func newWriter(cfg *ConsumeConfig) *writer {
	w := &writer{out: bufio.NewWriterSize(cfg.Stdout, 64<<10), format: cfg.Format, json: cfg.JSON, kcat: cfg.KcatJSON, broker: -1, term: '\n', lineBuffered: cfg.LineBuffered}
	if w.kcat {
		w.brokers, w.polledBrokers = newFetchBrokers(), map[topicPartition]int32{}
	}
	if cfg.NUL {
		w.term = 0
	}
	if w.format == nil && !w.json && !w.kcat {
		if cfg.NUL {
			w.format, _ = ParseFormat(`%s\0`)
		} else {
			w.format, _ = ParseFormat(DefaultFormat)
		}
	}
	if w.format != nil && cfg.ShowNull {
		w.format = w.format.WithNull(NullText)
	}
	return w
}

// clientOpts are the options the writer needs of the client that fetches
// the records: with kcat, the hook that notes their brokers.
func (w *writer) clientOpts() []kgo.Opt {
	if w.brokers == nil {
		return nil
	}
	return []kgo.Opt{kgo.WithHooks(w.brokers)}
}

// polled is called as soon as a poll returns, before any of its records
// is written: it notes the brokers its partitions were fetched from, which
// a later fetch may change.
func (w *writer) polled(fetches kgo.Fetches) {
	if w.kcat {
		w.brokers.snapshot(fetches, w.polledBrokers)
	}
}

// partition is called before the records of one partition of a poll are
// written.
func (w *writer) partition(topic string, partition int32) {
	if !w.kcat {
		return
	}
	if id, ok := w.polledBrokers[topicPartition{topic, partition}]; ok {
		w.broker = id
	} else {
		w.broker = -1
	}
}

func (w *writer) write(r *kgo.Record) error {
	switch {
	case w.json:
		w.buf = append(AppendJSON(w.buf[:0], r), w.term)
	case w.kcat:
		w.buf = append(AppendKcatJSON(w.buf[:0], r, w.broker), w.term)
	default:
		w.buf = w.format.Append(w.buf[:0], r)
	}
	if _, err := w.out.Write(w.buf); err != nil {
		return err
	}
	if w.lineBuffered {
		return w.out.Flush()
	}
	return nil
}

func (w *writer) flush() error { return w.out.Flush() }

// outputError turns an error writing stdout into Consume's result: a
// closed pipe (| head) ends the command quietly and successfully.
func outputError(err error) error {
	if errors.Is(err, syscall.EPIPE) {
		return nil
	}
	return client.Failf("write output: %v", err)
}

// partitionSet is the partitions of each topic.
type partitionSet map[string][]int32

// Consume prints the records of the topics to Stdout until the context is
// cancelled, -c messages were printed, (-e) every partition reached the
// high-water mark it had when Consume started, or nobody reads Stdout any
// more. Records of one partition are printed in offset order. Without a
// group it reads the partitions directly and commits nothing; with one,
// see consumeGroup.
//
// A closed output (| head) ends Consume successfully: at the next write
// that fails with EPIPE, or at once when Stdout is a pipe or Unix socket
// whose reader closed it (watchOutput), also while no record comes. So
// does a stop by SIGTERM (client.ErrTerminated), once what was written is
// flushed and, with a group, committed.
func Consume(ctx context.Context, cfg ConsumeConfig) error {
	if err := cfg.check(); err != nil {
		return err
	}
	ctx, cancel := context.WithCancelCause(ctx)
	defer cancel(nil)
	stop := watchOutput(cfg.Stdout, cancel)
	err := consume(ctx, cfg)
	stop()
	switch cause := context.Cause(ctx); {
	case errors.Is(cause, errOutputClosed):
		return nil // what was written is committed (consumeGroup's finish)
	case errors.Is(cause, client.ErrTerminated) && errors.Is(err, context.Canceled):
		// Stopped by SIGTERM, output flushed and, with -g, committed: a
		// clean stop, as exec's, and not a failed unit under systemd.
		return nil
	}
	return err
}

// connectAdmin resolves the -b addresses (and the TLS flags) and returns a client that
// reached the broker, for the tool's admin requests; the caller closes it.
func connectAdmin(ctx context.Context, broker string, files client.TLSFiles) ([]client.Addr, *kgo.Client, *kadm.Client, error) {
	addrs, err := client.ResolveTLS(broker, files)
	if err != nil {
		return nil, nil, nil, err
	}
	admCl, err := client.NewClient(addrs)
	if err != nil {
		return nil, nil, nil, err
	}
	if err := client.Ping(ctx, admCl, addrs); err != nil {
		admCl.Close()
		return nil, nil, nil, err
	}
	return addrs, admCl, kadm.NewClient(admCl), nil
}

func consume(ctx context.Context, cfg ConsumeConfig) error {
	if !cfg.Until.IsZero() {
		cfg.Exit = true // an end at a time is an end, as -e's
	}
	addrs, admCl, adm, err := connectAdmin(ctx, cfg.Broker, cfg.TLS)
	if err != nil {
		return err
	}
	defer admCl.Close()
	spec, err := parseTopics(cfg.Topics)
	if err != nil {
		return err
	}
	parts, err := topicPartitions(ctx, adm, spec, cfg.Partitions)
	if err != nil {
		return err
	}
	// With -e, "the end" is that of the topics that exist now: a regex is
	// resolved once, here. Without, it follows topics created later.
	follow := !cfg.Exit && len(spec.patterns) > 0
	if cfg.Group != "" {
		if cfg.Exit {
			if len(parts) == 0 {
				return nil // no topic matched: nothing to read
			}
			spec = topicSpec{names: parts.names()}
		}
		return consumeGroup(ctx, cfg, addrs, adm, spec)
	}
	starts, ends, err := startOffsets(ctx, adm, parts, cfg.Offset, waitNotice(cfg.Stderr))
	if err != nil {
		return err
	}
	if !cfg.Until.IsZero() {
		if err := endAtTime(ctx, adm, parts, cfg.Until, ends); err != nil {
			return err
		}
	}
	admCl.Close()

	// With -e, a partition is done once its consumed offset reaches the
	// high-water mark it had now; one already there is done at once.
	remaining := map[string]map[int32]int64{}
	consume := map[string]map[int32]kgo.Offset{}
	for t, ps := range parts {
		for _, p := range ps {
			start, hwm := starts[t][p], ends[t][p]
			if cfg.Exit && start >= hwm {
				continue
			}
			if consume[t] == nil {
				consume[t] = map[int32]kgo.Offset{}
				remaining[t] = map[int32]int64{}
			}
			consume[t][p] = kgo.NewOffset().At(start)
			remaining[t][p] = hwm
		}
	}
	if len(consume) == 0 && !follow {
		return nil
	}
	pos := positions{}
	for t, ps := range consume {
		for p := range ps {
			pos.set(t, p, starts[t][p])
		}
	}
	w := newWriter(&cfg)
	cl, err := client.NewClient(addrs, append([]kgo.Opt{
		kgo.ConsumePartitions(consume),
		kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()),
		kgo.KeepRetryableFetchErrors(),
		// A transaction's marker is an offset of its own, which -e must
		// pass to reach a high-water mark after it: delivered, not
		// written.
		kgo.KeepControlRecords(),
	}, w.clientOpts()...)...)
	if err != nil {
		return err
	}
	defer cl.Close()
	if follow {
		fctx, stop := context.WithCancel(ctx)
		done := make(chan struct{})
		go func() { // owns parts from here on
			defer close(done)
			followTopics(fctx, cl, &cfg, spec, parts)
		}()
		defer func() {
			stop()
			<-done
		}()
	}

	var printed int64
	for {
		fetches := cl.PollFetches(ctx)
		w.polled(fetches)
		if ctx.Err() != nil {
			if err := w.flush(); err != nil {
				return outputError(err)
			}
			return ctx.Err()
		}
		var werr error
		done := false
		fetches.EachPartition(func(fp kgo.FetchTopicPartition) {
			if werr != nil || done {
				return
			}
			hwm, active := remaining[fp.Topic][fp.Partition]
			if cfg.Exit && !active {
				return // finished; records past the mark are not ours
			}
			w.partition(fp.Topic, fp.Partition)
			for _, r := range fp.Records {
				if cfg.Exit && r.Offset >= hwm {
					break
				}
				if r.Attrs.IsControl() {
					pos.set(r.Topic, r.Partition, r.Offset+1)
					if cfg.Exit && r.Offset+1 >= hwm {
						break
					}
					continue
				}
				if werr = w.write(r); werr != nil {
					return
				}
				pos.set(r.Topic, r.Partition, r.Offset+1)
				printed++
				if cfg.Count > 0 && printed >= cfg.Count {
					done = true
					return
				}
				if cfg.Exit && r.Offset+1 >= hwm {
					break
				}
			}
			if cfg.Exit && len(fp.Records) > 0 && fp.Records[len(fp.Records)-1].Offset+1 >= hwm {
				delete(remaining[fp.Topic], fp.Partition)
				cl.PauseFetchPartitions(map[string][]int32{fp.Topic: {fp.Partition}})
			}
		})
		if werr == nil {
			werr = w.flush()
		}
		if werr != nil {
			return outputError(werr)
		}
		if done || cfg.Exit && allDone(remaining) {
			return nil
		}
		// Errors after the records: what a poll delivered before an error
		// (the good records before damage on the broker) is all written.
		if err := fetchError(fetches, pos); err != nil {
			return err
		}
	}
}

func allDone(remaining map[string]map[int32]int64) bool {
	for _, ps := range remaining {
		if len(ps) > 0 {
			return false
		}
	}
	return true
}

// positions are the offsets of the next records to print, by topic and
// partition, for the errors that name where consuming stopped.
type positions map[string]map[int32]int64

func (ps positions) set(topic string, partition int32, offset int64) {
	if ps[topic] == nil {
		ps[topic] = map[int32]int64{}
	}
	ps[topic][partition] = offset
}

// at is " at offset N", or "" when the position is not known.
func (ps positions) at(topic string, partition int32) string {
	if o, ok := ps[topic][partition]; ok {
		return " at offset " + strconv.FormatInt(o, 10)
	}
	return ""
}

// fetchError is the first error of a poll that consuming cannot get past.
// kgo retries the retriable ones itself (the client keeps them in the
// fetches only so that this can see KAFKA_STORAGE_ERROR, kgo.
// KeepRetryableFetchErrors): a broker that cannot read its log will not
// read it on the next try, so that one ends the run, naming the partition
// and the offset.
func fetchError(fetches kgo.Fetches, pos positions) error {
	var first error
	fetches.EachError(func(t string, p int32, err error) {
		if first == nil && errors.Is(err, kerr.KafkaStorageError) {
			first = client.Failf("consume %s partition %d%s: %v", t, p, pos.at(t, p), err)
			return
		}
		if first != nil || kerr.IsRetriable(err) || errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded) ||
			sessionMends(err) {
			return
		}
		where := fmt.Sprintf("%s partition %d%s", t, p, pos.at(t, p))
		switch {
		case errors.Is(err, kerr.UnknownTopicOrPartition):
			first = client.Failf("topic %s partition %d: no longer exists", t, p)
		case errors.Is(err, kerr.InvalidRecord):
			// What mqd answers for a damaged range of its log.
			first = client.Failf("consume %s: the broker's copy of the records there is damaged and not served (INVALID_RECORD); mqctl topic describe %s shows the damaged range", where, t)
		default:
			first = client.Failf("consume %s: %v", where, err)
		}
	})
	return first
}

// sessionMends reports whether err is kgo's notice that the group
// session ended for a reason that joining again mends, which kgo does by
// itself: the connection to the coordinator broke or could not be made
// (its broker crashed or restarts), or the coordinator no longer knows
// this member or its generation (it expired the member, or took the group
// over from a record older than the member's generation).
func sessionMends(err error) bool {
	var session *kgo.ErrGroupSession
	if !errors.As(err, &session) {
		return false
	}
	cause := session.Err
	return client.IsUnreachable(cause) || errors.Is(cause, io.EOF) || errors.Is(cause, io.ErrUnexpectedEOF) ||
		errors.Is(cause, kerr.UnknownMemberID) || errors.Is(cause, kerr.IllegalGeneration)
}

// startOffsets lists each partition's log start offset and high-water
// mark (and, for @TIME, the offset at that time) and returns where to
// start reading and the high-water marks. A partition whose leader is not
// available yet (a restarted mqd opening its logs, an election) is asked
// again (listOffsets); waiting, when not nil, is told once.
func startOffsets(ctx context.Context, adm *kadm.Client, parts partitionSet, spec OffsetSpec, waiting func(error)) (starts, ends map[string]map[int32]int64, err error) {
	if len(parts) == 0 {
		return map[string]map[int32]int64{}, map[string]map[int32]int64{}, nil // listing no topic would list them all
	}
	topics := parts.names()
	list := func(what string, f func(context.Context) (kadm.ListedOffsets, error)) (kadm.ListedOffsets, error) {
		return listOffsets(ctx, what, f, waiting)
	}
	logStarts, err := list("start", func(ctx context.Context) (kadm.ListedOffsets, error) { return adm.ListStartOffsets(ctx, topics...) })
	if err != nil {
		return nil, nil, err
	}
	hwms, err := list("end", func(ctx context.Context) (kadm.ListedOffsets, error) { return adm.ListEndOffsets(ctx, topics...) })
	if err != nil {
		return nil, nil, err
	}
	var atTime kadm.ListedOffsets
	if spec.Kind == OffsetTime {
		atTime, err = list("time", func(ctx context.Context) (kadm.ListedOffsets, error) {
			return adm.ListOffsetsAfterMilli(ctx, spec.Time.UnixMilli(), topics...)
		})
		if err != nil {
			return nil, nil, err
		}
	}
	starts, ends = map[string]map[int32]int64{}, map[string]map[int32]int64{}
	for t, ps := range parts {
		starts[t], ends[t] = map[int32]int64{}, map[int32]int64{}
		for _, p := range ps {
			ls, ok1 := logStarts.Lookup(t, p)
			hw, ok2 := hwms.Lookup(t, p)
			if !ok1 || !ok2 {
				return nil, nil, client.Failf("no offsets listed for topic %s partition %d", t, p)
			}
			po := PartitionOffsets{LogStart: ls.Offset, HighWatermark: hw.Offset, AtTime: -1}
			if at, ok := atTime.Lookup(t, p); ok {
				po.AtTime = at.Offset
			}
			starts[t][p] = spec.Start(po)
			ends[t][p] = hw.Offset
		}
	}
	return starts, ends, nil
}

// listOffsets calls list until it answers for every partition, asking
// again while the answer is retriable (client.Retry: LEADER_NOT_AVAILABLE,
// NOT_LEADER_OR_FOLLOWER…) for up to client.RetryTimeout; waiting, when
// not nil, is told of the first retriable answer. what names the offsets
// ("start", "end", "time") in the error.
func listOffsets(ctx context.Context, what string, list func(context.Context) (kadm.ListedOffsets, error), waiting func(error)) (kadm.ListedOffsets, error) {
	var listed kadm.ListedOffsets
	err := client.Retry(ctx, 0, func(ctx context.Context) error {
		var err error
		if listed, err = list(ctx); err != nil {
			return err
		}
		return partitionError(listed)
	}, waiting)
	if err != nil {
		return nil, client.Failf("list %s offsets: %v", what, err)
	}
	return listed, nil
}

// partitionError is the error of the first partition, by topic and
// number, that a listing has no offset for.
func partitionError(listed kadm.ListedOffsets) error {
	var first *kadm.ListedOffset
	listed.Each(func(o kadm.ListedOffset) {
		if o.Err != nil && (first == nil || o.Topic < first.Topic || o.Topic == first.Topic && o.Partition < first.Partition) {
			first = &o
		}
	})
	if first == nil {
		return nil
	}
	return fmt.Errorf("topic %s partition %d: %w", first.Topic, first.Partition, first.Err)
}

// waitNotice returns the waiting function of startOffsets that says on w,
// once, what the tool waits for: the first error of a request that
// failed as a whole, or the partition's.
func waitNotice(w io.Writer) func(error) {
	if w == nil {
		return nil
	}
	return func(err error) {
		var se *kadm.ShardErrors // "request ListOffsets has 1 separate shard errors, first: …"
		if errors.As(err, &se) && len(se.Errs) > 0 {
			err = se.Errs[0].Err
			if b := se.Errs[0].Broker; client.IsUnreachable(err) && b.NodeID >= 0 {
				err = fmt.Errorf("broker %d (%s:%d) unreachable: %s", b.NodeID, b.Host, b.Port, client.Reason(err))
			}
		}
		fmt.Fprintf(w, "mqpipe: waiting up to %v: %v\n", client.RetryTimeout, oneLine(err.Error()))
	}
}
