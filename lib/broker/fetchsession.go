package broker

import (
	"cmp"
	"context"
	"math/rand/v2"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// Fetch sessions (KIP-227) for followers and consumers. A session holds
// the partitions a client fetches and, for each, what it last asked (fetch
// offset, …) and what it was last told (high-water mark, log start), so
// that after the full fetch that creates it each request names only the
// partitions whose fetch state changed and each response only the
// partitions with news. A consumer of 10,000 partitions otherwise sends and
// is answered all 10,000 in every fetch, however few have records.
//
// A session reads its partitions from a cursor that moves past the last
// partition answered with records (fetch.start), so that when the
// response's bytes run out it is the others' turn next.
//
// A consumer's session also skips the partitions that cannot have news: a
// read that found nothing past the fetch offset leaves the partition's
// Changed channel with the session (quietRead), and while that
// channel stays open — no append, high-water mark, role or epoch change —
// and the consumer asks the same offset in the same epoch, the next
// fetches answer from what that read found, without taking the partition's
// locks. A live consumer of many partitions is woken by each produce to
// one of them, and reading them all each time would cost in proportion
// to the partitions, on every message's way. A change the channel
// does not tell (the log start moved by retention or DeleteRecords) is
// found by the next whole read, one a second at most (sessionRescan).
// Followers' sessions read everything each time: their reads are what
// record their fetch positions.

// Session epochs: a request's (session id, epoch) pair says what it is.
const (
	sessionEpochInitial = 0  // with id 0: a full fetch creating a session; with an id: close it and create another
	sessionEpochFinal   = -1 // a full fetch without a session, closing the one named
)

// The bounds of a broker's session cache, as Kafka's
// max.incremental.fetch.session.cache.slots (1000 sessions) and
// min.incremental.fetch.session.eviction.ms (two minutes): a follower's
// new session evicts the least recently used consumer session, else the
// least recently used follower's; a consumer's new one evicts the least
// recently used consumer session that has been idle for sessionEvictionIdle
// or holds fewer partitions than the new one asks for, and otherwise is
// declined (session id 0: the client goes on with full fetches), so that
// consumers beyond the bound do not evict each other on every fetch. The
// partitions of all sessions together are bounded the same way, which
// bounds the memory sessions take (about 250 bytes a partition with its
// index entry: 250 MiB at the bound).
const (
	maxFetchSessions     = 1000
	maxFetchSessionParts = 1 << 20
	sessionEvictionIdle  = 2 * time.Minute
)

// sessionRescan is how long a consumer's session may answer a partition
// from its last read (unchanged) before it reads every partition again.
const sessionRescan = time.Second

// fetchSessions is a broker's cache of fetch sessions. Its methods may be
// called concurrently.
type fetchSessions struct {
	mu   sync.Mutex
	byID map[int32]*fetchSession
	// The bounds: sessions, and partitions of all sessions together
	// (maxFetchSessions, maxFetchSessionParts; smaller in tests).
	maxSessions, maxParts int
	// parts is the partitions of all sessions held together.
	parts atomic.Int64

	// Counts for tests and diagnosis, of followers' requests and of
	// consumers'.
	followers, consumers sessionCounts
}

// sessionCounts counts requests served by sessions, the partitions the
// incremental ones carried, full fetches that asked for a session and got
// none, and partitions a read skipped (unchanged).
type sessionCounts struct {
	full, incremental, incrementalPartitions, declined, skipped atomic.Int64
}

// SessionCounts are counts of fetch requests served through fetch
// sessions since the broker started: full fetches (a session created or
// not), incremental ones and the partitions those named, full fetches
// that asked for a session and got none, and partitions a read skipped
// as unchanged.
type SessionCounts struct {
	Full, Incremental, IncrementalPartitions, Declined, Skipped int64
}

func (c *sessionCounts) read() SessionCounts {
	return SessionCounts{Full: c.full.Load(), Incremental: c.incremental.Load(),
		IncrementalPartitions: c.incrementalPartitions.Load(), Declined: c.declined.Load(), Skipped: c.skipped.Load()}
}

// FetchSessionCounts returns the counts of the followers' fetches and
// of the consumers'.
func (b *Broker) FetchSessionCounts() (followers, consumers SessionCounts) {
	return b.sessions.followers.read(), b.sessions.consumers.read()
}

// counts are the counts of replica's requests (-1: a consumer).
func (c *fetchSessions) counts(replica int32) *sessionCounts {
	if replica >= 0 {
		return &c.followers
	}
	return &c.consumers
}

// fetchSession is one client's session. Its id and replica (-1: a
// consumer) are fixed; the rest is guarded by mu.
type fetchSession struct {
	id      int32
	replica int32
	conn    context.Context // the connection that created it; done: the session is stale
	byID    bool            // topics named by ID (Fetch v13+), else by name
	count   *atomic.Int64   // the cache's parts, which update keeps while the session is held

	mu       sync.Mutex
	epoch    int32 // the epoch the next incremental request must carry
	lastUsed time.Time
	parts    []*sessionPartition // sorted by topic, then partition
	index    map[sessionKey]*sessionPartition
	cursor   int       // the index in parts the next read starts at
	dropped  bool      // the cache no longer holds it
	rescanAt time.Time // a consumer's: when the next fetch reads every partition again
}

// sessionKey names a partition of a session: by topic ID or by name,
// as the session's requests do.
type sessionKey struct {
	id        [16]byte
	name      string
	partition int32
}

func (k sessionKey) compare(o sessionKey) int {
	if c := slices.Compare(k.id[:], o.id[:]); c != 0 {
		return c
	}
	if c := cmp.Compare(k.name, o.name); c != 0 {
		return c
	}
	return cmp.Compare(k.partition, o.partition)
}

// sessionPartition is one partition of a session: what the follower last
// asked and what it was last told.
type sessionPartition struct {
	key                sessionKey
	fetchOffset        int64
	maxBytes           int32
	currentLeaderEpoch int32

	// The high-water mark and log start last sent; sent false: never sent,
	// so the next response includes the partition.
	sent                         bool
	sentHighWatermark, sentStart int64
	sentLastStable               int64

	// The last fetch's lookup, and what its read left for the next.
	lookup partitionLookup
	quiet  quietRead
}

func newFetchSessions() *fetchSessions {
	return &fetchSessions{byID: map[int32]*fetchSession{}, maxSessions: maxFetchSessions, maxParts: maxFetchSessionParts}
}

// create makes a session of parts partitions for replica on conn,
// replacing one this connection made before and every session whose
// connection has closed, and evicting others at the bounds as the
// constants above say. It returns nil when the new session is declined.
func (c *fetchSessions) create(replica int32, conn context.Context, byID bool, parts int, now time.Time) *fetchSession {
	c.mu.Lock()
	defer c.mu.Unlock()
	for _, s := range c.byID {
		if s.conn.Err() != nil || (s.replica == replica && s.conn == conn) {
			c.dropLocked(s)
		}
	}
	for len(c.byID) >= c.maxSessions || c.parts.Load()+int64(parts) > int64(c.maxParts) {
		victim := c.victimLocked(replica >= 0, parts, now)
		if victim == nil {
			return nil
		}
		c.dropLocked(victim)
	}
	s := &fetchSession{replica: replica, conn: conn, byID: byID, count: &c.parts, epoch: 1, lastUsed: now,
		index: map[sessionKey]*sessionPartition{}}
	for {
		s.id = rand.Int32N(1<<31-1) + 1 // nonzero
		if _, taken := c.byID[s.id]; !taken {
			break
		}
	}
	c.byID[s.id] = s
	return s
}

// victimLocked is the session a new one of parts partitions may evict, or
// nil: for a follower's (follower), the least recently used consumer
// session, else the least recently used follower's; for a consumer's, the
// least recently used consumer session idle for sessionEvictionIdle or
// smaller than parts. The caller holds c.mu.
func (c *fetchSessions) victimLocked(follower bool, parts int, now time.Time) *fetchSession {
	var victim *fetchSession
	var victimUsed time.Time
	victimFollows := true
	for _, s := range c.byID {
		s.mu.Lock()
		used, size := s.lastUsed, len(s.parts)
		s.mu.Unlock()
		follows := s.replica >= 0
		if !follower && (follows || (now.Sub(used) < sessionEvictionIdle && size >= parts)) {
			continue
		}
		// A consumer session before any follower's, then the least
		// recently used.
		if victim == nil || (victimFollows && !follows) || (victimFollows == follows && used.Before(victimUsed)) {
			victim, victimUsed, victimFollows = s, used, follows
		}
	}
	return victim
}

// dropLocked removes s from the cache. The caller holds c.mu.
func (c *fetchSessions) dropLocked(s *fetchSession) {
	delete(c.byID, s.id)
	s.mu.Lock()
	defer s.mu.Unlock()
	s.dropped = true
	c.parts.Add(-int64(len(s.parts)))
}

// get returns the session id, or nil.
func (c *fetchSessions) get(id int32) *fetchSession {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.byID[id]
}

// remove closes session id, if it exists.
func (c *fetchSessions) remove(id int32) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if s := c.byID[id]; s != nil {
		c.dropLocked(s)
	}
}

// size is the number of sessions held.
func (c *fetchSessions) size() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return len(c.byID)
}

// update applies a request to the session: the partitions it names are
// added or get their new fetch state, the forgotten ones leave. The
// caller holds s.mu.
func (s *fetchSession) update(r *kmsg.FetchRequest, version int16) {
	before := len(s.parts)
	changed := false
	for i := range r.Topics {
		rt := &r.Topics[i]
		for j := range rt.Partitions {
			rp := &rt.Partitions[j]
			key := s.key(rt.TopicID, rt.Topic, rp.Partition)
			sp := s.index[key]
			if sp == nil {
				key.name = strings.Clone(key.name) // the request's bytes are recycled
				sp = &sessionPartition{key: key}
				s.index[key] = sp
				s.parts = append(s.parts, sp)
				changed = true
			}
			sp.fetchOffset, sp.maxBytes, sp.currentLeaderEpoch = rp.FetchOffset, rp.PartitionMaxBytes, rp.CurrentLeaderEpoch
			if version < 9 {
				sp.currentLeaderEpoch = -1
			}
		}
	}
	for i := range r.ForgottenTopics {
		ft := &r.ForgottenTopics[i]
		for _, p := range ft.Partitions {
			key := s.key(ft.TopicID, ft.Topic, p)
			if sp := s.index[key]; sp != nil {
				delete(s.index, key)
				s.parts = slices.DeleteFunc(s.parts, func(x *sessionPartition) bool { return x == sp })
			}
		}
	}
	if changed {
		slices.SortFunc(s.parts, func(a, b *sessionPartition) int { return a.key.compare(b.key) })
	}
	if !s.dropped {
		s.count.Add(int64(len(s.parts) - before))
	}
}

func (s *fetchSession) key(id [16]byte, name string, partition int32) sessionKey {
	if s.byID {
		return sessionKey{id: id, partition: partition}
	}
	return sessionKey{name: name, partition: partition}
}

// nextEpoch is the epoch after e: epochs run 1, 2, … and wrap to 1.
func nextEpoch(e int32) int32 {
	if e == 1<<31-1 {
		return 1
	}
	return e + 1
}

// openSession handles a request that uses sessions: epoch 0 creates one
// (closing the one named, if any) from the request's partitions, epoch -1
// closes the one named and fetches without one, and any other epoch must
// be the named session's next: the request's partitions and forgotten
// topics update it. On success f.session is set unless the request closed
// its session or the cache declined a new one; an error is the response's
// top-level code.
func (f *fetch) openSession(conn context.Context, b *Broker, r *kmsg.FetchRequest) *kerr.Error {
	now := b.clock.Now()
	counts := b.sessions.counts(f.replicaID)
	n := 0 // the partitions the request names
	for i := range r.Topics {
		n += len(r.Topics[i].Partitions)
	}
	byID := f.version >= 13
	switch {
	case r.SessionEpoch == sessionEpochFinal:
		b.sessions.remove(r.SessionID)
		return nil
	case r.SessionEpoch == sessionEpochInitial:
		if r.SessionID != 0 {
			b.sessions.remove(r.SessionID)
		}
		s := b.sessions.create(f.replicaID, conn, byID, n, now)
		if s == nil {
			counts.declined.Add(1)
			return nil
		}
		s.mu.Lock()
		defer s.mu.Unlock()
		s.update(r, f.version)
		counts.full.Add(1)
		f.session, f.sessionID, f.counts = s, s.id, counts
		return nil
	case r.SessionEpoch < 0:
		return kerr.InvalidFetchSessionEpoch
	}
	s := b.sessions.get(r.SessionID)
	if s == nil || s.replica != f.replicaID {
		return kerr.FetchSessionIDNotFound
	}
	if s.byID != byID {
		return kerr.FetchSessionTopicIDError
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if r.SessionEpoch != s.epoch {
		return kerr.InvalidFetchSessionEpoch
	}
	s.epoch = nextEpoch(s.epoch)
	s.lastUsed = now
	s.update(r, f.version)
	counts.incremental.Add(1)
	counts.incrementalPartitions.Add(int64(n))
	f.session, f.sessionID, f.incremental, f.counts = s, s.id, true, counts
	return nil
}

// fromSession fills f.topics with every partition of the session, in its
// order, for lookup, with what the last read left for a consumer's unless
// its whole read is due (sessionRescan).
func (f *fetch) fromSession(now time.Time) {
	s := f.session
	s.mu.Lock()
	defer s.mu.Unlock()
	keepSeen := s.replica < 0 && now.Before(s.rescanAt)
	if s.replica < 0 && !keepSeen {
		s.rescanAt = now.Add(sessionRescan)
	}
	f.sessionParts = append(f.sessionParts[:0], s.parts...)
	if len(s.parts) > 0 {
		f.start = s.cursor % len(s.parts)
	}
	topics := 0
	for i, sp := range s.parts {
		if i == 0 || sp.key.id != s.parts[i-1].key.id || sp.key.name != s.parts[i-1].key.name {
			topics++
		}
	}
	f.topics = reuse(f.topics, topics)
	t := -1
	for i, sp := range s.parts {
		if i == 0 || sp.key.id != s.parts[i-1].key.id || sp.key.name != s.parts[i-1].key.name {
			t++
			f.topics[t] = fetchTopic{id: sp.key.id, name: sp.key.name, parts: f.topics[t].parts[:0]}
		}
		fp := fetchPartition{
			partition:          sp.key.partition,
			fetchOffset:        sp.fetchOffset,
			maxBytes:           sp.maxBytes,
			currentLeaderEpoch: sp.currentLeaderEpoch,
			partitionLookup:    sp.lookup,
		}
		if keepSeen {
			fp.quietRead = sp.quiet
		}
		f.topics[t].parts = append(f.topics[t].parts, fp)
	}
}

// unchanged reports whether a read of fp would find what the read that
// left fp.seen found: its channel is still open, and the fetch asks the
// same offset in the same epoch.
func (fp *fetchPartition) unchanged() bool {
	if fp.seen == nil || fp.seenOffset != fp.fetchOffset || fp.seenEpoch != fp.currentLeaderEpoch {
		return false
	}
	select {
	case <-fp.seen:
		return false
	default:
		return true
	}
}

// markSent decides which partitions an incremental response leaves out
// (no records, no error, and the high-water mark and log start the client
// was last told), records what the response tells, and moves the
// session's cursor past the last partition answered with records.
func (f *fetch) markSent() {
	s := f.session
	s.mu.Lock()
	defer s.mu.Unlock()
	if f.lastRead >= 0 {
		s.cursor = f.lastRead + 1
	}
	k := 0
	for i := range f.topics {
		for j := range f.topics[i].parts {
			fp := &f.topics[i].parts[j]
			sp := f.sessionParts[k]
			k++
			sp.lookup, sp.quiet = fp.partitionLookup, fp.quietRead
			if f.incremental && fp.region.Len == 0 && fp.remote == nil && fp.err == nil && sp.sent &&
				fp.highWatermark == sp.sentHighWatermark && fp.logStartOffset == sp.sentStart && fp.lastStableOffset == sp.sentLastStable {
				fp.omit = true
				continue
			}
			sp.sent, sp.sentHighWatermark, sp.sentStart = true, fp.highWatermark, fp.logStartOffset
			sp.sentLastStable = fp.lastStableOffset
		}
	}
}
