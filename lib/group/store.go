package group

import (
	"fmt"
	"sync"

	"github.com/mqproject/mq/lib/record"
)

// Store is where the coordinator keeps its records: the partitions of
// __consumer_offsets. lib/broker implements it over the hosted partitions;
// MemStore is an in-memory one for tests. Methods may be called
// concurrently, for different partitions or the same one.
type Store interface {
	// Append appends one record batch (built with record.Build) to the
	// partition and returns once it is as durable as an acks=all produce:
	// a record of a batch Append accepted is seen by every later Replay.
	Append(partition int32, batch []byte) error
	// Replay calls fn for every record of the partition, in offset order.
	// key and value are valid only during the call; a nil value is a
	// tombstone.
	Replay(partition int32, fn func(key, value []byte) error) error
}

// MemStore is a Store in memory. Its zero value is ready to use.
type MemStore struct {
	mu      sync.Mutex
	batches map[int32][][]byte
	// Fail, when set, is returned by Append instead of storing.
	Fail error
}

// Append stores a copy of batch.
func (s *MemStore) Append(partition int32, batch []byte) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.Fail != nil {
		return s.Fail
	}
	if _, err := record.Validate(batch); err != nil {
		return fmt.Errorf("memstore: %w", err)
	}
	if s.batches == nil {
		s.batches = map[int32][][]byte{}
	}
	s.batches[partition] = append(s.batches[partition], append([]byte(nil), batch...))
	return nil
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

// Records returns the number of records stored for a partition.
func (s *MemStore) Records(partition int32) int {
	n := 0
	s.Replay(partition, func(_, _ []byte) error { n++; return nil })
	return n
}
