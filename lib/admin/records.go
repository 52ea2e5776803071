package admin

import (
	"context"
	"errors"
	"fmt"
	"slices"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"

	"github.com/mqproject/mq/lib/client"
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
	if topic == "" {
		return nil, client.Usagef("%s: missing --topic", what)
	}
	details, err := a.adm.ListTopics(ctx, topic)
	if err != nil {
		return nil, requestError(what, err)
	}
	d, ok := details[topic]
	if !ok || errors.Is(d.Err, kerr.UnknownTopicOrPartition) {
		return nil, client.Failf("%s: unknown topic %q", what, topic)
	}
	if d.Err != nil {
		return nil, client.Failf("%s: %s: %s", what, topic, errText(d.Err, ""))
	}
	if len(partitions) == 0 {
		partitions = d.Partitions.Numbers()
	}
	slices.Sort(partitions)
	partitions = slices.Compact(partitions)
	var offsets kadm.Offsets
	for _, p := range partitions {
		if _, ok := d.Partitions[p]; !ok {
			return nil, client.Failf("%s: topic %q has no partition %d (it has %d)", what, topic, p, len(d.Partitions))
		}
		offsets.Add(kadm.Offset{Topic: topic, Partition: p, At: before, LeaderEpoch: -1})
	}
	resps, err := a.adm.DeleteRecords(ctx, offsets)
	if err != nil {
		return nil, requestError(what, err)
	}
	out := DeletedRecordsList{}
	var failed []string
	for _, p := range partitions {
		r, ok := resps.Lookup(topic, p)
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
