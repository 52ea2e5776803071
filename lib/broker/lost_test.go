package broker

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/mqproject/mq/lib/controller"
	"github.com/mqproject/mq/lib/record"
)

// TestRestartBelowCheckpointedHighWatermarkWaitsForUncleanElection: a
// node's only replica of a partition comes back with its log cut below
// the high-water mark it had checkpointed, as a power loss under
// flush.policy=os leaves it (the segment keeps its first batch only, and
// no recovery point vouches for more). The node reports the loss when it
// registers: the partition gets no leader and an empty ISR, and takes no
// write, until an unclean election makes the replica leader again with
// what its log kept.
func TestRestartBelowCheckpointedHighWatermarkWaitsForUncleanElection(t *testing.T) {
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
	if p := d.ctrl.Image().Partition("lost", 0); p == nil || p.Leader != -1 || len(p.ISR) != 0 {
		t.Fatalf("after the restart: %+v, want no leader and an empty ISR", p)
	}
	probe := client(d, kgo.DefaultProduceTopic("lost"), kgo.RecordRetries(0), kgo.RecordDeliveryTimeout(time.Second))
	if err := probe.ProduceSync(ctx, &kgo.Record{Value: []byte("w")}).FirstErr(); err == nil {
		t.Fatal("a write to the partition without a leader was acknowledged")
	}

	// The operator's unclean election, once the node reported its log.
	tp := controller.TopicPartition{Topic: "lost", Partition: 0}
	tick := time.NewTicker(20 * time.Millisecond)
	defer tick.Stop()
	for {
		res, err := d.ctrl.ElectLeaders(ctx, controller.ElectUnclean, []controller.TopicPartition{tp})
		if err != nil {
			t.Fatal(err)
		}
		if res[tp] == nil {
			break
		}
		if !errors.Is(res[tp], controller.ErrEligibleLeadersNotAvailable) {
			t.Fatalf("unclean election: %v", res[tp])
		}
		select {
		case <-ctx.Done():
			t.Fatalf("no unclean election: %v", res[tp])
		case <-tick.C:
		}
	}
	if p := d.ctrl.Image().Partition("lost", 0); p.Leader != s.NodeID || !slices.Equal(p.ISR, []int32{s.NodeID}) {
		t.Fatalf("after the unclean election: %+v, want leader %d with ISR [%d]", p, s.NodeID, s.NodeID)
	}
	ends, err := kadm.NewClient(client(d)).ListEndOffsets(ctx, "lost")
	if err != nil {
		t.Fatal(err)
	}
	if e, _ := ends.Lookup("lost", 0); e.Err != nil || e.Offset != 5 {
		t.Fatalf("log end after the election: %+v, want 5 (what the log kept)", e)
	}
}
