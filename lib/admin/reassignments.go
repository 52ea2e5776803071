package admin

import (
	"context"
	"errors"
	"fmt"
	"io"
	"slices"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/mqproject/mq/lib/client"
)

// Reassignment is one running move in partition reassignments.
type Reassignment struct {
	Topic     string  `json:"topic"`
	Partition int32   `json:"partition"`
	Replicas  []int32 `json:"replicas"` // the target and the replicas leaving
	Adding    []int32 `json:"adding"`
	Removing  []int32 `json:"removing"`
}

// Reassignments is the result of partition reassignments, sorted by
// topic and partition.
type Reassignments []Reassignment

// Table implements Result.
func (rs Reassignments) Table() ([]string, [][]string) {
	rows := make([][]string, len(rs))
	for i, r := range rs {
		rows[i] = []string{r.Topic, itoa(r.Partition), joinIDs(r.Replicas), joinIDs(r.Adding), joinIDs(r.Removing)}
	}
	return []string{"TOPIC", "PARTITION", "REPLICAS", "ADDING", "REMOVING"}, rows
}

// ListReassignments lists the running moves (ListPartitionReassignments)
// of topics, or of every topic when topics is empty. An unknown topic is
// a failure.
func (a *Admin) ListReassignments(ctx context.Context, topics []string) (Reassignments, error) {
	const what = "partition reassignments"
	if err := a.require(ctx, what, kmsg.ListPartitionReassignments); err != nil {
		return nil, err
	}
	c, err := a.state(ctx, what, topics)
	if err != nil {
		return nil, err
	}
	for _, t := range topics {
		if d, ok := c.md.Topics[t]; !ok || d.Err != nil {
			return nil, client.Failf("%s: unknown topic %q", what, t)
		}
	}
	out := Reassignments{}
	c.each(func(t string, p int32, s *partitionState) {
		if s.moving {
			out = append(out, Reassignment{Topic: t, Partition: p, Replicas: nonNil(s.replicas), Adding: nonNil(s.adding), Removing: nonNil(s.removing)})
		}
	})
	return out, nil
}

// moving returns the running moves among the partitions of set, by
// partition, for the judgements of under-replication: replicas a move
// adds do not make a partition under-replicated until it completes, as
// in Kafka (KIP-352). Best effort: a cluster that does not answer (an
// older mq, a timeout) gets none, and every partition is judged on its
// whole replica set.
func (a *Admin) moving(ctx context.Context, set kadm.TopicsSet) map[tp]kadm.ListPartitionReassignmentsResponse {
	resp, err := a.adm.ListPartitionReassignments(ctx, set)
	if err != nil {
		return nil
	}
	out := map[tp]kadm.ListPartitionReassignmentsResponse{}
	resp.Each(func(r kadm.ListPartitionReassignmentsResponse) { out[tp{r.Topic, r.Partition}] = r })
	return out
}

// underReplicated reports whether a partition's ISR is smaller than its
// replica set without the replicas a move adds.
func underReplicated(replicas, isr, adding []int32) bool {
	return len(isr) < len(replicas)-len(adding)
}

// each calls fn for every partition, sorted by topic and partition.
func (c clusterState) each(fn func(topic string, p int32, s *partitionState)) {
	topics := make([]string, 0, len(c.parts))
	for t := range c.parts {
		topics = append(topics, t)
	}
	slices.Sort(topics)
	for _, t := range topics {
		ps := make([]int32, 0, len(c.parts[t]))
		for p := range c.parts[t] {
			ps = append(ps, p)
		}
		slices.Sort(ps)
		for _, p := range ps {
			fn(t, p, c.parts[t][p])
		}
	}
}

// CancelReassignment cancels the running moves of plan's partitions, or,
// with no plan, of every partition of topics: each goes back to the
// replicas it had before its move (KIP-455). A partition that does not
// move is "not moving", not a failure. The throttles no move needs any
// more are removed.
func (a *Admin) CancelReassignment(ctx context.Context, plan *Plan, topics []string, notices io.Writer) (ReassignResults, error) {
	const what = "partition reassign --cancel"
	if plan != nil {
		if err := plan.Check(); err != nil {
			return nil, err
		}
		topics = planTopics(*plan)
	}
	if len(topics) == 0 {
		return nil, usagef("%s: give a plan or --topic", what)
	}
	if err := a.require(ctx, what, kmsg.AlterPartitionAssignments); err != nil {
		return nil, err
	}
	c, err := a.state(ctx, what, topics)
	if err != nil {
		return nil, err
	}
	type name struct {
		topic string
		p     int32
	}
	var names []name
	if plan != nil {
		if err := plan.checkAgainst(c); err != nil {
			return nil, err
		}
		for _, pp := range plan.Partitions {
			names = append(names, name{pp.Topic, pp.Partition})
		}
	} else {
		for _, t := range topics {
			if d, ok := c.md.Topics[t]; !ok || d.Err != nil {
				return nil, usagef("%s: unknown topic %q", what, t)
			}
		}
		c.each(func(t string, p int32, s *partitionState) {
			if s.moving {
				names = append(names, name{t, p})
			}
		})
	}
	out := ReassignResults{}
	var req kadm.AlterPartitionAssignmentsReq
	for _, n := range names {
		s := c.partition(n.topic, n.p)
		r := ReassignResult{Topic: n.topic, Partition: n.p, Replicas: nonNil(s.replicas), Target: s.original(), Adding: nonNil(s.adding), Removing: nonNil(s.removing)}
		if s.moving {
			req.CancelAssign(n.topic, n.p)
			r.Result = ResultCancelled
		} else {
			r.Result, r.Target = ResultNotMoving, nonNil(s.replicas)
		}
		out = append(out, r)
	}
	if len(req) > 0 {
		resps, err := a.adm.AlterPartitionAssignments(ctx, req)
		if err != nil {
			return nil, requestError(what, err)
		}
		for i, r := range out {
			if r.Result != ResultCancelled {
				continue
			}
			switch resp, ok := resps[r.Topic][r.Partition]; {
			case !ok:
				out[i].Result, out[i].Error = ResultFailed, "no answer for this partition"
			case errors.Is(resp.Err, kerr.NoReassignmentInProgress):
				out[i].Result, out[i].Target = ResultNotMoving, r.Replicas
			case resp.Err != nil:
				out[i].Result, out[i].Error = ResultFailed, errText(resp.Err, resp.ErrMessage)
			}
		}
	}
	sortResults(out)
	if err := out.failures(what); err != nil {
		return out, err
	}
	removed, err := a.clearThrottles(ctx, what, topics)
	if removed && notices != nil {
		fmt.Fprintln(notices, "mqctl: the throttles no move needs were removed")
	}
	return out, err
}

// Proposal is what partition reassign --generate, cluster rebalance and
// broker decommission propose: the plan of the partitions that move, the
// assignment they have now (to roll back with), how many replicas move
// and how many bytes they copy.
type Proposal struct {
	Plan     Plan  `json:"plan"`
	Current  Plan  `json:"current"`
	Replicas int   `json:"replicas"` // replicas placed on a broker that does not hold them
	Bytes    int64 `json:"bytes"`    // what those replicas copy, from DescribeLogDirs
	// Partitions counts the partitions the planner looked at.
	Partitions int `json:"partitions"`
}

// Summary says the proposal in one line.
func (p Proposal) Summary() string {
	if len(p.Plan.Partitions) == 0 {
		return fmt.Sprintf("nothing to move: the %d partitions are placed as they should be", p.Partitions)
	}
	return fmt.Sprintf("%d of %d partitions change, %d replicas move, %s to copy", len(p.Plan.Partitions), p.Partitions, p.Replicas, sizeText(p.Bytes))
}

// Table implements Result: the partitions that move, from where to
// where.
func (p Proposal) Table() ([]string, [][]string) {
	rows := make([][]string, len(p.Plan.Partitions))
	for i, pp := range p.Plan.Partitions {
		rows[i] = []string{pp.Topic, itoa(pp.Partition), joinIDs(p.Current.Partitions[i].Replicas), joinIDs(pp.Replicas)}
	}
	return []string{"TOPIC", "PARTITION", "REPLICAS", "TARGET"}, rows
}

// placements are c's partitions as the planner sees them, with each
// one's size: the largest of its replicas' in DescribeLogDirs, asked of
// every live broker. down holds the live brokers that did not answer
// (stopped and not fenced yet, cut off), and why: no replica should go
// there.
func (a *Admin) placements(ctx context.Context, c clusterState) (parts []Placement, down map[int32]string) {
	topics := map[string][]int32{}
	c.each(func(t string, p int32, s *partitionState) {
		topics[t] = append(topics[t], p)
		parts = append(parts, Placement{Topic: t, Partition: p, Replicas: s.replicas})
	})
	dirs := a.describeLogDirs(ctx, c.liveBrokers(), topics)
	for i, p := range parts {
		for _, size := range dirs.sizes[p.Topic][p.Partition] {
			parts[i].Bytes = max(parts[i].Bytes, size)
		}
	}
	return parts, dirs.errs
}

// liveBrokers are the brokers not fenced, sorted.
func (c clusterState) liveBrokers() []int32 {
	var out []int32
	for _, b := range c.roster.brokers {
		if c.roster.states[b.NodeID] != BrokerFenced {
			out = append(out, b.NodeID)
		}
	}
	slices.Sort(out)
	return out
}

// planBrokers are the brokers ids as the planner sees them, with racks.
func (c clusterState) planBrokers(ids []int32) []PlanBroker {
	var out []PlanBroker
	for _, id := range ids {
		for _, b := range c.roster.brokers {
			if b.NodeID == id {
				pb := PlanBroker{ID: id}
				if b.Rack != nil {
					pb.Rack = *b.Rack
				}
				out = append(out, pb)
			}
		}
	}
	return out
}

// propose places the partitions before (placements of c) on brokers and
// returns what moves.
func propose(what string, c clusterState, before []Placement, brokers []int32, balance bool) (Proposal, error) {
	after, err := Place(c.planBrokers(brokers), before, balance)
	if err != nil {
		return Proposal{}, client.Failf("%s: %v", what, err)
	}
	moves, added, bytes := Moves(before, after)
	var current []PlanPartition
	for _, m := range moves {
		current = append(current, PlanPartition{Topic: m.Topic, Partition: m.Partition, Replicas: c.partition(m.Topic, m.Partition).replicas})
	}
	return Proposal{Plan: NewPlan(moves), Current: NewPlan(current), Replicas: added, Bytes: bytes, Partitions: len(before)}, nil
}

// GenerateReassignment proposes a plan that spreads the replicas and
// preferred leaders of topics evenly over brokers (Place, with balance):
// partition reassign --generate. An unknown topic or broker is a usage
// error; so is a topic with a partition moving already, since its
// replicas are not settled.
func (a *Admin) GenerateReassignment(ctx context.Context, topics []string, brokers []int32) (Proposal, error) {
	const what = "partition reassign --generate"
	if err := CheckTopicNames(what, topics); err != nil {
		return Proposal{}, err
	}
	if len(brokers) == 0 {
		return Proposal{}, usagef("%s: missing --brokers", what)
	}
	c, err := a.state(ctx, what, topics)
	if err != nil {
		return Proposal{}, err
	}
	for _, t := range topics {
		if d, ok := c.md.Topics[t]; !ok || d.Err != nil {
			return Proposal{}, usagef("%s: unknown topic %q", what, t)
		}
	}
	for _, b := range brokers {
		switch {
		case !c.known(b):
			return Proposal{}, usagef("%s: broker %d is not in the cluster", what, b)
		case c.roster.states[b] == BrokerFenced:
			return Proposal{}, client.Failf("%s: broker %d is fenced: no replica can move there", what, b)
		}
	}
	if err := c.settled(what); err != nil {
		return Proposal{}, err
	}
	before, down := a.placements(ctx, c)
	for _, b := range brokers {
		if why, ok := down[b]; ok {
			return Proposal{}, client.Failf("%s: broker %d does not answer (%s): no replica can move there", what, b, why)
		}
	}
	return propose(what, c, before, brokers, true)
}

// settled refuses to plan while a partition of c moves: its replicas are
// not the ones it will have.
func (c clusterState) settled(what string) error {
	var moving []string
	c.each(func(t string, p int32, s *partitionState) {
		if s.moving {
			moving = append(moving, fmt.Sprintf("%s:%d", t, p))
		}
	})
	switch len(moving) {
	case 0:
		return nil
	case 1:
		return client.Failf("%s: partition %s is moving; wait for it (partition reassign --watch) or cancel it", what, moving[0])
	}
	return client.Failf("%s: %d partitions are moving (%s, ...); wait for them (partition reassign --watch) or cancel them", what, len(moving), moving[0])
}
