package broker

import (
	"context"
	"net"
	"testing"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/mqproject/mq/lib/auth"
	"github.com/mqproject/mq/lib/config"
	"github.com/mqproject/mq/lib/coordinator"
	"github.com/mqproject/mq/lib/record"
	"github.com/mqproject/mq/lib/server"
)

// The connections of the authorization tests: root on the Unix socket (a
// super user by default), and two certificate users over TCP.
var (
	rootConn  = &server.ConnInfo{ID: 10, Network: "unix", Principal: auth.UnixUser(0)}
	aliceConn = &server.ConnInfo{ID: 11, Network: "tcp", Principal: "User:alice"}
	bobConn   = &server.ConnInfo{ID: 12, Network: "tcp", Principal: "User:bob"}
)

func secured(s *config.Broker) { s.AllowEveryoneIfNoACLFound = "false" }

func createACLs(t *testing.T, tb *testBroker, c *server.ConnInfo, bs ...auth.Binding) *kmsg.CreateACLsResponse {
	t.Helper()
	req := kmsg.NewPtrCreateACLsRequest()
	for _, b := range bs {
		cr := kmsg.NewCreateACLsRequestCreation()
		cr.ResourceType, cr.ResourceName, cr.ResourcePatternType = b.ResourceType, b.ResourceName, b.PatternType
		cr.Principal, cr.Host, cr.Operation, cr.PermissionType = b.Principal, b.Host, b.Operation, b.Permission
		req.Creations = append(req.Creations, cr)
	}
	return tb.doAs(t, context.Background(), c, 3, req).(*kmsg.CreateACLsResponse)
}

func allowTopic(principal, name string, pat kmsg.ACLResourcePatternType, op kmsg.ACLOperation) auth.Binding {
	return auth.Binding{ResourceType: topicResource, ResourceName: name, PatternType: pat, Principal: principal, Host: "*", Operation: op, Permission: kmsg.ACLPermissionTypeAllow}
}

func produceAs(t *testing.T, tb *testBroker, c *server.ConnInfo, topic string) int16 {
	t.Helper()
	batch, err := record.Build(record.BuildOptions{}, []record.Record{{Value: []byte("v")}})
	if err != nil {
		t.Fatal(err)
	}
	resp := tb.doAs(t, context.Background(), c, produceVersion, produceRequest(topic, 0, -1, batch)).(*kmsg.ProduceResponse)
	return resp.Topics[0].Partitions[0].ErrorCode
}

func metadataTopics(t *testing.T, tb *testBroker, c *server.ConnInfo) []string {
	t.Helper()
	req := kmsg.NewPtrMetadataRequest()
	resp := tb.doAs(t, context.Background(), c, 12, req).(*kmsg.MetadataResponse)
	var names []string
	for _, tp := range resp.Topics {
		names = append(names, *tp.Topic)
	}
	return names
}

func TestACLsDecideProduceAndMetadata(t *testing.T) {
	tb := startBroker(t, "", secured)
	tb.createTopic(t, "orders", 1, nil)
	tb.createTopic(t, "orders-eu", 1, nil)
	tb.createTopic(t, "audit", 1, nil)

	if code := produceAs(t, tb, aliceConn, "orders"); code != kerr.TopicAuthorizationFailed.Code {
		t.Fatalf("alice without an ACL: %v, want TOPIC_AUTHORIZATION_FAILED", kerr.ErrorForCode(code))
	}
	if code := produceAs(t, tb, rootConn, "orders"); code != 0 {
		t.Fatalf("root on the socket: %v", kerr.ErrorForCode(code))
	}
	// Only a super user may create ACLs.
	if res := createACLs(t, tb, aliceConn, allowTopic("User:alice", "orders", kmsg.ACLResourcePatternTypeLiteral, opWrite)); res.Results[0].ErrorCode != kerr.ClusterAuthorizationFailed.Code {
		t.Fatalf("alice creating an ACL: %v", kerr.ErrorForCode(res.Results[0].ErrorCode))
	}
	res := createACLs(t, tb, rootConn,
		allowTopic("User:alice", "orders", kmsg.ACLResourcePatternTypeLiteral, opWrite),
		allowTopic("User:bob", "orders", kmsg.ACLResourcePatternTypePrefixed, opWrite),
		auth.Binding{ResourceType: topicResource, ResourceName: "orders-eu", PatternType: kmsg.ACLResourcePatternTypeLiteral,
			Principal: "User:bob", Host: "*", Operation: opWrite, Permission: kmsg.ACLPermissionTypeDeny},
		auth.Binding{ResourceType: kmsg.ACLResourceTypeAny, ResourceName: "x", PatternType: kmsg.ACLResourcePatternTypeLiteral,
			Principal: "User:bob", Host: "*", Operation: opWrite, Permission: kmsg.ACLPermissionTypeAllow},
	)
	for i, want := range []int16{0, 0, 0, kerr.InvalidRequest.Code} {
		if got := res.Results[i].ErrorCode; got != want {
			t.Fatalf("creation %d: %v, want %v", i, kerr.ErrorForCode(got), kerr.ErrorForCode(want))
		}
	}
	for _, tc := range []struct {
		c     *server.ConnInfo
		topic string
		want  int16
	}{
		{aliceConn, "orders", 0},
		{aliceConn, "orders-eu", kerr.TopicAuthorizationFailed.Code}, // literal is not a prefix
		{bobConn, "orders", 0},                                       // prefixed
		{bobConn, "orders-eu", kerr.TopicAuthorizationFailed.Code},   // deny over the prefix's allow
		{bobConn, "audit", kerr.TopicAuthorizationFailed.Code},
		{rootConn, "audit", 0},
	} {
		if got := produceAs(t, tb, tc.c, tc.topic); got != tc.want {
			t.Errorf("%s producing to %s: %v, want %v", tc.c.Principal, tc.topic, kerr.ErrorForCode(got), kerr.ErrorForCode(tc.want))
		}
	}
	// One request to two topics: the refused one does not fail the other.
	batch, err := record.Build(record.BuildOptions{}, []record.Record{{Value: []byte("v")}})
	if err != nil {
		t.Fatal(err)
	}
	two := produceRequest("orders", 0, -1, batch)
	two.Topics = append(two.Topics, produceRequest("audit", 0, -1, batch).Topics...)
	resp := tb.doAs(t, context.Background(), aliceConn, produceVersion, two).(*kmsg.ProduceResponse)
	if a, b := resp.Topics[0].Partitions[0].ErrorCode, resp.Topics[1].Partitions[0].ErrorCode; a != 0 || b != kerr.TopicAuthorizationFailed.Code {
		t.Errorf("alice producing to orders and audit at once: %v and %v, want success and TOPIC_AUTHORIZATION_FAILED", kerr.ErrorForCode(a), kerr.ErrorForCode(b))
	}
	// WRITE implies DESCRIBE: each sees the topics it may write, no more.
	if got := metadataTopics(t, tb, aliceConn); len(got) != 1 || got[0] != "orders" {
		t.Errorf("alice's metadata lists %v, want [orders]", got)
	}
	// The DENY of WRITE on orders-eu leaves the DESCRIBE the prefix's
	// WRITE implies.
	if got := metadataTopics(t, tb, bobConn); len(got) != 2 || got[0] != "orders" || got[1] != "orders-eu" {
		t.Errorf("bob's metadata lists %v, want [orders orders-eu]", got)
	}
	if got := metadataTopics(t, tb, rootConn); len(got) != 3 {
		t.Errorf("root's metadata lists %v, want all three", got)
	}
}

func TestClientsNeverWriteInternalTopics(t *testing.T) {
	tb := startBroker(t, "", nil)
	tb.createTopic(t, coordinator.ShareStateTopic, 1, nil)
	for _, c := range []*server.ConnInfo{testConn, rootConn} {
		if got := produceAs(t, tb, c, coordinator.ShareStateTopic); got != kerr.InvalidTopicException.Code {
			t.Errorf("%q producing to %s: %v, want INVALID_TOPIC_EXCEPTION", c.Principal, coordinator.ShareStateTopic, kerr.ErrorForCode(got))
		}
	}
	req := kmsg.NewPtrDeleteRecordsRequest()
	rt := kmsg.NewDeleteRecordsRequestTopic()
	rt.Topic = coordinator.ShareStateTopic
	rt.Partitions = append(rt.Partitions, kmsg.DeleteRecordsRequestTopicPartition{Partition: 0, Offset: -1})
	req.Topics = append(req.Topics, rt)
	resp := tb.doAs(t, context.Background(), rootConn, 2, req).(*kmsg.DeleteRecordsResponse)
	if got := resp.Topics[0].Partitions[0].ErrorCode; got != kerr.InvalidTopicException.Code {
		t.Errorf("DeleteRecords of %s: %v, want INVALID_TOPIC_EXCEPTION", coordinator.ShareStateTopic, kerr.ErrorForCode(got))
	}
}

func TestAuthorizeDoesNotAllocateWithoutACLs(t *testing.T) {
	tb := startBroker(t, "", secured)
	img := tb.ctrl.Image()
	req := &server.Request{Key: kmsg.Produce.Int16(), Version: produceVersion, Body: produceRequest("t", 0, 1, nil)}
	if n := testing.AllocsPerRun(100, func() {
		if tb.authorize(rootConn, img, req) != 0 {
			t.Fatal("root refused")
		}
	}); n != 0 {
		t.Fatalf("authorize allocated %v times for a super user", n)
	}
}

// TestEveryFamilyRefusesWithItsCode sends one request of each API family
// the ACLs guard, as a principal no ACL allows anything, at the highest
// version the broker takes, and reads the refusal where a client reads
// it: the answers of denied.go must encode and carry Kafka's code.
func TestEveryFamilyRefusesWithItsCode(t *testing.T) {
	tb := startBroker(t, "", secured)
	id := tb.createTopic(t, "orders", 1, nil)
	topicCode, groupCode, clusterCode := kerr.TopicAuthorizationFailed.Code, kerr.GroupAuthorizationFailed.Code, kerr.ClusterAuthorizationFailed.Code
	str := func(s string) *string { return &s }
	for _, tc := range []struct {
		req  kmsg.Request
		want int16
		code func(kmsg.Response) int16
	}{
		{func() kmsg.Request {
			r := kmsg.NewPtrListOffsetsRequest()
			r.Topics = []kmsg.ListOffsetsRequestTopic{{Topic: "orders", Partitions: []kmsg.ListOffsetsRequestTopicPartition{{Timestamp: -1}}}}
			return r
		}(), topicCode, func(r kmsg.Response) int16 { return r.(*kmsg.ListOffsetsResponse).Topics[0].Partitions[0].ErrorCode }},
		{func() kmsg.Request {
			r := kmsg.NewPtrOffsetForLeaderEpochRequest()
			r.ReplicaID = -1
			r.Topics = []kmsg.OffsetForLeaderEpochRequestTopic{{Topic: "orders", Partitions: []kmsg.OffsetForLeaderEpochRequestTopicPartition{{}}}}
			return r
		}(), topicCode, func(r kmsg.Response) int16 {
			return r.(*kmsg.OffsetForLeaderEpochResponse).Topics[0].Partitions[0].ErrorCode
		}},
		{func() kmsg.Request {
			r := kmsg.NewPtrDeleteRecordsRequest()
			r.Topics = []kmsg.DeleteRecordsRequestTopic{{Topic: "orders", Partitions: []kmsg.DeleteRecordsRequestTopicPartition{{Offset: -1}}}}
			return r
		}(), topicCode, func(r kmsg.Response) int16 { return r.(*kmsg.DeleteRecordsResponse).Topics[0].Partitions[0].ErrorCode }},
		{func() kmsg.Request {
			r := kmsg.NewPtrCreateTopicsRequest()
			r.Topics = []kmsg.CreateTopicsRequestTopic{{Topic: "new", NumPartitions: 1, ReplicationFactor: 1}}
			return r
		}(), topicCode, func(r kmsg.Response) int16 { return r.(*kmsg.CreateTopicsResponse).Topics[0].ErrorCode }},
		{func() kmsg.Request {
			r := kmsg.NewPtrDeleteTopicsRequest()
			r.Topics = []kmsg.DeleteTopicsRequestTopic{{TopicID: id}}
			return r
		}(), topicCode, func(r kmsg.Response) int16 { return r.(*kmsg.DeleteTopicsResponse).Topics[0].ErrorCode }},
		{func() kmsg.Request {
			r := kmsg.NewPtrCreatePartitionsRequest()
			r.Topics = []kmsg.CreatePartitionsRequestTopic{{Topic: "orders", Count: 2}}
			return r
		}(), topicCode, func(r kmsg.Response) int16 { return r.(*kmsg.CreatePartitionsResponse).Topics[0].ErrorCode }},
		{func() kmsg.Request {
			r := kmsg.NewPtrDescribeConfigsRequest()
			r.Resources = []kmsg.DescribeConfigsRequestResource{{ResourceType: kmsg.ConfigResourceTypeBroker, ResourceName: "1"}}
			return r
		}(), clusterCode, func(r kmsg.Response) int16 { return r.(*kmsg.DescribeConfigsResponse).Resources[0].ErrorCode }},
		{func() kmsg.Request {
			r := kmsg.NewPtrIncrementalAlterConfigsRequest()
			r.Resources = []kmsg.IncrementalAlterConfigsRequestResource{{ResourceType: kmsg.ConfigResourceTypeTopic, ResourceName: "orders"}}
			return r
		}(), topicCode, func(r kmsg.Response) int16 { return r.(*kmsg.IncrementalAlterConfigsResponse).Resources[0].ErrorCode }},
		{func() kmsg.Request {
			r := kmsg.NewPtrFindCoordinatorRequest()
			r.CoordinatorKeys = []string{"g"}
			return r
		}(), groupCode, func(r kmsg.Response) int16 { return r.(*kmsg.FindCoordinatorResponse).Coordinators[0].ErrorCode }},
		{func() kmsg.Request {
			r := kmsg.NewPtrJoinGroupRequest()
			r.Group, r.ProtocolType, r.SessionTimeoutMillis = "g", "consumer", 10000
			return r
		}(), groupCode, func(r kmsg.Response) int16 { return r.(*kmsg.JoinGroupResponse).ErrorCode }},
		{func() kmsg.Request { r := kmsg.NewPtrHeartbeatRequest(); r.Group = "g"; return r }(), groupCode,
			func(r kmsg.Response) int16 { return r.(*kmsg.HeartbeatResponse).ErrorCode }},
		{func() kmsg.Request {
			r := kmsg.NewPtrOffsetCommitRequest()
			r.Group = "g"
			r.Topics = []kmsg.OffsetCommitRequestTopic{{Topic: "orders", Partitions: []kmsg.OffsetCommitRequestTopicPartition{{}}}}
			return r
		}(), groupCode, func(r kmsg.Response) int16 { return r.(*kmsg.OffsetCommitResponse).Topics[0].Partitions[0].ErrorCode }},
		{func() kmsg.Request {
			r := kmsg.NewPtrOffsetFetchRequest()
			r.Groups = []kmsg.OffsetFetchRequestGroup{{Group: "g"}}
			return r
		}(), groupCode, func(r kmsg.Response) int16 { return r.(*kmsg.OffsetFetchResponse).Groups[0].ErrorCode }},
		{func() kmsg.Request { r := kmsg.NewPtrOffsetDeleteRequest(); r.Group = "g"; return r }(), groupCode,
			func(r kmsg.Response) int16 { return r.(*kmsg.OffsetDeleteResponse).ErrorCode }},
		{func() kmsg.Request { r := kmsg.NewPtrDescribeGroupsRequest(); r.Groups = []string{"g"}; return r }(), groupCode,
			func(r kmsg.Response) int16 { return r.(*kmsg.DescribeGroupsResponse).Groups[0].ErrorCode }},
		{func() kmsg.Request { r := kmsg.NewPtrDeleteGroupsRequest(); r.Groups = []string{"g"}; return r }(), groupCode,
			func(r kmsg.Response) int16 { return r.(*kmsg.DeleteGroupsResponse).Groups[0].ErrorCode }},
		{func() kmsg.Request {
			r := kmsg.NewPtrShareGroupHeartbeatRequest()
			r.GroupID, r.MemberID = "sg", "m"
			return r
		}(), groupCode, func(r kmsg.Response) int16 { return r.(*kmsg.ShareGroupHeartbeatResponse).ErrorCode }},
		{func() kmsg.Request {
			r := kmsg.NewPtrShareGroupDescribeRequest()
			r.GroupIDs = []string{"sg"}
			return r
		}(), groupCode,
			func(r kmsg.Response) int16 { return r.(*kmsg.ShareGroupDescribeResponse).Groups[0].ErrorCode }},
		{func() kmsg.Request {
			r := kmsg.NewPtrShareFetchRequest()
			r.GroupID, r.MemberID = str("sg"), str("m")
			return r
		}(), groupCode, func(r kmsg.Response) int16 { return r.(*kmsg.ShareFetchResponse).ErrorCode }},
		{func() kmsg.Request {
			r := kmsg.NewPtrDescribeShareGroupOffsetsRequest()
			r.Groups = []kmsg.DescribeShareGroupOffsetsRequestGroup{{GroupID: "sg"}}
			return r
		}(), groupCode, func(r kmsg.Response) int16 { return r.(*kmsg.DescribeShareGroupOffsetsResponse).Groups[0].ErrorCode }},
		{func() kmsg.Request { r := kmsg.NewPtrDeleteShareGroupOffsetsRequest(); r.GroupID = "sg"; return r }(), groupCode,
			func(r kmsg.Response) int16 { return r.(*kmsg.DeleteShareGroupOffsetsResponse).ErrorCode }},
		{kmsg.NewPtrDescribeClusterRequest(), clusterCode, func(r kmsg.Response) int16 { return r.(*kmsg.DescribeClusterResponse).ErrorCode }},
		{kmsg.NewPtrDescribeLogDirsRequest(), clusterCode, func(r kmsg.Response) int16 { return r.(*kmsg.DescribeLogDirsResponse).ErrorCode }},
		{kmsg.NewPtrListPartitionReassignmentsRequest(), clusterCode,
			func(r kmsg.Response) int16 { return r.(*kmsg.ListPartitionReassignmentsResponse).ErrorCode }},
		{kmsg.NewPtrAlterPartitionAssignmentsRequest(), clusterCode,
			func(r kmsg.Response) int16 { return r.(*kmsg.AlterPartitionAssignmentsResponse).ErrorCode }},
		{kmsg.NewPtrElectLeadersRequest(), clusterCode, func(r kmsg.Response) int16 { return r.(*kmsg.ElectLeadersResponse).ErrorCode }},
		{kmsg.NewPtrUnregisterBrokerRequest(), clusterCode, func(r kmsg.Response) int16 { return r.(*kmsg.UnregisterBrokerResponse).ErrorCode }},
		{kmsg.NewPtrDescribeQuorumRequest(), clusterCode, func(r kmsg.Response) int16 { return r.(*kmsg.DescribeQuorumResponse).ErrorCode }},
		{kmsg.NewPtrDescribeACLsRequest(), clusterCode, func(r kmsg.Response) int16 { return r.(*kmsg.DescribeACLsResponse).ErrorCode }},
		{func() kmsg.Request {
			r := kmsg.NewPtrDeleteACLsRequest()
			r.Filters = []kmsg.DeleteACLsRequestFilter{kmsg.NewDeleteACLsRequestFilter()}
			return r
		}(), clusterCode, func(r kmsg.Response) int16 { return r.(*kmsg.DeleteACLsResponse).Results[0].ErrorCode }},
		{func() kmsg.Request {
			r := kmsg.NewPtrFetchRequest()
			r.ReplicaID = 2
			r.ReplicaState.ID = 2
			r.Topics = []kmsg.FetchRequestTopic{{Topic: "orders", TopicID: id, Partitions: []kmsg.FetchRequestTopicPartition{{}}}}
			return r
		}(), clusterCode, func(r kmsg.Response) int16 { return r.(*kmsg.FetchResponse).Topics[0].Partitions[0].ErrorCode }},
	} {
		key := tc.req.Key()
		t.Run(kmsg.NameForKey(key), func(t *testing.T) {
			version := tb.apis[key].max
			resp := tb.doAs(t, context.Background(), bobConn, version, tc.req)
			if got := tc.code(resp); got != tc.want {
				t.Errorf("v%d: %v, want %v", version, kerr.ErrorForCode(got), kerr.ErrorForCode(tc.want))
			}
		})
	}
	// ListGroups without DESCRIBE on the cluster: only describable groups,
	// here none.
	resp := tb.doAs(t, context.Background(), bobConn, tb.apis[kmsg.ListGroups.Int16()].max, kmsg.NewPtrListGroupsRequest()).(*kmsg.ListGroupsResponse)
	if resp.ErrorCode != 0 || len(resp.Groups) != 0 {
		t.Errorf("ListGroups: %v %v", kerr.ErrorForCode(resp.ErrorCode), resp.Groups)
	}
}

func TestACLsOfAHostApplyToItsClientsOnly(t *testing.T) {
	tb := startBroker(t, "", secured)
	tb.createTopic(t, "orders", 1, nil)
	near := &server.ConnInfo{ID: 20, Network: "tcp", Principal: "User:alice", Remote: &net.TCPAddr{IP: net.IPv4(10, 0, 0, 5), Port: 40000}}
	far := &server.ConnInfo{ID: 21, Network: "tcp", Principal: "User:alice", Remote: &net.TCPAddr{IP: net.IPv4(10, 0, 0, 6), Port: 40000}}
	local := &server.ConnInfo{ID: 22, Network: "unix", Principal: "User:alice"}
	allow := allowTopic("User:alice", "orders", kmsg.ACLResourcePatternTypeLiteral, opWrite)
	allow.Host = "10.0.0.5"
	if res := createACLs(t, tb, rootConn, allow); res.Results[0].ErrorCode != 0 {
		t.Fatal(kerr.ErrorForCode(res.Results[0].ErrorCode))
	}
	for _, tc := range []struct {
		c    *server.ConnInfo
		want int16
	}{{near, 0}, {far, kerr.TopicAuthorizationFailed.Code}, {local, kerr.TopicAuthorizationFailed.Code}} {
		if got := produceAs(t, tb, tc.c, "orders"); got != tc.want {
			t.Errorf("alice from %v: %v, want %v", tc.c.Remote, kerr.ErrorForCode(got), kerr.ErrorForCode(tc.want))
		}
	}
}

// TestEveryAPIHasAnAuthorizationRule: an API the broker serves with no
// line in access would need nothing, whoever asks; only those that
// decide in their handlers (or, InitProducerId, in authorize itself)
// may lack one.
func TestEveryAPIHasAnAuthorizationRule(t *testing.T) {
	tb := startBroker(t, "", nil)
	decidedElsewhere := map[int16]bool{kmsg.Metadata.Int16(): true, kmsg.ListGroups.Int16(): true, kmsg.InitProducerID.Int16(): true,
		// These answer what the principal may see and leave out, or refuse
		// one by one, the rest: ListTransactions and DescribeTransactions
		// the transactional ids (txn.go), DescribeProducers the topics
		// (txn_leader.go).
		kmsg.ListTransactions.Int16(): true, kmsg.DescribeTransactions.Int16(): true, kmsg.DescribeProducers.Int16(): true}
	for key := range tb.apis {
		if _, ok := access[key]; !ok && !decidedElsewhere[key] {
			t.Errorf("%s (key %d) is served with no authorization rule: add it to access in authorize.go", kmsg.NameForKey(key), key)
		}
	}
}
