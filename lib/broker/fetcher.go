package broker

import (
	"context"
	"errors"
	"fmt"
	"hash/fnv"
	"log/slog"
	"net"
	"strconv"
	"sync"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/mqproject/mq/lib/controller"
	"github.com/mqproject/mq/lib/kafkaext"
	"github.com/mqproject/mq/lib/log"
	"github.com/mqproject/mq/lib/peer"
	"github.com/mqproject/mq/lib/replica"
)

// Versions of the requests a follower sends to its leader. Fetch v13 names
// topics by ID, so a topic deleted and re-created under the same name is
// never mistaken for the old one.
const (
	followerFetchVersion       = 13
	followerEpochsVersion      = 4
	followerListOffsetsVersion = 4
)

// replicaFetchers runs this node's follower side of replication: for each
// leader broker, num.replica.fetchers fetchers, each one connection and one
// goroutine fetching every partition hashed to it from that leader, in one
// Fetch request per round. Broker.follow calls sync after every image.
type replicaFetchers struct {
	b *Broker

	mu     sync.Mutex
	byKey  map[fetcherKey]*fetcher
	closed bool
}

// fetcherKey names one fetcher: the leader it fetches from and its index
// among that leader's fetchers.
type fetcherKey struct {
	leader int32
	index  int32
}

func newReplicaFetchers(b *Broker) *replicaFetchers {
	return &replicaFetchers{b: b, byKey: map[fetcherKey]*fetcher{}}
}

// sync gives every hosted follower partition with a live leader to the
// fetcher of that leader, starts the fetchers needed and stops the others.
func (rf *replicaFetchers) sync(img *controller.Image) {
	n := max(rf.b.cfg.Settings.NumReplicaFetchers, 1)
	want := map[fetcherKey]map[topicPartition]*hosted{}
	addrs := map[int32]string{}
	for _, h := range rf.b.data.all() {
		pos, ok := h.FetchPosition()
		if !ok {
			continue
		}
		br, ok := img.Brokers[pos.Leader]
		if !ok || br.Fenced || br.Port <= 0 {
			continue // the controller is moving the leadership; wait for it
		}
		addrs[pos.Leader] = net.JoinHostPort(br.Host, strconv.Itoa(int(br.Port)))
		tp := topicPartition{h.Topic(), h.Partition.Partition()}
		key := fetcherKey{leader: pos.Leader, index: int32(hashPartition(tp) % uint32(n))}
		if want[key] == nil {
			want[key] = map[topicPartition]*hosted{}
		}
		want[key][tp] = h
	}
	rf.mu.Lock()
	defer rf.mu.Unlock()
	if rf.closed {
		return
	}
	for key, f := range rf.byKey {
		if parts, ok := want[key]; ok && f.addr == addrs[key.leader] {
			f.set(parts)
			continue
		}
		f.close()
		delete(rf.byKey, key)
	}
	for key, parts := range want {
		if _, ok := rf.byKey[key]; ok {
			continue
		}
		f := newFetcher(rf.b, key, addrs[key.leader])
		f.set(parts)
		rf.byKey[key] = f
		go f.run()
	}
}

// close stops every fetcher and waits for them.
func (rf *replicaFetchers) close() {
	rf.mu.Lock()
	rf.closed = true
	fs := rf.byKey
	rf.byKey = nil
	rf.mu.Unlock()
	for _, f := range fs {
		f.close()
	}
}

func hashPartition(tp topicPartition) uint32 {
	h := fnv.New32a()
	h.Write([]byte(tp.topic))
	h.Write([]byte{byte(tp.partition >> 24), byte(tp.partition >> 16), byte(tp.partition >> 8), byte(tp.partition)})
	return h.Sum32()
}

// fetcher fetches a set of partitions from one leader broker.
type fetcher struct {
	b    *Broker
	key  fetcherKey
	addr string

	mu    sync.Mutex
	parts map[topicPartition]*followed

	wake chan struct{} // a send means the partition set changed
	stop chan struct{}
	done chan struct{}

	// session is the fetch session with the leader; only run's goroutine
	// uses it.
	session fetcherSession
}

// fetcherSession is a follower's side of a fetch session (KIP-227): the
// session id the leader gave (0: none yet, the next fetch is full), the
// epoch of the next request, and the fetch state of every partition as the
// leader's session holds it.
type fetcherSession struct {
	id    int32
	epoch int32
	sent  map[topicPartitionID]kmsg.FetchRequestTopicPartition
}

// reset makes the next fetch a full one, creating a new session.
func (s *fetcherSession) reset() {
	*s = fetcherSession{}
}

// followed is one partition of a fetcher.
type followed struct {
	h *hosted
	// refusedEpoch is the leader epoch at which the leader last refused
	// this partition (not leader yet, epoch unknown to it, …) and
	// retryAt when to ask again; a new epoch retries at once.
	refusedEpoch int32
	retryAt      time.Time
	// refusals counts the refusals in a row: the retry delay doubles
	// from firstRetry up to replica.fetch.backoff.ms, so a leader that
	// has not applied the image yet (a topic created a moment ago, a
	// leader just elected) is asked again within milliseconds, not a
	// second later while acks=all waits for this follower.
	refusals int
}

func newFetcher(b *Broker, key fetcherKey, addr string) *fetcher {
	return &fetcher{
		b: b, key: key, addr: addr,
		parts: map[topicPartition]*followed{},
		wake:  make(chan struct{}, 1),
		stop:  make(chan struct{}),
		done:  make(chan struct{}),
	}
}

// set replaces the partition set, keeping the state of partitions kept.
func (f *fetcher) set(parts map[topicPartition]*hosted) {
	f.mu.Lock()
	next := make(map[topicPartition]*followed, len(parts))
	for tp, h := range parts {
		if old, ok := f.parts[tp]; ok && old.h == h {
			next[tp] = old
			continue
		}
		next[tp] = &followed{h: h, refusedEpoch: -1}
	}
	f.parts = next
	f.mu.Unlock()
	// Always wake: a partition kept may have a new leader epoch to act on.
	select {
	case f.wake <- struct{}{}:
	default:
	}
}

func (f *fetcher) close() {
	close(f.stop)
	<-f.done
}

// round is one partition's part in a fetch round.
type round struct {
	tp  topicPartition
	fp  *followed
	pos replica.FetchPosition
}

// run fetches until close: truncate the partitions that need it, then
// fetch them all in one request; on errors back off.
func (f *fetcher) run() {
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
	logger := f.b.log.With("leader", f.key.leader, "fetcher", f.key.index)
	var conn *peer.Conn
	defer func() {
		if conn != nil {
			conn.Close()
		}
	}()
	failures := 0
	for ctx.Err() == nil {
		rounds, nextRetry := f.ready()
		if len(rounds) == 0 {
			f.idle(ctx, nextRetry)
			continue
		}
		if conn == nil {
			c, err := peer.Dial(ctx, f.addr, "mq-follower-"+strconv.Itoa(int(f.b.cfg.Settings.NodeID)))
			if err != nil {
				if failures == 0 {
					logger.Warn("cannot reach leader to replicate", "addr", f.addr, "err", err)
				}
				failures++
				f.backoff(ctx)
				continue
			}
			conn = c
		}
		err := f.fetchOnce(ctx, conn, rounds, logger)
		if err != nil {
			conn.Close()
			conn = nil
			f.session.reset() // a new connection starts a new session
			if ctx.Err() != nil {
				return
			}
			if failures == 0 {
				logger.Warn("replica fetch failed", "addr", f.addr, "err", err)
			}
			failures++
			f.backoff(ctx)
			continue
		}
		if failures > 0 {
			logger.Info("replicating from leader again", "addr", f.addr, "after_failures", failures)
			failures = 0
		}
	}
}

// ready lists the partitions to fetch now, and the earliest time one of
// the others may be retried (zero when none waits).
func (f *fetcher) ready() ([]round, time.Time) {
	now := f.b.clock.Now()
	f.mu.Lock()
	defer f.mu.Unlock()
	var out []round
	var next time.Time
	for tp, fp := range f.parts {
		pos, ok := fp.h.FetchPosition()
		if !ok || pos.Leader != f.key.leader {
			continue // the next sync moves it
		}
		if fp.refusedEpoch == pos.LeaderEpoch && now.Before(fp.retryAt) {
			if next.IsZero() || fp.retryAt.Before(next) {
				next = fp.retryAt
			}
			continue
		}
		out = append(out, round{tp: tp, fp: fp, pos: pos})
	}
	return out, next
}

// idle waits for a change of the partition set, the retry time or stop.
func (f *fetcher) idle(ctx context.Context, until time.Time) {
	var timeout <-chan time.Time
	if !until.IsZero() {
		t := f.b.clock.NewTimer(until.Sub(f.b.clock.Now()))
		defer t.Stop()
		timeout = t.C()
	}
	select {
	case <-f.wake:
	case <-timeout:
	case <-ctx.Done():
	}
}

func (f *fetcher) backoff(ctx context.Context) {
	d := f.b.cfg.Settings.ReplicaFetchBackoff
	if d <= 0 {
		d = 100 * time.Millisecond
	}
	t := f.b.clock.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C():
	case <-ctx.Done():
	}
}

// refuse keeps a partition out of fetches for a backoff at its epoch.
func (f *fetcher) refuse(r round) {
	limit := f.b.cfg.Settings.ReplicaFetchBackoff
	if limit <= 0 {
		limit = 100 * time.Millisecond
	}
	f.mu.Lock()
	d := min(limit, firstRetry<<min(r.fp.refusals, 16))
	r.fp.refusals++
	r.fp.refusedEpoch, r.fp.retryAt = r.pos.LeaderEpoch, f.b.clock.Now().Add(d)
	f.mu.Unlock()
}

// firstRetry is the delay after a partition's first refusal in a row.
const firstRetry = 5 * time.Millisecond

// accepted ends a partition's run of refusals.
func (f *fetcher) accepted(r round) {
	if r.fp.refusals == 0 { // read without the lock: only this goroutine writes it
		return
	}
	f.mu.Lock()
	r.fp.refusals = 0
	f.mu.Unlock()
}

// requestTimeout bounds one request to the leader: its long-poll plus a
// margin.
func (f *fetcher) requestTimeout() time.Duration {
	return f.b.cfg.Settings.ReplicaFetchWait + 30*time.Second
}

// fetchOnce truncates the partitions that need it, then fetches all of the
// others once. An error means the connection is unusable.
func (f *fetcher) fetchOnce(ctx context.Context, conn *peer.Conn, rounds []round, logger *slog.Logger) error {
	rounds, cut, err := f.refetchDamaged(ctx, conn, rounds, logger)
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
		if err := f.truncate(ctx, conn, truncate, logger); err != nil {
			return err
		}
		return nil // positions changed: read them again
	}
	return f.fetch(ctx, conn, fetchable, logger)
}

// refetchDamaged repairs the partitions whose logs have a damaged range
// (replica.Partition.Damage): it asks the leader for leave to cut each
// log before its damage (kafkaext's Refetch, replica.GrantRefetch), and
// cuts where it was given (replica.Partition.RefetchDamaged); the fetch
// then gets the range again. Where the leader refuses (this replica is in
// its ISR, or being added), the partition is left out and asked about
// again after a backoff: meanwhile the leader takes it out of the ISR. It
// returns the rounds to go on with and whether a log was cut (positions
// changed); an error means the connection is unusable.
func (f *fetcher) refetchDamaged(ctx context.Context, conn *peer.Conn, rounds []round, logger *slog.Logger) ([]round, bool, error) {
	var damaged []round
	var damage []log.Damage
	out := rounds[:0:0]
	for _, r := range rounds {
		if d, ok := r.fp.h.Damage(); ok {
			damaged = append(damaged, r)
			damage = append(damage, d)
		} else {
			out = append(out, r)
		}
	}
	if len(damaged) == 0 {
		return rounds, false, nil
	}
	req := &kafkaext.RefetchRequest{ReplicaID: f.b.cfg.Settings.NodeID}
	for i, r := range damaged {
		req.Partitions = append(req.Partitions, kafkaext.RefetchPartition{
			Topic: r.tp.topic, Partition: r.tp.partition, LeaderEpoch: r.pos.LeaderEpoch, Offset: damage[i].From,
		})
	}
	raw, err := conn.Do(ctx, req, f.requestTimeout())
	if err != nil {
		return nil, false, err
	}
	answers := map[topicPartition]kafkaext.RefetchPartitionResponse{}
	for _, p := range raw.(*kafkaext.RefetchResponse).Partitions {
		answers[topicPartition{p.Topic, p.Partition}] = p
	}
	cut := false
	for i, r := range damaged {
		d := damage[i]
		a, ok := answers[r.tp]
		switch {
		case !ok || a.ErrorCode != 0:
			logger.Debug("leader refused Refetch", "partition", r.fp.h.String(), "err", kerr.ErrorForCode(a.ErrorCode))
			f.refuse(r)
			continue
		case !a.Granted:
			if r.fp.refusals == 0 {
				logger.Warn("damaged range found: not fetching until the leader has this replica out of the ISR, then fetching it again",
					"partition", r.fp.h.String(), "damage", d.String())
			}
			f.refuse(r)
			continue
		}
		before := r.fp.h.Log().EndOffset()
		switch did, err := r.fp.h.RefetchDamaged(r.pos.LeaderEpoch, d.From); {
		case err != nil:
			logger.Warn("cut before damaged range", "partition", r.fp.h.String(), "damage", d.String(), "err", err)
			f.refuse(r)
			continue
		case did:
			cut = true
			logger.Warn("damaged range cut off: fetching it again from the leader", "partition", r.fp.h.String(),
				"from", before, "to", d.From, "damage", d.String())
		}
		out = append(out, r)
	}
	return out, cut, nil
}

// truncate asks the leader for the end offset of each partition's last
// fetched epoch (OffsetForLeaderEpoch) and truncates to where the logs
// agree.
func (f *fetcher) truncate(ctx context.Context, conn *peer.Conn, rounds []round, logger *slog.Logger) error {
	req := kmsg.NewPtrOffsetForLeaderEpochRequest()
	req.Version = followerEpochsVersion
	req.ReplicaID = f.b.cfg.Settings.NodeID
	for _, group := range roundsByTopic(rounds) {
		t := kmsg.NewOffsetForLeaderEpochRequestTopic()
		t.Topic = group[0].tp.topic
		for _, r := range group {
			p := kmsg.NewOffsetForLeaderEpochRequestTopicPartition()
			p.Partition = r.tp.partition
			p.CurrentLeaderEpoch = r.pos.LeaderEpoch
			p.LeaderEpoch = r.pos.LastFetchedEpoch
			t.Partitions = append(t.Partitions, p)
		}
		req.Topics = append(req.Topics, t)
	}
	raw, err := conn.Do(ctx, req, f.requestTimeout())
	if err != nil {
		return err
	}
	resp := raw.(*kmsg.OffsetForLeaderEpochResponse)
	index := map[topicPartition]round{}
	for _, r := range rounds {
		index[r.tp] = r
	}
	for _, t := range resp.Topics {
		for _, p := range t.Partitions {
			r, ok := index[topicPartition{t.Topic, p.Partition}]
			if !ok {
				continue
			}
			delete(index, r.tp)
			if p.ErrorCode != 0 {
				logger.Debug("leader refused OffsetForLeaderEpoch", "partition", r.fp.h.String(), "err", kerr.ErrorForCode(p.ErrorCode))
				f.refuse(r)
				continue
			}
			before := r.fp.h.Log().EndOffset()
			if err := r.fp.h.TruncateFromLeader(r.pos.LeaderEpoch, p.EndOffset, p.LeaderEpoch); err != nil {
				logger.Warn("truncate to leader", "partition", r.fp.h.String(), "err", err)
				f.refuse(r)
				continue
			}
			if after := r.fp.h.Log().EndOffset(); after < before {
				logger.Info("truncated diverging records", "partition", r.fp.h.String(),
					"from", before, "to", after, "leader_epoch", p.LeaderEpoch)
			}
		}
	}
	for _, r := range index { // not answered
		f.refuse(r)
	}
	return nil
}

// fetch sends one Fetch for the partitions of rounds and appends what
// comes back. In a session (fetcherSession) the request is incremental:
// it names only the partitions that are new to the session or whose fetch
// state changed, and forgets those no longer fetched; the leader answers
// only the partitions with news, and a partition it leaves out has
// nothing new. Without one, it is a full fetch asking for a session.
func (f *fetcher) fetch(ctx context.Context, conn *peer.Conn, rounds []round, logger *slog.Logger) error {
	s := f.b.cfg.Settings
	req := kmsg.NewPtrFetchRequest()
	req.Version = followerFetchVersion
	req.ReplicaID = s.NodeID
	req.MaxWaitMillis = int32(s.ReplicaFetchWait / time.Millisecond)
	req.MinBytes = 1
	req.MaxBytes = s.ReplicaFetchResponseMaxBytes
	sess := &f.session
	full := sess.id == 0
	if full {
		req.SessionID, req.SessionEpoch = 0, sessionEpochInitial
	} else {
		req.SessionID, req.SessionEpoch = sess.id, sess.epoch
	}
	byTopic := map[controller.TopicID]int{}
	index := map[topicPartitionID]round{}
	want := make(map[topicPartitionID]kmsg.FetchRequestTopicPartition, len(rounds))
	for _, r := range rounds {
		id := r.fp.h.topicID
		key := topicPartitionID{id, r.tp.partition}
		p := kmsg.NewFetchRequestTopicPartition()
		p.Partition = r.tp.partition
		p.CurrentLeaderEpoch = r.pos.LeaderEpoch
		p.FetchOffset = r.pos.FetchOffset
		p.LastFetchedEpoch = r.pos.LastFetchedEpoch
		p.LogStartOffset = r.fp.h.Log().StartOffset()
		p.PartitionMaxBytes = s.ReplicaFetchMaxBytes
		index[key] = r
		want[key] = p
		if old, ok := sess.sent[key]; ok && !full && sameFetchState(old, p) {
			continue // the leader's session has it as it is
		}
		i, ok := byTopic[id]
		if !ok {
			i = len(req.Topics)
			byTopic[id] = i
			t := kmsg.NewFetchRequestTopic()
			t.TopicID = id
			t.Topic = r.tp.topic
			req.Topics = append(req.Topics, t)
		}
		req.Topics[i].Partitions = append(req.Topics[i].Partitions, p)
	}
	if !full {
		forgotten := map[controller.TopicID]int{}
		for key := range sess.sent {
			if _, ok := want[key]; ok {
				continue
			}
			i, ok := forgotten[key.id]
			if !ok {
				i = len(req.ForgottenTopics)
				forgotten[key.id] = i
				t := kmsg.NewFetchRequestForgottenTopic()
				t.TopicID = key.id
				req.ForgottenTopics = append(req.ForgottenTopics, t)
			}
			req.ForgottenTopics[i].Partitions = append(req.ForgottenTopics[i].Partitions, key.partition)
		}
	}
	raw, err := conn.Do(ctx, req, f.requestTimeout())
	if err != nil {
		return err
	}
	resp := raw.(*kmsg.FetchResponse)
	switch resp.ErrorCode {
	case 0:
	case kerr.FetchSessionIDNotFound.Code, kerr.InvalidFetchSessionEpoch.Code, kerr.FetchSessionTopicIDError.Code:
		logger.Debug("fetch session refused: full fetch next", "session", sess.id, "err", kerr.ErrorForCode(resp.ErrorCode))
		sess.reset()
		return nil
	default:
		sess.reset()
		return fmt.Errorf("fetch from leader %d: %w", f.key.leader, kerr.ErrorForCode(resp.ErrorCode))
	}
	if full {
		sess.id, sess.epoch = resp.SessionID, 1 // id 0: the leader declined; full fetches go on
	} else {
		sess.epoch = nextEpoch(sess.epoch)
	}
	sess.sent = want
	var outOfRange []round
	for _, t := range resp.Topics {
		for _, p := range t.Partitions {
			r, ok := index[topicPartitionID{controller.TopicID(t.TopicID), p.Partition}]
			if !ok {
				continue
			}
			switch p.ErrorCode {
			case 0:
				_, err := r.fp.h.AppendFromLeader(r.pos.LeaderEpoch, p.RecordBatches, p.HighWatermark, p.LogStartOffset)
				switch {
				case err == nil:
					f.accepted(r)
				case !errors.Is(err, replica.ErrClosed):
					logger.Warn("append from leader", "partition", r.fp.h.String(), "err", err)
					f.refuse(r)
				}
			case kerr.OffsetOutOfRange.Code:
				outOfRange = append(outOfRange, r)
			default:
				logger.Debug("leader refused fetch", "partition", r.fp.h.String(), "err", kerr.ErrorForCode(p.ErrorCode))
				f.refuse(r)
			}
		}
	}
	if len(outOfRange) > 0 {
		return f.reset(ctx, conn, outOfRange, logger)
	}
	return nil
}

// sameFetchState reports whether a and b ask the same of a partition.
func sameFetchState(a, b kmsg.FetchRequestTopicPartition) bool {
	return a.FetchOffset == b.FetchOffset && a.CurrentLeaderEpoch == b.CurrentLeaderEpoch &&
		a.LastFetchedEpoch == b.LastFetchedEpoch && a.LogStartOffset == b.LogStartOffset &&
		a.PartitionMaxBytes == b.PartitionMaxBytes
}

// roundsByTopic groups rounds by topic name, topics in first-seen order,
// for the requests that name topics (OffsetForLeaderEpoch, ListOffsets).
func roundsByTopic(rounds []round) [][]round {
	var groups [][]round
	index := map[string]int{}
	for _, r := range rounds {
		i, ok := index[r.tp.topic]
		if !ok {
			i = len(groups)
			index[r.tp.topic] = i
			groups = append(groups, nil)
		}
		groups[i] = append(groups[i], r)
	}
	return groups
}

// topicPartitionID names a partition by topic ID.
type topicPartitionID struct {
	id        controller.TopicID
	partition int32
}

// reset handles OFFSET_OUT_OF_RANGE: it asks the leader for its log start
// and log end offsets and moves the fetch position into them.
func (f *fetcher) reset(ctx context.Context, conn *peer.Conn, rounds []round, logger *slog.Logger) error {
	ask := func(ts int64) (map[topicPartition]int64, error) {
		req := kmsg.NewPtrListOffsetsRequest()
		req.Version = followerListOffsetsVersion
		req.ReplicaID = f.b.cfg.Settings.NodeID
		for _, group := range roundsByTopic(rounds) {
			t := kmsg.NewListOffsetsRequestTopic()
			t.Topic = group[0].tp.topic
			for _, r := range group {
				p := kmsg.NewListOffsetsRequestTopicPartition()
				p.Partition = r.tp.partition
				p.CurrentLeaderEpoch = r.pos.LeaderEpoch
				p.Timestamp = ts
				t.Partitions = append(t.Partitions, p)
			}
			req.Topics = append(req.Topics, t)
		}
		raw, err := conn.Do(ctx, req, f.requestTimeout())
		if err != nil {
			return nil, err
		}
		out := map[topicPartition]int64{}
		for _, t := range raw.(*kmsg.ListOffsetsResponse).Topics {
			for _, p := range t.Partitions {
				if p.ErrorCode == 0 {
					out[topicPartition{t.Topic, p.Partition}] = p.Offset
				}
			}
		}
		return out, nil
	}
	starts, err := ask(-2)
	if err != nil {
		return err
	}
	ends, err := ask(-1)
	if err != nil {
		return err
	}
	for _, r := range rounds {
		start, ok1 := starts[r.tp]
		end, ok2 := ends[r.tp]
		if !ok1 || !ok2 {
			f.refuse(r)
			continue
		}
		if err := r.fp.h.ResetFetchOffset(r.pos.LeaderEpoch, start, end); err != nil {
			logger.Warn("reset fetch offset", "partition", r.fp.h.String(), "err", err)
			f.refuse(r)
			continue
		}
		logger.Info("fetch offset out of the leader's range: moved", "partition", r.fp.h.String(),
			"offset", r.pos.FetchOffset, "leader_log_start", start, "leader_log_end", end)
	}
	return nil
}

// checkpointHighWatermarks writes every hosted partition's high-water mark
// to the data directory's log checkpoints
// (replica.high.watermark.checkpoint.interval.ms), so that a restarted
// replica does not start from its log start: each log records its mark in
// them, in memory, and they are one file, written once, with the recovery
// points and leader-epoch histories the logs recorded since the last
// time. A pass stops early when the broker closes, which
// checkpoints every one as it closes the logs (dataPlane.closeAll).
func (b *Broker) checkpointHighWatermarks() {
	for _, h := range b.data.all() {
		select {
		case <-b.stop:
			return
		default:
		}
		if err := h.Log().CheckpointHighWatermark(h.HighWatermarkToCheckpoint()); err != nil && !errors.Is(err, log.ErrClosed) {
			b.log.Warn("checkpoint high-water mark", "partition", h.String(), "err", err)
		}
	}
	if err := b.data.checkpoints.Write(); err != nil {
		b.log.Warn("write the log checkpoints", "err", err)
	}
}
