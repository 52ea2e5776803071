package mqtest

import (
	"errors"
	"fmt"
	"iter"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"

	"github.com/mqproject/mq/lib/loopback"
)

// Member is one member of a Cluster as its Lifecycle sees it: what stays
// the same across the member's restarts.
type Member struct {
	// ID is the member's node ID: 1 to n for the n voters, then the
	// non-voters in the order they were added.
	ID int32
	// Voter is whether the member votes in the controller quorum; a
	// non-voter follows the quorum's log from RaftAddr.
	Voter bool
	// RaftAddr is the loopback address of the member's Raft transport,
	// a voter's entry in Voters.
	RaftAddr string
	// KafkaAddr is a loopback address for the member's Kafka listener,
	// for the members that have one.
	KafkaAddr string
	// Dir is the member's data directory: it exists, empty, when the
	// member first starts, and is removed once the test and its cleanup
	// are over, after every member has stopped.
	Dir string
}

// Lifecycle is how a Cluster starts and stops its members, running
// values of type M (a *controller.Controller, a *node.Daemon).
type Lifecycle[M any] struct {
	// Start starts member m, the first time and after every stop. The
	// cluster may call it from goroutines of its own, several at once
	// (StartAll starts the voters together, as a quorum needs): it
	// reports failure by its error, never through the test.
	Start func(m Member) (M, error)
	// Stop stops a running member cleanly, the way an operator does.
	Stop func(M) error
	// Crash stops a running member the way a crash does: to the others
	// it goes silent, its data stays as written. Nil means Stop, its
	// error ignored, for members that have no other way to end.
	Crash func(M)
}

// Cluster runs members of one quorum in the test's process, on loopback
// addresses: voters 1 to n, and the non-voters added after them. It picks
// the members' addresses (lib/loopback) and data directories, starts and
// stops them through its Lifecycle, and crashes those still running when
// the test ends.
//
// Start, StartAll, Stop, Crash and AddNonVoter fail the test, so they must
// be called from the goroutine running it; Get, Running, Each, Member,
// Members and Voters may be called from any goroutine.
type Cluster[M any] struct {
	t      testing.TB
	life   Lifecycle[M]
	root   string          // the members' data directories are below
	picked map[string]bool // addresses picked; the test's goroutine only

	mu      sync.Mutex
	members []*member[M] // members[i].ID == i+1
}

// member is one member and, while it runs, its running value.
type member[M any] struct {
	Member
	running bool
	value   M
}

// NewCluster returns a cluster of voters voters (node IDs 1 to voters)
// that life starts and stops. No member runs until StartAll or Start
// starts it; when the test ends, the members still running are crashed.
func NewCluster[M any](t testing.TB, voters int, life Lifecycle[M]) *Cluster[M] {
	t.Helper()
	c := &Cluster[M]{t: t, life: life, root: t.TempDir(), picked: map[string]bool{}}
	for range voters {
		c.add(true)
	}
	// Registered after t.TempDir: the members stop before their
	// directories are removed.
	t.Cleanup(c.crashAll)
	return c
}

// AddNonVoter adds a member that is not a voter, with the next node ID,
// and returns it. It does not start it.
func (c *Cluster[M]) AddNonVoter() Member {
	c.t.Helper()
	return c.add(false)
}

// add adds a member; only the test's goroutine adds members, so the ID
// it takes stays free while it picks the addresses.
func (c *Cluster[M]) add(voter bool) Member {
	c.t.Helper()
	id := int32(len(c.Members()) + 1)
	m := Member{ID: id, Voter: voter, RaftAddr: c.freeAddr(), KafkaAddr: c.freeAddr(), Dir: filepath.Join(c.root, strconv.Itoa(int(id)))}
	if err := os.Mkdir(m.Dir, 0o755); err != nil {
		c.t.Fatalf("%v", err)
	}
	c.mu.Lock()
	c.members = append(c.members, &member[M]{Member: m})
	c.mu.Unlock()
	return m
}

// freeAddr picks a loopback address no member of c has.
func (c *Cluster[M]) freeAddr() string {
	c.t.Helper()
	for {
		addr, err := loopback.FreeAddr()
		if err != nil {
			c.t.Fatalf("pick a loopback address: %v", err)
		}
		if !c.picked[addr] {
			c.picked[addr] = true
			return addr
		}
	}
}

// Voters lists the voters as Kafka's controller.quorum.voters does:
// "1@127.0.0.1:10001,2@127.0.0.1:10002,…".
func (c *Cluster[M]) Voters() string {
	var vs []string
	for _, m := range c.Members() {
		if m.Voter {
			vs = append(vs, fmt.Sprintf("%d@%s", m.ID, m.RaftAddr))
		}
	}
	return strings.Join(vs, ",")
}

// Members returns every member, running or not, in node ID order.
func (c *Cluster[M]) Members() []Member {
	c.mu.Lock()
	defer c.mu.Unlock()
	out := make([]Member, len(c.members))
	for i, m := range c.members {
		out[i] = m.Member
	}
	return out
}

// Member returns member id; it fails the test when there is none.
func (c *Cluster[M]) Member(id int32) Member {
	c.t.Helper()
	m := c.lookup(id)
	if m == nil {
		c.t.Fatalf("no member %d", id)
	}
	return m.Member
}

// lookup returns member id, or nil.
func (c *Cluster[M]) lookup(id int32) *member[M] {
	c.mu.Lock()
	defer c.mu.Unlock()
	if id < 1 || int(id) > len(c.members) {
		return nil
	}
	return c.members[id-1]
}

// Get returns member id's running value, or M's zero value while the
// member is stopped (or when there is no member id).
func (c *Cluster[M]) Get(id int32) M {
	c.mu.Lock()
	defer c.mu.Unlock()
	if id < 1 || int(id) > len(c.members) {
		var zero M
		return zero
	}
	return c.members[id-1].value
}

// Running yields the IDs and values of the members running when it was
// called, in node ID order.
func (c *Cluster[M]) Running() iter.Seq2[int32, M] {
	var ids []int32
	var values []M
	c.mu.Lock()
	for _, m := range c.members {
		if m.running {
			ids, values = append(ids, m.ID), append(values, m.value)
		}
	}
	c.mu.Unlock()
	return func(yield func(int32, M) bool) {
		for i, id := range ids {
			if !yield(id, values[i]) {
				return
			}
		}
	}
}

// Each returns a condition for WaitFor (or Wait.For) that holds when cond
// holds for every running member, and otherwise reports what cond said
// of the first one it did not hold for.
func (c *Cluster[M]) Each(cond func(id int32, m M) (ok bool, last string)) func() (bool, string) {
	return func() (bool, string) {
		for id, m := range c.Running() {
			if ok, last := cond(id, m); !ok {
				return false, fmt.Sprintf("node %d: %s", id, last)
			}
		}
		return true, ""
	}
}

// StartAll starts every stopped member at once (the voters of a quorum
// wait for each other to start), and returns when all have started. It
// fails the test if one did not; those that did stay running.
func (c *Cluster[M]) StartAll() {
	c.t.Helper()
	var wg sync.WaitGroup
	var mu sync.Mutex
	var errs []error
	for _, m := range c.Members() {
		if c.running(m.ID) {
			continue
		}
		wg.Go(func() {
			if err := c.start(m.ID); err != nil {
				mu.Lock()
				errs = append(errs, err)
				mu.Unlock()
			}
		})
	}
	wg.Wait()
	if err := errors.Join(errs...); err != nil {
		c.t.Fatalf("%v", err)
	}
}

// Start starts member id, stopped, on its addresses and directory.
func (c *Cluster[M]) Start(id int32) {
	c.t.Helper()
	if c.running(id) {
		c.t.Fatalf("start member %d: already running", id)
	}
	if err := c.start(id); err != nil {
		c.t.Fatalf("%v", err)
	}
}

func (c *Cluster[M]) running(id int32) bool {
	m := c.lookup(id)
	c.mu.Lock()
	defer c.mu.Unlock()
	return m != nil && m.running
}

func (c *Cluster[M]) start(id int32) error {
	m := c.lookup(id)
	if m == nil {
		return fmt.Errorf("start member %d: no such member", id)
	}
	v, err := c.life.Start(m.Member)
	if err != nil {
		return fmt.Errorf("start member %d: %w", id, err)
	}
	c.mu.Lock()
	m.running, m.value = true, v
	c.mu.Unlock()
	return nil
}

// Stop stops member id cleanly (Lifecycle.Stop). The test fails if the
// member was not running, and goes on failed if Stop returns an error.
func (c *Cluster[M]) Stop(id int32) {
	c.t.Helper()
	if err := c.life.Stop(c.take(id)); err != nil {
		c.t.Errorf("stop member %d: %v", id, err)
	}
}

// Crash stops member id the way a crash does (Lifecycle.Crash). The test
// fails if the member was not running.
func (c *Cluster[M]) Crash(id int32) {
	c.t.Helper()
	c.crash(c.take(id))
}

func (c *Cluster[M]) crash(v M) {
	if c.life.Crash != nil {
		c.life.Crash(v)
	} else {
		c.life.Stop(v)
	}
}

// take marks member id stopped and returns its running value, which the
// caller stops: Get returns the zero value from now on.
func (c *Cluster[M]) take(id int32) M {
	c.t.Helper()
	m := c.lookup(id)
	c.mu.Lock()
	defer c.mu.Unlock()
	if m == nil || !m.running {
		c.t.Fatalf("stop member %d: not running", id)
	}
	v := m.value
	var zero M
	m.running, m.value = false, zero
	return v
}

// crashAll crashes every running member at once.
func (c *Cluster[M]) crashAll() {
	var wg sync.WaitGroup
	for id := range c.Running() {
		v := c.take(id)
		wg.Go(func() { c.crash(v) })
	}
	wg.Wait()
}
