package mqtest

import (
	"errors"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"
)

// fakeMember is a member that only records how it started and ended.
type fakeMember struct {
	m     Member
	ended string // "", "stopped" or "crashed"
}

// fakeLife starts fakeMembers, writing a file in each one's directory,
// and keeps every one it started, in the order they started (StartAll
// starts members at once: in any order).
type fakeLife struct {
	mu      sync.Mutex
	started []*fakeMember
}

// byID returns the members started with id, in the order they started.
func (l *fakeLife) byID(id int32) []*fakeMember {
	l.mu.Lock()
	defer l.mu.Unlock()
	var out []*fakeMember
	for _, fm := range l.started {
		if fm.m.ID == id {
			out = append(out, fm)
		}
	}
	return out
}

func (l *fakeLife) lifecycle() Lifecycle[*fakeMember] {
	return Lifecycle[*fakeMember]{
		Start: func(m Member) (*fakeMember, error) {
			f, err := os.OpenFile(filepath.Join(m.Dir, "starts"), os.O_APPEND|os.O_CREATE|os.O_WRONLY, 0o644)
			if err != nil {
				return nil, err
			}
			f.WriteString("x")
			f.Close()
			fm := &fakeMember{m: m}
			l.mu.Lock()
			l.started = append(l.started, fm)
			l.mu.Unlock()
			return fm, nil
		},
		Stop:  func(fm *fakeMember) error { fm.ended = "stopped"; return nil },
		Crash: func(fm *fakeMember) { fm.ended = "crashed" },
	}
}

func TestClusterPicksDistinctAddressesAndDirectories(t *testing.T) {
	var l fakeLife
	c := NewCluster(t, 3, l.lifecycle())
	nv := c.AddNonVoter()
	if nv.ID != 4 || nv.Voter {
		t.Fatalf("non-voter %+v, want ID 4, not a voter", nv)
	}
	seen := map[string]bool{}
	for i, m := range c.Members() {
		if m.ID != int32(i+1) || m.Voter != (m.ID <= 3) {
			t.Fatalf("member %d: %+v", i, m)
		}
		for _, addr := range []string{m.RaftAddr, m.KafkaAddr} {
			if host, _, err := net.SplitHostPort(addr); err != nil || host != "127.0.0.1" || seen[addr] {
				t.Fatalf("member %d: address %q not a new loopback address", m.ID, addr)
			}
			seen[addr] = true
		}
		if fi, err := os.Stat(m.Dir); err != nil || !fi.IsDir() || seen[m.Dir] {
			t.Fatalf("member %d: directory %q: %v", m.ID, m.Dir, err)
		}
		seen[m.Dir] = true
	}
	want := fmt.Sprintf("1@%s,2@%s,3@%s", c.Member(1).RaftAddr, c.Member(2).RaftAddr, c.Member(3).RaftAddr)
	if got := c.Voters(); got != want {
		t.Fatalf("Voters() = %q, want %q", got, want)
	}
}

func TestClusterStartsStopsCrashesAndRestartsMembers(t *testing.T) {
	var l fakeLife
	c := NewCluster(t, 3, l.lifecycle())
	if got := c.Get(1); got != nil {
		t.Fatalf("member 1 running before any start: %+v", got)
	}
	c.StartAll()
	for id := int32(1); id <= 3; id++ {
		if fm := c.Get(id); fm == nil || fm.m.ID != id {
			t.Fatalf("member %d after StartAll: %+v", id, fm)
		}
	}
	stopped, crashed := c.Get(2), c.Get(3)
	c.Stop(2)
	c.Crash(3)
	if stopped.ended != "stopped" || crashed.ended != "crashed" {
		t.Fatalf("member 2 %s, member 3 %s; want stopped and crashed", stopped.ended, crashed.ended)
	}
	if c.Get(2) != nil || c.Get(3) != nil {
		t.Fatal("a stopped member is still returned")
	}
	var running []int32
	for id := range c.Running() {
		running = append(running, id)
	}
	if !slices.Equal(running, []int32{1}) {
		t.Fatalf("running %v, want [1]", running)
	}

	c.Start(3)
	restarted := c.Get(3)
	if restarted == nil || restarted == crashed || restarted.m != crashed.m {
		t.Fatalf("member 3 restarted as %+v; want a new value with the same Member %+v", restarted, crashed.m)
	}
	if b, err := os.ReadFile(filepath.Join(c.Member(3).Dir, "starts")); err != nil || string(b) != "xx" {
		t.Fatalf("member 3's directory after a restart holds %q (%v), want both starts' marks", b, err)
	}
	c.StartAll() // starts member 2 only
	if len(l.started) != 5 {
		t.Fatalf("%d starts, want 5", len(l.started))
	}
}

func TestClusterStartAllStartsTheMembersTogether(t *testing.T) {
	var all sync.WaitGroup
	all.Add(3)
	life := Lifecycle[int32]{
		Start: func(m Member) (int32, error) {
			all.Done()
			done := make(chan struct{})
			go func() { all.Wait(); close(done) }()
			select {
			case <-done:
				return m.ID, nil
			case <-time.After(10 * time.Second):
				return 0, errors.New("the other members did not start meanwhile")
			}
		},
		Stop: func(int32) error { return nil },
	}
	NewCluster(t, 3, life).StartAll()
}

func TestClusterCrashesWithStopWhenTheLifecycleHasNoCrash(t *testing.T) {
	var stops []int32
	life := Lifecycle[int32]{
		Start: func(m Member) (int32, error) { return m.ID, nil },
		Stop:  func(id int32) error { stops = append(stops, id); return errors.New("ignored") },
	}
	c := NewCluster(t, 2, life)
	c.StartAll()
	c.Crash(2)
	if !slices.Equal(stops, []int32{2}) {
		t.Fatalf("stopped %v, want [2]", stops)
	}
}

func TestClusterCrashesTheRunningMembersWhenTheTestEnds(t *testing.T) {
	var l fakeLife
	var dirs []string
	t.Run("cluster", func(t *testing.T) {
		c := NewCluster(t, 2, l.lifecycle())
		c.StartAll()
		c.Stop(1)
		for _, m := range c.Members() {
			dirs = append(dirs, m.Dir)
		}
	})
	one, two := l.byID(1), l.byID(2)
	if len(one) != 1 || len(two) != 1 {
		t.Fatalf("members 1 and 2 started %d and %d times, want once each", len(one), len(two))
	}
	if one[0].ended != "stopped" || two[0].ended != "crashed" {
		t.Fatalf("members ended %q and %q, want stopped (by the test) and crashed (at its end)", one[0].ended, two[0].ended)
	}
	for _, dir := range dirs {
		if _, err := os.Stat(dir); !errors.Is(err, os.ErrNotExist) {
			t.Errorf("directory %s left after the test: %v", dir, err)
		}
	}
}

func TestClusterEachReportsTheFirstMemberNotThere(t *testing.T) {
	var l fakeLife
	c := NewCluster(t, 3, l.lifecycle())
	c.StartAll()
	c.Stop(1)
	var asked []int32
	ok, last := c.Each(func(id int32, fm *fakeMember) (bool, string) {
		asked = append(asked, id)
		return id != 3, fmt.Sprintf("member %d's value", fm.m.ID)
	})()
	if ok || last != "node 3: member 3's value" || !slices.Equal(asked, []int32{2, 3}) {
		t.Fatalf("Each: %v, %q after asking %v; want false, node 3's report, after asking the running 2 and 3", ok, last, asked)
	}
	if ok, _ := c.Each(func(id int32, _ *fakeMember) (bool, string) { return id != 1, "" })(); !ok {
		t.Fatal("Each asked a stopped member")
	}
}

func TestClusterReportsStartFailures(t *testing.T) {
	life := Lifecycle[int32]{
		Start: func(m Member) (int32, error) {
			if m.ID == 2 {
				return 0, errors.New("no room")
			}
			return m.ID, nil
		},
		Stop: func(int32) error { return nil },
	}
	r := &fatalRecorder{TB: t}
	done := make(chan struct{})
	var c *Cluster[int32]
	go func() {
		defer close(done)
		c = NewCluster(r, 3, life)
		c.StartAll()
	}()
	<-done
	if !strings.Contains(r.failure, "start member 2: no room") {
		t.Fatalf("failure %q, want member 2's start error", r.failure)
	}
	if c.Get(1) != 1 || c.Get(3) != 3 {
		t.Fatal("the members that started are not running")
	}
}
