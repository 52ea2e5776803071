package group

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"log/slog"
	"maps"
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
	DefaultMinSessionTimeout      = 6 * time.Second    // group.min.session.timeout.ms
	DefaultMaxSessionTimeout      = 30 * time.Minute   // group.max.session.timeout.ms
	DefaultRetentionCheckInterval = 10 * time.Minute   // offsets.retention.check.interval.ms
	DefaultOffsetsRetention       = 7 * 24 * time.Hour // offsets.retention.minutes
	DefaultMaxMetadataBytes       = 4096               // offset.metadata.max.bytes
)

// Config configures a Coordinator.
type Config struct {
	// Partitions is the partition count of __consumer_offsets
	// (offsets.topic.num.partitions once the topic exists).
	Partitions int32
	Store      Store
	Clock      clock.Clock  // nil: the real clock
	Logger     *slog.Logger // nil: silent

	// InitialRebalanceDelay (group.initial.rebalance.delay.ms) is how long
	// the first rebalance of an empty group waits for more members. As in
	// Kafka, each member that joins during it extends it by as much again,
	// and it never outlasts the members' longest rebalance timeout.
	InitialRebalanceDelay time.Duration
	// InitialRebalanceAlone (group.initial.rebalance.alone.ms, mq) ends
	// that wait early for a member that is alone: when the first member
	// of an empty group has been its only one for this long (no other
	// member joined or began to join, with MEMBER_ID_REQUIRED, since that
	// member joined), the rebalance completes without waiting longer. Once a second
	// member comes, the group is starting with several and the delay runs
	// its course as in Kafka, so members started together still make one
	// rebalance. The cost: a member that comes later than this after a
	// lone first one makes a second rebalance. Zero, or not shorter than
	// InitialRebalanceDelay, leaves Kafka's rule alone.
	InitialRebalanceAlone time.Duration
	// OffsetsRetention (offsets.retention.minutes): offsets of a group
	// that has been empty this long, and committed at least this long
	// ago, are deleted. Zero: DefaultOffsetsRetention.
	OffsetsRetention time.Duration
	// RetentionCheckInterval is how often expiry runs. Zero: default.
	RetentionCheckInterval time.Duration
	// Session timeouts outside [MinSessionTimeout, MaxSessionTimeout] are
	// refused. Zero: the defaults.
	MinSessionTimeout, MaxSessionTimeout time.Duration
	// MaxMetadataBytes bounds a committed offset's metadata. Zero: default.
	MaxMetadataBytes int
	// NewMemberID makes a member id for a client; nil: client id, "-",
	// and 16 random bytes in hex, as Kafka does.
	NewMemberID func(clientID string) string
}

// Coordinator is the group coordinator of one node: the groups of the
// partitions of __consumer_offsets this node leads. Its methods are safe
// for concurrent use; none blocks on another group's rebalance (waits are
// on the channels Join and Sync return).
type Coordinator struct {
	cfg   Config
	clock clock.Clock
	log   *slog.Logger

	mu     sync.Mutex
	owned  *owned.Partitions[[]completion] // under mu; each one's completions came while it loaded
	groups map[string]*group
	expiry clock.Timer
	seq    uint64 // of the last write appended: writes are numbered in log order
	// inflight are the writes appended and not finished (their Pending
	// waited for, and what they record made visible or dropped);
	// inflightDone, when set, is closed when one finishes (for tests).
	inflight     map[*write]struct{}
	inflightDone chan struct{}
}

// ownedPartition is a partition of __consumer_offsets this node leads.
// Its State are the transactions' ends (CompleteTransaction) that came
// while the partition loaded: applied once it is loaded, as the replay
// may have read the log before their markers. Writes still waiting for
// durability give up when it is gone.
type ownedPartition = owned.Partition[[]completion]

// completion is a transaction's end on a partition.
type completion struct {
	producerID int64
	commit     bool
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
	if cfg.OffsetsRetention <= 0 {
		cfg.OffsetsRetention = DefaultOffsetsRetention
	}
	if cfg.RetentionCheckInterval <= 0 {
		cfg.RetentionCheckInterval = DefaultRetentionCheckInterval
	}
	if cfg.MinSessionTimeout <= 0 {
		cfg.MinSessionTimeout = DefaultMinSessionTimeout
	}
	if cfg.MaxSessionTimeout <= 0 {
		cfg.MaxSessionTimeout = DefaultMaxSessionTimeout
	}
	if cfg.MaxMetadataBytes <= 0 {
		cfg.MaxMetadataBytes = DefaultMaxMetadataBytes
	}
	if cfg.NewMemberID == nil {
		cfg.NewMemberID = randomMemberID
	}
	c := &Coordinator{cfg: cfg, clock: cfg.Clock, log: cfg.Logger, groups: map[string]*group{},
		inflight: map[*write]struct{}{}}
	c.owned = owned.New(owned.Config[[]completion]{
		Topic: "__consumer_offsets", Mu: &c.mu, Replay: c.load,
		NotOwned: ErrNotCoordinator, Loading: ErrLoadInProgress, Closed: ErrClosed,
		StoreError: func(err error) error { return &StoreError{Err: err} },
	})
	c.mu.Lock()
	c.scheduleExpiry()
	c.mu.Unlock()
	return c
}

func randomMemberID(clientID string) string {
	var b [16]byte
	rand.Read(b[:])
	return clientID + "-" + hex.EncodeToString(b[:])
}

// PartitionFor is the partition of __consumer_offsets that holds group g
// among n: Kafka's abs(javaStringHashCode(g)) % n, so a group lands on the
// same partition number as it would in Kafka.
func PartitionFor(g string, n int32) int32 { return owned.PartitionFor(g, n) }

// Partition is PartitionFor with the configured partition count.
func (c *Coordinator) Partition(g string) int32 { return PartitionFor(g, c.cfg.Partitions) }

// Load makes this node the coordinator of the groups of a partition: it
// replays the partition from the Store and then serves its groups. Until
// replay is done those groups answer ErrLoadInProgress. Loading a
// partition already owned waits for that load. Load returns once replay
// is done.
func (c *Coordinator) Load(partition int32) error { return c.owned.Load(partition) }

// LoadAsync is Load in the background: the partition is owned (its groups
// answer ErrLoadInProgress) when LoadAsync returns, and done, if not nil,
// is called with Load's result.
func (c *Coordinator) LoadAsync(partition int32, done func(error)) {
	c.owned.LoadAsync(partition, done)
}

// load replays an owned partition (without mu) and returns what installs
// its groups (with mu, if the partition is still owned).
func (c *Coordinator) load(partition int32, op *ownedPartition) (func(), error) {
	start := c.clock.Now()
	loaded, records, err := c.replay(partition)
	if err != nil {
		return nil, err
	}
	return func() {
		for _, g := range loaded {
			for _, done := range op.State {
				g.completeTransaction(done.producerID, done.commit)
			}
			c.groups[g.id] = g
			// Every restored member's session starts now, as if it had just
			// heartbeated: one that does not come back expires, and the
			// others rebalance without it.
			for _, m := range g.members {
				g.touch(m)
			}
		}
		c.log.Debug("group partition loaded", "partition", partition, "groups", len(loaded),
			"records", records, "took", c.clock.Now().Sub(start).Round(time.Millisecond))
	}, nil
}

// WaitLoaded waits until the partition of group g is loaded, or done is
// closed. It returns at once when the partition is not owned.
func (c *Coordinator) WaitLoaded(g string, done <-chan struct{}) {
	c.owned.WaitLoaded(c.Partition(g), done)
}

// Owned lists the partitions this coordinator owns (loaded or loading).
func (c *Coordinator) Owned() []int32 { return c.owned.Owned() }

// replay reads a partition into groups: the last record of each key wins,
// tombstones delete. Correctness does not depend on the topic being
// compacted; compaction only makes replay shorter.
func (c *Coordinator) replay(partition int32) ([]*group, int, error) {
	groups := map[string]*group{}
	metadata := map[string]*groupValue{} // each group's last group record
	get := func(id string) *group {
		g := groups[id]
		if g == nil {
			g = c.newGroup(id, partition)
			groups[id] = g
		}
		return g
	}
	records := 0
	err := c.cfg.Store.Replay(partition, func(e Entry) error {
		records++
		if e.Control {
			// A transaction's end: its offsets count, or go.
			for _, g := range groups {
				g.completeTransaction(e.ProducerID, e.Commit)
			}
			return nil
		}
		key, value := e.Key, e.Value
		k, err := decodeKey(key)
		if err != nil {
			c.log.Warn("skipping unreadable __consumer_offsets record", "partition", partition, "err", err)
			return nil
		}
		g := get(k.group)
		if k.isOffset {
			tp := TopicPartition{k.topic, k.partition}
			if value == nil {
				delete(g.offsets, tp)
				return nil
			}
			v, err := decodeOffsetValue(value)
			if err != nil {
				c.log.Warn("skipping unreadable offset record", "group", k.group, "err", err)
				return nil
			}
			o := Offset{Offset: v.offset, LeaderEpoch: v.leaderEpoch, Metadata: v.metadata, CommitTime: time.UnixMilli(v.commitMS)}
			if e.Transactional {
				g.addTxnOffsets(e.ProducerID, map[TopicPartition]Offset{tp: o})
				return nil
			}
			g.offsets[tp] = o
			return nil
		}
		if value == nil {
			g.protocolType, g.generation, g.hasMetadata = "", 0, false
			delete(metadata, k.group)
			return nil
		}
		v, err := decodeGroupValue(value)
		if err != nil {
			c.log.Warn("skipping unreadable group record", "group", k.group, "err", err)
			return nil
		}
		g.protocolType, g.generation, g.hasMetadata = v.protocolType, v.generation, true
		metadata[k.group] = &v
		return nil
	})
	if err != nil {
		return nil, records, err
	}
	now := c.clock.Now()
	var out []*group
	for _, g := range groups {
		if len(g.offsets) == 0 && len(g.txnOffsets) == 0 && !g.hasMetadata {
			continue
		}
		// The group's state starts at load time: an Empty group counts as
		// empty from then (for offset retention), and load installs the
		// session timers of the members restored.
		g.stateTime = now
		if v := metadata[g.id]; v != nil {
			g.restoreMembers(v)
		}
		out = append(out, g)
	}
	return out, records, nil
}

// Unload stops coordinating the groups of a partition (another node leads
// it now, or it is gone). Waiting joins and syncs fail with
// ErrNotCoordinator, and so do requests waiting for their records to be
// durable (nothing they would have changed becomes visible).
func (c *Coordinator) Unload(partition int32) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if !c.owned.UnloadLocked(partition) {
		return
	}
	for id, g := range c.groups {
		if g.partition == partition {
			g.shutdown(ErrNotCoordinator)
			delete(c.groups, id)
		}
	}
	c.log.Debug("group partition unloaded", "partition", partition)
}

// Close unloads everything and stops the expiry timer.
func (c *Coordinator) Close() {
	c.mu.Lock()
	defer c.mu.Unlock()
	if !c.owned.CloseLocked() {
		return
	}
	if c.expiry != nil {
		c.expiry.Stop()
	}
	for id, g := range c.groups {
		g.shutdown(ErrNotCoordinator)
		delete(c.groups, id)
	}
}

// checkLocked says whether this node serves group id now. Called with mu
// held.
func (c *Coordinator) checkLocked(id string) error { return c.owned.CheckLocked(c.Partition(id)) }

// Check reports whether this node coordinates group id: nil,
// ErrNotCoordinator or ErrLoadInProgress.
func (c *Coordinator) Check(id string) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.checkLocked(id)
}

// lookup returns the group, after checking ownership; nil group and nil
// error when the group does not exist. A group whose deletion waits for
// durability answers ErrCoordinatorUnavailable (clients retry).
func (c *Coordinator) lookup(id string) (*group, error) {
	if err := c.checkLocked(id); err != nil {
		return nil, err
	}
	g := c.groups[id]
	if g != nil && g.deleting {
		return nil, ErrCoordinatorUnavailable
	}
	return g, nil
}

// write is a batch appended to a partition of __consumer_offsets: what it
// records becomes visible once it is durable.
type write struct {
	seq     uint64          // log order: of two writes of a key, the higher seq is the later record
	op      *ownedPartition // the partition's ownership it was appended under
	pending Pending         // nil: durable at once
}

// appendLocked appends records to a partition. Called with mu held, which
// orders the coordinator's records like its state changes. The caller
// finishes the write with awaitLocked or awaitAsync.
func (c *Coordinator) appendLocked(partition int32, keys, values [][]byte) (*write, error) {
	return c.appendBatchLocked(partition, record.BuildOptions{}, keys, values)
}

// appendBatchLocked is appendLocked with the batch's producer fields in
// opts (a transaction's offsets).
func (c *Coordinator) appendBatchLocked(partition int32, opts record.BuildOptions, keys, values [][]byte) (*write, error) {
	op := c.owned.GetLocked(partition)
	if op == nil {
		return nil, ErrNotCoordinator
	}
	recs := make([]record.Record, len(keys))
	for i := range keys {
		recs[i] = record.Record{OffsetDelta: int32(i), Key: keys[i], Value: values[i]}
	}
	opts.BaseTimestamp = c.clock.Now().UnixMilli()
	batch, err := record.Build(opts, recs)
	if err != nil {
		return nil, err
	}
	p, err := c.cfg.Store.Append(partition, batch)
	if err != nil {
		return nil, &StoreError{Err: err}
	}
	c.seq++
	w := &write{seq: c.seq, op: op, pending: p}
	if p != nil {
		c.inflight[w] = struct{}{}
	}
	return w, nil
}

// await waits, without mu, until w is durable: ErrNotCoordinator when its
// partition is unloaded first, a *StoreError when the store gives up.
func (c *Coordinator) await(ctx context.Context, w *write) error {
	return c.owned.Wait(ctx, w.op, w.pending.Wait)
}

// awaitLocked waits until w is durable. Called with mu held, it releases
// mu while waiting (other groups go on) and takes it again before it
// returns: anything read before may have changed by then.
func (c *Coordinator) awaitLocked(ctx context.Context, w *write) error {
	if w.pending == nil {
		return nil
	}
	c.mu.Unlock()
	err := c.await(ctx, w)
	c.mu.Lock()
	c.finishedLocked(w)
	return err
}

// finishedLocked counts a write as finished.
func (c *Coordinator) finishedLocked(w *write) {
	delete(c.inflight, w)
	if c.inflightDone != nil {
		close(c.inflightDone)
		c.inflightDone = nil
	}
}

// writesChanged returns a channel closed the next time a write finishes.
func (c *Coordinator) writesChanged() <-chan struct{} {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.inflightDone == nil {
		c.inflightDone = make(chan struct{})
	}
	return c.inflightDone
}

// awaitAsync calls done with mu held once w is durable, or with why not:
// at once when it is durable already, else from a goroutine of its own.
// Called with mu held.
func (c *Coordinator) awaitAsync(w *write, done func(error)) {
	if w.pending == nil {
		done(nil)
		return
	}
	go func() {
		err := c.await(context.Background(), w)
		c.mu.Lock()
		defer c.mu.Unlock()
		done(err)
		c.finishedLocked(w)
	}()
}

// StoreError is a failure of the Store to append.
type StoreError struct{ Err error }

func (e *StoreError) Error() string { return "group: store: " + e.Err.Error() }
func (e *StoreError) Unwrap() error { return e.Err }

// GroupListing is one group of ListGroups.
type GroupListing struct {
	Group        string
	ProtocolType string
	State        State
}

// ListGroups lists the loaded groups, sorted by id. With states, only
// groups in one of them (compared case-insensitively, Kafka's names).
func (c *Coordinator) ListGroups(states []string) []GroupListing {
	c.mu.Lock()
	defer c.mu.Unlock()
	var out []GroupListing
	for _, g := range c.groups {
		if c.checkLocked(g.id) != nil {
			continue
		}
		if len(states) > 0 && !slices.ContainsFunc(states, func(s string) bool { return strings.EqualFold(s, g.state.String()) }) {
			continue
		}
		out = append(out, GroupListing{Group: g.id, ProtocolType: g.protocolType, State: g.state})
	}
	slices.SortFunc(out, func(a, b GroupListing) int { return strings.Compare(a.Group, b.Group) })
	return out
}

// Description is a group as DescribeGroups shows it.
type Description struct {
	Group        string
	State        State
	ProtocolType string
	Protocol     string
	Generation   int32
	Leader       string
	Members      []MemberDescription
}

// MemberDescription is one member of a Description.
type MemberDescription struct {
	MemberID, InstanceID, ClientID, ClientHost string
	Metadata, Assignment                       []byte // Metadata of the group's protocol
}

// DescribeGroup describes a group; a group that does not exist is
// described as Dead, as Kafka does.
func (c *Coordinator) DescribeGroup(id string) (Description, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	g, err := c.lookup(id)
	if err != nil {
		return Description{}, err
	}
	if g == nil {
		return Description{Group: id, State: Dead}, nil
	}
	d := Description{Group: id, State: g.state, ProtocolType: g.protocolType, Generation: g.generation, Leader: g.leader}
	if g.state != PreparingRebalance {
		d.Protocol = g.protocol
	}
	for _, m := range g.members {
		md := MemberDescription{MemberID: m.id, InstanceID: m.instanceID, ClientID: m.clientID, ClientHost: m.clientHost}
		if g.state == Stable || g.state == CompletingRebalance {
			md.Metadata = m.metadata(g.protocol)
		}
		if g.state == Stable {
			md.Assignment = m.assignment
		}
		d.Members = append(d.Members, md)
	}
	return d, nil
}

// DeleteGroup deletes an empty group and its offsets: ErrGroupNotFound if
// there is none, ErrNonEmptyGroup if it has members. The group goes once
// its tombstones are durable; until then its requests answer
// ErrCoordinatorUnavailable, and if they never are it stays.
func (c *Coordinator) DeleteGroup(ctx context.Context, id string) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	g, err := c.lookup(id)
	if err != nil {
		return err
	}
	if g == nil {
		return ErrGroupNotFound
	}
	if g.state != Empty {
		return ErrNonEmptyGroup
	}
	var keys, values [][]byte
	for _, tp := range g.offsetKeys() {
		keys = append(keys, offsetKey(id, tp.Topic, tp.Partition))
		values = append(values, nil)
	}
	keys = append(keys, groupKey(id))
	values = append(values, nil)
	w, err := c.appendLocked(g.partition, keys, values)
	if err != nil {
		return err
	}
	g.deleting = true
	err = c.awaitLocked(ctx, w)
	g.deleting = false
	if err != nil {
		return err
	}
	if c.groups[id] == g {
		g.shutdown(ErrCoordinatorUnavailable)
		delete(c.groups, id)
	}
	c.log.Info("group deleted", "group", id)
	return nil
}

// scheduleExpiry arms the next expiry run. Called with mu held.
func (c *Coordinator) scheduleExpiry() {
	c.expiry = c.clock.AfterFunc(c.cfg.RetentionCheckInterval, func() {
		c.mu.Lock()
		defer c.mu.Unlock()
		if c.owned.ClosedLocked() {
			return
		}
		c.expireLocked()
		c.scheduleExpiry()
	})
}

// ExpireOffsets runs offset expiry now (the clock also runs it every
// RetentionCheckInterval).
func (c *Coordinator) ExpireOffsets() {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.expireLocked()
}

// expireLocked deletes the offsets of empty groups older than the
// retention, and empty groups left without offsets. An offset expires when
// both its commit and the moment the group became empty are at least
// OffsetsRetention ago. Groups with members keep their offsets, and so do
// offsets with a commit on its way. The deletions become visible when
// their tombstones are durable.
func (c *Coordinator) expireLocked() {
	now := c.clock.Now()
	for _, id := range slices.Sorted(maps.Keys(c.groups)) {
		g := c.groups[id]
		if g.state != Empty || g.deleting || c.checkLocked(id) != nil {
			continue
		}
		var expired []TopicPartition
		for tp, o := range g.offsets {
			base := o.CommitTime
			if g.stateTime.After(base) {
				base = g.stateTime
			}
			if g.writes[tp] == nil && !now.Before(base.Add(c.cfg.OffsetsRetention)) {
				expired = append(expired, tp)
			}
		}
		slices.SortFunc(expired, compareTopicPartitions)
		dead := len(g.offsets) == len(expired) && len(g.writes) == 0 && g.metadataWrites == 0 && len(g.txnOffsets) == 0
		if len(expired) == 0 && !(dead && g.hasMetadata) {
			if dead {
				g.shutdown(ErrCoordinatorUnavailable)
				delete(c.groups, id)
			}
			continue
		}
		c.tombstoneOffsetsLocked(g, id, expired, dead && g.hasMetadata, dead, "offset expiry", func(ok bool) {
			if !ok {
				return
			}
			if len(expired) > 0 {
				c.log.Info("offsets expired", "group", id, "partitions", len(expired))
			}
			if dead && c.groups[id] == g {
				g.shutdown(ErrCoordinatorUnavailable)
				delete(c.groups, id)
			}
		})
	}
}

// tombstoneOffsetsLocked writes the deletion of group id's offsets tps,
// and of its metadata too with withGroup, and returns at once: the
// offsets are being removed (g.deleting is deleting meanwhile), and once
// the write ends they are gone from the group and done runs, told
// whether the write succeeded. what names the job in log lines. Called
// with c.mu held; done runs with it held.
func (c *Coordinator) tombstoneOffsetsLocked(g *group, id string, tps []TopicPartition, withGroup, deleting bool, what string, done func(ok bool)) {
	var keys, values [][]byte
	for _, tp := range tps {
		keys = append(keys, offsetKey(id, tp.Topic, tp.Partition))
		values = append(values, nil)
	}
	if withGroup {
		keys = append(keys, groupKey(id))
		values = append(values, nil)
	}
	w, err := c.appendLocked(g.partition, keys, values)
	if err != nil {
		c.log.Warn(what, "group", id, "err", err)
		return
	}
	g.beginOffsets(tps)
	g.deleting = deleting
	c.awaitAsync(w, func(err error) {
		g.finishOffsets(w, tps, make([]*Offset, len(tps)), err == nil)
		g.deleting = false
		if err != nil && !errors.Is(err, ErrNotCoordinator) {
			c.log.Warn(what, "group", id, "err", err)
		}
		done(err == nil)
	})
}

func compareTopicPartitions(a, b TopicPartition) int {
	if c := strings.Compare(a.Topic, b.Topic); c != 0 {
		return c
	}
	return int(a.Partition) - int(b.Partition)
}
