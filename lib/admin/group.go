package admin

import (
	"context"
	"errors"
	"fmt"
	"io"
	"maps"
	"slices"
	"strings"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/mqproject/mq/lib/client"
)

// Group states, as the broker names them (ListGroups, DescribeGroups).
const (
	StateEmpty               = "Empty"
	StateStable              = "Stable"
	StatePreparingRebalance  = "PreparingRebalance"
	StateCompletingRebalance = "CompletingRebalance"
	StateDead                = "Dead"
)

// GroupStates are the states group list --state accepts.
var GroupStates = []string{StateEmpty, StateStable, StatePreparingRebalance, StateCompletingRebalance, StateDead}

// ParseGroupStates reads --state values (repeatable, each may be a
// comma-separated list), case-insensitively, into the broker's spelling.
func ParseGroupStates(what string, values []string) ([]string, error) {
	var states []string
	for _, v := range values {
		for s := range strings.SplitSeq(v, ",") {
			s = strings.TrimSpace(s)
			i := slices.IndexFunc(GroupStates, func(g string) bool { return strings.EqualFold(g, s) })
			if i < 0 {
				return nil, usagef("%s: unknown state %q (want %s)", what, s, strings.Join(GroupStates, ", "))
			}
			if !slices.Contains(states, GroupStates[i]) {
				states = append(states, GroupStates[i])
			}
		}
	}
	return states, nil
}

// CheckGroupNames refuses group names no group can have (empty, or given
// twice) before asking the broker.
func CheckGroupNames(what string, groups []string) error {
	if len(groups) == 0 {
		return usagef("%s: missing GROUP", what)
	}
	seen := map[string]bool{}
	for _, g := range groups {
		if g == "" {
			return usagef("%s: empty group name", what)
		}
		if seen[g] {
			return usagef("%s: group %q given twice", what, g)
		}
		seen[g] = true
	}
	return nil
}

// GroupSummary is one row of group list.
type GroupSummary struct {
	Group        string `json:"group"`
	State        string `json:"state"`
	ProtocolType string `json:"protocol_type"`
}

// GroupList is the result of group list, sorted by group.
type GroupList []GroupSummary

// Table implements Result.
func (l GroupList) Table() ([]string, [][]string) {
	rows := make([][]string, len(l))
	for i, g := range l {
		rows[i] = []string{g.Group, orDash(g.State), orDash(g.ProtocolType)}
	}
	return []string{"GROUP", "STATE", "PROTOCOL-TYPE"}, rows
}

// ListGroups lists the groups of the cluster; only those in one of states
// (broker spelling, see ParseGroupStates) when states is not empty.
func (a *Admin) ListGroups(ctx context.Context, states []string) (GroupList, error) {
	listed, err := a.adm.ListGroups(ctx, states...)
	if err != nil {
		return nil, requestError("group list", err)
	}
	out := GroupList{}
	for _, l := range listed.Sorted() {
		if l.ProtocolType == "share" {
			continue // share groups are queues: mqctl queue list
		}
		// The broker filters already; this keeps the promise with a
		// broker that ignores the filter.
		if len(states) > 0 && !slices.ContainsFunc(states, func(s string) bool { return strings.EqualFold(s, l.State) }) {
			continue
		}
		out = append(out, GroupSummary{Group: l.Group, State: l.State, ProtocolType: l.ProtocolType})
	}
	return out, nil
}

// GroupMember is one member of a group in group describe.
type GroupMember struct {
	MemberID   string `json:"member_id"`
	InstanceID string `json:"instance_id,omitempty"` // static membership (group.instance.id)
	ClientID   string `json:"client_id"`
	Host       string `json:"host"`
	// Assignment is what the member consumes, by topic; empty when the
	// group's protocol is not "consumer" or it has no partitions.
	Assignment []TopicAssignment `json:"assignment"`
}

// TopicAssignment is the partitions of one topic a member consumes.
type TopicAssignment struct {
	Topic      string  `json:"topic"`
	Partitions []int32 `json:"partitions"`
}

// GroupPartition is one partition in group describe: who consumes it, how
// far the group got, and how far behind that is.
type GroupPartition struct {
	Topic     string `json:"topic"`
	Partition int32  `json:"partition"`
	// MemberID, ClientID and Host are the member that owns the partition;
	// empty when none does (the group has only committed an offset).
	MemberID string `json:"member_id"`
	ClientID string `json:"client_id"`
	Host     string `json:"host"`
	// Committed is the group's committed offset, the next record it will
	// read; -1 when it has none.
	Committed      int64 `json:"committed"`
	LogStartOffset int64 `json:"log_start_offset"` // -1: unknown
	LogEndOffset   int64 `json:"log_end_offset"`   // the high-water mark; -1: unknown
	// Lag is LogEndOffset - Committed, in records; -1 when either is
	// unknown.
	Lag int64 `json:"lag"`
	// LagTimeMillis is now minus the timestamp of the first record the
	// group has not consumed (the one at Committed), in milliseconds; 0
	// when Lag is 0, -1 when unknown.
	LagTimeMillis int64  `json:"lag_time_ms"`
	Error         string `json:"error,omitempty"`
}

// GroupDescription is one group in group describe.
type GroupDescription struct {
	Group        string           `json:"group"`
	State        string           `json:"state"`
	ProtocolType string           `json:"protocol_type"`
	Protocol     string           `json:"protocol"` // the partition assignor, e.g. cooperative-sticky
	Members      []GroupMember    `json:"members"`
	Partitions   []GroupPartition `json:"partitions"`
}

// GroupDescriptions is the result of group describe.
type GroupDescriptions []GroupDescription

// Table implements Result: the partitions of every group, with the group
// as the first column (WriteTable prints each group with its own header).
func (ds GroupDescriptions) Table() ([]string, [][]string) {
	var rows [][]string
	for _, d := range ds {
		_, r := d.Table()
		for _, row := range r {
			rows = append(rows, append([]string{d.Group}, row...))
		}
	}
	return append([]string{"GROUP"}, describeHeader...), rows
}

var describeHeader = []string{"TOPIC", "PARTITION", "MEMBER", "CLIENT-ID", "HOST", "COMMITTED", "END", "LAG", "LAG-TIME"}

// WriteTable writes each group as a header line (group, state, protocol,
// member count) and a table of its partitions; a blank line between
// groups.
func (ds GroupDescriptions) WriteTable(w io.Writer) error {
	for i, d := range ds {
		if i > 0 {
			if _, err := io.WriteString(w, "\n"); err != nil {
				return err
			}
		}
		if err := d.WriteTable(w); err != nil {
			return err
		}
	}
	return nil
}

// WriteTable writes the group's header line and its partitions' table.
func (d GroupDescription) WriteTable(w io.Writer) error {
	_, err := fmt.Fprintf(w, "GROUP %s  STATE %s  PROTOCOL %s  MEMBERS %d\n",
		d.Group, orDash(d.State), orDash(d.Protocol), len(d.Members))
	if err != nil {
		return err
	}
	header, rows := d.Table()
	return client.WriteTable(w, header, rows)
}

// Table is the group's partitions, then a row for each member that has
// none (so that every member shows).
func (d GroupDescription) Table() ([]string, [][]string) {
	var rows [][]string
	owning := map[string]bool{}
	for _, p := range d.Partitions {
		owning[p.MemberID] = true
		lag, lagTime := "-", "-"
		if p.Lag >= 0 {
			lag = itoa(p.Lag)
		}
		if p.LagTimeMillis >= 0 {
			lagTime = FormatLagTime(time.Duration(p.LagTimeMillis) * time.Millisecond)
		}
		rows = append(rows, []string{
			p.Topic, itoa(p.Partition), orDash(p.MemberID), orDash(p.ClientID), orDash(p.Host),
			dashOffset(p.Committed), dashOffset(p.LogEndOffset), lag, lagTime,
		})
	}
	for _, m := range d.Members {
		if !owning[m.MemberID] {
			rows = append(rows, []string{"-", "-", m.MemberID, orDash(m.ClientID), orDash(m.Host), "-", "-", "-", "-"})
		}
	}
	return describeHeader, rows
}

func dashOffset(o int64) string {
	if o < 0 {
		return "-"
	}
	return itoa(o)
}

// FormatLagTime is how the describe table shows a lag in time: whole
// seconds (1h2m3s) from a second up, milliseconds below.
func FormatLagTime(d time.Duration) string {
	if d >= time.Second {
		return d.Round(time.Second).String()
	}
	return d.Round(time.Millisecond).String()
}

// coordinatorWait bounds how long a group command waits for the groups'
// coordinators (awaitCoordinators).
const coordinatorWait = 10 * time.Second

// dialAttempts is how many times retryDial runs a group request.
const dialAttempts = 4

// retryDial runs a group request again, up to dialAttempts times in all,
// while it fails to dial a broker. franz-go finds a group's coordinator
// with one FindCoordinator sent to any broker, not retried: a broker that
// is down but still in the metadata (killed, not yet fenced) fails the
// whole request, and the next attempt goes to another broker. A
// coordinator that is itself down fails every attempt, quickly.
func retryDial(ctx context.Context, op func() error) error {
	var err error
	for range dialAttempts {
		if err = op(); err == nil || !client.IsUnreachable(err) || ctx.Err() != nil {
			return err
		}
	}
	return err
}

// awaitCoordinators waits until the broker can name the coordinator of
// every group, for up to coordinatorWait, or with Retrying for as long
// as it allows, saying what it waits for. A broker answers
// COORDINATOR_NOT_AVAILABLE while it creates or loads __consumer_offsets
// (on the first group request of a new cluster, or after a restart), and
// kadm's group requests fail at once on it instead of retrying. Any other
// outcome returns at once: the group request that follows reports it.
func (a *Admin) awaitCoordinators(ctx context.Context, groups []string) {
	try := func(ctx context.Context) error {
		req := kmsg.NewPtrFindCoordinatorRequest()
		req.CoordinatorKey = groups[0] // versions before 4 ask for one; kgo splits
		req.CoordinatorKeys = groups
		resp, err := req.RequestWith(ctx, a.cl)
		if err != nil {
			return nil
		}
		for _, c := range resp.Coordinators {
			switch err := kerr.ErrorForCode(c.ErrorCode); err {
			case kerr.CoordinatorNotAvailable, kerr.CoordinatorLoadInProgress, kerr.NotCoordinator:
				return fmt.Errorf("coordinator of group %s: %w", c.Key, err)
			}
		}
		return nil
	}
	if a.wait > 0 {
		a.retry(ctx, try)
		return
	}
	client.Retry(ctx, coordinatorWait, try, nil)
}

// groupRetriable is the error of a group's answer worth asking again for
// (COORDINATOR_LOAD_IN_PROGRESS, NOT_COORDINATOR: its coordinator moved
// or is loading), or nil; a coordinator that does not answer is not asked
// again.
func groupRetriable(group string, err error) error {
	if err != nil && client.Retriable(err) && !client.IsUnreachable(err) {
		return fmt.Errorf("group %s: %w", group, err)
	}
	return nil
}

// tp names a partition.
type tp struct {
	topic     string
	partition int32
}

// DescribeGroups describes the named groups, or every group when none is
// named (sorted by name): state, protocol, members and, for every
// partition the group owns or has committed an offset for, the committed
// offset, the log end offset and the lag in records and in time. An
// unknown group is a failure; the others are still described.
func (a *Admin) DescribeGroups(ctx context.Context, groups []string) (GroupDescriptions, error) {
	const what = "group describe"
	var failed []string
	if len(groups) == 0 {
		// ListGroups goes to every broker: one that does not answer
		// hides the groups it coordinates (a failure, named), not the
		// others'.
		listed, err := a.adm.ListGroups(ctx)
		var se *kadm.ShardErrors
		switch {
		case err != nil && errors.As(err, &se) && !se.AllFailed:
			for _, e := range se.Errs {
				failed = append(failed, fmt.Sprintf("the groups of broker %d not listed: %s", e.Broker.NodeID, brokerErrText(e.Err, 0)))
			}
		case err != nil:
			return nil, requestError(what, err)
		}
		groups = groups[:0]
		for _, l := range listed.Sorted() {
			if l.ProtocolType != "share" { // share groups: mqctl queue describe
				groups = append(groups, l.Group)
			}
		}
		if len(groups) == 0 {
			return GroupDescriptions{}, failures(what, failed)
		}
	}
	a.awaitCoordinators(ctx, groups)
	var described kadm.DescribedGroups
	var err error
	a.retry(ctx, func(ctx context.Context) error {
		if err = retryDial(ctx, func() (err error) {
			described, err = a.adm.DescribeGroups(ctx, groups...)
			return err
		}); err != nil {
			return nil // not a group's answer: reported below
		}
		for _, name := range groups {
			if err := groupRetriable(name, described[name].Err); err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		return nil, requestError(what, err)
	}
	var descs []GroupDescription
	committed := map[string]map[tp]int64{}
	topicSet := map[string]bool{}
	for _, name := range groups {
		d, ok := described[name]
		switch {
		case !ok:
			failed = append(failed, fmt.Sprintf("%s: no answer for this group", name))
			continue
		case d.Err != nil:
			failed = append(failed, fmt.Sprintf("%s: %s", name, errText(d.Err, d.ErrMessage)))
			continue
		}
		var offsets kadm.OffsetResponses
		var err error
		a.retry(ctx, func(ctx context.Context) error {
			if err = retryDial(ctx, func() (err error) {
				offsets, err = a.adm.FetchOffsets(ctx, name)
				return err
			}); client.IsUnreachable(err) {
				return nil
			}
			return groupRetriable(name, err)
		})
		if err != nil {
			if client.IsUnreachable(err) {
				return nil, requestError(what, err)
			}
			failed = append(failed, fmt.Sprintf("%s: committed offsets: %s", name, errText(err, "")))
			continue
		}
		c := map[tp]int64{}
		offsets.Each(func(o kadm.OffsetResponse) {
			if o.Err == nil && o.At >= 0 {
				c[tp{o.Topic, o.Partition}] = o.At
				topicSet[o.Topic] = true
			}
		})
		if d.State == StateDead && len(d.Members) == 0 && len(c) == 0 {
			failed = append(failed, fmt.Sprintf("unknown group %q", name))
			continue
		}
		desc := GroupDescription{
			Group: name, State: d.State, ProtocolType: d.ProtocolType, Protocol: d.Protocol,
			Members: members(d.Members),
		}
		for _, m := range desc.Members {
			for _, as := range m.Assignment {
				topicSet[as.Topic] = true
			}
		}
		committed[name] = c
		descs = append(descs, desc)
	}
	out := GroupDescriptions{}
	if len(descs) == 0 {
		return out, failures(what, failed)
	}
	facts, err := a.partitionFacts(ctx, slices.Sorted(maps.Keys(topicSet)), false)
	if err != nil {
		return nil, requestError(what, err)
	}
	for _, desc := range descs {
		desc.Partitions = partitionRows(desc.Members, committed[desc.Group], facts)
		a.lagTimes(ctx, desc.Partitions, facts)
		out = append(out, desc)
	}
	return out, failures(what, failed)
}

// members converts the described members, each with its assignment
// sorted by topic and partition; members are sorted by member id.
func members(ms []kadm.DescribedGroupMember) []GroupMember {
	out := make([]GroupMember, 0, len(ms))
	for _, m := range ms {
		gm := GroupMember{MemberID: m.MemberID, ClientID: m.ClientID, Host: m.ClientHost, Assignment: []TopicAssignment{}}
		if m.InstanceID != nil {
			gm.InstanceID = *m.InstanceID
		}
		if a, ok := m.Assigned.AsConsumer(); ok {
			for _, t := range a.Topics {
				ps := slices.Clone(t.Partitions)
				slices.Sort(ps)
				gm.Assignment = append(gm.Assignment, TopicAssignment{Topic: t.Topic, Partitions: nonNil(ps)})
			}
			slices.SortFunc(gm.Assignment, func(a, b TopicAssignment) int { return strings.Compare(a.Topic, b.Topic) })
		}
		out = append(out, gm)
	}
	slices.SortFunc(out, func(a, b GroupMember) int { return strings.Compare(a.MemberID, b.MemberID) })
	return out
}

// partitionFact is what the cluster knows of one partition.
type partitionFact struct {
	logStart, logEnd int64 // -1: unknown
	leader           int32 // -1: none
	topicID          [16]byte
	err              string
}

// partitionFacts collects, for every partition of topics, its log start
// and end offsets and its leader, asking again while a live broker's
// answer is retriable, and with needLeader while a partition has no
// leader (describeOffsets). A topic that does not exist is present with a
// partition -1 whose err says so.
func (a *Admin) partitionFacts(ctx context.Context, topics []string, needLeader bool) (map[tp]partitionFact, error) {
	facts := map[tp]partitionFact{}
	if len(topics) == 0 {
		return facts, nil
	}
	// Each leader is asked by itself: one that does not answer leaves its
	// partitions' offsets, and so their lag, unknown, and the others are
	// still described.
	details, offsets, err := a.describeOffsets(ctx, topics, needLeader)
	if err != nil {
		return nil, err
	}
	for _, t := range topics {
		d, ok := details[t]
		if !ok || errors.Is(d.Err, kerr.UnknownTopicOrPartition) {
			facts[tp{t, -1}] = partitionFact{logStart: -1, logEnd: -1, leader: -1, err: "unknown topic"}
			continue
		}
		if d.Err != nil {
			facts[tp{t, -1}] = partitionFact{logStart: -1, logEnd: -1, leader: -1, err: errText(d.Err, "")}
			continue
		}
		for _, p := range d.Partitions {
			f := partitionFact{logStart: -1, logEnd: -1, leader: p.Leader, topicID: d.ID}
			if p.Err != nil {
				f.err = errText(p.Err, "")
			}
			if o, ok := offsets[tp{t, p.Partition}]; ok {
				f.logStart, f.logEnd, f.err = o.start, o.end, o.err
			}
			facts[tp{t, p.Partition}] = f
		}
	}
	return facts, nil
}

func isShardErr(err error) bool {
	var se *kadm.ShardErrors
	return errors.As(err, &se) && !client.IsUnreachable(err)
}

// partitionRows is one row per partition that a member owns or that has
// a committed offset, sorted by topic and partition, with the lag in
// records (the lag in time is lagTimes' job: -1 here, 0 for no lag).
func partitionRows(ms []GroupMember, committed map[tp]int64, facts map[tp]partitionFact) []GroupPartition {
	owner := map[tp]GroupMember{}
	for _, m := range ms {
		for _, a := range m.Assignment {
			for _, p := range a.Partitions {
				owner[tp{a.Topic, p}] = m
			}
		}
	}
	keys := map[tp]bool{}
	for k := range owner {
		keys[k] = true
	}
	for k := range committed {
		keys[k] = true
	}
	sorted := slices.SortedFunc(maps.Keys(keys), compareTP)
	rows := []GroupPartition{}
	for _, k := range sorted {
		m := owner[k]
		row := GroupPartition{
			Topic: k.topic, Partition: k.partition,
			MemberID: m.MemberID, ClientID: m.ClientID, Host: m.Host,
			Committed: -1, LogStartOffset: -1, LogEndOffset: -1, Lag: -1, LagTimeMillis: -1,
		}
		if c, ok := committed[k]; ok {
			row.Committed = c
		}
		f, ok := facts[k]
		if !ok {
			if tf, ok := facts[tp{k.topic, -1}]; ok {
				row.Error = tf.err
			} else {
				row.Error = "unknown partition"
			}
		} else {
			row.LogStartOffset, row.LogEndOffset, row.Error = f.logStart, f.logEnd, f.err
		}
		if row.Committed >= 0 && row.LogEndOffset >= 0 {
			row.Lag = max(row.LogEndOffset-row.Committed, 0)
			if row.Lag == 0 {
				row.LagTimeMillis = 0
			}
		}
		rows = append(rows, row)
	}
	return rows
}

// lagTimes fills in the lag in time of the rows that lag: now minus the
// timestamp of the first record not consumed. A partition whose record
// cannot be read keeps -1 and says why in its error.
func (a *Admin) lagTimes(ctx context.Context, rows []GroupPartition, facts map[tp]partitionFact) {
	for i := range rows {
		r := &rows[i]
		if r.Lag <= 0 {
			continue
		}
		f := facts[tp{r.Topic, r.Partition}]
		// Records before the log start are gone: the first one the group
		// will read is the first one left.
		at := max(r.Committed, f.logStart)
		ts, err := a.recordTime(ctx, r.Topic, f.topicID, r.Partition, f.leader, at)
		if err != nil {
			r.Error = strings.TrimPrefix(r.Error+"; lag time: "+err.Error(), "; ")
			continue
		}
		r.LagTimeMillis = max(a.now().Sub(ts).Milliseconds(), 0)
	}
}

// recordTime is the timestamp of the first record at or after offset in
// a partition, read with a Fetch for as little as the broker will send
// (one batch: KIP-74 lets the first batch exceed the limits).
func (a *Admin) recordTime(ctx context.Context, topic string, topicID [16]byte, partition, leader int32, offset int64) (time.Time, error) {
	if leader < 0 {
		return time.Time{}, errors.New("partition has no leader")
	}
	req := kmsg.NewPtrFetchRequest()
	req.MaxWaitMillis = 0
	req.MinBytes = 0
	req.MaxBytes = 1
	rt := kmsg.NewFetchRequestTopic()
	rt.Topic, rt.TopicID = topic, topicID
	rp := kmsg.NewFetchRequestTopicPartition()
	rp.Partition = partition
	rp.FetchOffset = offset
	rp.PartitionMaxBytes = 1
	rt.Partitions = append(rt.Partitions, rp)
	req.Topics = append(req.Topics, rt)
	kresp, err := a.cl.Broker(int(leader)).Request(ctx, req)
	if err != nil {
		return time.Time{}, err
	}
	resp := kresp.(*kmsg.FetchResponse)
	if err := kerr.ErrorForCode(resp.ErrorCode); err != nil {
		return time.Time{}, errors.New(errText(err, ""))
	}
	if len(resp.Topics) != 1 || len(resp.Topics[0].Partitions) != 1 {
		return time.Time{}, errors.New("no answer for this partition")
	}
	fp, _ := kgo.ProcessFetchPartition(kgo.ProcessFetchPartitionOpts{
		Offset: offset, Topic: topic, Partition: partition,
	}, &resp.Topics[0].Partitions[0], kgo.DefaultDecompressor(), nil)
	if fp.Err != nil {
		return time.Time{}, errors.New(errText(fp.Err, ""))
	}
	if len(fp.Records) == 0 {
		return time.Time{}, fmt.Errorf("no record at offset %d", offset)
	}
	return fp.Records[0].Timestamp, nil
}

// GroupResult is the outcome for one group of group delete.
type GroupResult struct {
	Group  string `json:"group"`
	Result string `json:"result"` // deleted, missing, failed
	Error  string `json:"error,omitempty"`
}

// GroupResults is the result of group delete, in the order the groups
// were given.
type GroupResults []GroupResult

// Table implements Result.
func (rs GroupResults) Table() ([]string, [][]string) {
	rows := make([][]string, len(rs))
	for i, r := range rs {
		rows[i] = []string{r.Group, r.Result, orDash(r.Error)}
	}
	return []string{"GROUP", "RESULT", "ERROR"}, rows
}

// DeleteGroups deletes groups and their committed offsets. The broker
// refuses a group that has members (NON_EMPTY_GROUP). With ifExists a
// group that does not exist is reported as missing, not as a failure.
func (a *Admin) DeleteGroups(ctx context.Context, groups []string, ifExists bool) (GroupResults, error) {
	const what = "group delete"
	if err := CheckGroupNames(what, groups); err != nil {
		return nil, err
	}
	a.awaitCoordinators(ctx, groups)
	resps, err := a.adm.DeleteGroups(ctx, groups...)
	if err != nil && !isShardErr(err) {
		return nil, requestError(what, err)
	}
	var out GroupResults
	var failed []string
	for _, name := range groups {
		r, ok := resps[name]
		res := GroupResult{Group: name}
		switch {
		case !ok:
			res.Result, res.Error = ResultFailed, "no answer for this group"
			if err != nil {
				res.Error = errText(err, "")
			}
		case r.Err == nil:
			res.Result = ResultDeleted
		case ifExists && errors.Is(r.Err, kerr.GroupIDNotFound):
			res.Result = ResultMissing
		case errors.Is(r.Err, kerr.GroupIDNotFound):
			res.Result, res.Error = ResultFailed, "unknown group"
		default:
			res.Result, res.Error = ResultFailed, errText(r.Err, r.ErrMessage)
		}
		if res.Result == ResultFailed {
			failed = append(failed, name+": "+res.Error)
		}
		out = append(out, res)
	}
	return out, failures(what, failed)
}
