package node

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/mqproject/mq/lib/controller"
	"github.com/mqproject/mq/lib/mqtest"
	"github.com/mqproject/mq/lib/record"
)

// TestClusterNewLeaderAnswersBeforeItsPartitionsApplyTheImage checks
// that a follower just elected leader answers a client that learnt of
// the election (from any broker's Metadata) at once, although its
// partitions have not applied the image that made it leader: the lookup
// applies it first. The followers' follow loops are held so that the
// window stays open while the test asks.
func TestClusterNewLeaderAnswersBeforeItsPartitionsApplyTheImage(t *testing.T) {
	c := startCluster(t, 3, nil)
	createReplicated(t, c, "moves", 1)
	produceAll(t, c.client(kgo.RequiredAcks(kgo.AllISRAcks())), "moves", 0, 10)

	before := c.image().Partition("moves", 0)
	for id, d := range c.Running() {
		if id != before.Leader {
			t.Cleanup(d.parts.HoldFollowForTest())
		}
	}
	c.Crash(before.Leader)
	img := c.waitImage("a new leader", func(img *controller.Image) bool {
		p := img.Partition("moves", 0)
		return p != nil && p.Leader >= 0 && p.Leader != before.Leader
	})
	after := img.Partition("moves", 0)
	leader := c.Get(after.Leader)
	if h := leader.parts.Lookup("moves", 0); h == nil || h.IsLeader() {
		t.Fatalf("node %d's partition leads already, or is not open: the window under test is closed", after.Leader)
	}

	// kgo sets a Produce request's acks from its own: the leader's, as the
	// other follower is held too and would not move the high-water mark.
	cl, err := kgo.NewClient(kgo.SeedBrokers(c.Member(after.Leader).KafkaAddr),
		kgo.RequiredAcks(kgo.LeaderAck()), kgo.DisableIdempotentWrite())
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	ask := func(req kmsg.Request) kmsg.Response {
		t.Helper()
		resp, err := cl.Broker(int(after.Leader)).Request(ctx, req)
		if err != nil {
			t.Fatalf("%s: %v", kmsg.NameForKey(req.Key()), err)
		}
		return resp
	}
	check := func(api string, code int16, what string) {
		t.Helper()
		if err := kerr.ErrorForCode(code); err != nil {
			t.Errorf("%s to the new leader, node %d, in epoch %d: %v (%s)", api, after.Leader, after.LeaderEpoch, err, what)
		}
	}

	epochs := kmsg.NewPtrOffsetForLeaderEpochRequest()
	epochs.ReplicaID = -1
	et := kmsg.NewOffsetForLeaderEpochRequestTopic()
	et.Topic = "moves"
	ep := kmsg.NewOffsetForLeaderEpochRequestTopicPartition()
	ep.CurrentLeaderEpoch, ep.LeaderEpoch = after.LeaderEpoch, before.LeaderEpoch
	et.Partitions = append(et.Partitions, ep)
	epochs.Topics = append(epochs.Topics, et)
	got := ask(epochs).(*kmsg.OffsetForLeaderEpochResponse).Topics[0].Partitions[0]
	check("OffsetForLeaderEpoch", got.ErrorCode, fmt.Sprintf("end offset %d", got.EndOffset))
	if got.ErrorCode == 0 && got.EndOffset != 10 {
		t.Errorf("OffsetForLeaderEpoch of epoch %d: end offset %d, want 10", before.LeaderEpoch, got.EndOffset)
	}

	list := kmsg.NewPtrListOffsetsRequest()
	list.ReplicaID = -1
	lt := kmsg.NewListOffsetsRequestTopic()
	lt.Topic = "moves"
	lp := kmsg.NewListOffsetsRequestTopicPartition()
	lp.CurrentLeaderEpoch, lp.Timestamp = after.LeaderEpoch, -2
	lt.Partitions = append(lt.Partitions, lp)
	list.Topics = append(list.Topics, lt)
	listed := ask(list).(*kmsg.ListOffsetsResponse).Topics[0].Partitions[0]
	check("ListOffsets", listed.ErrorCode, fmt.Sprintf("offset %d", listed.Offset))

	fetch := kmsg.NewPtrFetchRequest()
	fetch.ReplicaID, fetch.MaxBytes, fetch.SessionEpoch = -1, 1<<20, -1
	ft := kmsg.NewFetchRequestTopic()
	ft.Topic, ft.TopicID = "moves", img.Topics["moves"].ID
	fp := kmsg.NewFetchRequestTopicPartition()
	fp.CurrentLeaderEpoch, fp.PartitionMaxBytes = after.LeaderEpoch, 1<<20
	ft.Partitions = append(ft.Partitions, fp)
	fetch.Topics = append(fetch.Topics, ft)
	fetched := ask(fetch).(*kmsg.FetchResponse)
	if fetched.ErrorCode != 0 {
		t.Fatalf("Fetch: %v", kerr.ErrorForCode(fetched.ErrorCode))
	}
	check("Fetch", fetched.Topics[0].Partitions[0].ErrorCode, "")

	batch, err := record.Build(record.BuildOptions{}, []record.Record{{Value: []byte("after the move")}})
	if err != nil {
		t.Fatal(err)
	}
	produce := kmsg.NewPtrProduceRequest()
	produce.TimeoutMillis = 5000
	pt := kmsg.NewProduceRequestTopic()
	pt.Topic = "moves"
	pp := kmsg.NewProduceRequestTopicPartition()
	pp.Records = batch
	pt.Partitions = append(pt.Partitions, pp)
	produce.Topics = append(produce.Topics, pt)
	produced := ask(produce).(*kmsg.ProduceResponse).Topics[0].Partitions[0]
	check("Produce", produced.ErrorCode, fmt.Sprintf("base offset %d", produced.BaseOffset))
}

// TestClusterMetadataFindsATopicJustCreatedThroughAnotherBroker: a
// topic created through one broker is known to the next Metadata a
// client sends to any other, although that broker's controller applies
// the commit later (here 200 ms later): the answer waits for it to catch
// up with the active controller rather than say the topic is unknown.
func TestClusterMetadataFindsATopicJustCreatedThroughAnotherBroker(t *testing.T) {
	c := startCluster(t, 3, nil)
	var active, lagging int32 = -1, -1
	for id, d := range c.Running() {
		switch {
		case d.ctrl.IsLeader():
			active = id
		case lagging < 0:
			lagging = id
		}
	}
	if active < 0 || lagging < 0 {
		t.Fatalf("no active controller (%d) or no other node (%d)", active, lagging)
	}
	c.Get(lagging).ctrl.DelayApplyForTest(200 * time.Millisecond)
	t.Cleanup(func() { c.Get(lagging).ctrl.DelayApplyForTest(0) })

	cl, err := kgo.NewClient(kgo.SeedBrokers(c.Member(lagging).KafkaAddr))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	for i := range 3 {
		topic := fmt.Sprintf("fresh-%d", i)
		if _, err := c.Get(active).ctrl.CreateTopic(ctx, controller.CreateTopic{Name: topic, Partitions: 6, ReplicationFactor: 3}); err != nil {
			t.Fatal(err)
		}
		req := kmsg.NewPtrMetadataRequest()
		rt := kmsg.NewMetadataRequestTopic()
		rt.Topic = kmsg.StringPtr(topic)
		req.Topics = append(req.Topics, rt)
		raw, err := cl.Broker(int(lagging)).Request(ctx, req)
		if err != nil {
			t.Fatal(err)
		}
		got := raw.(*kmsg.MetadataResponse).Topics[0]
		if err := kerr.ErrorForCode(got.ErrorCode); err != nil || len(got.Partitions) != 6 {
			t.Errorf("Metadata of %s from node %d right after its creation through node %d: %v, %d partitions", topic, lagging, active, err, len(got.Partitions))
		}
	}
}

// TestClusterNewLeaderAnswersBeforeItsControllerAppliesTheElection: a
// client that learnt of an election from a broker ahead of the new
// leader, and sends the new leader epoch with its request, is answered
// once the new leader's controller has applied the election, not with
// UNKNOWN_LEADER_EPOCH. The replicas' controllers apply every commit
// 300 ms late (within the 1 s a lookup waits, with room for a busy
// machine); the fourth node, which holds no replica, is the one ahead.
func TestClusterNewLeaderAnswersBeforeItsControllerAppliesTheElection(t *testing.T) {
	c, before, after, _ := electAheadOfTheNewLeader(t)
	ctx, cl := leaderClient(t, c, after.Leader)
	epochs := kmsg.NewPtrOffsetForLeaderEpochRequest()
	epochs.ReplicaID = -1
	et := kmsg.NewOffsetForLeaderEpochRequestTopic()
	et.Topic = "moves"
	ep := kmsg.NewOffsetForLeaderEpochRequestTopicPartition()
	ep.CurrentLeaderEpoch, ep.LeaderEpoch = after.LeaderEpoch, before.LeaderEpoch
	et.Partitions = append(et.Partitions, ep)
	epochs.Topics = append(epochs.Topics, et)
	raw, err := cl.Broker(int(after.Leader)).Request(ctx, epochs)
	if err != nil {
		t.Fatal(err)
	}
	got := raw.(*kmsg.OffsetForLeaderEpochResponse).Topics[0].Partitions[0]
	if err := kerr.ErrorForCode(got.ErrorCode); err != nil || got.EndOffset != 10 {
		t.Errorf("OffsetForLeaderEpoch to the new leader, node %d, in epoch %d: %v, end offset %d, want 10", after.Leader, after.LeaderEpoch, err, got.EndOffset)
	}

	list := kmsg.NewPtrListOffsetsRequest()
	list.ReplicaID = -1
	lt := kmsg.NewListOffsetsRequestTopic()
	lt.Topic = "moves"
	lp := kmsg.NewListOffsetsRequestTopicPartition()
	lp.CurrentLeaderEpoch, lp.Timestamp = after.LeaderEpoch, -2
	lt.Partitions = append(lt.Partitions, lp)
	list.Topics = append(list.Topics, lt)
	raw, err = cl.Broker(int(after.Leader)).Request(ctx, list)
	if err != nil {
		t.Fatal(err)
	}
	if code := raw.(*kmsg.ListOffsetsResponse).Topics[0].Partitions[0].ErrorCode; code != 0 {
		t.Errorf("ListOffsets to the new leader, node %d, in epoch %d: %v", after.Leader, after.LeaderEpoch, kerr.ErrorForCode(code))
	}
}

// TestClusterNewLeaderServesAFetchBeforeItsControllerAppliesTheElection
// is the test above for a consumer's Fetch in the new leader epoch.
func TestClusterNewLeaderServesAFetchBeforeItsControllerAppliesTheElection(t *testing.T) {
	c, _, after, id := electAheadOfTheNewLeader(t)
	ctx, cl := leaderClient(t, c, after.Leader)
	fetch := kmsg.NewPtrFetchRequest()
	fetch.ReplicaID, fetch.MaxBytes, fetch.SessionEpoch = -1, 1<<20, -1
	ft := kmsg.NewFetchRequestTopic()
	ft.Topic, ft.TopicID = "moves", id
	fp := kmsg.NewFetchRequestTopicPartition()
	fp.CurrentLeaderEpoch, fp.PartitionMaxBytes = after.LeaderEpoch, 1<<20
	ft.Partitions = append(ft.Partitions, fp)
	fetch.Topics = append(fetch.Topics, ft)
	raw, err := cl.Broker(int(after.Leader)).Request(ctx, fetch)
	if err != nil {
		t.Fatal(err)
	}
	resp := raw.(*kmsg.FetchResponse)
	if resp.ErrorCode != 0 || len(resp.Topics) != 1 {
		t.Fatalf("Fetch: %v, %d topics", kerr.ErrorForCode(resp.ErrorCode), len(resp.Topics))
	}
	if code := resp.Topics[0].Partitions[0].ErrorCode; code != 0 {
		t.Errorf("Fetch from the new leader, node %d, in epoch %d: %v", after.Leader, after.LeaderEpoch, kerr.ErrorForCode(code))
	}
}

// electAheadOfTheNewLeader starts four nodes, puts the replicas of topic
// moves (ten records) on nodes 1 to 3, has the controllers of the
// followers apply every commit 300 ms late, crashes the leader, and
// returns once node 4, which holds no replica, sees the new leader:
// before the new leader's own controller does.
func electAheadOfTheNewLeader(t *testing.T) (c *testCluster, before, after *controller.Partition, id controller.TopicID) {
	t.Helper()
	c = startCluster(t, 4, nil)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	id, err := c.Get(4).ctrl.CreateTopic(ctx, controller.CreateTopic{Name: "moves", Assignments: [][]int32{{1, 2, 3}},
		Configs: map[string]string{"min.insync.replicas": "2"}})
	if err != nil {
		t.Fatal(err)
	}
	c.waitImage("moves fully in sync", func(img *controller.Image) bool { return fullyInSync(img, "moves") })
	produceAll(t, c.client(kgo.RequiredAcks(kgo.AllISRAcks())), "moves", 0, 10)

	before = c.image().Partition("moves", 0)
	for n := int32(1); n <= 3; n++ {
		if n != before.Leader {
			d := c.Get(n)
			d.ctrl.DelayApplyForTest(300 * time.Millisecond)
			t.Cleanup(func() { d.ctrl.DelayApplyForTest(0) })
		}
	}
	c.Crash(before.Leader)
	mqtest.WaitFor(t, "node 4 to see a new leader", func() (bool, string) {
		after = c.Get(4).ctrl.Image().Partition("moves", 0)
		return after != nil && after.Leader >= 0 && after.Leader != before.Leader, fmt.Sprintf("%+v", after)
	})
	if p := c.Get(after.Leader).ctrl.Image().Partition("moves", 0); p.LeaderEpoch >= after.LeaderEpoch {
		t.Logf("node %d's controller has applied the election already: the window under test is closed", after.Leader)
	}
	return c, before, after, id
}

// leaderClient is a client of node leader alone, and a context bounding
// the test's requests; both end with the test.
func leaderClient(t *testing.T, c *testCluster, leader int32) (context.Context, *kgo.Client) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	t.Cleanup(cancel)
	cl, err := kgo.NewClient(kgo.SeedBrokers(c.Member(leader).KafkaAddr))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(cl.Close)
	return ctx, cl
}
