package admin

import (
	"fmt"
	"math"
	"math/rand/v2"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/mqproject/mq/lib/client"
)

func TestParsePlanRefusesWhatCannotBeRight(t *testing.T) {
	for _, tc := range []struct {
		in, err string // err: "" when the plan is good, else a part of the message
	}{
		{`{"version":1,"partitions":[{"topic":"t","partition":0,"replicas":[1,2,3],"log_dirs":["any","any","any"]}]}`, ""},
		{`{"version":1,"partitions":[{"topic":"t","partition":0,"replicas":[3]},{"topic":"t","partition":1,"replicas":[1,2]}]}`, ""},
		{``, "empty"},
		{`{"version":1,"partitions":[`, "not reassignment JSON"},
		{`[1,2]`, "not reassignment JSON"},
		{`{"version":1,"partitions":[]} {}`, "more than one"},
		{`{"version":2,"partitions":[{"topic":"t","partition":0,"replicas":[1]}]}`, "version is 2"},
		{`{"version":1,"partitions":[]}`, "no partition"},
		{`{"version":1}`, "no partition"},
		{`{"version":1,"partitions":[{"topic":"t","partition":0,"replica":[1]}]}`, "unknown field"},
		{`{"version":1,"partitions":[{"topic":"","partition":0,"replicas":[1]}]}`, "without a topic"},
		{`{"version":1,"partitions":[{"topic":"t","partition":-1,"replicas":[1]}]}`, "numbered from 0"},
		{`{"version":1,"partitions":[{"topic":"t","partition":0,"replicas":[1]},{"topic":"t","partition":0,"replicas":[2]}]}`, "t:0 twice"},
		{`{"version":1,"partitions":[{"topic":"t","partition":0,"replicas":[]}]}`, "no replicas"},
		{`{"version":1,"partitions":[{"topic":"t","partition":0}]}`, "no replicas"},
		{`{"version":1,"partitions":[{"topic":"t","partition":0,"replicas":[1,2,1]}]}`, "broker 1 is listed twice"},
		{`{"version":1,"partitions":[{"topic":"t","partition":0,"replicas":[-1]}]}`, "not a broker id"},
		{`{"version":1,"partitions":[{"topic":"t","partition":0,"replicas":[1,2],"log_dirs":["any"]}]}`, "1 log_dirs for 2 replicas"},
		{`{"version":1,"partitions":[{"topic":"t","partition":0,"replicas":[1],"log_dirs":["/data"]}]}`, `only "any"`},
	} {
		p, err := ParsePlan(strings.NewReader(tc.in))
		switch {
		case tc.err == "" && err != nil:
			t.Errorf("ParsePlan(%s): %v", tc.in, err)
		case tc.err == "" && len(p.Partitions) == 0:
			t.Errorf("ParsePlan(%s): no partitions", tc.in)
		case tc.err != "" && (client.ExitCode(err) != client.ExitUsage || !strings.Contains(err.Error(), tc.err)):
			t.Errorf("ParsePlan(%s) = %v (exit %d), want a usage error saying %q", tc.in, err, client.ExitCode(err), tc.err)
		case err != nil && strings.Contains(err.Error(), "\n"):
			t.Errorf("ParsePlan(%s): error on more than one line: %q", tc.in, err)
		}
	}
}

// What NewPlan writes is what kafka-reassign-partitions writes, and what
// ParsePlan reads back.
func TestPlanJSONIsKafkas(t *testing.T) {
	p := NewPlan([]PlanPartition{{Topic: "t", Partition: 1, Replicas: []int32{2, 3}}, {Topic: "t", Partition: 0, Replicas: []int32{1, 2, 3}}})
	var b strings.Builder
	if _, err := p.WriteTo(&b); err != nil {
		t.Fatal(err)
	}
	want := `{"version":1,"partitions":[{"topic":"t","partition":0,"replicas":[1,2,3],"log_dirs":["any","any","any"]},{"topic":"t","partition":1,"replicas":[2,3],"log_dirs":["any","any"]}]}` + "\n"
	if b.String() != want {
		t.Fatalf("plan JSON\n got %s\nwant %s", b.String(), want)
	}
	back, err := ParsePlan(strings.NewReader(b.String()))
	if err != nil || fmt.Sprint(back) != fmt.Sprint(p) {
		t.Fatalf("read back %v, %v; want %v", back, err, p)
	}
}

// brokersOf is brokers 1 to n; racks, when given, are theirs in order.
func brokersOf(n int, racks ...string) []PlanBroker {
	out := make([]PlanBroker, n)
	for i := range out {
		out[i].ID = int32(i + 1)
		if len(racks) > 0 {
			out[i].Rack = racks[i]
		}
	}
	return out
}

// topic is partitions of topic name, with replicas given as "1,2,3".
func topic(name string, replicas ...string) []Placement {
	out := make([]Placement, len(replicas))
	for i, rs := range replicas {
		out[i] = Placement{Topic: name, Partition: int32(i), Bytes: int64(100 * (i + 1))}
		for _, s := range strings.Split(rs, ",") {
			var id int32
			fmt.Sscan(s, &id)
			out[i].Replicas = append(out[i].Replicas, id)
		}
	}
	return out
}

// counts is the replicas and preferred leaders each broker holds.
func counts(ps []Placement) (replicas, leaders map[int32]int) {
	replicas, leaders = map[int32]int{}, map[int32]int{}
	for _, p := range ps {
		leaders[p.Replicas[0]]++
		for _, r := range p.Replicas {
			replicas[r]++
		}
	}
	return replicas, leaders
}

// spread is the largest count minus the smallest over brokers.
func spread(brokers []PlanBroker, count map[int32]int) int {
	lo, hi := -1, 0
	for _, b := range brokers {
		n := count[b.ID]
		if lo < 0 || n < lo {
			lo = n
		}
		hi = max(hi, n)
	}
	return hi - lo
}

// checkPlacement checks what every placement must be: the same
// partitions, each with its replication factor, no replica twice, only
// on the brokers given.
func checkPlacement(t *testing.T, brokers []PlanBroker, before, after []Placement) {
	t.Helper()
	if len(after) != len(before) {
		t.Fatalf("%d partitions placed, want %d", len(after), len(before))
	}
	allowed := map[int32]bool{}
	for _, b := range brokers {
		allowed[b.ID] = true
	}
	rf := map[string]int{}
	for _, p := range before {
		rf[fmt.Sprintf("%s:%d", p.Topic, p.Partition)] = len(p.Replicas)
	}
	for _, p := range after {
		name := fmt.Sprintf("%s:%d", p.Topic, p.Partition)
		if len(p.Replicas) != rf[name] {
			t.Errorf("%s: replicas %v, want %d of them", name, p.Replicas, rf[name])
		}
		for i, r := range p.Replicas {
			if !allowed[r] {
				t.Errorf("%s: replica on broker %d, not one of %v", name, r, brokers)
			}
			if slices.Contains(p.Replicas[:i], r) {
				t.Errorf("%s: broker %d twice in %v", name, r, p.Replicas)
			}
		}
	}
}

func TestPlaceBalances(t *testing.T) {
	for _, tc := range []struct {
		name    string
		brokers []PlanBroker
		parts   []Placement
		// moved is how many replicas should land on a new broker: the
		// fewest that balance the cluster.
		moved int
	}{
		{"balanced already", brokersOf(3), topic("t", "1,2,3", "2,3,1", "3,1,2"), 0},
		{"balanced already, RF 1", brokersOf(3), topic("t", "1", "2", "3", "1"), 0},
		{"new empty broker", brokersOf(4), topic("t", "1,2,3", "2,3,1", "3,1,2", "1,2,3"), 3},
		{"new empty broker, many partitions", brokersOf(4), topic("t", "1,2,3", "2,3,1", "3,1,2", "1,2,3", "2,3,1", "3,1,2", "1,2,3", "2,3,1"), 6},
		{"everything on one broker", brokersOf(3), topic("t", "1", "1", "1", "1", "1", "1"), 4},
		{"two new brokers", brokersOf(5), topic("t", "1,2", "2,3", "3,1", "1,2", "2,3"), 4},
		{"a broker removed", brokersOf(3), topic("t", "1,4", "4,2", "3,4", "1,2"), 3},
		{"lopsided", brokersOf(3), topic("t", "1,2", "1,2", "1,2", "1,2", "1,2", "1,2"), 4},
	} {
		t.Run(tc.name, func(t *testing.T) {
			after, err := Place(tc.brokers, tc.parts, true)
			if err != nil {
				t.Fatal(err)
			}
			checkPlacement(t, tc.brokers, tc.parts, after)
			replicas, leaders := counts(after)
			if s := spread(tc.brokers, replicas); s > 1 {
				t.Errorf("replicas per broker %v: apart by %d", replicas, s)
			}
			if s := spread(tc.brokers, leaders); s > 1 {
				t.Errorf("preferred leaders per broker %v: apart by %d", leaders, s)
			}
			if _, added, _ := Moves(tc.parts, after); added != tc.moved {
				t.Errorf("%d replicas moved, want %d: %v -> %v", added, tc.moved, tc.parts, after)
			}
			again, err := Place(tc.brokers, after, true)
			if err != nil {
				t.Fatal(err)
			}
			if moves, _, _ := Moves(after, again); len(moves) > 0 {
				t.Errorf("placing the placement again moves %v", moves)
			}
		})
	}
}

// The replicas that leave a broker over its share are the smallest
// partitions' (the fewest bytes to copy), and not its preferred leaders'.
func TestPlaceMovesTheSmallestPartitions(t *testing.T) {
	parts := []Placement{
		{Topic: "t", Partition: 0, Replicas: []int32{1}, Bytes: 5000},
		{Topic: "t", Partition: 1, Replicas: []int32{1}, Bytes: 10},
		{Topic: "t", Partition: 2, Replicas: []int32{1}, Bytes: 3000},
		{Topic: "t", Partition: 3, Replicas: []int32{1}, Bytes: 20},
	}
	after, err := Place(brokersOf(2), parts, true)
	if err != nil {
		t.Fatal(err)
	}
	moves, added, bytes := Moves(parts, after)
	if added != 2 || bytes != 30 || len(moves) != 2 || moves[0].Partition != 1 || moves[1].Partition != 3 {
		t.Fatalf("moved %v (%d replicas, %d bytes), want partitions 1 and 3 (2 replicas, 30 bytes)", moves, added, bytes)
	}

	// Broker 1 leads partition 0 and follows 1 to 3: a follower moves.
	parts = topic("u", "1,2", "2,1", "2,1", "2,1")
	after, err = Place(brokersOf(3), parts, true)
	if err != nil {
		t.Fatal(err)
	}
	if after[0].Replicas[0] != 1 {
		t.Errorf("u:0's preferred leader moved: %v", after[0].Replicas)
	}
}

func TestPlaceIsRackAware(t *testing.T) {
	brokers := brokersOf(6, "a", "a", "b", "b", "c", "c")
	for _, tc := range []struct {
		name  string
		parts []Placement
	}{
		{"from one rack", topic("t", "1,2", "1,2", "2,1", "2,1", "1,2", "2,1")},
		{"RF 3 from two racks", topic("t", "1,2,3", "3,4,1", "2,4,3", "1,3,4")},
		{"spread already", topic("t", "1,3,5", "4,6,2", "5,2,3", "6,1,4")},
	} {
		t.Run(tc.name, func(t *testing.T) {
			after, err := Place(brokers, tc.parts, true)
			if err != nil {
				t.Fatal(err)
			}
			checkPlacement(t, brokers, tc.parts, after)
			rack := map[int32]string{}
			for _, b := range brokers {
				rack[b.ID] = b.Rack
			}
			for _, p := range after {
				seen := map[string]bool{}
				for _, r := range p.Replicas {
					if seen[rack[r]] {
						t.Errorf("%s:%d: two replicas in rack %s: %v", p.Topic, p.Partition, rack[r], p.Replicas)
					}
					seen[rack[r]] = true
				}
			}
			replicas, _ := counts(after)
			if s := spread(brokers, replicas); s > 1 {
				t.Errorf("replicas per broker %v: apart by %d", replicas, s)
			}
			again, _ := Place(brokers, after, true)
			if moves, _, _ := Moves(after, again); len(moves) > 0 {
				t.Errorf("placing the placement again moves %v", moves)
			}
		})
	}

	// Brokers without racks, or only some with one: racks do not count.
	mixed := brokersOf(3, "a", "a", "")
	after, err := Place(mixed, topic("t", "1,2", "1,2", "1,2"), true)
	if err != nil {
		t.Fatal(err)
	}
	checkPlacement(t, mixed, topic("t", "1,2", "1,2", "1,2"), after)
}

// A decommission (no balance) moves only the replicas of the broker
// leaving, to the least loaded brokers, keeping RF and racks.
func TestPlaceDecommission(t *testing.T) {
	parts := append(topic("t", "1,2,3", "2,3,4", "3,4,1", "4,1,2", "1,3,4", "2,4,1"), topic("u", "4", "4", "1")...)
	brokers := brokersOf(3)
	after, err := Place(brokers, parts, false)
	if err != nil {
		t.Fatal(err)
	}
	checkPlacement(t, brokers, parts, after)
	moves, added, _ := Moves(parts, after)
	if added != 7 {
		t.Errorf("%d replicas moved, want 7 (broker 4's): %v", added, moves)
	}
	for _, m := range moves {
		var old []int32
		for _, p := range parts {
			if p.Topic == m.Topic && p.Partition == m.Partition {
				old = p.Replicas
			}
		}
		if !slices.Contains(old, 4) {
			t.Errorf("%s:%d moved from %v to %v: broker 4 does not hold it", m.Topic, m.Partition, old, m.Replicas)
		}
		for _, r := range old {
			if r != 4 && !slices.Contains(m.Replicas, r) {
				t.Errorf("%s:%d lost replica %d moving from %v to %v", m.Topic, m.Partition, r, old, m.Replicas)
			}
		}
	}
	replicas, _ := counts(after)
	if s := spread(brokers, replicas); s > 1 {
		t.Errorf("replicas per broker after the decommission %v: apart by %d (the least loaded take them)", replicas, s)
	}

	// Racks: the replica leaving rack b goes to the other broker of rack b.
	racked := []PlanBroker{{1, "a"}, {2, "b"}, {3, "a"}, {5, "b"}}
	after, err = Place(racked, []Placement{{Topic: "r", Partition: 0, Replicas: []int32{4, 1}}, {Topic: "r", Partition: 1, Replicas: []int32{1, 4}}}, false)
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range after {
		if !slices.Contains(p.Replicas, 2) && !slices.Contains(p.Replicas, 5) {
			t.Errorf("r:%d on %v: no replica in rack b", p.Partition, p.Replicas)
		}
	}
}

func TestPlaceRefusesTooFewBrokers(t *testing.T) {
	if _, err := Place(brokersOf(2), topic("t", "1,2,3"), false); err == nil || !strings.Contains(err.Error(), "3 replicas") {
		t.Errorf("RF 3 on 2 brokers: %v", err)
	}
	if _, err := Place(nil, topic("t", "1"), true); err == nil {
		t.Error("no brokers: no error")
	}
}

// TestPlaceRandomClusters places random clusters: brokers with and
// without racks, partitions of random replication factors on random
// brokers, some of them gone. Every placement keeps each partition's
// replication factor on the brokers given; without racks the brokers end
// within one replica of each other; placing the result again moves
// nothing; and a decommission moves exactly the replicas of the brokers
// left out.
func TestPlaceRandomClusters(t *testing.T) {
	// -seed is the package's one seed flag (topic_keys_test.go).
	seed := uint64(*seedFlag)
	if seed == 0 {
		seed = uint64(time.Now().UnixNano() & math.MaxInt64)
	}
	t.Logf("seed %d (replay with -seed %d)", seed, seed)
	rng := rand.New(rand.NewPCG(seed, seed))
	for round := range 300 {
		n := 2 + rng.IntN(7)
		var racks []string
		if rng.IntN(2) == 0 {
			for range n {
				racks = append(racks, string(rune('a'+rng.IntN(3))))
			}
		}
		brokers := brokersOf(n, racks...)
		// The partitions sit on brokers 1 to n+2: those above n are gone.
		var parts []Placement
		for topic := range 1 + rng.IntN(3) {
			for p := range 1 + rng.IntN(12) {
				rf := 1 + rng.IntN(min(n, 3))
				pl := Placement{Topic: fmt.Sprintf("t%d", topic), Partition: int32(p), Bytes: rng.Int64N(1 << 20)}
				for _, b := range rng.Perm(n + 2)[:rf] {
					pl.Replicas = append(pl.Replicas, int32(b+1))
				}
				parts = append(parts, pl)
			}
		}
		what := fmt.Sprintf("round %d: %d brokers, racks %v, partitions %v", round, n, racks, parts)

		after, err := Place(brokers, parts, true)
		if err != nil {
			t.Fatalf("%s: %v", what, err)
		}
		checkPlacement(t, brokers, parts, after)
		if replicas, _ := counts(after); len(racks) == 0 && spread(brokers, replicas) > 1 {
			t.Errorf("%s: replicas per broker %v", what, replicas)
		}
		again, err := Place(brokers, after, true)
		if err != nil {
			t.Fatalf("%s: %v", what, err)
		}
		if moves, _, _ := Moves(after, again); len(moves) > 0 {
			t.Errorf("%s: placing %v again moves %v", what, after, moves)
		}

		kept, err := Place(brokers, parts, false)
		if err != nil {
			t.Fatalf("%s: %v", what, err)
		}
		checkPlacement(t, brokers, parts, kept)
		gone := 0
		for _, p := range parts {
			for _, r := range p.Replicas {
				if r > int32(n) {
					gone++
				}
			}
		}
		if _, added, _ := Moves(parts, kept); added != gone {
			t.Errorf("%s: a decommission placed %d replicas, want the %d of the brokers gone", what, added, gone)
		}
		if t.Failed() {
			return
		}
	}
}
