package replica

import (
	"math"
	"sync"
	"sync/atomic"
	"time"

	"github.com/mqproject/mq/lib/clock"
)

// Unlimited is a Quota's rate when nothing is throttled: Kafka's default
// for leader.replication.throttled.rate and
// follower.replication.throttled.rate (Long.MaxValue).
const Unlimited = math.MaxInt64

// Quota is one side of a broker's replication throttle (KIP-73): the
// bytes per second that all its throttled replicas together may send to
// their followers (the leader side) or fetch from their leaders (the
// follower side). A request of throttled replicas Reserves the allowance
// before they move bytes and Settles with what they moved (a Share does
// both for partitions read one by one); the others never ask.
//
// It is a token bucket that may go into debt: a replica given an
// allowance smaller than the batch at its fetch offset moves the whole
// batch, and the bucket repays it before the next allowance, so the rate
// holds on average whatever the batch sizes. The bucket holds at most
// quotaBurst of the rate, and an allowance is given only once it has
// quotaQuantum of it, so that a throttled replica moves a few large
// chunks a second rather than a batch per round trip.
//
// A Quota is safe for concurrent use. SetRate applies at once: the
// replicas holding back ask again within the wait Hold gave them.
type Quota struct {
	clock clock.Clock
	rate  atomic.Int64 // bytes per second; Unlimited: none

	mu     sync.Mutex
	tokens float64   // bytes that may go now; negative: the debt of a large batch
	last   time.Time // when tokens was last brought up to date

	bytes atomic.Uint64 // bytes taken under a limit
	holds atomic.Uint64 // Hold calls: times a replica got or asked nothing
}

// quotaBurst is how much of the rate a bucket left alone accumulates: a
// catch-up starting after a quiet time moves at most this much more than
// the rate allows in its first second.
const quotaBurst = time.Second

// quotaQuantum is the least allowance given: the bytes of this much of
// the rate.
const quotaQuantum = 50 * time.Millisecond

// quotaRecheck is the longest wait Hold asks for: with a rate of 0 (no
// bytes at all) a replica asks again this often, so that a higher rate
// applies soon.
const quotaRecheck = time.Second

// NewQuota returns an unlimited Quota on c (nil: real time).
func NewQuota(c clock.Clock) *Quota {
	if c == nil {
		c = clock.Real()
	}
	q := &Quota{clock: c, last: c.Now()}
	q.rate.Store(Unlimited)
	return q
}

// Rate is the rate in bytes per second, Unlimited when there is none.
func (q *Quota) Rate() int64 { return q.rate.Load() }

// Limited reports whether the rate is anything but Unlimited. A throttled
// replica of an unlimited Quota moves as fast as any other.
func (q *Quota) Limited() bool { return q.rate.Load() != Unlimited }

// SetRate sets the rate in bytes per second: Unlimited (or any negative
// value) for none, 0 for nothing at all. Bytes already owed stay owed; a
// Quota that was unlimited starts empty.
func (q *Quota) SetRate(bytesPerSecond int64) {
	if bytesPerSecond < 0 {
		bytesPerSecond = Unlimited
	}
	q.mu.Lock()
	defer q.mu.Unlock()
	old := q.rate.Load()
	if old == bytesPerSecond {
		return
	}
	now := q.clock.Now()
	if old == Unlimited {
		q.tokens = 0
	} else {
		q.refillLocked(now)
	}
	q.last = now
	q.rate.Store(bytesPerSecond)
	q.tokens = min(q.tokens, q.burst(bytesPerSecond))
}

// burst is the most a bucket of rate holds.
func (q *Quota) burst(rate int64) float64 { return float64(rate) * quotaBurst.Seconds() }

// quantum is the least allowance at rate.
func (q *Quota) quantum(rate int64) float64 {
	return max(float64(rate)*quotaQuantum.Seconds(), 1)
}

// refillLocked adds the bytes earned since last, up to the burst.
func (q *Quota) refillLocked(now time.Time) {
	rate := q.rate.Load()
	if d := now.Sub(q.last); d > 0 {
		q.tokens = min(q.tokens+d.Seconds()*float64(rate), q.burst(rate))
	}
	q.last = now
}

// Allowance is how many bytes throttled replicas may move now: 0 when
// they must hold back (Hold), Unlimited when there is no limit; it takes
// nothing (Reserve does). The bytes moved are counted by Settle.
func (q *Quota) Allowance() int64 {
	rate := q.rate.Load()
	if rate == Unlimited {
		return Unlimited
	}
	q.mu.Lock()
	defer q.mu.Unlock()
	return q.allowanceLocked(rate)
}

// allowanceLocked refills q and returns what may move now: 0 below one
// quantum of rate.
func (q *Quota) allowanceLocked(rate int64) int64 {
	q.refillLocked(q.clock.Now())
	if q.tokens < q.quantum(rate) {
		return 0
	}
	return int64(q.tokens)
}

// Reserve takes out of q the allowance of one request's throttled
// replicas, so that requests served at the same time (several followers
// of this leader, several Fetchers of this follower) do not each spend
// the same bytes: 0 when they must hold back (Hold), Unlimited when
// there is no limit. Settle must follow, once the bytes moved are known;
// meanwhile the others find the bucket empty.
func (q *Quota) Reserve() int64 {
	rate := q.rate.Load()
	if rate == Unlimited {
		return Unlimited
	}
	q.mu.Lock()
	defer q.mu.Unlock()
	n := q.allowanceLocked(rate)
	q.tokens -= float64(n)
	return n
}

// Settle ends a Reserve of reserved bytes (0: none) of which the
// replicas moved moved: what they did not move goes back to the bucket,
// what they moved beyond it (a whole first batch) is owed.
func (q *Quota) Settle(reserved, moved int64) {
	if reserved == Unlimited || !q.Limited() {
		return
	}
	if moved > 0 {
		q.bytes.Add(uint64(moved))
	}
	if reserved == moved {
		return
	}
	q.mu.Lock()
	q.refillLocked(q.clock.Now())
	q.tokens = min(q.tokens+float64(reserved-moved), q.burst(q.rate.Load()))
	q.mu.Unlock()
}

// Return gives back n bytes that a Settle counted as moved and that did
// not go after all (a read whose answer was never sent).
func (q *Quota) Return(n int64) {
	if n <= 0 || !q.Limited() {
		return
	}
	q.bytes.Add(^uint64(n - 1))
	q.mu.Lock()
	q.refillLocked(q.clock.Now())
	q.tokens = min(q.tokens+float64(n), q.burst(q.rate.Load()))
	q.mu.Unlock()
}

// Share is one request's part of a Quota: the throttled partitions of
// one fetch, read one after the other, share what the first of them
// reserved, each reading at most what is left. Its zero value has no
// Quota and limits nothing; Quota.Share returns one that does. A Share
// is used by one goroutine, and must be settled.
type Share struct {
	q        *Quota
	reserved int64 // -1: nothing asked yet
	moved    int64
	hold     time.Duration
}

// Share returns a Share of q for one request.
func (q *Quota) Share() Share { return Share{q: q, reserved: -1} }

// Limit is how many of want bytes a throttled partition may read now: at
// most what the request has left, at least 1 while anything is left (the
// first batch comes whole: a partition always makes progress), 0 when
// the quota is used up: then Held says how long until it gives again.
// The first call reserves the Quota's allowance.
func (s *Share) Limit(want int64) int64 {
	if s.q == nil {
		return want
	}
	if s.reserved < 0 {
		s.reserved = s.q.Reserve()
	}
	if s.reserved == Unlimited {
		return want
	}
	left := s.reserved - s.moved
	if left <= 0 {
		if s.hold == 0 {
			s.hold = s.q.Hold()
		}
		return 0
	}
	return max(min(want, left), 1)
}

// Moved counts n bytes read for a throttled partition.
func (s *Share) Moved(n int64) { s.moved += n }

// Held is how long until the Quota gives again when Limit held a
// partition back, else 0.
func (s *Share) Held() time.Duration { return s.hold }

// Settle gives what the request reserved and did not move back to the
// Quota, and counts what it moved. A Share settles once.
func (s *Share) Settle() {
	if s.q == nil || s.reserved < 0 {
		return
	}
	s.q.Settle(s.reserved, s.moved)
	s.reserved, s.moved = -1, 0
}

// Hold counts a throttled replica held back (no allowance) and returns
// how long until the next allowance, at most quotaRecheck and at least a
// millisecond.
func (q *Quota) Hold() time.Duration {
	q.holds.Add(1)
	rate := q.rate.Load()
	if rate == Unlimited {
		return time.Millisecond
	}
	if rate == 0 {
		return quotaRecheck
	}
	q.mu.Lock()
	defer q.mu.Unlock()
	q.refillLocked(q.clock.Now())
	missing := q.quantum(rate) - q.tokens
	d := time.Duration(missing / float64(rate) * float64(time.Second))
	return min(max(d, time.Millisecond), quotaRecheck)
}

// QuotaCounts is what a Quota counted since it was made.
type QuotaCounts struct {
	// Bytes moved by throttled replicas while the rate was limited.
	Bytes uint64
	// Holds: the times a throttled replica got (leader side) or asked
	// for (follower side) nothing because the quota was used up.
	Holds uint64
}

// Counts returns what q counted.
func (q *Quota) Counts() QuotaCounts {
	return QuotaCounts{Bytes: q.bytes.Load(), Holds: q.holds.Load()}
}
