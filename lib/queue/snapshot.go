package queue

import (
	"encoding/binary"
	"errors"
	"fmt"
)

// Run is a range of consecutive in-flight offsets in one state with one
// delivery count.
type Run struct {
	First, Last int64
	State       State
	Deliveries  int16
}

// Snapshot is what a share-partition keeps across a restart or a
// failover: the start and end offsets and each in-flight record's state
// and delivery count. Locks are not kept: a record Acquired in a snapshot
// is restored Available with its delivery count, so it is delivered again
// (at least once) but never beyond the attempt limit: one out of attempts
// is archived as a dead letter instead.
type Snapshot struct {
	Start, End int64
	Runs       []Run // in offset order, covering Start … End-1 exactly
}

// Snapshot returns the partition's durable state.
func (p *Partition) Snapshot() Snapshot {
	s := Snapshot{Start: p.start, End: p.End()}
	for i := range p.inflight {
		r := &p.inflight[i]
		o := p.start + int64(i)
		if n := len(s.Runs); n > 0 && s.Runs[n-1].State == r.state && s.Runs[n-1].Deliveries == r.deliveries {
			s.Runs[n-1].Last = o
			continue
		}
		s.Runs = append(s.Runs, Run{First: o, Last: o, State: r.state, Deliveries: r.deliveries})
	}
	return s
}

// Restore rebuilds a partition from a snapshot (see Snapshot for what
// becomes of acquired records).
func Restore(cfg Config, s Snapshot) (*Partition, error) {
	if err := s.check(); err != nil {
		return nil, err
	}
	p := New(cfg, s.Start)
	p.inflight = make([]inflight, 0, s.End-s.Start)
	for _, run := range s.Runs {
		st := run.State
		if st == Acquired {
			st = Available
		}
		for o := run.First; o <= run.Last; o++ {
			p.inflight = append(p.inflight, inflight{state: st, deliveries: run.Deliveries})
		}
	}
	// A record out of attempts (acquired for the last time when the
	// snapshot was taken, or the limit was lowered since) is archived, a
	// dead letter: it is never delivered beyond the limit.
	for i := range p.inflight {
		r := &p.inflight[i]
		if r.state == Available && int(r.deliveries) >= p.cfg.DeliveryAttemptLimit {
			r.state = Archived
			p.dead = append(p.dead, DeadLetter{Offset: p.start + int64(i), Deliveries: r.deliveries, Reason: "delivery attempt limit reached, lock lost in a restart"})
		}
	}
	p.advance()
	return p, nil
}

// ErrBadSnapshot is a snapshot that does not decode or is inconsistent.
var ErrBadSnapshot = errors.New("queue: bad snapshot")

func (s Snapshot) check() error {
	if s.End < s.Start || s.Start < 0 {
		return fmt.Errorf("%w: start %d end %d", ErrBadSnapshot, s.Start, s.End)
	}
	next := s.Start
	for _, r := range s.Runs {
		if r.First != next || r.Last < r.First || r.State > Archived || r.Deliveries < 0 {
			return fmt.Errorf("%w: run %d-%d at %d", ErrBadSnapshot, r.First, r.Last, next)
		}
		next = r.Last + 1
	}
	if next != s.End {
		return fmt.Errorf("%w: runs end at %d, not %d", ErrBadSnapshot, next, s.End)
	}
	return nil
}

// snapshotVersion is the first byte of an encoded snapshot.
const snapshotVersion = 1

// maxSnapshotWindow bounds the in-flight window a decoded snapshot may
// claim, so that a damaged record cannot make Restore allocate without
// limit.
const maxSnapshotWindow = 1 << 20

// Encode returns the snapshot as bytes: a version byte, then varints
// (start, end, the number of runs, then each run's length, state and
// delivery count).
func (s Snapshot) Encode() []byte {
	b := []byte{snapshotVersion}
	b = binary.AppendVarint(b, s.Start)
	b = binary.AppendVarint(b, s.End)
	b = binary.AppendUvarint(b, uint64(len(s.Runs)))
	for _, r := range s.Runs {
		b = binary.AppendUvarint(b, uint64(r.Last-r.First+1))
		b = append(b, byte(r.State))
		b = binary.AppendUvarint(b, uint64(r.Deliveries))
	}
	return b
}

// DecodeSnapshot parses what Encode wrote.
func DecodeSnapshot(b []byte) (Snapshot, error) {
	var s Snapshot
	if len(b) == 0 || b[0] != snapshotVersion {
		return s, fmt.Errorf("%w: unknown version", ErrBadSnapshot)
	}
	b = b[1:]
	varint := func() int64 {
		v, n := binary.Varint(b)
		if n <= 0 {
			b = nil
			return -1
		}
		b = b[n:]
		return v
	}
	uvarint := func() uint64 {
		v, n := binary.Uvarint(b)
		if n <= 0 {
			b = nil
			return 1 << 62
		}
		b = b[n:]
		return v
	}
	s.Start, s.End = varint(), varint()
	if s.End-s.Start > maxSnapshotWindow || s.End < s.Start {
		return s, fmt.Errorf("%w: window %d-%d", ErrBadSnapshot, s.Start, s.End)
	}
	runs := uvarint()
	if runs > uint64(s.End-s.Start) {
		return s, fmt.Errorf("%w: %d runs", ErrBadSnapshot, runs)
	}
	next := s.Start
	for range runs {
		n := uvarint()
		if len(b) == 0 || n == 0 || n > uint64(s.End-next) {
			return s, fmt.Errorf("%w: truncated run at %d", ErrBadSnapshot, next)
		}
		st := State(b[0])
		b = b[1:]
		d := uvarint()
		if d > 1<<15-1 {
			return s, fmt.Errorf("%w: delivery count at %d", ErrBadSnapshot, next)
		}
		s.Runs = append(s.Runs, Run{First: next, Last: next + int64(n) - 1, State: st, Deliveries: int16(d)})
		next += int64(n)
	}
	if len(b) != 0 {
		return s, fmt.Errorf("%w: %d trailing bytes", ErrBadSnapshot, len(b))
	}
	return s, s.check()
}
