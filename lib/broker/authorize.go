package broker

import (
	"net"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/mqproject/mq/lib/auth"
	"github.com/mqproject/mq/lib/controller"
	"github.com/mqproject/mq/lib/kafkaext"
	"github.com/mqproject/mq/lib/server"
)

// This file is the one place where requests are authorized: access says,
// for every API key, which operations on which resources a request needs,
// as Kafka's brokers ask them; Handle checks them before the handler runs.
// A request naming any resource its principal may not use is answered
// without running the handler, every resource of the answer carrying the
// code of the first refusal (TOPIC_, GROUP_, CLUSTER_ or
// TRANSACTIONAL_ID_AUTHORIZATION_FAILED, denied). Some APIs decide in
// their handler instead, because Kafka answers them partly: Produce and
// Fetch refuse topic by topic and serve the others; Metadata
// hides the topics the principal may not describe (metadata.go),
// ListGroups the groups (groups.go), ListTransactions the transactional
// ids, and DescribeTransactions refuses them id by id (txn.go);
// InitProducerId asks for WRITE on any topic (authorizeAny).

// Resource types and operations, short.
const (
	topicResource   = kmsg.ACLResourceTypeTopic
	groupResource   = kmsg.ACLResourceTypeGroup
	clusterResource = kmsg.ACLResourceTypeCluster
	txnResource     = kmsg.ACLResourceTypeTransactionalId

	opRead            = kmsg.ACLOperationRead
	opWrite           = kmsg.ACLOperationWrite
	opCreate          = kmsg.ACLOperationCreate
	opDelete          = kmsg.ACLOperationDelete
	opAlter           = kmsg.ACLOperationAlter
	opDescribe        = kmsg.ACLOperationDescribe
	opClusterAction   = kmsg.ACLOperationClusterAction
	opDescribeConfigs = kmsg.ACLOperationDescribeConfigs
	opAlterConfigs    = kmsg.ACLOperationAlterConfigs
	opIdempotentWrite = kmsg.ACLOperationIdempotentWrite
)

// need is one operation a request needs on resources of one type.
type need struct {
	typ auth.ResourceType
	op  auth.Operation
}

// access lists, by API key, what a request needs: each func calls check
// with every (resource type, operation, name) the request asks for, and
// stops at the first refusal check reports. A key absent here needs
// nothing (Metadata, ListGroups and InitProducerId decide in their
// handlers; ApiVersions never reaches the Broker).
var access = map[int16]func(img *controller.Image, body kmsg.Request, check checkFunc) bool{
	// Produce and Fetch check their topics themselves (produce.go,
	// fetch.go), per topic, so that a refused topic does not fail the
	// others of the request: WRITE and READ.
	kmsg.Produce.Int16(): func(_ *controller.Image, body kmsg.Request, check checkFunc) bool {
		r := body.(*kmsg.ProduceRequest)
		return r.TransactionID == nil || check(txnResource, opWrite, *r.TransactionID)
	},
	kmsg.Fetch.Int16(): func(_ *controller.Image, body kmsg.Request, check checkFunc) bool {
		r := body.(*kmsg.FetchRequest)
		if r.ReplicaID >= 0 || r.GetVersion() >= 15 && r.ReplicaState.ID >= 0 {
			return check(clusterResource, opClusterAction, auth.ClusterName)
		}
		return true
	},
	kmsg.ListOffsets.Int16(): func(_ *controller.Image, body kmsg.Request, check checkFunc) bool {
		r := body.(*kmsg.ListOffsetsRequest)
		for i := range r.Topics {
			if !check(topicResource, opDescribe, r.Topics[i].Topic) {
				return false
			}
		}
		return true
	},
	kmsg.OffsetForLeaderEpoch.Int16(): func(_ *controller.Image, body kmsg.Request, check checkFunc) bool {
		r := body.(*kmsg.OffsetForLeaderEpochRequest)
		if r.ReplicaID >= 0 {
			return check(clusterResource, opClusterAction, auth.ClusterName)
		}
		for i := range r.Topics {
			if !check(topicResource, opDescribe, r.Topics[i].Topic) {
				return false
			}
		}
		return true
	},
	kmsg.DeleteRecords.Int16(): topics(opDelete, func(r *kmsg.DeleteRecordsRequest, yield func(string) bool) {
		for _, t := range r.Topics {
			if !yield(t.Topic) {
				return
			}
		}
	}),
	kmsg.CreateTopics.Int16(): func(_ *controller.Image, body kmsg.Request, check checkFunc) bool {
		r := body.(*kmsg.CreateTopicsRequest)
		if check.quiet(clusterResource, opCreate, auth.ClusterName) {
			return true
		}
		for i := range r.Topics {
			if !check(topicResource, opCreate, r.Topics[i].Topic) {
				return false
			}
		}
		return true
	},
	kmsg.DeleteTopics.Int16(): func(img *controller.Image, body kmsg.Request, check checkFunc) bool {
		r := body.(*kmsg.DeleteTopicsRequest)
		for _, name := range r.TopicNames {
			if !check(topicResource, opDelete, name) {
				return false
			}
		}
		for _, t := range r.Topics {
			if name, ok := topicName(img, deref(t.Topic), t.TopicID); ok && !check(topicResource, opDelete, name) {
				return false
			}
		}
		return true
	},
	kmsg.CreatePartitions.Int16(): topics(opAlter, func(r *kmsg.CreatePartitionsRequest, yield func(string) bool) {
		for _, t := range r.Topics {
			if !yield(t.Topic) {
				return
			}
		}
	}),
	kmsg.DescribeConfigs.Int16(): func(_ *controller.Image, body kmsg.Request, check checkFunc) bool {
		for _, rs := range body.(*kmsg.DescribeConfigsRequest).Resources {
			if !checkConfigResource(check, opDescribeConfigs, rs.ResourceType, rs.ResourceName) {
				return false
			}
		}
		return true
	},
	kmsg.AlterConfigs.Int16(): func(_ *controller.Image, body kmsg.Request, check checkFunc) bool {
		for _, rs := range body.(*kmsg.AlterConfigsRequest).Resources {
			if !checkConfigResource(check, opAlterConfigs, rs.ResourceType, rs.ResourceName) {
				return false
			}
		}
		return true
	},
	kmsg.IncrementalAlterConfigs.Int16(): func(_ *controller.Image, body kmsg.Request, check checkFunc) bool {
		for _, rs := range body.(*kmsg.IncrementalAlterConfigsRequest).Resources {
			if !checkConfigResource(check, opAlterConfigs, rs.ResourceType, rs.ResourceName) {
				return false
			}
		}
		return true
	},
	kmsg.DescribeCluster.Int16():              cluster(opDescribe),
	kmsg.DescribeLogDirs.Int16():              cluster(opDescribe),
	kmsg.DescribeQuorum.Int16():               cluster(opDescribe),
	kmsg.ListPartitionReassignments.Int16():   cluster(opDescribe),
	kmsg.ElectLeaders.Int16():                 cluster(opAlter),
	kmsg.AlterPartitionAssignments.Int16():    cluster(opAlter),
	kmsg.AlterReplicaLogDirs.Int16():          cluster(opAlter),
	kmsg.DescribeACLs.Int16():                 cluster(opDescribe),
	kmsg.CreateACLs.Int16():                   cluster(opAlter),
	kmsg.DeleteACLs.Int16():                   cluster(opAlter),
	kmsg.DescribeUserSCRAMCredentials.Int16(): cluster(opDescribe),
	kmsg.AlterUserSCRAMCredentials.Int16():    cluster(opAlter),
	kmsg.UnregisterBroker.Int16():             cluster(opAlter),
	kafkaext.SkipDamagedKey:                   cluster(opAlter), // an operator's, like ElectLeaders
	kafkaext.RefetchKey:                       cluster(opClusterAction),
	kmsg.WriteTxnMarkers.Int16():              cluster(opClusterAction),
	// DescribeProducers checks READ per topic (txn_leader.go), answering
	// a refused topic's partitions beside the others.

	kmsg.FindCoordinator.Int16(): func(_ *controller.Image, body kmsg.Request, check checkFunc) bool {
		r := body.(*kmsg.FindCoordinatorRequest)
		keys := r.CoordinatorKeys
		if r.Version < 4 {
			keys = []string{r.CoordinatorKey}
		}
		for _, k := range keys {
			var ok bool
			switch r.CoordinatorType {
			case 0:
				ok = check(groupResource, opDescribe, k)
			case 1:
				ok = check(txnResource, opDescribe, k)
			default: // share-partition keys: brokers' own lookups
				ok = check(clusterResource, opClusterAction, auth.ClusterName)
			}
			if !ok {
				return false
			}
		}
		return true
	},
	kmsg.JoinGroup.Int16():  groupNeed(opRead, func(r *kmsg.JoinGroupRequest) string { return r.Group }),
	kmsg.SyncGroup.Int16():  groupNeed(opRead, func(r *kmsg.SyncGroupRequest) string { return r.Group }),
	kmsg.Heartbeat.Int16():  groupNeed(opRead, func(r *kmsg.HeartbeatRequest) string { return r.Group }),
	kmsg.LeaveGroup.Int16(): groupNeed(opRead, func(r *kmsg.LeaveGroupRequest) string { return r.Group }),
	kmsg.OffsetCommit.Int16(): func(_ *controller.Image, body kmsg.Request, check checkFunc) bool {
		r := body.(*kmsg.OffsetCommitRequest)
		if !check(groupResource, opRead, r.Group) {
			return false
		}
		for i := range r.Topics {
			if !check(topicResource, opRead, r.Topics[i].Topic) {
				return false
			}
		}
		return true
	},
	kmsg.OffsetFetch.Int16(): func(_ *controller.Image, body kmsg.Request, check checkFunc) bool {
		r := body.(*kmsg.OffsetFetchRequest)
		if r.Version < 8 {
			if !check(groupResource, opDescribe, r.Group) {
				return false
			}
			for i := range r.Topics {
				if !check(topicResource, opDescribe, r.Topics[i].Topic) {
					return false
				}
			}
			return true
		}
		for _, g := range r.Groups {
			if !check(groupResource, opDescribe, g.Group) {
				return false
			}
			for i := range g.Topics {
				if !check(topicResource, opDescribe, g.Topics[i].Topic) {
					return false
				}
			}
		}
		return true
	},
	kmsg.OffsetDelete.Int16(): func(_ *controller.Image, body kmsg.Request, check checkFunc) bool {
		r := body.(*kmsg.OffsetDeleteRequest)
		if !check(groupResource, opDelete, r.Group) {
			return false
		}
		for i := range r.Topics {
			if !check(topicResource, opRead, r.Topics[i].Topic) {
				return false
			}
		}
		return true
	},
	kmsg.DescribeGroups.Int16(): func(_ *controller.Image, body kmsg.Request, check checkFunc) bool {
		for _, g := range body.(*kmsg.DescribeGroupsRequest).Groups {
			if !check(groupResource, opDescribe, g) {
				return false
			}
		}
		return true
	},
	kmsg.DeleteGroups.Int16(): func(_ *controller.Image, body kmsg.Request, check checkFunc) bool {
		for _, g := range body.(*kmsg.DeleteGroupsRequest).Groups {
			if !check(groupResource, opDelete, g) {
				return false
			}
		}
		return true
	},

	// Transactions: WRITE on the transactional id, and on what the
	// transaction touches (AddPartitionsToTxn's topics are checked in its
	// handler, partition by partition, as Kafka answers them); the
	// partition leaders' batches (v4+) and the markers are the brokers'
	// own (CLUSTER_ACTION). ListTransactions hides the ids the principal
	// may not describe, DescribeTransactions refuses them one by one
	// (txn.go).
	kmsg.AddPartitionsToTxn.Int16(): func(_ *controller.Image, body kmsg.Request, check checkFunc) bool {
		r := body.(*kmsg.AddPartitionsToTxnRequest)
		if r.Version >= 4 {
			return check(clusterResource, opClusterAction, auth.ClusterName)
		}
		return check(txnResource, opWrite, r.TransactionalID)
	},
	kmsg.AddOffsetsToTxn.Int16(): func(_ *controller.Image, body kmsg.Request, check checkFunc) bool {
		r := body.(*kmsg.AddOffsetsToTxnRequest)
		return check(txnResource, opWrite, r.TransactionalID) && check(groupResource, opRead, r.Group)
	},
	kmsg.EndTxn.Int16(): func(_ *controller.Image, body kmsg.Request, check checkFunc) bool {
		return check(txnResource, opWrite, body.(*kmsg.EndTxnRequest).TransactionalID)
	},
	kmsg.TxnOffsetCommit.Int16(): func(_ *controller.Image, body kmsg.Request, check checkFunc) bool {
		r := body.(*kmsg.TxnOffsetCommitRequest)
		if !check(txnResource, opWrite, r.TransactionalID) || !check(groupResource, opRead, r.Group) {
			return false
		}
		for i := range r.Topics {
			if !check(topicResource, opRead, r.Topics[i].Topic) {
				return false
			}
		}
		return true
	},

	kmsg.ShareGroupHeartbeat.Int16(): groupNeed(opRead, func(r *kmsg.ShareGroupHeartbeatRequest) string { return r.GroupID }),
	kmsg.ShareGroupDescribe.Int16(): func(_ *controller.Image, body kmsg.Request, check checkFunc) bool {
		for _, g := range body.(*kmsg.ShareGroupDescribeRequest).GroupIDs {
			if !check(groupResource, opDescribe, g) {
				return false
			}
		}
		return true
	},
	kmsg.ShareFetch.Int16(): func(img *controller.Image, body kmsg.Request, check checkFunc) bool {
		r := body.(*kmsg.ShareFetchRequest)
		if !check(groupResource, opRead, deref(r.GroupID)) {
			return false
		}
		for i := range r.Topics {
			if name, ok := topicName(img, "", r.Topics[i].TopicID); ok && !check(topicResource, opRead, name) {
				return false
			}
		}
		return true
	},
	kmsg.ShareAcknowledge.Int16(): func(img *controller.Image, body kmsg.Request, check checkFunc) bool {
		r := body.(*kmsg.ShareAcknowledgeRequest)
		if !check(groupResource, opRead, deref(r.GroupID)) {
			return false
		}
		for i := range r.Topics {
			if name, ok := topicName(img, "", r.Topics[i].TopicID); ok && !check(topicResource, opRead, name) {
				return false
			}
		}
		return true
	},
	kmsg.DescribeShareGroupOffsets.Int16(): func(_ *controller.Image, body kmsg.Request, check checkFunc) bool {
		for _, g := range body.(*kmsg.DescribeShareGroupOffsetsRequest).Groups {
			if !check(groupResource, opDescribe, g.GroupID) {
				return false
			}
			for _, t := range g.Topics {
				if !check(topicResource, opDescribe, t.Topic) {
					return false
				}
			}
		}
		return true
	},
	kmsg.AlterShareGroupOffsets.Int16(): func(_ *controller.Image, body kmsg.Request, check checkFunc) bool {
		r := body.(*kmsg.AlterShareGroupOffsetsRequest)
		if !check(groupResource, opRead, r.GroupID) {
			return false
		}
		for _, t := range r.Topics {
			if !check(topicResource, opRead, t.Topic) {
				return false
			}
		}
		return true
	},
	kmsg.DeleteShareGroupOffsets.Int16(): func(_ *controller.Image, body kmsg.Request, check checkFunc) bool {
		r := body.(*kmsg.DeleteShareGroupOffsetsRequest)
		if !check(groupResource, opDelete, r.GroupID) {
			return false
		}
		for _, t := range r.Topics {
			if !check(topicResource, opRead, t.Topic) {
				return false
			}
		}
		return true
	},
}

// checkFunc reports whether the principal may do op on the resource of
// type typ called name, and remembers the first refusal.
type checkFunc func(typ auth.ResourceType, op auth.Operation, name string) bool

// quiet asks like check, but a refusal is not the request's answer: the
// request may still pass by other means (CreateTopics: CREATE on the
// cluster, or else on each topic).
func (check checkFunc) quiet(typ auth.ResourceType, op auth.Operation, name string) bool {
	return check(typ|quietBit, op, name)
}

// quietBit marks a quiet check's resource type; no ResourceType has it.
const quietBit auth.ResourceType = 0x40

func cluster(op auth.Operation) func(*controller.Image, kmsg.Request, checkFunc) bool {
	return func(_ *controller.Image, _ kmsg.Request, check checkFunc) bool {
		return check(clusterResource, op, auth.ClusterName)
	}
}

func groupNeed[R kmsg.Request](op auth.Operation, name func(R) string) func(*controller.Image, kmsg.Request, checkFunc) bool {
	return func(_ *controller.Image, body kmsg.Request, check checkFunc) bool {
		return check(groupResource, op, name(body.(R)))
	}
}

func topics[R kmsg.Request](op auth.Operation, names func(R, func(string) bool)) func(*controller.Image, kmsg.Request, checkFunc) bool {
	return func(_ *controller.Image, body kmsg.Request, check checkFunc) bool {
		ok := true
		names(body.(R), func(name string) bool {
			ok = check(topicResource, op, name)
			return ok
		})
		return ok
	}
}

// checkConfigResource checks a config resource of Describe/AlterConfigs:
// a topic's, a group's, or a broker's (the cluster's).
func checkConfigResource(check checkFunc, op auth.Operation, typ kmsg.ConfigResourceType, name string) bool {
	switch typ {
	case kmsg.ConfigResourceTypeTopic:
		return check(topicResource, op, name)
	case kmsg.ConfigResourceTypeGroupConfig:
		return check(groupResource, op, name)
	}
	return check(clusterResource, op, auth.ClusterName)
}

// topicName is the name of a topic a request gives by name or, from some
// version on, by ID; ok is false for an ID no topic has, which needs no
// check: the handler answers UNKNOWN_TOPIC_ID, as Kafka does, and says
// nothing of a topic.
func topicName(img *controller.Image, name string, id [16]byte) (string, bool) {
	if name != "" || id == [16]byte{} {
		return name, true
	}
	if t := img.TopicsByID[controller.TopicID(id)]; t != nil {
		return t.Name, true
	}
	return "", false
}

func deref(s *string) string {
	if s == nil {
		return ""
	}
	return *s
}

// unrestricted reports whether c's principal may do anything at all with
// the ACLs of img (auth.Authorizer.Unrestricted), or is a node of the
// cluster. It does not allocate: every request asks it first.
func (b *Broker) unrestricted(c *server.ConnInfo, img *controller.Image) bool {
	return b.authz.Unrestricted(img.ACLs, auth.Request{Principal: c.Principal, Local: c.Network == "unix"}) || isNode(c, img)
}

// isNode reports whether c authenticated with the certificate of a node
// of the cluster (the principal bound to its node ID, controller
// BindNode): the brokers are super users, as Kafka advises, so that
// replication and the coordinators' requests need no ACLs. A SASL user
// of the same name is not a node: the principal must be the client
// certificate's.
func isNode(c *server.ConnInfo, img *controller.Image) bool {
	if c.TLS == nil || c.Principal == "" || len(img.NodePrincipals) == 0 {
		return false
	}
	for _, p := range img.NodePrincipals {
		if p == c.Principal {
			return server.Principal(c.TLS) == c.Principal
		}
	}
	return false
}

// authRequest is the auth.Request of c doing op on a resource.
func authRequest(c *server.ConnInfo, img *controller.Image, typ auth.ResourceType, op auth.Operation, name string) auth.Request {
	r := auth.Request{Principal: c.Principal, Local: c.Network == "unix", Operation: op, Type: typ, Name: name}
	if img.ACLs.NeedsHost() && c.Network != "unix" {
		if a, ok := c.Remote.(*net.TCPAddr); ok {
			r.Host = a.IP.String()
		}
	}
	return r
}

// allowed reports whether c may do op on the resource typ/name.
func (b *Broker) allowed(c *server.ConnInfo, img *controller.Image, typ auth.ResourceType, op auth.Operation, name string) bool {
	if b.unrestricted(c, img) {
		return true
	}
	return b.authz.Authorize(img.ACLs, authRequest(c, img, typ, op, name))
}

// authorize checks req against access; it returns 0 when the handler may
// run, else the code to answer every resource of the request with.
func (b *Broker) authorize(c *server.ConnInfo, img *controller.Image, req *server.Request) int16 {
	needs, ok := access[req.Key]
	if req.Key == kmsg.InitProducerID.Int16() {
		needs, ok = b.initProducerIDNeeds(c, img), true
	}
	if !ok || b.unrestricted(c, img) {
		return 0
	}
	var code int16
	check := func(typ auth.ResourceType, op auth.Operation, name string) bool {
		quiet := typ&quietBit != 0
		typ &^= quietBit
		if b.authz.Authorize(img.ACLs, authRequest(c, img, typ, op, name)) {
			return true
		}
		if !quiet && code == 0 {
			code = authorizationFailed(typ)
		}
		return false
	}
	if needs(img, req.Body, check) {
		return 0
	}
	if code == 0 {
		code = kerr.ClusterAuthorizationFailed.Code
	}
	b.log.Debug("request refused by the ACLs", "api", kmsg.NameForKey(req.Key), "principal", principalOf(c), "code", kerr.ErrorForCode(code))
	return code
}

// initProducerIDNeeds is what InitProducerId needs: WRITE on its
// transactional ID; without one (an idempotent producer)
// IDEMPOTENT_WRITE on the cluster or WRITE on some topic, as Kafka asks
// since KIP-679.
func (b *Broker) initProducerIDNeeds(c *server.ConnInfo, img *controller.Image) func(*controller.Image, kmsg.Request, checkFunc) bool {
	return func(_ *controller.Image, body kmsg.Request, check checkFunc) bool {
		r := body.(*kmsg.InitProducerIDRequest)
		if r.TransactionalID != nil {
			return check(txnResource, opWrite, *r.TransactionalID)
		}
		if check.quiet(clusterResource, opIdempotentWrite, auth.ClusterName) {
			return true
		}
		return b.authz.AuthorizeAny(img.ACLs, authRequest(c, img, topicResource, opWrite, ""))
	}
}

func principalOf(c *server.ConnInfo) string {
	if c.Principal == "" {
		return auth.Anonymous
	}
	return c.Principal
}

// authorizationFailed is the code refusing an operation on a resource of
// typ.
func authorizationFailed(typ auth.ResourceType) int16 {
	switch typ {
	case topicResource:
		return kerr.TopicAuthorizationFailed.Code
	case groupResource:
		return kerr.GroupAuthorizationFailed.Code
	case txnResource:
		return kerr.TransactionalIDAuthorizationFailed.Code
	}
	return kerr.ClusterAuthorizationFailed.Code
}
