package controller

import (
	"encoding/json"
	"fmt"
)

// authorizeRPC checks, with Config.TLS, that a request may come from the
// connection's principal: the node it names (req.From) must be bound to
// that principal (Image.NodePrincipals), and what it asks must be what
// that node may ask for itself. Before its binding a node may only greet,
// join, describe the quorum and bind its own ID to its own principal
// (which RegisterBroker does first). Commands that speak as a broker
// (its registration, heartbeat, controlled shutdown, a partition's ISR
// change or resignation as its leader, a non-voter's join) must name
// req.From; fencing, unfencing, the election record and an unclean
// election naming its leaders are the active controller's own and are
// never taken from another node (an operator's election goes by the
// elect RPC, where the active controller chooses), nor is
// OverridePartition, which sets a partition by hand.
func (c *Controller) authorizeRPC(req *rpcRequest, principal string) error {
	if principal == "" {
		return fmt.Errorf("%w: no certificate", ErrNodeNotAuthorized)
	}
	img := c.Image()
	bound, ok := img.NodePrincipals[req.From]
	switch {
	case ok && bound != principal:
		return fmt.Errorf("%w: the certificate is not node %d's", ErrNodeNotAuthorized, req.From)
	case !ok:
		for id, p := range img.NodePrincipals {
			if p == principal {
				return fmt.Errorf("%w: the certificate is node %d's, not node %d's", ErrNodeNotAuthorized, id, req.From)
			}
		}
	}
	switch req.Op {
	case opHello, opQuorum:
		return nil
	case opJoin:
		var j joinRequest
		if err := json.Unmarshal(req.Body, &j); err != nil {
			return fmt.Errorf("%w: %v", ErrInvalidCommand, err)
		}
		return speaksFor(req.From, j.ID)
	case opPropose:
		var data []byte
		if err := json.Unmarshal(req.Body, &data); err != nil {
			return fmt.Errorf("%w: %v", ErrInvalidCommand, err)
		}
		_, body, err := decodeCommand(data)
		if err != nil {
			return err
		}
		if b, isBind := body.(*bindNodeV1); isBind {
			if b.Principal != principal {
				return fmt.Errorf("%w: node %d may bind only the principal it connects with", ErrNodeNotAuthorized, req.From)
			}
			return speaksFor(req.From, b.ID)
		}
		if !ok {
			return fmt.Errorf("%w: node %d is not bound to a certificate yet", ErrNodeNotAuthorized, req.From)
		}
		return proposalSpeaksFor(req.From, body)
	}
	if !ok {
		return fmt.Errorf("%w: node %d is not bound to a certificate yet", ErrNodeNotAuthorized, req.From)
	}
	switch req.Op {
	case opHeartbeat:
		var hb Heartbeat
		if err := json.Unmarshal(req.Body, &hb); err != nil {
			return fmt.Errorf("%w: %v", ErrInvalidCommand, err)
		}
		return speaksFor(req.From, hb.BrokerID)
	case opElect, opRemoveNonvoter:
		return nil
	}
	return fmt.Errorf("%w: unknown rpc %q", ErrNodeNotAuthorized, req.Op)
}

// speaksFor refuses a request of node from that names another node id.
func speaksFor(from, id int32) error {
	if id != from {
		return fmt.Errorf("%w: node %d may not speak for node %d", ErrNodeNotAuthorized, from, id)
	}
	return nil
}

// proposalSpeaksFor checks a command another node proposes: see
// authorizeRPC.
func proposalSpeaksFor(from int32, body any) error {
	if id, ok := registeredBroker(body); ok {
		return speaksFor(from, id)
	}
	switch b := body.(type) {
	case *controlledShutdownV1:
		return speaksFor(from, b.ID)
	case *alterPartitionV2:
		return speaksFor(from, b.Leader)
	case *alterPartitionV3:
		for _, ch := range b.Changes {
			if err := speaksFor(from, ch.Leader); err != nil {
				return err
			}
		}
		return nil
	case *resignLeadershipV1:
		return speaksFor(from, b.Leader)
	case *fenceBrokerV1, *fenceBrokerV2, *unfenceBrokerV1, *unfenceBrokerV2, *controllerElectedV1, *alterPartitionV1, *electLeadersV2:
		return fmt.Errorf("%w: node %d may not propose %T", ErrNodeNotAuthorized, from, body)
	}
	return nil
}
