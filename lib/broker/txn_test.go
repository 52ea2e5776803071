package broker

import (
	"context"
	"fmt"
	"maps"
	"net"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/mqproject/mq/lib/auth"
	"github.com/mqproject/mq/lib/config"
	"github.com/mqproject/mq/lib/server"
	"github.com/mqproject/mq/lib/txn"
)

// markerLeader serves the Broker and answers WriteTxnMarkers itself: it
// stands in for the partition leaders' handler (not part of the
// coordinator), so that the test sees what the coordinator sends. The
// first answers for each partition are fail, then success.
type markerLeader struct {
	*Broker
	mu       sync.Mutex
	fail     map[string]int // partition → answers left that fail
	received []string
}

// ApiVersions is the Broker's: it serves WriteTxnMarkers, which Handle
// answers here instead.
func (m *markerLeader) ApiVersions() []kmsg.ApiVersionsResponseApiKey {
	return m.Broker.ApiVersions()
}

func (m *markerLeader) Handle(ctx context.Context, c *server.ConnInfo, req *server.Request) server.Reply {
	if req.Key != kmsg.WriteTxnMarkers.Int16() {
		return m.Broker.Handle(ctx, c, req)
	}
	r := req.Body.(*kmsg.WriteTxnMarkersRequest)
	resp := r.ResponseKind().(*kmsg.WriteTxnMarkersResponse)
	m.mu.Lock()
	defer m.mu.Unlock()
	for _, mk := range r.Markers {
		rm := kmsg.NewWriteTxnMarkersResponseMarker()
		rm.ProducerID = mk.ProducerID
		for _, t := range mk.Topics {
			rt := kmsg.NewWriteTxnMarkersResponseMarkerTopic()
			rt.Topic = t.Topic
			for _, p := range t.Partitions {
				rp := kmsg.NewWriteTxnMarkersResponseMarkerTopicPartition()
				rp.Partition = p
				name := fmt.Sprintf("%s-%d", t.Topic, p)
				if m.fail[name] > 0 {
					m.fail[name]--
					rp.ErrorCode = kerr.NotLeaderForPartition.Code
				} else {
					m.received = append(m.received, fmt.Sprintf("v%d %s pid=%d epoch=%d commit=%v coordinator_epoch=%d",
						r.Version, name, mk.ProducerID, mk.ProducerEpoch, mk.Committed, mk.CoordinatorEpoch))
				}
				rt.Partitions = append(rt.Partitions, rp)
			}
			rm.Topics = append(rm.Topics, rt)
		}
		resp.Markers = append(resp.Markers, rm)
	}
	return reply(resp)
}

func (m *markerLeader) markers() []string {
	m.mu.Lock()
	defer m.mu.Unlock()
	return append([]string(nil), m.received...)
}

// startTxnBroker is a broker whose registered address is a markerLeader in
// front of it.
func startTxnBroker(t *testing.T, mods ...func(*config.Broker)) (*testBroker, *markerLeader) {
	t.Helper()
	tb := startBroker(t, "", func(s *config.Broker) {
		s.OffsetsTopicNumPartitions = 2
		s.TransactionStateTopicPartitions = 2
		s.TransactionMaxTimeout = 60_000_000_000 // 1 min
		for _, mod := range mods {
			mod(s)
		}
	})
	ml := &markerLeader{Broker: tb.Broker, fail: map[string]int{}}
	srv, err := server.New(server.Config{Listeners: []string{"tcp://127.0.0.1:0"}}, ml)
	if err != nil {
		t.Fatal(err)
	}
	if err := srv.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { srv.Close() })
	_, port, _ := net.SplitHostPort(strings.TrimPrefix(srv.Addrs()[0], "tcp://"))
	n, _ := strconv.Atoi(port)
	tb.register(t, int32(n))
	tb.createTopic(t, "a", 2, nil)
	// The coordinator's partitions, loaded here.
	fc := kmsg.NewPtrFindCoordinatorRequest()
	fc.CoordinatorType, fc.CoordinatorKeys = 1, []string{"t1", "t2", "t3"}
	resp := tb.do(t, 4, fc).(*kmsg.FindCoordinatorResponse)
	for _, c := range resp.Coordinators {
		if c.ErrorCode != 0 {
			t.Fatalf("FindCoordinator %s: %s", c.Key, errName(c.ErrorCode))
		}
	}
	return tb, ml
}

func initTxn(t *testing.T, tb *testBroker, v int16, id string, timeoutMS int32) *kmsg.InitProducerIDResponse {
	t.Helper()
	req := kmsg.NewPtrInitProducerIDRequest()
	req.TransactionalID, req.TransactionTimeoutMillis = kmsg.StringPtr(id), timeoutMS
	return tb.do(t, v, req).(*kmsg.InitProducerIDResponse)
}

func addPartitions(t *testing.T, tb *testBroker, v int16, id string, pid int64, epoch int16, topic string, parts ...int32) map[int32]string {
	t.Helper()
	req := kmsg.NewPtrAddPartitionsToTxnRequest()
	req.TransactionalID, req.ProducerID, req.ProducerEpoch = id, pid, epoch
	req.Topics = []kmsg.AddPartitionsToTxnRequestTopic{{Topic: topic, Partitions: parts}}
	resp := tb.do(t, v, req).(*kmsg.AddPartitionsToTxnResponse)
	out := map[int32]string{}
	for _, rt := range resp.Topics {
		for _, p := range rt.Partitions {
			out[p.Partition] = errName(p.ErrorCode)
		}
	}
	return out
}

func endTxn(t *testing.T, tb *testBroker, v int16, id string, pid int64, epoch int16, commit bool) *kmsg.EndTxnResponse {
	t.Helper()
	req := kmsg.NewPtrEndTxnRequest()
	req.TransactionalID, req.ProducerID, req.ProducerEpoch, req.Commit = id, pid, epoch, commit
	return tb.do(t, v, req).(*kmsg.EndTxnResponse)
}

func describeTxn(t *testing.T, tb *testBroker, id string) kmsg.DescribeTransactionsResponseTransactionState {
	t.Helper()
	req := kmsg.NewPtrDescribeTransactionsRequest()
	req.TransactionalIDs = []string{id}
	return tb.do(t, 0, req).(*kmsg.DescribeTransactionsResponse).TransactionStates[0]
}

// TestTransactionAPIs: a transaction's way through the coordinator's
// APIs, the markers it sends to the partitions' leaders (retried until
// each partition has its own), and the error codes of each API.
func TestTransactionAPIs(t *testing.T) {
	tb, ml := startTxnBroker(t)

	if r := initTxn(t, tb, 4, "", 1000); errName(r.ErrorCode) != "INVALID_REQUEST" {
		t.Errorf("empty transactional id: %s", errName(r.ErrorCode))
	}
	if r := initTxn(t, tb, 4, "t1", 120_000); r.ErrorCode != kerr.InvalidTransactionTimeout.Code {
		t.Errorf("timeout above transaction.max.timeout.ms: %s", errName(r.ErrorCode))
	}
	r := initTxn(t, tb, 4, "t1", 30_000)
	if r.ErrorCode != 0 || r.ProducerID < 0 || r.ProducerEpoch != 0 {
		t.Fatalf("InitProducerId: %s %d/%d", errName(r.ErrorCode), r.ProducerID, r.ProducerEpoch)
	}
	pid := r.ProducerID

	if got := addPartitions(t, tb, 3, "t1", pid+1, 0, "a", 0); got[0] != "INVALID_PRODUCER_ID_MAPPING" {
		t.Errorf("another producer id: %v", got)
	}
	if got := addPartitions(t, tb, 3, "t1", pid, 0, "nope", 0); got[0] != "UNKNOWN_TOPIC_OR_PARTITION" {
		t.Errorf("unknown topic: %v", got)
	}
	if got := addPartitions(t, tb, 3, "t1", pid, 0, "a", 0, 7); got[0] != "OPERATION_NOT_ATTEMPTED" || got[7] != "UNKNOWN_TOPIC_OR_PARTITION" {
		t.Errorf("one unknown partition: %v", got)
	}
	if got := addPartitions(t, tb, 3, "t1", pid, 0, "a", 0, 1); got[0] != "NONE" || got[1] != "NONE" {
		t.Fatalf("AddPartitionsToTxn: %v", got)
	}
	ao := kmsg.NewPtrAddOffsetsToTxnRequest()
	ao.TransactionalID, ao.ProducerID, ao.ProducerEpoch, ao.Group = "t1", pid, 0, "g"
	if resp := tb.do(t, 3, ao).(*kmsg.AddOffsetsToTxnResponse); resp.ErrorCode != 0 {
		t.Fatalf("AddOffsetsToTxn: %s", errName(resp.ErrorCode))
	}

	// A partition leader's question (v4, VerifyOnly).
	vr := kmsg.NewPtrAddPartitionsToTxnRequest()
	vt := kmsg.NewAddPartitionsToTxnRequestTransaction()
	vt.TransactionalID, vt.ProducerID, vt.ProducerEpoch, vt.VerifyOnly = "t1", pid, 0, true
	vt.Topics = []kmsg.AddPartitionsToTxnRequestTransactionTopic{{Topic: "a", Partitions: []int32{1}}}
	stale := vt
	stale.ProducerEpoch = 5
	vr.Transactions = []kmsg.AddPartitionsToTxnRequestTransaction{vt, stale}
	vresp := tb.do(t, 4, vr).(*kmsg.AddPartitionsToTxnResponse)
	if len(vresp.Transactions) != 2 || vresp.Transactions[0].Topics[0].Partitions[0].ErrorCode != 0 ||
		vresp.Transactions[1].Topics[0].Partitions[0].ErrorCode != kerr.ProducerFenced.Code {
		t.Errorf("VerifyOnly: %+v", vresp.Transactions)
	}

	d := describeTxn(t, tb, "t1")
	if d.State != "Ongoing" || d.ProducerID != pid || len(d.Topics) != 2 || d.StartTimestamp <= 0 {
		t.Errorf("DescribeTransactions: %+v", d)
	}
	if d := describeTxn(t, tb, "t9"); d.ErrorCode != kerr.TransactionalIDNotFound.Code && d.ErrorCode != kerr.NotCoordinator.Code {
		t.Errorf("unknown id: %s", errName(d.ErrorCode))
	}

	// The end: answered once PrepareCommit is durable; the markers go to
	// the leaders (one partition's first answer is an error: it gets its
	// marker again), then the transaction completes.
	ml.mu.Lock()
	ml.fail["a-1"] = 1
	ml.mu.Unlock()
	if resp := endTxn(t, tb, 3, "t1", pid, 0, true); resp.ErrorCode != 0 {
		t.Fatalf("EndTxn: %s", errName(resp.ErrorCode))
	}
	tb.waitFor(t, "CompleteCommit", func() bool { return describeTxn(t, tb, "t1").State == "CompleteCommit" })
	got := strings.Join(ml.markers(), "\n")
	offsetsPart := fmt.Sprintf("__consumer_offsets-%d", groupPartition("g", 2))
	for _, p := range []string{"a-0", "a-1", offsetsPart} {
		if !strings.Contains(got, fmt.Sprintf("v1 %s pid=%d epoch=0 commit=true", p, pid)) {
			t.Errorf("no commit marker for %s:\n%s", p, got)
		}
	}
	if strings.Count(got, "\n") != 2 {
		t.Errorf("markers: want one per partition:\n%s", got)
	}
	if resp := endTxn(t, tb, 3, "t1", pid, 0, false); resp.ErrorCode != kerr.InvalidTxnState.Code {
		t.Errorf("abort after commit: %s", errName(resp.ErrorCode))
	}

	// Fencing: a second producer of t1 gets epoch 1; the first is fenced,
	// as PRODUCER_FENCED or, before KIP-588's versions, INVALID_PRODUCER_EPOCH.
	r2 := initTxn(t, tb, 4, "t1", 30_000)
	if r2.ErrorCode != 0 || r2.ProducerID != pid || r2.ProducerEpoch != 1 {
		t.Fatalf("second InitProducerId: %s %d/%d", errName(r2.ErrorCode), r2.ProducerID, r2.ProducerEpoch)
	}
	if got := addPartitions(t, tb, 3, "t1", pid, 0, "a", 0); got[0] != "PRODUCER_FENCED" {
		t.Errorf("zombie AddPartitionsToTxn v3: %v", got)
	}
	if got := addPartitions(t, tb, 1, "t1", pid, 0, "a", 0); got[0] != "INVALID_PRODUCER_EPOCH" {
		t.Errorf("zombie AddPartitionsToTxn v1: %v", got)
	}
	if resp := endTxn(t, tb, 1, "t1", pid, 0, true); resp.ErrorCode != kerr.InvalidProducerEpoch.Code {
		t.Errorf("zombie EndTxn v1: %s", errName(resp.ErrorCode))
	}

	// transaction.version 2: EndTxn v5 bumps the epoch.
	if got := addPartitions(t, tb, 3, "t1", pid, 1, "a", 0); got[0] != "NONE" {
		t.Fatalf("AddPartitionsToTxn: %v", got)
	}
	e5 := endTxn(t, tb, 5, "t1", pid, 1, false)
	if e5.ErrorCode != 0 || e5.ProducerID != pid || e5.ProducerEpoch != 2 {
		t.Errorf("EndTxn v5: %s %d/%d", errName(e5.ErrorCode), e5.ProducerID, e5.ProducerEpoch)
	}
	tb.waitFor(t, "CompleteAbort", func() bool { return describeTxn(t, tb, "t1").State == "CompleteAbort" })
	if got := ml.markers(); !strings.Contains(got[len(got)-1], fmt.Sprintf("v2 a-0 pid=%d epoch=2 commit=false", pid)) {
		t.Errorf("v2 abort marker: %v", got)
	}

	// ListTransactions and its filters.
	t2 := initTxn(t, tb, 4, "t2", 30_000)
	if t2.ErrorCode != 0 {
		t.Fatal(errName(t2.ErrorCode))
	}
	lr := kmsg.NewPtrListTransactionsRequest()
	lresp := tb.do(t, 1, lr).(*kmsg.ListTransactionsResponse)
	if len(lresp.TransactionStates) != 2 {
		t.Errorf("ListTransactions: %+v", lresp.TransactionStates)
	}
	lr.StateFilters = []string{"Empty", "Bogus"}
	lresp = tb.do(t, 1, lr).(*kmsg.ListTransactionsResponse)
	if len(lresp.TransactionStates) != 1 || lresp.TransactionStates[0].TransactionalID != "t2" ||
		len(lresp.UnknownStateFilters) != 1 || lresp.UnknownStateFilters[0] != "Bogus" {
		t.Errorf("ListTransactions states=Empty,Bogus: %+v", lresp)
	}
	lr.StateFilters, lr.TransactionalIDPattern = nil, kmsg.StringPtr("^t1$")
	lresp = tb.do(t, 2, lr).(*kmsg.ListTransactionsResponse)
	if len(lresp.TransactionStates) != 1 || lresp.TransactionStates[0].TransactionalID != "t1" {
		t.Errorf("ListTransactions pattern: %+v", lresp.TransactionStates)
	}

	// TxnOffsetCommit: refused unless the group's partition is in the
	// transaction (KIP-890), held until the marker (lib/group), unknown
	// partitions refused.
	tc := kmsg.NewPtrTxnOffsetCommitRequest()
	tc.TransactionalID, tc.Group, tc.ProducerID, tc.ProducerEpoch = "t2", "g", t2.ProducerID, 0
	tc.Topics = []kmsg.TxnOffsetCommitRequestTopic{{Topic: "a", Partitions: []kmsg.TxnOffsetCommitRequestTopicPartition{
		{Partition: 0, Offset: 5}, {Partition: 9, Offset: 5}}}}
	tresp := tb.do(t, 3, tc).(*kmsg.TxnOffsetCommitResponse)
	if p := tresp.Topics[0].Partitions; p[0].ErrorCode != kerr.InvalidTxnState.Code || p[1].ErrorCode != kerr.UnknownTopicOrPartition.Code {
		t.Errorf("TxnOffsetCommit without AddOffsetsToTxn: %+v", p)
	}
	ao.TransactionalID, ao.ProducerID, ao.ProducerEpoch = "t2", t2.ProducerID, 0
	if resp := tb.do(t, 3, ao).(*kmsg.AddOffsetsToTxnResponse); resp.ErrorCode != 0 {
		t.Fatalf("AddOffsetsToTxn: %s", errName(resp.ErrorCode))
	}
	tresp = tb.do(t, 3, tc).(*kmsg.TxnOffsetCommitResponse)
	if p := tresp.Topics[0].Partitions; p[0].ErrorCode != 0 || p[1].ErrorCode != kerr.UnknownTopicOrPartition.Code {
		t.Errorf("TxnOffsetCommit: %+v", p)
	}
	tc.ProducerEpoch = 9
	tresp = tb.do(t, 2, tc).(*kmsg.TxnOffsetCommitResponse)
	if p := tresp.Topics[0].Partitions; p[0].ErrorCode != kerr.InvalidProducerEpoch.Code {
		t.Errorf("TxnOffsetCommit v2 of another epoch: %+v", p)
	}
	// v5 (transaction.version 2) adds the group's partition itself.
	t3 := initTxn(t, tb, 4, "t3", 30_000)
	tc.TransactionalID, tc.ProducerID, tc.ProducerEpoch, tc.Group = "t3", t3.ProducerID, 0, "g"
	tresp = tb.do(t, 5, tc).(*kmsg.TxnOffsetCommitResponse)
	if p := tresp.Topics[0].Partitions; p[0].ErrorCode != 0 {
		t.Errorf("TxnOffsetCommit v5: %+v", p)
	}
	if d := describeTxn(t, tb, "t3"); d.State != "Ongoing" || len(d.Topics) != 1 || d.Topics[0].Topic != "__consumer_offsets" {
		t.Errorf("after TxnOffsetCommit v5: %+v", d)
	}
	// Until the transaction's marker, OffsetFetch shows no offset, and
	// with require_stable says it is unstable (KIP-447).
	of := kmsg.NewPtrOffsetFetchRequest()
	og := kmsg.NewOffsetFetchRequestGroup()
	og.Group, og.Topics = "g", []kmsg.OffsetFetchRequestGroupTopic{{Topic: "a", Partitions: []int32{0}}}
	of.Groups = []kmsg.OffsetFetchRequestGroup{og}
	op := tb.do(t, 8, of).(*kmsg.OffsetFetchResponse).Groups[0].Topics[0].Partitions[0]
	if op.Offset != -1 || op.ErrorCode != 0 {
		t.Errorf("OffsetFetch of a pending transaction's offset: %d %s", op.Offset, errName(op.ErrorCode))
	}
	of.RequireStable = true
	op = tb.do(t, 8, of).(*kmsg.OffsetFetchResponse).Groups[0].Topics[0].Partitions[0]
	if op.ErrorCode != kerr.UnstableOffsetCommit.Code {
		t.Errorf("OffsetFetch require_stable: %s", errName(op.ErrorCode))
	}
}

// TestTransactionTimeoutFencesTheProducer: a transaction open longer than
// its timeout is aborted (markers sent) with a bumped epoch.
func TestTransactionTimeoutFencesTheProducer(t *testing.T) {
	tb, ml := startTxnBroker(t)
	r := initTxn(t, tb, 4, "t3", 1)
	if r.ErrorCode != 0 {
		t.Fatal(errName(r.ErrorCode))
	}
	if got := addPartitions(t, tb, 3, "t3", r.ProducerID, 0, "a", 1); got[1] != "NONE" {
		t.Fatal(got)
	}
	// The check runs every transaction.abort.timed.out.transaction.cleanup.interval.ms;
	// here, until the millisecond has passed.
	tb.waitFor(t, "CompleteAbort", func() bool {
		tb.Transactions().AbortTimedOut()
		return describeTxn(t, tb, "t3").State == "CompleteAbort"
	})
	if d := describeTxn(t, tb, "t3"); d.ProducerEpoch != 1 {
		t.Errorf("epoch after the timeout: %d", d.ProducerEpoch)
	}
	if got := ml.markers(); len(got) != 1 || !strings.Contains(got[0], "a-1") || !strings.Contains(got[0], "epoch=1 commit=false") {
		t.Errorf("markers: %v", got)
	}
	if resp := endTxn(t, tb, 3, "t3", r.ProducerID, 0, true); resp.ErrorCode != kerr.ProducerFenced.Code {
		t.Errorf("EndTxn of the timed-out producer: %s", errName(resp.ErrorCode))
	}
}

func groupPartition(g string, n int32) int32 { return txn.PartitionFor(g, n) }

// DescribeTransactions answers each id on its own: one the principal may
// not DESCRIBE is TRANSACTIONAL_ID_AUTHORIZATION_FAILED beside the ones
// it may; ListTransactions lists only those it may.
func TestTransactionsAreDescribedOnlyToWhoMayDescribeThem(t *testing.T) {
	tb, _ := startTxnBroker(t)
	for _, id := range []string{"t1", "t2"} {
		if r := initTxn(t, tb, 4, id, 30_000); r.ErrorCode != 0 {
			t.Fatalf("InitProducerId %s: %s", id, errName(r.ErrorCode))
		}
	}
	allowID := func(principal, id string) auth.Binding {
		return auth.Binding{ResourceType: txnResource, ResourceName: id, PatternType: kmsg.ACLResourcePatternTypeLiteral,
			Principal: principal, Host: "*", Operation: opDescribe, Permission: kmsg.ACLPermissionTypeAllow}
	}
	if res := createACLs(t, tb, rootConn, allowID("User:alice", "t1"), allowID("User:bob", "t2")); res.Results[0].ErrorCode != 0 || res.Results[1].ErrorCode != 0 {
		t.Fatalf("CreateAcls: %+v", res.Results)
	}
	describe := func(c *server.ConnInfo) map[string]string {
		req := kmsg.NewPtrDescribeTransactionsRequest()
		req.TransactionalIDs = []string{"t1", "t2"}
		got := map[string]string{}
		for _, st := range tb.doAs(t, t.Context(), c, 0, req).(*kmsg.DescribeTransactionsResponse).TransactionStates {
			got[st.TransactionalID] = st.State
			if st.ErrorCode != 0 {
				got[st.TransactionalID] = errName(st.ErrorCode)
			}
		}
		return got
	}
	list := func(c *server.ConnInfo) []string {
		var ids []string
		for _, st := range tb.doAs(t, t.Context(), c, 1, kmsg.NewPtrListTransactionsRequest()).(*kmsg.ListTransactionsResponse).TransactionStates {
			ids = append(ids, st.TransactionalID)
		}
		slices.Sort(ids)
		return ids
	}
	for _, tc := range []struct {
		c        *server.ConnInfo
		describe map[string]string
		list     []string
	}{
		{aliceConn, map[string]string{"t1": "Empty", "t2": "TRANSACTIONAL_ID_AUTHORIZATION_FAILED"}, []string{"t1"}},
		{bobConn, map[string]string{"t1": "TRANSACTIONAL_ID_AUTHORIZATION_FAILED", "t2": "Empty"}, []string{"t2"}},
		{rootConn, map[string]string{"t1": "Empty", "t2": "Empty"}, []string{"t1", "t2"}},
	} {
		if got := describe(tc.c); !maps.Equal(got, tc.describe) {
			t.Errorf("%s: DescribeTransactions %v, want %v", tc.c.Principal, got, tc.describe)
		}
		if got := list(tc.c); !slices.Equal(got, tc.list) {
			t.Errorf("%s: ListTransactions %v, want %v", tc.c.Principal, got, tc.list)
		}
	}
}
