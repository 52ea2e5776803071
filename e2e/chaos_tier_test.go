package e2e

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"
)

// chaosTierTopic is the tiered row's topic: one partition, RF=3, 16 KiB
// segments, 32 KiB kept locally (tieredTopicConfigs).
const chaosTierTopic = "chaos-tier"

// TestChaosTiered: a tiered topic is produced to (an idempotent acks=all
// producer) while its replicas' nodes are SIGKILLed and restarted, its
// leaders uploading closed segments to a file:// store all nodes share
// and deleting local ones behind them. Settled, every acknowledged record
// reads back from offset 0, in order and once, most of it from the
// remote part.
func TestChaosTiered(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "remote")
	if err := os.MkdirAll(dir, 0o750); err != nil {
		t.Fatal(err)
	}
	props := append(append([]string(nil), fastFailover...), tierProps("file://"+dir)...)
	runChaosRow(t, chaosRow{name: "tiered", cluster: clusterOpts{props: props}, side: startTierChaos, fault: func(n *nemesis) {
		n.killLeader(n.between(300*time.Millisecond, 1500*time.Millisecond))
		n.hold(n.between(500*time.Millisecond, 1500*time.Millisecond))
	}})
}

// tierChaos is the row's producer of the tiered topic and its ledger.
type tierChaos struct {
	c      *cluster
	cancel context.CancelFunc
	done   chan struct{}

	mu    sync.Mutex
	acked map[int]bool // record numbers acknowledged
	sent  int
}

func startTierChaos(t *testing.T, c *cluster) chaosSide {
	ctx := ctxFor(t, 30*time.Second)
	adm := kadm.NewClient(c.client())
	configs := tieredTopicConfigs(map[string]string{"min.insync.replicas": "2"})
	if _, err := adm.CreateTopic(ctx, 1, 3, configs, chaosTierTopic); err != nil {
		t.Fatal(err)
	}
	pctx, cancel := context.WithCancel(context.Background())
	w := &tierChaos{c: c, cancel: cancel, done: make(chan struct{}), acked: map[int]bool{}}
	t.Cleanup(func() { cancel(); <-w.done })
	go w.run(pctx)
	return w
}

// run produces numbered records until ctx ends, at most 2,000 in flight.
func (w *tierChaos) run(ctx context.Context) {
	defer close(w.done)
	cl := w.c.client(kgo.DefaultProduceTopic(chaosTierTopic), kgo.MaxBufferedRecords(2000),
		kgo.RecordDeliveryTimeout(30*time.Second))
	defer cl.Close()
	pad := strings.Repeat("x", 80)
	for i := 0; ctx.Err() == nil; i++ {
		r := &kgo.Record{Value: []byte(strconv.Itoa(i) + " " + pad)}
		cl.Produce(ctx, r, func(_ *kgo.Record, err error) {
			if err == nil {
				w.mu.Lock()
				w.acked[i] = true
				w.mu.Unlock()
			}
		})
		w.mu.Lock()
		w.sent = i + 1
		w.mu.Unlock()
	}
	fctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	cl.Flush(fctx)
}

func (w *tierChaos) stop() {
	w.cancel()
	<-w.done
}

func (w *tierChaos) notes() string {
	w.mu.Lock()
	defer w.mu.Unlock()
	return fmt.Sprintf("tiered: sent %d, acknowledged %d", w.sent, len(w.acked))
}

// check reads the tiered topic from offset 0 to its high-water mark:
// every acknowledged record, in the order produced, none twice; and the
// log starts at 0 while its local part starts later (something was read
// from the store).
func (w *tierChaos) check(t *testing.T, _ []int64, _ [][][]batchInfo) int {
	w.mu.Lock()
	acked := make(map[int]bool, len(w.acked))
	for i := range w.acked {
		acked[i] = true
	}
	w.mu.Unlock()
	ctx := ctxFor(t, 2*time.Minute)
	adm := kadm.NewClient(w.c.client())
	var end, localStart int64
	clusterWait.For(t, "the tiered topic's offsets", func() (bool, string) {
		ends, err := adm.ListEndOffsets(ctx, chaosTierTopic)
		if err == nil {
			err = ends.Error()
		}
		if err != nil {
			return false, err.Error()
		}
		o, _ := ends.Lookup(chaosTierTopic, 0)
		end = o.Offset
		cl := w.c.client()
		defer cl.Close()
		var code int16
		localStart, code = listOffset(t, cl, chaosTierTopic, -4)
		return code == 0, fmt.Sprintf("EARLIEST_LOCAL: error %d", code)
	})
	bad := 0
	violation := func(format string, args ...any) {
		bad++
		if bad <= 20 {
			t.Errorf("chaos tiered: "+format, args...)
		}
	}
	if localStart == 0 {
		violation("nothing was tiered: the local log starts at 0 (end %d)", end)
	}
	cl := w.c.client(kgo.ConsumePartitions(map[string]map[int32]kgo.Offset{chaosTierTopic: {0: kgo.NewOffset().AtStart()}}))
	defer cl.Close()
	last, next := -1, int64(0)
	seen := map[int]bool{}
	for next < end {
		fs := cl.PollFetches(ctx)
		if ctx.Err() != nil {
			t.Fatalf("chaos tiered: reading from 0: at offset %d of %d", next, end)
		}
		fs.EachRecord(func(r *kgo.Record) {
			next = r.Offset + 1
			i, err := strconv.Atoi(strings.Fields(string(r.Value))[0])
			if err != nil {
				violation("a record %q at offset %d", r.Value, r.Offset)
				return
			}
			if seen[i] {
				violation("record %d read twice (again at offset %d)", i, r.Offset)
			}
			if i < last {
				violation("record %d at offset %d after record %d", i, r.Offset, last)
			}
			seen[i], last = true, i
		})
	}
	for i := range acked {
		if !seen[i] {
			violation("acknowledged record %d lost", i)
		}
	}
	t.Logf("chaos tiered: %d records read from offset 0 to %d, the local log from %d", len(seen), end, localStart)
	return bad
}
