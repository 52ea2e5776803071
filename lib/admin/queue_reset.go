package admin

import (
	"context"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/mqproject/mq/lib/client"
)

// ResetQueue plans new start offsets for a share group's share-partitions
// (its records before the new start are done with, those from it on are
// available, nothing is in flight) and, with req.Execute, sets them
// (AlterShareGroupOffsets). CURRENT in the plan is each share-partition's
// start offset. The group must have no members. --shift-by does not
// apply: a share group has no single position to move.
func (a *Admin) ResetQueue(ctx context.Context, req ResetOffsets) (*ResetPlan, error) {
	const what = "queue reset"
	req.share = true
	if err := req.Check(what); err != nil {
		return nil, err
	}
	if req.Spec.Mode == ResetShiftBy {
		return nil, usagef("%s: --shift-by is for consumer groups; a share group takes --to-earliest, --to-latest, --to-offset or --to-time", what)
	}
	var described kadm.DescribedShareGroups
	var err error
	a.retry(ctx, func(ctx context.Context) error {
		if described, err = a.adm.DescribeShareGroups(ctx, req.Group); err != nil && len(described) == 0 {
			return groupRetriable(req.Group, err)
		}
		return groupRetriable(req.Group, described[req.Group].Err)
	})
	if err != nil && len(described) == 0 {
		return nil, requestError(what, err)
	}
	if d, ok := described[req.Group]; ok && d.Err == nil && len(d.Members) > 0 {
		n := len(d.Members)
		return nil, client.Failf("%s: share group %q has %d member%s: stop them first; a share group's start can only be reset while it has none",
			what, req.Group, n, plural(n))
	}
	current, err := a.shareStartOffsets(ctx, req.Group)
	if err != nil {
		return nil, err
	}
	plan, failed, err := a.planReset(ctx, what, req, current)
	if err != nil {
		return nil, err
	}
	if len(failed) > 0 || !req.Execute {
		return plan, failures(what, failed)
	}
	return plan.execute(what, func(offsets kadm.Offsets) (partitionAnswers, error) {
		resps, err := a.adm.AlterShareGroupOffsets(ctx, req.Group, offsets)
		if err != nil {
			return nil, client.Failf("%s: %s: %s", what, req.Group, errText(err, ""))
		}
		return func(topic string, partition int32) (bool, error) {
			err, ok := resps[topic][partition]
			return ok, err
		}, nil
	})
}

// shareStartOffsets returns the start offset of each share-partition
// group has state for.
func (a *Admin) shareStartOffsets(ctx context.Context, group string) (map[tp]int64, error) {
	req := kmsg.NewPtrDescribeShareGroupOffsetsRequest()
	rg := kmsg.NewDescribeShareGroupOffsetsRequestGroup()
	rg.GroupID, rg.Topics = group, nil // null: every topic with state
	req.Groups = append(req.Groups, rg)
	var resp *kmsg.DescribeShareGroupOffsetsResponse
	var err error
	a.retry(ctx, func(ctx context.Context) error {
		if resp, err = req.RequestWith(ctx, a.cl); err != nil {
			return groupRetriable(group, err)
		}
		for _, g := range resp.Groups {
			if err := groupRetriable(group, kerr.ErrorForCode(g.ErrorCode)); err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		return nil, requestError("queue reset", err)
	}
	out := map[tp]int64{}
	for _, g := range resp.Groups {
		if err := kerr.ErrorForCode(g.ErrorCode); err != nil && err != kerr.GroupIDNotFound {
			return nil, client.Failf("queue reset: describe share offsets: %s", errText(err, deref(g.ErrorMessage)))
		}
		for _, t := range g.Topics {
			for _, p := range t.Partitions {
				if kerr.ErrorForCode(p.ErrorCode) == nil && p.StartOffset >= 0 {
					out[tp{t.Topic, p.Partition}] = p.StartOffset
				}
			}
		}
	}
	return out, nil
}
