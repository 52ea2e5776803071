package broker

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"
	"time"

	"github.com/mqproject/mq/lib/controller"
	"github.com/mqproject/mq/lib/group"
	"github.com/mqproject/mq/lib/partition"
	"github.com/mqproject/mq/lib/record"
	"github.com/mqproject/mq/lib/replica"
)

// offsetsTopic is the internal topic of the group coordinator.
const offsetsTopic = "__consumer_offsets"

// offsetsCommitTimeout bounds how long a coordinator write waits for the
// in-sync replicas (Kafka's offsets.commit.timeout.ms default); a commit
// that waits longer is answered REQUEST_TIMED_OUT.
const offsetsCommitTimeout = 5 * time.Second

// groupCoordinator ties the group coordinator (lib/group) to this node: it
// stores the coordinator's records in the partitions of __consumer_offsets
// this node hosts, and loads or unloads groups as this node gains or loses
// the leadership of those partitions.
type groupCoordinator struct {
	b *Broker
	c *group.Coordinator
	n int32 // partitions of __consumer_offsets

	createMu sync.Mutex // one creation of the topic at a time
}

// newGroupCoordinator starts the coordinator and loads the partitions of
// __consumer_offsets this node leads; the partitions' follow loop keeps that
// up to date (partition.Manager.AfterApply).
func newGroupCoordinator(b *Broker) *groupCoordinator {
	s := b.cfg.Settings
	n := s.OffsetsTopicNumPartitions
	if t := b.ctrl.Image().Topics[offsetsTopic]; t != nil {
		n = int32(len(t.Partitions)) // fixed once the topic exists
	}
	gc := &groupCoordinator{b: b, n: n}
	gc.c = group.New(group.Config{
		Partitions:            n,
		Store:                 offsetsStore{b},
		Clock:                 b.clock,
		Logger:                b.log.With("component", "group"),
		InitialRebalanceDelay: s.GroupInitialRebalanceDelay,
		InitialRebalanceAlone: s.GroupInitialRebalanceAlone,
		OffsetsRetention:      s.OffsetsRetention,
	})
	gc.syncOwnership()
	return gc
}

// syncOwnership loads the partitions of __consumer_offsets this node now
// leads (in the background: replay can take a while, during which their
// groups answer COORDINATOR_LOAD_IN_PROGRESS) and unloads those it no
// longer leads. Before this node may lead (partition.Manager.MayLead) it leads none.
func (gc *groupCoordinator) syncOwnership() {
	img := gc.b.ctrl.Image()
	self := gc.b.cfg.Settings.NodeID
	lead := map[int32]bool{}
	if t := img.Topics[offsetsTopic]; t != nil && gc.b.parts.MayLead(img) {
		for _, p := range t.Partitions {
			if p.Leader == self && gc.b.parts.Replica(t, p.ID) != nil {
				lead[p.ID] = true
			}
		}
	}
	owned := gc.c.Owned()
	for _, p := range owned {
		if !lead[p] {
			gc.c.Unload(p)
		}
	}
	for p := range lead {
		if slices.Contains(owned, p) {
			continue
		}
		gc.c.LoadAsync(p, func(err error) {
			if err != nil && !errors.Is(err, group.ErrNotCoordinator) && !errors.Is(err, group.ErrClosed) {
				gc.b.log.Error("load group partition", "partition", p, "err", err)
			}
		})
	}
}

// CoordinatedPartitions returns the partitions of __consumer_offsets
// whose groups this node coordinates (loaded or loading).
func (b *Broker) CoordinatedPartitions() []int32 { return b.groups.c.Owned() }

// close stops following the image and closes the coordinator (waiting
// joins and syncs are answered NOT_COORDINATOR).
func (gc *groupCoordinator) close() {
	gc.c.Close()
}

// ensureTopic creates __consumer_offsets (compacted, internal) unless it
// exists, and opens its partitions here.
func (gc *groupCoordinator) ensureTopic(ctx context.Context) (*controller.Topic, error) {
	return gc.b.ensureInternalTopic(ctx, &gc.createMu, offsetsTopic, gc.n, gc.syncOwnership)
}

// ensureInternalTopic returns the compacted internal topic name, which it
// creates with partitions partitions unless it exists (created, it is
// opened here, then created runs). createMu keeps concurrent first users
// from creating it twice.
func (b *Broker) ensureInternalTopic(ctx context.Context, createMu *sync.Mutex, name string, partitions int32, created func()) (*controller.Topic, error) {
	if t := b.ctrl.Image().Topics[name]; t != nil {
		return t, nil
	}
	createMu.Lock()
	defer createMu.Unlock()
	img := b.ctrl.Image()
	if t := img.Topics[name]; t != nil {
		return t, nil
	}
	rf := offsetsReplicationFactor(b.cfg.Settings.OffsetsTopicReplicationFactor, img)
	_, err := b.ctrl.CreateTopic(ctx, controller.CreateTopic{
		Name:              name,
		Partitions:        partitions,
		ReplicationFactor: rf,
		Configs:           map[string]string{"cleanup.policy": "compact"},
		Internal:          true,
	})
	if err != nil && !errors.Is(err, controller.ErrTopicExists) {
		return nil, fmt.Errorf("create %s: %w", name, err)
	}
	b.log.Info("created internal topic", "topic", name, "partitions", partitions, "replication_factor", rf)
	b.syncData()
	if created != nil {
		created()
	}
	t := b.ctrl.Image().Topics[name]
	if t == nil {
		return nil, fmt.Errorf("%s: not in the image after creation", name)
	}
	return t, nil
}

// offsetsReplicationFactor is the replication factor __consumer_offsets
// is created with: offsets.topic.replication.factor, but no more than
// the live (registered, unfenced) brokers now (at least 1), so that a cluster that is still
// starting, or a single node, can coordinate groups. Kafka refuses to
// create the topic instead until enough brokers are up.
func offsetsReplicationFactor(setting int16, img *controller.Image) int16 {
	live := 0
	for _, b := range img.Brokers {
		if !b.Fenced {
			live++
		}
	}
	return int16(max(min(int(setting), live), 1))
}

// offsetsStore is the coordinator's group.Store: the partitions of
// __consumer_offsets this node leads.
type offsetsStore struct{ b *Broker }

func (s offsetsStore) partition(p int32) (*partition.Hosted, error) {
	t := s.b.ctrl.Image().Topics[offsetsTopic]
	return s.b.parts.Leader(t, p)
}

// Append appends as an acks=all produce would (refused with
// NOT_ENOUGH_REPLICAS below min.insync.replicas). It does not wait for the
// followers: the Pending does, unless the high-water mark passed the batch
// already (no other in-sync replica).
func (s offsetsStore) Append(p int32, batch []byte) (group.Pending, error) {
	h, err := s.partition(p)
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
	return offsetsPending{h, res.LastOffset, res.LeaderEpoch}, nil
}

// offsetsPending waits for the in-sync replicas to have a coordinator
// batch, as an acks=all produce does.
type offsetsPending struct {
	h          *partition.Hosted
	lastOffset int64
	epoch      int32 // the leader epoch the batch was appended in
}

// Wait waits for the high-water mark to pass the batch, until ctx ends or
// offsetsCommitTimeout: a request's wait ends when its connection goes.
func (w offsetsPending) Wait(ctx context.Context) error {
	ctx, cancel := context.WithTimeout(ctx, offsetsCommitTimeout)
	defer cancel()
	return w.h.WaitHighWatermark(ctx, w.lastOffset, w.epoch)
}

// replayReadBytes is how much of the log one replay read takes.
const replayReadBytes = 1 << 20

// Replay reads the partition's log from its start to its end. The
// coordinator of a partition is its leader, whose log holds everything
// acknowledged.
func (s offsetsStore) Replay(p int32, fn func(key, value []byte) error) error {
	t := s.b.ctrl.Image().Topics[offsetsTopic]
	if t == nil || p < 0 || int(p) >= len(t.Partitions) {
		return partition.ErrUnknownPartition
	}
	h := s.b.parts.Replica(t, p)
	if h == nil {
		return partition.ErrNotHosted
	}
	l := h.Log()
	offset, end := l.StartOffset(), l.EndOffset()
	for offset < end {
		data, err := l.ReadBytes(offset, end, replayReadBytes)
		if err != nil {
			return err
		}
		if len(data) == 0 {
			break
		}
		for rest := data; len(rest) > 0; {
			batch, next, hdr, err := record.Next(rest)
			if err != nil {
				return fmt.Errorf("%s-%d at %d: %w", offsetsTopic, p, offset, err)
			}
			if !hdr.Control() {
				err := record.Iterate(batch, 0, func(r *record.Record) error {
					if r.Offset(&hdr) < offset {
						return nil // before the start: the batch straddles it
					}
					return fn(r.Key, r.Value)
				})
				if err != nil {
					return fmt.Errorf("%s-%d at %d: %w", offsetsTopic, p, hdr.BaseOffset, err)
				}
			}
			offset = hdr.LastOffset() + 1
			rest = next
		}
	}
	return nil
}

// storeErrorIsNotLeader tells a store failure caused by lost leadership.
func storeErrorIsNotLeader(err error) bool {
	return errors.Is(err, replica.ErrNotLeader) || errors.Is(err, partition.ErrNotHosted) ||
		errors.Is(err, replica.ErrClosed) || errors.Is(err, partition.ErrUnknownPartition)
}
