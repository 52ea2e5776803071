package e2e

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// The transaction protocol a real client speaks with mqd: kgo switches
// to transaction.version 2 (KIP-890 part 2) when ApiVersions finalizes
// the feature at 2, as mqd does by default, and stays on the earlier
// protocol with transaction.version=1.

// sentRequests counts the requests a client wrote, by API key.
type sentRequests struct {
	mu sync.Mutex
	n  map[int16]int
}

func newSentRequests() *sentRequests { return &sentRequests{n: map[int16]int{}} }

func (s *sentRequests) OnBrokerWrite(_ kgo.BrokerMetadata, key int16, _ int, _, _ time.Duration, err error) {
	if err != nil {
		return
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	s.n[key]++
}

func (s *sentRequests) count(key kmsg.Key) int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.n[key.Int16()]
}

// finalizedTransactionVersion is the transaction.version level that
// ApiVersions finalizes (-1: none).
func finalizedTransactionVersion(t *testing.T, ctx context.Context, cl *kgo.Client) int16 {
	t.Helper()
	req := kmsg.NewPtrApiVersionsRequest()
	req.ClientSoftwareName, req.ClientSoftwareVersion = "mq-e2e", "1"
	resp, err := req.RequestWith(ctx, cl)
	if err != nil {
		t.Fatalf("ApiVersions: %v", err)
	}
	for _, f := range resp.FinalizedFeatures {
		if f.Name == "transaction.version" {
			return f.MaxVersionLevel
		}
	}
	return -1
}

// txnTarget is where a transaction test runs: one mqd or a cluster.
type txnTarget struct {
	client func(...kgo.Opt) *kgo.Client
	rf     int16
	opts   []kgo.Opt // a client's seeds (and dialer), for clients made elsewhere
}

func (tt txnTarget) clientOpts() []kgo.Opt { return slices.Clone(tt.opts) }

func (tt txnTarget) createTopic(t *testing.T, ctx context.Context, topic string, partitions int32) {
	t.Helper()
	resp, err := kadm.NewClient(tt.client()).CreateTopic(ctx, partitions, tt.rf, nil, topic)
	if err == nil {
		err = resp.Err
	}
	if err != nil {
		t.Fatalf("create %s: %v", topic, err)
	}
}

// describeTxnEpoch is the producer epoch the coordinator holds for id.
func describeTxnEpoch(t *testing.T, ctx context.Context, adm *kadm.Client, id string) int16 {
	t.Helper()
	d, err := adm.DescribeTransactions(ctx, id)
	if err != nil {
		t.Fatalf("DescribeTransactions: %v", err)
	}
	if d[id].Err != nil {
		t.Fatalf("DescribeTransactions %s: %v", id, d[id].Err)
	}
	return d[id].ProducerEpoch
}

// checkTransactionProtocol runs transactions, committed and aborted, of
// a kgo producer over three partitions and checks that the client spoke
// the protocol of version (AddPartitionsToTxn or none; the epoch kept or
// bumped by every end, the coordinator's, the client's and the
// partitions' alike) and that a read_committed consumer sees exactly the
// committed records.
func checkTransactionProtocol(t *testing.T, tt txnTarget, version int16) {
	ctx := ctxFor(t, 2*time.Minute)
	topic, id := fmt.Sprintf("protocol-v%d", version), fmt.Sprintf("protocol-v%d", version)
	tt.createTopic(t, ctx, topic, 3)
	if got := finalizedTransactionVersion(t, ctx, tt.client()); got != version {
		t.Fatalf("ApiVersions finalizes transaction.version %d, want %d", got, version)
	}
	sent := newSentRequests()
	pr := tt.client(kgo.TransactionalID(id), kgo.DefaultProduceTopic(topic), kgo.WithHooks(sent),
		kgo.RecordPartitioner(kgo.ManualPartitioner()))
	adm := kadm.NewClient(tt.client())
	// kgo picks the protocol at BeginTransaction from the ApiVersions it
	// has: a first answer before.
	if err := pr.Ping(ctx); err != nil {
		t.Fatal(err)
	}
	const transactions = 6
	var committed []string
	var epochs []int16
	for i := range transactions {
		if err := pr.BeginTransaction(); err != nil {
			t.Fatal(err)
		}
		var values []string
		for p := range int32(3) {
			v := fmt.Sprintf("t%d-p%d", i, p)
			values = append(values, v)
			if err := pr.ProduceSync(ctx, &kgo.Record{Partition: p, Value: []byte(v)}).FirstErr(); err != nil {
				t.Fatalf("transaction %d: produce: %v", i, err)
			}
		}
		commit := i%3 != 2
		if err := pr.EndTransaction(ctx, kgo.TransactionEndTry(commit)); err != nil {
			t.Fatalf("transaction %d: end (commit %v): %v", i, commit, err)
		}
		if commit {
			committed = append(committed, values...)
		}
		_, clientEpoch, err := pr.ProducerID(ctx)
		if err != nil {
			t.Fatal(err)
		}
		coordEpoch := describeTxnEpoch(t, ctx, adm, id)
		if clientEpoch != coordEpoch {
			t.Fatalf("transaction %d: the client holds epoch %d, the coordinator %d", i, clientEpoch, coordEpoch)
		}
		epochs = append(epochs, coordEpoch)
	}
	for i := 1; i < len(epochs); i++ {
		want := epochs[i-1]
		if version >= 2 {
			want++ // every end bumps the epoch
		}
		if epochs[i] != want {
			t.Fatalf("transaction.version %d: the epochs after each end are %v", version, epochs)
		}
	}
	adds, offsetAdds := sent.count(kmsg.AddPartitionsToTxn), sent.count(kmsg.AddOffsetsToTxn)
	if version >= 2 && adds != 0 || version < 2 && adds < transactions {
		t.Fatalf("transaction.version %d: the client sent %d AddPartitionsToTxn for %d transactions", version, adds, transactions)
	}
	if offsetAdds != 0 {
		t.Fatalf("the client sent %d AddOffsetsToTxn without offsets", offsetAdds)
	}

	// The markers carried the epochs: each partition's producer is at the
	// coordinator's epoch, with no transaction open.
	last := epochs[len(epochs)-1]
	tt.waitProducers(t, ctx, topic, func(d kadm.DescribedProducer) string {
		if d.ProducerEpoch != last || d.CurrentTxnStartOffset >= 0 {
			return fmt.Sprintf("%s-%d: producer %d epoch %d, open transaction at %d; want epoch %d, none open",
				d.Topic, d.Partition, d.ProducerID, d.ProducerEpoch, d.CurrentTxnStartOffset, last)
		}
		return ""
	})

	got := readTopic(t, ctx, tt.client, topic, kgo.ReadCommitted(), len(committed))
	slices.Sort(got)
	slices.Sort(committed)
	if !slices.Equal(got, committed) {
		t.Fatalf("read_committed saw %v, want %v", got, committed)
	}
	t.Logf("transaction.version %d: epochs %v, %d AddPartitionsToTxn", version, epochs, adds)
}

// waitProducers waits until check (a description of what is wrong, or
// "") passes for the producers of every partition of topic.
func (tt txnTarget) waitProducers(t *testing.T, ctx context.Context, topic string, check func(kadm.DescribedProducer) string) {
	t.Helper()
	adm := kadm.NewClient(tt.client())
	clusterWait.For(t, "the producers of "+topic, func() (bool, string) {
		d, err := adm.DescribeProducers(ctx, kadm.TopicsSet{topic: {0: {}, 1: {}, 2: {}}})
		if err != nil {
			return false, err.Error()
		}
		n, wrong := 0, ""
		d.EachProducer(func(p kadm.DescribedProducer) {
			n++
			if w := check(p); w != "" && wrong == "" {
				wrong = w
			}
		})
		if n != 3 {
			return false, fmt.Sprintf("%d producers described, want one per partition", n)
		}
		return wrong == "", wrong
	})
}

// checkZombieFenced: a second producer of a transactional id fences the
// first; the first's writes, to a partition of its open transaction or
// to another, and its commit are refused, and read_committed consumers
// see the second's records only.
func checkZombieFenced(t *testing.T, tt txnTarget) {
	ctx := ctxFor(t, 2*time.Minute)
	const topic, id = "zombie", "zombie"
	tt.createTopic(t, ctx, topic, 3)
	newProducer := func() *kgo.Client {
		return tt.client(kgo.TransactionalID(id), kgo.DefaultProduceTopic(topic), kgo.RecordPartitioner(kgo.ManualPartitioner()))
	}
	zombie := newProducer()
	if err := zombie.Ping(ctx); err != nil {
		t.Fatal(err)
	}
	if err := zombie.BeginTransaction(); err != nil {
		t.Fatal(err)
	}
	if err := zombie.ProduceSync(ctx, &kgo.Record{Partition: 0, Value: []byte("zombie-0")}).FirstErr(); err != nil {
		t.Fatal(err)
	}
	_, zombieEpoch, err := zombie.ProducerID(ctx)
	if err != nil {
		t.Fatal(err)
	}

	next := newProducer()
	if err := next.Ping(ctx); err != nil {
		t.Fatal(err)
	}
	if err := next.BeginTransaction(); err != nil {
		t.Fatal(err)
	}
	if err := next.ProduceSync(ctx, &kgo.Record{Partition: 0, Value: []byte("next-0")}).FirstErr(); err != nil {
		t.Fatalf("the new producer: %v", err)
	}
	_, nextEpoch, err := next.ProducerID(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if nextEpoch <= zombieEpoch {
		t.Fatalf("the new producer's epoch %d, the zombie's %d", nextEpoch, zombieEpoch)
	}

	for _, p := range []int32{0, 1} {
		err := zombie.ProduceSync(ctx, &kgo.Record{Partition: p, Value: []byte(fmt.Sprintf("zombie-late-%d", p))}).FirstErr()
		if err == nil {
			t.Fatalf("the zombie's write to partition %d was taken", p)
		}
		t.Logf("the zombie's write to partition %d: %v", p, err)
	}
	if err := zombie.EndTransaction(ctx, kgo.TryCommit); err == nil {
		t.Fatal("the zombie's commit was taken")
	}

	if err := next.ProduceSync(ctx, &kgo.Record{Partition: 1, Value: []byte("next-1")}).FirstErr(); err != nil {
		t.Fatal(err)
	}
	if err := next.EndTransaction(ctx, kgo.TryCommit); err != nil {
		t.Fatal(err)
	}
	got := readTopic(t, ctx, tt.client, topic, kgo.ReadCommitted(), 2)
	slices.Sort(got)
	if want := []string{"next-0", "next-1"}; !slices.Equal(got, want) {
		t.Fatalf("read_committed saw %v, want %v", got, want)
	}
}

// checkGroupTransactSession: a GroupTransactSession copies a topic to
// another, committing its group's offsets in each transaction
// (TxnOffsetCommit; AddOffsetsToTxn before it only under version 1); the
// copy read_committed is the input exactly, and the group's offsets are
// the input's end.
func checkGroupTransactSession(t *testing.T, tt txnTarget, version int16) {
	ctx := ctxFor(t, 2*time.Minute)
	in, out, group := "etl-in", "etl-out", "etl"
	tt.createTopic(t, ctx, in, 2)
	tt.createTopic(t, ctx, out, 2)
	const n = 300
	var want []string
	src := tt.client(kgo.DefaultProduceTopic(in))
	for i := range n {
		v := strconv.Itoa(i)
		want = append(want, v)
		src.Produce(ctx, &kgo.Record{Value: []byte(v)}, nil)
	}
	if err := src.Flush(ctx); err != nil {
		t.Fatal(err)
	}

	sent := newSentRequests()
	var sessOpts []kgo.Opt
	sessOpts = append(sessOpts, tt.clientOpts()...)
	sessOpts = append(sessOpts, kgo.TransactionalID("etl"), kgo.DefaultProduceTopic(out), kgo.ConsumerGroup(group), kgo.ConsumeTopics(in),
		kgo.FetchIsolationLevel(kgo.ReadCommitted()), kgo.WithHooks(sent), kgo.FetchMaxWait(200*time.Millisecond))
	sess, err := kgo.NewGroupTransactSession(sessOpts...)
	if err != nil {
		t.Fatal(err)
	}
	defer sess.Close()
	if err := sess.Client().Ping(ctx); err != nil {
		t.Fatal(err)
	}
	copied := 0
	for copied < n {
		fs := sess.PollFetches(ctx)
		if err := ctx.Err(); err != nil {
			t.Fatalf("copied %d of %d: %v", copied, n, err)
		}
		fs.EachError(func(topic string, p int32, err error) { t.Logf("fetch %s-%d: %v", topic, p, err) })
		if fs.NumRecords() == 0 {
			continue
		}
		if err := sess.Begin(); err != nil {
			t.Fatal(err)
		}
		var rs []*kgo.Record
		fs.EachRecord(func(r *kgo.Record) { rs = append(rs, &kgo.Record{Value: r.Value}) })
		if err := sess.ProduceSync(ctx, rs...).FirstErr(); err != nil {
			t.Fatal(err)
		}
		committed, err := sess.End(ctx, kgo.TryCommit)
		if err != nil {
			t.Fatal(err)
		}
		if committed {
			copied += len(rs)
		}
	}
	if version >= 2 && (sent.count(kmsg.AddOffsetsToTxn) != 0 || sent.count(kmsg.AddPartitionsToTxn) != 0) ||
		version < 2 && sent.count(kmsg.AddOffsetsToTxn) == 0 {
		t.Fatalf("transaction.version %d: the session sent %d AddOffsetsToTxn, %d AddPartitionsToTxn", version,
			sent.count(kmsg.AddOffsetsToTxn), sent.count(kmsg.AddPartitionsToTxn))
	}
	if sent.count(kmsg.TxnOffsetCommit) == 0 {
		t.Fatal("the session committed no offsets")
	}

	got := readTopic(t, ctx, tt.client, out, kgo.ReadCommitted(), n)
	slices.Sort(got)
	slices.Sort(want)
	if !slices.Equal(got, want) {
		t.Fatalf("read_committed copy has %d records, want the %d of the input exactly", len(got), len(want))
	}
	adm := kadm.NewClient(tt.client())
	clusterWait.For(t, "the group's offsets at the input's end", func() (bool, string) {
		offsets, err := adm.FetchOffsets(ctx, group)
		if err != nil {
			return false, err.Error()
		}
		ends, err := adm.ListEndOffsets(ctx, in)
		if err != nil {
			return false, err.Error()
		}
		var wrong error
		ends.Each(func(o kadm.ListedOffset) {
			c, ok := offsets.Lookup(in, o.Partition)
			if o.Offset > 0 && (!ok || c.At != o.Offset) {
				wrong = errors.Join(wrong, fmt.Errorf("%s-%d: committed %d, end %d", in, o.Partition, c.At, o.Offset))
			}
		})
		return wrong == nil, fmt.Sprint(wrong)
	})
}

// TestTransactionVersion2WithKgo: against one mqd, kgo speaks
// transaction.version 2 (no AddPartitionsToTxn nor AddOffsetsToTxn, a new
// epoch at every end) for transactions committed and aborted, a
// GroupTransactSession, and a fenced zombie; with transaction.version=1
// the same client stays on the earlier protocol.
func TestTransactionVersion2WithKgo(t *testing.T) {
	parallel(t)
	for _, version := range []int16{2, 1} {
		t.Run(fmt.Sprintf("transaction.version=%d", version), func(t *testing.T) {
			var props []string
			if version != 2 {
				props = append(props, fmt.Sprintf("transaction.version=%d", version))
			}
			b := startBroker(t, brokerOpts{props: props})
			tt := txnTarget{client: b.client, rf: 1, opts: []kgo.Opt{kgo.SeedBrokers(b.addr)}}
			checkTransactionProtocol(t, tt, version)
			checkGroupTransactSession(t, tt, version)
			checkZombieFenced(t, tt)
		})
	}
}

// TestClusterTransactionVersion2WithKgo is TestTransactionVersion2WithKgo
// on three nodes, every partition with three replicas: the leaders add
// partitions with coordinators on other nodes.
func TestClusterTransactionVersion2WithKgo(t *testing.T) {
	parallel(t)
	c := startCluster(t, 3, clusterOpts{props: []string{"transaction.state.log.num.partitions=3", "offsets.topic.num.partitions=3"}})
	tt := txnTarget{client: c.client, rf: 3, opts: c.clientOpts(c.bootstrap()...)}
	checkTransactionProtocol(t, tt, 2)
	checkGroupTransactSession(t, tt, 2)
	checkZombieFenced(t, tt)
}
