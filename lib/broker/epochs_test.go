package broker

import (
	"context"
	"fmt"
	"slices"
	"strconv"
	"sync/atomic"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/mqproject/mq/lib/controller"
	"github.com/mqproject/mq/lib/record"
)

// registerPeer registers another broker in tb's image: a node that does
// not run, so that partitions can be placed on it.
func (tb *testBroker) registerPeer(t testing.TB, id int32, port int32, rack *string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if _, err := tb.ctrl.RegisterBroker(ctx, controller.Broker{ID: id, Host: "127.0.0.1", Port: port, Rack: rack}); err != nil {
		t.Fatal(err)
	}
}

// createAssigned creates a topic with one partition per assignment (the
// first replica leads) and waits until this node applied it.
func (tb *testBroker) createAssigned(t testing.TB, name string, assignments ...[]int32) controller.TopicID {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	id, err := tb.ctrl.CreateTopic(ctx, controller.CreateTopic{Name: name, Partitions: int32(len(assignments)), Assignments: assignments})
	if err != nil {
		t.Fatal(err)
	}
	tb.waitFor(t, "topic "+name+" applied", func() bool {
		for p, a := range assignments {
			if slices.Contains(a, 1) && tb.parts.Lookup(name, int32(p)) == nil {
				return false
			}
		}
		return true
	})
	return id
}

// moveLeader changes a partition's leader, ISR and leader epoch in the
// image and waits until this node's replica (if it hosts one) has the
// epoch.
func (tb *testBroker) moveLeader(t testing.TB, topic string, partition, leader int32, isr []int32, epoch int32) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := tb.ctrl.OverridePartition(ctx, controller.PartitionOverride{
		Topic: topic, Partition: partition, Leader: leader, ISR: isr, LeaderEpoch: epoch,
	}); err != nil {
		t.Fatal(err)
	}
	tb.waitFor(t, fmt.Sprintf("%s-%d at leader epoch %d", topic, partition, epoch), func() bool {
		h := tb.parts.Lookup(topic, partition)
		return h == nil || h.LeaderEpoch() == epoch
	})
}

// epochRequest asks for one partition's end offset of leaderEpoch.
func epochRequest(topic string, partition, currentEpoch, leaderEpoch int32) *kmsg.OffsetForLeaderEpochRequest {
	req := kmsg.NewPtrOffsetForLeaderEpochRequest()
	req.ReplicaID = -1
	rt := kmsg.NewOffsetForLeaderEpochRequestTopic()
	rt.Topic = topic
	rp := kmsg.NewOffsetForLeaderEpochRequestTopicPartition()
	rp.Partition, rp.CurrentLeaderEpoch, rp.LeaderEpoch = partition, currentEpoch, leaderEpoch
	rt.Partitions = append(rt.Partitions, rp)
	req.Topics = append(req.Topics, rt)
	return req
}

func offsetForEpoch(t *testing.T, tb *testBroker, version int16, req *kmsg.OffsetForLeaderEpochRequest) kmsg.OffsetForLeaderEpochResponseTopicPartition {
	t.Helper()
	resp := tb.do(t, version, req).(*kmsg.OffsetForLeaderEpochResponse)
	if len(resp.Topics) != 1 || len(resp.Topics[0].Partitions) != 1 {
		t.Fatalf("response %+v, want one partition", resp)
	}
	return resp.Topics[0].Partitions[0]
}

// TestOffsetForLeaderEpochAnswersFromTheEpochHistory builds a log with
// epochs 0, 1 and 3 (offsets 0-3, 4-5, 6-7) and asks for each epoch.
func TestOffsetForLeaderEpochAnswersFromTheEpochHistory(t *testing.T) {
	tb := startBroker(t, "", nil)
	tb.registerPeer(t, 2, 9093, nil)
	tb.createAssigned(t, "oe", []int32{1, 2})
	tb.createAssigned(t, "follower", []int32{2, 1})
	tb.createAssigned(t, "elsewhere", []int32{2})
	produceN := func(n int) {
		t.Helper()
		if got := produce(t, tb, "oe", 0, 1, testBatch(t, record.BuildOptions{}, "x", n)); got.ErrorCode != 0 {
			t.Fatal(kerr.ErrorForCode(got.ErrorCode))
		}
	}
	produceN(2)
	produceN(2)
	tb.moveLeader(t, "oe", 0, 1, []int32{1, 2}, 1)
	produceN(2)
	tb.moveLeader(t, "oe", 0, 1, []int32{1, 2}, 3)
	produceN(2)

	const current = 3
	tests := []struct {
		name                string
		version             int16
		replicaID           int32
		topic               string
		partition           int32
		currentEpoch, epoch int32
		wantErr             *kerr.Error
		wantEpoch           int32
		wantEndOffset       int64
	}{
		{"first epoch ends where the second starts", 4, -1, "oe", 0, current, 0, nil, 0, 4},
		{"middle epoch", 4, -1, "oe", 0, current, 1, nil, 1, 6},
		{"epoch never led: the largest before it", 4, -1, "oe", 0, current, 2, nil, 1, 6},
		{"latest epoch ends at the log end", 4, -1, "oe", 0, current, 3, nil, 3, 8},
		{"epoch newer than the history", 4, -1, "oe", 0, current, 4, nil, -1, -1},
		{"no current epoch", 4, -1, "oe", 0, -1, 1, nil, 1, 6},
		{"a follower asking", 4, 2, "oe", 0, current, 0, nil, 0, 4},
		{"v3, a follower", 3, 2, "oe", 0, current, 3, nil, 3, 8},
		{"v2", 2, -1, "oe", 0, current, 1, nil, 1, 6},
		{"v1: no current epoch to check", 1, -1, "oe", 0, 0, 1, nil, 1, 6},
		{"v0", 0, -1, "oe", 0, -1, 0, nil, -1, 4}, // v0 has no LeaderEpoch: the default decodes
		{"client's current epoch is older", 4, -1, "oe", 0, current - 1, 1, kerr.FencedLeaderEpoch, -1, -1},
		{"client's current epoch is newer", 4, -1, "oe", 0, current + 1, 1, kerr.UnknownLeaderEpoch, -1, -1},
		{"follower replica", 4, -1, "follower", 0, -1, 0, kerr.NotLeaderForPartition, -1, -1},
		{"follower replica, follower asking", 4, 1, "follower", 0, -1, 0, kerr.NotLeaderForPartition, -1, -1},
		{"follower replica, newer current epoch", 4, -1, "follower", 0, 5, 0, kerr.UnknownLeaderEpoch, -1, -1},
		{"not hosted here", 4, -1, "elsewhere", 0, -1, 0, kerr.NotLeaderForPartition, -1, -1},
		{"unknown partition", 4, -1, "oe", 1, -1, 0, kerr.UnknownTopicOrPartition, -1, -1},
		{"unknown topic", 4, -1, "nope", 0, -1, 0, kerr.UnknownTopicOrPartition, -1, -1},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			req := epochRequest(tt.topic, tt.partition, tt.currentEpoch, tt.epoch)
			req.ReplicaID = tt.replicaID
			got := offsetForEpoch(t, tb, tt.version, req)
			wantCode := int16(0)
			if tt.wantErr != nil {
				wantCode = tt.wantErr.Code
			}
			if got.ErrorCode != wantCode || got.LeaderEpoch != tt.wantEpoch || got.EndOffset != tt.wantEndOffset || got.Partition != tt.partition {
				t.Fatalf("got %v epoch %d end offset %d partition %d, want %v epoch %d end offset %d",
					kerr.ErrorForCode(got.ErrorCode), got.LeaderEpoch, got.EndOffset, got.Partition,
					kerr.ErrorForCode(wantCode), tt.wantEpoch, tt.wantEndOffset)
			}
		})
	}
}

// TestOffsetForLeaderEpochOfAnEmptyLog: a leader records its epoch when it
// starts leading, before any append, so a follower asking about it learns
// the epoch ends at the (empty) log end rather than nothing.
func TestOffsetForLeaderEpochOfAnEmptyLog(t *testing.T) {
	tb := startBroker(t, "", nil)
	tb.createTopic(t, "empty", 1, nil)
	epoch := tb.parts.Lookup("empty", 0).LeaderEpoch()
	got := offsetForEpoch(t, tb, 4, epochRequest("empty", 0, -1, epoch))
	if got.ErrorCode != 0 || got.LeaderEpoch != epoch || got.EndOffset != 0 {
		t.Fatalf("got %v epoch %d end offset %d, want no error, %d, 0", kerr.ErrorForCode(got.ErrorCode), got.LeaderEpoch, got.EndOffset, epoch)
	}
	if got := offsetForEpoch(t, tb, 4, epochRequest("empty", 0, -1, epoch+1)); got.LeaderEpoch != -1 || got.EndOffset != -1 {
		t.Fatalf("an epoch after the leader's: epoch %d end offset %d, want -1, -1", got.LeaderEpoch, got.EndOffset)
	}
}

// TestKgoConsumerFollowsAnEpochChangeWithoutDataLoss: kgo validates its
// position with OffsetForLeaderEpoch when it learns of a new leader epoch
// (KIP-320) and when a group resumes from a commit that carries one. A
// wrong answer makes it report data loss and rewind (re-reading records),
// so every record must be read once, in order, and the validation must
// have happened.
func TestKgoConsumerFollowsAnEpochChangeWithoutDataLoss(t *testing.T) {
	tb := startBroker(t, "", nil)
	addr := serve(t, tb)
	tb.createTopic(t, "trunc", 1, nil)
	var epochRequests atomic.Int32
	hook := epochRequestHook{&epochRequests}
	ctx := ctxTimeout(t, 30*time.Second)
	producer := newClient(t, addr, kgo.DefaultProduceTopic("trunc"))
	next := 0
	produceN := func(n int) {
		t.Helper()
		for range n {
			if err := producer.ProduceSync(ctx, &kgo.Record{Value: []byte(strconv.Itoa(next))}).FirstErr(); err != nil {
				t.Fatal(err)
			}
			next++
		}
	}
	produceN(10)

	consumer := newClient(t, addr, kgo.ConsumeTopics("trunc"), kgo.ConsumerGroup("g"),
		kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()), kgo.DisableAutoCommit(), kgo.WithHooks(hook))
	seen := 0
	read := func(upTo int) {
		t.Helper()
		for seen < upTo {
			fs := consumer.PollFetches(ctx)
			if err := ctx.Err(); err != nil {
				t.Fatalf("read %d of %d records: %v", seen, upTo, err)
			}
			fs.EachError(func(topic string, p int32, err error) {
				t.Fatalf("fetch %s-%d: %v", topic, p, err)
			})
			for _, r := range fs.Records() {
				if string(r.Value) != strconv.Itoa(seen) || r.Offset != int64(seen) {
					t.Fatalf("record %q at offset %d, want %d at %d: the consumer rewound", r.Value, r.Offset, seen, seen)
				}
				seen++
			}
		}
	}
	read(10)
	// A new leader epoch: the consumer's next fetch is fenced, it refreshes
	// its metadata and validates its position before fetching on.
	tb.moveLeader(t, "trunc", 0, 1, []int32{1}, 1)
	produceN(10)
	read(20)
	if epochRequests.Load() == 0 {
		t.Fatal("kgo never asked OffsetForLeaderEpoch after the epoch change")
	}
	if err := consumer.CommitUncommittedOffsets(ctx); err != nil {
		t.Fatal(err)
	}
	consumer.Close()

	// A group resuming from a commit made at epoch 1 validates it first.
	produceN(5)
	epochRequests.Store(0)
	resumed := newClient(t, addr, kgo.ConsumeTopics("trunc"), kgo.ConsumerGroup("g"),
		kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()), kgo.WithHooks(hook))
	consumer = resumed
	read(25)
	if epochRequests.Load() == 0 {
		t.Fatal("kgo resumed from a commit without asking OffsetForLeaderEpoch")
	}
}

// epochRequestHook counts the OffsetForLeaderEpoch requests a client
// sends.
type epochRequestHook struct{ n *atomic.Int32 }

func (h epochRequestHook) OnBrokerWrite(_ kgo.BrokerMetadata, key int16, _ int, _, _ time.Duration, err error) {
	if key == kmsg.OffsetForLeaderEpoch.Int16() && err == nil {
		h.n.Add(1)
	}
}
