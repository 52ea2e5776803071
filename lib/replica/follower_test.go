package replica

import (
	"bytes"
	"context"
	"errors"
	"os"
	"path/filepath"
	"sync"
	"testing"

	"github.com/mqproject/mq/lib/log"
	"github.com/mqproject/mq/lib/record"
)

// leaderBatches returns the bytes a leader holding the given batches (of
// that many records each) from offset 0 would send, in epoch.
func leaderBatches(t testing.TB, epoch int32, sizes ...int) []byte {
	t.Helper()
	var out []byte
	var next int64
	for _, n := range sizes {
		b := testBatch(t, n)
		record.SetBaseOffset(b, next)
		record.SetPartitionLeaderEpoch(b, epoch)
		next += int64(n)
		out = append(out, b...)
	}
	return out
}

func newFollower(t *testing.T) *Partition {
	t.Helper()
	p, _ := newPartition(t, Config{})
	if err := p.Become(PartitionState{Leader: 2, LeaderEpoch: 3, Replicas: []int32{1, 2}, ISR: []int32{1, 2}}); err != nil {
		t.Fatal(err)
	}
	if err := p.TruncateFromLeader(3, -1, -1); err != nil {
		t.Fatal(err)
	}
	return p
}

func TestAppendFromLeader(t *testing.T) {
	three := leaderBatches(t, 3, 2, 3, 1) // offsets 0..1, 2..4, 5
	second := len(leaderBatches(t, 3, 2))
	third := len(leaderBatches(t, 3, 2, 3))
	corrupt := bytes.Clone(three)
	corrupt[second+record.HeaderSize] ^= 0xff // a record byte of the second batch
	tests := []struct {
		name     string
		data     []byte
		leaderHW int64
		wantLEO  int64
		wantHW   int64
		wantN    int
		wantErr  error
	}{
		{"whole batches", three, 6, 6, 6, len(three), nil},
		{"HW is min(leader HW, log end)", three[:third], 6, 5, 5, third, nil},
		{"leader HW below log end", three, 2, 6, 2, len(three), nil},
		{"trailing partial batch is left", three[:third+10], 6, 5, 5, third, nil},
		{"trailing partial header is left", three[:third+record.HeaderSize-1], 6, 5, 5, third, nil},
		{"bad CRC stops before the batch", corrupt, 6, 2, 2, second, record.ErrBadCRC},
		{"empty fetch moves the HW only", nil, 0, 0, 0, 0, nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			p := newFollower(t)
			n, err := p.AppendFromLeader(3, bytes.Clone(tt.data), tt.leaderHW, 0)
			if !errors.Is(err, tt.wantErr) {
				t.Fatalf("AppendFromLeader: %v, want %v", err, tt.wantErr)
			}
			s := p.State()
			if n != tt.wantN || s.LogEndOffset != tt.wantLEO || s.HighWatermark != tt.wantHW {
				t.Fatalf("appended %d bytes, leo %d, hw %d; want %d, %d, %d", n, s.LogEndOffset, s.HighWatermark, tt.wantN, tt.wantLEO, tt.wantHW)
			}
			if got := p.Log().EndOffset(); got != tt.wantLEO {
				t.Fatalf("log end %d, want %d", got, tt.wantLEO)
			}
		})
	}
}

func TestAppendFromLeaderSkipsWhatItHas(t *testing.T) {
	p := newFollower(t)
	data := leaderBatches(t, 3, 2, 3)
	if _, err := p.AppendFromLeader(3, bytes.Clone(data), 0, 0); err != nil {
		t.Fatal(err)
	}
	// The same response again (a retried fetch): nothing is appended twice.
	n, err := p.AppendFromLeader(3, bytes.Clone(data), 5, 0)
	if err != nil || n != 0 || p.Log().EndOffset() != 5 || p.HighWatermark() != 5 {
		t.Fatalf("again: %d bytes, %v, leo %d hw %d; want 0 bytes, leo 5 hw 5", n, err, p.Log().EndOffset(), p.HighWatermark())
	}
}

func TestAppendFromLeaderRefusals(t *testing.T) {
	data := leaderBatches(t, 3, 1)
	t.Run("before truncation", func(t *testing.T) {
		p, _ := newPartition(t, Config{})
		mustBecome(t, p, 3, 2, []int32{1, 2}, []int32{1, 2})
		if _, err := p.AppendFromLeader(3, bytes.Clone(data), 1, 0); !errors.Is(err, ErrTruncationNeeded) {
			t.Fatalf("AppendFromLeader: %v, want ErrTruncationNeeded", err)
		}
	})
	for _, tt := range []struct {
		name  string
		epoch int32
		want  error
	}{
		{"older epoch", 2, ErrFencedLeaderEpoch},
		{"newer epoch", 4, ErrUnknownLeaderEpoch},
	} {
		t.Run(tt.name, func(t *testing.T) {
			p := newFollower(t)
			if _, err := p.AppendFromLeader(tt.epoch, bytes.Clone(data), 1, 0); !errors.Is(err, tt.want) {
				t.Fatalf("AppendFromLeader: %v, want %v", err, tt.want)
			}
			if err := p.TruncateFromLeader(tt.epoch, 0, 0); !errors.Is(err, tt.want) {
				t.Fatalf("TruncateFromLeader: %v, want %v", err, tt.want)
			}
			if err := p.ResetFetchOffset(tt.epoch, 0, 0); !errors.Is(err, tt.want) {
				t.Fatalf("ResetFetchOffset: %v, want %v", err, tt.want)
			}
			if p.Log().EndOffset() != 0 {
				t.Fatal("a refused call appended")
			}
		})
	}
	t.Run("leader", func(t *testing.T) {
		p, _ := newPartition(t, Config{})
		mustBecome(t, p, 3, self, []int32{1, 2}, []int32{1, 2})
		if _, err := p.AppendFromLeader(3, bytes.Clone(data), 1, 0); !errors.Is(err, ErrNotFollower) {
			t.Fatalf("AppendFromLeader on the leader: %v, want ErrNotFollower", err)
		}
		if _, ok := p.FetchPosition(); ok {
			t.Fatal("the leader has a fetch position")
		}
	})
	t.Run("no leader", func(t *testing.T) {
		p, _ := newPartition(t, Config{})
		mustBecome(t, p, 3, -1, []int32{1, 2}, []int32{1, 2})
		if _, err := p.AppendFromLeader(3, bytes.Clone(data), 1, 0); !errors.Is(err, ErrNotFollower) {
			t.Fatalf("AppendFromLeader without a leader: %v, want ErrNotFollower", err)
		}
	})
	t.Run("closed", func(t *testing.T) {
		p := newFollower(t)
		p.Close()
		if _, err := p.AppendFromLeader(3, bytes.Clone(data), 1, 0); !errors.Is(err, ErrClosed) {
			t.Fatalf("AppendFromLeader after Close: %v, want ErrClosed", err)
		}
	})
}

// TestHotPathsDoNotAllocate: a leader's acks=all append and read, and a
// follower's append from its leader, allocate nothing once warm.
func TestHotPathsDoNotAllocate(t *testing.T) {
	leader, _ := newPartition(t, Config{})
	mustBecome(t, leader, 0, self, []int32{self}, []int32{self})
	b := testBatch(t, 10)
	ctx := context.Background()
	if n := testing.AllocsPerRun(200, func() {
		res, err := leader.Append(b, -1)
		if err != nil {
			t.Fatal(err)
		}
		if err := leader.WaitHighWatermark(ctx, res.LastOffset, res.LeaderEpoch); err != nil {
			t.Fatal(err)
		}
		r, _, err := leader.Read(res.BaseOffset, 1<<20, -1)
		if err != nil {
			t.Fatal(err)
		}
		r.Release()
	}); n > 0 {
		t.Errorf("leader append, wait and read: %v allocations, want 0", n)
	}

	f := newFollower(t)
	fb := leaderBatches(t, 3, 10)
	var next int64
	if n := testing.AllocsPerRun(200, func() {
		record.SetBaseOffset(fb, next)
		if _, err := f.AppendFromLeader(3, fb, next, 0); err != nil {
			t.Fatal(err)
		}
		next += 10
		if _, ok := f.FetchPosition(); !ok {
			t.Fatal("no fetch position")
		}
	}); n > 0 {
		t.Errorf("follower append from leader: %v allocations, want 0", n)
	}
}

// TestFollowerRacesLeadershipChanges runs a follower's fetcher against
// Becomes that move the leader epoch on (run with -race): no batch is
// appended under an epoch the replica left, every call ends.
func TestFollowerRacesLeadershipChanges(t *testing.T) {
	p := newFollower(t)
	var wg sync.WaitGroup
	stop := make(chan struct{})
	progress := make(chan struct{}, 1)
	wg.Go(func() {
		for {
			select {
			case <-stop:
				return
			case progress <- struct{}{}:
			default:
			}
			pos, ok := p.FetchPosition()
			if !ok {
				continue
			}
			if pos.NeedsTruncation {
				if err := p.TruncateFromLeader(pos.LeaderEpoch, pos.FetchOffset, pos.LastFetchedEpoch); err != nil &&
					!errors.Is(err, ErrFencedLeaderEpoch) {
					t.Error(err)
					return
				}
				continue
			}
			b := testBatch(t, 2)
			record.SetBaseOffset(b, pos.FetchOffset)
			record.SetPartitionLeaderEpoch(b, pos.LeaderEpoch)
			if _, err := p.AppendFromLeader(pos.LeaderEpoch, b, pos.FetchOffset, 0); err != nil &&
				!errors.Is(err, ErrFencedLeaderEpoch) && !errors.Is(err, ErrTruncationNeeded) {
				t.Error(err)
				return
			}
		}
	})
	for e := int32(4); e < 60; e++ {
		if err := p.Become(PartitionState{Leader: 2, LeaderEpoch: e, Replicas: []int32{1, 2}, ISR: []int32{1, 2}}); err != nil {
			t.Fatal(err)
		}
		// Three iteration starts: at least one truncation and one append
		// in this epoch, unless the next Become races them.
		for range 3 {
			<-progress
		}
	}
	close(stop)
	wg.Wait()
	if p.Log().EndOffset() == 0 {
		t.Fatal("the fetcher appended nothing")
	}
	// The history only grows.
	prev := int32(-1)
	for _, e := range p.Log().LeaderEpochs() {
		if e.Epoch <= prev {
			t.Fatalf("leader-epoch history %v not increasing", p.Log().LeaderEpochs())
		}
		prev = e.Epoch
	}
}

// damagedLog is a log of offsets 0-5 in three batches (0-1, 2-4, 5) of
// leader epoch 3 whose second batch is damaged, as the scrubber found.
func damagedLog(t *testing.T) *log.Log {
	t.Helper()
	dir := t.TempDir()
	l, err := log.Open(dir, log.DefaultConfig(), log.Options{})
	if err != nil {
		t.Fatal(err)
	}
	data := leaderBatches(t, 3, 2, 3, 1) // offsets 0..1, 2..4, 5
	for b := data; len(b) > 0; {
		batch, rest, _, err := record.Next(b)
		if err != nil {
			t.Fatal(err)
		}
		if err := l.AppendAsFollower(batch); err != nil {
			t.Fatal(err)
		}
		b = rest
	}
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}
	seg := filepath.Join(dir, "00000000000000000000.log")
	file, err := os.ReadFile(seg)
	if err != nil {
		t.Fatal(err)
	}
	file[len(leaderBatches(t, 3, 2))+record.HeaderSize] ^= 0xff // a record byte of the second batch
	if err := os.WriteFile(seg, file, 0o644); err != nil {
		t.Fatal(err)
	}
	l, err = log.Open(dir, log.DefaultConfig(), log.Options{})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := l.Scrub(context.Background(), nil); err != nil || len(l.Damaged()) != 1 {
		t.Fatalf("scrub: %v, damaged %v; want one damaged range", err, l.Damaged())
	}
	return l
}

// TestRefetchDamagedCutsAtTheDamage: a follower whose log has a damaged
// range finds it (Damage) and, with its leader's leave (GrantRefetch),
// cuts its log there, so that it fetches the range again; only as a
// follower in the epoch it asked in.
func TestRefetchDamagedCutsAtTheDamage(t *testing.T) {
	l := damagedLog(t)
	p := New(Config{Topic: "t", NodeID: self}, l)
	t.Cleanup(func() { p.Close() })
	d, ok := p.Damage()
	if !ok || d.From != 2 {
		t.Fatalf("Damage: %v %v, want a range from offset 2", d, ok)
	}
	if _, err := p.RefetchDamaged(3, d.From); !errors.Is(err, ErrNotFollower) {
		t.Fatalf("before it follows: %v, want ErrNotFollower", err)
	}
	if err := p.Become(PartitionState{Leader: 2, LeaderEpoch: 3, Replicas: []int32{1, 2}, ISR: []int32{2}}); err != nil {
		t.Fatal(err)
	}
	if _, err := p.RefetchDamaged(2, d.From); !errors.Is(err, ErrFencedLeaderEpoch) || l.EndOffset() != 6 {
		t.Fatalf("asked in an older epoch: %v, log end %d; want ErrFencedLeaderEpoch and nothing cut", err, l.EndOffset())
	}
	if cut, err := p.RefetchDamaged(3, d.From); err != nil || !cut || l.EndOffset() != 2 || len(l.Damaged()) != 0 {
		t.Fatalf("cut: %v %v, log end %d, damaged %v; want the log cut to 2 and no damage left", cut, err, l.EndOffset(), l.Damaged())
	}
	if _, ok := p.Damage(); ok {
		t.Fatal("Damage after the cut: want none")
	}
	if cut, err := p.RefetchDamaged(3, d.From); err != nil || cut {
		t.Fatalf("again: %v, cut %v; want nothing to do", err, cut)
	}
}
