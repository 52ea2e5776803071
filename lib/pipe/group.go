package pipe

import (
	"context"
	"fmt"
	"sync"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/mqproject/mq/lib/client"
)

// Commit modes of consume -g (--commit).
const (
	CommitWritten  = "written"  // after each batch is written to stdout
	CommitPeriodic = "periodic" // every few seconds, what has been written
	CommitNone     = "none"     // never
)

// CommitModes are the --commit values.
const CommitModes = "written, periodic or none"

// DefaultSessionTimeout is how long the group waits for a silent member
// (killed, hung) before giving its partitions to the others.
const DefaultSessionTimeout = 10 * time.Second

// groupPollInterval bounds each poll with -e, so that partitions that are
// already caught up (no records come) are noticed.
const groupPollInterval = 250 * time.Millisecond

// commitTimeout bounds the final commit after an interruption.
const commitTimeout = 5 * time.Second

// resetOffset is where a group member starts a partition the group has
// no committed offset for.
func (o OffsetSpec) resetOffset() kgo.Offset {
	switch o.Kind {
	case OffsetEnd:
		return kgo.NewOffset().AtEnd()
	case OffsetExact:
		return kgo.NewOffset().At(o.N)
	case OffsetLast:
		return kgo.NewOffset().AtEnd().Relative(-o.N)
	case OffsetTime:
		return kgo.NewOffset().AfterMilli(o.Time.UnixMilli())
	}
	return kgo.NewOffset().AtStart() // beginning, stored
}

// assignment is the partitions the group gave this member and, with -e,
// the high-water mark each must reach; the group callbacks (kgo's
// goroutine) write it, the poll loop reads it.
type assignment struct {
	mu       sync.Mutex
	joined   bool
	assigned map[string]map[int32]bool
	targets  map[string]map[int32]int64 // -e: the high-water mark when assigned
	done     map[string]map[int32]bool  // -e: partitions that reached it
	err      error                      // -e: listing offsets failed
}

func newAssignment() *assignment {
	return &assignment{assigned: map[string]map[int32]bool{}, targets: map[string]map[int32]int64{}, done: map[string]map[int32]bool{}}
}

// add records newly assigned partitions; with -e (adm != nil) it notes
// their high-water marks, and those the group has already read to there
// (the committed offset, else where -o starts) are done at once.
func (a *assignment) add(ctx context.Context, adm *kadm.Client, cfg *ConsumeConfig, m map[string][]int32) {
	var targets, starts map[string]map[int32]int64
	var committed kadm.OffsetResponses
	var err error
	if adm != nil && len(m) > 0 {
		targets, starts, committed, err = groupTargets(ctx, adm, cfg, m)
	}
	a.mu.Lock()
	defer a.mu.Unlock()
	a.joined = true
	if err != nil && a.err == nil {
		a.err = err
	}
	for t, ps := range m {
		for _, p := range ps {
			setIn(a.assigned, t, p, true)
			delete(a.done[t], p)
			if targets == nil {
				continue
			}
			hwm := targets[t][p]
			setIn(a.targets, t, p, hwm)
			start := starts[t][p]
			if c, ok := committed.Lookup(t, p); ok && c.Err == nil && c.At >= 0 {
				start = c.At
			}
			if start >= hwm {
				setIn(a.done, t, p, true)
			}
		}
	}
}

// groupTargets lists the high-water marks of partitions, where -o would
// start them, and the group's committed offsets.
func groupTargets(ctx context.Context, adm *kadm.Client, cfg *ConsumeConfig, m map[string][]int32) (targets, starts map[string]map[int32]int64, committed kadm.OffsetResponses, err error) {
	starts, targets, err = startOffsets(ctx, adm, partitionSet(m), cfg.Offset, waitNotice(cfg.Stderr))
	if err != nil {
		return nil, nil, nil, err
	}
	err = client.Retry(ctx, 0, func(ctx context.Context) error {
		var err error
		if committed, err = adm.FetchOffsets(ctx, cfg.Group); err == nil {
			err = committed.Error()
		}
		return err
	}, waitNotice(cfg.Stderr))
	if err != nil {
		return nil, nil, nil, client.Failf("fetch offsets of group %s: %v", cfg.Group, err)
	}
	return targets, starts, committed, nil
}

func setIn[V any](m map[string]map[int32]V, t string, p int32, v V) {
	if m[t] == nil {
		m[t] = map[int32]V{}
	}
	m[t][p] = v
}

func (a *assignment) remove(m map[string][]int32) {
	a.mu.Lock()
	defer a.mu.Unlock()
	for t, ps := range m {
		for _, p := range ps {
			delete(a.assigned[t], p)
			delete(a.targets[t], p)
			delete(a.done[t], p)
		}
	}
}

// target is the high-water mark partition p of t must reach with -e, and
// whether it has (or has none yet).
func (a *assignment) target(t string, p int32) (hwm int64, tracked, done bool) {
	a.mu.Lock()
	defer a.mu.Unlock()
	hwm, tracked = a.targets[t][p]
	return hwm, tracked, a.done[t][p]
}

func (a *assignment) reached(t string, p int32) {
	a.mu.Lock()
	defer a.mu.Unlock()
	if _, ok := a.targets[t][p]; ok {
		setIn(a.done, t, p, true)
	}
}

// caughtUp reports whether the member joined and every partition it holds
// reached its target; or the error of listing offsets.
func (a *assignment) caughtUp() (bool, error) {
	a.mu.Lock()
	defer a.mu.Unlock()
	if a.err != nil {
		return false, a.err
	}
	if !a.joined {
		return false, nil
	}
	for t, ps := range a.assigned {
		for p := range ps {
			if !a.done[t][p] {
				return false, nil
			}
		}
	}
	return true, nil
}

// consumeGroup is Consume with -g: the group assigns the partitions, each
// starts at the group's committed offset (else at -o), and what is
// written to stdout is committed as --commit says. With -e it exits once
// every assigned partition reached the high-water mark it had when this
// member got it, committing first.
//
// The group subscribes to the topics of spec; with patterns, by regex
// (kgo's ConsumeRegex, the names matching only themselves), so that the
// group takes on topics created later, looked for every topicRefresh.
func consumeGroup(ctx context.Context, cfg ConsumeConfig, addrs []client.Addr, adm *kadm.Client, spec topicSpec) error {
	asg := newAssignment()
	var exitAdm *kadm.Client
	if cfg.Exit {
		exitAdm = adm
	}
	mode := cfg.Commit
	if mode == "" {
		mode = CommitWritten
	}
	session := cfg.SessionTimeout
	if session <= 0 {
		session = DefaultSessionTimeout
	}
	commitMarked := func(ctx context.Context, cl *kgo.Client) {
		if mode == CommitNone {
			return
		}
		if err := cl.CommitMarkedOffsets(ctx); err != nil && ctx.Err() == nil {
			fmt.Fprintf(cfg.Stderr, "mqpipe: commit offsets of group %s: %v\n", cfg.Group, err)
		}
	}
	opts := []kgo.Opt{
		kgo.ConsumerGroup(cfg.Group),
		kgo.ConsumeResetOffset(cfg.Offset.resetOffset()),
		kgo.KeepRetryableFetchErrors(), // for fetchError
		kgo.KeepControlRecords(),       // transaction markers: -e passes them, nothing writes them
		kgo.BlockRebalanceOnPoll(),
		kgo.SessionTimeout(session),
		kgo.HeartbeatInterval(min(3*time.Second, session/5)),
		kgo.OnPartitionsAssigned(func(ctx context.Context, _ *kgo.Client, m map[string][]int32) { asg.add(ctx, exitAdm, &cfg, m) }),
		kgo.OnPartitionsRevoked(func(ctx context.Context, cl *kgo.Client, m map[string][]int32) {
			commitMarked(ctx, cl)
			asg.remove(m)
		}),
		kgo.OnPartitionsLost(func(_ context.Context, _ *kgo.Client, m map[string][]int32) { asg.remove(m) }),
	}
	if len(spec.patterns) == 0 {
		opts = append(opts, kgo.ConsumeTopics(spec.names...))
	} else {
		opts = append(opts, kgo.ConsumeRegex(), kgo.ConsumeTopics(spec.regexes()...), kgo.MetadataMaxAge(topicRefresh))
	}
	switch mode {
	case CommitWritten, CommitPeriodic:
		opts = append(opts, kgo.AutoCommitMarks())
	case CommitNone:
		opts = append(opts, kgo.DisableAutoCommit())
	default:
		return client.Usagef("consume: --commit %q: want %s", mode, CommitModes)
	}
	w := newWriter(&cfg)
	cl, err := client.NewClient(addrs, append(opts, w.clientOpts()...)...)
	if err != nil {
		return err
	}
	defer cl.Close()
	// finish commits what was written and leaves the group.
	finish := func() {
		cctx, cancel := context.WithTimeout(context.Background(), commitTimeout)
		defer cancel()
		commitMarked(cctx, cl)
		cl.AllowRebalance()
		cl.LeaveGroupContext(cctx)
	}

	var printed int64
	pos := positions{}
	var written []*kgo.Record // this poll's records, marked for commit once flushed
	for {
		pollCtx, cancel := ctx, context.CancelFunc(func() {})
		if cfg.Exit {
			pollCtx, cancel = context.WithTimeout(ctx, groupPollInterval)
		}
		fetches := cl.PollFetches(pollCtx)
		w.polled(fetches)
		cancel()
		if ctx.Err() != nil {
			werr := w.flush()
			finish()
			if werr != nil {
				return outputError(werr)
			}
			return ctx.Err()
		}
		var werr error
		stop := false
		written = written[:0]
		fetches.EachPartition(func(fp kgo.FetchTopicPartition) {
			if werr != nil || stop {
				return
			}
			var hwm int64
			var tracked bool
			if cfg.Exit {
				var done bool
				if hwm, tracked, done = asg.target(fp.Topic, fp.Partition); done {
					return // records past the mark are left for later
				}
			}
			w.partition(fp.Topic, fp.Partition)
			for _, r := range fp.Records {
				if tracked && r.Offset >= hwm {
					asg.reached(fp.Topic, fp.Partition)
					break
				}
				if r.Attrs.IsControl() {
					pos.set(r.Topic, r.Partition, r.Offset+1)
					written = append(written, r) // committed past, as Kafka's consumers do
					if tracked && r.Offset+1 >= hwm {
						asg.reached(fp.Topic, fp.Partition)
						break
					}
					continue
				}
				if werr = w.write(r); werr != nil {
					return
				}
				pos.set(r.Topic, r.Partition, r.Offset+1)
				written = append(written, r)
				printed++
				if cfg.Count > 0 && printed >= cfg.Count {
					stop = true
					return
				}
				if tracked && r.Offset+1 >= hwm {
					asg.reached(fp.Topic, fp.Partition)
					break
				}
			}
		})
		if werr == nil {
			werr = w.flush()
		}
		if werr != nil {
			// What was not flushed may not have been written: it is
			// not committed.
			finish()
			return outputError(werr)
		}
		if mode != CommitNone {
			cl.MarkCommitRecords(written...)
		}
		if mode == CommitWritten {
			commitMarked(ctx, cl)
		}
		if stop {
			finish()
			return nil
		}
		if err := fetchError(fetches, pos); err != nil {
			finish()
			return err
		}
		if cfg.Exit {
			caughtUp, err := asg.caughtUp()
			if err != nil {
				finish()
				return err
			}
			if caughtUp {
				finish()
				return nil
			}
		}
		cl.AllowRebalance()
	}
}
