package e2e

import (
	"context"
	"encoding/json"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/mqproject/mq/lib/loopback"
	"github.com/mqproject/mq/lib/mqtest"
)

// freePortRun returns the first of n consecutive free loopback ports, for
// deploy/cluster.sh, which numbers its nodes' ports from a base.
func freePortRun(t *testing.T, n int) int {
	t.Helper()
	for range 50 {
		base, err := loopback.FreePort()
		if err != nil {
			t.Fatal(err)
		}
		free := true
		for p := base; p < base+n && free; p++ {
			l, err := net.Listen("tcp", "127.0.0.1:"+strconv.Itoa(p))
			if err != nil {
				free = false
				continue
			}
			l.Close()
		}
		if free {
			return base
		}
	}
	t.Fatalf("no %d consecutive free ports", n)
	return 0
}

// TestClusterScriptAddsANodeThatRebalanceFills grows the development
// cluster of deploy/cluster.sh by a node (add-node: a non-voter that
// joins empty), fills it with mqctl cluster rebalance, empties it with
// mqctl broker decommission and stops it: no partition is left offline
// or under-replicated.
func TestClusterScriptAddsANodeThatRebalanceFills(t *testing.T) {
	parallel(t)
	dir := t.TempDir()
	kafka := freePortRun(t, 4)
	env := append(os.Environ(), "MQ_CLUSTER_DIR="+dir, "MQ_CLUSTER_PORT="+strconv.Itoa(kafka),
		"MQ_CLUSTER_RAFT="+strconv.Itoa(freePortRun(t, 4)), "MQ_BIN="+binDir)
	script := func(args ...string) string {
		t.Helper()
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
		defer cancel()
		cmd := exec.CommandContext(ctx, filepath.Join("..", "deploy", "cluster.sh"), args...)
		cmd.Env = env
		out, err := cmd.CombinedOutput()
		if err != nil {
			t.Fatalf("cluster.sh %s: %v\n%s", strings.Join(args, " "), err, out)
		}
		return string(out)
	}
	script("start")
	t.Cleanup(func() { script("stop") })
	var seeds []string
	for i := range 4 {
		seeds = append(seeds, "127.0.0.1:"+strconv.Itoa(kafka+i))
	}
	mqctl := func(args ...string) toolResult {
		t.Helper()
		res := runTool(t, 3*time.Minute, "", "mqctl", append([]string{"-b", strings.Join(seeds[:3], ",")}, args...)...)
		if res.code != 0 {
			t.Fatalf("mqctl %s: exit %d\nstdout: %s\nstderr: %s", strings.Join(args, " "), res.code, res.stdout, res.stderr)
		}
		return res
	}
	mqctl("topic", "create", "grow", "-p", "6", "-r", "3")
	if out := script("add-node"); !strings.Contains(out, "node 4 joined") {
		t.Fatalf("add-node said: %s", out)
	}
	replicasOn4 := func() int {
		t.Helper()
		var brokers []struct {
			ID       int32 `json:"id"`
			Replicas int   `json:"replicas"`
		}
		res := mqctl("broker", "describe", "-o", "json")
		if err := json.Unmarshal([]byte(res.stdout), &brokers); err != nil {
			t.Fatalf("broker describe: %v\n%s", err, res.stdout)
		}
		for _, b := range brokers {
			if b.ID == 4 {
				return b.Replicas
			}
		}
		t.Fatalf("broker describe does not list broker 4: %s", res.stdout)
		return 0
	}
	if n := replicasOn4(); n != 0 {
		t.Fatalf("the new node holds %d replicas before any rebalance, want none", n)
	}
	mqctl("cluster", "rebalance")
	if n := replicasOn4(); n == 0 {
		t.Fatal("cluster rebalance left the new node empty")
	}
	mqctl("broker", "decommission", "4")
	if n := replicasOn4(); n != 0 {
		t.Fatalf("broker decommission 4 left %d replicas on it", n)
	}
	pid, err := os.ReadFile(filepath.Join(dir, "node4", "mqd.pid"))
	if err != nil {
		t.Fatal(err)
	}
	p, _ := strconv.Atoi(strings.TrimSpace(string(pid)))
	if err := syscall.Kill(p, syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	mqtest.WaitFor(t, "node 4 to stop", func() (bool, string) { return syscall.Kill(p, 0) != nil, "running" })
	for _, filter := range []string{"--under-replicated", "--unavailable"} {
		if res := mqctl("topic", "describe", filter, "grow", "-o", "json"); strings.Contains(res.stdout, `"partition"`) {
			t.Errorf("after node 4 stopped, topic describe %s lists: %s", filter, res.stdout)
		}
	}
}
