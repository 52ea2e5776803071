package peer

import (
	"context"
	"crypto/tls"
	"fmt"
	"strconv"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/mqproject/mq/lib/kafkaext"
	"github.com/mqproject/mq/lib/replica"
)

// Versions of the requests a follower sends to its leader. Fetch v13 names
// topics by ID, so a topic deleted and re-created under the same name is
// never mistaken for the old one.
const (
	followerFetchVersion = 13
	// followerEpochFetchVersion is the Fetch that carries the
	// follower's broker epoch (ReplicaState, KIP-903).
	followerEpochFetchVersion  = 15
	followerEpochsVersion      = 4
	followerListOffsetsVersion = 4
)

// Fetch session epochs (KIP-227): the first request of a session asks for
// one with epoch 0; later ones count from 1, wrapping past the largest
// int32 to 1.
const sessionEpochInitial = 0

func nextSessionEpoch(e int32) int32 {
	if e == 1<<31-1 {
		return 1
	}
	return e + 1
}

// LeaderConfig is how a follower fetches from its leader: Kafka's
// replica.fetch.* settings.
type LeaderConfig struct {
	NodeID int32  // the follower's broker id, sent as the replica id
	Addr   string // the leader's listener, host:port
	// BrokerEpoch, when set, is the follower's broker epoch (its
	// registration's), sent with every Fetch once positive (v15's
	// ReplicaState, KIP-903): a leader refuses the fetches of an epoch
	// older than the one its image holds for this broker.
	BrokerEpoch func() int64
	// TLS, when set, makes the connection TLS (Addr is then an ssl://
	// listener's host:port): it is called at each dial, so that a
	// certificate read again is used from the next connection on.
	TLS func() *tls.Config
	// MaxWait is replica.fetch.wait.max.ms, the leader's long-poll.
	MaxWait time.Duration
	// MaxBytes is replica.fetch.response.max.bytes, PartitionMaxBytes
	// replica.fetch.max.bytes.
	MaxBytes, PartitionMaxBytes int32
	// Watch, when set, hears of every exchange with the leader, whose
	// broker id is LeaderID: a failed one is Lost, a good one Reached.
	Watch    *Watch
	LeaderID int32
}

// Leader is a follower's connection to its leader: replica.Upstream over
// the network, with Kafka's requests (OffsetForLeaderEpoch, Fetch,
// ListOffsets) and mq's Refetch. It dials on first use and after a failed
// exchange, and keeps one incremental fetch session (KIP-227) per
// connection: a Fetch names only the partitions new to the session or
// whose fetch state changed, and forgets those no longer fetched; the
// leader answers only the partitions with news. Like a Conn it serves one
// request at a time; Close ends it.
type Leader struct {
	cfg  LeaderConfig
	conn *Conn

	// The fetch session: the id the leader gave (0: none yet, the next
	// fetch is full), the epoch of the next request, and the fetch state
	// of every partition as the leader's session holds it.
	sessionID, sessionEpoch int32
	sent                    map[partitionID]kmsg.FetchRequestTopicPartition
}

// partitionID names a partition in a fetch session: by topic ID.
type partitionID struct {
	topic     [16]byte
	partition int32
}

// NewLeader returns a Leader that connects to cfg.Addr when first asked.
func NewLeader(cfg LeaderConfig) *Leader { return &Leader{cfg: cfg} }

// Close closes the connection, if any.
func (l *Leader) Close() error {
	if l.conn == nil {
		return nil
	}
	err := l.conn.Close()
	l.drop()
	return err
}

// drop forgets the connection after a failed exchange: the next request
// dials again and starts a new fetch session.
func (l *Leader) drop() {
	if l.conn != nil {
		l.conn.Close()
	}
	l.conn = nil
	l.sessionID, l.sessionEpoch, l.sent = 0, 0, nil
}

// requestTimeout bounds one request to the leader: its long-poll plus a
// margin.
func (l *Leader) requestTimeout() time.Duration { return l.cfg.MaxWait + 30*time.Second }

// do sends req on the connection, dialing first when there is none.
func (l *Leader) do(ctx context.Context, req kmsg.Request) (kmsg.Response, error) {
	var mark uint64
	if l.cfg.Watch != nil {
		mark = l.cfg.Watch.Mark()
	}
	if l.conn == nil {
		var cfg *tls.Config
		if l.cfg.TLS != nil {
			cfg = l.cfg.TLS()
		}
		c, err := DialTLS(ctx, l.cfg.Addr, "mq-follower-"+strconv.Itoa(int(l.cfg.NodeID)), cfg)
		if err != nil {
			l.lost(ctx)
			return nil, fmt.Errorf("cannot reach leader at %s: %w", l.cfg.Addr, err)
		}
		l.conn = c
	}
	resp, err := l.conn.Do(ctx, req, l.requestTimeout())
	if err != nil {
		l.drop()
		l.lost(ctx)
		return nil, fmt.Errorf("leader at %s: %w", l.cfg.Addr, err)
	}
	if l.cfg.Watch != nil {
		l.cfg.Watch.Reached(l.cfg.LeaderID, mark)
	}
	return resp, nil
}

// lost tells the Watch of a failed exchange, unless the follower itself
// gave it up (ctx ended: the fetcher stops or moves).
func (l *Leader) lost(ctx context.Context) {
	if l.cfg.Watch != nil && ctx.Err() == nil {
		l.cfg.Watch.Lost(l.cfg.LeaderID, l.cfg.Addr)
	}
}

// codeErr is a per-partition error code as an error, nil for none.
func codeErr(code int16) error {
	switch code {
	case 0:
		return nil
	case kerr.OffsetOutOfRange.Code:
		return fmt.Errorf("%w (%w)", replica.ErrOutOfLeaderRange, kerr.OffsetOutOfRange)
	case kerr.OffsetMovedToTieredStorage.Code:
		// Below the leader's local log (KIP-405): the follower restarts
		// at its local log start, which ListOffsets answers a replica.
		return fmt.Errorf("%w (%w)", replica.ErrOutOfLeaderRange, kerr.OffsetMovedToTieredStorage)
	}
	return kerr.ErrorForCode(code)
}

// byTopic groups keys by topic name, topics in first-seen order, for the
// requests that name topics.
func byTopic[T any](items []T, key func(*T) replica.Key) [][]*T {
	var groups [][]*T
	index := map[string]int{}
	for i := range items {
		name := key(&items[i]).Topic
		g, ok := index[name]
		if !ok {
			g = len(groups)
			index[name] = g
			groups = append(groups, nil)
		}
		groups[g] = append(groups[g], &items[i])
	}
	return groups
}

// answerKeys maps (topic name, partition) back to the keys asked about.
func answerKeys[T any](items []T, key func(*T) replica.Key) map[string]map[int32]replica.Key {
	out := map[string]map[int32]replica.Key{}
	for i := range items {
		k := key(&items[i])
		if out[k.Topic] == nil {
			out[k.Topic] = map[int32]replica.Key{}
		}
		out[k.Topic][k.Partition] = k
	}
	return out
}

// EndOffsets implements replica.Upstream with OffsetForLeaderEpoch.
func (l *Leader) EndOffsets(ctx context.Context, qs []replica.EpochQuery) ([]replica.EpochEnd, error) {
	key := func(q *replica.EpochQuery) replica.Key { return q.Key }
	req := kmsg.NewPtrOffsetForLeaderEpochRequest()
	req.Version = followerEpochsVersion
	req.ReplicaID = l.cfg.NodeID
	for _, group := range byTopic(qs, key) {
		t := kmsg.NewOffsetForLeaderEpochRequestTopic()
		t.Topic = group[0].Topic
		for _, q := range group {
			p := kmsg.NewOffsetForLeaderEpochRequestTopicPartition()
			p.Partition = q.Partition
			p.CurrentLeaderEpoch = q.LeaderEpoch
			p.LeaderEpoch = q.Epoch
			t.Partitions = append(t.Partitions, p)
		}
		req.Topics = append(req.Topics, t)
	}
	raw, err := l.do(ctx, req)
	if err != nil {
		return nil, err
	}
	keys := answerKeys(qs, key)
	var out []replica.EpochEnd
	for _, t := range raw.(*kmsg.OffsetForLeaderEpochResponse).Topics {
		for _, p := range t.Partitions {
			if k, ok := keys[t.Topic][p.Partition]; ok {
				out = append(out, replica.EpochEnd{Key: k, Err: codeErr(p.ErrorCode), EndOffset: p.EndOffset, Epoch: p.LeaderEpoch})
			}
		}
	}
	return out, nil
}

// LogRanges implements replica.Upstream with two ListOffsets, earliest
// and latest, as a follower (whose latest is the log end).
func (l *Leader) LogRanges(ctx context.Context, qs []replica.RangeQuery) ([]replica.LogRange, error) {
	key := func(q *replica.RangeQuery) replica.Key { return q.Key }
	keys := answerKeys(qs, key)
	ask := func(ts int64) (map[replica.Key]int64, map[replica.Key]error, error) {
		req := kmsg.NewPtrListOffsetsRequest()
		req.Version = followerListOffsetsVersion
		req.ReplicaID = l.cfg.NodeID
		for _, group := range byTopic(qs, key) {
			t := kmsg.NewListOffsetsRequestTopic()
			t.Topic = group[0].Topic
			for _, q := range group {
				p := kmsg.NewListOffsetsRequestTopicPartition()
				p.Partition = q.Partition
				p.CurrentLeaderEpoch = q.LeaderEpoch
				p.Timestamp = ts
				t.Partitions = append(t.Partitions, p)
			}
			req.Topics = append(req.Topics, t)
		}
		raw, err := l.do(ctx, req)
		if err != nil {
			return nil, nil, err
		}
		offsets, refused := map[replica.Key]int64{}, map[replica.Key]error{}
		for _, t := range raw.(*kmsg.ListOffsetsResponse).Topics {
			for _, p := range t.Partitions {
				k, ok := keys[t.Topic][p.Partition]
				switch {
				case !ok:
				case p.ErrorCode != 0:
					refused[k] = codeErr(p.ErrorCode)
				default:
					offsets[k] = p.Offset
				}
			}
		}
		return offsets, refused, nil
	}
	starts, refusedStart, err := ask(-2)
	if err != nil {
		return nil, err
	}
	ends, refusedEnd, err := ask(-1)
	if err != nil {
		return nil, err
	}
	out := make([]replica.LogRange, 0, len(qs))
	for _, q := range qs {
		start, ok1 := starts[q.Key]
		end, ok2 := ends[q.Key]
		switch {
		case ok1 && ok2:
			out = append(out, replica.LogRange{Key: q.Key, LogStartOffset: start, LogEndOffset: end})
		case refusedStart[q.Key] != nil:
			out = append(out, replica.LogRange{Key: q.Key, Err: refusedStart[q.Key]})
		case refusedEnd[q.Key] != nil:
			out = append(out, replica.LogRange{Key: q.Key, Err: refusedEnd[q.Key]})
		}
	}
	return out, nil
}

// Refetch implements replica.Upstream with mq's Refetch (lib/kafkaext).
func (l *Leader) Refetch(ctx context.Context, qs []replica.RefetchQuery) ([]replica.RefetchGrant, error) {
	req := &kafkaext.RefetchRequest{ReplicaID: l.cfg.NodeID}
	for _, q := range qs {
		req.Partitions = append(req.Partitions, kafkaext.RefetchPartition{
			Topic: q.Topic, Partition: q.Partition, LeaderEpoch: q.LeaderEpoch, Offset: q.Offset,
		})
	}
	raw, err := l.do(ctx, req)
	if err != nil {
		return nil, err
	}
	keys := answerKeys(qs, func(q *replica.RefetchQuery) replica.Key { return q.Key })
	var out []replica.RefetchGrant
	for _, p := range raw.(*kafkaext.RefetchResponse).Partitions {
		if k, ok := keys[p.Topic][p.Partition]; ok {
			out = append(out, replica.RefetchGrant{Key: k, Err: codeErr(p.ErrorCode), Granted: p.Granted})
		}
	}
	return out, nil
}

// Fetch implements replica.Upstream with one Fetch in the connection's
// fetch session: incremental once the leader gave the session an id,
// full (asking for a session) before. A session the leader no longer
// knows is dropped, and the next Fetch is full; this one answers
// nothing. The leader holds it up to MaxWait, or maxWait when that is
// positive and shorter (at least a millisecond). A partition's byte limit
// is PartitionMaxBytes, or its query's MaxBytes when that is smaller.
func (l *Leader) Fetch(ctx context.Context, qs []replica.FetchQuery, maxWait time.Duration) ([]replica.Fetched, error) {
	req := kmsg.NewPtrFetchRequest()
	req.Version = followerFetchVersion
	req.ReplicaID = l.cfg.NodeID
	if l.cfg.BrokerEpoch != nil {
		if epoch := l.cfg.BrokerEpoch(); epoch > 0 {
			req.Version = followerEpochFetchVersion
			req.ReplicaState.ID, req.ReplicaState.Epoch = l.cfg.NodeID, epoch
		}
	}
	wait := l.cfg.MaxWait
	if maxWait > 0 && maxWait < wait {
		wait = max(maxWait, time.Millisecond)
	}
	req.MaxWaitMillis = int32(wait / time.Millisecond)
	req.MinBytes = 1
	req.MaxBytes = l.cfg.MaxBytes
	full := l.sessionID == 0
	if full {
		req.SessionID, req.SessionEpoch = 0, sessionEpochInitial
	} else {
		req.SessionID, req.SessionEpoch = l.sessionID, l.sessionEpoch
	}
	topics := map[[16]byte]int{}
	keys := make(map[partitionID]replica.Key, len(qs))
	want := make(map[partitionID]kmsg.FetchRequestTopicPartition, len(qs))
	for _, q := range qs {
		id := partitionID{q.TopicID, q.Partition}
		p := kmsg.NewFetchRequestTopicPartition()
		p.Partition = q.Partition
		p.CurrentLeaderEpoch = q.LeaderEpoch
		p.FetchOffset = q.FetchOffset
		p.LastFetchedEpoch = q.LastFetchedEpoch
		p.LogStartOffset = q.LogStartOffset
		p.PartitionMaxBytes = l.cfg.PartitionMaxBytes
		if q.MaxBytes > 0 {
			p.PartitionMaxBytes = min(q.MaxBytes, p.PartitionMaxBytes)
		}
		keys[id] = q.Key
		want[id] = p
		if old, ok := l.sent[id]; ok && !full && sameFetchState(old, p) {
			continue // the leader's session has it as it is
		}
		i, ok := topics[q.TopicID]
		if !ok {
			i = len(req.Topics)
			topics[q.TopicID] = i
			t := kmsg.NewFetchRequestTopic()
			t.TopicID = q.TopicID
			t.Topic = q.Topic
			req.Topics = append(req.Topics, t)
		}
		req.Topics[i].Partitions = append(req.Topics[i].Partitions, p)
	}
	if !full {
		forgotten := map[[16]byte]int{}
		for id := range l.sent {
			if _, ok := want[id]; ok {
				continue
			}
			i, ok := forgotten[id.topic]
			if !ok {
				i = len(req.ForgottenTopics)
				forgotten[id.topic] = i
				t := kmsg.NewFetchRequestForgottenTopic()
				t.TopicID = id.topic
				req.ForgottenTopics = append(req.ForgottenTopics, t)
			}
			req.ForgottenTopics[i].Partitions = append(req.ForgottenTopics[i].Partitions, id.partition)
		}
	}
	raw, err := l.do(ctx, req)
	if err != nil {
		return nil, err
	}
	resp := raw.(*kmsg.FetchResponse)
	switch resp.ErrorCode {
	case 0:
	case kerr.FetchSessionIDNotFound.Code, kerr.InvalidFetchSessionEpoch.Code, kerr.FetchSessionTopicIDError.Code:
		l.sessionID, l.sessionEpoch, l.sent = 0, 0, nil
		return nil, nil
	default:
		l.sessionID, l.sessionEpoch, l.sent = 0, 0, nil
		return nil, fmt.Errorf("fetch from leader at %s: %w", l.cfg.Addr, kerr.ErrorForCode(resp.ErrorCode))
	}
	if full {
		l.sessionID, l.sessionEpoch = resp.SessionID, 1 // id 0: the leader declined; full fetches go on
	} else {
		l.sessionEpoch = nextSessionEpoch(l.sessionEpoch)
	}
	l.sent = want
	var out []replica.Fetched
	for _, t := range resp.Topics {
		for _, p := range t.Partitions {
			k, ok := keys[partitionID{t.TopicID, p.Partition}]
			if !ok {
				continue
			}
			out = append(out, replica.Fetched{Key: k, Err: codeErr(p.ErrorCode), Records: p.RecordBatches,
				HighWatermark: p.HighWatermark, LogStartOffset: p.LogStartOffset})
		}
	}
	return out, nil
}

// sameFetchState reports whether a and b ask the same of a partition.
func sameFetchState(a, b kmsg.FetchRequestTopicPartition) bool {
	return a.FetchOffset == b.FetchOffset && a.CurrentLeaderEpoch == b.CurrentLeaderEpoch &&
		a.LastFetchedEpoch == b.LastFetchedEpoch && a.LogStartOffset == b.LogStartOffset &&
		a.PartitionMaxBytes == b.PartitionMaxBytes
}
