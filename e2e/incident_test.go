package e2e

import (
	"encoding/json"
	"strings"
	"testing"
	"time"
)

// startSlowFencing starts n nodes with slowFencing. The nodes left
// running when the test ends are killed: with a dead peer still counted
// alive, a node stopping after another has stopped has no quorum to end
// its controlled shutdown with.
func startSlowFencing(t *testing.T, n int) *cluster {
	t.Helper()
	c := startCluster(t, n, clusterOpts{props: slowFencing})
	t.Cleanup(func() {
		for _, node := range c.nodes {
			if node.running() {
				node.kill()
			}
		}
	})
	return c
}

// slowFencing keeps a killed node unfenced for the whole test: the
// controller counts it alive, its partitions keep it as their leader, as
// in the first seconds after a kill -9 under the default session timeout,
// or for good once the quorum is lost.
var slowFencing = []string{"broker.session.timeout.ms=600000"}

// clusterDescription is mqctl cluster describe -o json, the fields checked.
type clusterDescription struct {
	Brokers []struct {
		ID      int32  `json:"id"`
		State   string `json:"state"`
		Error   string `json:"error"`
		LogDirs []struct {
			Path string `json:"path"`
		} `json:"log_dirs"`
		LogDirsError string `json:"log_dirs_error"`
	} `json:"brokers"`
}

// TestClusterDescribeShowsEveryBrokersLogDirs: every call lists every
// broker's log directories; a broker that does not answer is listed as
// unreachable, and the others' directories are still shown.
func TestClusterDescribeShowsEveryBrokersLogDirs(t *testing.T) {
	c := startSlowFencing(t, 3)
	describe := func(brokers string) clusterDescription {
		t.Helper()
		res := runTool(t, 60*time.Second, "", "mqctl", "cluster", "describe", "-b", brokers, "-o", "json")
		var d clusterDescription
		if res.code != 0 {
			t.Fatalf("cluster describe: exit %d\nstdout: %s\nstderr: %s", res.code, res.stdout, res.stderr)
		}
		if err := json.Unmarshal([]byte(res.stdout), &d); err != nil {
			t.Fatalf("cluster describe -o json: %v\n%s", err, res.stdout)
		}
		return d
	}
	// The request went to one broker, a different one per call: several
	// calls show whether every broker is asked each time.
	for range 4 {
		d := describe(c.bootstrapList())
		if len(d.Brokers) != 3 {
			t.Fatalf("cluster describe: %+v, want 3 brokers", d)
		}
		for _, b := range d.Brokers {
			if len(b.LogDirs) != 1 || b.LogDirsError != "" || b.State != "alive" {
				t.Fatalf("broker %d: %+v, want alive with its one log directory", b.ID, b)
			}
		}
	}

	c.node(3).kill()
	d := describe(c.node(1).addr + "," + c.node(2).addr)
	for _, b := range d.Brokers {
		switch {
		case b.ID == 3 && (b.State != "unreachable" || !strings.Contains(b.LogDirsError, "unreachable") || !strings.Contains(b.Error, "unreachable")):
			t.Errorf("killed broker 3: %+v, want state unreachable, its log directories unreachable", b)
		case b.ID != 3 && (len(b.LogDirs) != 1 || b.State != "alive"):
			t.Errorf("broker %d: %+v, want alive with its one log directory", b.ID, b)
		}
	}
	table := runTool(t, 60*time.Second, "", "mqctl", "cluster", "describe", "-b", c.node(1).addr)
	t.Logf("mqctl cluster describe, node 3 down: exit %d\n%s%s", table.code, table.stdout, table.stderr)
	if table.code != 0 || !strings.Contains(table.stdout, "unreachable") {
		t.Errorf("cluster describe table: exit %d\nstdout: %s\nstderr: %s", table.code, table.stdout, table.stderr)
	}
}
