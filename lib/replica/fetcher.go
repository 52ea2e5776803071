package replica

import (
	"context"
	"errors"
	"log/slog"
	"math"
	"sync"
	"time"

	"github.com/mqproject/mq/lib/clock"
	"github.com/mqproject/mq/lib/log"
)

// ErrOutOfLeaderRange is a fetch the leader refused because its offset
// is outside the leader's log (Kafka's OFFSET_OUT_OF_RANGE): the Fetcher
// asks for the leader's log range and moves the follower into it
// (ResetFetchOffset).
var ErrOutOfLeaderRange = errors.New("replica: fetch offset outside the leader's log")

// Key names a partition to its leader: by name in OffsetForLeaderEpoch,
// ListOffsets and Refetch, by topic ID in Fetch.
type Key struct {
	Topic     string
	TopicID   [16]byte
	Partition int32
}

// KeyOf returns p's Key.
func KeyOf(p *Partition) Key {
	return Key{Topic: p.cfg.Topic, TopicID: p.cfg.TopicID, Partition: p.cfg.Partition}
}

// EpochQuery asks the leader where its log ends for an epoch
// (OffsetForLeaderEpoch): the end offset of the latest epoch at or below
// Epoch, and that epoch.
type EpochQuery struct {
	Key
	LeaderEpoch int32 // the epoch the follower follows in
	Epoch       int32 // the latest epoch of the follower's history
}

// EpochEnd answers an EpochQuery: Err when the leader refused.
type EpochEnd struct {
	Key
	Err       error
	EndOffset int64
	Epoch     int32
}

// FetchQuery asks for a partition's records from FetchOffset on.
type FetchQuery struct {
	Key
	LeaderEpoch      int32
	FetchOffset      int64
	LastFetchedEpoch int32
	LogStartOffset   int64 // the follower's, for the leader's bookkeeping
	// MaxBytes, when positive, is the most the leader may answer for the
	// partition, the first batch coming whole even when larger (KIP-74),
	// below the Upstream's own limit (replica.fetch.max.bytes): what the
	// follower's Quota allows a throttled partition. 0: that limit.
	MaxBytes int32
}

// Fetched answers a FetchQuery: whole batches as the leader stored them
// (a partial one may end them), the leader's high-water mark and log
// start; Err when the leader refused, ErrOutOfLeaderRange when the offset
// is outside its log. Records may refer into the Upstream's buffers: they
// are valid until its next call.
type Fetched struct {
	Key
	Err            error
	Records        []byte
	HighWatermark  int64
	LogStartOffset int64
}

// RangeQuery asks for the leader's log start and log end offsets.
type RangeQuery struct {
	Key
	LeaderEpoch int32
}

// LogRange answers a RangeQuery: Err when the leader refused.
type LogRange struct {
	Key
	Err            error
	LogStartOffset int64
	LogEndOffset   int64
}

// RefetchQuery asks the leader for leave to cut the follower's log at
// Offset, where a damaged range starts (GrantRefetch).
type RefetchQuery struct {
	Key
	LeaderEpoch int32
	Offset      int64
}

// RefetchGrant answers a RefetchQuery: Err when the leader refused to
// consider it, Granted when the follower may cut.
type RefetchGrant struct {
	Key
	Err     error
	Granted bool
}

// Upstream is a Fetcher's leader as the follower sees it: the requests of
// the follower protocol,
// each for many partitions at once. lib/peer implements it over the
// network (OffsetForLeaderEpoch, Fetch in an incremental fetch session,
// ListOffsets, mq's Refetch); the package's scripts over another
// Partition in memory.
//
// A method returns an error when the leader could not be asked at all (a
// broken connection); the Fetcher backs off and calls again, and the
// Upstream reconnects as it must. A partition the leader refused has Err
// set in its answer; a partition missing from the answers is retried
// later, except in Fetch, where a missing partition has nothing new (an
// incremental fetch session leaves those out). A Fetcher calls one method
// at a time.
//
// Fetch's maxWait, when positive, shortens how long the leader may hold
// the fetch while it has nothing new (below replica.fetch.wait.max.ms): a
// throttled partition left out of it is to be fetched once the Quota
// gives again, not a long-poll later.
type Upstream interface {
	EndOffsets(ctx context.Context, qs []EpochQuery) ([]EpochEnd, error)
	Fetch(ctx context.Context, qs []FetchQuery, maxWait time.Duration) ([]Fetched, error)
	LogRanges(ctx context.Context, qs []RangeQuery) ([]LogRange, error)
	Refetch(ctx context.Context, qs []RefetchQuery) ([]RefetchGrant, error)
}

// FetcherConfig is what a Fetcher needs beyond its Upstream.
type FetcherConfig struct {
	// Leader is the node id of the leader fetched from: a partition whose
	// position names another leader is left alone until it is given to
	// that leader's Fetcher.
	Leader int32
	// Backoff is replica.fetch.backoff.ms: the wait after a failed
	// request, and the longest wait before a refused partition is asked
	// about again. Zero means 100 ms.
	Backoff time.Duration
	Clock   clock.Clock  // nil: real time
	Logger  *slog.Logger // nil: silent
	// Quota is the follower side of the node's replication throttle
	// (follower.replication.throttled.rate), shared by its Fetchers: the
	// partitions whose FetchPosition is Throttled fetch only while it
	// gives an allowance, and what they fetched counts against it. nil:
	// no throttle.
	Quota *Quota
}

// Fetcher replicates a set of follower partitions from one leader: the
// follower side of the replication protocol. Each round it first repairs
// damaged ranges with the leader's leave (Refetch, RefetchDamaged), then
// truncates the partitions whose leadership changed by the leader's
// OffsetForLeaderEpoch answer (TruncateFromLeader), then fetches all the
// others in one request and appends what comes back (AppendFromLeader),
// moving a partition out of the leader's range back into it
// (ResetFetchOffset). A partition the leader refuses is asked about again
// after a delay that doubles from firstRetry up to Backoff, and at once
// when its leader epoch changes.
//
// Run runs the rounds until Close; Set may be called at any time from
// other goroutines.
type Fetcher struct {
	cfg    FetcherConfig
	leader Upstream
	log    *slog.Logger
	clock  clock.Clock

	mu    sync.Mutex
	parts map[Key]*followed

	// heldUntil is set by a round in which every partition to fetch was
	// throttled and held back: when the Quota gives again. heldFor is set
	// when only some were: the fetch of the others waits no longer than
	// that. Run's only.
	heldUntil time.Time
	heldFor   time.Duration

	wake chan struct{} // a send means the partition set changed
	stop chan struct{}
	done chan struct{}
	once sync.Once
}

// followed is one partition of a Fetcher.
type followed struct {
	p *Partition
	// refusedEpoch is the leader epoch at which the leader last refused
	// this partition (not leader yet, epoch unknown to it, …) and retryAt
	// when to ask again; a new epoch retries at once.
	refusedEpoch int32
	retryAt      time.Time
	// refusals counts the refusals in a row: the retry delay doubles from
	// firstRetry up to Backoff, so that a leader that has not applied the
	// image yet (a topic created a moment ago, a leader just elected) is
	// asked again within milliseconds, not a backoff later while acks=all
	// waits for this follower. Written under Fetcher.mu by the run
	// goroutine only, which may read it without the lock.
	refusals int
	// appendFailing is set while this replica's appends of what the
	// leader sent fail (a full disk): the first failure of a run is
	// logged as a warning, the rest at debug level, and the first append
	// that works again says so. Run goroutine only.
	appendFailing bool
}

// firstRetry is the delay after a partition's first refusal in a row.
const firstRetry = 5 * time.Millisecond

// NewFetcher returns a Fetcher of no partitions from leader.
func NewFetcher(cfg FetcherConfig, leader Upstream) *Fetcher {
	if cfg.Backoff <= 0 {
		cfg.Backoff = 100 * time.Millisecond
	}
	if cfg.Clock == nil {
		cfg.Clock = clock.Real()
	}
	logger := cfg.Logger
	if logger == nil {
		logger = slog.New(slog.DiscardHandler)
	}
	return &Fetcher{
		cfg: cfg, leader: leader, log: logger, clock: cfg.Clock,
		parts: map[Key]*followed{},
		wake:  make(chan struct{}, 1),
		stop:  make(chan struct{}),
		done:  make(chan struct{}),
	}
}

// Set replaces the partitions fetched, keeping the state of those kept.
func (f *Fetcher) Set(parts []*Partition) {
	f.mu.Lock()
	next := make(map[Key]*followed, len(parts))
	for _, p := range parts {
		k := KeyOf(p)
		if old, ok := f.parts[k]; ok && old.p == p {
			next[k] = old
			continue
		}
		next[k] = &followed{p: p, refusedEpoch: -1}
	}
	f.parts = next
	f.mu.Unlock()
	// Always wake: a partition kept may have a new leader epoch to act on.
	select {
	case f.wake <- struct{}{}:
	default:
	}
}

// Run fetches until Close: a round when a partition is ready, else a wait
// for Set, a retry time or Close; after a failed request, a backoff.
func (f *Fetcher) Run() {
	defer close(f.done)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	go func() {
		select {
		case <-f.stop:
			cancel()
		case <-ctx.Done():
		}
	}()
	failures := 0
	for ctx.Err() == nil {
		did, nextRetry, err := f.round(ctx)
		switch {
		case err != nil:
			if ctx.Err() != nil {
				return
			}
			if failures == 0 {
				f.log.Warn("replica fetch failed", "err", err)
			}
			failures++
			f.sleep(ctx, f.cfg.Backoff)
		case !did:
			f.idle(ctx, nextRetry)
		case failures > 0:
			f.log.Info("replicating from leader again", "after_failures", failures)
			failures = 0
		}
	}
}

// Close stops Run, which must have been started, and waits for it to
// return. Closing twice is a no-op.
func (f *Fetcher) Close() {
	f.once.Do(func() { close(f.stop) })
	<-f.done
}

// round is one partition's part in a round.
type round struct {
	k   Key
	fp  *followed
	pos FetchPosition
	// maxBytes is FetchQuery.MaxBytes: a throttled partition's share of
	// the Quota's allowance; 0: the Upstream's limit.
	maxBytes int32
}

// round runs one round over the partitions ready now: it reports whether
// any was, else the earliest time one of the others may be retried (zero
// when none waits). An error means the leader could not be asked.
func (f *Fetcher) round(ctx context.Context) (bool, time.Time, error) {
	rounds, nextRetry := f.ready()
	if len(rounds) == 0 {
		return false, nextRetry, nil
	}
	f.heldUntil = time.Time{}
	err := f.fetchOnce(ctx, rounds)
	if held := f.heldUntil; !held.IsZero() && err == nil {
		if nextRetry.IsZero() || held.Before(nextRetry) {
			nextRetry = held
		}
		return false, nextRetry, nil
	}
	return true, time.Time{}, err
}

// ready lists the partitions to fetch now, and the earliest time one of
// the others may be retried (zero when none waits).
func (f *Fetcher) ready() ([]round, time.Time) {
	now := f.clock.Now()
	f.mu.Lock()
	defer f.mu.Unlock()
	var out []round
	var next time.Time
	for k, fp := range f.parts {
		pos, ok := fp.p.FetchPosition()
		if !ok || pos.Leader != f.cfg.Leader {
			continue // the next Set moves it
		}
		if fp.refusedEpoch == pos.LeaderEpoch && now.Before(fp.retryAt) {
			if next.IsZero() || fp.retryAt.Before(next) {
				next = fp.retryAt
			}
			continue
		}
		out = append(out, round{k: k, fp: fp, pos: pos})
	}
	return out, next
}

// idle waits for a change of the partition set, the retry time or stop.
func (f *Fetcher) idle(ctx context.Context, until time.Time) {
	var timeout <-chan time.Time
	if !until.IsZero() {
		t := f.clock.NewTimer(until.Sub(f.clock.Now()))
		defer t.Stop()
		timeout = t.C()
	}
	select {
	case <-f.wake:
	case <-timeout:
	case <-ctx.Done():
	}
}

func (f *Fetcher) sleep(ctx context.Context, d time.Duration) {
	t := f.clock.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C():
	case <-ctx.Done():
	}
}

// refuse keeps a partition out of rounds for a delay at its epoch.
func (f *Fetcher) refuse(r round) {
	f.mu.Lock()
	d := min(f.cfg.Backoff, firstRetry<<min(r.fp.refusals, 16))
	r.fp.refusals++
	r.fp.refusedEpoch, r.fp.retryAt = r.pos.LeaderEpoch, f.clock.Now().Add(d)
	f.mu.Unlock()
}

// accepted ends a partition's run of refusals.
func (f *Fetcher) accepted(r round) {
	if r.fp.refusals == 0 { // read without the lock: only the run goroutine writes it
		return
	}
	f.mu.Lock()
	r.fp.refusals = 0
	f.mu.Unlock()
}

// fetchOnce repairs the damaged partitions of rounds, else truncates
// those that need it, else fetches all of them once. An error means the
// leader could not be asked.
func (f *Fetcher) fetchOnce(ctx context.Context, rounds []round) error {
	rounds, cut, err := f.refetchDamaged(ctx, rounds)
	if err != nil {
		return err
	}
	if cut || len(rounds) == 0 {
		return nil // positions changed, or nothing to fetch: read them again
	}
	var truncate []round
	fetchable := rounds[:0:0]
	for _, r := range rounds {
		if r.pos.NeedsTruncation {
			truncate = append(truncate, r)
		} else {
			fetchable = append(fetchable, r)
		}
	}
	if len(truncate) > 0 {
		return f.truncate(ctx, truncate) // positions changed: read them again
	}
	return f.fetch(ctx, fetchable)
}

// byKey indexes rounds by partition, for matching answers.
func byKey(rounds []round) map[Key]round {
	index := make(map[Key]round, len(rounds))
	for _, r := range rounds {
		index[r.k] = r
	}
	return index
}

// refetchDamaged repairs the partitions whose logs have a damaged range
// (Partition.Damage): it asks the leader for leave to cut each log before
// its damage (Refetch, Partition.GrantRefetch on the leader), and cuts
// where it was given (RefetchDamaged); the fetch then gets the range
// again. Where the leader refuses (this replica is in its ISR, or being
// added), the partition is left out and asked about again after a delay:
// meanwhile the leader takes it out of the ISR. It returns the rounds to
// go on with and whether a log was cut (positions changed).
func (f *Fetcher) refetchDamaged(ctx context.Context, rounds []round) ([]round, bool, error) {
	var damaged []round
	var damage []log.Damage
	out := rounds[:0:0]
	for _, r := range rounds {
		if d, ok := r.fp.p.Damage(); ok {
			damaged = append(damaged, r)
			damage = append(damage, d)
		} else {
			out = append(out, r)
		}
	}
	if len(damaged) == 0 {
		return rounds, false, nil
	}
	qs := make([]RefetchQuery, len(damaged))
	for i, r := range damaged {
		qs[i] = RefetchQuery{Key: r.k, LeaderEpoch: r.pos.LeaderEpoch, Offset: damage[i].From}
	}
	grants, err := f.leader.Refetch(ctx, qs)
	if err != nil {
		return nil, false, err
	}
	answers := make(map[Key]RefetchGrant, len(grants))
	for _, g := range grants {
		answers[g.Key] = g
	}
	cut := false
	for i, r := range damaged {
		d, p := damage[i], r.fp.p
		a, ok := answers[r.k]
		switch {
		case !ok || a.Err != nil:
			f.log.Debug("leader refused Refetch", "partition", p.String(), "err", a.Err)
			f.refuse(r)
			continue
		case !a.Granted:
			if r.fp.refusals == 0 {
				f.log.Warn("damaged range found: not fetching until the leader has this replica out of the ISR, then fetching it again",
					"partition", p.String(), "damage", d.String())
			}
			f.refuse(r)
			continue
		}
		before := p.Log().EndOffset()
		switch did, err := p.RefetchDamaged(r.pos.LeaderEpoch, d.From); {
		case err != nil:
			f.log.Warn("cut before damaged range", "partition", p.String(), "damage", d.String(), "err", err)
			f.refuse(r)
			continue
		case did:
			cut = true
			f.log.Warn("damaged range cut off: fetching it again from the leader", "partition", p.String(),
				"from", before, "to", d.From, "damage", d.String())
		}
		out = append(out, r)
	}
	return out, cut, nil
}

// truncate asks the leader for the end offset of each partition's last
// fetched epoch (OffsetForLeaderEpoch) and truncates to where the logs
// agree (TruncateFromLeader).
func (f *Fetcher) truncate(ctx context.Context, rounds []round) error {
	qs := make([]EpochQuery, len(rounds))
	for i, r := range rounds {
		qs[i] = EpochQuery{Key: r.k, LeaderEpoch: r.pos.LeaderEpoch, Epoch: r.pos.LastFetchedEpoch}
	}
	ends, err := f.leader.EndOffsets(ctx, qs)
	if err != nil {
		return err
	}
	index := byKey(rounds)
	for _, e := range ends {
		r, ok := index[e.Key]
		if !ok {
			continue
		}
		delete(index, e.Key)
		p := r.fp.p
		if e.Err != nil {
			f.log.Debug("leader refused OffsetForLeaderEpoch", "partition", p.String(), "err", e.Err)
			f.refuse(r)
			continue
		}
		before := p.Log().EndOffset()
		if err := p.TruncateFromLeader(r.pos.LeaderEpoch, e.EndOffset, e.Epoch); err != nil {
			f.log.Warn("truncate to leader", "partition", p.String(), "err", err)
			f.refuse(r)
			continue
		}
		if after := p.Log().EndOffset(); after < before {
			f.log.Info("truncated diverging records", "partition", p.String(),
				"from", before, "to", after, "leader_epoch", e.Epoch)
		}
	}
	for _, r := range index { // not answered
		f.refuse(r)
	}
	return nil
}

// fetch fetches the partitions of rounds once and appends what comes
// back; those out of the leader's range are moved into it (reset). The
// throttled partitions are left out while the Quota gives nothing; when
// that leaves none, heldUntil says when to come back. Otherwise they
// share the allowance reserved for this fetch, and what they did not
// fetch of it goes back to the Quota when the answer is in.
func (f *Fetcher) fetch(ctx context.Context, rounds []round) error {
	f.heldFor = 0
	rounds, reserved := f.throttle(rounds)
	var moved int64
	defer func() {
		if reserved > 0 {
			f.cfg.Quota.Settle(reserved, moved)
		}
	}()
	if len(rounds) == 0 {
		return nil
	}
	qs := make([]FetchQuery, len(rounds))
	for i, r := range rounds {
		qs[i] = FetchQuery{Key: r.k, LeaderEpoch: r.pos.LeaderEpoch, FetchOffset: r.pos.FetchOffset,
			LastFetchedEpoch: r.pos.LastFetchedEpoch, LogStartOffset: r.fp.p.Log().StartOffset(),
			MaxBytes: r.maxBytes}
	}
	answers, err := f.leader.Fetch(ctx, qs, f.heldFor)
	if err != nil {
		return err
	}
	index := byKey(rounds)
	var outOfRange []round
	for _, a := range answers {
		r, ok := index[a.Key]
		if !ok {
			continue
		}
		p := r.fp.p
		if r.pos.Throttled {
			moved += int64(len(a.Records))
		}
		switch {
		case a.Err == nil:
			_, err := p.AppendFromLeader(r.pos.LeaderEpoch, a.Records, a.HighWatermark, a.LogStartOffset)
			switch {
			case err == nil:
				if r.fp.appendFailing {
					r.fp.appendFailing = false
					f.log.Info("append from leader works again", "partition", p.String())
				}
				f.accepted(r)
			case !errors.Is(err, ErrClosed):
				if r.fp.appendFailing {
					f.log.Debug("append from leader", "partition", p.String(), "err", err)
				} else {
					r.fp.appendFailing = true
					f.log.Warn("append from leader failed; retrying", "partition", p.String(), "err", err)
				}
				f.refuse(r)
			}
		case errors.Is(a.Err, ErrOutOfLeaderRange):
			outOfRange = append(outOfRange, r)
		default:
			f.log.Debug("leader refused fetch", "partition", p.String(), "err", a.Err)
			f.refuse(r)
		}
	}
	if len(outOfRange) > 0 {
		return f.reset(ctx, outOfRange)
	}
	return nil
}

// throttle leaves the throttled partitions out of rounds, reusing its
// array, when the Quota has no allowance for them; otherwise it reserves
// the allowance (returned, for Settle) and gives each throttled
// partition an equal share of it as its MaxBytes, so that the fetch
// moves at most the allowance and one batch (a partition asking for less
// than its first batch gets it whole when the leader answers it first,
// KIP-74, and the leader answers the partitions it skipped first next
// time): a follower asking for replica.fetch.max.bytes on a small
// allowance would owe the Quota for seconds, fetching nothing meanwhile.
func (f *Fetcher) throttle(rounds []round) ([]round, int64) {
	q := f.cfg.Quota
	if q == nil || !q.Limited() {
		return rounds, 0
	}
	throttled := 0
	for _, r := range rounds {
		if r.pos.Throttled {
			throttled++
		}
	}
	if throttled == 0 {
		return rounds, 0
	}
	reserved := q.Reserve()
	if reserved == Unlimited {
		return rounds, 0
	}
	if reserved > 0 {
		share := int32(min(max(reserved/int64(throttled), 1), math.MaxInt32))
		for i := range rounds {
			if rounds[i].pos.Throttled {
				rounds[i].maxBytes = share
			}
		}
		return rounds, reserved
	}
	kept := rounds[:0]
	for _, r := range rounds {
		if !r.pos.Throttled {
			kept = append(kept, r)
		}
	}
	wait := q.Hold()
	if len(kept) == 0 {
		f.heldUntil = f.clock.Now().Add(wait)
	} else {
		f.heldFor = wait
	}
	return kept, 0
}

// reset moves the fetch position of partitions out of the leader's range
// into its log start and log end offsets (ResetFetchOffset).
func (f *Fetcher) reset(ctx context.Context, rounds []round) error {
	qs := make([]RangeQuery, len(rounds))
	for i, r := range rounds {
		qs[i] = RangeQuery{Key: r.k, LeaderEpoch: r.pos.LeaderEpoch}
	}
	ranges, err := f.leader.LogRanges(ctx, qs)
	if err != nil {
		return err
	}
	answers := make(map[Key]LogRange, len(ranges))
	for _, lr := range ranges {
		answers[lr.Key] = lr
	}
	for _, r := range rounds {
		p := r.fp.p
		lr, ok := answers[r.k]
		if !ok || lr.Err != nil {
			f.refuse(r)
			continue
		}
		if err := p.ResetFetchOffset(r.pos.LeaderEpoch, lr.LogStartOffset, lr.LogEndOffset); err != nil {
			f.log.Warn("reset fetch offset", "partition", p.String(), "err", err)
			f.refuse(r)
			continue
		}
		f.log.Info("fetch offset out of the leader's range: moved", "partition", p.String(),
			"offset", r.pos.FetchOffset, "leader_log_start", lr.LogStartOffset, "leader_log_end", lr.LogEndOffset)
	}
	return nil
}
