package admin

import (
	"bytes"
	"context"
	"flag"
	"fmt"
	"math/rand"
	"strings"
	"testing"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/mqproject/mq/lib/client"
)

// kgoDefaultPartition is the partition a kgo client with its default
// options gives a record with key among n partitions: the partitioner is
// the one kgo.NewClient configures (asked of a client, not named here).
func kgoDefaultPartition(t *testing.T) func(key []byte, n int) int {
	t.Helper()
	cl, err := kgo.NewClient()
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	p, ok := cl.OptValue(kgo.RecordPartitioner).(kgo.Partitioner)
	if !ok {
		t.Fatalf("kgo's default RecordPartitioner is %T", cl.OptValue(kgo.RecordPartitioner))
	}
	tp := p.ForTopic("t")
	return func(key []byte, n int) int {
		r := &kgo.Record{Key: key}
		if !tp.RequiresConsistency(r) {
			t.Fatalf("kgo's default partitioner does not place key %q by its hash", key)
		}
		if bp, ok := tp.(kgo.TopicBackupPartitioner); ok {
			return bp.PartitionByBackup(r, n, noBackups{t})
		}
		return tp.Partition(r, n)
	}
}

// noBackups fails the test when a partitioner looks at buffered records
// to place a keyed record: a key's partition must depend on the key alone.
type noBackups struct{ t *testing.T }

func (b noBackups) Next() (int, int64) {
	b.t.Fatal("a keyed record was placed by buffered records")
	return 0, 0
}
func (noBackups) Rem() int { return 0 }

var seedFlag = flag.Int64("seed", 0, "seed of the random keys of the key-move tests (0: a new one, printed)")

// testKeys are keys of every tail length of murmur2's 4-byte blocks, an
// empty key, and random bytes.
func testKeys(t *testing.T) [][]byte {
	seed := *seedFlag
	if seed == 0 {
		seed = rand.Int63()
	}
	t.Logf("seed %d (replay with -seed)", seed)
	rng := rand.New(rand.NewSource(seed))
	keys := [][]byte{{}, []byte("a"), []byte("ab"), []byte("abc"), []byte("abcd"), []byte("abcde")}
	for i := 0; i < 3000; i++ {
		k := make([]byte, rng.Intn(33))
		rng.Read(k)
		keys = append(keys, k, []byte(fmt.Sprintf("user-%d", i)))
	}
	return dedupe(keys)
}

func dedupe(keys [][]byte) [][]byte {
	seen := map[string]bool{}
	var out [][]byte
	for _, k := range keys {
		if !seen[string(k)] {
			seen[string(k)] = true
			out = append(out, k)
		}
	}
	return out
}

// TestKeyPlacerMatchesKafkaHashes: the partition of a key is Kafka's
// murmur2 of it, sign bit cleared, modulo the count; the hashes are
// Apache Kafka's own test vectors (UtilsTest.testMurmur2).
func TestKeyPlacerMatchesKafkaHashes(t *testing.T) {
	kp := newKeyPlacer()
	for _, v := range []struct {
		key  string
		hash int32
	}{
		{"21", -973932308},
		{"foobar", -790332482},
		{"a-little-bit-long-string", -985981536},
		{"a-little-bit-longer-string", -1486304829},
		{"lkjh234lh9fiuh90y23oiuhsafujhadof229phr9h19h89h8", -58897971},
		{"abc", 479470107},
	} {
		for _, n := range []int{1, 2, 3, 5, 7, 12, 100} {
			want := int(uint32(v.hash)&0x7fffffff) % n
			if got := kp.partition([]byte(v.key), n); got != want {
				t.Errorf("partition(%q, %d) = %d, want %d", v.key, n, got, want)
			}
		}
	}
}

// TestSampledKeysMoveAsKgoClientsPlaceThem: the keys counted as moved are
// exactly those a kgo client with its default partitioner writes to
// another partition once the topic has more partitions, and none is
// counted as elsewhere when each was found where that client put it.
func TestSampledKeysMoveAsKgoClientsPlaceThem(t *testing.T) {
	place := kgoDefaultPartition(t)
	keys := testKeys(t)
	for _, c := range []struct{ from, to int }{{1, 2}, {2, 3}, {3, 5}, {4, 8}, {6, 7}, {12, 100}, {10, 1000}} {
		found := map[string][]int32{}
		want := 0
		for _, k := range keys {
			before, after := place(k, c.from), place(k, c.to)
			found[string(k)] = []int32{int32(before)}
			if before != after {
				want++
			}
		}
		s := KeySample{From: c.from, To: c.to}
		countMoves(&s, found)
		if s.Keys != len(keys) || s.Moved != want || s.Elsewhere != 0 {
			t.Errorf("%d to %d partitions: keys %d, moved %d, elsewhere %d; want %d, %d, 0", c.from, c.to, s.Keys, s.Moved, s.Elsewhere, len(keys), want)
		}
		if want == 0 {
			t.Errorf("%d to %d partitions: no key moves: the test proves nothing", c.from, c.to)
		}
	}
}

// TestDoublingMovesAKeyToItsPartitionPlusTheOldCount: with murmur2 mod n,
// doubling n sends a key from p to p or p+n, about half of them each way:
// a check of the count that does not go through kgo at all.
func TestDoublingMovesAKeyToItsPartitionPlusTheOldCount(t *testing.T) {
	kp := newKeyPlacer()
	keys := testKeys(t)
	found := map[string][]int32{}
	moved := 0
	for _, k := range keys {
		p, q := kp.partition(k, 4), kp.partition(k, 8)
		if q != p && q != p+4 {
			t.Fatalf("key %q: partition %d of 4 became %d of 8", k, p, q)
		}
		if q != p {
			moved++
		}
		found[string(k)] = []int32{int32(p)}
	}
	s := KeySample{From: 4, To: 8}
	countMoves(&s, found)
	if s.Moved != moved {
		t.Fatalf("moved %d, want %d", s.Moved, moved)
	}
	if share := percent(moved, len(keys)); share < 45 || share > 55 {
		t.Fatalf("%d%% of %d keys moved from 4 to 8 partitions, want about half", share, len(keys))
	}
}

// TestKeysFoundOffTheirHashAreCountedElsewhere: a key read only from
// other partitions than its hash's (a producer that chose the partition)
// is counted, whether or not its hash moves; one also read from its
// hash's partition (its older records stayed where an earlier count put
// them) is not.
func TestKeysFoundOffTheirHashAreCountedElsewhere(t *testing.T) {
	kp := newKeyPlacer()
	found := map[string][]int32{}
	off := 0
	for i, k := range testKeys(t)[:500] {
		p := int32(kp.partition(k, 3))
		switch i % 5 {
		case 0:
			found[string(k)], off = []int32{(p + 1) % 3}, off+1
		case 1:
			found[string(k)] = []int32{(p + 2) % 3, p}
		default:
			found[string(k)] = []int32{p}
		}
	}
	s := KeySample{From: 3, To: 4}
	countMoves(&s, found)
	if s.Elsewhere != off {
		t.Fatalf("elsewhere %d, want %d", s.Elsewhere, off)
	}
}

func TestKeySampleSummary(t *testing.T) {
	for _, c := range []struct {
		s    KeySample
		want string
	}{
		{KeySample{}, "no records to sample"},
		{KeySample{Records: 20}, "none of the 20 records sampled has a key: no key to move"},
		{KeySample{Records: 1200, Keyed: 1100, Keys: 1000, Moved: 412}, "412 of 1000 sampled keys (41%) would map to a different partition"},
		{KeySample{Records: 3, Keyed: 3, Keys: 3, Moved: 2}, "2 of 3 sampled keys (67%) would map to a different partition"},
		{KeySample{Records: 9, Keyed: 9, Keys: 9, Moved: 0, Elsewhere: 2, Incomplete: "stopped after 10s"},
			"0 of 9 sampled keys (0%) would map to a different partition; 2 of them are not on the partition of their key's hash now (their producers choose partitions otherwise, and those keys may move differently) (stopped after 10s)"},
	} {
		if got := c.s.Summary(); got != c.want {
			t.Errorf("Summary(%+v) =\n%s\nwant\n%s", c.s, got, c.want)
		}
	}
}

// TestGrowingATopicIsConfirmedFirst: partitions are added only with
// Execute or a yes; with no one to ask it is a usage error, before any
// warning; a dry run warns and goes on; a topic that does not grow is
// left to the broker without a question.
func TestGrowingATopicIsConfirmedFirst(t *testing.T) {
	details := kadm.TopicDetails{
		"three": {Topic: "three", Partitions: kadm.PartitionDetails{0: {}, 1: {}, 2: {}}},
		"six":   {Topic: "six", Partitions: kadm.PartitionDetails{0: {}, 1: {}, 2: {}, 3: {}, 4: {}, 5: {}}},
	}
	asked := func(yes bool, questions *[]string) func(context.Context, string) (bool, error) {
		return func(_ context.Context, q string) (bool, error) {
			*questions = append(*questions, q)
			return yes, nil
		}
	}
	var questions []string
	for _, c := range []struct {
		name      string
		req       AlterTopics
		topics    []string
		code      int    // exit status of the error
		grows     int    // topics returned as growing
		warned    bool   // something on Warn
		questions string // the questions asked, joined by |
	}{
		{name: "no one to ask", req: AlterTopics{Partitions: 5}, topics: []string{"three"}, code: client.ExitUsage},
		{name: "execute", req: AlterTopics{Partitions: 5, Execute: true}, topics: []string{"three"}, grows: 1, warned: true},
		{name: "dry run", req: AlterTopics{Partitions: 5, DryRun: true}, topics: []string{"three", "six"}, grows: 1, warned: true},
		{name: "yes", req: AlterTopics{Partitions: 5, Ask: asked(true, &questions)}, topics: []string{"three"}, grows: 1, warned: true, questions: "grow three to 5 partitions?"},
		{name: "no", req: AlterTopics{Partitions: 8, Ask: asked(false, &questions)}, topics: []string{"six", "three", "seven"}, code: client.ExitFailure, warned: true, questions: "grow six, three to 8 partitions?"},
		{name: "no growth, no question", req: AlterTopics{Partitions: 6, Ask: asked(false, &questions)}, topics: []string{"six"}},
		{name: "no growth, no one to ask", req: AlterTopics{Partitions: 3}, topics: []string{"six", "three"}},
		{name: "configs only", req: AlterTopics{Set: map[string]string{"retention.ms": "1"}}, topics: []string{"three"}},
	} {
		questions = nil
		var warn bytes.Buffer
		c.req.Warn = &warn
		grows, err := (&Admin{}).confirmGrowth(context.Background(), c.req, details, c.topics)
		if got := client.ExitCode(err); got != c.code {
			t.Errorf("%s: exit %d (%v), want %d", c.name, got, err, c.code)
		}
		if len(grows) != c.grows {
			t.Errorf("%s: %d topics grow, want %d", c.name, len(grows), c.grows)
		}
		if got := warn.Len() > 0; got != c.warned {
			t.Errorf("%s: warned %v, want %v: %q", c.name, got, c.warned, warn.String())
		}
		if got := strings.Join(questions, "|"); got != c.questions {
			t.Errorf("%s: asked %q, want %q", c.name, got, c.questions)
		}
		if c.warned && !strings.Contains(warn.String(), "mqctl: warning: topic three, 3 to ") {
			t.Errorf("%s: warning %q", c.name, warn.String())
		}
	}
}
