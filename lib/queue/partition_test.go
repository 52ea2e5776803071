package queue

import (
	"errors"
	"fmt"
	"reflect"
	"strings"
	"testing"
	"time"
)

var t0 = time.Unix(1_700_000_000, 0)

func cfg() Config {
	return Config{LockDuration: 10 * time.Second, DeliveryAttemptLimit: 3, MaxRecordLocks: 8}
}

// show renders the window: one letter per offset (a available, q
// acquired, k acknowledged, x archived) followed by its delivery count.
func show(p *Partition) string {
	var b strings.Builder
	fmt.Fprintf(&b, "%d[", p.Start())
	for o := p.Start(); o < p.End(); o++ {
		st, d := p.Record(o)
		fmt.Fprintf(&b, "%c%d", "aqkx"[st], d)
	}
	fmt.Fprintf(&b, "]%d", p.End())
	return b.String()
}

func TestScenarios(t *testing.T) {
	type step struct {
		op     string // acquire MEMBER N LOGEND | ack MEMBER FIRST LAST TYPE | tick SECONDS | leave MEMBER | skip OFFSET
		want   string // show() after the step
		result string // acquired ranges, or an error's prefix
	}
	tests := []struct {
		name  string
		steps []step
	}{
		{"acquire bounded by max records and log end", []step{
			{"acquire a 3 10", "0[q1q1q1]3", "0-2/1"},
			{"acquire b 10 5", "0[q1q1q1q1q1]5", "3-4/1"},
			{"acquire c 10 5", "0[q1q1q1q1q1]5", ""},
		}},
		{"window bounded by max record locks", []step{
			{"acquire a 100 100", "0[q1q1q1q1q1q1q1q1]8", "0-7/1"},
			{"ack a 0 0 1", "1[q1q1q1q1q1q1q1]8", ""},
			{"acquire a 100 100", "1[q1q1q1q1q1q1q1q1]9", "8-8/1"},
		}},
		{"accept advances the start past a contiguous prefix only", []step{
			{"acquire a 4 4", "0[q1q1q1q1]4", "0-3/1"},
			{"ack a 1 2 1", "0[q1k1k1q1]4", ""},
			{"ack a 0 0 1", "3[q1]4", ""},
		}},
		{"release makes records available, redelivered with a higher count", []step{
			{"acquire a 2 2", "0[q1q1]2", "0-1/1"},
			{"ack a 0 1 2", "0[a1a1]2", ""},
			{"acquire b 5 2", "0[q2q2]2", "0-1/2"},
		}},
		{"release at the attempt limit archives", []step{
			{"acquire a 1 1", "0[q1]1", "0-0/1"},
			{"ack a 0 0 2", "0[a1]1", ""},
			{"acquire a 1 1", "0[q2]1", "0-0/2"},
			{"ack a 0 0 2", "0[a2]1", ""},
			{"acquire a 1 1", "0[q3]1", "0-0/3"},
			{"ack a 0 0 2", "1[]1", "dead 0/3"},
		}},
		{"reject archives at once", []step{
			{"acquire a 2 2", "0[q1q1]2", "0-1/1"},
			{"ack a 1 1 3", "0[q1x1]2", "dead 1/1"},
			{"ack a 0 0 0", "2[]2", ""},
		}},
		{"lock expiry releases; the late ack is refused", []step{
			{"acquire a 2 2", "0[q1q1]2", "0-1/1"},
			{"tick 9", "0[q1q1]2", ""},
			{"tick 1", "0[a1a1]2", ""},
			{"ack a 0 0 1", "0[a1a1]2", "queue: record not acquired"},
			{"acquire b 1 2", "0[q2a1]2", "0-0/2"},
		}},
		{"lock expiry at the limit archives", []step{
			{"acquire a 1 1", "0[q1]1", "0-0/1"},
			{"tick 10", "0[a1]1", ""},
			{"acquire a 1 1", "0[q2]1", "0-0/2"},
			{"tick 10", "0[a2]1", ""},
			{"acquire a 1 1", "0[q3]1", "0-0/3"},
			{"tick 10", "1[]1", "dead 0/3"},
		}},
		{"renew extends the lock", []step{
			{"acquire a 1 1", "0[q1]1", "0-0/1"},
			{"tick 9", "0[q1]1", ""},
			{"ack a 0 0 4", "0[q1]1", ""},
			{"tick 9", "0[q1]1", ""},
			{"ack a 0 0 1", "1[]1", ""},
		}},
		{"another member's records are refused, all or none", []step{
			{"acquire a 1 2", "0[q1]1", "0-0/1"},
			{"acquire b 1 2", "0[q1q1]2", "1-1/1"},
			{"ack a 0 1 1", "0[q1q1]2", "queue: record not acquired"},
			{"ack b 1 1 1", "0[q1k1]2", ""},
		}},
		{"ack outside the window and backwards ranges", []step{
			{"acquire a 1 5", "0[q1]1", "0-0/1"},
			{"ack a 3 3 1", "0[q1]1", "queue: record not acquired"},
			{"ack a 0 -1 1", "0[q1]1", "queue: invalid acknowledgement"},
			{"ack a 0 0 9", "0[q1]1", "queue: invalid acknowledgement"},
		}},
		{"a leaving member's records are released", []step{
			{"acquire a 2 3", "0[q1q1]2", "0-1/1"},
			{"acquire b 1 3", "0[q1q1q1]3", "2-2/1"},
			{"leave a", "0[a1a1q1]3", ""},
			{"acquire b 5 3", "0[q2q2q1]3", "0-1/2"},
		}},
		{"skip moves the start without dead letters", []step{
			{"acquire a 3 3", "0[q1q1q1]3", "0-2/1"},
			{"skip 2", "2[q1]3", ""},
			{"skip 10", "10[]10", ""},
			{"acquire a 3 12", "10[q1q1]12", "10-11/1"},
		}},
		{"acquired runs split by delivery count", []step{
			{"acquire a 1 3", "0[q1]1", "0-0/1"},
			{"ack a 0 0 2", "0[a1]1", ""},
			{"acquire a 3 3", "0[q2q1q1]3", "0-0/2 1-2/1"},
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			p := New(cfg(), 0)
			now := t0
			for i, s := range tt.steps {
				got := apply(t, p, &now, s.op)
				if dead := p.TakeDeadLetters(); len(dead) > 0 {
					var ds []string
					for _, d := range dead {
						ds = append(ds, fmt.Sprintf("dead %d/%d", d.Offset, d.Deliveries))
					}
					got = strings.Join(ds, " ")
				}
				if !strings.HasPrefix(got, s.result) || (s.result == "" && got != "") {
					t.Fatalf("step %d %q: result %q, want %q", i, s.op, got, s.result)
				}
				if w := show(p); w != s.want {
					t.Fatalf("step %d %q: state %s, want %s", i, s.op, w, s.want)
				}
			}
		})
	}
}

func apply(t *testing.T, p *Partition, now *time.Time, op string) string {
	t.Helper()
	f := strings.Fields(op)
	num := func(i int) int64 {
		var n int64
		if _, err := fmt.Sscan(f[i], &n); err != nil {
			t.Fatalf("%q: %v", op, err)
		}
		return n
	}
	switch f[0] {
	case "acquire":
		var rs []string
		for _, a := range p.Acquire(f[1], *now, num(3), int(num(2))) {
			rs = append(rs, fmt.Sprintf("%d-%d/%d", a.First, a.Last, a.Deliveries))
		}
		return strings.Join(rs, " ")
	case "ack":
		if err := p.Acknowledge(f[1], *now, []Ack{{First: num(2), Last: num(3), Type: AckType(num(4))}}); err != nil {
			return err.Error()
		}
	case "tick":
		*now = now.Add(time.Duration(num(1)) * time.Second)
		p.Expire(*now)
	case "leave":
		p.ReleaseMember(f[1])
	case "skip":
		p.SkipTo(num(1))
	default:
		t.Fatalf("unknown op %q", op)
	}
	return ""
}

func TestRefusedAckChangesNothing(t *testing.T) {
	p := New(cfg(), 0)
	p.Acquire("a", t0, 4, 4)
	before := p.Snapshot()
	err := p.Acknowledge("a", t0, []Ack{{0, 1, Accept}, {2, 2, Reject}, {1, 1, Accept}})
	if !errors.Is(err, ErrInvalidRecordState) {
		t.Fatalf("duplicate offset: %v", err)
	}
	if after := p.Snapshot(); !reflect.DeepEqual(before, after) || len(p.TakeDeadLetters()) != 0 {
		t.Fatalf("refused ack changed the state: %+v → %+v", before, after)
	}
}

func TestSnapshotRoundTrip(t *testing.T) {
	p := New(cfg(), 5)
	p.Acquire("a", t0, 20, 6)
	if err := p.Acknowledge("a", t0, []Ack{{6, 7, Accept}, {8, 8, Release}, {9, 9, Reject}}); err != nil {
		t.Fatal(err)
	}
	p.TakeDeadLetters()
	s := p.Snapshot()
	d, err := DecodeSnapshot(s.Encode())
	if err != nil || !reflect.DeepEqual(d, s) {
		t.Fatalf("decode: %+v %v, want %+v", d, err, s)
	}
	q, err := Restore(cfg(), d)
	if err != nil {
		t.Fatal(err)
	}
	// 5 and 10 were acquired: they come back available with their count.
	if got, want := show(q), "5[a1k1k1a1x1a1]11"; got != want {
		t.Fatalf("restored %s, want %s", got, want)
	}
}

func TestRestoreArchivesRecordsOutOfAttempts(t *testing.T) {
	s := Snapshot{Start: 0, End: 2, Runs: []Run{{0, 0, Acquired, 3}, {1, 1, Acquired, 2}}}
	p, err := Restore(cfg(), s)
	if err != nil {
		t.Fatal(err)
	}
	if got := show(p); got != "1[a2]2" {
		t.Fatalf("restored %s", got)
	}
	if d := p.TakeDeadLetters(); len(d) != 1 || d[0].Offset != 0 || d[0].Deliveries != 3 {
		t.Fatalf("dead letters %+v", d)
	}
}

func TestDecodeSnapshotRefusesBadInput(t *testing.T) {
	good := Snapshot{Start: 1, End: 3, Runs: []Run{{1, 2, Acknowledged, 1}}}.Encode()
	bad := map[string][]byte{
		"empty":          nil,
		"version":        append([]byte{9}, good[1:]...),
		"truncated":      good[:len(good)-1],
		"trailing":       append(append([]byte{}, good...), 0),
		"huge window":    Snapshot{Start: 0, End: 1 << 40}.Encode(),
		"runs short":     Snapshot{Start: 0, End: 3, Runs: []Run{{0, 1, Available, 0}}}.Encode(),
		"unknown state":  Snapshot{Start: 0, End: 1, Runs: []Run{{0, 0, State(7), 0}}}.Encode(),
		"backwards ends": Snapshot{Start: 5, End: 2}.Encode(),
	}
	for name, b := range bad {
		if _, err := DecodeSnapshot(b); !errors.Is(err, ErrBadSnapshot) {
			t.Errorf("%s: %v", name, err)
		}
	}
}

func FuzzDecodeSnapshot(f *testing.F) {
	f.Add(Snapshot{Start: 1, End: 3, Runs: []Run{{1, 2, Acknowledged, 1}}}.Encode())
	f.Fuzz(func(t *testing.T, b []byte) {
		s, err := DecodeSnapshot(b)
		if err != nil {
			return
		}
		if _, err := Restore(cfg(), s); err != nil {
			t.Fatalf("decoded snapshot does not restore: %v", err)
		}
	})
}
