package admin

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"

	"github.com/mqproject/mq/lib/client"
)

// ResetMode is where group reset-offsets moves a group's offsets to.
type ResetMode int

const (
	ResetToEarliest ResetMode = iota + 1 // the log start offset
	ResetToLatest                        // the log end offset (high-water mark)
	ResetToOffset                        // an exact offset
	ResetToTime                          // the first record at or after a time
	ResetShiftBy                         // the committed offset plus or minus N
)

// ResetSpec is one reset mode and its argument.
type ResetSpec struct {
	Mode   ResetMode
	Offset int64     // ResetToOffset
	Time   time.Time // ResetToTime
	Shift  int64     // ResetShiftBy
}

func (s ResetSpec) String() string {
	switch s.Mode {
	case ResetToEarliest:
		return "--to-earliest"
	case ResetToLatest:
		return "--to-latest"
	case ResetToOffset:
		return "--to-offset " + itoa(s.Offset)
	case ResetToTime:
		return "--to-time " + s.Time.UTC().Format(time.RFC3339Nano)
	case ResetShiftBy:
		return "--shift-by " + itoa(s.Shift)
	}
	return "no reset mode"
}

// ParseTime reads a point in time as client.ParseTime does: RFC 3339
// (2024-05-01T12:00:00Z, with fractions of a second if wanted),
// milliseconds since the Unix epoch, or a time ago (-30m, -2d), the forms
// mqpipe's -o @TIME takes.
func ParseTime(what, s string) (time.Time, error) {
	t, err := client.ParseTime(s)
	if err != nil {
		return time.Time{}, usagef("%s: %v", what, err)
	}
	return t, nil
}

// TopicPartitions is a -t TOPIC[:PARTITIONS] value.
type TopicPartitions struct {
	Topic      string
	Partitions []int32 // sorted, no duplicates; nil: every partition
}

// ParseTopicPartitions reads TOPIC, TOPIC:P,P,... or TOPIC:A-B (and
// mixtures: t:0,2-4). The topic is what comes before the last ":" (topic
// names cannot hold one).
func ParseTopicPartitions(what, s string) (TopicPartitions, error) {
	topic, list, hasList := s, "", false
	if i := strings.LastIndexByte(s, ':'); i >= 0 {
		topic, list, hasList = s[:i], s[i+1:], true
	}
	if topic == "" {
		return TopicPartitions{}, usagef("%s: %q: empty topic name (want TOPIC[:PARTITIONS])", what, s)
	}
	tps := TopicPartitions{Topic: topic}
	if !hasList {
		return tps, nil
	}
	bad := func(part string) error {
		return usagef("%s: %q: bad partition %q (want TOPIC, TOPIC:0,2 or TOPIC:1-3)", what, s, part)
	}
	if list == "" {
		return TopicPartitions{}, bad("")
	}
	for part := range strings.SplitSeq(list, ",") {
		lo, hi, isRange := strings.Cut(part, "-")
		first, err1 := parsePartition(lo)
		last, err2 := first, error(nil)
		if isRange {
			last, err2 = parsePartition(hi)
		}
		if err1 != nil || err2 != nil || last < first {
			return TopicPartitions{}, bad(part)
		}
		for p := first; p <= last; p++ {
			tps.Partitions = append(tps.Partitions, p)
		}
	}
	slices.Sort(tps.Partitions)
	tps.Partitions = slices.Compact(tps.Partitions)
	return tps, nil
}

// maxRange bounds the partitions one range may name, so that a typo like
// t:0-2000000000 is refused rather than allocated.
const maxRange = 1 << 16

func parsePartition(s string) (int32, error) {
	n, err := strconv.ParseInt(s, 10, 32)
	if err != nil || n < 0 || n >= maxRange || s[0] == '+' {
		return 0, errors.New("bad partition")
	}
	return int32(n), nil
}

// mergeTopics joins -t values naming the same topic: their partitions
// together, or every partition when one of them names all.
func mergeTopics(in []TopicPartitions) []TopicPartitions {
	var out []TopicPartitions
	for _, t := range in {
		i := slices.IndexFunc(out, func(o TopicPartitions) bool { return o.Topic == t.Topic })
		if i < 0 {
			out = append(out, TopicPartitions{Topic: t.Topic, Partitions: slices.Clone(t.Partitions)})
			continue
		}
		if out[i].Partitions == nil || t.Partitions == nil {
			out[i].Partitions = nil
			continue
		}
		out[i].Partitions = append(out[i].Partitions, t.Partitions...)
		slices.Sort(out[i].Partitions)
		out[i].Partitions = slices.Compact(out[i].Partitions)
	}
	return out
}

// ResetOffsets is what group reset-offsets asks for.
type ResetOffsets struct {
	Group     string
	Topics    []TopicPartitions // the partitions to reset
	AllTopics bool              // instead of Topics: every partition the group has committed
	Spec      ResetSpec
	Execute   bool // commit the plan; else only print it

	share bool // a share group's reset (ResetQueue)
}

// offsetsNoun names what the reset moves, in messages.
func (r ResetOffsets) offsetsNoun() string {
	if r.share {
		return "share-partition state"
	}
	return "committed offsets"
}

// Check refuses a reset that cannot be right (a usage error), naming
// the command what.
func (r ResetOffsets) Check(what string) error {
	if r.Group == "" {
		return usagef("%s: missing --group", what)
	}
	if len(r.Topics) == 0 && !r.AllTopics {
		return usagef("%s: missing --topic (or --all-topics)", what)
	}
	if len(r.Topics) > 0 && r.AllTopics {
		return usagef("%s: --topic and --all-topics exclude each other", what)
	}
	switch r.Spec.Mode {
	case ResetToEarliest, ResetToLatest, ResetToTime, ResetShiftBy:
	case ResetToOffset:
		if r.Spec.Offset < 0 {
			return usagef("%s: --to-offset must be >= 0", what)
		}
	default:
		return usagef("%s: missing the new offsets (--to-earliest, --to-latest, --to-offset N, --to-time TIME or --shift-by N)", what)
	}
	return nil
}

// Results of group reset-offsets, per partition.
const (
	ResultPlanned   = "planned"   // dry run: what --execute would commit
	ResultCommitted = "committed" // --execute: the new offset is committed
)

// ResetPartition is one partition of a reset plan.
type ResetPartition struct {
	Topic          string `json:"topic"`
	Partition      int32  `json:"partition"`
	LogStartOffset int64  `json:"log_start_offset"` // -1: unknown
	LogEndOffset   int64  `json:"log_end_offset"`   // -1: unknown
	Current        int64  `json:"current"`          // the committed offset; -1: none
	New            int64  `json:"new"`              // -1: could not be planned (see error)
	Result         string `json:"result"`           // planned, committed, failed
	Error          string `json:"error,omitempty"`
}

// ResetPlan is the result of group reset-offsets: for each partition its
// current and new committed offset, and whether the new one was
// committed (Executed) or only planned.
type ResetPlan struct {
	Group      string           `json:"group"`
	Executed   bool             `json:"executed"`
	Partitions []ResetPartition `json:"partitions"`
}

// Table implements Result.
func (p *ResetPlan) Table() ([]string, [][]string) {
	rows := make([][]string, len(p.Partitions))
	for i, r := range p.Partitions {
		rows[i] = []string{
			p.Group, r.Topic, itoa(r.Partition), dashOffset(r.LogStartOffset), dashOffset(r.LogEndOffset),
			dashOffset(r.Current), dashOffset(r.New), r.Result,
		}
	}
	return []string{"GROUP", "TOPIC", "PARTITION", "LOG-START", "LOG-END", "CURRENT", "NEW", "RESULT"}, rows
}

// resetInput is what planning one partition needs to know.
type resetInput struct {
	committed int64 // -1: none
	logStart  int64
	logEnd    int64
	atTime    int64 // ResetToTime: the first offset at or after the time
}

// planOffset is the new committed offset of one partition: what spec
// asks for, kept within [log start, log end] so that the group reads
// neither records that are gone nor ones that do not exist yet.
func planOffset(spec ResetSpec, in resetInput) (int64, error) {
	if in.logStart < 0 || in.logEnd < 0 {
		return -1, errors.New("log start or end offset unknown")
	}
	var target int64
	switch spec.Mode {
	case ResetToEarliest:
		target = in.logStart
	case ResetToLatest:
		target = in.logEnd
	case ResetToOffset:
		target = spec.Offset
	case ResetToTime:
		target = in.atTime
		if target < 0 {
			target = in.logEnd // no record at or after the time
		}
	case ResetShiftBy:
		if in.committed < 0 {
			return -1, errors.New("no committed offset to shift")
		}
		target = in.committed + spec.Shift
		switch { // overflow
		case spec.Shift < 0 && target > in.committed:
			target = in.logStart
		case spec.Shift > 0 && target < in.committed:
			target = in.logEnd
		}
	default:
		return -1, errors.New("no reset mode")
	}
	return min(max(target, in.logStart), in.logEnd), nil
}

// ResetOffsets plans new committed offsets for a group and, with
// req.Execute, commits them. The group must have no members: a live
// consumer would overwrite the offsets with its own next commit, so an
// active group is refused (exit 1) before anything is planned. A group
// that does not exist yet may be given offsets. When some partition
// cannot be planned nothing is committed.
func (a *Admin) ResetOffsets(ctx context.Context, req ResetOffsets) (*ResetPlan, error) {
	const what = "group reset-offsets"
	if err := req.Check(what); err != nil {
		return nil, err
	}
	a.awaitCoordinators(ctx, []string{req.Group})
	// One group id is one group: committing offsets for a share group's
	// id would make a consumer group beside the queue.
	var isNew bool
	var err error
	a.retry(ctx, func(ctx context.Context) error {
		isNew, err = client.ShareGroupIsNew(ctx, a.cl, req.Group)
		return groupRetriable(req.Group, err)
	})
	if err != nil {
		return nil, requestError(what, err)
	}
	if !isNew {
		return nil, usagef("%s: %q is a share group (a queue), not a consumer group: reset it with mqctl queue reset -g %s", what, req.Group, req.Group)
	}
	var described kadm.DescribedGroups
	a.retry(ctx, func(ctx context.Context) error {
		if described, err = a.adm.DescribeGroups(ctx, req.Group); err != nil {
			return nil // not the group's answer: reported below
		}
		return groupRetriable(req.Group, described[req.Group].Err)
	})
	if err != nil {
		return nil, requestError(what, err)
	}
	d, ok := described[req.Group]
	if !ok {
		return nil, client.Failf("%s: %s: no answer for this group", what, req.Group)
	}
	if d.Err != nil {
		return nil, client.Failf("%s: %s: %s", what, req.Group, errText(d.Err, d.ErrMessage))
	}
	if n := len(d.Members); n > 0 || (d.State != StateEmpty && d.State != StateDead) {
		return nil, client.Failf("%s: group %q is active (state %s, %d member%s): stop its consumers first; offsets can only be reset while the group is empty",
			what, req.Group, d.State, n, plural(n))
	}
	var fetched kadm.OffsetResponses
	a.retry(ctx, func(ctx context.Context) error {
		fetched, err = a.adm.FetchOffsets(ctx, req.Group)
		return groupRetriable(req.Group, err)
	})
	if err != nil {
		return nil, requestError(what+": committed offsets", err)
	}
	committed := map[tp]int64{}
	fetched.Each(func(o kadm.OffsetResponse) {
		if o.Err == nil && o.At >= 0 {
			committed[tp{o.Topic, o.Partition}] = o.At
		}
	})
	plan, failed, err := a.planReset(ctx, what, req, committed)
	if err != nil {
		return nil, err
	}
	if len(failed) > 0 || !req.Execute {
		return plan, failures(what, failed)
	}
	return plan.execute(what, func(offsets kadm.Offsets) (partitionAnswers, error) {
		resps, err := a.adm.CommitOffsets(ctx, req.Group, offsets)
		if err != nil {
			return nil, requestError(what, err)
		}
		return func(topic string, partition int32) (bool, error) {
			o, ok := resps.Lookup(topic, partition)
			return ok, o.Err
		}, nil
	})
}

// partitionAnswers looks up one partition's answer to a request: ok
// false when the answer does not name it.
type partitionAnswers func(topic string, partition int32) (ok bool, err error)

// execute sets the plan's new offsets with set and records each
// partition's result; a partition that failed fails the whole (exit 1).
func (p *ResetPlan) execute(what string, set func(kadm.Offsets) (partitionAnswers, error)) (*ResetPlan, error) {
	var offsets kadm.Offsets
	for _, r := range p.Partitions {
		offsets.Add(kadm.Offset{Topic: r.Topic, Partition: r.Partition, At: r.New, LeaderEpoch: -1})
	}
	answer, err := set(offsets)
	if err != nil {
		return nil, err
	}
	p.Executed = true
	var failed []string
	for i := range p.Partitions {
		r := &p.Partitions[i]
		switch ok, err := answer(r.Topic, r.Partition); {
		case !ok:
			r.Result, r.Error = ResultFailed, "no answer for this partition"
		case err != nil:
			r.Result, r.Error = ResultFailed, errText(err, "")
		default:
			r.Result = ResultCommitted
		}
		if r.Result == ResultFailed {
			failed = append(failed, fmt.Sprintf("%s[%d]: %s", r.Topic, r.Partition, r.Error))
		}
	}
	return p, failures(what, failed)
}

// planReset plans the new offsets of req's partitions (with AllTopics,
// those in current) from their current offsets (-1 or missing: none).
// failed lists the partitions that could not be planned.
func (a *Admin) planReset(ctx context.Context, what string, req ResetOffsets, current map[tp]int64) (*ResetPlan, []string, error) {
	committed := current
	topics := mergeTopics(req.Topics)
	if req.AllTopics {
		byTopic := map[string][]int32{}
		for k := range committed {
			byTopic[k.topic] = append(byTopic[k.topic], k.partition)
		}
		if len(byTopic) == 0 {
			return nil, nil, client.Failf("%s: group %q has no %s (name the topics with --topic)", what, req.Group, req.offsetsNoun())
		}
		for _, t := range slices.Sorted(maps.Keys(byTopic)) {
			ps := byTopic[t]
			slices.Sort(ps)
			topics = append(topics, TopicPartitions{Topic: t, Partitions: ps})
		}
	}
	names := make([]string, len(topics))
	for i, t := range topics {
		names[i] = t.Topic
	}
	details, err := a.adm.ListTopics(ctx, names...)
	if err != nil {
		return nil, nil, requestError(what, err)
	}
	var targets []tp
	for _, t := range topics {
		d, ok := details[t.Topic]
		if !ok || errors.Is(d.Err, kerr.UnknownTopicOrPartition) {
			return nil, nil, client.Failf("%s: unknown topic %q", what, t.Topic)
		}
		if d.Err != nil {
			return nil, nil, client.Failf("%s: %s: %s", what, t.Topic, errText(d.Err, ""))
		}
		ps := t.Partitions
		if ps == nil {
			ps = d.Partitions.Numbers()
			slices.Sort(ps)
		}
		for _, p := range ps {
			if _, ok := d.Partitions[p]; !ok {
				return nil, nil, client.Failf("%s: topic %q has no partition %d (it has %d)", what, t.Topic, p, len(d.Partitions))
			}
			targets = append(targets, tp{t.Topic, p})
		}
	}
	slices.SortFunc(targets, compareTP)
	facts, err := a.partitionFacts(ctx, slices.Sorted(slices.Values(names)), true)
	if err != nil {
		return nil, nil, requestError(what, err)
	}
	var atTime kadm.ListedOffsets
	if req.Spec.Mode == ResetToTime {
		a.retry(ctx, func(ctx context.Context) error {
			if atTime, err = a.adm.ListOffsetsAfterMilli(ctx, req.Spec.Time.UnixMilli(), names...); err != nil {
				return nil // a shard's error is each of its partitions'
			}
			return firstRetriable(atTime)
		})
		if err != nil && !isShardErr(err) {
			return nil, nil, requestError(what, err)
		}
	}
	plan := &ResetPlan{Group: req.Group, Partitions: []ResetPartition{}}
	var failed []string
	for _, k := range targets {
		f := facts[k]
		in := resetInput{committed: -1, logStart: f.logStart, logEnd: f.logEnd, atTime: -1}
		if c, ok := committed[k]; ok {
			in.committed = c
		}
		row := ResetPartition{
			Topic: k.topic, Partition: k.partition, LogStartOffset: f.logStart, LogEndOffset: f.logEnd,
			Current: in.committed, New: -1, Result: ResultPlanned,
		}
		var planErr error
		if f.err != "" {
			planErr = errors.New(f.err)
		}
		if planErr == nil && req.Spec.Mode == ResetToTime {
			if o, ok := atTime.Lookup(k.topic, k.partition); !ok {
				planErr = errors.New("no offset for the time")
			} else if o.Err != nil {
				planErr = fmt.Errorf("offset for the time: %s", errText(o.Err, ""))
			} else {
				in.atTime = o.Offset
			}
		}
		if planErr == nil {
			row.New, planErr = planOffset(req.Spec, in)
		}
		if planErr != nil {
			row.Result, row.Error = ResultFailed, planErr.Error()
			failed = append(failed, fmt.Sprintf("%s[%d]: %s", k.topic, k.partition, row.Error))
		}
		plan.Partitions = append(plan.Partitions, row)
	}
	return plan, failed, nil
}

func compareTP(a, b tp) int {
	if c := strings.Compare(a.topic, b.topic); c != 0 {
		return c
	}
	return int(a.partition) - int(b.partition)
}

func plural(n int) string {
	if n == 1 {
		return ""
	}
	return "s"
}

// firstRetriable is the retriable error of the first partition, by topic
// and number, of a listing, or nil.
func firstRetriable(listed kadm.ListedOffsets) error {
	for _, t := range slices.Sorted(maps.Keys(listed)) {
		for _, p := range slices.Sorted(maps.Keys(listed[t])) {
			if o := listed[t][p]; o.Err != nil && client.Retriable(o.Err) {
				return fmt.Errorf("topic %s partition %d: %w", t, p, o.Err)
			}
		}
	}
	return nil
}
