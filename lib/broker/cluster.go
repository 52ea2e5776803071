package broker

import (
	"context"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/mqproject/mq/lib/server"
)

// endpointTypeBrokers is DescribeCluster's EndpointType for brokers; the
// other type, 2, asks for controllers, which in mq are the brokers
// themselves and have no endpoint of their own for clients.
const endpointTypeBrokers = 1

// clusterOperations is the set of cluster operations a client may do,
// as a DescribeCluster bit field (bit n = ACL operation n). mq has no
// authorization yet, so it is every operation that applies to a cluster.
var clusterOperations = func() int32 {
	var ops int32
	for _, op := range []kmsg.ACLOperation{
		kmsg.ACLOperationCreate,
		kmsg.ACLOperationAlter,
		kmsg.ACLOperationDescribe,
		kmsg.ACLOperationClusterAction,
		kmsg.ACLOperationDescribeConfigs,
		kmsg.ACLOperationAlterConfigs,
		kmsg.ACLOperationIdempotentWrite,
	} {
		ops |= 1 << op
	}
	return ops
}()

// handleDescribeCluster answers DescribeCluster (key 60): the cluster ID,
// the active controller and the registered brokers. Fenced brokers (those
// the controller found silent for broker.session.timeout.ms) are listed,
// marked IsFenced, only when a v2 request asks for them, as in Kafka.
func (b *Broker) handleDescribeCluster(_ context.Context, c *server.ConnInfo, req *server.Request) server.Reply {
	r := req.Body.(*kmsg.DescribeClusterRequest)
	resp := r.ResponseKind().(*kmsg.DescribeClusterResponse)
	resp.EndpointType = r.EndpointType
	if r.Version >= 1 && r.EndpointType != endpointTypeBrokers {
		msg := "only the broker endpoint type (1) is supported"
		resp.ErrorCode, resp.ErrorMessage = kerr.UnsupportedEndpointType.Code, &msg
		return reply(resp)
	}
	img := b.ctrl.Image()
	resp.ClusterID = img.ClusterID
	resp.ControllerID = img.ControllerID // as Metadata answers
	for _, id := range brokerIDs(img) {
		br := img.Brokers[id]
		if br.Fenced && !r.IncludeFencedBrokers {
			continue
		}
		br = forListener(c, br)
		rb := kmsg.NewDescribeClusterResponseBroker()
		rb.NodeID, rb.Host, rb.Port, rb.Rack = br.ID, br.Host, br.Port, br.Rack
		rb.IsFenced = br.Fenced
		resp.Brokers = append(resp.Brokers, rb)
	}
	if r.IncludeClusterAuthorizedOperations {
		resp.ClusterAuthorizedOperations = clusterOperations
	}
	return reply(resp)
}
