package client

import (
	"context"
	"fmt"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// Share-group configs (Kafka's GROUP config resource) the tools read and
// set.
const (
	// ShareAutoOffsetReset is where a share group starts reading a
	// partition it has no state for: earliest or latest (the broker's
	// default, as in Kafka).
	ShareAutoOffsetReset = "share.auto.offset.reset"
	// ShareDeadLetterTopic is mq's dead-letter topic of a share group.
	ShareDeadLetterTopic = "errors.deadletterqueue.topic.name"
)

// GroupConfig is one config of a group as the broker describes it.
type GroupConfig struct {
	Name  string
	Value string
	// Set: the group has its own value (source GROUP_CONFIG), not the
	// broker's default.
	Set bool
	Doc string
}

// sourceGroupConfig is DescribeConfigs' GROUP_CONFIG source.
const sourceGroupConfig = 8

// GroupConfigs describes the configs of group, those named or all of
// them, in the broker's order.
func GroupConfigs(ctx context.Context, cl *kgo.Client, group string, names ...string) ([]GroupConfig, error) {
	req := kmsg.NewPtrDescribeConfigsRequest()
	req.IncludeDocumentation = true
	res := kmsg.NewDescribeConfigsRequestResource()
	res.ResourceType, res.ResourceName, res.ConfigNames = kmsg.ConfigResourceTypeGroupConfig, group, names
	req.Resources = append(req.Resources, res)
	resp, err := req.RequestWith(ctx, cl)
	if err != nil {
		return nil, err
	}
	var out []GroupConfig
	for _, r := range resp.Resources {
		if err := kerr.ErrorForCode(r.ErrorCode); err != nil {
			return nil, brokerError("describe configs of group "+group, err, r.ErrorMessage)
		}
		for _, c := range r.Configs {
			gc := GroupConfig{Name: c.Name, Set: c.Source == sourceGroupConfig}
			if c.Value != nil {
				gc.Value = *c.Value
			}
			if c.Documentation != nil {
				gc.Doc = *c.Documentation
			}
			out = append(out, gc)
		}
	}
	return out, nil
}

// AlterGroupConfigs sets the configs of group in set and resets those in
// deleted to their defaults, leaving the others as they are.
func AlterGroupConfigs(ctx context.Context, cl *kgo.Client, group string, set map[string]string, deleted []string) error {
	req := kmsg.NewPtrIncrementalAlterConfigsRequest()
	res := kmsg.NewIncrementalAlterConfigsRequestResource()
	res.ResourceType, res.ResourceName = kmsg.ConfigResourceTypeGroupConfig, group
	for k, v := range set {
		c := kmsg.NewIncrementalAlterConfigsRequestResourceConfig()
		c.Name, c.Value, c.Op = k, kmsg.StringPtr(v), kmsg.IncrementalAlterConfigOpSet
		res.Configs = append(res.Configs, c)
	}
	for _, k := range deleted {
		c := kmsg.NewIncrementalAlterConfigsRequestResourceConfig()
		c.Name, c.Op = k, kmsg.IncrementalAlterConfigOpDelete
		res.Configs = append(res.Configs, c)
	}
	req.Resources = append(req.Resources, res)
	resp, err := req.RequestWith(ctx, cl)
	if err != nil {
		return err
	}
	for _, r := range resp.Resources {
		if err := kerr.ErrorForCode(r.ErrorCode); err != nil {
			return brokerError("set configs of group "+group, err, r.ErrorMessage)
		}
	}
	return nil
}

func brokerError(what string, err error, msg *string) error {
	if msg != nil && *msg != "" {
		return Failf("%s: %s", what, *msg)
	}
	return Failf("%s: %v", what, err)
}

// ShareGroupIsNew says whether the share group has never been used: no
// coordinator knows it (no member joined since the coordinator started)
// and it has no share-partition state.
func ShareGroupIsNew(ctx context.Context, cl *kgo.Client, group string) (bool, error) {
	d := kmsg.NewPtrShareGroupDescribeRequest()
	d.GroupIDs = []string{group}
	dresp, err := d.RequestWith(ctx, cl)
	if err != nil {
		return false, err
	}
	for _, g := range dresp.Groups {
		switch err := kerr.ErrorForCode(g.ErrorCode); {
		case err == kerr.GroupIDNotFound:
		case err != nil:
			return false, brokerError("describe share group "+group, err, g.ErrorMessage)
		case g.GroupState != "" && g.GroupState != "Dead":
			return false, nil
		}
	}
	o := kmsg.NewPtrDescribeShareGroupOffsetsRequest()
	og := kmsg.NewDescribeShareGroupOffsetsRequestGroup()
	og.GroupID, og.Topics = group, nil // null: every topic with state
	o.Groups = append(o.Groups, og)
	oresp, err := o.RequestWith(ctx, cl)
	if err != nil {
		return false, err
	}
	for _, g := range oresp.Groups {
		if err := kerr.ErrorForCode(g.ErrorCode); err != nil && err != kerr.GroupIDNotFound {
			return false, brokerError("describe share group offsets of "+group, err, g.ErrorMessage)
		}
		if len(g.Topics) > 0 {
			return false, nil
		}
	}
	return true, nil
}

// ShareGroupStart is where a share group starts, as StartShareGroup left
// it.
type ShareGroupStart struct {
	New   bool   // the group had never been used
	Reset string // its share.auto.offset.reset: earliest or latest
	// Chosen: this call set Reset (the group was new and had no
	// share.auto.offset.reset of its own).
	Chosen bool
}

// Describe is the line a tool prints for a new group.
func (s ShareGroupStart) Describe(group string) string {
	where := "at the earliest offset, with the records already queued"
	if s.Reset == "latest" {
		where = "at the latest offset, with only the records produced from now on"
	}
	how := ShareAutoOffsetReset + "=" + s.Reset
	if !s.Chosen {
		how = "its own " + how
	}
	return fmt.Sprintf("share group %s is new: it starts %s (%s)", group, where, how)
}

// StartShareGroup gives a new share group (ShareGroupIsNew) without a
// share.auto.offset.reset of its own the value reset (earliest or
// latest), before any member joins: a work queue then delivers what was
// queued before its first worker, as SQS does. A group that has been
// used, or whose reset was set by an operator, is left as it is.
func StartShareGroup(ctx context.Context, cl *kgo.Client, group, reset string) (ShareGroupStart, error) {
	if reset != "earliest" && reset != "latest" {
		return ShareGroupStart{}, Usagef("want earliest or latest, not %q", reset)
	}
	isNew, err := ShareGroupIsNew(ctx, cl, group)
	if err != nil || !isNew {
		return ShareGroupStart{}, err
	}
	cs, err := GroupConfigs(ctx, cl, group, ShareAutoOffsetReset)
	if err != nil {
		return ShareGroupStart{}, err
	}
	st := ShareGroupStart{New: true, Reset: "latest"}
	for _, c := range cs {
		if c.Name == ShareAutoOffsetReset {
			st.Reset = c.Value
			if c.Set {
				return st, nil
			}
		}
	}
	if err := AlterGroupConfigs(ctx, cl, group, map[string]string{ShareAutoOffsetReset: reset}, nil); err != nil {
		return ShareGroupStart{}, err
	}
	st.Reset, st.Chosen = reset, true
	return st, nil
}

// IsConsumerGroup says whether group is a consumer (classic) group: one
// with members or committed offsets, which its coordinator describes in a
// state other than Dead.
func IsConsumerGroup(ctx context.Context, cl *kgo.Client, group string) (bool, error) {
	req := kmsg.NewPtrDescribeGroupsRequest()
	req.Groups = []string{group}
	resp, err := req.RequestWith(ctx, cl)
	if err != nil {
		return false, err
	}
	for _, g := range resp.Groups {
		switch err := kerr.ErrorForCode(g.ErrorCode); {
		case err == kerr.GroupIDNotFound:
		case err != nil:
			return false, brokerError("describe group "+group, err, g.ErrorMessage)
		case g.State != "" && g.State != "Dead":
			return true, nil
		}
	}
	return false, nil
}
