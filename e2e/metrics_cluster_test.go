package e2e

import (
	"fmt"
	"slices"
	"strconv"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"
)

// TestMetricsGroupLagOfPartitionsHostedElsewhere: on a 3-node cluster, a
// group commits offsets for three single-replica topics, one on each
// node; its coordinator hosts at most one of them, and still serves the
// lag of all three (asked of their leaders), equal to what mqctl group
// describe reports.
func TestMetricsGroupLagOfPartitionsHostedElsewhere(t *testing.T) {
	parallel(t)
	metricsAddrs := freeAddrs(t, 3)
	c := startCluster(t, 3, clusterOpts{nodeProps: func(id int32) []string {
		return []string{"metrics.listen=tcp://" + metricsAddrs[id-1]}
	}})
	ctx := ctxFor(t, time.Minute)
	const group, n = "spread", 20
	offsets := kadm.Offsets{}
	cl := c.client()
	stamp := time.Now().Add(-time.Hour)
	for id := int32(1); id <= 3; id++ {
		topic := fmt.Sprintf("on-%d", id)
		c.createTopicOn(topic, [][]int32{{id}}, nil)
		var recs []*kgo.Record
		for i := range n {
			recs = append(recs, &kgo.Record{Topic: topic, Value: []byte(strconv.Itoa(i)), Timestamp: stamp.Add(time.Duration(i) * time.Second)})
		}
		if err := cl.ProduceSync(ctx, recs...).FirstErr(); err != nil {
			t.Fatal(err)
		}
		offsets.Add(kadm.Offset{Topic: topic, Partition: 0, At: int64(id), LeaderEpoch: -1})
	}
	adm := c.admin()
	if resp, err := adm.CommitOffsets(ctx, group, offsets); err != nil || resp.Error() != nil {
		t.Fatalf("commit: %v %v", err, resp.Error())
	}
	coords := adm.FindGroupCoordinators(ctx, group)
	if coords[group].Err != nil {
		t.Fatalf("find coordinator: %v", coords[group].Err)
	}
	coordinator := coords[group].NodeID
	t.Logf("group %s is coordinated by node %d", group, coordinator)

	before := time.Now()
	res := runTool(t, 30*time.Second, "", "mqctl", "-b", c.node(coordinator).addr, "group", "describe", group, "-o", "json")
	if res.code != 0 {
		t.Fatalf("mqctl group describe: exit %d\n%s", res.code, res.stderr)
	}
	families := scrape(t, metricsAddrs[coordinator-1])
	ps := checkLagAsDescribed(t, families, group, res.stdout, time.Since(before))
	var topics []string
	for _, p := range ps {
		topics = append(topics, p.Topic)
		if want := n - int64(p.Topic[len(p.Topic)-1]-'0'); p.Lag != want || p.LagTimeMill < (time.Hour-n*time.Second).Milliseconds() {
			t.Errorf("%s: lag %d, %d ms; want %d records, about an hour", p.Topic, p.Lag, p.LagTimeMill, want)
		}
	}
	slices.Sort(topics)
	if !slices.Equal(topics, []string{"on-1", "on-2", "on-3"}) {
		t.Fatalf("mqctl group describe shows the topics %v", topics)
	}
}
