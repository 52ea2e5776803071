package broker

import (
	"context"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/mqproject/mq/lib/record"
)

// TestRestartOfTheOnlyReplicaBelowItsCheckpointedHighWatermark: a lone
// node's only replica of a partition comes back with its log cut below
// the high-water mark it had checkpointed, as a power loss under
// flush.policy=os leaves it (the segment keeps its first batch only, and
// no recovery point vouches for more). The node reports the loss when it
// registers; as the partition has no other replica that could hold more,
// it leads on what its log kept, at once, and takes writes after it (a
// partition with other replicas waits for an unclean election instead:
// lib/controller's lostcommitted.txt and e2e's TestChaosLastReplicaStanding).
func TestRestartOfTheOnlyReplicaBelowItsCheckpointedHighWatermark(t *testing.T) {
	s := testSettings(t)
	s.BrokerHeartbeatInterval = 50 * time.Millisecond
	d := startDaemon(t, s)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	client := func(d *Daemon, opts ...kgo.Opt) *kgo.Client {
		cl, err := kgo.NewClient(append([]kgo.Opt{kgo.SeedBrokers(strings.TrimPrefix(d.Addrs()[1], "tcp://"))}, opts...)...)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(cl.Close)
		return cl
	}
	cl := client(d, kgo.DefaultProduceTopic("lost"))
	if _, err := kadm.NewClient(cl).CreateTopic(ctx, 1, 1, nil, "lost"); err != nil {
		t.Fatal(err)
	}
	for range 2 {
		var rs []*kgo.Record
		for range 5 {
			rs = append(rs, &kgo.Record{Value: []byte("v")})
		}
		if err := cl.ProduceSync(ctx, rs...).FirstErr(); err != nil {
			t.Fatal(err)
		}
	}
	if err := d.Shutdown(ctx); err != nil {
		t.Fatal(err)
	}

	dir := filepath.Join(s.DataDir, "lost-0")
	seg := filepath.Join(dir, "00000000000000000000.log")
	data, err := os.ReadFile(seg)
	if err != nil {
		t.Fatal(err)
	}
	first, _, h, err := record.Next(data)
	if err != nil || h.LastOffsetDelta != 4 {
		t.Fatalf("first batch: %v, %+v; want 5 records", err, h)
	}
	if err := os.Truncate(seg, int64(len(first))); err != nil {
		t.Fatal(err)
	}
	if err := os.Remove(filepath.Join(dir, "recovery-point-offset-checkpoint")); err != nil {
		t.Fatal(err)
	}

	d = startDaemon(t, testSettingsIn(t, s.DataDir))
	if p := d.ctrl.Image().Partition("lost", 0); p == nil || p.Leader != s.NodeID || !slices.Equal(p.ISR, []int32{s.NodeID}) || p.LeaderEpoch < 1 {
		t.Fatalf("after the restart: %+v, want leader %d with ISR [%d] in a new leader epoch", p, s.NodeID, s.NodeID)
	}
	ends, err := kadm.NewClient(client(d)).ListEndOffsets(ctx, "lost")
	if err != nil {
		t.Fatal(err)
	}
	if e, _ := ends.Lookup("lost", 0); e.Err != nil || e.Offset != 5 {
		t.Fatalf("log end after the restart: %+v, want 5 (what the log kept)", e)
	}
	r, err := client(d, kgo.DefaultProduceTopic("lost")).ProduceSync(ctx, &kgo.Record{Value: []byte("w")}).First()
	if err != nil || r.Offset != 5 {
		t.Fatalf("a write after the restart: offset %v, %v; want 5", r, err)
	}
}
