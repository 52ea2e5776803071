package e2e

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
)

// TestDamagedLeaderHandsOverToAnISRMember: the leader of a replicated
// partition finds a damaged range in its log below the high-water mark
// (a consumer's read hits it; the scrubber is off, so nobody knew
// before). The other ISR members hold the range intact, so the leader
// hands the partition to one of them and leaves the ISR: the consumer
// gets every record, in order, from the new leader, and the former leader
// cuts the range, fetches it again and rejoins the ISR.
func TestDamagedLeaderHandsOverToAnISRMember(t *testing.T) {
	parallel(t)
	c := startCluster(t, 3, clusterOpts{props: withProps("log.scrub.bytes.per.sec=0")})
	c.createOn([][]int32{{1, 2, 3}}, map[string]string{"segment.bytes": "8192", "min.insync.replicas": "2"})
	ctx := ctxFor(t, 2*time.Minute)
	var want []string
	cl := c.client(kgo.DefaultProduceTopic(chaosTopic), kgo.RequiredAcks(kgo.AllISRAcks()))
	for i := 0; i < 3000; i += 20 {
		var recs []*kgo.Record
		for j := i; j < i+20; j++ {
			want = append(want, fmt.Sprintf("v-%05d", j))
			recs = append(recs, &kgo.Record{Value: []byte(want[j])})
		}
		if err := cl.ProduceSync(ctx, recs...).FirstErr(); err != nil {
			t.Fatal(err)
		}
	}

	// Node 1 stops cleanly, a closed segment of its copy is damaged, and
	// it comes back: it catches up from its log end (nothing reads the
	// damaged range), rejoins the ISR and is elected again as the
	// preferred leader.
	leader := c.node(1)
	leader.stop()
	segs, err := filepath.Glob(filepath.Join(leader.dataDir, chaosTopic+"-0", "*.log"))
	if err != nil || len(segs) < 4 {
		t.Fatalf("node 1's segments %v (%v); want at least 4", segs, err)
	}
	slices.Sort(segs)
	data, err := os.ReadFile(segs[1])
	if err != nil {
		t.Fatal(err)
	}
	for i := range 16 {
		data[len(data)/2+i] ^= 0x5a
	}
	if err := os.WriteFile(segs[1], data, 0o644); err != nil {
		t.Fatal(err)
	}
	leader.start()
	c.waitPartitions(chaosTopic, "node 1 back in the ISR", fullISR)
	if _, err := c.admin().ElectLeaders(ctx, kadm.ElectPreferredReplica, kadm.TopicsSet{chaosTopic: {0: {}}}); err != nil {
		t.Fatal(err)
	}
	c.waitPartitions(chaosTopic, "node 1 leads again", func(ps []partitionState) bool { return len(ps) == 1 && ps[0].leader == 1 })

	// A consumer from the start: node 1 finds the damage under it, hands
	// over, and the consumer reads on from the new leader.
	consumer := c.client(kgo.ConsumePartitions(map[string]map[int32]kgo.Offset{chaosTopic: {0: kgo.NewOffset().AtStart()}}))
	var got []string
	var refused int
	for len(got) < len(want) {
		fs := consumer.PollFetches(ctx)
		if ctx.Err() != nil {
			t.Fatalf("consumer got %d of %d records (%d INVALID_RECORD answers) before the deadline\nnode 1's log:\n%s", len(got), len(want), refused, leader.stderr.String())
		}
		fs.EachRecord(func(r *kgo.Record) { got = append(got, string(r.Value)) })
		fs.EachError(func(_ string, _ int32, err error) {
			if !errors.Is(err, kerr.InvalidRecord) {
				t.Fatalf("consumer: %v", err)
			}
			refused++ // node 1 withholding the range until it handed over
		})
	}
	if !slices.Equal(got, want) {
		t.Fatalf("consumer read %d records, not the %d produced in order (first differing at %d)", len(got), len(want), firstDiff(got, want))
	}
	logs := leader.stderr.String()
	if !strings.Contains(logs, "damaged range found") || !strings.Contains(logs, "leadership handed to an ISR member") {
		t.Fatalf("node 1 did not report the damage and the hand-over:\n%s", logs)
	}
	// Node 1, a follower outside the ISR now, fetches the range again and
	// rejoins.
	ps := c.waitPartitions(chaosTopic, "node 1 repaired and back in the ISR", fullISR)
	if ps[0].leader == 1 {
		t.Fatalf("node 1 leads again right after handing over: %+v", ps[0])
	}
	if !strings.Contains(leader.stderr.String(), "fetching it again from the leader") {
		t.Fatalf("node 1 rejoined the ISR without fetching the damaged range again:\n%s", leader.stderr.String())
	}
	t.Logf("consumer read all %d records (%d INVALID_RECORD answers from node 1 before the hand-over); partition now %+v", len(got), refused, ps[0])
}

// firstDiff is the first index at which a and b differ.
func firstDiff(a, b []string) int {
	for i := range min(len(a), len(b)) {
		if a[i] != b[i] {
			return i
		}
	}
	return min(len(a), len(b))
}
