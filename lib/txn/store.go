package txn

import (
	"context"
	"fmt"
	"sync"

	"github.com/mqproject/mq/lib/record"
)

// Store is where the coordinator keeps its records: the partitions of
// __transaction_state. lib/coordinator's Topic implements it over the
// hosted partitions (Topic.TxnStore); MemStore is one in memory for tests.
// Methods may be called concurrently.
type Store interface {
	// Append appends one record batch to the partition, after every batch
	// of an Append that returned before. The coordinator calls it with its
	// mutex held: it must not wait for replication; the Pending does (nil:
	// durable already).
	Append(partition int32, batch []byte) (Pending, error)
	// Replay calls fn for every record of the partition in offset order; a
	// nil value is a tombstone.
	Replay(partition int32, fn func(key, value []byte) error) error
	// LeaderEpoch is the partition's leader epoch on this node: the
	// coordinator epoch its markers carry.
	LeaderEpoch(partition int32) int32
}

// Pending is an appended batch on its way to durability.
type Pending interface {
	// Wait returns nil once the batch is as durable as an acks=all
	// produce, else why not. It is called once, without the coordinator's
	// mutex.
	Wait(ctx context.Context) error
}

// MemStore is a Store in memory whose batches are durable at once. Its
// zero value is ready to use.
type MemStore struct {
	mu      sync.Mutex
	batches map[int32][][]byte
	// Fail, when set, is returned by Append instead of storing.
	Fail error
}

// Append stores a copy of batch.
func (s *MemStore) Append(partition int32, batch []byte) (Pending, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.Fail != nil {
		return nil, s.Fail
	}
	if _, err := record.Validate(batch); err != nil {
		return nil, fmt.Errorf("memstore: %w", err)
	}
	if s.batches == nil {
		s.batches = map[int32][][]byte{}
	}
	s.batches[partition] = append(s.batches[partition], append([]byte(nil), batch...))
	return nil, nil
}

// Replay iterates the stored batches.
func (s *MemStore) Replay(partition int32, fn func(key, value []byte) error) error {
	s.mu.Lock()
	batches := append([][]byte(nil), s.batches[partition]...)
	s.mu.Unlock()
	for _, b := range batches {
		if err := record.Iterate(b, 0, func(r *record.Record) error { return fn(r.Key, r.Value) }); err != nil {
			return err
		}
	}
	return nil
}

// LeaderEpoch is 0: one leader forever.
func (s *MemStore) LeaderEpoch(int32) int32 { return 0 }
