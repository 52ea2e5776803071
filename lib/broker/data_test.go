package broker

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/mqproject/mq/lib/auth"
	"github.com/mqproject/mq/lib/clock"
	"github.com/mqproject/mq/lib/config"
	"github.com/mqproject/mq/lib/controller"
	"github.com/mqproject/mq/lib/coordinator"
	"github.com/mqproject/mq/lib/mqtest"
	"github.com/mqproject/mq/lib/partition"
	"github.com/mqproject/mq/lib/peer"
	"github.com/mqproject/mq/lib/record"
	"github.com/mqproject/mq/lib/server"
	"github.com/mqproject/mq/lib/vfs"
)

// testBroker is a Broker on a real single-voter controller in a temporary
// directory.
type testBroker struct {
	*Broker
	ctrl   *controller.Controller
	coords *coordinator.Set
	dir    string
	logs   *syncBuffer
}

type syncBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.buf.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.buf.String()
}

// startBroker opens a controller and a broker (node 1) on dir, a fresh
// temporary directory when dir is empty. mod adjusts the settings.
func startBroker(t testing.TB, dir string, mod func(*config.Broker)) *testBroker {
	t.Helper()
	return startBrokerFS(t, dir, mod, nil)
}

// startBrokerFS is startBroker with the partition logs on fsys.
func startBrokerFS(t testing.TB, dir string, mod func(*config.Broker), fsys vfs.FS) *testBroker {
	t.Helper()
	return startBrokerOn(t, dir, mod, fsys, nil)
}

// startBrokerOn is startBrokerFS with the broker's time from clk (nil:
// real time).
func startBrokerOn(t testing.TB, dir string, mod func(*config.Broker), fsys vfs.FS, clk clock.Clock) *testBroker {
	t.Helper()
	if dir == "" {
		dir = t.TempDir()
	}
	if clk == nil {
		clk = clock.Real()
	}
	logs := &syncBuffer{}
	logger := slog.New(slog.NewTextHandler(logs, &slog.HandlerOptions{Level: slog.LevelDebug}))
	ctrl, err := controller.Open(controller.Config{NodeID: 1, Dir: filepath.Join(dir, "__controller")})
	if err != nil {
		t.Fatal(err)
	}
	settings := config.Defaults()
	settings.NodeID = 1
	settings.DataDir = dir
	if mod != nil {
		mod(&settings)
	}
	parts, err := partition.Open(partition.Config{Settings: settings, Controller: ctrl, Logger: logger, FS: fsys, Clock: clk})
	if err == nil {
		err = parts.Opened(context.Background())
	}
	if err != nil {
		if parts != nil {
			parts.Close()
		}
		ctrl.Close()
		t.Fatal(err)
	}
	// The parts lib/node composes, built by the same constructors.
	peers := peer.NewPool(peer.PoolClientID + "1")
	producerIDs := controller.NewProducerIDs(ctrl, clk, logger, controller.ProducerIDBlockSize)
	coords := coordinator.NewSet(coordinator.SetConfig{Settings: settings, Controller: ctrl, Hosted: parts, Peers: peers,
		ProducerIDs: producerIDs.Take, Clock: clk, Logger: logger})
	b := New(Config{Settings: settings, Controller: ctrl, Partitions: parts, Peers: peers, Coordinators: coords,
		Authorizer:  auth.NewAuthorizer(auth.NodePolicy(settings.SuperUsers, settings.AllowEveryone())),
		ProducerIDs: producerIDs, Logger: logger, Clock: clk})
	tb := &testBroker{Broker: b, ctrl: ctrl, coords: coords, dir: dir, logs: logs}
	t.Cleanup(func() {
		coords.Close()
		peers.Close()
		if err := parts.Close(); err != nil {
			t.Errorf("partitions close: %v", err)
		}
		ctrl.Close()
	})
	tb.register(t, 9092)
	return tb
}

// register (re)registers node 1 with the given port.
func (tb *testBroker) register(t testing.TB, port int32) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if _, err := tb.ctrl.RegisterBroker(ctx, controller.Broker{ID: 1, Host: "127.0.0.1", Port: port}); err != nil {
		t.Fatal(err)
	}
}

// createTopic creates a topic and waits until its partitions are open here.
func (tb *testBroker) createTopic(t testing.TB, name string, partitions int32, configs map[string]string) controller.TopicID {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	id, err := tb.ctrl.CreateTopic(ctx, controller.CreateTopic{Name: name, Partitions: partitions, ReplicationFactor: 1, Configs: configs})
	if err != nil {
		t.Fatal(err)
	}
	tb.waitFor(t, fmt.Sprintf("topic %s open", name), func() bool {
		for p := range partitions {
			if h := tb.parts.Lookup(name, p); h == nil || !h.IsLeader() {
				return false
			}
		}
		return true
	})
	return id
}

// createFollowedTopic is createTopic whose partitions have broker
// follower (registered here, never running) as their second replica,
// out of the ISR: the tests that fetch as that follower need it to be a
// replica, since the leader refuses fetches from any other replica id.
// A fetch of the follower's at the high-water mark catches it up, and the
// leader's next ISR check (every 250 ms) proposes it into the ISR.
func (tb *testBroker) createFollowedTopic(t testing.TB, name string, partitions int32, configs map[string]string, follower int32) controller.TopicID {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if _, ok := tb.ctrl.Image().Brokers[follower]; !ok {
		if _, err := tb.ctrl.RegisterBroker(ctx, controller.Broker{ID: follower, Host: "127.0.0.1", Port: 1}); err != nil {
			t.Fatal(err)
		}
	}
	assignments := make([][]int32, partitions)
	for i := range assignments {
		assignments[i] = []int32{1, follower}
	}
	id, err := tb.ctrl.CreateTopic(ctx, controller.CreateTopic{Name: name, Partitions: partitions, ReplicationFactor: 2, Assignments: assignments, Configs: configs})
	if err != nil {
		t.Fatal(err)
	}
	for p := range partitions {
		epoch := tb.ctrl.Image().Topics[name].Partitions[p].LeaderEpoch
		if err := tb.ctrl.OverridePartition(ctx, controller.PartitionOverride{Topic: name, Partition: p, Leader: 1, ISR: []int32{1}, LeaderEpoch: epoch}); err != nil {
			t.Fatal(err)
		}
	}
	tb.waitFor(t, fmt.Sprintf("topic %s open", name), func() bool {
		for p := range partitions {
			if h := tb.parts.Lookup(name, p); h == nil || !h.IsLeader() || len(h.State().ISR) != 1 {
				return false
			}
		}
		return true
	})
	return id
}

// waitFor waits for cond, a state change made by another goroutine, as
// waitUntil does.
func (tb *testBroker) waitFor(t testing.TB, what string, cond func() bool) {
	t.Helper()
	waitUntil(t, what, cond)
}

// Close closes the coordinators, then the partitions, as mqd does.
func (tb *testBroker) Close() error {
	tb.coords.Close()
	return tb.parts.Close()
}

var testConn = &server.ConnInfo{ID: 1, Network: "tcp"}

// do calls Handle and the Reply, and decodes the response at the request's
// version (pre-encoded parts included). It returns nil for no response.
func (tb *testBroker) do(t *testing.T, version int16, req kmsg.Request) kmsg.Response {
	t.Helper()
	return tb.doCtx(t, context.Background(), version, req)
}

func (tb *testBroker) doCtx(t *testing.T, ctx context.Context, version int16, req kmsg.Request) kmsg.Response {
	t.Helper()
	return tb.doAs(t, ctx, testConn, version, req)
}

// doAs is doCtx on the connection c (its principal).
func (tb *testBroker) doAs(t *testing.T, ctx context.Context, c *server.ConnInfo, version int16, req kmsg.Request) kmsg.Response {
	t.Helper()
	req.SetVersion(version)
	// Encode and decode the request, as the server does, so the test sends
	// only what the wire carries.
	wire := req.AppendTo(nil)
	decoded := kmsg.RequestForKey(req.Key())
	decoded.SetVersion(version)
	if err := decoded.ReadFrom(wire); err != nil {
		t.Fatalf("decode %s v%d request: %v", kmsg.NameForKey(req.Key()), version, err)
	}
	sreq := &server.Request{Key: req.Key(), Version: version, CorrelationID: 1, Body: decoded}
	resp := sreq.Answer(tb.Handle(ctx, c, sreq))
	if resp.Done != nil {
		// As the server does once the response is written: pooled state
		// goes back and is reused by the next request.
		defer resp.Done()
	}
	if resp.Empty() {
		return nil
	}
	return decodeResponse(t, req.Key(), version, resp)
}

// decodeResponse turns a Response into a kmsg response, reading file parts.
func decodeResponse(t *testing.T, key, version int16, resp server.Response) kmsg.Response {
	t.Helper()
	var body []byte
	if resp.Msg != nil {
		resp.Msg.SetVersion(version)
		body = resp.Msg.AppendTo(nil)
	} else {
		body = partsBytes(t, resp.Parts)
	}
	out := kmsg.ResponseForKey(key)
	out.SetVersion(version)
	if err := out.ReadFrom(body); err != nil {
		t.Fatalf("decode %s v%d response: %v", kmsg.NameForKey(key), version, err)
	}
	return out
}

func partsBytes(t *testing.T, parts []server.Part) []byte {
	t.Helper()
	var body []byte
	for _, p := range parts {
		f := p.File
		if p.Source != nil {
			var err error
			if f, err = p.Source.AcquireFile(); err != nil {
				t.Fatalf("acquire file part: %v", err)
			}
		}
		if f == nil {
			body = append(body, p.Bytes...)
			continue
		}
		b := make([]byte, p.Len)
		_, err := f.ReadAt(b, p.Offset)
		if p.Source != nil {
			p.Source.ReleaseFile()
		}
		if err != nil && err != io.EOF {
			t.Fatalf("read file part: %v", err)
		}
		body = append(body, b...)
	}
	return body
}

// testBatch builds an uncompressed batch with values "prefix-0"….
func testBatch(t testing.TB, opts record.BuildOptions, prefix string, n int) []byte {
	t.Helper()
	recs := make([]record.Record, n)
	for i := range recs {
		recs[i].Value = []byte(fmt.Sprintf("%s-%d", prefix, i))
	}
	if opts.BaseTimestamp == 0 {
		opts.BaseTimestamp = time.Now().UnixMilli()
	}
	b, err := record.Build(opts, recs)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func TestDataPlaneOpensHostedPartitionsAndDeletesDroppedTopics(t *testing.T) {
	tb := startBroker(t, "", nil)
	tb.createTopic(t, "keep", 2, nil)
	tb.createTopic(t, "drop", 1, nil)
	produce(t, tb, "drop", 0, 1, testBatch(t, record.BuildOptions{}, "x", 3))
	dropDir := filepath.Join(tb.dir, "drop-0")
	if _, err := os.Stat(dropDir); err != nil {
		t.Fatalf("partition directory: %v", err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := tb.ctrl.DeleteTopic(ctx, "drop"); err != nil {
		t.Fatal(err)
	}
	tb.waitFor(t, "data of the deleted topic removed", func() bool {
		_, err := os.Stat(dropDir)
		return os.IsNotExist(err) && tb.parts.Lookup("drop", 0) == nil
	})
	for p := range int32(2) {
		if tb.parts.Lookup("keep", p) == nil {
			t.Fatalf("keep-%d not hosted", p)
		}
	}
}

func TestDataPlaneLeavesStrayDirectoriesAlone(t *testing.T) {
	dir := t.TempDir()
	stray := filepath.Join(dir, "ghost-0")
	if err := os.MkdirAll(stray, 0o750); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(stray, "00000000000000000000.log"), []byte("keep me"), 0o640); err != nil {
		t.Fatal(err)
	}
	tb := startBroker(t, dir, nil)
	if _, err := os.Stat(filepath.Join(stray, "00000000000000000000.log")); err != nil {
		t.Fatalf("stray data touched: %v", err)
	}
	if !strings.Contains(tb.logs.String(), "ghost-0") {
		t.Fatalf("stray directory not logged; logs:\n%s", tb.logs.String())
	}
}

func TestDataPlaneAppliesTopicConfigChanges(t *testing.T) {
	tb := startBroker(t, "", nil)
	tb.createTopic(t, "cfg", 1, nil)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := tb.ctrl.AlterTopicConfigs(ctx, "cfg", map[string]string{"max.message.bytes": "2000"}, nil); err != nil {
		t.Fatal(err)
	}
	tb.waitFor(t, "config applied", func() bool {
		h := tb.parts.Lookup("cfg", 0)
		return h != nil && h.Config().MaxMessageBytes == 2000
	})
	// The new limit applies to produce.
	big := testBatch(t, record.BuildOptions{}, string(make([]byte, 3000)), 1)
	if got := produce(t, tb, "cfg", 0, 1, big); got.ErrorCode != kerr.MessageTooLarge.Code {
		t.Fatalf("produce over the new max.message.bytes: %v", kerr.ErrorForCode(got.ErrorCode))
	}
}

func TestDataPlaneReopensLogsAfterRestart(t *testing.T) {
	dir := t.TempDir()
	tb := startBroker(t, dir, nil)
	tb.createTopic(t, "durable", 1, nil)
	produce(t, tb, "durable", 0, -1, testBatch(t, record.BuildOptions{}, "a", 5))
	if err := tb.Close(); err != nil {
		t.Fatal(err)
	}
	tb.ctrl.Close()

	tb2 := startBroker(t, dir, nil)
	h := tb2.parts.Lookup("durable", 0)
	if h == nil {
		t.Fatal("partition not reopened")
	}
	if got := h.HighWatermark(); got != 5 {
		t.Fatalf("high-water mark after restart %d, want 5", got)
	}
}

// waitUntil waits with mqtest.WaitFor for cond to hold. cond says nothing
// of what it saw: a new wait should call mqtest.WaitFor with a condition
// that does.
func waitUntil(t testing.TB, what string, cond func() bool) {
	t.Helper()
	mqtest.WaitFor(t, what, func() (bool, string) { return cond(), "not yet" })
}

// TestDirectoryOfAnEarlierTopicIsSetAside: a data directory holding the
// partition directory of an earlier topic of the same name (deleted while
// the node was away, and created again) does not serve that topic's
// records as the new one's: the log checkpoints name the topic that wrote
// each directory, and the directory is moved aside, kept, and logged.
func TestDirectoryOfAnEarlierTopicIsSetAside(t *testing.T) {
	earlier := t.TempDir()
	var earlierID controller.TopicID
	t.Run("earlier topic", func(t *testing.T) {
		tb := startBroker(t, earlier, nil)
		earlierID = tb.createTopic(t, "t", 1, nil)
		if r := produce(t, tb, "t", 0, -1, testBatch(t, record.BuildOptions{}, "old", 5)); r.ErrorCode != 0 {
			t.Fatalf("produce: %v", kerr.ErrorForCode(r.ErrorCode))
		}
	})
	dir := t.TempDir()
	// What the node kept of the earlier topic: its directory, and its
	// entry in the log checkpoints.
	if err := os.CopyFS(filepath.Join(dir, "t-0"), os.DirFS(filepath.Join(earlier, "t-0"))); err != nil {
		t.Fatal(err)
	}
	if err := copyFile(filepath.Join(earlier, partition.CheckpointsFile), filepath.Join(dir, partition.CheckpointsFile)); err != nil {
		t.Fatal(err)
	}
	tb := startBroker(t, dir, nil)
	id := tb.createTopic(t, "t", 1, nil)
	if id == earlierID {
		t.Fatal("the new topic has the earlier one's ID")
	}
	if end := tb.parts.Lookup("t", 0).Log().EndOffset(); end != 0 {
		t.Fatalf("the new topic's log ends at %d: it serves the earlier topic's records", end)
	}
	aside := filepath.Join(dir, "t-0."+earlierID.String()+".stale")
	if _, err := os.Stat(filepath.Join(aside, "00000000000000000000.log")); err != nil {
		t.Fatalf("the earlier topic's directory is not kept aside: %v", err)
	}
	if !strings.Contains(tb.logs.String(), "earlier topic of the same name") {
		t.Fatalf("no warning logged:\n%s", tb.logs.String())
	}
	if r := produce(t, tb, "t", 0, -1, testBatch(t, record.BuildOptions{}, "new", 3)); r.ErrorCode != 0 || r.BaseOffset != 0 {
		t.Fatalf("produce to the new topic: base offset %d, %v; want 0", r.BaseOffset, kerr.ErrorForCode(r.ErrorCode))
	}
}

// copyFile copies the file from to to.
func copyFile(from, to string) error {
	b, err := os.ReadFile(from)
	if err != nil {
		return err
	}
	return os.WriteFile(to, b, 0o644)
}
