package broker

import (
	"context"

	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/mqproject/mq/lib/server"
)

// handleUnregisterBroker answers UnregisterBroker (key 64, KIP-500):
// the controller removes the broker, its certificate binding and, for a
// non-voter, its Raft membership (controller.UnregisterBroker), in the
// Reply. A voter, a broker still running or hosting a replica, and an
// unknown ID are refused with the controller's reason.
func (b *Broker) handleUnregisterBroker(ctx context.Context, _ *server.ConnInfo, req *server.Request) server.Reply {
	r := req.Body.(*kmsg.UnregisterBrokerRequest)
	resp := r.ResponseKind().(*kmsg.UnregisterBrokerResponse)
	return func() server.Response {
		wctx, cancel := withTimeout(ctx, 0)
		defer cancel()
		if err := b.ctrl.UnregisterBroker(wctx, r.BrokerID); err != nil {
			resp.ErrorCode, resp.ErrorMessage = kafkaError(err)
		}
		return server.Response{Msg: resp}
	}
}
