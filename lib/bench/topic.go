package bench

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/mqproject/mq/lib/client"
)

// TopicSpec is the topic a run uses: created with Partitions partitions
// (0: the broker's default) and Configs when it does not exist. An
// existing topic is used as it is.
type TopicSpec struct {
	Name       string
	Partitions int32 // <= 0: the broker's num.partitions
	// ReplicationFactor <= 0: the broker's default.replication.factor.
	ReplicationFactor int16
	Configs           map[string]string
}

// EnsureTopic creates the topic when it does not exist and returns how many
// partitions it has.
func EnsureTopic(ctx context.Context, cl *kgo.Client, spec TopicSpec) (int, error) {
	adm := kadm.NewClient(cl)
	parts := spec.Partitions
	if parts <= 0 {
		parts = -1
	}
	configs := map[string]*string{}
	for k, v := range spec.Configs {
		configs[k] = &v
	}
	rf := spec.ReplicationFactor
	if rf <= 0 {
		rf = -1
	}
	resp, err := adm.CreateTopic(ctx, parts, rf, configs, spec.Name)
	switch {
	case err == nil && resp.Err == nil:
	case errors.Is(err, kerr.TopicAlreadyExists) || errors.Is(resp.Err, kerr.TopicAlreadyExists):
		if len(spec.Configs) > 0 {
			return 0, client.Failf("topic %s exists already: its configs (%v) cannot be applied; use a new topic", spec.Name, slices.Sorted(maps.Keys(spec.Configs)))
		}
	case err != nil:
		return 0, fmt.Errorf("create topic %s: %w", spec.Name, err)
	default:
		return 0, client.Failf("create topic %s: %v", spec.Name, resp.Err)
	}
	// Wait for the partitions to be visible with a leader.
	for {
		md, err := adm.Metadata(ctx, spec.Name)
		if err != nil {
			return 0, fmt.Errorf("metadata for %s: %w", spec.Name, err)
		}
		t, ok := md.Topics[spec.Name]
		if ok && t.Err == nil && len(t.Partitions) > 0 {
			ready := true
			for _, p := range t.Partitions {
				ready = ready && p.Err == nil && p.Leader >= 0
			}
			if ready {
				return len(t.Partitions), nil
			}
		}
		if err := sleepCtx(ctx, 20e6); err != nil {
			return 0, err
		}
	}
}

// partitionOffsets returns the start and end offsets of each partition of
// topic. A partition whose log its leader is still opening (mqd serves
// while it opens them after a restart) answers a retriable error: the
// offsets are asked again until ctx ends.
func partitionOffsets(ctx context.Context, cl *kgo.Client, topic string) (start, end map[int32]int64, err error) {
	adm := kadm.NewClient(cl)
	return retryOffsets(ctx, topic, offsetsRetryInterval, func(ctx context.Context) (s, e kadm.ListedOffsets, err error) {
		if s, err = adm.ListStartOffsets(ctx, topic); err != nil {
			return nil, nil, fmt.Errorf("list start offsets of %s: %w", topic, err)
		}
		if e, err = adm.ListEndOffsets(ctx, topic); err != nil {
			return nil, nil, fmt.Errorf("list end offsets of %s: %w", topic, err)
		}
		return s, e, nil
	})
}

// offsetsRetryInterval is how long partitionOffsets waits before asking
// again.
const offsetsRetryInterval = 50 * time.Millisecond

// retryOffsets calls list until its answer holds no retriable error (or
// ctx ends), every interval, and returns the offsets it listed.
func retryOffsets(ctx context.Context, topic string, interval time.Duration, list func(context.Context) (s, e kadm.ListedOffsets, err error)) (start, end map[int32]int64, err error) {
	for {
		start, end, err = listedOffsets(ctx, topic, list)
		if err == nil || !retriable(err) {
			return start, end, err
		}
		if sleepCtx(ctx, interval) != nil {
			return nil, nil, err
		}
	}
}

// listedOffsets calls list once and returns its offsets by partition.
func listedOffsets(ctx context.Context, topic string, list func(context.Context) (s, e kadm.ListedOffsets, err error)) (start, end map[int32]int64, err error) {
	s, e, err := list(ctx)
	if err != nil {
		return nil, nil, err
	}
	start, end = map[int32]int64{}, map[int32]int64{}
	for _, x := range []struct {
		l    kadm.ListedOffsets
		into map[int32]int64
	}{{s, start}, {e, end}} {
		x.l.Each(func(o kadm.ListedOffset) {
			switch {
			case err != nil || o.Err == nil:
			case errors.Is(o.Err, kerr.UnknownTopicOrPartition):
				err = client.Failf("unknown topic %q", topic)
			default:
				err = fmt.Errorf("offsets of %s/%d: %w", topic, o.Partition, o.Err)
			}
			x.into[o.Partition] = o.Offset
		})
	}
	if err != nil {
		return nil, nil, err
	}
	if len(end) == 0 {
		return nil, nil, client.Failf("topic %s: unknown topic or no partitions", topic)
	}
	return start, end, nil
}

// retriable reports whether err is an answer worth asking again for: a
// retriable Kafka error (LEADER_NOT_AVAILABLE, NOT_LEADER_OR_FOLLOWER…),
// alone or as every shard error of a request.
func retriable(err error) bool {
	var se *kadm.ShardErrors
	if errors.As(err, &se) {
		for _, e := range se.Errs {
			if !kerr.IsRetriable(e.Err) {
				return false
			}
		}
		return len(se.Errs) > 0
	}
	return kerr.IsRetriable(err)
}
