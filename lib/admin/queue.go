package admin

import (
	"context"
	"fmt"
	"io"
	"slices"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/mqproject/mq/lib/client"
	"github.com/mqproject/mq/lib/kafkaext"
)

// Share groups (queues, docs/queues.md): queue list and queue describe.

// QueueSummary is one row of queue list.
type QueueSummary struct {
	Group   string `json:"group"`
	State   string `json:"state"`
	Members int    `json:"members"`
}

// QueueList is the result of queue list, sorted by group.
type QueueList []QueueSummary

// Table implements Result.
func (l QueueList) Table() ([]string, [][]string) {
	rows := make([][]string, len(l))
	for i, q := range l {
		rows[i] = []string{q.Group, orDash(q.State), strconv.Itoa(q.Members)}
	}
	return []string{"GROUP", "STATE", "MEMBERS"}, rows
}

// shareGroupIDs lists the share groups of the cluster, sorted.
func (a *Admin) shareGroupIDs(ctx context.Context) ([]string, error) {
	req := kmsg.NewPtrListGroupsRequest()
	req.TypesFilter = []string{"share"}
	shards := a.cl.RequestSharded(ctx, req)
	var ids []string
	for _, s := range shards {
		if s.Err != nil {
			return nil, requestError("queue list", s.Err)
		}
		resp := s.Resp.(*kmsg.ListGroupsResponse)
		if err := kerr.ErrorForCode(resp.ErrorCode); err != nil {
			return nil, requestError("queue list", err)
		}
		for _, g := range resp.Groups {
			if g.GroupType == "share" || g.ProtocolType == "share" {
				ids = append(ids, g.Group)
			}
		}
	}
	sort.Strings(ids)
	return slices.Compact(ids), nil
}

// ListQueues lists the share groups with their states and member counts.
func (a *Admin) ListQueues(ctx context.Context) (QueueList, error) {
	ids, err := a.shareGroupIDs(ctx)
	if err != nil {
		return nil, err
	}
	out := QueueList{}
	if len(ids) == 0 {
		return out, nil
	}
	described, err := a.adm.DescribeShareGroups(ctx, ids...)
	if err != nil && len(described) == 0 {
		return nil, requestError("queue list", err)
	}
	for _, id := range ids {
		d, ok := described[id]
		s := QueueSummary{Group: id}
		if ok && d.Err == nil {
			s.State, s.Members = d.GroupState, len(d.Members)
		}
		out = append(out, s)
	}
	return out, nil
}

// QueueMember is one member of a share group.
type QueueMember struct {
	MemberID   string            `json:"member_id"`
	ClientID   string            `json:"client_id"`
	Host       string            `json:"host"`
	Epoch      int32             `json:"epoch"`
	Assignment []TopicAssignment `json:"assignment"`
}

// QueuePartition is one share-partition in queue describe.
type QueuePartition struct {
	Topic     string `json:"topic"`
	Partition int32  `json:"partition"`
	// StartOffset is the share-partition start offset (-1: the group has
	// no state for it yet); LogEndOffset the partition's high-water mark.
	StartOffset  int64 `json:"start_offset"`
	LogEndOffset int64 `json:"log_end_offset"`
	// InFlight is the window between the start offset and the first
	// offset never acquired; its records by state follow. Available
	// counts the available in-flight records and those never acquired.
	InFlight     int64 `json:"in_flight"`
	Available    int64 `json:"available"`
	Acquired     int64 `json:"acquired"`
	Acknowledged int64 `json:"acknowledged"`
	Archived     int64 `json:"archived"`
	// OldestUnackedMillis is the age of the record at the start offset,
	// the oldest not acknowledged; 0 when there is none.
	OldestUnackedMillis int64  `json:"oldest_unacked_ms"`
	Error               string `json:"error,omitempty"`
}

// QueueDescription is queue describe's result for one share group.
type QueueDescription struct {
	Group      string           `json:"group"`
	State      string           `json:"state"`
	Members    []QueueMember    `json:"members"`
	Partitions []QueuePartition `json:"partitions"`
	// DeadLetterTopic is the group's errors.deadletterqueue.topic.name
	// ("" when none) and DeadLetters the records it holds.
	DeadLetterTopic string `json:"dead_letter_topic,omitempty"`
	DeadLetters     int64  `json:"dead_letters"`
	Error           string `json:"error,omitempty"`
}

// QueueDescriptions is the result of queue describe.
type QueueDescriptions []QueueDescription

// Table implements Result: the partitions of every group.
func (ds QueueDescriptions) Table() ([]string, [][]string) {
	var rows [][]string
	for _, d := range ds {
		for _, p := range d.Partitions {
			rows = append(rows, queuePartitionRow(d.Group, p))
		}
	}
	return queuePartitionHeader, rows
}

var queuePartitionHeader = []string{"GROUP", "TOPIC", "PARTITION", "START-OFFSET", "LOG-END-OFFSET", "IN-FLIGHT", "AVAILABLE", "ACQUIRED", "ARCHIVED", "OLDEST-UNACKED"}

func queuePartitionRow(group string, p QueuePartition) []string {
	age := "-"
	if p.OldestUnackedMillis > 0 {
		age = FormatLagTime(time.Duration(p.OldestUnackedMillis) * time.Millisecond)
	}
	return []string{group, p.Topic, strconv.Itoa(int(p.Partition)), dashOffset(p.StartOffset), dashOffset(p.LogEndOffset),
		strconv.FormatInt(p.InFlight, 10), strconv.FormatInt(p.Available, 10), strconv.FormatInt(p.Acquired, 10),
		strconv.FormatInt(p.Archived, 10), age}
}

// WriteTable prints, per group, a header line, its members and its
// partitions.
func (ds QueueDescriptions) WriteTable(w io.Writer) error {
	for i, d := range ds {
		if i > 0 {
			fmt.Fprintln(w)
		}
		dlq := "none"
		if d.DeadLetterTopic != "" {
			dlq = fmt.Sprintf("%s (%d records)", d.DeadLetterTopic, d.DeadLetters)
		}
		fmt.Fprintf(w, "group %s: %s, %d members, dead letters: %s\n", d.Group, orDash(d.State), len(d.Members), dlq)
		if d.Error != "" {
			fmt.Fprintf(w, "error: %s\n", d.Error)
			continue
		}
		var mrows [][]string
		for _, m := range d.Members {
			var as []string
			for _, a := range m.Assignment {
				for _, p := range a.Partitions {
					as = append(as, fmt.Sprintf("%s-%d", a.Topic, p))
				}
			}
			mrows = append(mrows, []string{m.MemberID, m.ClientID, m.Host, strconv.Itoa(int(m.Epoch)), orDash(strings.Join(as, ","))})
		}
		if err := client.WriteTable(w, []string{"MEMBER", "CLIENT-ID", "HOST", "EPOCH", "PARTITIONS"}, mrows); err != nil {
			return err
		}
		var prows [][]string
		for _, p := range d.Partitions {
			prows = append(prows, queuePartitionRow(d.Group, p)[1:])
		}
		if err := client.WriteTable(w, queuePartitionHeader[1:], prows); err != nil {
			return err
		}
	}
	return nil
}

// DescribeQueues describes share groups (all of them when groups is
// empty): members, each share-partition's window, the dead letters.
func (a *Admin) DescribeQueues(ctx context.Context, groups []string) (QueueDescriptions, error) {
	if len(groups) == 0 {
		ids, err := a.shareGroupIDs(ctx)
		if err != nil {
			return nil, err
		}
		groups = ids
	}
	out := QueueDescriptions{}
	if len(groups) == 0 {
		return out, nil
	}
	described, err := a.adm.DescribeShareGroups(ctx, groups...)
	if err != nil && len(described) == 0 {
		return nil, requestError("queue describe", err)
	}
	for _, g := range groups {
		d := QueueDescription{Group: g, Members: []QueueMember{}, Partitions: []QueuePartition{}}
		sg, ok := described[g]
		switch {
		case !ok:
			d.Error = "not described"
		case sg.Err != nil:
			d.Error = errText(sg.Err, "")
		}
		if d.Error != "" {
			out = append(out, d)
			continue
		}
		d.State = sg.GroupState
		topics := map[string]bool{}
		for _, m := range sg.Members {
			qm := QueueMember{MemberID: m.MemberID, ClientID: m.ClientID, Host: m.ClientHost, Epoch: m.MemberEpoch}
			for _, t := range slices.Sorted(mapKeysOf(m.Assignment)) {
				ps := slices.Sorted(mapKeysInt(m.Assignment[t]))
				qm.Assignment = append(qm.Assignment, TopicAssignment{Topic: t, Partitions: ps})
			}
			for _, t := range m.SubscribedTopicNames {
				topics[t] = true
			}
			for t := range m.Assignment {
				topics[t] = true
			}
			d.Members = append(d.Members, qm)
		}
		if len(topics) == 0 {
			// No member says what the group reads: the share state does
			// (a group whose members all left still has its queue).
			stated, err := a.shareStateTopics(ctx, d.Group)
			if err != nil {
				d.Error = err.Error()
				out = append(out, d)
				continue
			}
			for _, t := range stated {
				topics[t] = true
			}
		}
		if err := a.describeSharePartitions(ctx, &d, slices.Sorted(mapKeysOf(topics))); err != nil {
			d.Error = err.Error()
		}
		out = append(out, d)
	}
	return out, nil
}

func mapKeysInt[V any](m map[int32]V) func(func(int32) bool) {
	return func(yield func(int32) bool) {
		for k := range m {
			if !yield(k) {
				return
			}
		}
	}
}

func deref(s *string) string {
	if s == nil {
		return ""
	}
	return *s
}

func mapKeysOf[V any](m map[string]V) func(func(string) bool) {
	return func(yield func(string) bool) {
		for k := range m {
			if !yield(k) {
				return
			}
		}
	}
}

// shareStateTopics returns the topics a share group has state for: a
// DescribeShareGroupOffsets naming none (null: all of them).
func (a *Admin) shareStateTopics(ctx context.Context, group string) ([]string, error) {
	req := kmsg.NewPtrDescribeShareGroupOffsetsRequest()
	rg := kmsg.NewDescribeShareGroupOffsetsRequestGroup()
	rg.GroupID, rg.Topics = group, nil
	req.Groups = append(req.Groups, rg)
	resp, err := req.RequestWith(ctx, a.cl)
	if err != nil {
		return nil, requestError("queue describe", err)
	}
	var topics []string
	for _, g := range resp.Groups {
		if err := kerr.ErrorForCode(g.ErrorCode); err != nil {
			return nil, fmt.Errorf("describe share offsets: %s", errText(err, deref(g.ErrorMessage)))
		}
		for _, t := range g.Topics {
			topics = append(topics, t.Topic)
		}
	}
	return topics, nil
}

// describeSharePartitions fills d's partitions of topics and its dead
// letters.
func (a *Admin) describeSharePartitions(ctx context.Context, d *QueueDescription, topics []string) error {
	dlq, err := a.groupConfig(ctx, d.Group, "errors.deadletterqueue.topic.name")
	if err != nil {
		return err
	}
	d.DeadLetterTopic = dlq
	all := slices.Clone(topics)
	if dlq != "" {
		all = append(all, dlq)
	}
	facts, err := a.partitionFacts(ctx, all, false)
	if err != nil {
		return err
	}
	if dlq != "" {
		for k, f := range facts {
			if k.topic == dlq && k.partition >= 0 && f.logEnd >= 0 {
				d.DeadLetters += f.logEnd - max(f.logStart, 0)
			}
		}
	}
	if len(topics) == 0 {
		return nil
	}
	req := kmsg.NewPtrDescribeShareGroupOffsetsRequest()
	rg := kmsg.NewDescribeShareGroupOffsetsRequestGroup()
	rg.GroupID = d.Group
	for _, t := range topics {
		rt := kmsg.NewDescribeShareGroupOffsetsRequestGroupTopic()
		rt.Topic = t
		rg.Topics = append(rg.Topics, rt)
	}
	req.Groups = append(req.Groups, rg)
	resp, err := req.RequestWith(ctx, a.cl)
	if err != nil {
		return requestError("queue describe", err)
	}
	now := a.now()
	for _, g := range resp.Groups {
		if err := kerr.ErrorForCode(g.ErrorCode); err != nil {
			return fmt.Errorf("describe share offsets: %s", errText(err, deref(g.ErrorMessage)))
		}
		for _, t := range g.Topics {
			for _, p := range t.Partitions {
				f := facts[tp{t.Topic, p.Partition}]
				qp := QueuePartition{Topic: t.Topic, Partition: p.Partition, StartOffset: p.StartOffset, LogEndOffset: f.logEnd}
				if err := kerr.ErrorForCode(p.ErrorCode); err != nil {
					qp.Error = errText(err, deref(p.ErrorMessage))
					d.Partitions = append(d.Partitions, qp)
					continue
				}
				var st kafkaext.SharePartitionState
				if ok, err := kafkaext.Get(&p.UnknownTags, kafkaext.SharePartition, &st); err == nil && ok && p.StartOffset >= 0 {
					qp.InFlight = st.EndOffset - p.StartOffset
					qp.Available = int64(st.Available) + max(f.logEnd-st.EndOffset, 0)
					qp.Acquired, qp.Acknowledged, qp.Archived = int64(st.Acquired), int64(st.Acknowledged), int64(st.Archived)
				}
				if p.StartOffset >= 0 && f.logEnd > p.StartOffset {
					if ts, err := a.recordTime(ctx, t.Topic, f.topicID, p.Partition, f.leader, p.StartOffset); err == nil && !ts.IsZero() {
						qp.OldestUnackedMillis = max(now.Sub(ts).Milliseconds(), 1)
					}
				}
				d.Partitions = append(d.Partitions, qp)
			}
		}
	}
	sort.Slice(d.Partitions, func(i, j int) bool {
		a, b := d.Partitions[i], d.Partitions[j]
		return a.Topic < b.Topic || a.Topic == b.Topic && a.Partition < b.Partition
	})
	return nil
}

// groupConfig returns one config of a group ("" when unset).
func (a *Admin) groupConfig(ctx context.Context, group, name string) (string, error) {
	req := kmsg.NewPtrDescribeConfigsRequest()
	res := kmsg.NewDescribeConfigsRequestResource()
	res.ResourceType, res.ResourceName, res.ConfigNames = kmsg.ConfigResourceTypeGroupConfig, group, []string{name}
	req.Resources = append(req.Resources, res)
	resp, err := req.RequestWith(ctx, a.cl)
	if err != nil {
		return "", requestError("describe group configs", err)
	}
	for _, r := range resp.Resources {
		if err := kerr.ErrorForCode(r.ErrorCode); err != nil {
			return "", fmt.Errorf("describe group configs: %s", errText(err, deref(r.ErrorMessage)))
		}
		for _, c := range r.Configs {
			if c.Name == name && c.Value != nil {
				return *c.Value, nil
			}
		}
	}
	return "", nil
}

// ReplayResult is what dlq replay did.
type ReplayResult struct {
	Group    string `json:"group"`
	From     string `json:"from"`
	Replayed int    `json:"replayed"`
	Skipped  int    `json:"skipped"` // before --since
}

// Table implements Result.
func (r *ReplayResult) Table() ([]string, [][]string) {
	return []string{"GROUP", "DEAD-LETTER-TOPIC", "REPLAYED", "SKIPPED"},
		[][]string{{orDash(r.Group), r.From, strconv.Itoa(r.Replayed), strconv.Itoa(r.Skipped)}}
}

// ReplayDeadLetters puts the dead letters of a dead-letter topic, from
// since on (zero: all), back on their source topic and partition, or on
// topic to (partitioned by key) when it is not empty: key, value,
// headers and timestamp as they were, without mq's dead-letter headers
// (kafkaext.DLQPrefix). The topic is from, else group's
// errors.deadletterqueue.topic.name. Each dead letter's source is read
// from kafkaext's DLQTopic and DLQPartition headers, or their older
// names; one without a source is skipped when to is empty. It reads the
// dead-letter topic up to its end when it starts.
func (a *Admin) ReplayDeadLetters(ctx context.Context, group, from, to string, since time.Time) (*ReplayResult, error) {
	dlq := from
	if dlq == "" {
		var err error
		if dlq, err = a.groupConfig(ctx, group, "errors.deadletterqueue.topic.name"); err != nil {
			return nil, err
		}
		if dlq == "" {
			return nil, usagef("queue dlq replay: share group %q has no dead-letter topic (errors.deadletterqueue.topic.name; set it with mqctl queue config, or name the topic with --from)", group)
		}
	}
	res := &ReplayResult{Group: group, From: dlq}
	facts, err := a.partitionFacts(ctx, []string{dlq}, true)
	if err != nil {
		return nil, requestError("queue dlq replay", err)
	}
	ends := map[int32]int64{}
	starts := map[int32]kgo.Offset{}
	for k, f := range facts {
		if k.partition < 0 && f.err == "unknown topic" {
			// The broker creates a group's dead-letter topic with its
			// first dead letter: none yet.
			return res, nil
		}
		if k.partition < 0 {
			return nil, fmt.Errorf("queue dlq replay: %s: %s", dlq, f.err)
		}
		if f.logEnd > max(f.logStart, 0) {
			ends[k.partition] = f.logEnd
			starts[k.partition] = kgo.NewOffset().At(f.logStart)
		}
	}
	if len(ends) == 0 {
		return res, nil
	}
	cl, err := kgo.NewClient(append(a.cl.Opts(), kgo.ConsumePartitions(map[string]map[int32]kgo.Offset{dlq: starts}),
		kgo.RecordPartitioner(kgo.ManualPartitioner()), kgo.DefaultProduceTopic(dlq))...)
	if err != nil {
		return nil, err
	}
	defer cl.Close()
	var out []*kgo.Record
	for len(ends) > 0 {
		fs := cl.PollFetches(ctx)
		if err := ctx.Err(); err != nil {
			return nil, err
		}
		var ferr error
		fs.EachError(func(_ string, _ int32, err error) { ferr = err })
		if ferr != nil {
			return nil, requestError("queue dlq replay", ferr)
		}
		fs.EachRecord(func(r *kgo.Record) {
			end, ok := ends[r.Partition]
			if !ok || r.Offset >= end {
				return
			}
			if r.Offset == end-1 {
				delete(ends, r.Partition)
			}
			if !since.IsZero() && r.Timestamp.Before(since) {
				res.Skipped++
				return
			}
			rec := &kgo.Record{Key: r.Key, Value: r.Value, Timestamp: r.Timestamp, Topic: to}
			srcPartition := int32(-1)
			for _, h := range r.Headers {
				switch {
				case (h.Key == kafkaext.DLQTopic || h.Key == kafkaext.DLQTopicOld) && to == "":
					rec.Topic = string(h.Value)
				case h.Key == kafkaext.DLQPartition || h.Key == kafkaext.DLQPartitionOld:
					if p, err := strconv.Atoi(string(h.Value)); err == nil {
						srcPartition = int32(p)
					}
				case strings.HasPrefix(h.Key, kafkaext.DLQPrefix):
				default:
					rec.Headers = append(rec.Headers, h)
				}
			}
			if rec.Topic == "" {
				res.Skipped++
				return
			}
			rec.Partition = srcPartition
			out = append(out, rec)
		})
	}
	// To another topic: partition by key there; back home: the source
	// partition.
	var toCl *kgo.Client
	if to != "" {
		if toCl, err = kgo.NewClient(append(a.cl.Opts(), kgo.RecordPartitioner(kgo.StickyKeyPartitioner(nil)))...); err != nil {
			return nil, err
		}
		defer toCl.Close()
	}
	for _, rec := range out {
		c := cl
		if to != "" {
			c = toCl
		}
		if err := c.ProduceSync(ctx, rec).FirstErr(); err != nil {
			return res, requestError("queue dlq replay", err)
		}
		res.Replayed++
	}
	return res, nil
}
