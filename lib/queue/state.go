package queue

import (
	"context"
	"encoding/binary"
	"fmt"
	"hash/fnv"
	"time"

	"github.com/mqproject/mq/lib/record"
)

// Store is where share-partitions keep their state: the partitions of a
// compacted topic (__share_group_state), each record keyed so that
// compaction keeps the latest of each key. lib/coordinator's Topic
// implements it. Its methods may be called concurrently.
type Store interface {
	// PartitionCount returns the number of partitions, creating the
	// topic on first use.
	PartitionCount(ctx context.Context) (int32, error)
	// Write appends batch to a partition, after every batch of a Write
	// that returned before it was called. It must not wait for the batch
	// to be durable, so that callers write under their mutex (records in
	// the order of their changes): the Pending does.
	Write(ctx context.Context, partition int32, batch []byte) (Pending, error)
	// Read calls fn for every record of a partition, in offset order;
	// key and value are valid only during the call, a nil value is a
	// tombstone.
	Read(ctx context.Context, partition int32, fn func(key, value []byte) error) error
}

// Pending is a written batch on its way to durability. Wait returns nil
// once it is as durable as an acks=all produce, else why not; it is
// called without the writer's mutex.
type Pending interface {
	Wait(ctx context.Context) error
}

// Key names one share-partition: a group's view of a topic partition.
type Key struct {
	Group     string
	TopicID   [16]byte
	Partition int32
}

// encode is the key of the share-partition's records: a version byte,
// the group's length and bytes, the topic ID, the partition.
func (k Key) encode() []byte {
	b := []byte{1}
	b = binary.AppendUvarint(b, uint64(len(k.Group)))
	b = append(b, k.Group...)
	b = append(b, k.TopicID[:]...)
	return binary.BigEndian.AppendUint32(b, uint32(k.Partition))
}

// stateHash is the partition of the state topic holding the records of
// a key.
func stateHash(key []byte, n int32) int32 {
	h := fnv.New32a()
	h.Write(key)
	return int32(h.Sum32() % uint32(n))
}

// The index of a group's topics: one record per topic the group has
// share-partition state for, keyed by version byte 2, the group and the
// topic ID, all in the partition of indexPrefix(group), so that a
// describe of the group without topics finds them in one partition.
func indexPrefix(group string) []byte {
	b := []byte{2}
	b = binary.AppendUvarint(b, uint64(len(group)))
	return append(b, group...)
}

func indexKey(group string, topic [16]byte) []byte {
	return append(indexPrefix(group), topic[:]...)
}

// states reads and writes share-partition state in a Store.
type states struct {
	store Store
	now   func() time.Time // the records' timestamps
}

// partitionOf returns the state partition holding a record key.
func (s states) partitionOf(ctx context.Context, key []byte) (int32, error) {
	n, err := s.store.PartitionCount(ctx)
	if err != nil {
		return 0, err
	}
	if n <= 0 {
		return 0, fmt.Errorf("queue: state topic without partitions")
	}
	return stateHash(key, n), nil
}

// load returns the latest state of k, and false when it has none.
func (s states) load(ctx context.Context, k Key) (Snapshot, bool, error) {
	key := k.encode()
	p, err := s.partitionOf(ctx, key)
	if err != nil {
		return Snapshot{}, false, err
	}
	var last []byte
	found := false
	err = s.store.Read(ctx, p, func(rk, rv []byte) error {
		if string(rk) == string(key) {
			last, found = append(last[:0], rv...), rv != nil
		}
		return nil
	})
	if err != nil || !found {
		return Snapshot{}, false, err
	}
	snap, err := DecodeSnapshot(last)
	if err != nil {
		return Snapshot{}, false, fmt.Errorf("state of %s/%x/%d: %w", k.Group, k.TopicID[:], k.Partition, err)
	}
	return snap, true, nil
}

// write appends k's new state.
func (s states) write(ctx context.Context, k Key, snap Snapshot) (Pending, error) {
	return s.writeRecord(ctx, k.encode(), k.encode(), snap.Encode())
}

// remove appends a tombstone of k's state.
func (s states) remove(ctx context.Context, k Key) (Pending, error) {
	return s.writeRecord(ctx, k.encode(), k.encode(), nil)
}

// index records (or, with present false, forgets) that group has state
// for topic.
func (s states) index(ctx context.Context, group string, topic [16]byte, present bool) (Pending, error) {
	var value []byte
	if present {
		value = []byte{1}
	}
	return s.writeRecord(ctx, indexPrefix(group), indexKey(group, topic), value)
}

// indexed returns the topics group has state for.
func (s states) indexed(ctx context.Context, group string) ([][16]byte, error) {
	prefix := indexPrefix(group)
	p, err := s.partitionOf(ctx, prefix)
	if err != nil {
		return nil, err
	}
	present := map[[16]byte]bool{}
	err = s.store.Read(ctx, p, func(k, v []byte) error {
		if len(k) == len(prefix)+16 && string(k[:len(prefix)]) == string(prefix) {
			present[[16]byte(k[len(prefix):])] = v != nil
		}
		return nil
	})
	var out [][16]byte
	for id, ok := range present {
		if ok {
			out = append(out, id)
		}
	}
	return out, err
}

// writeRecord appends one record to the partition of placement.
func (s states) writeRecord(ctx context.Context, placement, key, value []byte) (Pending, error) {
	p, err := s.partitionOf(ctx, placement)
	if err != nil {
		return nil, err
	}
	batch, err := record.Build(record.BuildOptions{BaseTimestamp: s.now().UnixMilli()}, []record.Record{{Key: key, Value: value}})
	if err != nil {
		return nil, err
	}
	return s.store.Write(ctx, p, batch)
}
