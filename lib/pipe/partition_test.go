package pipe

import (
	"fmt"
	"math/rand"
	"testing"

	"github.com/twmb/franz-go/pkg/kgo"
)

// Vectors from Apache Kafka's UtilsTest.testMurmur2.
func TestMurmur2MatchesKafkaVectors(t *testing.T) {
	for _, c := range []struct {
		in   string
		want int32
	}{
		{"21", -973932308},
		{"foobar", -790332482},
		{"a-little-bit-long-string", -985981536},
		{"a-little-bit-longer-string", -1486304829},
		{"lkjh234lh9fiuh90y23oiuhsafujhadof229phr9h19h89h8", -58897971},
		{"abc", 479470107},
	} {
		if got := Murmur2([]byte(c.in)); got != c.want {
			t.Errorf("Murmur2(%q) = %d, want %d", c.in, got, c.want)
		}
	}
}

// TestKeyPartitionMatchesKgo checks our placement of keyed records against
// kgo's StickyKeyPartitioner with its default (Kafka murmur2) hasher, for
// keys of every tail length and several partition counts.
func TestKeyPartitionMatchesKgo(t *testing.T) {
	seed := rand.Int63()
	t.Logf("seed %d", seed)
	rng := rand.New(rand.NewSource(seed))
	kp := kgo.StickyKeyPartitioner(nil).ForTopic("t")
	ours := Partitioner().ForTopic("t")
	keys := [][]byte{{}, []byte("a"), []byte("ab"), []byte("abc"), []byte("abcd"), {0xff, 0x80, 0x00}}
	for i := 0; i < 2000; i++ {
		k := make([]byte, rng.Intn(40))
		rng.Read(k)
		keys = append(keys, k, []byte(fmt.Sprint(i)))
	}
	for _, n := range []int{1, 2, 3, 7, 12, 100, 1000} {
		for _, k := range keys {
			want := kp.Partition(&kgo.Record{Key: k}, n)
			if got := KeyPartition(k, n); got != want {
				t.Fatalf("KeyPartition(%q, %d) = %d, kgo says %d", k, n, got, want)
			}
			if got := ours.Partition(&kgo.Record{Key: k, Partition: -1}, n); got != want {
				t.Fatalf("Partitioner(%q, %d) = %d, kgo says %d", k, n, got, want)
			}
		}
	}
}

func TestPartitionerHonoursExplicitPartition(t *testing.T) {
	p := Partitioner().ForTopic("t")
	if got := p.Partition(&kgo.Record{Key: []byte("abc"), Partition: 2}, 3); got != 2 {
		t.Errorf("explicit partition 2 → %d", got)
	}
	if !p.RequiresConsistency(&kgo.Record{Partition: 1}) || !p.RequiresConsistency(&kgo.Record{Key: []byte{}, Partition: -1}) {
		t.Error("explicit partitions and keys must be placed consistently")
	}
	if p.RequiresConsistency(&kgo.Record{Partition: -1}) {
		t.Error("unkeyed records may go to any writable partition")
	}
	if got := p.Partition(&kgo.Record{Partition: -1}, 4); got < 0 || got >= 4 {
		t.Errorf("unkeyed record → partition %d of 4", got)
	}
}
