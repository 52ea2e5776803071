package group

import (
	"context"
	"fmt"
	"slices"
	"sync"

	"github.com/mqproject/mq/lib/record"
)

// Store is where the coordinator keeps its records: the partitions of
// __consumer_offsets. lib/coordinator's Topic implements it over the
// hosted partitions;
// MemStore is an in-memory one for tests. Methods may be called
// concurrently, for different partitions or the same one, and Wait of
// one Pending concurrently with Append.
type Store interface {
	// Append appends one record batch (built with record.Build) to the
	// partition, after every batch of an Append that returned before it
	// was called. The coordinator calls it with its mutex held, so that
	// records are ordered like the state changes they record: it must not
	// wait for replication. The returned Pending waits for that; nil
	// means the batch is durable already (no other replica to wait for).
	Append(partition int32, batch []byte) (Pending, error)
	// Replay calls fn for every record of the partition, in offset order,
	// transaction markers included. The entry's bytes are valid only
	// during the call; a nil value is a tombstone.
	Replay(partition int32, fn func(e Entry) error) error
}

// Entry is one record of a replay, with what its batch says of it.
type Entry struct {
	Key, Value []byte
	// ProducerID is the producer of the record's batch, -1 for none.
	ProducerID int64
	// Transactional: the record belongs to ProducerID's transaction and
	// counts once a commit marker of ProducerID follows it.
	Transactional bool
	// Control: the record is ProducerID's transaction marker (its key and
	// value are the control record's); Commit says which.
	Control bool
	Commit  bool
}

// EntriesOf calls fn for each record of batch as an Entry: its producer,
// and for a control batch whether its marker commits (a control
// record's key is a version int16 then a type int16, 1 for commit).
func EntriesOf(batch []byte, fn func(r *record.Record, e Entry) error) error {
	h, err := record.ParseHeader(batch)
	if err != nil {
		return err
	}
	e := Entry{ProducerID: h.ProducerID, Transactional: h.Transactional(), Control: h.Control()}
	return record.Iterate(batch, 0, func(r *record.Record) error {
		e := e
		e.Key, e.Value = r.Key, r.Value
		if e.Control {
			e.Commit = len(r.Key) >= 4 && r.Key[2] == 0 && r.Key[3] == 1
		}
		return fn(r, e)
	})
}

// Pending is an appended batch on its way to durability.
type Pending interface {
	// Wait returns nil once the batch is as durable as an acks=all
	// produce: seen by every later Replay, on whichever replica leads the
	// partition by then. Otherwise it returns why not: ctx's error, or the
	// store's (the partition's leadership moved, the wait timed out). The
	// batch may then still survive or not. Wait is called once, without
	// the coordinator's mutex.
	Wait(ctx context.Context) error
}

// MemStore is a Store in memory. Its zero value is ready to use: appended
// batches are durable at once. Hold makes their waits last until a test
// releases them.
type MemStore struct {
	mu      sync.Mutex
	batches map[int32][][]byte
	hold    bool
	held    []*HeldWait   // in append order, not yet released
	waiting int           // Waits blocked now
	changed chan struct{} // closed and replaced when held or waiting changes

	// Fail, when set, is returned by Append instead of storing.
	Fail error
}

// HeldWait is the Pending of a batch appended while the MemStore holds
// waits. Its Wait blocks until Release (or ctx's end).
type HeldWait struct {
	s         *MemStore
	Partition int32
	Batch     []byte // as stored
	released  chan struct{}
	err       error // set before released is closed
	waiters   int   // Waits blocked on it now; guarded by s.mu
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
	stored := append([]byte(nil), batch...)
	s.batches[partition] = append(s.batches[partition], stored)
	if !s.hold {
		return nil, nil
	}
	h := &HeldWait{s: s, Partition: partition, Batch: stored, released: make(chan struct{})}
	s.held = append(s.held, h)
	s.notifyLocked()
	return h, nil
}

// Hold says whether the Pending of later appends waits for Release (on)
// or is durable at once (off). Waits already held stay held.
func (s *MemStore) Hold(on bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.hold = on
}

// Held returns the appends whose waits are held, in append order.
func (s *MemStore) Held() []*HeldWait {
	s.mu.Lock()
	defer s.mu.Unlock()
	return slices.Clone(s.held)
}

// Waiting returns how many Waits are blocked now (on held appends not
// released).
func (s *MemStore) Waiting() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.waiting
}

// Changed returns a channel closed the next time an append is held, a
// wait is released, or a Wait starts or ends. Take it before checking.
func (s *MemStore) Changed() <-chan struct{} {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.changed == nil {
		s.changed = make(chan struct{})
	}
	return s.changed
}

func (s *MemStore) notifyLocked() {
	if s.changed != nil {
		close(s.changed)
		s.changed = nil
	}
}

// Release ends the wait: with nil the batch is durable; with an error
// Wait returns err and the batch stays (it may yet become durable, as
// after a timeout). Releasing twice does nothing.
func (h *HeldWait) Release(err error) { h.release(err, false) }

// Lose ends the wait with err and removes the batch, as a new leader's
// truncation would: later Replays do not see it.
func (h *HeldWait) Lose(err error) { h.release(err, true) }

func (h *HeldWait) release(err error, lose bool) {
	s := h.s
	s.mu.Lock()
	defer s.mu.Unlock()
	i := slices.Index(s.held, h)
	if i < 0 {
		return
	}
	s.held = slices.Delete(s.held, i, i+1)
	if lose {
		bs := s.batches[h.Partition]
		if j := slices.IndexFunc(bs, func(b []byte) bool { return &b[0] == &h.Batch[0] }); j >= 0 {
			s.batches[h.Partition] = slices.Delete(bs, j, j+1)
		}
	}
	h.err = err
	close(h.released)
	s.notifyLocked()
}

// Waiting reports whether a Wait is blocked on h now.
func (h *HeldWait) Waiting() bool {
	h.s.mu.Lock()
	defer h.s.mu.Unlock()
	return h.waiters > 0
}

// Wait blocks until Release or ctx's end.
func (h *HeldWait) Wait(ctx context.Context) error {
	s := h.s
	s.mu.Lock()
	s.waiting++
	h.waiters++
	s.notifyLocked()
	s.mu.Unlock()
	defer func() {
		s.mu.Lock()
		s.waiting--
		h.waiters--
		s.notifyLocked()
		s.mu.Unlock()
	}()
	select {
	case <-h.released:
		return h.err
	case <-ctx.Done():
		return ctx.Err()
	}
}

// Replay iterates the stored batches.
func (s *MemStore) Replay(partition int32, fn func(e Entry) error) error {
	s.mu.Lock()
	batches := append([][]byte(nil), s.batches[partition]...)
	s.mu.Unlock()
	for _, b := range batches {
		if err := EntriesOf(b, func(_ *record.Record, e Entry) error { return fn(e) }); err != nil {
			return err
		}
	}
	return nil
}

// AppendMarker stores a transaction marker of producerID, as a partition
// leader does on WriteTxnMarkers.
func (s *MemStore) AppendMarker(partition int32, producerID int64, epoch int16, commit bool) error {
	key := []byte{0, 0, 0, 0}
	if commit {
		key[3] = 1
	}
	b, err := record.Build(record.BuildOptions{Idempotent: true, ProducerID: producerID, ProducerEpoch: epoch, BaseSequence: -1,
		Transactional: true, Control: true}, []record.Record{{Key: key, Value: []byte{0, 0, 0, 0, 0, 0}}})
	if err != nil {
		return err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.batches == nil {
		s.batches = map[int32][][]byte{}
	}
	s.batches[partition] = append(s.batches[partition], b)
	return nil
}

// Compact does to a partition what the log cleaner does to a partition
// of __consumer_offsets: only the latest record of each key stays, in
// offset order, and with dropTombstones (delete.retention.ms passed) the
// keys whose latest record is a tombstone go. The records stay in the
// batches they came in, batches left empty go: the cleaner's offsets and
// empty batches are no concern of a replay.
func (s *MemStore) Compact(partition int32, dropTombstones bool) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if len(s.held) > 0 {
		return fmt.Errorf("memstore: compact with %d waits held", len(s.held))
	}
	type at struct{ batch, rec int }
	latest := map[string]at{}
	var recs [][]record.Record
	for i, b := range s.batches[partition] {
		var rs []record.Record
		err := record.Iterate(b, 0, func(r *record.Record) error {
			c := *r
			c.Key, c.Value, c.Headers = slices.Clone(r.Key), slices.Clone(r.Value), nil
			latest[string(c.Key)] = at{i, len(rs)}
			rs = append(rs, c)
			return nil
		})
		if err != nil {
			return fmt.Errorf("memstore: compact: %w", err)
		}
		recs = append(recs, rs)
	}
	var out [][]byte
	for i, rs := range recs {
		var kept []record.Record
		for j, r := range rs {
			if latest[string(r.Key)] != (at{i, j}) || (dropTombstones && r.Value == nil) {
				continue
			}
			r.OffsetDelta = int32(len(kept))
			kept = append(kept, r)
		}
		if len(kept) == 0 {
			continue
		}
		b, err := record.Build(record.BuildOptions{}, kept)
		if err != nil {
			return fmt.Errorf("memstore: compact: %w", err)
		}
		out = append(out, b)
	}
	if s.batches == nil {
		s.batches = map[int32][][]byte{}
	}
	s.batches[partition] = out
	return nil
}

// Records returns the number of records stored for a partition.
func (s *MemStore) Records(partition int32) int {
	n := 0
	s.Replay(partition, func(Entry) error { n++; return nil })
	return n
}
