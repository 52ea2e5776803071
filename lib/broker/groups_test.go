package broker

import (
	"bytes"
	"context"
	"fmt"
	"runtime"
	"sync"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/mqproject/mq/lib/config"
	"github.com/mqproject/mq/lib/group"
	"github.com/mqproject/mq/lib/server"
)

// startGroupBroker starts a broker for group tests: no initial rebalance
// delay and a small __consumer_offsets.
func startGroupBroker(t *testing.T, dir string) (*testBroker, string) {
	t.Helper()
	tb := startBroker(t, dir, func(s *config.Broker) {
		s.GroupInitialRebalanceDelay = 0
		s.OffsetsTopicNumPartitions = 4
	})
	return tb, serve(t, tb)
}

// produceN produces n records spread over the topic's partitions and
// waits for all of them.
func produceN(t *testing.T, addr, topic string, n int) {
	t.Helper()
	cl := newClient(t, addr, kgo.DefaultProduceTopic(topic), kgo.RecordPartitioner(kgo.RoundRobinPartitioner()))
	ctx := ctxTimeout(t, 30*time.Second)
	var wg sync.WaitGroup
	var mu sync.Mutex
	var firstErr error
	for i := range n {
		wg.Add(1)
		cl.Produce(ctx, &kgo.Record{Value: fmt.Appendf(nil, "%d", i)}, func(_ *kgo.Record, err error) {
			defer wg.Done()
			if err != nil {
				mu.Lock()
				firstErr = err
				mu.Unlock()
			}
		})
	}
	wg.Wait()
	if firstErr != nil {
		t.Fatal(firstErr)
	}
}

type seen struct {
	mu      sync.Mutex
	records map[string]int // "partition/offset" → times consumed
}

func (s *seen) count() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return len(s.records)
}

// runConsumer polls cl until ctx ends, recording what it gets.
func runConsumer(ctx context.Context, cl *kgo.Client, s *seen) {
	for ctx.Err() == nil {
		fs := cl.PollFetches(ctx)
		fs.EachRecord(func(r *kgo.Record) {
			s.mu.Lock()
			s.records[fmt.Sprintf("%d/%d", r.Partition, r.Offset)]++
			s.mu.Unlock()
		})
	}
}

func TestGroupConsumersSharePartitions(t *testing.T) {
	for _, tc := range []struct {
		name     string
		balancer kgo.GroupBalancer
	}{
		{"cooperative-sticky", kgo.CooperativeStickyBalancer()},
		{"range", kgo.RangeBalancer()},
		{"roundrobin", kgo.RoundRobinBalancer()},
	} {
		t.Run(tc.name, func(t *testing.T) {
			tb, addr := startGroupBroker(t, "")
			tb.createTopic(t, "events", 6, nil)
			const n = 600
			produceN(t, addr, "events", n)

			ctx, cancel := context.WithCancel(context.Background())
			defer cancel()
			s := &seen{records: map[string]int{}}
			var wg sync.WaitGroup
			var clients []*kgo.Client
			for i := range 3 {
				cl := newClient(t, addr, kgo.ConsumerGroup("g-"+tc.name), kgo.ConsumeTopics("events"),
					kgo.Balancers(tc.balancer), kgo.ClientID(fmt.Sprintf("consumer-%d", i)),
					kgo.FetchMaxWait(200*time.Millisecond), kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()))
				clients = append(clients, cl)
				wg.Add(1)
				go func() { defer wg.Done(); runConsumer(ctx, cl, s) }()
			}
			adm := kadm.NewClient(newClient(t, addr))
			var last string
			defer func() {
				if t.Failed() {
					t.Logf("last group state: %s", last)
				}
			}()
			tb.waitFor(t, "3 members with 2 partitions each", func() bool {
				gs, err := adm.DescribeGroups(ctxTimeout(t, 10*time.Second), "g-"+tc.name)
				if err != nil {
					last = err.Error()
					return false
				}
				g := gs["g-"+tc.name]
				last = fmt.Sprintf("%s %d members", g.State, len(g.Members))
				if g.State != "Stable" || len(g.Members) != 3 {
					return false
				}
				for _, m := range g.Members {
					ca, ok := m.Assigned.AsConsumer()
					if !ok || len(ca.Topics) != 1 || len(ca.Topics[0].Partitions) != 2 {
						last += fmt.Sprintf(" %s=%v", m.ClientID, ca)
						return false
					}
					if m.ClientHost != "/127.0.0.1" {
						last += " host " + m.ClientHost
						return false
					}
				}
				return true
			})

			tb.waitFor(t, "every record consumed", func() bool { return s.count() == n })
			for _, cl := range clients {
				if err := cl.CommitUncommittedOffsets(ctxTimeout(t, 10*time.Second)); err != nil {
					t.Fatal(err)
				}
			}
			cancel()
			wg.Wait()
			s.mu.Lock()
			for k, c := range s.records {
				if c != 1 {
					t.Errorf("record %s consumed %d times", k, c)
				}
			}
			s.mu.Unlock()
			offs, err := adm.FetchOffsets(ctxTimeout(t, 10*time.Second), "g-"+tc.name)
			if err != nil {
				t.Fatal(err)
			}
			var total int64
			offs.Each(func(o kadm.OffsetResponse) { total += o.At })
			if total != n {
				t.Errorf("committed offsets sum to %d, want %d", total, n)
			}
			// Every consumer leaves: the group is empty, its offsets stay.
			for _, cl := range clients {
				cl.Close()
			}
			tb.waitFor(t, "group empty", func() bool {
				gs, err := adm.DescribeGroups(ctxTimeout(t, 10*time.Second), "g-"+tc.name)
				return err == nil && gs["g-"+tc.name].State == "Empty"
			})
		})
	}
}

func TestGroupOffsetsSurviveBrokerRestart(t *testing.T) {
	dir := t.TempDir()
	tb, addr := startGroupBroker(t, dir)
	tb.createTopic(t, "t", 2, nil)
	adm := kadm.NewClient(newClient(t, addr))
	ctx := ctxTimeout(t, 30*time.Second)
	var os kadm.Offsets
	os.Add(kadm.Offset{Topic: "t", Partition: 0, At: 42, LeaderEpoch: -1, Metadata: "m0"})
	os.Add(kadm.Offset{Topic: "t", Partition: 1, At: 7, LeaderEpoch: -1})
	resp, err := adm.CommitOffsets(ctx, "simple", os)
	if err != nil || resp.Error() != nil {
		t.Fatalf("commit: %v %v", err, resp.Error())
	}
	// A second commit of partition 0 wins over the first after replay.
	os = kadm.Offsets{}
	os.Add(kadm.Offset{Topic: "t", Partition: 0, At: 43, LeaderEpoch: -1})
	if resp, err := adm.CommitOffsets(ctx, "simple", os); err != nil || resp.Error() != nil {
		t.Fatalf("commit: %v %v", err, resp.Error())
	}
	if err := tb.Close(); err != nil {
		t.Fatal(err)
	}
	tb.ctrl.Close()

	tb2, addr2 := startGroupBroker(t, dir)
	adm2 := kadm.NewClient(newClient(t, addr2))
	var got kadm.OffsetResponses
	tb2.waitFor(t, "offsets after restart", func() bool {
		got, err = adm2.FetchOffsets(ctxTimeout(t, 10*time.Second), "simple")
		return err == nil && got.Error() == nil
	})
	if o, _ := got.Lookup("t", 0); o.At != 43 {
		t.Errorf("t/0 = %+v, want 43", o)
	}
	if o, _ := got.Lookup("t", 1); o.At != 7 {
		t.Errorf("t/1 = %+v, want 7", o)
	}
	groups, err := adm2.ListGroups(ctx)
	if err != nil || len(groups) != 1 || groups["simple"].State != "Empty" {
		t.Errorf("groups after restart: %v %v", groups, err)
	}
}

func TestFindCoordinator(t *testing.T) {
	tb, _ := startGroupBroker(t, "")
	for _, v := range []int16{0, 3} {
		req := kmsg.NewPtrFindCoordinatorRequest()
		req.CoordinatorKey = "g"
		resp := roundTrip[*kmsg.FindCoordinatorResponse](t, tb.Broker, v, req)
		if resp.ErrorCode != 0 || resp.NodeID != 1 || resp.Host != "127.0.0.1" {
			t.Errorf("v%d: %+v", v, resp)
		}
	}
	req := kmsg.NewPtrFindCoordinatorRequest()
	req.CoordinatorKeys = []string{"a", "b", ""}
	resp := roundTrip[*kmsg.FindCoordinatorResponse](t, tb.Broker, 4, req)
	if len(resp.Coordinators) != 3 || resp.Coordinators[0].ErrorCode != 0 || resp.Coordinators[1].NodeID != 1 ||
		errName(resp.Coordinators[2].ErrorCode) != "INVALID_GROUP_ID" {
		t.Errorf("v4: %+v", resp.Coordinators)
	}
	req.CoordinatorType = 1
	resp = roundTrip[*kmsg.FindCoordinatorResponse](t, tb.Broker, 4, req)
	if resp.Coordinators[0].ErrorCode != 0 || resp.Coordinators[0].NodeID != 1 || errName(resp.Coordinators[2].ErrorCode) != "INVALID_REQUEST" {
		t.Errorf("transaction coordinator: %+v", resp.Coordinators)
	}
	if top := tb.ctrl.Image().Topics[transactionStateTopic]; top == nil || !top.Internal || top.Configs["cleanup.policy"] != "compact" {
		t.Errorf("transaction state topic: %+v", top)
	}
	req.CoordinatorType = 2
	resp = roundTrip[*kmsg.FindCoordinatorResponse](t, tb.Broker, 4, req)
	if errName(resp.Coordinators[0].ErrorCode) != "INVALID_REQUEST" {
		t.Errorf("key type 2: %s", errName(resp.Coordinators[0].ErrorCode))
	}
	img := tb.ctrl.Image()
	if top := img.Topics[offsetsTopic]; top == nil || !top.Internal || len(top.Partitions) != 4 || top.Configs["cleanup.policy"] != "compact" {
		t.Errorf("internal topic: %+v", top)
	}
	if got := group.PartitionFor("g", 4); tb.groups.c.Check("g") != nil {
		t.Errorf("group g (partition %d) not served", got)
	}
}

// The group keeps each member's protocol metadata for as long as the
// member lives; it must not keep the JoinGroup request's frame alive with
// it (up to socket.request.max.bytes, outside queued.max.request.bytes).
func TestJoinGroupKeepsNoRequestFrame(t *testing.T) {
	tb, _ := startGroupBroker(t, "")
	fc := kmsg.NewPtrFindCoordinatorRequest()
	fc.CoordinatorKey = "g"
	if resp := roundTrip[*kmsg.FindCoordinatorResponse](t, tb.Broker, 3, fc); resp.ErrorCode != 0 {
		t.Fatalf("find coordinator: %s", errName(resp.ErrorCode))
	}
	req := kmsg.NewPtrJoinGroupRequest()
	req.SetVersion(5)
	req.Group, req.ProtocolType = "g", "consumer"
	req.SessionTimeoutMillis, req.RebalanceTimeoutMillis = 30000, 30000
	req.InstanceID = kmsg.StringPtr("static-1") // a known member id at once (no MEMBER_ID_REQUIRED round)
	p := kmsg.NewJoinGroupRequestProtocol()
	p.Name, p.Metadata = "range", bytes.Repeat([]byte{7}, 64)
	req.Protocols = append(req.Protocols, p)
	frame := req.AppendTo(make([]byte, 0, 2<<20))
	collected := make(chan struct{})
	runtime.AddCleanup(&frame[0], func(c chan struct{}) { close(c) }, collected)
	body := kmsg.NewPtrJoinGroupRequest()
	body.SetVersion(5)
	if err := body.ReadFrom(frame); err != nil {
		t.Fatal(err)
	}
	sreq := &server.Request{Key: body.Key(), Version: 5, Body: body}
	resp := sreq.Answer(tb.Handle(context.Background(), testConn, sreq)).Msg.(*kmsg.JoinGroupResponse)
	if resp.ErrorCode != 0 || len(resp.Members) != 1 || !bytes.Equal(resp.Members[0].ProtocolMetadata, p.Metadata) {
		t.Fatalf("join: %v, members %v", kerr.ErrorForCode(resp.ErrorCode), resp.Members)
	}
	frame, body, sreq, resp = nil, nil, nil, nil
	runtime.GC()
	select {
	case <-collected:
	case <-time.After(10 * time.Second):
		t.Fatal("the JoinGroup request's frame is still referenced by the group")
	}
}
