package e2e

import (
	"context"
	"fmt"
	"math/rand"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// The transactions row's topic and transactional id.
const (
	chaosTxnTopic = "chaos-txn"
	chaosTxnID    = "chaos-txn"
	// chaosTxnRecords is how many records each transaction writes, one
	// per key, over the topic's three partitions.
	chaosTxnRecords = 6
)

// TestChaosTransactions: a transactional producer commits transactions
// of six records over three partitions, and aborts one in four, while
// partition leaders and the transaction coordinator's node are SIGKILLed
// and restarted. Afterwards a read_committed consumer reads the topic to
// its end: every committed transaction whole and once, nothing of an
// aborted one, and of one whose end the producer never learnt (its
// EndTxn failed) all of it or none.
func TestChaosTransactions(t *testing.T) {
	runChaosRow(t, chaosRow{name: "transactions", side: startTxnChaos, fault: func(n *nemesis) {
		if n.rng.Intn(2) == 0 {
			n.killTxnCoordinator(n.between(300*time.Millisecond, 1500*time.Millisecond))
		} else {
			n.killLeader(n.between(300*time.Millisecond, 1500*time.Millisecond))
		}
		n.hold(n.between(500*time.Millisecond, 1500*time.Millisecond))
	}})
}

// killTxnCoordinator SIGKILLs the node coordinating chaosTxnID, keeps it
// down for down and starts it again.
func (n *nemesis) killTxnCoordinator(down time.Duration) { n.killTxnCoordinatorOf(chaosTxnID, down) }

// killTxnCoordinatorOf SIGKILLs the node coordinating transactional id
// txnID, keeps it down for down and starts it again.
func (n *nemesis) killTxnCoordinatorOf(txnID string, down time.Duration) {
	cl := n.c.client()
	defer cl.Close()
	var id int32
	clusterWait.For(n.t, "the transaction coordinator", func() (bool, string) {
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
		defer cancel()
		req := kmsg.NewPtrFindCoordinatorRequest()
		req.CoordinatorType, req.CoordinatorKey, req.CoordinatorKeys = 1, txnID, []string{txnID}
		resp, err := req.RequestWith(ctx, cl)
		if err != nil {
			return false, err.Error()
		}
		if len(resp.Coordinators) == 1 {
			c := resp.Coordinators[0]
			id = c.NodeID
			return c.ErrorCode == 0, fmt.Sprint(kerr.ErrorForCode(c.ErrorCode))
		}
		id = resp.NodeID
		return resp.ErrorCode == 0, fmt.Sprint(kerr.ErrorForCode(resp.ErrorCode))
	})
	victim := n.c.node(id)
	n.logf("SIGKILL node %d, the coordinator of transactional id %s, for %v", id, txnID, down)
	victim.kill()
	n.hold(down)
	victim.start()
	n.logf("node %d started", id)
}

// txnOutcome is what the producer learnt of a transaction's end.
type txnOutcome int

const (
	txnCommitted txnOutcome = iota // EndTxn(commit) succeeded
	txnAborted                     // aborted: EndTxn(abort) succeeded, or it never reached EndTxn
	txnUnknown                     // EndTxn(commit) failed: committed or not
)

// txnChaos is the row's transactional producer and its ledger.
type txnChaos struct {
	c      *cluster
	cancel context.CancelFunc
	done   chan struct{}

	mu        sync.Mutex
	outcomes  []txnOutcome // by transaction number
	recreated int          // clients made again after an error the client could not abort
}

func startTxnChaos(t *testing.T, c *cluster) chaosSide {
	c.createRF3(chaosTxnTopic, 3)
	ctx, cancel := context.WithCancel(context.Background())
	w := &txnChaos{c: c, cancel: cancel, done: make(chan struct{})}
	t.Cleanup(func() { cancel(); <-w.done })
	go w.run(ctx)
	return w
}

func (w *txnChaos) newClient() *kgo.Client {
	return w.c.client(kgo.TransactionalID(chaosTxnID), kgo.TransactionTimeout(10*time.Second),
		kgo.DefaultProduceTopic(chaosTxnTopic), kgo.RecordPartitioner(kgo.StickyKeyPartitioner(nil)))
}

// run produces transactions until ctx ends, noting each one's outcome.
func (w *txnChaos) run(ctx context.Context) {
	defer close(w.done)
	rng := rand.New(rand.NewSource(time.Now().UnixNano()))
	cl := w.newClient()
	defer func() { cl.Close() }()
	for i := 0; ctx.Err() == nil; i++ {
		outcome := w.one(ctx, cl, i, rng.Intn(4) == 0)
		w.mu.Lock()
		w.outcomes = append(w.outcomes, outcome)
		w.mu.Unlock()
		if outcome == txnAborted || outcome == txnCommitted {
			continue
		}
		// The client could not end it cleanly: abort what it holds, or
		// start a new client, which fences the old producer and has
		// the coordinator abort its open transaction.
		actx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
		err := cl.AbortBufferedRecords(actx)
		if err == nil {
			err = cl.EndTransaction(actx, kgo.TryAbort)
		}
		cancel()
		if err != nil {
			cl.Close()
			cl = w.newClient()
			w.mu.Lock()
			w.recreated++
			w.mu.Unlock()
		}
	}
	// Nothing left open: the row reads to the end once it has settled.
	actx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	if cl.AbortBufferedRecords(actx) == nil {
		cl.EndTransaction(actx, kgo.TryAbort)
	}
}

// one is transaction i: its records, then a commit or (abort) an abort.
func (w *txnChaos) one(ctx context.Context, cl *kgo.Client, i int, abort bool) txnOutcome {
	if err := cl.BeginTransaction(); err != nil {
		return txnUnknown
	}
	pctx, cancel := context.WithTimeout(ctx, 20*time.Second)
	defer cancel()
	var produceErr atomic.Bool
	for j := range chaosTxnRecords {
		r := &kgo.Record{Key: []byte("k" + strconv.Itoa(j)), Value: []byte(fmt.Sprintf("t%d-%d", i, j))}
		cl.Produce(pctx, r, func(_ *kgo.Record, err error) {
			if err != nil {
				produceErr.Store(true)
			}
		})
	}
	if err := cl.Flush(pctx); err != nil || produceErr.Load() {
		// Not committed: the client aborts it next (run).
		return txnUnknownAborted(cl, pctx)
	}
	commit := kgo.TryCommit
	if abort {
		commit = kgo.TryAbort
	}
	if err := cl.EndTransaction(pctx, commit); err != nil {
		if abort {
			return txnUnknownAborted(cl, pctx)
		}
		return txnUnknown
	}
	if abort {
		return txnAborted
	}
	return txnCommitted
}

// txnUnknownAborted ends a transaction whose records did not all go out
// with an abort: aborted when that works, unknown (the caller recovers)
// when it does not. Its commit was never asked for, so it is never
// committed either way.
func txnUnknownAborted(cl *kgo.Client, ctx context.Context) txnOutcome {
	if cl.AbortBufferedRecords(ctx) == nil && cl.EndTransaction(ctx, kgo.TryAbort) == nil {
		return txnAborted
	}
	return txnNeverCommitted
}

// txnNeverCommitted: the abort failed, but no commit was asked for: the
// coordinator aborts it (a new producer, or its timeout).
const txnNeverCommitted txnOutcome = 3

func (w *txnChaos) stop() {
	w.cancel()
	<-w.done
}

func (w *txnChaos) notes() string {
	w.mu.Lock()
	defer w.mu.Unlock()
	counts := map[txnOutcome]int{}
	for _, o := range w.outcomes {
		counts[o]++
	}
	return fmt.Sprintf("transactions committed %d aborted %d unknown %d (clients made again %d)",
		counts[txnCommitted], counts[txnAborted]+counts[txnNeverCommitted], counts[txnUnknown], w.recreated)
}

// check reads the topic with read_committed to its end and compares it
// with the ledger.
func (w *txnChaos) check(t *testing.T, _ []int64, _ [][][]batchInfo) int {
	w.mu.Lock()
	outcomes := append([]txnOutcome(nil), w.outcomes...)
	w.mu.Unlock()
	seen := w.readCommitted(t)
	bad := 0
	violation := func(format string, args ...any) {
		bad++
		if bad <= 20 {
			t.Errorf("chaos transactions: "+format, args...)
		}
	}
	for i, o := range outcomes {
		got := seen[i]
		delete(seen, i)
		n, dup := 0, false
		for _, c := range got {
			n++
			dup = dup || c > 1
		}
		if dup {
			violation("transaction %d: a record read twice %v", i, got)
		}
		switch {
		case o == txnCommitted && n != chaosTxnRecords:
			violation("transaction %d was committed, %d of its %d records read", i, n, chaosTxnRecords)
		case (o == txnAborted || o == txnNeverCommitted) && n != 0:
			violation("transaction %d was aborted, %d of its records read: %v", i, n, got)
		case o == txnUnknown && n != 0 && n != chaosTxnRecords:
			violation("transaction %d (its end unknown) torn: %d of its %d records read", i, n, chaosTxnRecords)
		}
	}
	for i, got := range seen {
		violation("records of transaction %d, which the producer never began: %v", i, got)
	}
	return bad
}

// readCommitted reads chaosTxnTopic from its start to its end with
// read_committed: per transaction number, how often each record was read.
func (w *txnChaos) readCommitted(t *testing.T) map[int]map[int]int {
	seen := map[int]map[int]int{}
	readCommittedToEnd(t, w.c, chaosTxnTopic, "chaos transactions", func(r *kgo.Record) {
		var i, j int
		if _, err := fmt.Sscanf(string(r.Value), "t%d-%d", &i, &j); err != nil {
			t.Errorf("chaos transactions: a record %q", r.Value)
			return
		}
		if seen[i] == nil {
			seen[i] = map[int]int{}
		}
		seen[i][j]++
	})
	return seen
}

// readCommittedToEnd reads topic read_committed from its start to the
// end offsets it has when called, and calls each for every record that is
// not a transaction marker. The markers are kept (KeepControlRecords) to
// see a partition's position reach its end past the last one. row names
// the caller in failures.
func readCommittedToEnd(t *testing.T, c *cluster, topic, row string, each func(*kgo.Record)) {
	t.Helper()
	ctx := ctxFor(t, 2*time.Minute)
	adm := kadm.NewClient(c.client())
	var ends kadm.ListedOffsets
	clusterWait.For(t, topic+"'s end offsets", func() (bool, string) {
		var err error
		ends, err = adm.ListEndOffsets(ctx, topic)
		if err == nil {
			err = ends.Error()
		}
		return err == nil, fmt.Sprint(err)
	})
	cl := c.client(kgo.ConsumeTopics(topic), kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()),
		kgo.FetchIsolationLevel(kgo.ReadCommitted()), kgo.KeepControlRecords())
	defer cl.Close()
	pos := map[int32]int64{}
	caughtUp := func() bool {
		done := true
		ends.Each(func(o kadm.ListedOffset) { done = done && pos[o.Partition] >= o.Offset })
		return done
	}
	for !caughtUp() {
		fetches := cl.PollFetches(ctx)
		if ctx.Err() != nil {
			t.Fatalf("%s: reading %s to its end: at %v, ends %v", row, topic, pos, ends)
		}
		fetches.EachRecord(func(r *kgo.Record) {
			pos[r.Partition] = r.Offset + 1
			if !r.Attrs.IsControl() {
				each(r)
			}
		})
	}
}

// String names an outcome.
func (o txnOutcome) String() string {
	return [...]string{"committed", "aborted", "unknown", "never committed"}[o]
}
