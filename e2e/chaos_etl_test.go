package e2e

import (
	"context"
	"errors"
	"fmt"
	"math/rand"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"
)

// The read-process-write row's topics and group.
const (
	chaosETLIn    = "chaos-etl-in"
	chaosETLOut   = "chaos-etl-out"
	chaosETLGroup = "chaos-etl"
	// chaosETLMembers is how many transactional read-process-write loops
	// share the group.
	chaosETLMembers = 2
)

// TestChaosReadProcessWrite: an idempotent producer writes numbered
// records to an input topic; two members of a consumer group each read
// it read_committed, write every record to an output topic and commit
// their offsets in the same transaction (franz-go's
// GroupTransactSession, as stream processors do), and each member's
// session is closed and made again every few seconds (a processor
// restarted: it resumes from the group's committed offsets), while
// partition leaders and the transaction coordinators' nodes are SIGKILLed
// and restarted. Afterwards every acknowledged input record must be in the
// output exactly once for a read_committed reader: none twice, none
// missing, nothing that was not input. A `make chaos` row only: it
// needs the time faults and recoveries take (-chaos.duration).
func TestChaosReadProcessWrite(t *testing.T) {
	if *chaosDuration == 0 {
		t.Skip("a make chaos row: run with -chaos.duration")
	}
	runChaosRow(t, chaosRow{name: "read-process-write", side: startETLChaos, fault: func(n *nemesis) {
		if n.rng.Intn(2) == 0 {
			n.killTxnCoordinatorOf(etlTxnID(n.rng.Intn(chaosETLMembers)), n.between(300*time.Millisecond, 1500*time.Millisecond))
		} else {
			n.killLeader(n.between(300*time.Millisecond, 1500*time.Millisecond))
		}
		n.hold(n.between(500*time.Millisecond, 1500*time.Millisecond))
	}})
}

func etlTxnID(member int) string { return chaosETLGroup + "-" + strconv.Itoa(member) }

// etlChaos is the row's input producer and read-process-write members.
type etlChaos struct {
	c *cluster

	stopInput context.CancelFunc
	inputDone chan struct{}
	stopETL   context.CancelFunc
	etlDone   sync.WaitGroup

	mu       sync.Mutex
	acked    map[int]bool // input records acknowledged
	produced int          // input records sent
	commits  int          // transactions the members committed
	aborts   int          // and ended otherwise
	sessions int          // sessions made again after an error
	restarts int          // sessions closed on purpose and made again
}

func startETLChaos(t *testing.T, c *cluster) chaosSide {
	c.createRF3(chaosETLIn, 3)
	c.createRF3(chaosETLOut, 3)
	w := &etlChaos{c: c, acked: map[int]bool{}, inputDone: make(chan struct{})}
	ictx, icancel := context.WithCancel(context.Background())
	ectx, ecancel := context.WithCancel(context.Background())
	w.stopInput, w.stopETL = icancel, ecancel
	t.Cleanup(func() { icancel(); ecancel(); <-w.inputDone; w.etlDone.Wait() })
	go w.input(ictx)
	for m := range chaosETLMembers {
		w.etlDone.Add(1)
		go w.member(ectx, t, m)
	}
	return w
}

// input produces records "in-N", N = 0, 1, … keyed by N, paced so
// that the members have work throughout, until ctx ends.
func (w *etlChaos) input(ctx context.Context) {
	defer close(w.inputDone)
	cl := w.c.client(kgo.DefaultProduceTopic(chaosETLIn), kgo.RequiredAcks(kgo.AllISRAcks()))
	var wg sync.WaitGroup
	for n := 0; ctx.Err() == nil; n++ {
		w.mu.Lock()
		w.produced++
		w.mu.Unlock()
		wg.Add(1)
		cl.Produce(ctx, &kgo.Record{Key: []byte(strconv.Itoa(n)), Value: []byte("in-" + strconv.Itoa(n))}, func(_ *kgo.Record, err error) {
			defer wg.Done()
			if err == nil {
				w.mu.Lock()
				w.acked[n] = true
				w.mu.Unlock()
			}
		})
		select {
		case <-time.After(2 * time.Millisecond):
		case <-ctx.Done():
		}
	}
	fctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	cl.Flush(fctx)
	wg.Wait()
}

// member is one read-process-write loop: poll, then in one transaction
// produce each record to the output and commit the offsets. A session
// whose client failed is closed and made again (its transactional id
// fences the old producer).
func (w *etlChaos) member(ctx context.Context, t *testing.T, m int) {
	defer w.etlDone.Done()
	rng := rand.New(rand.NewSource(time.Now().UnixNano() + int64(m)))
	for ctx.Err() == nil {
		sess, err := kgo.NewGroupTransactSession(append(w.c.clientOpts(w.c.bootstrap()...),
			kgo.TransactionalID(etlTxnID(m)), kgo.TransactionTimeout(10*time.Second),
			kgo.ConsumerGroup(chaosETLGroup), kgo.ConsumeTopics(chaosETLIn),
			kgo.FetchIsolationLevel(kgo.ReadCommitted()), kgo.RequireStableFetchOffsets(),
			kgo.DefaultProduceTopic(chaosETLOut), kgo.RecordPartitioner(kgo.StickyKeyPartitioner(nil)),
		)...)
		if err != nil {
			t.Errorf("chaos read-process-write: a session: %v", err)
			return
		}
		lifetime := time.Duration(3000+rng.Intn(5000)) * time.Millisecond
		err = w.run(ctx, sess, time.Now().Add(lifetime))
		sess.Close()
		w.mu.Lock()
		if err != nil && ctx.Err() == nil {
			w.sessions++
		} else if ctx.Err() == nil {
			w.restarts++
		}
		w.mu.Unlock()
	}
}

// run transforms with sess until ctx ends or until (nil), or the
// session fails.
func (w *etlChaos) run(ctx context.Context, sess *kgo.GroupTransactSession, until time.Time) error {
	for ctx.Err() == nil && time.Now().Before(until) {
		pctx, cancel := context.WithTimeout(ctx, 2*time.Second)
		fetches := sess.PollFetches(pctx)
		cancel()
		if ctx.Err() != nil {
			return nil
		}
		for _, fe := range fetches.Errors() {
			if !errors.Is(fe.Err, context.DeadlineExceeded) {
				return fe.Err
			}
		}
		if fetches.NumRecords() == 0 {
			continue
		}
		if err := sess.Begin(); err != nil {
			return err
		}
		ectx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		fetches.EachRecord(func(r *kgo.Record) {
			out := &kgo.Record{Key: r.Key, Value: []byte(strings.Replace(string(r.Value), "in-", "out-", 1))}
			sess.Produce(ectx, out, nil) // a failed produce makes End abort
		})
		committed, err := sess.End(ectx, kgo.TryCommit)
		cancel()
		w.mu.Lock()
		if committed {
			w.commits++
		} else {
			w.aborts++
		}
		w.mu.Unlock()
		if err != nil {
			return err
		}
	}
	return nil
}

// stop ends the input, lets the members read it to its end (the
// group's committed offsets at the input's end offsets), then ends them.
func (w *etlChaos) stop() {
	w.stopInput()
	<-w.inputDone
	adm := kadm.NewClient(w.c.client())
	// A subtest, so that a group that never gets there fails the row
	// and the check still runs: what the output holds says why.
	w.c.t.(*testing.T).Run("group caught up", func(t *testing.T) {
		clusterWait.For(t, "the read-process-write group at the input's end", w.caughtUp(adm))
	})
	w.stopETL()
	w.etlDone.Wait()
}

// caughtUp reports whether the group's committed offsets are at the
// input's end offsets.
func (w *etlChaos) caughtUp(adm *kadm.Client) func() (bool, string) {
	return func() (bool, string) {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		ends, err := adm.ListEndOffsets(ctx, chaosETLIn)
		if err == nil {
			err = ends.Error()
		}
		if err != nil {
			return false, err.Error()
		}
		committed, err := adm.FetchOffsets(ctx, chaosETLGroup)
		if err == nil {
			err = committed.Error()
		}
		if err != nil {
			return false, err.Error()
		}
		done, behind := true, ""
		ends.Each(func(o kadm.ListedOffset) {
			c, ok := committed.Lookup(o.Topic, o.Partition)
			if !ok || c.At < o.Offset {
				done = false
				behind += fmt.Sprintf(" %d: committed %d end %d", o.Partition, c.At, o.Offset)
			}
		})
		return done, "behind:" + behind
	}
}

func (w *etlChaos) notes() string {
	w.mu.Lock()
	defer w.mu.Unlock()
	return fmt.Sprintf("input %d acknowledged of %d, transactions committed %d aborted %d, sessions restarted %d, made again after an error %d",
		len(w.acked), w.produced, w.commits, w.aborts, w.restarts, w.sessions)
}

// check reads the input and, read_committed, the output to their ends:
// every input record is in the output once, every acknowledged one is in
// the input, and the output holds nothing else.
func (w *etlChaos) check(t *testing.T, _ []int64, _ [][][]batchInfo) int {
	in := readTopicValues(t, w.c, chaosETLIn, "in-")
	out := readTopicValues(t, w.c, chaosETLOut, "out-")
	w.mu.Lock()
	acked := make(map[int]bool, len(w.acked))
	for n := range w.acked {
		acked[n] = true
	}
	w.mu.Unlock()
	bad := 0
	violation := func(format string, args ...any) {
		bad++
		if bad <= 20 {
			t.Errorf("chaos read-process-write: "+format, args...)
		}
	}
	for n := range acked {
		if in[n] == 0 {
			violation("input record %d was acknowledged and is not in the input", n)
		}
	}
	for n, k := range in {
		switch {
		case k > 1:
			violation("input record %d is in the input %d times (the idempotent producer)", n, k)
		case out[n] == 0:
			violation("input record %d is not in the output", n)
		case out[n] > 1:
			violation("input record %d is in the output %d times", n, out[n])
		}
	}
	for n := range out {
		if in[n] == 0 {
			violation("output record %d is no input record", n)
		}
	}
	t.Logf("chaos read-process-write: %d input records, %d output records", len(in), len(out))
	return bad
}

// readTopicValues reads topic read_committed from its start to its end
// offsets and counts the records whose value is prefix followed by a
// number, by number.
func readTopicValues(t *testing.T, c *cluster, topic, prefix string) map[int]int {
	seen := map[int]int{}
	readCommittedToEnd(t, c, topic, "chaos read-process-write", func(r *kgo.Record) {
		n, err := strconv.Atoi(strings.TrimPrefix(string(r.Value), prefix))
		if err != nil || !strings.HasPrefix(string(r.Value), prefix) {
			t.Errorf("chaos read-process-write: a record %q in %s", r.Value, topic)
			return
		}
		seen[n]++
	})
	return seen
}
