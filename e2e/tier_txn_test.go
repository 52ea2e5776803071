package e2e

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
)

// TestTieredTransactionsReadCommitted: a transactional producer (kgo)
// writes to a tiered topic, one transaction in three aborted, 10× the
// local retention; once local retention removed the oldest segments
// (uploaded with their aborted-transaction indexes), a read_committed
// consumer replaying from offset 0 (kgo, then kcat) sees exactly the
// committed records, in order, and a read_uncommitted one sees every
// record.
func TestTieredTransactionsReadCommitted(t *testing.T) {
	parallel(t)
	for _, st := range tierStores {
		t.Run(st.name, func(t *testing.T) {
			url, objects := st.open(t)
			b := startBroker(t, brokerOpts{props: tierProps(url)})
			adm := b.admin()
			const topic = "tiered-txn"
			if _, err := adm.CreateTopic(ctxFor(t, 30*time.Second), 1, 1, tieredTopicConfigs(nil), topic); err != nil {
				t.Fatal(err)
			}
			pr := b.client(kgo.TransactionalID("tier-txn-"+st.name), kgo.DefaultProduceTopic(topic),
				kgo.RecordPartitioner(kgo.ManualPartitioner()), kgo.ProducerBatchCompression(kgo.NoCompression()))
			const txns, perTxn = 60, 50 // ~400 KiB: 12× local.retention.bytes
			var committed []string
			total := 0
			ctx := ctxFor(t, 2*time.Minute)
			for i := range txns {
				abort := i%3 == 1
				if err := pr.BeginTransaction(); err != nil {
					t.Fatal(err)
				}
				for j := range perTxn {
					v := fmt.Sprintf("txn-%03d-%02d-aborted=%v-", i, j, abort)
					v += strings.Repeat("x", 100-len(v))
					if !abort {
						committed = append(committed, v)
					}
					total++
					pr.Produce(ctx, &kgo.Record{Partition: 0, Value: []byte(v)}, func(_ *kgo.Record, err error) {
						if err != nil {
							t.Errorf("produce: %v", err)
						}
					})
				}
				if err := pr.Flush(ctx); err != nil {
					t.Fatal(err)
				}
				if err := pr.EndTransaction(ctx, kgo.TransactionEndTry(!abort)); err != nil {
					t.Fatalf("end transaction %d: %v", i, err)
				}
			}
			cl := b.client()
			// The end offset counts a marker per transaction; the local
			// log keeps 32 KiB of ~400 KiB.
			waitTiered(t, cl, topic, int64(total/2))
			got := consumeIsolated(t, b.addr, topic, len(committed), kgo.ReadCommitted())
			checkSame(t, "kgo read_committed from the beginning", got, committed)
			if all := consumeIsolated(t, b.addr, topic, total, kgo.ReadUncommitted()); len(all) != total {
				t.Fatalf("read_uncommitted: %d records, want %d", len(all), total)
			}
			// kcat (librdkafka) reads read_committed by default.
			out := kcat(t, b, "", "-C", "-t", topic, "-p", "0", "-o", "beginning", "-e", "-f", "%s\n")
			checkSame(t, "kcat read_committed from the beginning", strings.Split(strings.TrimSuffix(out, "\n"), "\n"), committed)
			var txnIndexes int
			for _, k := range objects("") {
				if strings.HasSuffix(k, ".txnindex") {
					txnIndexes++
				}
			}
			if txnIndexes == 0 {
				t.Fatal("no aborted-transaction index in the store")
			}
		})
	}
}

// consumeIsolated reads partition 0 of topic from the beginning at an
// isolation level until n records, and returns their values.
func consumeIsolated(t *testing.T, addr, topic string, n int, level kgo.IsolationLevel) []string {
	t.Helper()
	cl := partitionReader(t, addr, topic, kgo.NewOffset().AtStart(), kgo.FetchIsolationLevel(level))
	defer cl.Close()
	return pollValues(t, cl, n, 60*time.Second)
}
