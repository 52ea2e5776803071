package group

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"math/rand/v2"
	"strings"
	"testing"
	"time"

	"github.com/mqproject/mq/lib/clock"
)

var seedFlag = flag.Uint64("seed", 0, "seed of the randomized tests (0: from the time)")

// TestConcurrentCommitsEndingInAnyOrderMatchReplay commits from many
// goroutines to a few keys while the store ends their waits in a random
// order, some durable and some lost. Whatever the order, what the
// coordinator shows is what a replay of the store shows: for each key the
// latest record that became durable.
func TestConcurrentCommitsEndingInAnyOrderMatchReplay(t *testing.T) {
	seed := *seedFlag
	if seed == 0 {
		seed = uint64(time.Now().UnixNano())
	}
	t.Logf("seed %d (replay with -seed)", seed)
	rng := rand.New(rand.NewPCG(seed, 0))

	store := &MemStore{}
	newCoordinator := func() *Coordinator {
		c := New(Config{Partitions: 2, Store: store, Clock: clock.NewManual(time.Unix(0, 0))})
		for p := range int32(2) {
			if err := c.Load(p); err != nil {
				t.Fatal(err)
			}
		}
		return c
	}
	c := newCoordinator()
	defer c.Close()
	store.Hold(true)

	groups := []string{"a", "b", "c"}
	tps := []TopicPartition{{"t", 0}, {"t", 1}}
	const committers, commitsEach = 8, 25
	exits := make(chan struct{}, committers)
	for i := range committers {
		go func() {
			defer func() { exits <- struct{}{} }()
			for j := range commitsEach {
				g := groups[(i+j)%len(groups)]
				tp := tps[j%len(tps)]
				_, err := c.CommitOffsets(context.Background(), CommitRequest{Group: g, Generation: -1,
					Offsets: []CommitOffset{{TopicPartition: tp, Offset: Offset{Offset: int64(i*1000 + j)}}}})
				if err != nil && !errors.Is(err, errLostLeadership) {
					t.Errorf("commit: %v", err)
				}
			}
		}()
	}

	// Once every committer waits (more committers than keys: some wait on
	// the same key), end a random few of the waits in a random order.
	deadline := time.After(time.Minute)
	for running := committers; running > 0; {
		changed := store.Changed()
		if held := store.Held(); len(held) == running {
			rng.Shuffle(len(held), func(i, j int) { held[i], held[j] = held[j], held[i] })
			for _, h := range held[:1+rng.IntN(len(held))] {
				if rng.IntN(4) == 0 {
					h.Lose(errLostLeadership)
				} else {
					h.Release(nil)
				}
			}
			continue
		}
		select {
		case <-changed:
		case <-exits:
			running--
		case <-deadline:
			t.Fatalf("commits did not finish; %d held, %d committers running", len(store.Held()), running)
		}
	}
	store.Hold(false)
	replayed := newCoordinator()
	defer replayed.Close()
	for _, g := range groups {
		got, err := c.FetchOffsets(g, tps)
		if err != nil {
			t.Fatal(err)
		}
		want, err := replayed.FetchOffsets(g, tps)
		if err != nil {
			t.Fatal(err)
		}
		if fmt.Sprint(offsetsOf(got)) != fmt.Sprint(offsetsOf(want)) {
			t.Errorf("group %s: coordinator shows %v, replay %v", g, offsetsOf(got), offsetsOf(want))
		}
	}
}

func offsetsOf(fs []FetchedOffset) []int64 {
	var out []int64
	for _, f := range fs {
		out = append(out, f.Offset.Offset)
	}
	return out
}

// TestReloadFromACompactedStoreMatches: groups commit, delete offsets and
// are deleted at random; a coordinator loaded from the store after the
// cleaner's work on it (latest record per key, tombstones kept or, once
// delete.retention.ms passed, dropped) shows exactly what the coordinator
// that wrote the records shows: the same groups, the same offsets.
func TestReloadFromACompactedStoreMatches(t *testing.T) {
	seed := *seedFlag
	if seed == 0 {
		seed = uint64(time.Now().UnixNano())
	}
	t.Logf("seed %d (replay with -seed)", seed)
	rng := rand.New(rand.NewPCG(seed, 1))
	ctx := context.Background()
	const partitions = 2
	store := &MemStore{}
	load := func() *Coordinator {
		c := New(Config{Partitions: partitions, Store: store, Clock: clock.NewManual(time.Unix(0, 0))})
		for p := range int32(partitions) {
			if err := c.Load(p); err != nil {
				t.Fatal(err)
			}
		}
		t.Cleanup(c.Close)
		return c
	}
	groups := []string{"a", "b", "c", "d", "e"}
	tps := []TopicPartition{{"t", 0}, {"t", 1}, {"u", 0}}
	// state is what a coordinator shows: each group's listing and offsets.
	state := func(c *Coordinator) string {
		var b strings.Builder
		for _, l := range c.ListGroups(nil) {
			fmt.Fprintf(&b, "%s %s %s:", l.Group, l.ProtocolType, l.State)
			offs, err := c.FetchOffsets(l.Group, nil)
			if err != nil {
				t.Fatal(err)
			}
			for _, o := range offs {
				fmt.Fprintf(&b, " %s-%d@%d/%d%q", o.Topic, o.Partition, o.Offset.Offset, o.LeaderEpoch, o.Metadata)
			}
			b.WriteByte('\n')
		}
		return b.String()
	}

	c := load()
	for range 300 {
		g := groups[rng.IntN(len(groups))]
		switch n := rng.IntN(10); {
		case n < 7:
			var offs []CommitOffset
			for _, tp := range tps {
				if rng.IntN(2) == 0 {
					offs = append(offs, CommitOffset{TopicPartition: tp, Offset: Offset{Offset: rng.Int64N(1000), LeaderEpoch: rng.Int32N(3), Metadata: fmt.Sprint(rng.IntN(5))}})
				}
			}
			if _, err := c.CommitOffsets(ctx, CommitRequest{Group: g, Generation: -1, Offsets: offs}); err != nil {
				t.Fatalf("commit: %v", err)
			}
		case n < 9:
			tp := tps[rng.IntN(len(tps))]
			if _, err := c.DeleteOffsets(ctx, g, []TopicPartition{tp}); err != nil && !errors.Is(err, ErrGroupNotFound) {
				t.Fatalf("delete offsets: %v", err)
			}
		default:
			if err := c.DeleteGroup(ctx, g); err != nil && !errors.Is(err, ErrGroupNotFound) && !errors.Is(err, ErrNonEmptyGroup) {
				t.Fatalf("delete group: %v", err)
			}
		}
	}
	want := state(c)
	if want == "" {
		t.Fatal("no group left to compare")
	}
	before := store.Records(0) + store.Records(1)
	for _, dropTombstones := range []bool{false, true} {
		for p := range int32(partitions) {
			if err := store.Compact(p, dropTombstones); err != nil {
				t.Fatal(err)
			}
		}
		if got := state(load()); got != want {
			t.Fatalf("after compaction (tombstones dropped: %v), from %d records to %d:\n%s\nwant:\n%s", dropTombstones, before, store.Records(0)+store.Records(1), got, want)
		}
	}
	if after := store.Records(0) + store.Records(1); after >= before {
		t.Fatalf("compaction kept %d of %d records", after, before)
	}
}
