package admin

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/mqproject/mq/lib/client"
	"github.com/mqproject/mq/lib/kafkaext"
)

// DeletedRecords is the outcome for one partition of records delete.
type DeletedRecords struct {
	Topic          string `json:"topic"`
	Partition      int32  `json:"partition"`
	LogStartOffset int64  `json:"log_start_offset"` // the new one; -1 when failed
	Error          string `json:"error,omitempty"`
}

// DeletedRecordsList is the result of records delete, by partition.
type DeletedRecordsList []DeletedRecords

// Table implements Result.
func (l DeletedRecordsList) Table() ([]string, [][]string) {
	rows := make([][]string, len(l))
	for i, d := range l {
		rows[i] = []string{d.Topic, itoa(d.Partition), offset(d.LogStartOffset)}
	}
	return []string{"TOPIC", "PARTITION", "LOG-START"}, rows
}

// DeleteRecords deletes the records of topic before offset (-1: the
// high-water mark, i.e. all of them) in the given partitions, or in every
// partition when none is given. The partitions' log start offsets move up
// to offset; nothing at or after it is touched.
func (a *Admin) DeleteRecords(ctx context.Context, topic string, partitions []int32, before int64) (DeletedRecordsList, error) {
	const what = "records delete"
	_, partitions, err := a.topicPartitions(ctx, what, topic, partitions)
	if err != nil {
		return nil, err
	}
	var offsets kadm.Offsets
	for _, p := range partitions {
		offsets.Add(kadm.Offset{Topic: topic, Partition: p, At: before, LeaderEpoch: -1})
	}
	// A partition whose leader gave a retriable answer is asked again,
	// alone: the others are done.
	resps := map[int32]kadm.DeleteRecordsResponse{}
	a.retry(ctx, func(ctx context.Context) error {
		var got kadm.DeleteRecordsResponses
		if got, err = a.adm.DeleteRecords(ctx, offsets); err != nil {
			return nil
		}
		var again kadm.Offsets
		var first error
		for _, p := range partitions {
			r, ok := got[topic][p]
			if !ok {
				continue
			}
			resps[p] = r
			if r.Err != nil && client.Retriable(r.Err) {
				again.Add(kadm.Offset{Topic: topic, Partition: p, At: before, LeaderEpoch: -1})
				if first == nil {
					first = fmt.Errorf("topic %s partition %d: %w", topic, p, r.Err)
				}
			}
		}
		offsets = again
		return first
	})
	if err != nil {
		return nil, requestError(what, err)
	}
	out := DeletedRecordsList{}
	var failed []string
	for _, p := range partitions {
		r, ok := resps[p]
		res := DeletedRecords{Topic: topic, Partition: p, LogStartOffset: -1}
		switch {
		case !ok:
			res.Error = "no answer for this partition"
		case r.Err != nil:
			res.Error = errText(r.Err, "")
		default:
			res.LogStartOffset = r.LowWatermark
		}
		if res.Error != "" {
			failed = append(failed, fmt.Sprintf("%s[%d]: %s", topic, p, res.Error))
		}
		out = append(out, res)
	}
	return out, failures(what, failed)
}

// SkippedRange is one damaged range records skip-damaged gave up, or the
// failure for a partition.
type SkippedRange struct {
	Topic      string `json:"topic"`
	Partition  int32  `json:"partition"`
	FromOffset int64  `json:"from_offset"` // -1 when failed
	ToOffset   int64  `json:"to_offset"`   // exclusive; -1 when failed
	Segment    string `json:"segment,omitempty"`
	Reason     string `json:"reason,omitempty"`
	Error      string `json:"error,omitempty"`
}

// SkippedRanges is the result of records skip-damaged, by partition and
// offset.
type SkippedRanges []SkippedRange

// Table implements Result.
func (l SkippedRanges) Table() ([]string, [][]string) {
	rows := make([][]string, 0, len(l))
	for _, s := range l {
		if s.Error != "" {
			rows = append(rows, []string{s.Topic, itoa(s.Partition), "-", "-", "failed: " + s.Error})
			continue
		}
		rows = append(rows, []string{s.Topic, itoa(s.Partition), itoa(s.FromOffset), itoa(s.ToOffset - 1), s.Reason})
	}
	return []string{"TOPIC", "PARTITION", "FROM", "TO", "REASON"}, rows
}

// SkipDamaged gives up damaged ranges of topic's partitions (all of them
// when none is given): the range holding offset, or every damaged range
// when offset is -1. The records in a skipped range are lost for good;
// consumers step over the range. The broker logs each one.
func (a *Admin) SkipDamaged(ctx context.Context, topic string, partitions []int32, offset int64) (SkippedRanges, error) {
	const what = "records skip-damaged"
	d, partitions, err := a.topicPartitions(ctx, what, topic, partitions)
	if err != nil {
		return nil, err
	}
	byLeader := map[int32][]int32{}
	out := SkippedRanges{}
	var failed []string
	fail := func(p int32, msg string) {
		out = append(out, SkippedRange{Topic: topic, Partition: p, FromOffset: -1, ToOffset: -1, Error: msg})
		failed = append(failed, fmt.Sprintf("%s[%d]: %s", topic, p, msg))
	}
	for _, p := range partitions {
		if l := d.Partitions[p].Leader; l >= 0 {
			byLeader[l] = append(byLeader[l], p)
		} else {
			fail(p, "no leader")
		}
	}
	for _, leader := range slices.Sorted(maps.Keys(byLeader)) {
		req := &kafkaext.SkipDamagedRequest{Topic: topic}
		for _, p := range byLeader[leader] {
			req.Partitions = append(req.Partitions, kafkaext.SkipDamagedPartition{Partition: p, Offset: offset})
		}
		kresp, err := a.cl.Broker(int(leader)).Request(ctx, req)
		if err != nil {
			if errors.Is(err, kerr.UnsupportedVersion) || errors.Is(err, kgo.ErrClientClosed) {
				return nil, requestError(what, err)
			}
			for _, p := range byLeader[leader] {
				fail(p, fmt.Sprintf("broker %d: %v", leader, err))
			}
			continue
		}
		for _, pr := range kresp.(*kafkaext.SkipDamagedResponse).Partitions {
			if pr.ErrorCode != 0 {
				fail(pr.Partition, errText(kerr.ErrorForCode(pr.ErrorCode), pr.ErrorMessage))
				continue
			}
			for _, s := range pr.Skipped {
				out = append(out, SkippedRange{Topic: topic, Partition: pr.Partition, FromOffset: s.FromOffset,
					ToOffset: s.ToOffset, Segment: s.Segment, Reason: s.Reason})
			}
		}
	}
	slices.SortFunc(out, func(x, y SkippedRange) int {
		if x.Partition != y.Partition {
			return int(x.Partition - y.Partition)
		}
		return int(x.FromOffset - y.FromOffset)
	})
	return out, failures(what, failed)
}

// topicPartitions looks topic up and checks that it has the partitions
// given, returning them sorted (every partition when none is given).
func (a *Admin) topicPartitions(ctx context.Context, what, topic string, partitions []int32) (kadm.TopicDetail, []int32, error) {
	if topic == "" {
		return kadm.TopicDetail{}, nil, client.Usagef("%s: missing --topic", what)
	}
	details, err := a.adm.ListTopics(ctx, topic)
	if err != nil {
		return kadm.TopicDetail{}, nil, requestError(what, err)
	}
	d, ok := details[topic]
	if !ok || errors.Is(d.Err, kerr.UnknownTopicOrPartition) {
		return d, nil, client.Failf("%s: unknown topic %q", what, topic)
	}
	if d.Err != nil {
		return d, nil, client.Failf("%s: %s: %s", what, topic, errText(d.Err, ""))
	}
	if len(partitions) == 0 {
		partitions = d.Partitions.Numbers()
	}
	slices.Sort(partitions)
	partitions = slices.Compact(partitions)
	for _, p := range partitions {
		if _, ok := d.Partitions[p]; !ok {
			return d, nil, client.Failf("%s: topic %q has no partition %d (it has %d)", what, topic, p, len(d.Partitions))
		}
	}
	return d, partitions, nil
}
