package replica_test

import (
	"context"
	"fmt"
	"os"

	"github.com/mqproject/mq/lib/log"
	"github.com/mqproject/mq/lib/record"
	"github.com/mqproject/mq/lib/replica"
)

// A single node: the replica leads with ISR = {self}, so an acks=all append
// is on every in-sync replica, and readable, as soon as it returns.
func Example() {
	dir, err := os.MkdirTemp("", "replica-example")
	if err != nil {
		panic(err)
	}
	defer os.RemoveAll(dir)
	l, err := log.Open(dir, log.DefaultConfig(), log.Options{})
	if err != nil {
		panic(err)
	}
	p := replica.New(replica.Config{Topic: "orders", Partition: 0, NodeID: 1, MinInsyncReplicas: 1}, l)
	defer p.Close()
	// From the controller's image: epoch 0, leader 1, replicas and ISR {1}.
	if err := p.Become(replica.PartitionState{Leader: 1, LeaderEpoch: 0, Replicas: []int32{1}, ISR: []int32{1}}); err != nil {
		panic(err)
	}
	batch, err := record.Build(record.BuildOptions{}, []record.Record{{Value: []byte("hello")}})
	if err != nil {
		panic(err)
	}
	res, err := p.Append(batch, -1) // acks=all
	if err != nil {
		panic(err)
	}
	// acks=all waits here until the high-water mark passes the batch.
	if err := p.WaitHighWatermark(context.Background(), res.LastOffset, res.LeaderEpoch); err != nil {
		panic(err)
	}
	r, info, err := p.Read(0, 1<<20, -1) // a consumer (replica id -1)
	if err != nil {
		panic(err)
	}
	defer r.Release()
	fmt.Println(res.BaseOffset, info.HighWatermark, r.BaseOffset, r.LastOffset)
	// Output: 0 1 0 0
}
