package e2e

import (
	"fmt"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"
)

// TestKadmToolsWork runs what common Kafka tools (kadm's users, kafka-ui
// and the like) call on a cluster: log directories per broker, end offsets,
// and consumer-group lag, against a real mqd.
func TestKadmToolsWork(t *testing.T) {
	b := startBroker(t, brokerOpts{props: []string{"group.initial.rebalance.delay.ms=0"}})
	ctx := ctxFor(t, time.Minute)
	adm := b.admin()
	if _, err := adm.CreateTopic(ctx, 2, 1, nil, "lagged"); err != nil {
		t.Fatal(err)
	}
	cl := b.client(kgo.DefaultProduceTopic("lagged"), kgo.RecordPartitioner(kgo.ManualPartitioner()))
	for i := range 10 {
		r := &kgo.Record{Partition: int32(i % 2), Value: fmt.Appendf(nil, "v%d", i)}
		if err := cl.ProduceSync(ctx, r).FirstErr(); err != nil {
			t.Fatal(err)
		}
	}

	ends, err := adm.ListEndOffsets(ctx, "lagged")
	if err != nil || ends.Error() != nil {
		t.Fatalf("ListEndOffsets: %v %v", err, ends.Error())
	}
	for p := int32(0); p < 2; p++ {
		if o, ok := ends.Lookup("lagged", p); !ok || o.Offset != 5 {
			t.Fatalf("end offset of partition %d: %+v, want 5", p, o)
		}
	}

	dirs, err := adm.DescribeBrokerLogDirs(ctx, 1, nil)
	if err != nil || dirs.Error() != nil {
		t.Fatalf("DescribeBrokerLogDirs: %v %v", err, dirs.Error())
	}
	var size int64
	dirs.EachPartition(func(p kadm.DescribedLogDirPartition) { size += p.Size })
	if size == 0 {
		t.Fatalf("log dirs report no bytes for the topic: %+v", dirs)
	}
	all, err := adm.DescribeAllLogDirs(ctx, nil)
	if err != nil || len(all) != 1 || all[1].Error() != nil {
		t.Fatalf("DescribeAllLogDirs: %v %+v", err, all)
	}

	// A group that read 3 of partition 0's 5 records and none of 1's.
	var commit kadm.Offsets
	commit.AddOffset("lagged", 0, 3, -1)
	if resp, err := adm.CommitOffsets(ctx, "readers", commit); err != nil || resp.Error() != nil {
		t.Fatalf("commit: %v %v", err, resp.Error())
	}
	lags, err := adm.Lag(ctx, "readers")
	if err != nil {
		t.Fatalf("Lag: %v", err)
	}
	lag := lags["readers"]
	if lag.Error() != nil {
		t.Fatalf("Lag of readers: %v", lag.Error())
	}
	if got := lag.Lag.Total(); got != 2+5 {
		t.Fatalf("total lag %d, want 7 (2 on partition 0, 5 on 1 never committed): %+v", got, lag.Lag)
	}
}
