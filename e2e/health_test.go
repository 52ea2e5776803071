package e2e

import (
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/mqproject/mq/lib/mqtest"
)

// healthReport is mqctl cluster health -o json.
type healthReport struct {
	Healthy  bool `json:"healthy"`
	Problems []struct {
		Kind      string `json:"kind"`
		Topic     string `json:"topic"`
		Partition int32  `json:"partition"`
		Broker    int32  `json:"broker"`
		Group     string `json:"group"`
		LagTimeMs int64  `json:"lag_time_ms"`
		Detail    string `json:"detail"`
		// Partitions: those an unreachable or fenced broker affects.
		Partitions []struct {
			Topic     string `json:"topic"`
			Partition int32  `json:"partition"`
			Internal  bool   `json:"internal"`
			Offline   bool   `json:"offline"`
		} `json:"partitions"`
	} `json:"problems"`
}

// clusterHealth runs mqctl cluster health -o json against brokers.
func clusterHealth(t *testing.T, brokers string, args ...string) (healthReport, toolResult) {
	t.Helper()
	res := runTool(t, 30*time.Second, "", "mqctl", append([]string{"cluster", "health", "-b", brokers, "-o", "json"}, args...)...)
	var h healthReport
	if res.code == 0 || res.code == 1 {
		if err := json.Unmarshal([]byte(res.stdout), &h); err != nil {
			t.Fatalf("cluster health -o json (exit %d): %v\n%s", res.code, err, res.stdout)
		}
	}
	return h, res
}

func TestClusterHealthOfASingleNodeIsHealthy(t *testing.T) {
	b := startBroker(t, brokerOpts{})
	ctx := ctxFor(t, 30*time.Second)
	if _, err := b.admin().CreateTopic(ctx, 2, 1, nil, "orders"); err != nil {
		t.Fatal(err)
	}
	res := runTool(t, 30*time.Second, "", "mqctl", "cluster", "health", "-b", b.addr)
	if res.code != 0 || res.stdout != "healthy: 1 broker alive, 2 partitions fully replicated\n" {
		t.Fatalf("cluster health: exit %d\nstdout: %s\nstderr: %s", res.code, res.stdout, res.stderr)
	}
	if h, res := clusterHealth(t, b.addr, "--max-lag", "1m"); res.code != 0 || !h.Healthy || h.Problems == nil || len(h.Problems) != 0 {
		t.Fatalf("cluster health -o json: exit %d: %s", res.code, res.stdout)
	}
	// A bad flag is a usage error, an absent broker unreachable.
	if res := runTool(t, 30*time.Second, "", "mqctl", "cluster", "health", "-b", b.addr, "--max-lag", "nonsense"); res.code != 2 || res.stdout != "" {
		t.Errorf("--max-lag nonsense: exit %d, stdout %q, stderr %q; want 2", res.code, res.stdout, res.stderr)
	}
	addr, err := freeAddr()
	if err != nil {
		t.Fatal(err)
	}
	if res := runTool(t, 30*time.Second, "", "mqctl", "cluster", "health", "-b", addr); res.code != 3 {
		t.Errorf("no broker at %s: exit %d, stderr %q; want 3", addr, res.code, res.stderr)
	}
}

func TestClusterHealthReportsAKilledBroker(t *testing.T) {
	c := startCluster(t, 3, clusterOpts{props: fastFailover})
	ctx := ctxFor(t, 60*time.Second)
	if _, err := c.admin().CreateTopic(ctx, 2, 3, nil, "orders"); err != nil {
		t.Fatal(err)
	}
	all := c.bootstrapList()
	mqtest.Wait{Timeout: 30 * time.Second}.For(t, "the cluster healthy", func() (bool, string) {
		h, res := clusterHealth(t, all)
		return res.code == 0 && h.Healthy, res.stdout + res.stderr
	})

	c.node(3).kill()
	survivors := c.node(1).addr + "," + c.node(2).addr
	// Node 3 is fenced once its session times out, and both partitions,
	// replicated on every node, are under-replicated once it leaves their
	// ISR: one problem, node 3's, which lists them. The controller keeps
	// its quorum (2 of 3 voters).
	mqtest.Wait{Timeout: 30 * time.Second}.For(t, "node 3 fenced, with both partitions led by the others", func() (bool, string) {
		h, res := clusterHealth(t, survivors)
		if res.code != 1 {
			return false, fmt.Sprintf("exit %d: %s%s", res.code, res.stdout, res.stderr)
		}
		var fenced []int32
		var under []string
		other := 0
		for _, p := range h.Problems {
			switch p.Kind {
			case "fenced_broker":
				fenced = append(fenced, p.Broker)
				for _, part := range p.Partitions {
					switch {
					case part.Offline:
						other++ // led by node 3 until the controller elects another leader
					case !part.Internal:
						under = append(under, fmt.Sprintf("%s/%d", part.Topic, part.Partition))
					}
				}
			default:
				other++ // unreachable before it is fenced; an election after node 3 led the quorum settles
			}
		}
		slices.Sort(under)
		ok := slices.Equal(fenced, []int32{3}) && slices.Equal(under, []string{"orders/0", "orders/1"}) && other == 0
		return ok, res.stdout
	})
	// The table: one line per problem, as the JSON's details. The two
	// survivors' images may still disagree on the fence for a moment:
	// one that has not applied it yet lists node 3 unfenced, and the
	// check then finds it unreachable; either way node 3 is the one line.
	res := runTool(t, 30*time.Second, "", "mqctl", "cluster", "health", "-b", survivors)
	node3 := strings.Contains(res.stdout, "fenced broker 3 ") || strings.Contains(res.stdout, "broker 3 unreachable ")
	if res.code != 1 || !node3 || !strings.Contains(res.stdout, "2 partitions under-replicated, 2 user") ||
		!strings.Contains(res.stderr, "cluster degraded") {
		t.Errorf("cluster health: exit %d\nstdout: %s\nstderr: %s", res.code, res.stdout, res.stderr)
	}
}

func TestClusterHealthReportsAGroupLaggingLongerThanMaxLag(t *testing.T) {
	b := startBroker(t, brokerOpts{})
	ctx := ctxFor(t, 30*time.Second)
	adm := b.admin()
	if _, err := adm.CreateTopic(ctx, 1, 1, nil, "events"); err != nil {
		t.Fatal(err)
	}
	// Records written an hour ago, none of which the group has read.
	old := time.Now().Add(-time.Hour)
	cl := b.client()
	for i := range 3 {
		r := &kgo.Record{Topic: "events", Value: []byte(fmt.Sprint(i)), Timestamp: old}
		if err := cl.ProduceSync(ctx, r).FirstErr(); err != nil {
			t.Fatal(err)
		}
	}
	var commit kadm.Offsets
	commit.AddOffset("events", 0, 0, -1)
	if resp, err := adm.CommitOffsets(ctx, "slow", commit); err != nil || resp.Error() != nil {
		t.Fatalf("commit: %v %v", err, resp.Error())
	}
	// The group has no members (Empty): it is judged only when named.
	if h, res := clusterHealth(t, b.addr, "--max-lag", "5m"); res.code != 0 || !h.Healthy {
		t.Errorf("--max-lag 5m, the group without members not named: exit %d: %s%s", res.code, res.stdout, res.stderr)
	}
	h, res := clusterHealth(t, b.addr, "--max-lag", "5m", "--group", "slow")
	if res.code != 1 || len(h.Problems) != 1 {
		t.Fatalf("--max-lag 5m: exit %d: %s%s", res.code, res.stdout, res.stderr)
	}
	p := h.Problems[0]
	if p.Kind != "lagging_group" || p.Group != "slow" || p.Topic != "events" || p.Partition != 0 || p.LagTimeMs < time.Hour.Milliseconds() {
		t.Errorf("problem %+v, want group slow lagging an hour on events/0", p)
	}
	// Within the bound, and without one, the same cluster is healthy.
	for _, args := range [][]string{{"--max-lag", "2h", "--group", "slow"}, nil} {
		if h, res := clusterHealth(t, b.addr, args...); res.code != 0 || !h.Healthy {
			t.Errorf("cluster health %v: exit %d: %s%s", args, res.code, res.stdout, res.stderr)
		}
	}
}
