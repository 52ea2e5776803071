package txn

import (
	"context"
	"errors"
	"log/slog"
	"math"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/mqproject/mq/lib/clock"
	"github.com/mqproject/mq/lib/coordinator/owned"
	"github.com/mqproject/mq/lib/record"
)

// Defaults of Config, Kafka's.
const (
	DefaultMaxTimeout          = 15 * time.Minute   // transaction.max.timeout.ms
	DefaultIDExpiration        = 7 * 24 * time.Hour // transactional.id.expiration.ms
	DefaultAbortCheckInterval  = 10 * time.Second   // transaction.abort.timed.out.transaction.cleanup.interval.ms
	DefaultExpireCheckInterval = time.Hour          // transaction.remove.expired.transaction.cleanup.interval.ms
	// completeRetry is how long a transaction whose Complete record could
	// not be written waits before it tries again.
	completeRetry = time.Second
)

// Marker is a transaction's end, to be written to each of its partitions
// as a control batch (WriteTxnMarkers).
type Marker struct {
	TransactionalID    string
	ProducerID         int64
	ProducerEpoch      int16
	Commit             bool
	CoordinatorEpoch   int32
	TransactionVersion int8 // 2: the epoch was bumped by the end (KIP-890)
	Partitions         []TopicPartition
}

// Markers writes transaction markers to the partitions' leaders.
type Markers interface {
	// Write returns once a marker is written to every partition of m
	// (those that no longer exist count as written), retrying what fails
	// on its own, or with ctx's error when ctx ends first: the coordinator
	// lost the transaction's partition. It calls written, if not nil,
	// with the partitions that have their marker as they get it. It is
	// called from a goroutine of the coordinator's, without its mutex,
	// and may be called concurrently.
	Write(ctx context.Context, m Marker, written func([]TopicPartition)) error
}

// Config configures a Coordinator.
type Config struct {
	// Partitions is the partition count of __transaction_state
	// (transaction.state.log.num.partitions once the topic exists).
	Partitions int32
	Store      Store
	Markers    Markers
	// ProducerIDs hands out new producer ids (the cluster's blocks).
	ProducerIDs func(ctx context.Context) (int64, error)
	Clock       clock.Clock  // nil: the real clock
	Logger      *slog.Logger // nil: silent
	// MaxTimeout (transaction.max.timeout.ms) bounds the timeout a
	// producer asks for. Zero: DefaultMaxTimeout.
	MaxTimeout time.Duration
	// IDExpiration (transactional.id.expiration.ms): a transactional id
	// without a transaction and unused this long is removed. Zero: the
	// default.
	IDExpiration time.Duration
	// AbortCheckInterval is how often transactions past their timeout are
	// aborted; ExpireCheckInterval how often ids expire. Zero: defaults.
	AbortCheckInterval, ExpireCheckInterval time.Duration
}

// Coordinator is the transaction coordinator of one node: the
// transactional ids of the partitions of __transaction_state it leads.
// Its methods are safe for concurrent use.
type Coordinator struct {
	cfg   Config
	clock clock.Clock
	log   *slog.Logger

	mu      sync.Mutex
	owned   *owned.Partitions[struct{}] // under mu
	txns    map[string]*txn
	timers  []clock.Timer
	changed chan struct{} // closed and replaced at every change of a transaction (for tests)
	// background counts the goroutines of markers, completions, aborts
	// and expiries running now.
	background int
}

// ownedPartition is a partition of __transaction_state this node leads.
// When it is gone, writes and markers still on their way give up.
type ownedPartition = owned.Partition[struct{}]

// txn is a transactional id this node coordinates.
type txn struct {
	Metadata
	partition int32
	// pending says a record of the id is being written: the id's requests
	// answer ErrConcurrent until it is durable (or failed).
	pending bool
	// durable is false until the id's first record is: a failed first
	// write forgets the id.
	durable bool
	// marked are the partitions of the ending transaction that have their
	// marker (in memory only: a new coordinator writes them all again).
	marked map[TopicPartition]bool
}

// New returns a coordinator owning no partition yet.
func New(cfg Config) *Coordinator {
	if cfg.Clock == nil {
		cfg.Clock = clock.Real()
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.DiscardHandler)
	}
	if cfg.Partitions <= 0 {
		cfg.Partitions = 50
	}
	if cfg.MaxTimeout <= 0 {
		cfg.MaxTimeout = DefaultMaxTimeout
	}
	if cfg.IDExpiration <= 0 {
		cfg.IDExpiration = DefaultIDExpiration
	}
	if cfg.AbortCheckInterval <= 0 {
		cfg.AbortCheckInterval = DefaultAbortCheckInterval
	}
	if cfg.ExpireCheckInterval <= 0 {
		cfg.ExpireCheckInterval = DefaultExpireCheckInterval
	}
	c := &Coordinator{cfg: cfg, clock: cfg.Clock, log: cfg.Logger, txns: map[string]*txn{}}
	c.owned = owned.New(owned.Config[struct{}]{
		Topic: "__transaction_state", Mu: &c.mu, Replay: c.load,
		NotOwned: ErrNotCoordinator, Loading: ErrLoadInProgress, Closed: ErrClosed,
		StoreError: func(err error) error { return &StoreError{Err: err} },
	})
	c.mu.Lock()
	c.every(cfg.AbortCheckInterval, c.abortTimedOutLocked)
	c.every(cfg.ExpireCheckInterval, c.expireLocked)
	c.mu.Unlock()
	return c
}

// every runs f with mu held every d, until Close. Called with mu held.
func (c *Coordinator) every(d time.Duration, f func()) {
	var t clock.Timer
	t = c.clock.AfterFunc(d, func() {
		c.mu.Lock()
		defer c.mu.Unlock()
		if c.owned.ClosedLocked() {
			return
		}
		f()
		t.Reset(d)
	})
	c.timers = append(c.timers, t)
}

// PartitionFor is the partition of __transaction_state that holds
// transactional id id among n: Kafka's abs(javaStringHashCode(id)) % n, as
// for groups, so an id lands on the partition number it would in Kafka.
func PartitionFor(id string, n int32) int32 { return owned.PartitionFor(id, n) }

// Partition is PartitionFor with the configured partition count.
func (c *Coordinator) Partition(id string) int32 { return PartitionFor(id, c.cfg.Partitions) }

// LoadAsync makes this node the coordinator of the transactional ids of a
// partition: owned (its ids answer ErrLoadInProgress) when LoadAsync
// returns, served once its replay is done; done, if not nil, gets the
// replay's result. Transactions found between their end and its markers
// get their markers again.
func (c *Coordinator) LoadAsync(partition int32, done func(error)) {
	c.owned.LoadAsync(partition, done)
}

// Load is LoadAsync waiting for the replay.
func (c *Coordinator) Load(partition int32) error { return c.owned.Load(partition) }

// load replays an owned partition (without mu) and returns what installs
// its ids (with mu, if the partition is still owned).
func (c *Coordinator) load(partition int32, _ *ownedPartition) (func(), error) {
	loaded := map[string]Metadata{}
	err := c.cfg.Store.Replay(partition, func(key, value []byte) error {
		id, err := decodeKey(key)
		if err != nil {
			c.log.Warn("skipping unreadable __transaction_state record", "partition", partition, "err", err)
			return nil
		}
		if value == nil {
			delete(loaded, id)
			return nil
		}
		m, err := decodeValue(id, value)
		if err != nil {
			c.log.Warn("skipping unreadable transaction record", "transactional_id", id, "err", err)
			return nil
		}
		loaded[id] = m
		return nil
	})
	if err != nil {
		return nil, err
	}
	return func() {
		for id, m := range loaded {
			t := &txn{Metadata: m, partition: partition, durable: true}
			c.txns[id] = t
			if t.State.completing() {
				c.sendMarkersLocked(t)
			}
		}
		c.notifyLocked()
		c.log.Debug("transaction partition loaded", "partition", partition, "transactional_ids", len(loaded))
	}, nil
}

// Unload stops coordinating the ids of a partition: their writes and
// markers on their way give up (the next coordinator sends the markers).
func (c *Coordinator) Unload(partition int32) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if !c.owned.UnloadLocked(partition) {
		return
	}
	for id, t := range c.txns {
		if t.partition == partition {
			delete(c.txns, id)
		}
	}
	c.notifyLocked()
}

// Owned lists the partitions owned (loaded or loading).
func (c *Coordinator) Owned() []int32 { return c.owned.Owned() }

// Close unloads everything and stops the timers.
func (c *Coordinator) Close() {
	c.mu.Lock()
	defer c.mu.Unlock()
	if !c.owned.CloseLocked() {
		return
	}
	for _, t := range c.timers {
		t.Stop()
	}
	c.txns = map[string]*txn{}
	c.notifyLocked()
}

// checkLocked says whether this node serves transactional id id now.
func (c *Coordinator) checkLocked(id string) error { return c.owned.CheckLocked(c.Partition(id)) }

// Check reports whether this node coordinates id: nil, ErrNotCoordinator
// or ErrLoadInProgress.
func (c *Coordinator) Check(id string) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.checkLocked(id)
}

// WaitLoaded waits until the partition of id is loaded, or done is closed.
func (c *Coordinator) WaitLoaded(id string, done <-chan struct{}) {
	c.owned.WaitLoaded(c.Partition(id), done)
}

// goLocked runs f on a goroutine of its own, counted in background.
// Called with mu held; f runs without it.
func (c *Coordinator) goLocked(f func()) {
	c.background++
	go func() {
		f()
		c.mu.Lock()
		c.background--
		c.notifyLocked()
		c.mu.Unlock()
	}()
}

// Background returns how many goroutines of the coordinator's (markers,
// completions, aborts, expiries) run now: for tests, with Changed.
func (c *Coordinator) Background() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.background
}

// notifyLocked wakes whoever waits for a change.
func (c *Coordinator) notifyLocked() {
	if c.changed != nil {
		close(c.changed)
		c.changed = nil
	}
}

// Changed returns a channel closed at the next change of a transaction:
// for tests to wait for the background work (markers, timeouts) without
// sleeping.
func (c *Coordinator) Changed() <-chan struct{} {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.changed == nil {
		c.changed = make(chan struct{})
	}
	return c.changed
}

// writeLocked records next as t's state and makes it t's once durable.
// Called with mu held; it releases mu while it waits and takes it again
// before it returns. Meanwhile t is pending: its requests answer
// ErrConcurrent.
func (c *Coordinator) writeLocked(ctx context.Context, t *txn, next Metadata) error {
	op := c.owned.GetLocked(t.partition)
	if op == nil {
		return ErrNotCoordinator
	}
	next.Update = c.clock.Now()
	var value []byte
	if next.State != Dead {
		value = encodeValue(&next)
	}
	batch, err := record.Build(record.BuildOptions{BaseTimestamp: next.Update.UnixMilli()},
		[]record.Record{{Key: encodeKey(t.ID), Value: value}})
	if err != nil {
		return err
	}
	p, err := c.cfg.Store.Append(t.partition, batch)
	if err != nil {
		c.forgetIfNew(t)
		return &StoreError{Err: err}
	}
	if p != nil {
		t.pending = true
		c.mu.Unlock()
		err = c.owned.Wait(ctx, op, p.Wait)
		c.mu.Lock()
		t.pending = false
	}
	if err == nil && c.txns[t.ID] != t {
		err = ErrNotCoordinator // unloaded meanwhile
	}
	if err != nil {
		c.forgetIfNew(t)
		c.notifyLocked()
		return err
	}
	t.Metadata, t.durable = next, true
	if next.State == Dead {
		delete(c.txns, t.ID)
	}
	c.notifyLocked()
	return nil
}

// forgetIfNew drops an id whose first record was not written.
func (c *Coordinator) forgetIfNew(t *txn) {
	if !t.durable && c.txns[t.ID] == t {
		delete(c.txns, t.ID)
	}
}

// lookup returns id's transaction after checking ownership (nil when it
// has none) and ErrConcurrent while a record of it is being written.
func (c *Coordinator) lookup(id string) (*txn, error) {
	if err := c.checkLocked(id); err != nil {
		return nil, err
	}
	t := c.txns[id]
	if t != nil && t.pending {
		return nil, ErrConcurrent
	}
	return t, nil
}

// InitRequest is an InitProducerId with a transactional id.
type InitRequest struct {
	ID      string
	Timeout time.Duration
	// ProducerID and ProducerEpoch are the producer's current ones (KIP-360:
	// a producer recovering from an error keeps its id); -1 when it has
	// none.
	ProducerID    int64
	ProducerEpoch int16
}

// InitProducerID handles an InitProducerId with a transactional id: the
// id's producer id with a bumped epoch, which fences every producer of an
// older epoch. An ongoing transaction is aborted first (ErrConcurrent
// meanwhile: the client asks again).
func (c *Coordinator) InitProducerID(ctx context.Context, r InitRequest) (int64, int16, error) {
	if r.Timeout <= 0 || r.Timeout > c.cfg.MaxTimeout {
		return -1, -1, ErrInvalidTimeout
	}
	newID := int64(-1)
	for {
		c.mu.Lock()
		id, epoch, needID, err := c.initLocked(ctx, r, newID)
		c.mu.Unlock()
		if !needID {
			return id, epoch, err
		}
		if newID, err = c.cfg.ProducerIDs(ctx); err != nil {
			return -1, -1, err
		}
	}
}

// initLocked is InitProducerID under mu; needID asks for a new producer
// id (newID < 0) before it can go on.
func (c *Coordinator) initLocked(ctx context.Context, r InitRequest, newID int64) (int64, int16, bool, error) {
	t, err := c.lookup(r.ID)
	if err != nil {
		return -1, -1, false, err
	}
	if t == nil {
		if newID < 0 {
			return -1, -1, true, nil
		}
		t = &txn{Metadata: Metadata{ID: r.ID, ProducerID: newID, Epoch: -1, LastEpoch: -1, PrevProducerID: -1,
			NextProducerID: -1, NextEpoch: -1, State: Empty}, partition: c.Partition(r.ID)}
		c.txns[r.ID] = t
	}
	m := &t.Metadata
	if r.ProducerID >= 0 && t.durable {
		switch {
		case r.ProducerID == m.ProducerID && r.ProducerEpoch == m.Epoch:
		case r.ProducerID == m.ProducerID && r.ProducerEpoch == m.LastEpoch && m.State == Empty:
			// A retry whose answer was lost (nothing happened since): it
			// has the epoch already.
			return m.ProducerID, m.Epoch, false, nil
		case r.ProducerID == m.PrevProducerID && m.State == Empty:
			// The producer's id changed at its last bump and the client
			// missed it: the retry gets the current one.
			return m.ProducerID, m.Epoch, false, nil
		default:
			return -1, -1, false, ErrProducerFenced
		}
	}
	switch m.State {
	case PrepareCommit, PrepareAbort, PrepareEpochFence:
		return -1, -1, false, ErrConcurrent
	case Ongoing:
		// A new producer fences the one whose transaction is open: abort
		// it with a bumped epoch, the client retries until it is done.
		if m.needsNewID() && newID < 0 {
			return -1, -1, true, nil
		}
		next := m.clone()
		next.bumpForEnd(newID)
		next.State = PrepareAbort
		if err := c.writeLocked(ctx, t, next); err != nil {
			return -1, -1, false, err
		}
		c.sendMarkersLocked(t)
		return -1, -1, false, ErrConcurrent
	case Dead:
		return -1, -1, false, ErrConcurrent
	}
	if m.needsNewID() && newID < 0 {
		return -1, -1, true, nil
	}
	next := m.clone()
	next.bump(newID)
	next.NextProducerID, next.NextEpoch = -1, -1
	next.State, next.Timeout, next.Partitions, next.Start = Empty, r.Timeout, nil, time.Time{}
	if err := c.writeLocked(ctx, t, next); err != nil {
		return -1, -1, false, err
	}
	c.log.Debug("producer initialized", "transactional_id", r.ID, "producer_id", t.ProducerID, "epoch", t.Epoch)
	return t.ProducerID, t.Epoch, false, nil
}

// bumpForEnd bumps the epoch at a transaction's end (a fence, a timeout,
// a transaction.version 2 end): the markers carry the new epoch. At an
// exhausted epoch the markers carry the reserved last epoch and the
// producer id changes to newID when the transaction completes.
func (m *Metadata) bumpForEnd(newID int64) {
	m.LastEpoch = m.Epoch
	if m.Epoch >= maxEpoch {
		m.Epoch = math.MaxInt16
		m.NextProducerID, m.NextEpoch = newID, 0
		return
	}
	m.Epoch++
}

// checkProducer checks the producer id and epoch of a request of the
// ongoing producer.
func (m *Metadata) checkProducer(id int64, epoch int16) error {
	if id != m.ProducerID {
		return ErrProducerIDMapping
	}
	if epoch != m.Epoch {
		return ErrProducerFenced
	}
	return nil
}

// AddPartitions adds partitions to the transaction of id (AddPartitionsToTxn,
// AddOffsetsToTxn with the group's __consumer_offsets partition): the
// transaction is Ongoing from the first. It returns once that is durable.
func (c *Coordinator) AddPartitions(ctx context.Context, id string, producerID int64, epoch int16, tps []TopicPartition) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	t, err := c.lookup(id)
	if err != nil {
		return err
	}
	if t == nil {
		return ErrProducerIDMapping
	}
	if err := t.checkProducer(producerID, epoch); err != nil {
		return err
	}
	switch t.State {
	case PrepareCommit, PrepareAbort, PrepareEpochFence:
		return ErrConcurrent
	case Dead:
		return ErrProducerIDMapping
	}
	tps = slices.Clone(tps)
	slices.SortFunc(tps, compareTopicPartitions)
	tps = slices.Compact(tps)
	if t.State == Ongoing && t.hasAll(tps) {
		return nil
	}
	next := t.clone()
	if next.State != Ongoing {
		next.Partitions, next.Start = nil, c.clock.Now()
	}
	next.State = Ongoing
	next.addPartitions(tps)
	return c.writeLocked(ctx, t, next)
}

// Verify answers a partition leader asking whether each of tps is in the
// ongoing transaction of id under producerID and epoch (KIP-890's
// verification before a transactional append): nil for those that are,
// ErrInvalidState for those that are not; a request-level error for a
// producer that is not the id's.
func (c *Coordinator) Verify(id string, producerID int64, epoch int16, tps []TopicPartition) ([]error, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if err := c.checkLocked(id); err != nil {
		return nil, err
	}
	t := c.txns[id]
	if t == nil {
		return nil, ErrProducerIDMapping
	}
	if err := t.checkProducer(producerID, epoch); err != nil {
		return nil, err
	}
	if t.State.completing() {
		return nil, ErrConcurrent
	}
	errs := make([]error, len(tps))
	for i, tp := range tps {
		if t.State != Ongoing || !t.has(tp) {
			errs[i] = ErrInvalidState
		}
	}
	return errs, nil
}

// EndRequest is an EndTxn.
type EndRequest struct {
	ID            string
	ProducerID    int64
	ProducerEpoch int16
	Commit        bool
	// Version2: EndTxn v5+ (transaction.version 2): the end bumps the
	// epoch, and the answer carries the producer's next id and epoch.
	Version2 bool
}

// EndTxn records the end of the transaction of id (PrepareCommit or
// PrepareAbort) and answers once that is durable; the markers are then
// written to every partition of the transaction in the background, and
// the transaction completes. It returns the producer id and epoch the
// producer goes on with (changed only by a version 2 end).
func (c *Coordinator) EndTxn(ctx context.Context, r EndRequest) (int64, int16, error) {
	newID := int64(-1)
	for {
		c.mu.Lock()
		id, epoch, needID, err := c.endLocked(ctx, r, newID)
		c.mu.Unlock()
		if !needID {
			return id, epoch, err
		}
		if newID, err = c.cfg.ProducerIDs(ctx); err != nil {
			return -1, -1, err
		}
	}
}

// continuing is the producer id and epoch a producer goes on with.
func (m *Metadata) continuing() (int64, int16) {
	if m.NextProducerID >= 0 {
		return m.NextProducerID, m.NextEpoch
	}
	return m.ProducerID, m.Epoch
}

func (c *Coordinator) endLocked(ctx context.Context, r EndRequest, newID int64) (int64, int16, bool, error) {
	t, err := c.lookup(r.ID)
	if err != nil {
		return -1, -1, false, err
	}
	if t == nil || t.State == Dead {
		return -1, -1, false, ErrProducerIDMapping
	}
	m := &t.Metadata
	want, other := CompleteAbort, CompleteCommit
	prepared := PrepareAbort
	if r.Commit {
		want, other, prepared = CompleteCommit, CompleteAbort, PrepareCommit
	}
	// After an end that changed the producer id, the old id is
	// PrevProducerID and its last epoch LastEpoch.
	sameProducer := r.ProducerID == m.ProducerID || r.ProducerID == m.PrevProducerID && m.Epoch == 0
	if r.Version2 && sameProducer && r.ProducerEpoch == m.LastEpoch && m.Version2 {
		// A retry of the end that bumped the epoch.
		switch m.State {
		case want:
			id, epoch := m.continuing()
			return id, epoch, false, nil
		case prepared:
			return -1, -1, false, ErrConcurrent
		}
		return -1, -1, false, ErrInvalidState
	}
	if r.ProducerID != m.ProducerID {
		return -1, -1, false, ErrProducerIDMapping
	}
	if r.ProducerEpoch != m.Epoch {
		return -1, -1, false, ErrProducerFenced
	}
	switch m.State {
	case Ongoing:
	case want:
		if !r.Version2 {
			return m.ProducerID, m.Epoch, false, nil // a retry
		}
		if r.Commit {
			return -1, -1, false, ErrInvalidState
		}
	case Empty, other:
		// Version 2 may abort with nothing to abort: the epoch is bumped
		// all the same.
		if !r.Version2 || r.Commit {
			return -1, -1, false, ErrInvalidState
		}
	case prepared:
		return -1, -1, false, ErrConcurrent
	case PrepareCommit, PrepareAbort:
		if r.Version2 {
			// The end of the producer's next transaction, in the epoch
			// the last end gave it, while that one's markers are on their
			// way: the client asks again (Kafka's answer too).
			return -1, -1, false, ErrConcurrent
		}
		return -1, -1, false, ErrInvalidState
	default:
		return -1, -1, false, ErrInvalidState
	}
	next := m.clone()
	if r.Version2 {
		if m.needsNewID() && newID < 0 {
			return -1, -1, true, nil
		}
		next.bumpForEnd(newID)
		next.Version2 = true
	}
	next.State = prepared
	if err := c.writeLocked(ctx, t, next); err != nil {
		return -1, -1, false, err
	}
	c.log.Debug("transaction ending", "transactional_id", r.ID, "commit", r.Commit, "partitions", len(t.Partitions))
	c.sendMarkersLocked(t)
	id, epoch := t.continuing()
	return id, epoch, false, nil
}

// sendMarkersLocked writes the markers of t's transaction, now in a
// Prepare state, in the background, and completes it after. Called with
// mu held.
func (c *Coordinator) sendMarkersLocked(t *txn) {
	op := c.owned.GetLocked(t.partition)
	if op == nil {
		return
	}
	commit := t.State == PrepareCommit
	m := Marker{
		TransactionalID: t.ID, ProducerID: t.ProducerID, ProducerEpoch: t.Epoch, Commit: commit,
		CoordinatorEpoch: c.cfg.Store.LeaderEpoch(t.partition), TransactionVersion: 1,
		Partitions: slices.Clone(t.Partitions),
	}
	if t.Version2 {
		m.TransactionVersion = 2
	}
	prepared := t.Metadata.clone()
	t.marked = map[TopicPartition]bool{}
	written := func(tps []TopicPartition) {
		c.mu.Lock()
		defer c.mu.Unlock()
		if c.txns[t.ID] == t && t.Epoch == prepared.Epoch && t.State == prepared.State && t.marked != nil {
			for _, tp := range tps {
				t.marked[tp] = true
			}
			c.notifyLocked()
		}
	}
	c.goLocked(func() {
		if len(m.Partitions) > 0 {
			if err := c.cfg.Markers.Write(op.Gone(), m, written); err != nil {
				if op.Gone().Err() == nil {
					c.log.Warn("transaction markers", "transactional_id", m.TransactionalID, "err", err)
				}
				return
			}
		}
		c.complete(op, t, prepared)
	})
}

// complete records the end of t's transaction once its markers are
// written, trying again every completeRetry while the partition is owned.
func (c *Coordinator) complete(op *ownedPartition, t *txn, prepared Metadata) {
	for {
		c.mu.Lock()
		if c.txns[t.ID] != t || t.ProducerID != prepared.ProducerID || t.Epoch != prepared.Epoch || t.State != prepared.State {
			c.mu.Unlock()
			return
		}
		next := t.clone()
		next.State = CompleteAbort
		if prepared.State == PrepareCommit {
			next.State = CompleteCommit
		}
		if next.NextProducerID >= 0 {
			// LastEpoch stays the old id's last: a retried end names it.
			next.PrevProducerID, next.ProducerID, next.Epoch = next.ProducerID, next.NextProducerID, next.NextEpoch
			next.NextProducerID, next.NextEpoch = -1, -1
		}
		next.Partitions, next.Start = nil, time.Time{}
		err := c.writeLocked(op.Gone(), t, next)
		c.mu.Unlock()
		if err == nil || errors.Is(err, ErrNotCoordinator) {
			if err == nil {
				c.log.Debug("transaction complete", "transactional_id", t.ID, "state", next.State)
			}
			return
		}
		c.log.Warn("transaction complete", "transactional_id", t.ID, "err", err)
		timer := c.clock.NewTimer(completeRetry)
		select {
		case <-timer.C():
		case <-op.Gone().Done():
			timer.Stop()
			return
		}
	}
}

// abortTimedOutLocked aborts the transactions open longer than their
// timeout, with a bumped epoch: their producer is fenced, as in Kafka.
func (c *Coordinator) abortTimedOutLocked() {
	now := c.clock.Now()
	var due []*txn
	for _, t := range c.txns {
		if t.State == Ongoing && !t.pending && c.checkLocked(t.ID) == nil && !now.Before(t.Start.Add(t.Timeout)) {
			due = append(due, t)
		}
	}
	slices.SortFunc(due, func(a, b *txn) int { return strings.Compare(a.ID, b.ID) })
	for _, t := range due {
		if t.needsNewID() {
			// The markers carry the reserved epoch; the id changes once
			// the transaction completes.
			c.goLocked(func() {
				id, err := c.cfg.ProducerIDs(context.Background())
				if err != nil {
					c.log.Warn("abort timed-out transaction", "transactional_id", t.ID, "err", err)
					return
				}
				c.mu.Lock()
				defer c.mu.Unlock()
				c.abortLocked(t, id)
			})
			continue
		}
		c.goLocked(func() {
			c.mu.Lock()
			defer c.mu.Unlock()
			c.abortLocked(t, -1)
		})
	}
}

// abortLocked aborts t's ongoing transaction with a bumped epoch.
func (c *Coordinator) abortLocked(t *txn, newID int64) {
	if c.txns[t.ID] != t || t.State != Ongoing || t.pending {
		return
	}
	next := t.clone()
	next.bumpForEnd(newID)
	next.State = PrepareAbort
	if err := c.writeLocked(context.Background(), t, next); err != nil {
		c.log.Warn("abort timed-out transaction", "transactional_id", t.ID, "err", err)
		return
	}
	c.log.Info("transaction timed out; aborting", "transactional_id", t.ID, "producer_id", t.ProducerID, "epoch", t.Epoch)
	c.sendMarkersLocked(t)
}

// AbortTimedOut runs the check for timed-out transactions now (the clock
// also runs it every AbortCheckInterval).
func (c *Coordinator) AbortTimedOut() {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.abortTimedOutLocked()
}

// expireLocked removes the transactional ids without a transaction whose
// last record is IDExpiration old (a tombstone each).
func (c *Coordinator) expireLocked() {
	now := c.clock.Now()
	var due []*txn
	for _, t := range c.txns {
		switch t.State {
		case Empty, CompleteCommit, CompleteAbort:
		default:
			continue
		}
		if !t.pending && c.checkLocked(t.ID) == nil && !now.Before(t.Update.Add(c.cfg.IDExpiration)) {
			due = append(due, t)
		}
	}
	slices.SortFunc(due, func(a, b *txn) int { return strings.Compare(a.ID, b.ID) })
	for _, t := range due {
		c.goLocked(func() {
			c.mu.Lock()
			defer c.mu.Unlock()
			if c.txns[t.ID] != t || t.pending {
				return
			}
			next := t.clone()
			next.State = Dead
			if err := c.writeLocked(context.Background(), t, next); err != nil {
				c.log.Warn("expire transactional id", "transactional_id", t.ID, "err", err)
				return
			}
			c.log.Info("transactional id expired", "transactional_id", t.ID)
		})
	}
}

// ExpireIDs runs the expiry of transactional ids now (the clock also runs
// it every ExpireCheckInterval).
func (c *Coordinator) ExpireIDs() {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.expireLocked()
}

// Description is a transaction as DescribeTransactions shows it: while
// it ends, Partitions are those still without their marker, as in Kafka.
type Description struct {
	ID            string
	State         State
	Timeout       time.Duration
	Start         time.Time // zero: no transaction
	ProducerID    int64
	ProducerEpoch int16
	Partitions    []TopicPartition
}

// Describe describes the transaction of id: ErrNotFound when this
// coordinator has no such id.
func (c *Coordinator) Describe(id string) (Description, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if err := c.checkLocked(id); err != nil {
		return Description{}, err
	}
	t := c.txns[id]
	if t == nil || !t.durable {
		return Description{}, ErrNotFound
	}
	d := Description{ID: id, State: t.State, Timeout: t.Timeout, Start: t.Start, ProducerID: t.ProducerID, ProducerEpoch: t.Epoch}
	for _, tp := range t.Partitions {
		if !t.State.completing() || !t.marked[tp] {
			d.Partitions = append(d.Partitions, tp)
		}
	}
	return d, nil
}

// Filter selects the transactions of List; a zero field selects all.
type Filter struct {
	States      []State
	ProducerIDs []int64
	// MinDuration selects transactions running at least this long.
	MinDuration time.Duration
	// Match, when set, selects the ids it accepts.
	Match func(id string) bool
}

// Listing is one transaction of List.
type Listing struct {
	ID         string
	ProducerID int64
	State      State
}

// List lists the transactional ids of the loaded partitions that f
// selects, sorted.
func (c *Coordinator) List(f Filter) []Listing {
	c.mu.Lock()
	defer c.mu.Unlock()
	now := c.clock.Now()
	var out []Listing
	for id, t := range c.txns {
		switch {
		case !t.durable || c.checkLocked(id) != nil:
		case len(f.States) > 0 && !slices.Contains(f.States, t.State):
		case len(f.ProducerIDs) > 0 && !slices.Contains(f.ProducerIDs, t.ProducerID):
		case f.MinDuration > 0 && (t.Start.IsZero() || now.Sub(t.Start) < f.MinDuration):
		case f.Match != nil && !f.Match(id):
		default:
			out = append(out, Listing{ID: id, ProducerID: t.ProducerID, State: t.State})
		}
	}
	slices.SortFunc(out, func(a, b Listing) int { return strings.Compare(a.ID, b.ID) })
	return out
}
