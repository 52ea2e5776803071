package broker

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"hash/fnv"
	"sync"

	"github.com/mqproject/mq/lib/controller"
	"github.com/mqproject/mq/lib/queue"
	"github.com/mqproject/mq/lib/record"
)

// shareStateTopic is where share-partitions keep their state: one record
// per change, keyed by group, topic ID and partition, valued with the
// share-partition's encoded queue.Snapshot. It is compacted, so the
// latest state of each share-partition is what stays.
const shareStateTopic = "__share_group_state"

// errShareStateElsewhere is a share-partition whose state partition is
// led by another node: mq writes share state only through a local
// leader (see docs/queues.md, "Limits").
var errShareStateElsewhere = errors.New("broker: the share state partition is led by another node")

// shareKey names one share-partition.
type shareKey struct {
	group     string
	topicID   controller.TopicID
	partition int32
}

// encode is the key of the share-partition's records: a version byte,
// the group's length and bytes, the topic ID, the partition.
func (k shareKey) encode() []byte {
	b := []byte{1}
	b = binary.AppendUvarint(b, uint64(len(k.group)))
	b = append(b, k.group...)
	b = append(b, k.topicID[:]...)
	return binary.BigEndian.AppendUint32(b, uint32(k.partition))
}

// stateFor is the partition of __share_group_state holding k.
func (k shareKey) stateFor(n int32) int32 {
	h := fnv.New32a()
	h.Write(k.encode())
	return int32(h.Sum32() % uint32(n))
}

// shareStore reads and writes share-partition state in
// __share_group_state, through the replicated log: a write is durable
// when the partition's in-sync replicas have it, as an acks=all produce.
type shareStore struct {
	b        *Broker
	createMu sync.Mutex
}

// topic returns __share_group_state, created (compacted, internal) on
// first use.
func (s *shareStore) topic(ctx context.Context) (*controller.Topic, error) {
	if t := s.b.ctrl.Image().Topics[shareStateTopic]; t != nil {
		return t, nil
	}
	s.createMu.Lock()
	defer s.createMu.Unlock()
	img := s.b.ctrl.Image()
	if t := img.Topics[shareStateTopic]; t != nil {
		return t, nil
	}
	rf := offsetsReplicationFactor(s.b.cfg.Settings.OffsetsTopicReplicationFactor, img)
	n := s.b.cfg.Settings.ShareStateTopicPartitions
	if n <= 0 {
		n = 50
	}
	_, err := s.b.ctrl.CreateTopic(ctx, controller.CreateTopic{
		Name: shareStateTopic, Partitions: n, ReplicationFactor: rf,
		Configs: map[string]string{"cleanup.policy": "compact"}, Internal: true,
	})
	if err != nil && !errors.Is(err, controller.ErrTopicExists) {
		return nil, fmt.Errorf("create %s: %w", shareStateTopic, err)
	}
	s.b.log.Info("created internal topic", "topic", shareStateTopic, "partitions", n, "replication_factor", rf)
	s.b.syncData()
	t := s.b.ctrl.Image().Topics[shareStateTopic]
	if t == nil {
		return nil, fmt.Errorf("%s: not in the image after creation", shareStateTopic)
	}
	return t, nil
}

// leader returns the local leader replica of k's state partition.
func (s *shareStore) leader(ctx context.Context, k shareKey) (*hosted, error) {
	t, err := s.topic(ctx)
	if err != nil {
		return nil, err
	}
	p := k.stateFor(int32(len(t.Partitions)))
	h, err := s.b.leaderPartition(t, p)
	if err != nil {
		if leader := t.Partitions[p].Leader; leader >= 0 && leader != s.b.cfg.Settings.NodeID {
			return nil, errShareStateElsewhere
		}
		return nil, err
	}
	return h, nil
}

// load returns the latest state of k, and false when it has none.
func (s *shareStore) load(ctx context.Context, k shareKey) (queue.Snapshot, bool, error) {
	h, err := s.leader(ctx, k)
	if err != nil {
		return queue.Snapshot{}, false, err
	}
	key := string(k.encode())
	var last []byte
	found := false
	err = replayLog(h, func(rk, rv []byte) error {
		if string(rk) == key {
			last, found = append(last[:0], rv...), rv != nil
		}
		return nil
	})
	if err != nil || !found {
		return queue.Snapshot{}, false, err
	}
	snap, err := queue.DecodeSnapshot(last)
	if err != nil {
		return queue.Snapshot{}, false, fmt.Errorf("%s: state of %s/%x/%d: %w", shareStateTopic, k.group, k.topicID[:], k.partition, err)
	}
	return snap, true, nil
}

// write appends k's new state and returns what waits for it to be
// durable. The caller appends under the share-partition's mutex (so the
// records are in the order of the changes) and waits without it.
func (s *shareStore) write(ctx context.Context, k shareKey, snap queue.Snapshot) (offsetsPending, error) {
	h, err := s.leader(ctx, k)
	if err != nil {
		return offsetsPending{}, err
	}
	batch, err := record.Build(record.BuildOptions{BaseTimestamp: s.b.clock.Now().UnixMilli()},
		[]record.Record{{Key: k.encode(), Value: snap.Encode()}})
	if err != nil {
		return offsetsPending{}, err
	}
	res, err := h.Append(batch, -1)
	if err != nil {
		return offsetsPending{}, err
	}
	return offsetsPending{h, res.LastOffset}, nil
}

// replayLog calls fn for every record of a hosted partition's log, from
// its start to its end.
func replayLog(h *hosted, fn func(key, value []byte) error) error {
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
				return fmt.Errorf("%s at %d: %w", h, offset, err)
			}
			if !hdr.Control() {
				err := record.Iterate(batch, 0, func(r *record.Record) error {
					if r.Offset(&hdr) < offset {
						return nil
					}
					return fn(r.Key, r.Value)
				})
				if err != nil {
					return fmt.Errorf("%s at %d: %w", h, hdr.BaseOffset, err)
				}
			}
			offset = hdr.LastOffset() + 1
			rest = next
		}
	}
	return nil
}
