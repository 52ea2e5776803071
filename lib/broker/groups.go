package broker

import (
	"bytes"
	"context"
	"errors"
	"net"
	"slices"
	"strings"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/mqproject/mq/lib/auth"
	"github.com/mqproject/mq/lib/coordinator"
	"github.com/mqproject/mq/lib/group"
	"github.com/mqproject/mq/lib/server"
)

// groupAPIs lists the consumer group APIs (this file) and the offset APIs
// (groups_offsets.go), served by the group coordinator (lib/group).
// ConsumerGroupHeartbeat (KIP-848) is not offered: clients use the classic
// protocol.
func (b *Broker) groupAPIs() map[int16]api {
	return map[int16]api{
		kmsg.FindCoordinator.Int16(): {0, 4, b.handleFindCoordinator},
		kmsg.JoinGroup.Int16():       {0, 9, b.handleJoinGroup},
		kmsg.SyncGroup.Int16():       {0, 5, b.handleSyncGroup},
		kmsg.Heartbeat.Int16():       {0, 4, b.handleHeartbeat},
		kmsg.LeaveGroup.Int16():      {0, 5, b.handleLeaveGroup},
		kmsg.OffsetCommit.Int16():    {0, 9, b.handleOffsetCommit},
		kmsg.OffsetFetch.Int16():     {0, 9, b.handleOffsetFetch},
		kmsg.OffsetDelete.Int16():    {0, 0, b.handleOffsetDelete},
		kmsg.ListGroups.Int16():      {0, 5, b.handleListGroups},
		kmsg.DescribeGroups.Int16():  {0, 5, b.handleDescribeGroups},
		kmsg.DeleteGroups.Int16():    {0, 2, b.handleDeleteGroups},
	}
}

// Coordinator key types of FindCoordinator.
const (
	coordinatorGroup       = 0
	coordinatorTransaction = 1
)

// findCoordinatorLoadWait is how long FindCoordinator waits for this node
// to finish loading the group's partition before answering
// COORDINATOR_LOAD_IN_PROGRESS (which makes clients retry).
const findCoordinatorLoadWait = 5 * time.Second

// handleFindCoordinator answers where a group's coordinator is (key type
// 0), or a transactional id's (key type 1): the leader of its partition
// of __consumer_offsets or __transaction_state, created on first use. v4
// batches keys. Other key types are INVALID_REQUEST.
func (b *Broker) handleFindCoordinator(ctx context.Context, conn *server.ConnInfo, req *server.Request) server.Reply {
	r := req.Body.(*kmsg.FindCoordinatorRequest)
	keys := r.CoordinatorKeys
	if req.Version < 4 {
		keys = []string{r.CoordinatorKey}
	}
	keyType := r.CoordinatorType
	return func() server.Response {
		resp := r.ResponseKind().(*kmsg.FindCoordinatorResponse)
		for _, key := range keys {
			c := kmsg.NewFindCoordinatorResponseCoordinator()
			c.Key = key
			c.NodeID, c.Host, c.Port, c.ErrorCode, c.ErrorMessage = b.findCoordinator(ctx, conn, key, keyType)
			resp.Coordinators = append(resp.Coordinators, c)
		}
		if req.Version < 4 && len(resp.Coordinators) == 1 {
			c := resp.Coordinators[0]
			resp.NodeID, resp.Host, resp.Port, resp.ErrorCode, resp.ErrorMessage = c.NodeID, c.Host, c.Port, c.ErrorCode, c.ErrorMessage
		}
		return server.Response{Msg: resp}
	}
}

func (b *Broker) findCoordinator(ctx context.Context, conn *server.ConnInfo, key string, keyType int8) (node int32, host string, port int32, code int16, msg *string) {
	fail := func(e *kerr.Error, text string) (int32, string, int32, int16, *string) {
		return -1, "", -1, e.Code, &text
	}
	var k coordinatorKind
	switch {
	case keyType == coordinatorTransaction && key == "":
		return fail(kerr.InvalidRequest, "empty transactional id")
	case keyType == coordinatorTransaction:
		k = b.txnCoordinatorFor()
	case keyType != coordinatorGroup:
		return fail(kerr.InvalidRequest, "only group and transaction coordinators (key types 0 and 1) exist")
	case key == "":
		return fail(kerr.InvalidGroupID, "empty group id")
	default:
		k = b.groupCoordinatorFor()
	}
	ctx, cancel := context.WithTimeout(ctx, findCoordinatorLoadWait)
	defer cancel()
	br, err := k.topic.Locate(ctx, key, coordinator.Keyed{What: k.what, Partition: k.partition,
		Check: k.check, WaitLoad: k.waitLoad, Sync: k.sync, Loading: k.loading})
	var le *coordinator.LocateError
	switch {
	case errors.As(err, &le) && le.Loading:
		return fail(kerr.CoordinatorLoadInProgress, err.Error())
	case le != nil:
		return fail(kerr.CoordinatorNotAvailable, err.Error())
	case err != nil:
		b.log.Warn("find coordinator", k.what, key, "err", err)
		return fail(kerr.CoordinatorNotAvailable, err.Error())
	}
	br = forListener(conn, br)
	return br.ID, br.Host, br.Port, 0, nil
}

// clientHost is how DescribeGroups shows a member's address: Kafka's
// "/1.2.3.4".
func clientHost(c *server.ConnInfo) string {
	if c == nil || c.Remote == nil {
		return ""
	}
	if host, _, err := net.SplitHostPort(c.Remote.String()); err == nil {
		return "/" + host
	}
	return "/" + c.Remote.String()
}

func clientID(req *server.Request) string {
	if req.ClientID == nil {
		return ""
	}
	return *req.ClientID
}

func optString(p *string) string {
	if p == nil {
		return ""
	}
	return *p
}

func strPtr(s string) *string {
	if s == "" {
		return nil
	}
	return &s
}

// handleJoinGroup registers the join on the reader goroutine (so a
// connection's joins are ordered) and waits for the rebalance in the
// Reply: JoinGroup answers when the group's join phase completes.
func (b *Broker) handleJoinGroup(ctx context.Context, c *server.ConnInfo, req *server.Request) server.Reply {
	r := req.Body.(*kmsg.JoinGroupRequest)
	jr := group.JoinRequest{
		Group:                r.Group,
		MemberID:             r.MemberID,
		InstanceID:           optString(r.InstanceID),
		ClientID:             clientID(req),
		ClientHost:           clientHost(c),
		SessionTimeout:       time.Duration(r.SessionTimeoutMillis) * time.Millisecond,
		RebalanceTimeout:     time.Duration(r.RebalanceTimeoutMillis) * time.Millisecond,
		ProtocolType:         r.ProtocolType,
		RequireKnownMemberID: req.Version >= 4,
		SkipAssignmentOK:     req.Version >= 9,
	}
	if req.Version == 0 {
		jr.RebalanceTimeout = jr.SessionTimeout
	}
	// The group keeps the metadata: copied, so that it does not keep the
	// whole request frame alive outside the request memory budget.
	for _, p := range r.Protocols {
		jr.Protocols = append(jr.Protocols, group.Protocol{Name: p.Name, Metadata: bytes.Clone(p.Metadata)})
	}
	// One id is one group, of one type, as in Kafka: a consumer group
	// never shadows a queue.
	if b.shareGroups.Has(r.Group) {
		resp := r.ResponseKind().(*kmsg.JoinGroupResponse)
		resp.ErrorCode, resp.Generation = kerr.InconsistentGroupProtocol.Code, -1
		return reply(resp)
	}
	ch := b.groups.c.Join(jr)
	return func() server.Response {
		var res group.JoinResult
		select {
		case res = <-ch:
		case <-ctx.Done():
			return server.Response{}
		}
		resp := r.ResponseKind().(*kmsg.JoinGroupResponse)
		resp.ErrorCode = groupError(res.Err)
		resp.MemberID = res.MemberID
		resp.Generation = -1
		if res.Err != nil {
			if req.Version < 4 && resp.ErrorCode == kerr.MemberIDRequired.Code {
				resp.ErrorCode = kerr.UnknownMemberID.Code // cannot happen: v4+ only
			}
			return server.Response{Msg: resp}
		}
		resp.Generation = res.Generation
		resp.ProtocolType = strPtr(res.ProtocolType)
		resp.Protocol = &res.Protocol
		resp.LeaderID = res.Leader
		resp.SkipAssignment = res.SkipAssignment
		for _, m := range res.Members {
			rm := kmsg.NewJoinGroupResponseMember()
			rm.MemberID, rm.InstanceID, rm.ProtocolMetadata = m.MemberID, strPtr(m.InstanceID), m.Metadata
			resp.Members = append(resp.Members, rm)
		}
		return server.Response{Msg: resp}
	}
}

// handleSyncGroup registers the sync and, for followers of a group whose
// leader has not sent the assignment yet, waits for it in the Reply.
func (b *Broker) handleSyncGroup(ctx context.Context, _ *server.ConnInfo, req *server.Request) server.Reply {
	r := req.Body.(*kmsg.SyncGroupRequest)
	sr := group.SyncRequest{
		Group:        r.Group,
		MemberID:     r.MemberID,
		InstanceID:   optString(r.InstanceID),
		Generation:   r.Generation,
		ProtocolType: optString(r.ProtocolType),
		Protocol:     optString(r.Protocol),
	}
	if len(r.GroupAssignment) > 0 {
		sr.Assignments = make(map[string][]byte, len(r.GroupAssignment))
		for _, a := range r.GroupAssignment {
			sr.Assignments[a.MemberID] = bytes.Clone(a.MemberAssignment) // kept by the group, like JoinGroup's metadata
		}
	}
	ch := b.groups.c.Sync(sr)
	return func() server.Response {
		var res group.SyncResult
		select {
		case res = <-ch:
		case <-ctx.Done():
			return server.Response{}
		}
		resp := r.ResponseKind().(*kmsg.SyncGroupResponse)
		resp.ErrorCode = groupError(res.Err)
		if res.Err == nil {
			resp.ProtocolType = strPtr(res.ProtocolType)
			resp.Protocol = strPtr(res.Protocol)
			resp.MemberAssignment = res.Assignment
		}
		if resp.MemberAssignment == nil {
			resp.MemberAssignment = []byte{}
		}
		return server.Response{Msg: resp}
	}
}

// handleHeartbeat keeps a member's session alive and tells it whether to
// rejoin (REBALANCE_IN_PROGRESS).
func (b *Broker) handleHeartbeat(_ context.Context, _ *server.ConnInfo, req *server.Request) server.Reply {
	r := req.Body.(*kmsg.HeartbeatRequest)
	resp := r.ResponseKind().(*kmsg.HeartbeatResponse)
	resp.ErrorCode = groupError(b.groups.c.Heartbeat(r.Group, r.MemberID, optString(r.InstanceID), r.Generation))
	return reply(resp)
}

// handleLeaveGroup removes members: one (v0-v2) or a batch (v3+, by member
// id and/or group.instance.id).
func (b *Broker) handleLeaveGroup(_ context.Context, _ *server.ConnInfo, req *server.Request) server.Reply {
	r := req.Body.(*kmsg.LeaveGroupRequest)
	resp := r.ResponseKind().(*kmsg.LeaveGroupResponse)
	var members []group.LeaveMember
	if req.Version < 3 {
		members = []group.LeaveMember{{MemberID: r.MemberID}}
	} else {
		for _, m := range r.Members {
			members = append(members, group.LeaveMember{MemberID: m.MemberID, InstanceID: optString(m.InstanceID)})
		}
	}
	errs, err := b.groups.c.Leave(r.Group, members)
	if err != nil {
		resp.ErrorCode = groupError(err)
		return reply(resp)
	}
	if req.Version < 3 {
		resp.ErrorCode = groupError(errs[0])
		return reply(resp)
	}
	for i, m := range r.Members {
		rm := kmsg.NewLeaveGroupResponseMember()
		rm.MemberID, rm.InstanceID = m.MemberID, m.InstanceID
		rm.ErrorCode = groupError(errs[i])
		resp.Members = append(resp.Members, rm)
	}
	return reply(resp)
}

// groupTypeClassic is the type (ListGroups v5+) of classic groups.
const groupTypeClassic = "classic"

// handleListGroups lists the groups this node coordinates, filtered by
// state (v4+) and type (v5+).
func (b *Broker) handleListGroups(_ context.Context, c *server.ConnInfo, req *server.Request) server.Reply {
	r := req.Body.(*kmsg.ListGroupsRequest)
	resp := r.ResponseKind().(*kmsg.ListGroupsResponse)
	// As Kafka: DESCRIBE on the cluster lists every group, else those the
	// principal may describe.
	defer func() {
		img := b.ctrl.Image()
		if b.allowed(c, img, clusterResource, opDescribe, auth.ClusterName) {
			return
		}
		resp.Groups = slices.DeleteFunc(resp.Groups, func(g kmsg.ListGroupsResponseGroup) bool {
			return !b.allowed(c, img, groupResource, opDescribe, g.Group)
		})
	}()
	wants := func(typ string) bool {
		return len(r.TypesFilter) == 0 || slices.ContainsFunc(r.TypesFilter, func(t string) bool { return strings.EqualFold(t, typ) })
	}
	if wants(groupTypeShare) {
		for _, sg := range b.coords.ListShareGroups() {
			if len(r.StatesFilter) > 0 && !slices.ContainsFunc(r.StatesFilter, func(s string) bool { return strings.EqualFold(s, sg.State) }) {
				continue
			}
			g := kmsg.NewListGroupsResponseGroup()
			g.Group, g.ProtocolType, g.GroupState, g.GroupType = sg.ID, "share", sg.State, groupTypeShare
			resp.Groups = append(resp.Groups, g)
		}
	}
	if !wants(groupTypeClassic) {
		return reply(resp)
	}
	for _, l := range b.groups.c.ListGroups(r.StatesFilter) {
		g := kmsg.NewListGroupsResponseGroup()
		g.Group, g.ProtocolType, g.GroupState, g.GroupType = l.Group, l.ProtocolType, l.State.String(), groupTypeClassic
		resp.Groups = append(resp.Groups, g)
	}
	return reply(resp)
}

// groupOperations are the ACL operations on a group DescribeGroups reports
// when asked (v3+): all that apply to a group, not narrowed to what the
// ACLs allow the asking principal.
var groupOperations = func() int32 {
	var ops int32
	for _, op := range []kmsg.ACLOperation{kmsg.ACLOperationRead, kmsg.ACLOperationDescribe, kmsg.ACLOperationDelete} {
		ops |= 1 << op
	}
	return ops
}()

// handleDescribeGroups describes groups: state, protocol and members with
// their client ids, hosts, metadata and assignments. Unknown groups are
// described as Dead, as Kafka does.
func (b *Broker) handleDescribeGroups(_ context.Context, _ *server.ConnInfo, req *server.Request) server.Reply {
	r := req.Body.(*kmsg.DescribeGroupsRequest)
	resp := r.ResponseKind().(*kmsg.DescribeGroupsResponse)
	for _, id := range r.Groups {
		g := kmsg.NewDescribeGroupsResponseGroup()
		g.Group = id
		d, err := b.groups.c.DescribeGroup(id)
		if err != nil {
			g.ErrorCode = groupError(err)
			resp.Groups = append(resp.Groups, g)
			continue
		}
		g.State, g.ProtocolType, g.Protocol = d.State.String(), d.ProtocolType, d.Protocol
		if r.IncludeAuthorizedOperations {
			g.AuthorizedOperations = groupOperations
		}
		for _, m := range d.Members {
			rm := kmsg.NewDescribeGroupsResponseGroupMember()
			rm.MemberID, rm.InstanceID, rm.ClientID, rm.ClientHost = m.MemberID, strPtr(m.InstanceID), m.ClientID, m.ClientHost
			rm.ProtocolMetadata, rm.MemberAssignment = nonNil(m.Metadata), nonNil(m.Assignment)
			g.Members = append(g.Members, rm)
		}
		resp.Groups = append(resp.Groups, g)
	}
	return reply(resp)
}

func nonNil(b []byte) []byte {
	if b == nil {
		return []byte{}
	}
	return b
}

// handleDeleteGroups deletes empty groups and their offsets.
func (b *Broker) handleDeleteGroups(ctx context.Context, _ *server.ConnInfo, req *server.Request) server.Reply {
	r := req.Body.(*kmsg.DeleteGroupsRequest)
	resp := r.ResponseKind().(*kmsg.DeleteGroupsResponse)
	for _, id := range r.Groups {
		g := kmsg.NewDeleteGroupsResponseGroup()
		g.Group = id
		g.ErrorCode = groupError(b.groups.c.DeleteGroup(ctx, id))
		resp.Groups = append(resp.Groups, g)
	}
	return reply(resp)
}
