package admin

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"io"
	"maps"
	"math"
	"slices"
	"strconv"
	"strings"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/mqproject/mq/lib/client"
)

// The throttle configs of a reassignment (KIP-73), as Kafka names them:
// the rates are dynamic broker configs in bytes per second, the replica
// lists topic configs of partition:broker pairs.
const (
	LeaderThrottleRate       = "leader.replication.throttled.rate"
	FollowerThrottleRate     = "follower.replication.throttled.rate"
	LeaderThrottledReplicas  = "leader.replication.throttled.replicas"
	FollowerThrottledReplica = "follower.replication.throttled.replicas"
)

// ParseRate reads a --throttle value in bytes per second: a number,
// optionally with a unit, B, KB, MB, GB (powers of 1000; K, M, G too) or
// KiB, MiB, GiB (powers of 1024), and optionally "/s": 10MB, 512KiB,
// 1.5MiB/s, 1048576. It must be at least one byte per second.
func ParseRate(what, s string) (int64, error) {
	t := strings.TrimSuffix(strings.TrimSpace(s), "/s")
	i := strings.IndexFunc(t, func(r rune) bool { return (r < '0' || r > '9') && r != '.' })
	if i < 0 {
		i = len(t)
	}
	num, unit := t[:i], strings.ToLower(strings.TrimSpace(t[i:]))
	mult, ok := map[string]float64{
		"": 1, "b": 1,
		"k": 1e3, "kb": 1e3, "m": 1e6, "mb": 1e6, "g": 1e9, "gb": 1e9,
		"kib": 1 << 10, "mib": 1 << 20, "gib": 1 << 30,
	}[unit]
	v, err := strconv.ParseFloat(num, 64)
	if !ok || err != nil || num == "" {
		return 0, usagef("%s: want bytes per second, such as 10MB, 512KiB or 1048576, got %q", what, s)
	}
	n := v * mult
	if n < 1 || n > math.MaxInt64/2 {
		return 0, usagef("%s: want at least 1 byte per second, got %q", what, s)
	}
	return int64(n), nil
}

// partitionState is one partition as Metadata and
// ListPartitionReassignments show it.
type partitionState struct {
	replicas []int32 // during a move: the target and the replicas leaving
	isr      []int32
	leader   int32
	moving   bool
	adding   []int32
	removing []int32
}

// original is the replica set before the running move (the set a cancel
// restores), or the replicas when nothing moves.
func (s *partitionState) original() []int32 {
	return slices.DeleteFunc(slices.Clone(s.replicas), func(r int32) bool { return slices.Contains(s.adding, r) })
}

// target is where the running move goes, or the replicas when nothing
// moves.
func (s *partitionState) target() []int32 {
	return slices.DeleteFunc(slices.Clone(s.replicas), func(r int32) bool { return slices.Contains(s.removing, r) })
}

// clusterState is what reassignment reads of the cluster: the brokers
// and the partitions of some topics.
type clusterState struct {
	md     kadm.Metadata
	roster brokerRoster
	parts  map[string]map[int32]*partitionState
}

func (c clusterState) partition(topic string, p int32) *partitionState {
	return c.parts[topic][p]
}

// known reports whether broker id is registered (fenced ones too).
func (c clusterState) known(id int32) bool {
	return slices.ContainsFunc(c.roster.brokers, func(b kadm.BrokerDetail) bool { return b.NodeID == id })
}

// state reads the brokers and the partitions of topics (every topic when
// topics is nil) with the reassignments running among them.
func (a *Admin) state(ctx context.Context, what string, topics []string) (clusterState, error) {
	md, err := a.adm.Metadata(ctx, topics...)
	if err != nil {
		return clusterState{}, requestError(what, err)
	}
	c := clusterState{md: md, roster: a.roster(ctx, md), parts: map[string]map[int32]*partitionState{}}
	for t, d := range md.Topics {
		if d.Err != nil {
			continue
		}
		c.parts[t] = map[int32]*partitionState{}
		for p, pd := range d.Partitions {
			c.parts[t][p] = &partitionState{replicas: pd.Replicas, isr: pd.ISR, leader: pd.Leader}
		}
	}
	running, err := a.listReassignments(ctx, what, c.parts)
	if err != nil {
		return clusterState{}, err
	}
	for _, r := range running {
		if s := c.partition(r.Topic, r.Partition); s != nil {
			s.moving, s.adding, s.removing = true, r.AddingReplicas, r.RemovingReplicas
			if len(r.Replicas) > 0 {
				s.replicas = r.Replicas
			}
		}
	}
	return c, nil
}

// listReassignments asks which of parts' partitions are moving.
func (a *Admin) listReassignments(ctx context.Context, what string, parts map[string]map[int32]*partitionState) ([]kadm.ListPartitionReassignmentsResponse, error) {
	set := kadm.TopicsSet{}
	for t, ps := range parts {
		for p := range ps {
			set.Add(t, p)
		}
	}
	if len(set) == 0 {
		return nil, nil
	}
	resp, err := a.adm.ListPartitionReassignments(ctx, set)
	if err != nil {
		return nil, requestError(what+": listing the reassignments", err)
	}
	return resp.Sorted(), nil
}

// planTopics lists the topics of a plan, sorted.
func planTopics(p Plan) []string {
	var out []string
	for _, pp := range p.Partitions {
		if !slices.Contains(out, pp.Topic) {
			out = append(out, pp.Topic)
		}
	}
	slices.Sort(out)
	return out
}

// checkAgainst refuses a plan naming a topic, partition or broker the
// cluster does not have (a usage error: the plan is wrong, not the
// cluster).
func (p Plan) checkAgainst(c clusterState) error {
	for _, pp := range p.Partitions {
		d, ok := c.md.Topics[pp.Topic]
		if !ok || errors.Is(d.Err, kerr.UnknownTopicOrPartition) {
			return usagef("the plan names topic %q, which the cluster does not have", pp.Topic)
		}
		if d.Err != nil {
			return requestError("topic "+pp.Topic, d.Err)
		}
		if c.partition(pp.Topic, pp.Partition) == nil {
			return usagef("the plan names partition %s:%d; topic %s has %d partitions", pp.Topic, pp.Partition, pp.Topic, len(d.Partitions))
		}
		for _, r := range pp.Replicas {
			if !c.known(r) {
				return usagef("partition %s:%d: broker %d is not in the cluster", pp.Topic, pp.Partition, r)
			}
		}
	}
	return nil
}

// Result values of partition reassign.
const (
	ResultStarted   = "started"   // the move was submitted
	ResultMoving    = "moving"    // already moving to this target
	ResultCancelled = "cancelled" // a running move was cancelled
	ResultNotMoving = "not moving"
	ResultComplete  = "complete"
	ResultRunning   = "in progress"
)

// ReassignResult is the outcome for one partition of partition reassign
// --execute, --cancel or --verify.
type ReassignResult struct {
	Topic     string `json:"topic"`
	Partition int32  `json:"partition"`
	// Replicas are the partition's replicas when asked (during a move
	// the target and the replicas leaving); Target where the plan (or,
	// for a cancel, the cancel) sends them.
	Replicas []int32 `json:"replicas"`
	Target   []int32 `json:"target"`
	Adding   []int32 `json:"adding"`
	Removing []int32 `json:"removing"`
	Result   string  `json:"result"`
	Error    string  `json:"error,omitempty"`
}

// ReassignResults is the result of partition reassign --execute,
// --cancel and --verify, sorted by topic and partition.
type ReassignResults []ReassignResult

// Table implements Result.
func (rs ReassignResults) Table() ([]string, [][]string) {
	rows := make([][]string, len(rs))
	for i, r := range rs {
		rows[i] = []string{r.Topic, itoa(r.Partition), joinIDs(r.Replicas), joinIDs(r.Target), r.Result, orDash(r.Error)}
	}
	return []string{"TOPIC", "PARTITION", "REPLICAS", "TARGET", "RESULT", "DETAIL"}, rows
}

func (rs ReassignResults) allFailed() bool {
	return !slices.ContainsFunc(rs, func(r ReassignResult) bool { return r.Result != ResultFailed })
}

func (rs ReassignResults) failures(what string) error {
	var failed []string
	for _, r := range rs {
		if r.Result == ResultFailed {
			failed = append(failed, fmt.Sprintf("%s:%d: %s", r.Topic, r.Partition, r.Error))
		}
	}
	return failures(what, failed)
}

func sortResults(rs ReassignResults) {
	slices.SortFunc(rs, func(x, y ReassignResult) int {
		return cmp.Or(strings.Compare(x.Topic, y.Topic), cmp.Compare(x.Partition, y.Partition))
	})
}

// Execute is what partition reassign --execute asks for.
type Execute struct {
	Plan Plan
	// Throttle, when above 0, limits the replication of the moves to
	// this many bytes per second (each broker's leader and follower
	// side), as Kafka's tool does; a plan already running gets the new
	// rate.
	Throttle int64
	// Notices gets the current assignment before anything changes, to
	// roll back with, and what was throttled.
	Notices io.Writer
}

// ExecuteReassignment submits a plan (AlterPartitionReassignments,
// KIP-455): each partition whose replicas differ from the plan's starts
// moving; one already moving to the plan's replicas is left to it; one
// already there is "unchanged". A plan naming a topic, partition or
// broker the cluster lacks is refused before anything changes (a usage
// error). With a throttle, the rates are set on every broker the plan
// involves and the moving replicas listed in the topics' throttled
// replica configs, before the moves start.
func (a *Admin) ExecuteReassignment(ctx context.Context, req Execute) (ReassignResults, error) {
	const what = "partition reassign"
	if err := req.Plan.Check(); err != nil {
		return nil, err
	}
	if err := a.require(ctx, what, kmsg.AlterPartitionAssignments); err != nil {
		return nil, err
	}
	c, err := a.state(ctx, what, planTopics(req.Plan))
	if err != nil {
		return nil, err
	}
	if err := req.Plan.checkAgainst(c); err != nil {
		return nil, err
	}
	if req.Notices != nil {
		var current []PlanPartition
		for _, pp := range req.Plan.Partitions {
			current = append(current, PlanPartition{Topic: pp.Topic, Partition: pp.Partition, Replicas: c.partition(pp.Topic, pp.Partition).original()})
		}
		fmt.Fprintln(req.Notices, "mqctl: the current assignment (to roll back, --execute it):")
		if _, err := NewPlan(current).WriteTo(req.Notices); err != nil {
			return nil, err
		}
		for _, pp := range req.Plan.Partitions {
			// Clients see a moving partition's replicas as target then
			// leaving (Kafka's order): the original order is the
			// controller's alone, which --cancel restores.
			if c.partition(pp.Topic, pp.Partition).moving {
				fmt.Fprintf(req.Notices, "mqctl: %s:%d is moving already: its replicas above are in the order the move gave them; --cancel restores the order it had\n", pp.Topic, pp.Partition)
			}
		}
	}
	if req.Throttle > 0 {
		if err := a.throttle(ctx, c, req.Plan, req.Throttle, req.Notices); err != nil {
			return nil, err
		}
	}
	var out ReassignResults
	var submit kadm.AlterPartitionAssignmentsReq
	for _, pp := range req.Plan.Partitions {
		s := c.partition(pp.Topic, pp.Partition)
		r := ReassignResult{Topic: pp.Topic, Partition: pp.Partition, Replicas: nonNil(s.replicas), Target: pp.Replicas,
			Adding: nonNil(s.adding), Removing: nonNil(s.removing)}
		switch {
		case s.moving && slices.Equal(s.target(), pp.Replicas):
			r.Result = ResultMoving
		case !s.moving && slices.Equal(s.replicas, pp.Replicas):
			r.Result = ResultUnchanged
		default:
			submit.Assign(pp.Topic, pp.Partition, pp.Replicas)
			r.Result = ResultStarted
		}
		out = append(out, r)
	}
	if len(submit) > 0 {
		resps, err := a.adm.AlterPartitionAssignments(ctx, submit)
		if err != nil {
			return nil, requestError(what, err)
		}
		for i, r := range out {
			if r.Result != ResultStarted {
				continue
			}
			resp, ok := resps[r.Topic][r.Partition]
			switch {
			case !ok:
				out[i].Result, out[i].Error = ResultFailed, "no answer for this partition"
			case resp.Err != nil:
				out[i].Result, out[i].Error = ResultFailed, errText(resp.Err, resp.ErrMessage)
			}
		}
	}
	sortResults(out)
	return out, out.failures(what)
}

// throttle sets the rate on the brokers plan involves and adds the plan's
// moving replicas to its topics' throttled replica lists: on the leader
// side the replicas the partition has before the move (they serve the
// copies), on the follower side the replicas it gains.
func (a *Admin) throttle(ctx context.Context, c clusterState, plan Plan, rate int64, notices io.Writer) error {
	const what = "partition reassign: throttle"
	brokers, leader, follower := throttleScope(c, plan)
	if len(brokers) == 0 {
		return nil
	}
	v := strconv.FormatInt(rate, 10)
	rates := []kadm.AlterConfig{{Op: kadm.SetConfig, Name: LeaderThrottleRate, Value: &v}, {Op: kadm.SetConfig, Name: FollowerThrottleRate, Value: &v}}
	var set, down []int32
	for _, b := range brokers {
		if c.roster.states[b] == BrokerFenced {
			down = append(down, b)
			continue
		}
		// A broker's own configs go to that broker, as Kafka wants them;
		// one that does not answer (stopped, not fenced yet) must not
		// hold the others up.
		bctx, _, cancel := boundedWait(ctx, brokerWait)
		resps, err := a.adm.AlterBrokerConfigs(bctx, rates, b)
		cancel()
		if brokerDown(err) {
			down = append(down, b)
			continue
		}
		if err = alterError(resps, err); err != nil {
			return requestError(fmt.Sprintf("%s: broker %d", what, b), err)
		}
		set = append(set, b)
	}
	if len(down) > 0 {
		via, err := a.alterDownBrokerConfigs(ctx, down, rates, set)
		if err != nil {
			return requestError(fmt.Sprintf("%s: brokers %s, which are fenced or do not answer", what, joinIDs(down)), err)
		}
		if notices != nil {
			fmt.Fprintf(notices, "mqctl: brokers %s are fenced or do not answer: their throttle rate is set through broker %d and applies when they are back\n", joinIDs(down), via)
		}
		set = append(set, down...)
		slices.Sort(set)
	}
	topics := slices.Sorted(maps.Keys(leader))
	current, err := a.adm.DescribeTopicConfigs(ctx, topics...)
	if err != nil {
		return requestError(what, err)
	}
	for _, t := range topics {
		var set []kadm.AlterConfig
		for _, side := range []struct {
			name  string
			pairs []string
		}{{LeaderThrottledReplicas, leader[t]}, {FollowerThrottledReplica, follower[t]}} {
			if len(side.pairs) == 0 {
				continue
			}
			merged := mergeReplicaList(configValue(current, t, side.name), side.pairs)
			set = append(set, kadm.AlterConfig{Op: kadm.SetConfig, Name: side.name, Value: &merged})
		}
		resps, err := a.adm.AlterTopicConfigs(ctx, set, t)
		if err = alterError(resps, err); err != nil {
			return requestError(what+": topic "+t, err)
		}
	}
	if notices != nil {
		fmt.Fprintf(notices, "mqctl: throttled to %s/s on brokers %s, for the moving replicas of %s\n", sizeText(rate), joinIDs(set), strings.Join(topics, ", "))
	}
	return nil
}

// brokerDown reports whether err, kadm's for a request to one broker,
// means the broker is down: it did not answer, or is not listed.
func brokerDown(err error) bool {
	var se *kadm.ShardErrors
	return errors.As(err, &se) && len(se.Errs) == 1 &&
		(unanswered(se.Errs[0].Err) || strings.Contains(se.Errs[0].Err.Error(), "unknown broker"))
}

// alterDownBrokerConfigs changes the dynamic configs of brokers that are
// down through a broker that answers, the first of prefer that does, else
// any other, and returns which. A broker's dynamic configs are the
// cluster's, kept in the controller's replicated metadata, so any broker
// commits a change to them; the broker applies it when it is back. (kadm
// sends a broker's configs to that broker, Kafka's rule for its static
// ones, so the request is sent to the chosen broker by hand.)
func (a *Admin) alterDownBrokerConfigs(ctx context.Context, down []int32, ops []kadm.AlterConfig, prefer []int32) (int32, error) {
	req := kmsg.NewPtrIncrementalAlterConfigsRequest()
	for _, id := range down {
		r := kmsg.NewIncrementalAlterConfigsRequestResource()
		r.ResourceType, r.ResourceName = kmsg.ConfigResourceTypeBroker, strconv.Itoa(int(id))
		for _, op := range ops {
			c := kmsg.NewIncrementalAlterConfigsRequestResourceConfig()
			c.Name, c.Op, c.Value = op.Name, kmsg.IncrementalAlterConfigOp(op.Op), op.Value
			r.Configs = append(r.Configs, c)
		}
		req.Resources = append(req.Resources, r)
	}
	candidates := slices.Clone(prefer)
	if md, err := a.adm.BrokerMetadata(ctx); err == nil {
		for _, id := range md.Brokers.NodeIDs() {
			if !slices.Contains(candidates, id) && !slices.Contains(down, id) {
				candidates = append(candidates, id)
			}
		}
	}
	err := errors.New("no broker answers")
	for _, via := range candidates {
		bctx, _, cancel := boundedWait(ctx, brokerWait)
		var resp *kmsg.IncrementalAlterConfigsResponse
		resp, err = req.RequestWith(bctx, a.cl.Broker(int(via)))
		cancel()
		if err != nil {
			if unanswered(err) {
				continue
			}
			return via, err
		}
		for _, r := range resp.Resources {
			if err := kerr.ErrorForCode(r.ErrorCode); err != nil {
				msg := ""
				if r.ErrorMessage != nil {
					msg = *r.ErrorMessage
				}
				return via, fmt.Errorf("broker %s: %s", r.ResourceName, errText(err, msg))
			}
		}
		return via, nil
	}
	return -1, err
}

// throttleScope is what a throttle for plan covers in c: the brokers
// its moves involve (sorted), and per topic the partition:broker pairs
// of the leader side (the replicas each moving partition has before its
// move: they serve the copies) and of the follower side (the replicas it
// gains). A partition already where the plan sends it is left out; one
// already moving counts from the replicas it had before that move.
func throttleScope(c clusterState, plan Plan) (brokers []int32, leader, follower map[string][]string) {
	leader, follower = map[string][]string{}, map[string][]string{}
	for _, pp := range plan.Partitions {
		orig := c.partition(pp.Topic, pp.Partition).original()
		if slices.Equal(orig, pp.Replicas) {
			continue
		}
		for _, r := range orig {
			leader[pp.Topic] = append(leader[pp.Topic], fmt.Sprintf("%d:%d", pp.Partition, r))
		}
		for _, r := range pp.Replicas {
			if !slices.Contains(orig, r) {
				follower[pp.Topic] = append(follower[pp.Topic], fmt.Sprintf("%d:%d", pp.Partition, r))
			}
		}
		for _, r := range slices.Concat(orig, pp.Replicas) {
			if !slices.Contains(brokers, r) {
				brokers = append(brokers, r)
			}
		}
	}
	slices.Sort(brokers)
	return brokers, leader, follower
}

// mergeReplicaList adds pairs to a throttled replica list, keeping the
// pairs it has: "*" (every replica) stays "*".
func mergeReplicaList(have string, pairs []string) string {
	if strings.TrimSpace(have) == "*" {
		return "*"
	}
	var out []string
	for _, p := range strings.Split(have, ",") {
		if p = strings.TrimSpace(p); p != "" && !slices.Contains(out, p) {
			out = append(out, p)
		}
	}
	for _, p := range pairs {
		if !slices.Contains(out, p) {
			out = append(out, p)
		}
	}
	return strings.Join(out, ",")
}

// configValue is the value of config name of resource in rs, "" when not
// set.
func configValue(rs kadm.ResourceConfigs, resource, name string) string {
	for _, r := range rs {
		if r.Name != resource {
			continue
		}
		for _, c := range r.Configs {
			if c.Key == name {
				return c.MaybeValue()
			}
		}
	}
	return ""
}

// dynamicallySet reports whether config name of resource in rs is set
// dynamically (by a tool, not left to its default or the config file).
func dynamicallySet(rs kadm.ResourceConfigs, resource, name string) bool {
	for _, r := range rs {
		if r.Name != resource {
			continue
		}
		for _, c := range r.Configs {
			if c.Key == name && (c.Source == kmsg.ConfigSourceDynamicTopicConfig || c.Source == kmsg.ConfigSourceDynamicBrokerConfig) {
				return true
			}
		}
	}
	return false
}

// alterError is the first error of an AlterConfigs answer (of one
// resource: the caller names it).
func alterError(resps kadm.AlterConfigsResponses, err error) error {
	if err != nil {
		return err
	}
	for _, r := range resps {
		if r.Err != nil {
			return errors.New(errText(r.Err, r.ErrMessage))
		}
	}
	return nil
}

// clearThrottles removes the throttle configs a reassignment set, where
// no move needs them any more: a topic's throttled replica lists once
// none of its partitions moves, the brokers' rates once nothing moves in
// the cluster. Only configs set dynamically are removed. It reports
// whether it removed anything.
func (a *Admin) clearThrottles(ctx context.Context, what string, topics []string) (bool, error) {
	all, err := a.state(ctx, what, nil)
	if err != nil {
		return false, err
	}
	moving := map[string]bool{}
	for t, ps := range all.parts {
		for _, s := range ps {
			if s.moving {
				moving[t] = true
			}
		}
	}
	removed := false
	var idle []string
	for _, t := range topics {
		if !moving[t] && all.parts[t] != nil {
			idle = append(idle, t)
		}
	}
	if len(idle) > 0 {
		cfgs, err := a.adm.DescribeTopicConfigs(ctx, idle...)
		if err != nil {
			return false, requestError(what+": throttles", err)
		}
		for _, t := range idle {
			var del []kadm.AlterConfig
			for _, name := range []string{LeaderThrottledReplicas, FollowerThrottledReplica} {
				if dynamicallySet(cfgs, t, name) {
					del = append(del, kadm.AlterConfig{Op: kadm.DeleteConfig, Name: name})
				}
			}
			if len(del) == 0 {
				continue
			}
			resps, err := a.adm.AlterTopicConfigs(ctx, del, t)
			if err = alterError(resps, err); err != nil {
				return removed, requestError(what+": removing the throttle of topic "+t, err)
			}
			removed = true
		}
	}
	if len(moving) > 0 {
		return removed, nil
	}
	ids := all.md.Brokers.NodeIDs()
	dctx, _, cancel := boundedWait(ctx, brokerWait)
	cfgs, err := a.adm.DescribeBrokerConfigs(dctx, ids...)
	cancel()
	if err != nil {
		var se *kadm.ShardErrors
		if !errors.As(err, &se) {
			return removed, requestError(what+": throttles", err)
		}
	}
	rates := []kadm.AlterConfig{{Op: kadm.DeleteConfig, Name: LeaderThrottleRate}, {Op: kadm.DeleteConfig, Name: FollowerThrottleRate}}
	var answered, down []int32
	for _, id := range ids {
		name := strconv.Itoa(int(id))
		if !slices.ContainsFunc(cfgs, func(rc kadm.ResourceConfig) bool { return rc.Name == name && rc.Err == nil }) {
			// Down (or fenced): its configs cannot be described, and
			// its rates are deleted through another broker below.
			down = append(down, id)
			continue
		}
		answered = append(answered, id)
		var del []kadm.AlterConfig
		for _, c := range []string{LeaderThrottleRate, FollowerThrottleRate} {
			if dynamicallySet(cfgs, name, c) {
				del = append(del, kadm.AlterConfig{Op: kadm.DeleteConfig, Name: c})
			}
		}
		if len(del) == 0 {
			continue
		}
		resps, err := a.adm.AlterBrokerConfigs(ctx, del, id)
		if err = alterError(resps, err); err != nil {
			return removed, requestError(what+": removing the throttle of broker "+name, err)
		}
		removed = true
	}
	for id, state := range all.roster.states {
		if state == BrokerFenced && !slices.Contains(down, id) {
			down = append(down, id)
		}
	}
	slices.Sort(down)
	if len(down) > 0 && len(answered) > 0 {
		// Deleting a rate that is not set changes nothing: they all go.
		// With no broker answering, they stay, as the others' do.
		if _, err := a.alterDownBrokerConfigs(ctx, down, rates, answered); err != nil {
			return removed, requestError(fmt.Sprintf("%s: removing the throttle of brokers %s, which are fenced or do not answer", what, joinIDs(down)), err)
		}
	}
	return removed, nil
}

// verdict is where the move of a partition in state s to target is:
// complete, in progress (with a detail when it moves elsewhere), or
// failed.
func verdict(s *partitionState, target []int32) (result, detail string) {
	switch {
	case s.moving && !slices.Equal(s.target(), target):
		return ResultRunning, "moving to " + joinIDs(s.target()) + ", not the plan's replicas"
	case s.moving:
		return ResultRunning, ""
	case slices.Equal(s.replicas, target):
		return ResultComplete, ""
	}
	return ResultFailed, "not moving, and its replicas are not the plan's"
}

// VerifyReassignment reports, for each partition of plan, whether its
// move is complete (its replicas are the plan's), in progress, or failed
// (not moving, and not where the plan sends it: refused or cancelled).
// Once every move is complete, it removes the throttles (clearThrottles)
// and says so on notices. The error is a failure (exit 1) while a move
// runs or when one failed.
func (a *Admin) VerifyReassignment(ctx context.Context, plan Plan, notices io.Writer) (ReassignResults, error) {
	const what = "partition reassign --verify"
	if err := plan.Check(); err != nil {
		return nil, err
	}
	c, err := a.state(ctx, what, planTopics(plan))
	if err != nil {
		return nil, err
	}
	if err := plan.checkAgainst(c); err != nil {
		return nil, err
	}
	var out ReassignResults
	running, failed := 0, 0
	for _, pp := range plan.Partitions {
		s := c.partition(pp.Topic, pp.Partition)
		r := ReassignResult{Topic: pp.Topic, Partition: pp.Partition, Replicas: nonNil(s.replicas), Target: pp.Replicas,
			Adding: nonNil(s.adding), Removing: nonNil(s.removing)}
		r.Result, r.Error = verdict(s, pp.Replicas)
		switch r.Result {
		case ResultRunning:
			running++
		case ResultFailed:
			failed++
		}
		out = append(out, r)
	}
	sortResults(out)
	switch {
	case running > 0:
		return out, client.Failf("%s: %d of %d partitions still moving", what, running, len(out))
	case failed > 0:
		return out, out.failures(what)
	}
	removed, err := a.clearThrottles(ctx, what, planTopics(plan))
	if err != nil {
		return out, err
	}
	if removed && notices != nil {
		fmt.Fprintln(notices, "mqctl: every move is complete; the throttles were removed")
	}
	return out, nil
}
