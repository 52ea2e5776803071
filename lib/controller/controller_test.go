package controller

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/mqproject/mq/lib/loopback"
	"github.com/mqproject/mq/lib/mqtest"
)

// openController opens a single-voter controller in dir and closes it when
// the test ends.
func openController(t *testing.T, dir string) *Controller {
	t.Helper()
	c, err := Open(Config{NodeID: 1, Dir: dir})
	if err != nil {
		t.Fatalf("Open: %v", err)
	}
	t.Cleanup(func() { c.Close() })
	return c
}

// content renders the parts of an image that must survive a restart (the
// version and the controller record move with every election).
func content(t *testing.T, img *Image) string {
	t.Helper()
	c := *img
	c.Version, c.ControllerID = 0, 0
	var buf bytes.Buffer
	if err := writeSnapshot(&buf, &c); err != nil {
		t.Fatal(err)
	}
	return buf.String()
}

// populate runs one of each command against c.
func populate(t *testing.T, c *Controller, prefix string) {
	t.Helper()
	ctx := context.Background()
	if _, err := c.RegisterBroker(ctx, Broker{ID: 1, Host: "127.0.0.1", Port: 9092, Listeners: []string{"tcp://127.0.0.1:9092"}}); err != nil {
		t.Fatal(err)
	}
	id, err := c.CreateTopic(ctx, CreateTopic{Name: prefix + "orders", Partitions: 3, ReplicationFactor: 1, Configs: map[string]string{"retention.ms": "1000"}})
	if err != nil {
		t.Fatal(err)
	}
	if !id.valid() {
		t.Fatalf("topic id %v", id)
	}
	if img := c.Image(); img.TopicsByID[id] == nil || img.Topics[prefix+"orders"].ID != id {
		t.Fatalf("created topic %s not in the image after CreateTopic returned", id)
	}
	if _, err := c.CreateTopic(ctx, CreateTopic{Name: prefix + "doomed", Partitions: 1, ReplicationFactor: 1}); err != nil {
		t.Fatal(err)
	}
	if err := c.DeleteTopic(ctx, prefix+"doomed"); err != nil {
		t.Fatal(err)
	}
	if err := c.CreatePartitions(ctx, prefix+"orders", 5, nil); err != nil {
		t.Fatal(err)
	}
	if err := c.AlterTopicConfigs(ctx, prefix+"orders", map[string]string{"cleanup.policy": "compact"}, []string{"retention.ms"}); err != nil {
		t.Fatal(err)
	}
	if err := c.AlterBrokerConfigs(ctx, -1, map[string]string{prefix + "num.partitions": "2"}, nil); err != nil {
		t.Fatal(err)
	}
	if _, err := c.AlterPartition(ctx, AlterPartition{Topic: prefix + "orders", Partition: 4, Leader: 1, ISR: []int32{1}}); err != nil {
		t.Fatal(err)
	}
	if _, err := c.ElectLeaders(ctx, ElectPreferred, nil); err != nil {
		t.Fatal(err)
	}
	if _, err := c.AllocateProducerIDs(ctx, 1000); err != nil {
		t.Fatal(err)
	}
}

func TestSingleVoterBootstrapsOnceAndRecoversFromLog(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "__controller")
	c := openController(t, dir)
	if !c.bootstrapped {
		t.Fatal("first Open did not bootstrap")
	}
	img := c.Image()
	if len(img.ClusterID) != 22 {
		t.Fatalf("cluster id %q, want 22 characters", img.ClusterID)
	}
	if !c.IsLeader() || c.LeaderID() != 1 || img.ControllerID != 1 {
		t.Fatalf("leader=%v leaderID=%d controllerID=%d", c.IsLeader(), c.LeaderID(), img.ControllerID)
	}
	populate(t, c, "")
	want := content(t, c.Image())
	clusterID := img.ClusterID
	if err := c.Close(); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(filepath.Join(dir, raftDBName)); err != nil {
		t.Fatal(err)
	}

	c = openController(t, dir)
	if c.bootstrapped {
		t.Fatal("second Open bootstrapped again")
	}
	if got := content(t, c.Image()); got != want {
		t.Fatalf("image after log replay:\n got %s\nwant %s", got, want)
	}
	if got := c.Image().ClusterID; got != clusterID {
		t.Fatalf("cluster id changed across restart: %q -> %q", clusterID, got)
	}
	first, err := c.AllocateProducerIDs(context.Background(), 10)
	if err != nil || first != 1000 {
		t.Fatalf("AllocateProducerIDs after restart = %d, %v; want 1000", first, err)
	}
}

func TestSingleVoterRecoversFromSnapshotAndLogTail(t *testing.T) {
	dir := t.TempDir()
	c := openController(t, dir)
	populate(t, c, "a-")
	if err := c.raft.Snapshot().Error(); err != nil {
		t.Fatalf("snapshot: %v", err)
	}
	snaps, _ := filepath.Glob(filepath.Join(dir, "snapshots", "*", "state.bin"))
	if len(snaps) == 0 {
		t.Fatal("no snapshot written under snapshots/")
	}
	populate(t, c, "b-") // the log tail after the snapshot
	want := content(t, c.Image())
	clusterID := c.Image().ClusterID
	if err := c.Close(); err != nil {
		t.Fatal(err)
	}

	for i := range 2 {
		h := &recordHandler{}
		reopened, err := Open(Config{NodeID: 1, Dir: dir, Logger: slog.New(h)})
		if err != nil {
			t.Fatalf("reopen %d: %v", i, err)
		}
		t.Cleanup(func() { reopened.Close() })
		c = reopened
		if c.bootstrapped {
			t.Fatalf("reopen %d bootstrapped again", i)
		}
		if !h.has("controller: restored snapshot") {
			t.Fatalf("reopen %d did not restore the snapshot", i)
		}
		img := c.Image()
		if got := content(t, img); got != want {
			t.Fatalf("reopen %d: image:\n got %s\nwant %s", i, got, want)
		}
		if img.ClusterID != clusterID {
			t.Fatalf("reopen %d: cluster id %q, want %q", i, img.ClusterID, clusterID)
		}
		// Snapshot again on the reopened node, then reopen from that.
		if err := c.raft.Snapshot().Error(); err != nil {
			t.Fatalf("reopen %d: snapshot: %v", i, err)
		}
		if err := c.Close(); err != nil {
			t.Fatal(err)
		}
	}
}

func TestCommandsReturnSentinelErrors(t *testing.T) {
	c := openController(t, t.TempDir())
	ctx := context.Background()
	if _, err := c.CreateTopic(ctx, CreateTopic{Name: "t", Partitions: 1, ReplicationFactor: 1}); !errors.Is(err, ErrInvalidReplicationFactor) {
		t.Fatalf("CreateTopic before any broker registered = %v", err)
	}
	if _, err := c.RegisterBroker(ctx, Broker{ID: 1, Host: "localhost", Port: 9092}); err != nil {
		t.Fatal(err)
	}
	if b := c.Image().Brokers[1]; b.Epoch <= 0 {
		t.Fatalf("broker epoch %d", b.Epoch)
	}
	if _, err := c.CreateTopic(ctx, CreateTopic{Name: "t", Partitions: 2, ReplicationFactor: 1}); err != nil {
		t.Fatal(err)
	}
	checks := []struct {
		name string
		err  error
		want error
	}{
		{"duplicate", func() error {
			_, err := c.CreateTopic(ctx, CreateTopic{Name: "t", Partitions: 1, ReplicationFactor: 1})
			return err
		}(), ErrTopicExists},
		{"rf too big", func() error {
			_, err := c.CreateTopic(ctx, CreateTopic{Name: "u", Partitions: 1, ReplicationFactor: 2})
			return err
		}(), ErrInvalidReplicationFactor},
		{"delete unknown", c.DeleteTopic(ctx, "nope"), ErrUnknownTopic},
		{"shrink", c.CreatePartitions(ctx, "t", 1, nil), ErrInvalidPartitions},
		{"stale leader epoch", func() error {
			_, err := c.AlterPartition(ctx, AlterPartition{Topic: "t", Partition: 0, Leader: 1, ISR: []int32{1}, LeaderEpoch: 1})
			return err
		}(), ErrFencedLeaderEpoch},
		{"stale partition epoch", func() error {
			_, err := c.AlterPartition(ctx, AlterPartition{Topic: "t", Partition: 0, Leader: 1, ISR: []int32{1}, PartitionEpoch: 7})
			return err
		}(), ErrInvalidUpdateVersion},
		{"heartbeat of another epoch", func() error {
			_, err := c.Heartbeat(ctx, Heartbeat{BrokerID: 1, BrokerEpoch: 1})
			return err
		}(), ErrStaleBrokerEpoch},
		{"producer ids", func() error { _, err := c.AllocateProducerIDs(ctx, 0); return err }(), ErrInvalidProducerIDCount},
	}
	for _, ch := range checks {
		if !errors.Is(ch.err, ch.want) {
			t.Errorf("%s: error = %v, want %v", ch.name, ch.err, ch.want)
		}
	}
	canceled, cancel := context.WithCancel(ctx)
	cancel()
	if err := c.DeleteTopic(canceled, "t"); !errors.Is(err, context.Canceled) {
		t.Errorf("DeleteTopic with a canceled context = %v", err)
	}
	if c.Image().Topics["t"] == nil {
		t.Error("canceled DeleteTopic deleted the topic")
	}
	c.Close()
	if err := c.DeleteTopic(ctx, "t"); !errors.Is(err, ErrClosed) {
		t.Errorf("DeleteTopic after Close = %v, want ErrClosed", err)
	}
	if c.Image().Topics["t"] == nil {
		t.Error("image unreadable after Close")
	}
}

func TestChangesNotifiesWatcher(t *testing.T) {
	c := openController(t, t.TempDir())
	if _, err := c.RegisterBroker(context.Background(), Broker{ID: 1, Host: "localhost", Port: 9092}); err != nil {
		t.Fatal(err)
	}
	seen := make(chan *Image, 1)
	ready := make(chan struct{})
	go func() {
		ch := c.Changes()
		img := c.Image()
		close(ready)
		for img.Topics["watched"] == nil {
			select {
			case <-ch:
			case <-time.After(10 * time.Second):
				seen <- nil
				return
			}
			ch = c.Changes()
			img = c.Image()
		}
		seen <- img
	}()
	<-ready
	if _, err := c.CreateTopic(context.Background(), CreateTopic{Name: "watched", Partitions: 1, ReplicationFactor: 1}); err != nil {
		t.Fatal(err)
	}
	if img := <-seen; img == nil {
		t.Fatal("watcher saw no change within 10s")
	}
}

func TestConcurrentCommandsAndReaders(t *testing.T) {
	c := openController(t, t.TempDir())
	ctx := context.Background()
	if _, err := c.RegisterBroker(ctx, Broker{ID: 1, Host: "localhost", Port: 9092}); err != nil {
		t.Fatal(err)
	}
	var wg sync.WaitGroup
	errs := make(chan error, 8)
	for w := range 4 {
		wg.Go(func() {
			for i := range 5 {
				if _, err := c.CreateTopic(ctx, CreateTopic{Name: fmt.Sprintf("t%d-%d", w, i), Partitions: 2, ReplicationFactor: 1}); err != nil {
					errs <- err
					return
				}
			}
		})
	}
	done := make(chan struct{})
	wg.Go(func() {
		for {
			select {
			case <-done:
				return
			default:
			}
			if err := c.Image().check(); err != nil {
				errs <- err
				return
			}
		}
	})
	mqtest.WaitFor(t, "20 topics", func() (bool, string) {
		n := len(c.Image().Topics)
		return n == 20, fmt.Sprintf("%d topics", n)
	})
	close(done)
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
}

func TestOpenRefusesBadConfig(t *testing.T) {
	for _, cfg := range []Config{
		{NodeID: 1},
		{NodeID: -1, Dir: t.TempDir()},
		{NodeID: 1, Dir: t.TempDir(), Voters: []Voter{{ID: 2, Addr: "127.0.0.1:9093"}}},
	} {
		if c, err := Open(cfg); err == nil {
			c.Close()
			t.Errorf("Open(%+v) succeeded", cfg)
		}
	}
}

func TestOpenWithChangedNodeIDTimesOut(t *testing.T) {
	dir := t.TempDir()
	openController(t, dir).Close()
	c, err := Open(Config{NodeID: 2, Dir: dir, StartTimeout: 500 * time.Millisecond})
	if err == nil {
		c.Close()
		t.Fatal("node 2 became controller of node 1's single-voter cluster")
	}
}

// recordHandler keeps the records it is given.
type recordHandler struct {
	mu      sync.Mutex
	records []slog.Record
}

func (h *recordHandler) Enabled(context.Context, slog.Level) bool { return true }
func (h *recordHandler) WithAttrs([]slog.Attr) slog.Handler       { return h }
func (h *recordHandler) WithGroup(string) slog.Handler            { return h }
func (h *recordHandler) Handle(_ context.Context, r slog.Record) error {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.records = append(h.records, r)
	return nil
}

func (h *recordHandler) has(msg string) bool {
	h.mu.Lock()
	defer h.mu.Unlock()
	for _, r := range h.records {
		if r.Message == msg {
			return true
		}
	}
	return false
}

func TestRaftLogsGoToTheSlogLogger(t *testing.T) {
	h := &recordHandler{}
	c, err := Open(Config{NodeID: 1, Dir: t.TempDir(), Logger: slog.New(h)})
	if err != nil {
		t.Fatal(err)
	}
	c.Close()
	h.mu.Lock()
	defer h.mu.Unlock()
	fromRaft := 0
	for _, r := range h.records {
		r.Attrs(func(a slog.Attr) bool {
			if a.Key == "component" && a.Value.String() == "raft" {
				fromRaft++
				if r.Level > slog.LevelInfo {
					t.Errorf("routine raft record at %v: %s", r.Level, r.Message)
				}
			}
			return true
		})
	}
	if fromRaft == 0 {
		t.Fatalf("no raft records among %d", len(h.records))
	}
}

// freeAddrs returns n distinct loopback addresses with ports free right
// now, that no outgoing connection takes (lib/loopback).
func freeAddrs(t *testing.T, n int) []string {
	t.Helper()
	var addrs []string
	for len(addrs) < n {
		addr, err := loopback.FreeAddr()
		if err != nil {
			t.Fatal(err)
		}
		if !slices.Contains(addrs, addr) {
			addrs = append(addrs, addr)
		}
	}
	return addrs
}

func TestThreeVotersElectOneControllerAndReplicate(t *testing.T) {
	if testing.Short() {
		t.Skip("starts three raft nodes over TCP")
	}
	addrs := freeAddrs(t, 3)
	voters, err := ParseVoters(fmt.Sprintf("1@%s,2@%s,3@%s", addrs[0], addrs[1], addrs[2]))
	if err != nil {
		t.Fatal(err)
	}
	var nodes []*Controller
	for _, v := range voters {
		c, err := Open(Config{NodeID: v.ID, Dir: t.TempDir(), Voters: voters})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { c.Close() })
		nodes = append(nodes, c)
	}
	var leader *Controller
	mqtest.WaitFor(t, "a controller elected", func() (bool, string) {
		for _, c := range nodes {
			if c.IsLeader() && c.Image().ControllerID == c.cfg.NodeID {
				leader = c
				return true, ""
			}
		}
		return false, "no controller elected"
	})
	ctx := context.Background()
	for _, c := range nodes {
		if c == leader {
			continue
		}
		if c.LeaderID() != leader.cfg.NodeID {
			// Followers learn the leader with its first heartbeat.
			mqtest.WaitFor(t, fmt.Sprintf("node %d to learn leader %d", c.cfg.NodeID, leader.cfg.NodeID), func() (bool, string) {
				id := c.LeaderID()
				return id == leader.cfg.NodeID, fmt.Sprintf("node %d sees leader %d", c.cfg.NodeID, id)
			})
		}
	}
	// Every node registers its broker itself: followers forward.
	for _, c := range nodes {
		if _, err := c.RegisterBroker(ctx, Broker{ID: c.cfg.NodeID, Host: "127.0.0.1", Port: 9092 + c.cfg.NodeID}); err != nil {
			t.Fatalf("register through node %d: %v", c.cfg.NodeID, err)
		}
	}
	if _, err := leader.CreateTopic(ctx, CreateTopic{Name: "replicated", Partitions: 3, ReplicationFactor: 3}); err != nil {
		t.Fatal(err)
	}
	want := content(t, leader.Image())
	for _, c := range nodes {
		mqtest.WaitFor(t, fmt.Sprintf("node %d's image to be the leader's", c.cfg.NodeID), func() (bool, string) {
			got := content(t, c.Image())
			return got == want, fmt.Sprintf("node %d image:\n%s\nwant\n%s", c.cfg.NodeID, got, want)
		})
	}
}

func TestOneListedVoterOverTCPWaitsForItsElection(t *testing.T) {
	voters := []Voter{{ID: 5, Addr: freeAddrs(t, 1)[0]}}
	c, err := Open(Config{NodeID: 5, Dir: t.TempDir(), Voters: voters})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	if !c.IsLeader() || c.LeaderID() != 5 || c.Image().ControllerID != 5 {
		t.Fatalf("leader=%v leaderID=%d controller=%d", c.IsLeader(), c.LeaderID(), c.Image().ControllerID)
	}
}
