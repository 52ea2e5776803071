package admin

import (
	"context"
	"fmt"
	"slices"

	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/mqproject/mq/lib/client"
)

// ProposeDecommission plans broker decommission: every replica of broker
// moves to the other live brokers (not shutting down, answering), each to the one that can take it
// holding the fewest replicas (rack-aware), and nothing else moves
// (Place, without balance). An unknown broker, or too few brokers left
// to keep a partition's replication factor, is a usage error. It refuses
// while partitions move.
func (a *Admin) ProposeDecommission(ctx context.Context, broker int32) (Proposal, error) {
	const what = "broker decommission"
	if err := a.require(ctx, what, kmsg.AlterPartitionAssignments); err != nil {
		return Proposal{}, err
	}
	c, err := a.state(ctx, what, nil)
	if err != nil {
		return Proposal{}, err
	}
	if !c.known(broker) {
		return Proposal{}, usagef("%s: broker %d is not in the cluster", what, broker)
	}
	if err := c.settled(what); err != nil {
		return Proposal{}, err
	}
	before, down := a.placements(ctx, c)
	others := c.targets(down, broker)
	need, name := 0, ""
	c.each(func(t string, p int32, s *partitionState) {
		if len(s.replicas) > need {
			need, name = len(s.replicas), fmt.Sprintf("%s:%d", t, p)
		}
	})
	if need > len(others) {
		return Proposal{}, usagef("%s: %d live brokers would be left, and partition %s has %d replicas", what, len(others), name, need)
	}
	return propose(what, c, before, others, false)
}

// CheckDecommissioned fails unless broker holds no replica of any
// partition.
func (a *Admin) CheckDecommissioned(ctx context.Context, broker int32) error {
	const what = "broker decommission"
	c, err := a.state(ctx, what, nil)
	if err != nil {
		return err
	}
	var left []string
	c.each(func(t string, p int32, s *partitionState) {
		if slices.Contains(s.replicas, broker) {
			left = append(left, fmt.Sprintf("%s:%d", t, p))
		}
	})
	if len(left) > 0 {
		return client.Failf("%s: broker %d still holds %d replicas (%s, ...)", what, broker, len(left), left[0])
	}
	return nil
}
