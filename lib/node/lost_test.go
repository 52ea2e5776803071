package node

import (
	"context"
	"fmt"
	"hash/crc32"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/mqproject/mq/lib/partition"
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
	// No recovery point vouches for the cut bytes: the log checkpoints
	// keep the partition's high-water mark and epochs only.
	editLogCheckpoints(t, s.DataDir, func(fields []string) []string {
		if fields[0] == "lost-0" {
			fields[1] = "-"
		}
		return fields
	})

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

// editLogCheckpoints rewrites the data directory's log-checkpoints file
// (lib/log: "mq log-checkpoints 1", "DIR RECOVERY_POINT HIGH_WATERMARK
// EPOCHS OWNER" lines, "crc32c HEX" of what precedes) with each log's line
// changed by edit, and its checksum made to match, as a power loss or an
// earlier state of the file could have left it.
func editLogCheckpoints(t *testing.T, dataDir string, edit func(fields []string) []string) {
	t.Helper()
	path := filepath.Join(dataDir, partition.CheckpointsFile)
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	lines := strings.Split(strings.TrimSuffix(string(b), "\n"), "\n")
	if len(lines) < 2 || lines[0] != "mq log-checkpoints 1" {
		t.Fatalf("%s: not a log-checkpoints file: %q", path, b)
	}
	var body strings.Builder
	body.WriteString(lines[0] + "\n")
	for _, line := range lines[1 : len(lines)-1] {
		body.WriteString(strings.Join(edit(strings.Fields(line)), " ") + "\n")
	}
	sum := crc32.Checksum([]byte(body.String()), crc32.MakeTable(crc32.Castagnoli))
	if err := os.WriteFile(path, fmt.Appendf([]byte(body.String()), "crc32c %08x\n", sum), 0o644); err != nil {
		t.Fatal(err)
	}
}
