package broker

import (
	"context"
	"errors"
	"fmt"
	"strconv"

	"github.com/mqproject/mq/lib/controller"
	"github.com/mqproject/mq/lib/partition"
	"github.com/mqproject/mq/lib/queue"
	"github.com/mqproject/mq/lib/record"
)

// Dead-letter headers: added to each dead letter, after the record's own
// headers. docs/queues.md documents them; mqctl queue dlq replay reads
// them.
const (
	dlqHeaderTopic      = "mq.dlq.source.topic"
	dlqHeaderPartition  = "mq.dlq.source.partition"
	dlqHeaderOffset     = "mq.dlq.source.offset"
	dlqHeaderDeliveries = "mq.dlq.delivery.count"
	dlqHeaderGroup      = "mq.dlq.group"
	dlqHeaderError      = "mq.dlq.error"
)

// errDeadLetterElsewhere is a dead-letter partition led by another node.
var errDeadLetterElsewhere = errors.New("broker: the dead-letter partition is led by another node")

// deadLetter appends the dead letters of a share-partition to the group's
// dead-letter topic (errors.deadletterqueue.topic.name), waiting until the
// in-sync replicas have them; without one it does nothing. The records
// keep their key, value, headers and timestamp. The topic is created
// (with the broker's defaults) on first use; dead letters of source
// partition p go to its partition p mod n, so they keep their order.
func (b *Broker) deadLetter(ctx context.Context, img *controller.Image, group string, src *controller.Topic, h *partition.Hosted, dead []queue.DeadLetter, s shareGroupSettings) error {
	if s.deadLetterTopic == "" || len(dead) == 0 {
		return nil
	}
	dt := img.Topics[s.deadLetterTopic]
	if dt == nil {
		settings := b.effectiveSettings(img)
		_, err := b.ctrl.CreateTopic(ctx, controller.CreateTopic{
			Name: s.deadLetterTopic, Partitions: settings.NumPartitions,
			ReplicationFactor: offsetsReplicationFactor(settings.DefaultReplicationFactor, img),
		})
		if err != nil && !errors.Is(err, controller.ErrTopicExists) {
			return fmt.Errorf("create dead-letter topic %s: %w", s.deadLetterTopic, err)
		}
		b.syncData()
		if dt = b.ctrl.Image().Topics[s.deadLetterTopic]; dt == nil {
			return fmt.Errorf("dead-letter topic %s: not in the image after creation", s.deadLetterTopic)
		}
	}
	p := h.Partition.Partition() % int32(len(dt.Partitions))
	out, err := b.parts.Leader(dt, p)
	if err != nil {
		if leader := dt.Partitions[p].Leader; leader >= 0 && leader != b.cfg.Settings.NodeID {
			return errDeadLetterElsewhere
		}
		return err
	}
	var recs []record.Record
	var baseTS int64 = -1
	for _, d := range dead {
		r, ts, err := readRecord(h, d.Offset)
		if err != nil {
			return fmt.Errorf("read %s at %d: %w", h, d.Offset, err)
		}
		if r == nil {
			continue // compacted away or deleted by retention since
		}
		if baseTS < 0 {
			baseTS = ts
		}
		r.TimestampDelta = ts - baseTS
		r.Headers = append(r.Headers,
			record.RecordHeader{Key: dlqHeaderTopic, Value: []byte(src.Name)},
			record.RecordHeader{Key: dlqHeaderPartition, Value: []byte(strconv.Itoa(int(h.Partition.Partition())))},
			record.RecordHeader{Key: dlqHeaderOffset, Value: []byte(strconv.FormatInt(d.Offset, 10))},
			record.RecordHeader{Key: dlqHeaderDeliveries, Value: []byte(strconv.Itoa(int(d.Deliveries)))},
			record.RecordHeader{Key: dlqHeaderGroup, Value: []byte(group)},
			record.RecordHeader{Key: dlqHeaderError, Value: []byte(d.Reason)},
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
	w := offsetsPending{out, res.LastOffset, res.LeaderEpoch}
	if err := w.Wait(ctx); err != nil {
		return err
	}
	b.log.Info("dead-lettered records", "group", group, "partition", h.String(), "records", len(recs), "topic", s.deadLetterTopic)
	return nil
}

// readRecord returns a copy of the record at offset with its timestamp,
// or nil when the log no longer has it.
func readRecord(h *partition.Hosted, offset int64) (*record.Record, int64, error) {
	data, _, err := readBatches(h, offset, 1)
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
			c := record.Record{Key: clone(r.Key), Value: clone(r.Value)}
			for _, hd := range r.Headers {
				c.Headers = append(c.Headers, record.RecordHeader{Key: hd.Key, Value: clone(hd.Value)})
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

func clone(b []byte) []byte {
	if b == nil {
		return nil
	}
	return append([]byte{}, b...)
}
