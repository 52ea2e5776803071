package coordinator

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"sync"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/mqproject/mq/lib/controller"
	"github.com/mqproject/mq/lib/group"
	"github.com/mqproject/mq/lib/kafkaext"
	"github.com/mqproject/mq/lib/partition"
	"github.com/mqproject/mq/lib/peer"
	"github.com/mqproject/mq/lib/queue"
	"github.com/mqproject/mq/lib/record"
	"github.com/mqproject/mq/lib/replica"
	"github.com/mqproject/mq/lib/txn"
)

// ErrLeaderUnknown is a partition of the topic whose leader this node
// cannot reach: none is elected, or it is not registered.
var ErrLeaderUnknown = errors.New("coordinator: the partition's leader is unknown")

// DefaultCommitTimeout bounds how long a write waits for the in-sync
// replicas (Kafka's offsets.commit.timeout.ms default).
const DefaultCommitTimeout = 5 * time.Second

// Config is what a Topic needs.
type Config struct {
	Name string // the topic: __consumer_offsets, __share_group_state
	// Partitions is how many partitions the topic is created with; an
	// existing topic keeps its own.
	Partitions int32
	// ReplicationFactor is the replication factor it is created with, at
	// most the live brokers then (at least 1), so that a cluster still
	// starting, or a single node, can coordinate at once. Kafka refuses to
	// create the topic until enough brokers are up.
	ReplicationFactor int16
	NodeID            int32
	Controller        *controller.Controller
	Hosted            *partition.Manager // the partitions this node hosts; PeerAddr: the other brokers' addresses
	// Peers are the connections to the partitions' leaders elsewhere: TLS
	// exactly when Hosted's PeerTLS is set (security.inter.broker.protocol
	// SSL), to their ssl:// listeners.
	Peers *peer.Pool
	// CommitTimeout bounds a write's wait for the in-sync replicas; 0 is
	// DefaultCommitTimeout.
	CommitTimeout time.Duration
	// OnCreate, when set, is called once this node created the topic and
	// applied the image holding it.
	OnCreate func()
	Logger   *slog.Logger // nil = silent
}

// Topic is a compacted internal topic holding a coordinator's state, one
// record per change, keyed so that compaction keeps the latest of each:
// the runtime of lib/group's coordinator (__consumer_offsets) and of
// lib/queue's share-partitions (__share_group_state). It creates the
// topic on first use, tells which of its partitions this node leads, and
// appends and replays records:
//
//   - Append and Replay work on a partition this node leads (group.Store).
//     Append does not wait for the followers: the Pending it returns does,
//     so that a caller appends under its own mutex (records in the order
//     of its changes) and waits without it.
//   - Write and Read work on any partition (queue.Store): here when this
//     node leads it, else on its leader, over lib/peer: an acks=all
//     Produce, a Fetch. Remote writes to one partition are sent in the
//     order Write was called, one at a time, by a sender of their own:
//     Write never does network I/O, so that it too may be called under
//     the caller's mutex.
//
// Its methods are safe for concurrent use.
type Topic struct {
	cfg Config
	log *slog.Logger

	createMu sync.Mutex // one creation of the topic at a time

	mu      sync.Mutex
	senders map[int32]*sender // remote writes, by partition
	closed  bool
}

// New returns the Topic of cfg; nothing is created before the first use.
func New(cfg Config) *Topic {
	if cfg.CommitTimeout <= 0 {
		cfg.CommitTimeout = DefaultCommitTimeout
	}
	logger := cfg.Logger
	if logger == nil {
		logger = slog.New(slog.DiscardHandler)
	}
	return &Topic{cfg: cfg, log: logger, senders: map[int32]*sender{}}
}

// Name is the topic's name.
func (t *Topic) Name() string { return t.cfg.Name }

// Ensure returns the topic, created (compacted, internal) unless it
// exists, with its partitions opened here before it returns.
func (t *Topic) Ensure(ctx context.Context) (*controller.Topic, error) {
	ctrl := t.cfg.Controller
	if ct := ctrl.Image().Topics[t.cfg.Name]; ct != nil {
		return ct, nil
	}
	t.createMu.Lock()
	defer t.createMu.Unlock()
	img := ctrl.Image()
	if ct := img.Topics[t.cfg.Name]; ct != nil {
		return ct, nil
	}
	rf := ReplicationFactor(t.cfg.ReplicationFactor, img)
	_, err := ctrl.CreateTopic(ctx, controller.CreateTopic{
		Name:              t.cfg.Name,
		Partitions:        t.cfg.Partitions,
		ReplicationFactor: rf,
		Configs:           map[string]string{"cleanup.policy": "compact"},
		Internal:          true,
	})
	if err != nil && !errors.Is(err, controller.ErrTopicExists) {
		return nil, fmt.Errorf("create %s: %w", t.cfg.Name, err)
	}
	t.log.Info("created internal topic", "topic", t.cfg.Name, "partitions", t.cfg.Partitions, "replication_factor", rf)
	t.cfg.Hosted.Refresh()
	if t.cfg.OnCreate != nil {
		t.cfg.OnCreate()
	}
	ct := ctrl.Image().Topics[t.cfg.Name]
	if ct == nil {
		return nil, fmt.Errorf("%s: not in the image after creation", t.cfg.Name)
	}
	return ct, nil
}

// ReplicationFactor is the replication factor an internal topic is
// created with: want, but no more than the live (registered, unfenced)
// brokers of img, and at least 1.
func ReplicationFactor(want int16, img *controller.Image) int16 {
	live := 0
	for _, b := range img.Brokers {
		if !b.Fenced {
			live++
		}
	}
	return int16(max(min(int(want), live), 1))
}

// PartitionCount returns how many partitions the topic has, creating it
// first if need be.
func (t *Topic) PartitionCount(ctx context.Context) (int32, error) {
	ct, err := t.Ensure(ctx)
	if err != nil {
		return 0, err
	}
	return int32(len(ct.Partitions)), nil
}

// Led returns the partitions of the topic this node leads in its image
// and hosts, in order; none before it may lead (partition.Manager.MayLead)
// or when the topic does not exist yet.
func (t *Topic) Led() []int32 {
	img := t.cfg.Controller.Image()
	ct := img.Topics[t.cfg.Name]
	if ct == nil || !t.cfg.Hosted.MayLead(img) {
		return nil
	}
	var out []int32
	for _, p := range ct.Partitions {
		if p.Leader == t.cfg.NodeID && t.cfg.Hosted.Replica(ct, p.ID) != nil {
			out = append(out, p.ID)
		}
	}
	return out
}

// leader returns partition p's replica when this node leads it, else
// its error.
func (t *Topic) leader(p int32) (*partition.Hosted, error) {
	return t.cfg.Hosted.Leader(t.cfg.Controller.Image().Topics[t.cfg.Name], p)
}

// Append appends batch to partition p, which this node leads, as an
// acks=all produce would (refused with NOT_ENOUGH_REPLICAS below
// min.insync.replicas). It does not wait for the followers: the Pending
// does, unless the high-water mark passed the batch already (no other
// in-sync replica), when it is nil.
func (t *Topic) Append(p int32, batch []byte) (group.Pending, error) {
	w, err := t.append(p, batch)
	if w == nil {
		return nil, err
	}
	return w, err
}

func (t *Topic) append(p int32, batch []byte) (*local, error) {
	h, err := t.leader(p)
	if err != nil {
		return nil, err
	}
	res, err := h.Append(batch, -1)
	if err != nil {
		return nil, err
	}
	if h.Acknowledged(res.LastOffset, res.LeaderEpoch) {
		return nil, nil
	}
	return &local{h: h, last: res.LastOffset, epoch: res.LeaderEpoch, timeout: t.cfg.CommitTimeout}, nil
}

// local waits for the in-sync replicas to have a batch appended here.
type local struct {
	h       *partition.Hosted
	last    int64
	epoch   int32 // the leader epoch the batch was appended in
	timeout time.Duration
}

// Wait waits for the high-water mark to pass the batch, until ctx ends or
// the commit timeout: a request's wait ends when its connection goes.
func (w *local) Wait(ctx context.Context) error {
	ctx, cancel := context.WithTimeout(ctx, w.timeout)
	defer cancel()
	return w.h.WaitHighWatermark(ctx, w.last, w.epoch)
}

// IsNotLeader tells an Append or Replay refused because this node does
// not lead the partition (any more): its coordinator moves.
func IsNotLeader(err error) bool {
	return errors.Is(err, replica.ErrNotLeader) || errors.Is(err, partition.ErrNotHosted) ||
		errors.Is(err, replica.ErrClosed) || errors.Is(err, partition.ErrUnknownPartition)
}

// readBytes is how much of a log one replay read takes.
const readBytes = 1 << 20

// Replay calls fn for every record of partition p, which this node hosts,
// from its log start to its log end, transaction markers included; a nil
// value is a tombstone. The coordinator of a partition is its leader,
// whose log holds everything acknowledged.
func (t *Topic) Replay(p int32, fn func(e group.Entry) error) error {
	ct := t.cfg.Controller.Image().Topics[t.cfg.Name]
	if ct == nil || p < 0 || int(p) >= len(ct.Partitions) {
		return partition.ErrUnknownPartition
	}
	h := t.cfg.Hosted.Replica(ct, p)
	if h == nil {
		return partition.ErrNotHosted
	}
	return replayLog(h, fn)
}

// replayLog calls fn for every record of a hosted log, from its start to
// its end.
func replayLog(h *partition.Hosted, fn func(e group.Entry) error) error {
	l := h.Log()
	offset, end := l.StartOffset(), l.EndOffset()
	for offset < end {
		data, err := l.ReadBytes(offset, end, readBytes)
		if err != nil {
			return err
		}
		if len(data) == 0 {
			break
		}
		next, err := replayBatches(data, offset, fn)
		if err != nil {
			return fmt.Errorf("%s: %w", h, err)
		}
		offset = next
	}
	return nil
}

// replayBatches calls fn for each record at or past offset in data (whole
// batches, control batches included) and returns the offset after the
// last batch.
func replayBatches(data []byte, offset int64, fn func(e group.Entry) error) (int64, error) {
	for rest := data; len(rest) > 0; {
		batch, next, hdr, err := record.Next(rest)
		if err != nil {
			return offset, fmt.Errorf("at %d: %w", offset, err)
		}
		if batch == nil {
			break
		}
		err = group.EntriesOf(batch, func(r *record.Record, e group.Entry) error {
			if r.Offset(&hdr) < offset {
				return nil // before the start: the batch straddles it
			}
			return fn(e)
		})
		if err != nil {
			return offset, fmt.Errorf("at %d: %w", hdr.BaseOffset, err)
		}
		offset = hdr.LastOffset() + 1
		rest = next
	}
	return offset, nil
}

// Write appends batch to partition p: here when this node leads it (as
// Append), else on its leader (ErrLeaderUnknown when there is none to
// reach), through p's sender. It never waits for I/O; the Pending does.
func (t *Topic) Write(ctx context.Context, p int32, batch []byte) (queue.Pending, error) {
	ct, err := t.Ensure(ctx)
	if err != nil {
		return nil, err
	}
	if p < 0 || int(p) >= len(ct.Partitions) {
		return nil, partition.ErrUnknownPartition
	}
	w, err := t.append(p, batch)
	if err == nil {
		if w == nil {
			return done{}, nil
		}
		return w, nil
	}
	leader := ct.Partitions[p].Leader
	if leader < 0 || leader == t.cfg.NodeID {
		return nil, err
	}
	return t.sender(p).send(leader, batch), nil
}

// done is a Pending of a write that is durable already.
type done struct{}

func (done) Wait(context.Context) error { return nil }

// Read calls fn for every record of partition p, from its log start to
// its end when this node hosts it, else to the high-water mark of its
// leader, read with Fetch.
func (t *Topic) Read(ctx context.Context, p int32, fn func(key, value []byte) error) error {
	ct, err := t.Ensure(ctx)
	if err != nil {
		return err
	}
	if p < 0 || int(p) >= len(ct.Partitions) {
		return partition.ErrUnknownPartition
	}
	// Records only: a share-partition's state is never transactional.
	records := func(e group.Entry) error {
		if e.Control {
			return nil
		}
		return fn(e.Key, e.Value)
	}
	h, err := t.cfg.Hosted.Leader(ct, p)
	if err == nil {
		return replayLog(h, records)
	}
	leader := ct.Partitions[p].Leader
	if leader < 0 || leader == t.cfg.NodeID {
		return err
	}
	return t.readRemote(ctx, leader, p, records)
}

// requestTimeout bounds one request to another node.
const requestTimeout = 10 * time.Second

// peer returns a connection to node from the pool, at the address the
// node's other connections to it use (partition.Manager.PeerAddr): its
// ssl:// listener when the brokers speak TLS.
func (t *Topic) peer(ctx context.Context, node int32) (*peer.Conn, error) {
	addr, err := t.cfg.Hosted.PeerAddr(node)
	if err != nil {
		return nil, fmt.Errorf("%w: %w", ErrLeaderUnknown, err)
	}
	return t.cfg.Peers.Get(ctx, addr)
}

// produceRemote appends batch to partition p on node, as an acks=all
// produce.
func (t *Topic) produceRemote(ctx context.Context, node, p int32, batch []byte) error {
	c, err := t.peer(ctx, node)
	if err != nil {
		return err
	}
	req := kmsg.NewPtrProduceRequest()
	req.Version = 9
	req.Acks, req.TimeoutMillis = -1, int32(t.cfg.CommitTimeout.Milliseconds())
	rt := kmsg.NewProduceRequestTopic()
	rt.Topic = t.cfg.Name
	rp := kmsg.NewProduceRequestTopicPartition()
	rp.Partition, rp.Records = p, batch
	rt.Partitions = append(rt.Partitions, rp)
	req.Topics = append(req.Topics, rt)
	// Without the mark the leader refuses a Produce to an internal topic.
	if err := kafkaext.Set(&req.UnknownTags, kafkaext.CoordinatorWrite, kafkaext.CoordinatorWriter{From: t.cfg.NodeID}); err != nil {
		t.cfg.Peers.Put(c, nil)
		return err
	}
	kresp, err := c.Do(ctx, req, requestTimeout)
	t.cfg.Peers.Put(c, err)
	if err != nil {
		return err
	}
	resp := kresp.(*kmsg.ProduceResponse)
	if len(resp.Topics) != 1 || len(resp.Topics[0].Partitions) != 1 {
		return fmt.Errorf("%w: produce answer without the partition", peer.ErrProtocol)
	}
	if err := kerr.ErrorForCode(resp.Topics[0].Partitions[0].ErrorCode); err != nil {
		return fmt.Errorf("write %s-%d on node %d: %w", t.cfg.Name, p, node, err)
	}
	return nil
}

// readRemote reads partition p from node, its start to its high-water
// mark, and calls fn for each record.
func (t *Topic) readRemote(ctx context.Context, node, p int32, fn func(e group.Entry) error) error {
	c, err := t.peer(ctx, node)
	if err != nil {
		return err
	}
	offset := int64(0)
	for {
		req := kmsg.NewPtrFetchRequest()
		req.Version = 11
		req.ReplicaID, req.MaxWaitMillis, req.MinBytes, req.MaxBytes = -1, 0, 1, readBytes
		ft := kmsg.NewFetchRequestTopic()
		ft.Topic = t.cfg.Name
		fp := kmsg.NewFetchRequestTopicPartition()
		fp.Partition, fp.FetchOffset, fp.PartitionMaxBytes, fp.CurrentLeaderEpoch = p, offset, readBytes, -1
		ft.Partitions = append(ft.Partitions, fp)
		req.Topics = append(req.Topics, ft)
		kresp, err := c.Do(ctx, req, requestTimeout)
		if err != nil {
			t.cfg.Peers.Put(c, err)
			return err
		}
		resp := kresp.(*kmsg.FetchResponse)
		if len(resp.Topics) != 1 || len(resp.Topics[0].Partitions) != 1 {
			t.cfg.Peers.Put(c, peer.ErrProtocol)
			return fmt.Errorf("%w: fetch answer without the partition", peer.ErrProtocol)
		}
		rp := resp.Topics[0].Partitions[0]
		if rp.ErrorCode == kerr.OffsetOutOfRange.Code && offset < rp.LogStartOffset {
			offset = rp.LogStartOffset
			continue
		}
		if err := kerr.ErrorForCode(rp.ErrorCode); err != nil {
			t.cfg.Peers.Put(c, nil)
			return fmt.Errorf("read %s-%d on node %d: %w", t.cfg.Name, p, node, err)
		}
		// The batches refer into the connection's buffer: parse them
		// before the next request.
		next, err := replayBatches(rp.RecordBatches, offset, fn)
		if err != nil {
			t.cfg.Peers.Put(c, err)
			return err
		}
		if next <= offset || next >= rp.HighWatermark {
			t.cfg.Peers.Put(c, nil)
			return nil
		}
		offset = next
	}
}

// sender sends one partition's remote writes, one at a time, in the
// order they were given: a goroutine runs while any wait.
type sender struct {
	t *Topic
	p int32

	mu      sync.Mutex
	queue   []*remote
	running bool
}

// remote is a write sent to another node; done is closed once it is
// durable there or failed (err).
type remote struct {
	node  int32
	batch []byte
	done  chan struct{}
	err   error
}

// Wait waits for the write's answer, or ctx's end.
func (w *remote) Wait(ctx context.Context) error {
	select {
	case <-w.done:
		return w.err
	case <-ctx.Done():
		return ctx.Err()
	}
}

// sender returns partition p's sender.
func (t *Topic) sender(p int32) *sender {
	t.mu.Lock()
	defer t.mu.Unlock()
	s := t.senders[p]
	if s == nil {
		s = &sender{t: t, p: p}
		t.senders[p] = s
	}
	return s
}

// send queues batch for node, and runs the sender if it is idle.
func (s *sender) send(node int32, batch []byte) *remote {
	w := &remote{node: node, batch: slices.Clone(batch), done: make(chan struct{})}
	s.mu.Lock()
	s.queue = append(s.queue, w)
	start := !s.running
	s.running = true
	s.mu.Unlock()
	if start {
		go s.run()
	}
	return w
}

// run sends the queued writes in order until none is left. Each is sent
// whatever became of the one before: a write carries whole values (a
// share-partition's whole state), so a later one stands on its own.
func (s *sender) run() {
	for {
		s.mu.Lock()
		if len(s.queue) == 0 {
			s.running = false
			s.mu.Unlock()
			return
		}
		w := s.queue[0]
		s.queue = s.queue[1:]
		s.mu.Unlock()
		if s.t.isClosed() {
			w.err = fmt.Errorf("%s-%d: %w", s.t.cfg.Name, s.p, ErrClosed)
		} else {
			ctx, cancel := context.WithTimeout(context.Background(), requestTimeout)
			w.err = s.t.produceRemote(ctx, w.node, s.p, w.batch)
			cancel()
		}
		close(w.done)
	}
}

// ErrClosed is a write queued when the Topic closed.
var ErrClosed = errors.New("coordinator: closed")

func (t *Topic) isClosed() bool {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.closed
}

// Close fails the remote writes not sent yet; the one in flight ends
// within its timeout.
func (t *Topic) Close() {
	t.mu.Lock()
	t.closed = true
	t.mu.Unlock()
}

// Owner is a coordinator that loads its state per partition of the
// topic: lib/group's Coordinator, lib/txn's.
type Owner interface {
	Owned() []int32
	LoadAsync(p int32, done func(error))
	Unload(p int32)
}

// SyncOwnership loads into o the partitions of the topic this node now
// leads (in the background: a replay can take a while, during which
// their groups answer COORDINATOR_LOAD_IN_PROGRESS) and unloads those it
// no longer leads.
func (t *Topic) SyncOwnership(o Owner) {
	led := t.Led()
	owned := o.Owned()
	for _, p := range owned {
		if !slices.Contains(led, p) {
			o.Unload(p)
		}
	}
	for _, p := range led {
		if slices.Contains(owned, p) {
			continue
		}
		o.LoadAsync(p, func(err error) {
			if err != nil && !errors.Is(err, group.ErrNotCoordinator) && !errors.Is(err, group.ErrClosed) &&
				!errors.Is(err, txn.ErrNotCoordinator) && !errors.Is(err, txn.ErrClosed) {
				t.log.Error("load coordinator partition", "topic", t.cfg.Name, "partition", p, "err", err)
			}
		})
	}
}

// FollowLeadership keeps o's partitions those this node leads: now, and
// after every image the hosted partitions apply.
func (t *Topic) FollowLeadership(o Owner) {
	t.cfg.Hosted.AfterApply(func() { t.SyncOwnership(o) })
}
