package queue

import (
	"flag"
	"math/rand/v2"
	"testing"
	"time"
)

var seed = flag.Uint64("seed", 0, "seed of TestRandomAgainstModel (0: a new one)")

// modelRecord is the reference model's view of one offset: the plain
// reading of KIP-932, kept apart from Partition's windowed layout.
type modelRecord struct {
	state      State
	deliveries int16
	member     string
	deadline   time.Time
}

type model struct {
	cfg     Config
	recs    map[int64]*modelRecord // every offset ever acquired
	dead    map[int64]int          // times each offset was dead-lettered
	logEnd  int64
	members []string
}

func (m *model) get(o int64) *modelRecord {
	r := m.recs[o]
	if r == nil {
		r = &modelRecord{}
		m.recs[o] = r
	}
	return r
}

// start is the first offset not done with.
func (m *model) start() int64 {
	o := int64(0)
	for {
		r := m.recs[o]
		if r == nil || !r.state.final() {
			return o
		}
		o++
	}
}

func (m *model) end() int64 {
	o := m.start()
	for m.recs[o] != nil {
		o++
	}
	return o
}

func (m *model) release(o int64, r *modelRecord) {
	r.member = ""
	if int(r.deliveries) >= m.cfg.DeliveryAttemptLimit {
		r.state = Archived
		m.dead[o]++
		return
	}
	r.state = Available
}

func (m *model) expire(now time.Time) {
	for o, r := range m.recs {
		if r.state == Acquired && !now.Before(r.deadline) {
			m.release(o, r)
		}
	}
}

func TestRandomAgainstModel(t *testing.T) {
	s := *seed
	if s == 0 {
		s = rand.Uint64()
	}
	t.Logf("seed %d (replay with -seed %d)", s, s)
	rng := rand.New(rand.NewPCG(s, 0))
	for round := 0; round < 200; round++ {
		c := Config{
			LockDuration:         time.Duration(1+rng.IntN(5)) * time.Second,
			DeliveryAttemptLimit: 1 + rng.IntN(4),
			MaxRecordLocks:       1 + rng.IntN(12),
		}
		runModel(t, rng, c)
		if t.Failed() {
			t.Fatalf("round %d failed (seed %d)", round, s)
		}
	}
}

func runModel(t *testing.T, rng *rand.Rand, c Config) {
	p := New(c, 0)
	m := &model{cfg: c, recs: map[int64]*modelRecord{}, dead: map[int64]int{}, members: []string{"a", "b", "c"}}
	now := t0
	for step := 0; step < 300; step++ {
		member := m.members[rng.IntN(len(m.members))]
		switch k := rng.IntN(10); {
		case k < 3: // acquire
			m.logEnd += int64(rng.IntN(4))
			max := 1 + rng.IntN(5)
			got := p.Acquire(member, now, m.logEnd, max)
			m.expire(now)
			// Model: available in-flight first, then new, window-bounded.
			var want []int64
			start := m.start()
			for o := start; o < m.end() && o < m.logEnd && len(want) < max; o++ {
				if m.recs[o].state == Available {
					want = append(want, o)
				}
			}
			for o := m.end(); o < m.logEnd && o-start < int64(c.MaxRecordLocks) && len(want) < max; o++ {
				want = append(want, o)
			}
			var gotOffsets []int64
			for _, l := range got {
				for o := l.First; o <= l.Last; o++ {
					gotOffsets = append(gotOffsets, o)
					r := m.get(o)
					if r.deliveries+1 != l.Deliveries {
						t.Errorf("step %d: offset %d delivered with count %d, model %d", step, o, l.Deliveries, r.deliveries+1)
					}
				}
			}
			if len(gotOffsets) != len(want) {
				t.Fatalf("step %d: acquired %v, model %v", step, gotOffsets, want)
			}
			for i, o := range want {
				if gotOffsets[i] != o {
					t.Fatalf("step %d: acquired %v, model %v", step, gotOffsets, want)
				}
				r := m.get(o)
				r.state, r.member, r.deadline = Acquired, member, now.Add(c.LockDuration)
				r.deliveries++
			}
		case k < 7: // acknowledge one range, valid or not
			first := int64(rng.IntN(int(m.logEnd) + 2))
			last := first + int64(rng.IntN(3))
			typ := AckType(rng.IntN(5))
			err := p.Acknowledge(member, now, []Ack{{first, last, typ}})
			ok := true
			for o := first; o <= last; o++ {
				r := m.recs[o]
				if r == nil || r.state != Acquired || r.member != member || !now.Before(r.deadline) {
					ok = false
				}
			}
			if ok != (err == nil) {
				t.Fatalf("step %d: ack %s %d-%d type %d: %v, model accepts %v", step, member, first, last, typ, err, ok)
			}
			if ok {
				for o := first; o <= last; o++ {
					r := m.recs[o]
					switch typ {
					case Accept:
						r.state, r.member = Acknowledged, ""
					case Gap:
						r.state, r.member = Archived, ""
					case Reject:
						r.state, r.member = Archived, ""
						m.dead[o]++
					case Release:
						m.release(o, r)
					case Renew:
						r.deadline = now.Add(c.LockDuration)
					}
				}
			}
			m.expire(now)
		case k < 8:
			now = now.Add(time.Duration(rng.IntN(3000)) * time.Millisecond)
			p.Expire(now)
			m.expire(now)
		case k < 9:
			p.ReleaseMember(member)
			for o, r := range m.recs {
				if r.state == Acquired && r.member == member {
					m.release(o, r)
				}
			}
		default: // restart: through the encoded snapshot
			s, err := DecodeSnapshot(p.Snapshot().Encode())
			if err != nil {
				t.Fatalf("step %d: %v", step, err)
			}
			p.TakeDeadLetters()
			// drained below before restore; model the restore
			if p, err = Restore(c, s); err != nil {
				t.Fatalf("step %d: %v", step, err)
			}
			for o, r := range m.recs {
				if r.state == Acquired {
					r.state, r.member = Available, ""
					if int(r.deliveries) >= c.DeliveryAttemptLimit {
						r.state = Archived
						m.dead[o]++
					}
				}
			}
		}
		for _, d := range p.TakeDeadLetters() {
			m.dead[d.Offset]--
		}
		check(t, step, p, m)
	}
}

func check(t *testing.T, step int, p *Partition, m *model) {
	t.Helper()
	if p.Start() != m.start() || p.End() != m.end() {
		t.Fatalf("step %d: window %d-%d, model %d-%d", step, p.Start(), p.End(), m.start(), m.end())
	}
	if p.End()-p.Start() > int64(m.cfg.MaxRecordLocks) {
		t.Fatalf("step %d: window %d-%d over %d locks", step, p.Start(), p.End(), m.cfg.MaxRecordLocks)
	}
	for o := p.Start(); o < p.End(); o++ {
		st, d := p.Record(o)
		r := m.recs[o]
		if st != r.state || d != r.deliveries {
			t.Fatalf("step %d: offset %d is %s/%d, model %s/%d", step, o, st, d, r.state, r.deliveries)
		}
		if int(d) > m.cfg.DeliveryAttemptLimit {
			t.Fatalf("step %d: offset %d delivered %d times, limit %d", step, o, d, m.cfg.DeliveryAttemptLimit)
		}
	}
	for o, n := range m.dead {
		if n != 0 {
			t.Fatalf("step %d: offset %d: dead letters off by %d", step, o, n)
		}
	}
}
