package coordinator

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strconv"

	"github.com/mqproject/mq/lib/config"
	"github.com/mqproject/mq/lib/controller"
	"github.com/mqproject/mq/lib/kafkaext"
	"github.com/mqproject/mq/lib/partition"
	"github.com/mqproject/mq/lib/queue"
	"github.com/mqproject/mq/lib/record"
)

// errDeadLetterElsewhere is a dead-letter partition led by another node.
var errDeadLetterElsewhere = errors.New("coordinator: the dead-letter partition is led by another node")

// DeadLetters writes share groups' dead letters to their dead-letter
// topics (errors.deadletterqueue.topic.name): its Write is lib/queue's
// LeaderConfig.DeadLetter. A dead-letter partition must be led here; the
// write is refused otherwise, and lib/queue tries again later.
type DeadLetters struct {
	Settings   config.Broker // this node's; a topic's defaults are these with the image's dynamic configs
	Controller *controller.Controller
	Hosted     *partition.Manager
	Logger     *slog.Logger
}

// Write appends the dead letters of group's share-partition on tp to
// topic, with kafkaext's dead-letter headers (the ones mqpipe exec writes), waiting until the in-sync replicas have them. The records keep
// their key, value, headers and timestamp. The topic is created (with
// the broker's defaults) on first use; dead letters of source partition
// p go to its partition p mod n, so they keep their order.
func (d *DeadLetters) Write(ctx context.Context, group string, tp queue.TP, src queue.Source, dead []queue.DeadLetter, topic string) error {
	img := d.Controller.Image()
	srcTopic := img.TopicsByID[controller.TopicID(tp.TopicID)]
	if srcTopic == nil {
		return fmt.Errorf("dead letters of topic id %x: %w", tp.TopicID, controller.ErrUnknownTopic)
	}
	dt := img.Topics[topic]
	if dt == nil {
		settings, err := d.Settings.WithDynamic(img.BrokerConfigs[controller.ClusterDefaultBroker], img.BrokerConfigs[d.Settings.NodeID])
		if err != nil {
			d.Logger.Warn("ignoring dynamic broker configs", "err", err)
		}
		_, err = d.Controller.CreateTopic(ctx, controller.CreateTopic{
			Name: topic, Partitions: settings.NumPartitions,
			ReplicationFactor: ReplicationFactor(settings.DefaultReplicationFactor, img),
		})
		if err != nil && !errors.Is(err, controller.ErrTopicExists) {
			return fmt.Errorf("create dead-letter topic %s: %w", topic, err)
		}
		d.Hosted.Refresh()
		if dt = d.Controller.Image().Topics[topic]; dt == nil {
			return fmt.Errorf("dead-letter topic %s: not in the image after creation", topic)
		}
	}
	p := tp.Partition % int32(len(dt.Partitions))
	out, err := d.Hosted.Leader(dt, p)
	if err != nil {
		if leader := dt.Partitions[p].Leader; leader >= 0 && leader != d.Settings.NodeID {
			return errDeadLetterElsewhere
		}
		return err
	}
	var recs []record.Record
	var baseTS int64 = -1
	for _, dl := range dead {
		r, ts, err := readRecord(src, dl.Offset)
		if err != nil {
			return fmt.Errorf("read %s at %d: %w", src, dl.Offset, err)
		}
		if r == nil {
			continue // compacted away or deleted by retention since
		}
		if baseTS < 0 {
			baseTS = ts
		}
		r.TimestampDelta = ts - baseTS
		r.Headers = append(r.Headers,
			record.RecordHeader{Key: kafkaext.DLQTopic, Value: []byte(srcTopic.Name)},
			record.RecordHeader{Key: kafkaext.DLQPartition, Value: []byte(strconv.Itoa(int(tp.Partition)))},
			record.RecordHeader{Key: kafkaext.DLQOffset, Value: []byte(strconv.FormatInt(dl.Offset, 10))},
			record.RecordHeader{Key: kafkaext.DLQDeliveryCount, Value: []byte(strconv.Itoa(int(dl.Deliveries)))},
			record.RecordHeader{Key: kafkaext.DLQGroup, Value: []byte(group)},
			record.RecordHeader{Key: kafkaext.DLQError, Value: []byte(dl.Reason)},
		)
		recs = append(recs, *r)
	}
	if len(recs) == 0 {
		return nil
	}
	batch, err := record.Build(record.BuildOptions{BaseTimestamp: baseTS}, recs)
	if err != nil {
		return err
	}
	res, err := out.Append(batch, -1)
	if err != nil {
		return err
	}
	wctx, cancel := context.WithTimeout(ctx, DefaultCommitTimeout)
	defer cancel()
	if err := out.WaitHighWatermark(wctx, res.LastOffset, res.LeaderEpoch); err != nil {
		return err
	}
	d.Logger.Info("dead-lettered records", "group", group, "partition", src.String(), "records", len(recs), "topic", topic)
	return nil
}

// readRecord returns a copy of the record at offset with its timestamp,
// or nil when the log no longer has it.
func readRecord(src queue.Source, offset int64) (*record.Record, int64, error) {
	data, _, err := src.ReadBatches(offset, 1)
	if err != nil || len(data) == 0 {
		return nil, 0, err
	}
	var found *record.Record
	var ts int64
	for rest := data; len(rest) > 0 && found == nil; {
		batch, next, hdr, err := record.Next(rest)
		if err != nil {
			return nil, 0, err
		}
		err = record.Iterate(batch, 0, func(r *record.Record) error {
			if r.Offset(&hdr) != offset {
				return nil
			}
			c := record.Record{Key: bytes.Clone(r.Key), Value: bytes.Clone(r.Value)}
			for _, hd := range r.Headers {
				c.Headers = append(c.Headers, record.RecordHeader{Key: hd.Key, Value: bytes.Clone(hd.Value)})
			}
			found, ts = &c, r.Timestamp(&hdr)
			return nil
		})
		if err != nil {
			return nil, 0, err
		}
		rest = next
	}
	return found, ts, nil
}
