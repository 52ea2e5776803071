package client

import (
	"context"
	"errors"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
)

// RetryTimeout is how long a tool keeps asking again after a retriable
// answer (Retry) before it gives up with that answer: long enough for a
// restarted mqd to open its partitions, or for a cluster to elect new
// leaders after a node left (its session timeout and an election).
const RetryTimeout = 30 * time.Second

// retryBackoff is the first wait between two tries; it doubles up to
// retryBackoffMax.
const (
	retryBackoff    = 50 * time.Millisecond
	retryBackoffMax = time.Second
)

// Retriable reports whether err is an answer worth asking again for,
// the way any Kafka client does: a retriable Kafka error
// (LEADER_NOT_AVAILABLE, NOT_LEADER_OR_FOLLOWER, COORDINATOR_LOAD_IN_PROGRESS,
// NOT_COORDINATOR, …), alone, wrapped, or as every shard error of a kadm
// request. A shard that could not reach its broker is retriable too: the
// other brokers answered, and a leader that is gone is replaced once the
// controller fences it. Three errors Kafka calls retriable are not: an
// unknown topic or partition (a typo does not mend), a corrupt message
// and a storage error (a broker that cannot read its log will not read it
// on the next try).
func Retriable(err error) bool {
	if err == nil {
		return false
	}
	var se *kadm.ShardErrors
	if errors.As(err, &se) {
		for _, e := range se.Errs {
			if !Retriable(e.Err) && !IsUnreachable(e.Err) {
				return false
			}
		}
		return len(se.Errs) > 0
	}
	if errors.Is(err, kerr.UnknownTopicOrPartition) || errors.Is(err, kerr.CorruptMessage) || errors.Is(err, kerr.KafkaStorageError) {
		return false
	}
	return kerr.IsRetriable(err)
}

// Retry calls try until it returns nil or an error that is not
// Retriable, for up to timeout (RetryTimeout when 0), waiting a little
// longer between each two tries; it returns try's last error. waiting,
// when not nil, is called once, with the first retriable error, so that a
// tool can say what it waits for. A cancelled ctx ends the wait with
// try's last error.
func Retry(ctx context.Context, timeout time.Duration, try func(context.Context) error, waiting func(error)) error {
	if timeout <= 0 {
		timeout = RetryTimeout
	}
	deadline := time.Now().Add(timeout)
	backoff := retryBackoff
	for first := true; ; first = false {
		err := try(ctx)
		if !Retriable(err) {
			return err
		}
		if first && waiting != nil {
			waiting(err)
		}
		wait := min(backoff, time.Until(deadline))
		if wait <= 0 {
			return err
		}
		t := time.NewTimer(wait)
		select {
		case <-ctx.Done():
			t.Stop()
			return err
		case <-t.C:
		}
		backoff = min(2*backoff, retryBackoffMax)
	}
}
