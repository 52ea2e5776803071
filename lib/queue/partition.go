package queue

import (
	"errors"
	"fmt"
	"time"
)

// State is the state of one in-flight record of a share-partition.
type State uint8

// The states of KIP-932. A record is Available until a member acquires
// it; Acquired until that member acknowledges it or its lock expires;
// Acknowledged (accepted) or Archived (rejected, a gap, or out of
// delivery attempts) for good.
const (
	Available State = iota
	Acquired
	Acknowledged
	Archived
)

func (s State) String() string {
	switch s {
	case Available:
		return "available"
	case Acquired:
		return "acquired"
	case Acknowledged:
		return "acknowledged"
	case Archived:
		return "archived"
	}
	return fmt.Sprintf("state(%d)", uint8(s))
}

// final says whether a record in state s is done with: it is never
// delivered again.
func (s State) final() bool { return s == Acknowledged || s == Archived }

// AckType is a KIP-932 acknowledgement type, numbered as on the wire.
type AckType int8

const (
	Gap     AckType = 0 // no record at this offset (compaction, control record): archived
	Accept  AckType = 1 // processed: acknowledged
	Release AckType = 2 // give it back: available again, or archived at the attempt limit
	Reject  AckType = 3 // unprocessable: archived (and dead-lettered)
	Renew   AckType = 4 // keep the lock: the acquisition lock starts again
)

// Errors of the state machine. A refused call leaves the partition
// exactly as it was.
var (
	// ErrInvalidRecordState is an acknowledgement of an offset the member
	// does not hold (never acquired, acquired by another member, lock
	// expired, already acknowledged, outside the window).
	ErrInvalidRecordState = errors.New("queue: record not acquired by this member")
	// ErrInvalidAck is an acknowledgement that does not parse: an unknown
	// type, a range that runs backwards.
	ErrInvalidAck = errors.New("queue: invalid acknowledgement")
)

// Config are the settings of one share-partition (KIP-932's group
// configs, with Kafka's names and defaults).
type Config struct {
	// LockDuration is how long a member holds an acquired record before
	// it becomes available again (group.share.record.lock.duration.ms,
	// 30s).
	LockDuration time.Duration
	// DeliveryAttemptLimit is how many times a record is acquired before
	// a release or an expired lock archives it instead
	// (group.share.delivery.attempt.limit, 5).
	DeliveryAttemptLimit int
	// MaxRecordLocks bounds the in-flight window, end offset minus start
	// offset (group.share.partition.max.record.locks, 2000).
	MaxRecordLocks int
}

// DefaultConfig is Kafka's defaults.
func DefaultConfig() Config {
	return Config{LockDuration: 30 * time.Second, DeliveryAttemptLimit: 5, MaxRecordLocks: 2000}
}

func (c Config) withDefaults() Config {
	d := DefaultConfig()
	if c.LockDuration <= 0 {
		c.LockDuration = d.LockDuration
	}
	if c.DeliveryAttemptLimit <= 0 {
		c.DeliveryAttemptLimit = d.DeliveryAttemptLimit
	}
	if c.MaxRecordLocks <= 0 {
		c.MaxRecordLocks = d.MaxRecordLocks
	}
	return c
}

// inflight is one in-flight offset.
type inflight struct {
	state      State
	deliveries int16     // times acquired
	member     string    // holder while Acquired
	deadline   time.Time // lock expiry while Acquired
}

// Lease is a run of consecutive offsets acquired with the same
// delivery count, as ShareFetch's AcquiredRecords names them.
type Lease struct {
	First, Last int64
	Deliveries  int16
}

// Ack is one acknowledgement of an inclusive offset range.
type Ack struct {
	First, Last int64
	Type        AckType
}

// DeadLetter is a record archived because it failed: rejected, or out of
// delivery attempts. Gaps and records skipped by a start offset moved
// forward are not dead letters.
type DeadLetter struct {
	Offset     int64
	Deliveries int16
	Reason     string
}

// Partition is the state of one share-partition: a group's view of one
// topic partition. It is a pure, deterministic state machine: time comes
// in as arguments, nothing is read from the log. It is not safe for
// concurrent use.
//
// Invariants: Start ≤ End; every offset below Start is done with
// (acknowledged or archived, or never to be delivered); End−Start ≤
// MaxRecordLocks; offsets at or past End were never acquired; an
// offset's delivery count never exceeds DeliveryAttemptLimit; a final
// record never changes state again.
type Partition struct {
	cfg      Config
	start    int64
	inflight []inflight // offsets start … start+len-1; End = start+len
	dead     []DeadLetter
}

// New returns a share-partition whose start (and end) offset is start:
// the log start offset for share.auto.offset.reset=earliest, the
// high-water mark for latest.
func New(cfg Config, start int64) *Partition {
	return &Partition{cfg: cfg.withDefaults(), start: start}
}

// Config returns the partition's settings.
func (p *Partition) Config() Config { return p.cfg }

// SetConfig changes the settings. Locks taken keep their deadlines; a
// lower attempt limit applies from the next release.
func (p *Partition) SetConfig(cfg Config) { p.cfg = cfg.withDefaults() }

// Start is the share-partition start offset (SPSO): the first offset not
// done with.
func (p *Partition) Start() int64 { return p.start }

// End is the share-partition end offset: the first offset never acquired.
func (p *Partition) End() int64 { return p.start + int64(len(p.inflight)) }

func (p *Partition) at(offset int64) *inflight { return &p.inflight[offset-p.start] }

// Expire makes the records whose lock passed by now available again (or
// archived, at the attempt limit).
func (p *Partition) Expire(now time.Time) {
	for i := range p.inflight {
		r := &p.inflight[i]
		if r.state == Acquired && !now.Before(r.deadline) {
			p.release(p.start+int64(i), r, "acquisition lock expired at the delivery attempt limit")
		}
	}
	p.advance()
}

// NextDeadline returns the earliest lock deadline, and false when no
// record is acquired.
func (p *Partition) NextDeadline() (time.Time, bool) {
	var next time.Time
	found := false
	for i := range p.inflight {
		r := &p.inflight[i]
		if r.state == Acquired && (!found || r.deadline.Before(next)) {
			next, found = r.deadline, true
		}
	}
	return next, found
}

// release gives an acquired record back: available, or archived at the
// attempt limit (a dead letter).
func (p *Partition) release(offset int64, r *inflight, reason string) {
	r.member, r.deadline = "", time.Time{}
	if int(r.deliveries) >= p.cfg.DeliveryAttemptLimit {
		r.state = Archived
		p.dead = append(p.dead, DeadLetter{Offset: offset, Deliveries: r.deliveries, Reason: reason})
		return
	}
	r.state = Available
}

// advance moves the start offset past the done prefix.
func (p *Partition) advance() {
	n := 0
	for n < len(p.inflight) && p.inflight[n].state.final() {
		n++
	}
	if n == 0 {
		return
	}
	p.start += int64(n)
	p.inflight = append(p.inflight[:0], p.inflight[n:]...)
}

// Acquire gives member up to maxRecords records, below logEnd (the
// high-water mark): first the available in-flight ones, oldest first,
// then offsets never acquired, as far as the in-flight window allows.
// Locks expired by now are released first. Each acquired record's
// delivery count goes up by one and its lock lasts LockDuration from now.
func (p *Partition) Acquire(member string, now time.Time, logEnd int64, maxRecords int) []Lease {
	p.Expire(now)
	if logEnd < p.start {
		return nil
	}
	var out []Lease
	deadline := now.Add(p.cfg.LockDuration)
	take := func(offset int64, r *inflight) {
		r.state, r.member, r.deadline = Acquired, member, deadline
		r.deliveries++
		if n := len(out); n > 0 && out[n-1].Last == offset-1 && out[n-1].Deliveries == r.deliveries {
			out[n-1].Last = offset
			return
		}
		out = append(out, Lease{First: offset, Last: offset, Deliveries: r.deliveries})
	}
	got := 0
	for i := 0; i < len(p.inflight) && got < maxRecords; i++ {
		offset := p.start + int64(i)
		if offset >= logEnd {
			break
		}
		if r := &p.inflight[i]; r.state == Available {
			take(offset, r)
			got++
		}
	}
	for got < maxRecords && len(p.inflight) < p.cfg.MaxRecordLocks && p.End() < logEnd {
		offset := p.End()
		p.inflight = append(p.inflight, inflight{})
		take(offset, &p.inflight[len(p.inflight)-1])
		got++
	}
	return out
}

// Acknowledge applies member's acknowledgements, all or none: every offset
// named must be acquired by member (with its lock not expired by now),
// else nothing changes and the error is ErrInvalidRecordState.
func (p *Partition) Acknowledge(member string, now time.Time, acks []Ack) error {
	for _, a := range acks {
		if a.First > a.Last || a.Type < Gap || a.Type > Renew {
			return fmt.Errorf("%w: %d-%d type %d", ErrInvalidAck, a.First, a.Last, a.Type)
		}
	}
	// Validate before any change, so that a refused call changes nothing
	// (an expired lock included: Expire runs only after).
	seen := map[int64]bool{}
	for _, a := range acks {
		if a.First < p.start || a.Last >= p.End() {
			return fmt.Errorf("%w: %d-%d outside the in-flight window %d-%d", ErrInvalidRecordState, a.First, a.Last, p.start, p.End())
		}
		for o := a.First; o <= a.Last; o++ {
			r := p.at(o)
			if r.state != Acquired || r.member != member || !now.Before(r.deadline) || seen[o] {
				return fmt.Errorf("%w: offset %d is %s", ErrInvalidRecordState, o, r.state)
			}
			if a.Type != Renew {
				seen[o] = true
			}
		}
	}
	for _, a := range acks {
		for o := a.First; o <= a.Last; o++ {
			r := p.at(o)
			switch a.Type {
			case Accept:
				r.state, r.member, r.deadline = Acknowledged, "", time.Time{}
			case Gap:
				r.state, r.member, r.deadline = Archived, "", time.Time{}
			case Reject:
				r.state, r.member, r.deadline = Archived, "", time.Time{}
				p.dead = append(p.dead, DeadLetter{Offset: o, Deliveries: r.deliveries, Reason: "rejected by the consumer"})
			case Release:
				p.release(o, r, "released at the delivery attempt limit")
			case Renew:
				r.deadline = now.Add(p.cfg.LockDuration)
			}
		}
	}
	p.Expire(now)
	return nil
}

// ReleaseMember releases every record member holds, as when its share
// session closes or it leaves the group.
func (p *Partition) ReleaseMember(member string) {
	for i := range p.inflight {
		r := &p.inflight[i]
		if r.state == Acquired && r.member == member {
			p.release(p.start+int64(i), r, "released at the delivery attempt limit")
		}
	}
	p.advance()
}

// SkipTo moves the start offset to at least offset (the log start moved
// past it, or an operator reset the group): the records below it are
// done with, without being dead letters.
func (p *Partition) SkipTo(offset int64) {
	if offset <= p.start {
		return
	}
	if offset >= p.End() {
		p.start, p.inflight = offset, p.inflight[:0]
		return
	}
	p.inflight = append(p.inflight[:0], p.inflight[offset-p.start:]...)
	p.start = offset
	p.advance()
}

// TakeDeadLetters returns the dead letters since the last call, in the
// order they were archived, and forgets them.
func (p *Partition) TakeDeadLetters() []DeadLetter {
	d := p.dead
	p.dead = nil
	return d
}

// FirstAvailable returns the first offset Acquire would give: the first
// available in-flight record, else End. Reads of the log start there.
func (p *Partition) FirstAvailable() int64 {
	for i := range p.inflight {
		if p.inflight[i].state == Available {
			return p.start + int64(i)
		}
	}
	return p.End()
}

// Record returns an offset's state and delivery count; offsets below Start
// are reported Acknowledged, those at or past End Available with none.
func (p *Partition) Record(offset int64) (State, int16) {
	switch {
	case offset < p.start:
		return Acknowledged, 0
	case offset >= p.End():
		return Available, 0
	}
	r := p.at(offset)
	return r.state, r.deliveries
}

// Counts is how many in-flight records are in each state.
type Counts struct {
	Available, Acquired, Acknowledged, Archived int
}

// Counts counts the in-flight window by state.
func (p *Partition) Counts() Counts {
	var c Counts
	for i := range p.inflight {
		switch p.inflight[i].state {
		case Available:
			c.Available++
		case Acquired:
			c.Acquired++
		case Acknowledged:
			c.Acknowledged++
		case Archived:
			c.Archived++
		}
	}
	return c
}
