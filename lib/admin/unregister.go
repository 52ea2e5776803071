package admin

import (
	"context"
	"strconv"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/mqproject/mq/lib/client"
)

// Unregistered is what broker unregister did.
type Unregistered struct {
	Broker int32  `json:"broker"`
	Result string `json:"result"`
}

// Table is BROKER RESULT.
func (u Unregistered) Table() ([]string, [][]string) {
	return []string{"BROKER", "RESULT"}, [][]string{{strconv.Itoa(int(u.Broker)), u.Result}}
}

// ResultUnregistered is broker unregister's result.
const ResultUnregistered = "unregistered"

// UnregisterBroker removes broker id from the cluster for good
// (UnregisterBroker, Kafka API 64): its registration, the binding of its
// node to a certificate, and a non-voter's place in the controller
// quorum. The broker's refusal (a voter, a broker still running or
// hosting replicas, an unknown ID) is a failure that says why.
func (a *Admin) UnregisterBroker(ctx context.Context, id int32) (Unregistered, error) {
	const what = "broker unregister"
	if err := a.require(ctx, what, kmsg.UnregisterBroker); err != nil {
		return Unregistered{}, err
	}
	req := kmsg.NewPtrUnregisterBrokerRequest()
	req.BrokerID = id
	resp, err := req.RequestWith(ctx, a.cl)
	if err != nil {
		return Unregistered{}, requestError(what, err)
	}
	if err := kerr.ErrorForCode(resp.ErrorCode); err != nil {
		msg := ""
		if resp.ErrorMessage != nil {
			msg = *resp.ErrorMessage
		}
		return Unregistered{}, client.Failf("%s: broker %d: %s", what, id, errText(err, msg))
	}
	return Unregistered{Broker: id, Result: ResultUnregistered}, nil
}
