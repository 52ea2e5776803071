package client

import (
	"context"
	"errors"
	"fmt"
	"net"
	"syscall"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
)

func TestRetriableIsKafkasRetriableButForErrorsThatDoNotMend(t *testing.T) {
	for _, tc := range []struct {
		err  error
		want bool
	}{
		{nil, false},
		{kerr.LeaderNotAvailable, true},
		{fmt.Errorf("list: %w", kerr.NotLeaderForPartition), true},
		{kerr.CoordinatorLoadInProgress, true},
		{kerr.UnknownTopicOrPartition, false},
		{kerr.KafkaStorageError, false},
		{kerr.TopicAuthorizationFailed, false},
		{errors.New("connection refused"), false},
		{&kadm.ShardErrors{Errs: []kadm.ShardError{{Err: kerr.LeaderNotAvailable}, {Err: kerr.NotLeaderForPartition}}}, true},
		{&kadm.ShardErrors{Errs: []kadm.ShardError{{Err: kerr.LeaderNotAvailable}, {Err: kerr.InvalidRequest}}}, false},
		{&kadm.ShardErrors{}, false},
		{&kadm.ShardErrors{Errs: []kadm.ShardError{{Err: kerr.LeaderNotAvailable}, {Err: fmt.Errorf("unable to dial: %w", &net.OpError{Op: "dial", Err: syscall.ECONNREFUSED})}}}, true},
		{&net.OpError{Op: "dial", Err: syscall.ECONNREFUSED}, false},
	} {
		if got := Retriable(tc.err); got != tc.want {
			t.Errorf("Retriable(%v) = %v, want %v", tc.err, got, tc.want)
		}
	}
}

func TestRetryAsksAgainUntilTheAnswerIsNotRetriable(t *testing.T) {
	answers := []error{kerr.LeaderNotAvailable, kerr.NotLeaderForPartition, nil}
	tries, told := 0, 0
	err := Retry(context.Background(), time.Minute, func(context.Context) error {
		tries++
		return answers[tries-1]
	}, func(err error) {
		told++
		if !errors.Is(err, kerr.LeaderNotAvailable) {
			t.Errorf("waiting told %v, want the first retriable answer", err)
		}
	})
	if err != nil || tries != 3 || told != 1 {
		t.Errorf("Retry: %v after %d tries, waiting told %d times; want nil after 3, told once", err, tries, told)
	}

	tries = 0
	err = Retry(context.Background(), time.Minute, func(context.Context) error {
		tries++
		return kerr.InvalidRequest
	}, nil)
	if !errors.Is(err, kerr.InvalidRequest) || tries != 1 {
		t.Errorf("Retry of an error that is not retriable: %v after %d tries, want it after 1", err, tries)
	}
}

func TestRetryGivesUpWithTheLastAnswer(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	tries := 0
	err := Retry(ctx, time.Hour, func(context.Context) error {
		if tries++; tries == 3 {
			cancel()
		}
		return kerr.LeaderNotAvailable
	}, nil)
	if !errors.Is(err, kerr.LeaderNotAvailable) || tries != 3 {
		t.Errorf("Retry with a cancelled context: %v after %d tries, want LEADER_NOT_AVAILABLE after 3", err, tries)
	}
	tries = 0
	err = Retry(context.Background(), time.Millisecond, func(context.Context) error {
		tries++
		return kerr.LeaderNotAvailable
	}, nil)
	if !errors.Is(err, kerr.LeaderNotAvailable) || tries < 1 {
		t.Errorf("Retry past its timeout: %v after %d tries, want LEADER_NOT_AVAILABLE", err, tries)
	}
}
