package queue

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/mqproject/mq/lib/clock"
	"github.com/mqproject/mq/lib/record"
)

// Errors of share sessions (KIP-932): Kafka's SHARE_SESSION_NOT_FOUND and
// INVALID_SHARE_SESSION_EPOCH.
var (
	ErrSessionNotFound     = errors.New("queue: share session not found")
	ErrInvalidSessionEpoch = errors.New("queue: invalid share session epoch")
)

// TP names a topic partition by topic ID.
type TP struct {
	TopicID   [16]byte
	Partition int32
}

// Source is a topic partition this node leads, as its share-partitions
// read it. Its methods may be called concurrently.
type Source interface {
	String() string
	// LeaderEpoch is the partition's leader epoch: state loaded in
	// another epoch may have been changed by another leader since.
	LeaderEpoch() int32
	// Offsets returns the log start offset and the high-water mark.
	Offsets() (logStart, highWatermark int64)
	// ReadBatches reads whole batches from the one holding offset on,
	// below the high-water mark, up to maxBytes (the first whole, however
	// large), and returns them with the offset after the last one.
	ReadBatches(offset int64, maxBytes int) ([]byte, int64, error)
	// Changed is closed at the partition's next change: new records, a
	// new high-water mark, a new role.
	Changed() <-chan struct{}
}

// Settings are a share group's configs as a share-partition uses them.
type Settings struct {
	Queue Config
	// Earliest is share.auto.offset.reset=earliest: a share-partition
	// without state starts at the log start, else at the high-water mark.
	Earliest bool
	// DeadLetterTopic is errors.deadletterqueue.topic.name; empty: none.
	DeadLetterTopic string
}

// LeaderConfig is what a Leader needs from the node.
type LeaderConfig struct {
	Store Store
	// Resolve returns the source of a topic partition this node leads, or
	// the error a client is answered for it (unknown, not the leader…).
	Resolve func(tp TP) (Source, error)
	// DeadLetter writes dead letters of group's share-partition tp, read
	// from src, to topic, durable when it returns: before their archive is
	// recorded, so that a record is never archived without its dead
	// letter. nil drops them.
	DeadLetter func(ctx context.Context, group string, tp TP, src Source, dead []DeadLetter, topic string) error
	Clock      clock.Clock  // nil: real time
	Logger     *slog.Logger // nil: silent
}

// Leader holds the share-partitions of the topic partitions this node
// leads, and the share sessions of the members fetching them: the
// share-partition leader of KIP-932. It answers ShareFetch (Fetch) and
// ShareAcknowledge (Acknowledge) and resets share-partitions (Reset).
//
// A share-partition's state is loaded from the Store on first use in a
// leader epoch, changed under its mutex, and its new state written to
// the Store before the mutex is let go, so that the records are in the
// order of the changes; the wait for that write to be durable happens
// without any lock, and a request's answer goes out only after it. A
// write that does not become durable fails its partition in the answer
// (records withheld, acknowledgements answered with the error) and drops
// the in-memory state, so that the next request starts from what is
// durable. Loading from the Store (a replay, perhaps from another node)
// happens under the share-partition's mutex, and so does writing dead
// letters, which must be durable before the archive is written.
//
// Locks: Leader.mu guards the maps, a share-partition's mu its state;
// Leader.mu is never taken while holding a share-partition's. Its
// methods are safe for concurrent use.
type Leader struct {
	cfg   LeaderConfig
	log   *slog.Logger
	clock clock.Clock
	state states

	mu       sync.Mutex
	parts    map[Key]*sharePart
	sessions map[sessionKey]*session
}

type sessionKey struct{ group, member string }

// session is a member's share session with this node: the partitions it
// fetches, and the epoch its next request must carry.
type session struct {
	epoch    int32
	parts    []TP // in the order they were added
	lastUsed time.Time
}

// SessionIdle is how long a share session may go unused before a new
// session's creation drops it: its member died without closing it (its
// records' locks have long expired by then).
const SessionIdle = 10 * time.Minute

// sharePart is one share-partition led here.
type sharePart struct {
	key Key
	mu  sync.Mutex
	// q is the state, nil until loaded (and after a failed write, so that
	// the next use reloads what is durable). leaderEpoch is the
	// partition's leader epoch it was loaded at: another epoch means
	// another leader may have changed it since, so it is loaded again.
	q           *Partition
	leaderEpoch int32
	// deadLetters counts the records given up (dead-lettered, or only
	// archived without a dead-letter topic) since this node started.
	deadLetters uint64
}

// NewLeader returns a Leader with no share-partitions loaded.
func NewLeader(cfg LeaderConfig) *Leader {
	l := &Leader{cfg: cfg, log: cfg.Logger, clock: cfg.Clock, parts: map[Key]*sharePart{}, sessions: map[sessionKey]*session{}}
	if l.log == nil {
		l.log = slog.New(slog.DiscardHandler)
	}
	if l.clock == nil {
		l.clock = clock.Real()
	}
	l.state = states{store: cfg.Store, now: l.clock.Now}
	return l
}

func (l *Leader) part(k Key) *sharePart {
	l.mu.Lock()
	defer l.mu.Unlock()
	p := l.parts[k]
	if p == nil {
		p = &sharePart{key: k}
		l.parts[k] = p
	}
	return p
}

// loadLocked makes p.q current for src at its leader epoch, from the
// Store or, for a share-partition without state, at the log start
// (Settings.Earliest) or the high-water mark, written at once so that
// the start stays put: the writes it made are returned, for the caller
// to wait for without the lock.
func (l *Leader) loadLocked(ctx context.Context, p *sharePart, src Source, s Settings) ([]Pending, error) {
	epoch := src.LeaderEpoch()
	if p.q != nil && p.leaderEpoch == epoch {
		p.q.SetConfig(s.Queue)
		return nil, nil
	}
	p.q = nil
	snap, found, err := l.state.load(ctx, p.key)
	if err != nil {
		return nil, err
	}
	if found {
		q, err := Restore(s.Queue, snap)
		if err != nil {
			return nil, err
		}
		p.q, p.leaderEpoch = q, epoch
		return nil, nil
	}
	logStart, hw := src.Offsets()
	start := hw
	if s.Earliest {
		start = logStart
	}
	q := New(s.Queue, start)
	indexed, err := l.state.index(ctx, p.key.Group, p.key.TopicID, true)
	if err != nil {
		return nil, err
	}
	written, err := l.state.write(ctx, p.key, q.Snapshot())
	if err != nil {
		return nil, err
	}
	p.q, p.leaderEpoch = q, epoch
	return []Pending{indexed, written}, nil
}

// Acks are one partition's acknowledgements in a request: Err when the
// request's batches do not parse.
type Acks struct {
	Acks []Ack
	Err  error
}

// Result is what a request did to one share-partition.
type Result struct {
	TP      TP
	Err     error // the fetch's error
	AckErr  error // the acknowledgements' error, when Acked
	Acked   bool  // the request acknowledged records here
	Records []byte
	Leases  []Lease

	pending []Pending // the state writes to wait for
	part    *sharePart
}

// fail ends r with err: no records, and err for its acknowledgements
// unless they failed already.
func (r *Result) fail(err error) {
	r.Err, r.Records, r.Leases = err, nil, nil
	if r.Acked && r.AckErr == nil {
		r.AckErr = err
	}
}

// apply runs one request's acknowledgements and acquisitions on one
// share-partition: acks first, then (when fetch) up to maxRecords records
// and maxBytes bytes for member. The new state is written before the
// part's mutex is let go; the result's pending waits for it.
func (l *Leader) apply(ctx context.Context, group, member string, tp TP, acks *Acks, fetch bool, maxRecords int, maxBytes int, s Settings) Result {
	res := Result{TP: tp}
	if acks != nil {
		res.Acked = true
	}
	src, err := l.cfg.Resolve(tp)
	if err != nil {
		res.fail(err)
		return res
	}
	p := l.part(Key{Group: group, TopicID: tp.TopicID, Partition: tp.Partition})
	res.part = p
	p.mu.Lock()
	defer p.mu.Unlock()
	loaded, err := l.loadLocked(ctx, p, src, s)
	if err != nil {
		res.fail(err)
		return res
	}
	res.pending = loaded
	now := l.clock.Now()
	before := p.q.Snapshot()
	if acks != nil {
		res.AckErr = acks.Err
		if res.AckErr == nil {
			res.AckErr = p.q.Acknowledge(member, now, acks.Acks)
		}
	}
	if fetch && maxRecords > 0 {
		res.Records, res.Leases, res.Err = l.acquire(p.q, src, member, now, maxRecords, maxBytes)
	}
	p.q.Expire(now)
	if err := l.deadLetter(ctx, p, tp, src, s); err != nil {
		l.log.Warn("dead-letter records", "group", group, "partition", src.String(), "err", err)
		p.q = nil // not archived: reload the durable state
		res.fail(err)
		return res
	}
	after := p.q.Snapshot()
	if snapshotsEqual(before, after) {
		return res
	}
	w, err := l.state.write(ctx, p.key, after)
	if err != nil {
		p.q = nil
		res.fail(err)
		return res
	}
	res.pending = append(res.pending, w)
	return res
}

// deadLetter writes p's new dead letters (archived records) to the
// group's dead-letter topic, when it names one, before their archive is
// written, and counts them. Called with p.mu held.
func (l *Leader) deadLetter(ctx context.Context, p *sharePart, tp TP, src Source, s Settings) error {
	dead := p.q.TakeDeadLetters()
	if len(dead) == 0 {
		return nil
	}
	if s.DeadLetterTopic != "" && l.cfg.DeadLetter != nil {
		if err := l.cfg.DeadLetter(ctx, p.key.Group, tp, src, dead, s.DeadLetterTopic); err != nil {
			return err
		}
	}
	p.deadLetters += uint64(len(dead))
	return nil
}

func snapshotsEqual(a, b Snapshot) bool {
	return a.Start == b.Start && a.End == b.End && slices.Equal(a.Runs, b.Runs)
}

// acquire reads the log from the first available offset, at most
// maxBytes (at least one batch), and acquires for member what those
// bytes hold. It returns the batches that overlap what was acquired.
func (l *Leader) acquire(q *Partition, src Source, member string, now time.Time, maxRecords, maxBytes int) ([]byte, []Lease, error) {
	logStart, hw := src.Offsets()
	if logStart > q.Start() {
		q.SkipTo(logStart) // retention went past: those are gone
	}
	from := q.FirstAvailable()
	if from >= hw {
		return nil, nil, nil
	}
	data, covered, err := src.ReadBatches(from, maxBytes)
	if err != nil || len(data) == 0 {
		return nil, nil, err
	}
	leases := q.Acquire(member, now, min(covered, hw), maxRecords)
	if len(leases) == 0 {
		return nil, nil, nil
	}
	return trimBatches(data, leases[len(leases)-1].Last), leases, nil
}

// settle waits for the results' state writes; a write that does not
// become durable fails its partition and drops its in-memory state, so
// the next request starts from what is durable.
func (l *Leader) settle(ctx context.Context, results []Result) {
	for i := range results {
		r := &results[i]
		for _, w := range r.pending {
			if err := w.Wait(ctx); err != nil {
				r.part.mu.Lock()
				r.part.q = nil
				r.part.mu.Unlock()
				r.fail(err)
				break
			}
		}
	}
}

// releaseMember releases what member holds on a session's partitions (its
// session closed).
func (l *Leader) releaseMember(ctx context.Context, group, member string, parts []TP, s Settings) {
	var results []Result
	for _, tp := range parts {
		src, err := l.cfg.Resolve(tp)
		if err != nil {
			continue
		}
		p := l.part(Key{Group: group, TopicID: tp.TopicID, Partition: tp.Partition})
		p.mu.Lock()
		loaded, err := l.loadLocked(ctx, p, src, s)
		if err != nil {
			p.mu.Unlock()
			continue
		}
		res := Result{TP: tp, part: p, pending: loaded}
		before := p.q.Snapshot()
		p.q.ReleaseMember(member)
		if err := l.deadLetter(ctx, p, tp, src, s); err != nil {
			p.q = nil
			p.mu.Unlock()
			results = append(results, res)
			continue
		}
		if after := p.q.Snapshot(); !snapshotsEqual(before, after) {
			if w, err := l.state.write(ctx, p.key, after); err == nil {
				res.pending = append(res.pending, w)
			} else {
				p.q = nil
			}
		}
		p.mu.Unlock()
		results = append(results, res)
	}
	l.settle(ctx, results)
}

// session checks and advances a member's share session for a request at
// epoch, and returns it (nil for epoch -1, which closes it, with the
// partitions it had).
func (l *Leader) session(k sessionKey, epoch int32) (*session, []TP, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	s := l.sessions[k]
	now := l.clock.Now()
	if s != nil {
		s.lastUsed = now
	}
	switch {
	case epoch == 0:
		for key, old := range l.sessions {
			if now.Sub(old.lastUsed) > SessionIdle {
				delete(l.sessions, key)
			}
		}
		s = &session{epoch: 1, lastUsed: now}
		l.sessions[k] = s
		return s, nil, nil
	case s == nil:
		return nil, nil, ErrSessionNotFound
	case epoch == -1:
		delete(l.sessions, k)
		return nil, s.parts, nil
	case epoch != s.epoch:
		return nil, nil, ErrInvalidSessionEpoch
	}
	s.epoch++
	if s.epoch <= 0 {
		s.epoch = 1
	}
	return s, nil, nil
}

// update adds and forgets partitions of a session.
func (l *Leader) update(s *session, add, forget []TP) []TP {
	l.mu.Lock()
	defer l.mu.Unlock()
	for _, tp := range add {
		if !slices.Contains(s.parts, tp) {
			s.parts = append(s.parts, tp)
		}
	}
	for _, tp := range forget {
		if i := slices.Index(s.parts, tp); i >= 0 {
			s.parts = slices.Delete(s.parts, i, i+1)
		}
	}
	return slices.Clone(s.parts)
}

// Fetch defaults: a request's records without MaxRecords, its bytes
// without MaxBytes, and the longest wait for records.
const (
	DefaultMaxRecords = 500
	DefaultMaxBytes   = 1 << 20
	MaxWait           = 30 * time.Second
)

// FetchRequest is one ShareFetch: a member's acknowledgements, and its
// fetch from the partitions of its share session.
type FetchRequest struct {
	Group, Member string
	// SessionEpoch is the share session's: 0 opens one, -1 closes it
	// (acknowledging only), else the session's next.
	SessionEpoch int32
	Partitions   []TP // named in the request, in its order: added to the session
	Forget       []TP // taken out of the session
	Acks         map[TP]*Acks
	MaxRecords   int // <= 0: DefaultMaxRecords
	MaxBytes     int // <= 0: DefaultMaxBytes
	MaxWait      time.Duration
	Settings     Settings
}

// Fetch applies a request's acknowledgements, then acquires records for
// the member from the partitions of its session, waiting up to MaxWait
// (at most MaxWait of this package) for some when there are none and the
// request acknowledged nothing. It answers, once the state writes are
// durable, every partition it acknowledged or acquired records on; the
// error is the session's (ErrSessionNotFound, ErrInvalidSessionEpoch).
func (l *Leader) Fetch(ctx context.Context, r FetchRequest) ([]Result, error) {
	sess, closed, err := l.session(sessionKey{r.Group, r.Member}, r.SessionEpoch)
	if err != nil {
		return nil, err
	}
	var parts []TP
	fetch := sess != nil
	if fetch {
		parts = l.update(sess, r.Partitions, r.Forget)
	}
	// Partitions named only for their acknowledgements (forgotten in the
	// same request, or any at epoch -1) are acknowledged, not fetched.
	var ackOnly []TP
	for _, tp := range r.Partitions {
		if r.Acks[tp] != nil && !slices.Contains(parts, tp) && !slices.Contains(ackOnly, tp) {
			ackOnly = append(ackOnly, tp)
		}
	}
	maxRecords, maxBytes := r.MaxRecords, r.MaxBytes
	if maxRecords <= 0 {
		maxRecords = DefaultMaxRecords
	}
	if maxBytes <= 0 {
		maxBytes = DefaultMaxBytes
	}
	deadline := l.clock.Now().Add(min(r.MaxWait, MaxWait))

	var results []Result
	byTP := map[TP]int{}
	run := func(withAcks bool) int {
		got := 0
		recs, bytesLeft := maxRecords, maxBytes
		all := parts
		if withAcks {
			all = append(slices.Clip(parts), ackOnly...)
		}
		for i, tp := range all {
			var a *Acks
			if withAcks {
				a = r.Acks[tp]
			}
			fetchHere := fetch && i < len(parts) && recs > 0 && bytesLeft > 0
			res := l.apply(ctx, r.Group, r.Member, tp, a, fetchHere, recs, bytesLeft, r.Settings)
			for _, lease := range res.Leases {
				n := int(lease.Last - lease.First + 1)
				recs -= n
				got += n
			}
			bytesLeft -= len(res.Records)
			if i, ok := byTP[tp]; ok {
				prev := results[i]
				if prev.Acked {
					res.Acked, res.AckErr = true, prev.AckErr
				}
				res.pending = append(prev.pending, res.pending...)
				results[i] = res
			} else {
				byTP[tp] = len(results)
				results = append(results, res)
			}
		}
		return got
	}
	got := run(true)
	if sess == nil && len(closed) > 0 {
		l.releaseMember(ctx, r.Group, r.Member, closed, r.Settings)
	}
	for got == 0 && fetch && len(r.Acks) == 0 && l.clock.Now().Before(deadline) {
		if !l.waitChange(ctx, parts, deadline) {
			break
		}
		got = run(false)
	}
	l.settle(ctx, results)
	return results, nil
}

// waitChange waits until a partition of parts has new records, a lock
// may have expired, or deadline; false when ctx ended.
func (l *Leader) waitChange(ctx context.Context, parts []TP, deadline time.Time) bool {
	var chans []<-chan struct{}
	for _, tp := range parts {
		if src, err := l.cfg.Resolve(tp); err == nil {
			chans = append(chans, src.Changed())
		}
	}
	until := deadline
	l.mu.Lock()
	locks := slices.Collect(maps.Values(l.parts))
	l.mu.Unlock()
	for _, p := range locks {
		p.mu.Lock()
		if p.q != nil {
			if d, ok := p.q.NextDeadline(); ok && d.Before(until) {
				until = d
			}
		}
		p.mu.Unlock()
	}
	timer := l.clock.NewTimer(max(until.Sub(l.clock.Now()), time.Millisecond))
	defer timer.Stop()
	merged := make(chan struct{}, 1)
	stop := make(chan struct{})
	defer close(stop)
	for _, ch := range chans {
		go func(ch <-chan struct{}) {
			select {
			case <-ch:
				select {
				case merged <- struct{}{}:
				default:
				}
			case <-stop:
			}
		}(ch)
	}
	select {
	case <-ctx.Done():
		return false
	case <-timer.C():
	case <-merged:
	}
	return true
}

// AckRequest is one ShareAcknowledge.
type AckRequest struct {
	Group, Member string
	// SessionEpoch is the share session's next; -1 also closes the
	// session, releasing what the member still holds. 0 is refused.
	SessionEpoch int32
	Partitions   []TP // in the request's order
	Acks         []Acks
	Settings     Settings
}

// Acknowledge applies acknowledgements outside a fetch and answers each
// partition once its state writes are durable; the error is the
// session's.
func (l *Leader) Acknowledge(ctx context.Context, r AckRequest) ([]Result, error) {
	if r.SessionEpoch == 0 {
		return nil, ErrInvalidSessionEpoch
	}
	_, closed, err := l.session(sessionKey{r.Group, r.Member}, r.SessionEpoch)
	if err != nil {
		return nil, err
	}
	results := make([]Result, 0, len(r.Partitions))
	for i, tp := range r.Partitions {
		results = append(results, l.apply(ctx, r.Group, r.Member, tp, &r.Acks[i], false, 0, 0, r.Settings))
	}
	l.settle(ctx, results)
	if r.SessionEpoch == -1 {
		l.releaseMember(ctx, r.Group, r.Member, closed, r.Settings)
	}
	return results, nil
}

// Reset replaces the state of group's share-partition on tp, led here:
// a new start offset, clamped to the log, with nothing in flight; or,
// with del, no state at all (the next read starts from
// share.auto.offset.reset). The group must be empty. It returns once the
// new state is durable; the next use loads it.
func (l *Leader) Reset(ctx context.Context, group string, tp TP, start int64, del bool, s Settings) error {
	src, err := l.cfg.Resolve(tp)
	if err != nil {
		return err
	}
	p := l.part(Key{Group: group, TopicID: tp.TopicID, Partition: tp.Partition})
	var pending []Pending
	p.mu.Lock()
	p.q = nil // whatever happens, the next use reloads what is durable
	if del {
		w, err := l.state.remove(ctx, p.key)
		if err != nil {
			p.mu.Unlock()
			return err
		}
		pending = append(pending, w)
	} else {
		indexed, err := l.state.index(ctx, group, tp.TopicID, true)
		if err != nil {
			p.mu.Unlock()
			return err
		}
		logStart, hw := src.Offsets()
		q := New(s.Queue, min(max(start, logStart), hw))
		written, err := l.state.write(ctx, p.key, q.Snapshot())
		if err != nil {
			p.mu.Unlock()
			return err
		}
		pending = append(pending, indexed, written)
	}
	p.mu.Unlock()
	for _, w := range pending {
		if err := w.Wait(ctx); err != nil {
			return err
		}
	}
	return nil
}

// Load returns the durable state of a share-partition, and false when it
// has none, from the Store: here or on the node leading its state.
func (l *Leader) Load(ctx context.Context, k Key) (Snapshot, bool, error) {
	return l.state.load(ctx, k)
}

// Indexed returns the topics group has share-partition state for.
func (l *Leader) Indexed(ctx context.Context, group string) ([][16]byte, error) {
	return l.state.indexed(ctx, group)
}

// Unindex forgets that group has state for topic, durably when it
// returns.
func (l *Leader) Unindex(ctx context.Context, group string, topic [16]byte) error {
	w, err := l.state.index(ctx, group, topic, false)
	if err != nil {
		return err
	}
	return w.Wait(ctx)
}

// trimBatches drops the batches of data (whole record batches) that
// start after last.
func trimBatches(data []byte, last int64) []byte {
	rest := data
	for len(rest) > 0 {
		_, next, h, err := record.Next(rest)
		if err != nil || h.BaseOffset > last {
			break
		}
		rest = next
	}
	return data[:len(data)-len(rest)]
}

// String names a share-partition in logs.
func (k Key) String() string { return fmt.Sprintf("%s/%x/%d", k.Group, k.TopicID[:], k.Partition) }

// PartitionStats is what Stats reports of one share-partition led here.
type PartitionStats struct {
	Key
	// Loaded: the state is in memory; the fields below are zero when not.
	Loaded     bool
	Start, End int64
	Counts
	// DeadLetters counts the records given up since this node started:
	// rejected, or out of delivery attempts.
	DeadLetters uint64
}

// Stats reports the share-partitions this node has served since it
// started, by key: their windows as last loaded, and their dead
// letters. It takes each share-partition's mutex in turn, as a fetch
// does, and never waits for a write.
func (l *Leader) Stats() []PartitionStats {
	l.mu.Lock()
	parts := make([]*sharePart, 0, len(l.parts))
	for _, p := range l.parts {
		parts = append(parts, p)
	}
	l.mu.Unlock()
	out := make([]PartitionStats, 0, len(parts))
	for _, p := range parts {
		p.mu.Lock()
		st := PartitionStats{Key: p.key, DeadLetters: p.deadLetters}
		if p.q != nil {
			st.Loaded, st.Start, st.End, st.Counts = true, p.q.Start(), p.q.End(), p.q.Counts()
		}
		p.mu.Unlock()
		out = append(out, st)
	}
	slices.SortFunc(out, func(a, b PartitionStats) int {
		if c := strings.Compare(a.Group, b.Group); c != 0 {
			return c
		}
		if c := bytes.Compare(a.TopicID[:], b.TopicID[:]); c != 0 {
			return c
		}
		return int(a.Partition - b.Partition)
	})
	return out
}
