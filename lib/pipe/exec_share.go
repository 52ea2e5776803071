package pipe

import (
	"context"
	"fmt"
	"io"
	"sync"

	"github.com/twmb/franz-go/pkg/kgo"
)

// shareSource is the Source of exec without --ordered: a share group
// (KIP-932), where the broker hands each record to one member at a time,
// counts its deliveries and takes it back when it is released (or its
// acquisition lock runs out), so any number of workers share a topic
// without a partition each.
//
// Accept, Release and Fail acknowledge a record with kgo's share
// acknowledgements (AckAccept, AckRelease; Fail dead-letters the record
// with --dlq and accepts it, else rejects it: the broker archives it, or
// dead-letters it by the group's own configuration).
//
// kgo accepts every record of the previous poll that was not
// acknowledged when it polls again, so Next polls only once every record
// of the last poll was reported: a record is never acknowledged without
// having run. Next is called from one goroutine; the acknowledgements
// from any. The fields under mu are shared.
type shareSource struct {
	cl    *kgo.Client
	group string
	// The client's calls, replaced in tests.
	pollRecords func(ctx context.Context, n int) kgo.Fetches
	ackRecord   func(r *kgo.Record, status kgo.AckStatus)
	produceSync func(ctx context.Context, r *kgo.Record) error

	dlq    string
	max    int // records per poll
	stderr io.Writer

	// Next's own: the records of the last poll not yet delivered.
	buffered []*kgo.Record

	mu      sync.Mutex
	out     int // delivered, not yet reported
	changed chan struct{}
}

func newShareSource(newClient func(...kgo.Opt) (*kgo.Client, error), topics []string, group, dlq string, jobs int, stderr io.Writer) (*shareSource, error) {
	s := &shareSource{group: group, dlq: dlq, max: max(jobs, 1), stderr: stderr, changed: make(chan struct{})}
	cl, err := newClient(
		kgo.ShareGroup(group),
		kgo.ConsumeTopics(topics...),
		kgo.ShareMaxRecords(int32(s.max)),
		kgo.ShareAckCallback(s.ackResults),
	)
	if err != nil {
		return nil, err
	}
	s.cl = cl
	s.pollRecords = cl.PollRecords
	s.ackRecord = (*kgo.Record).Ack
	s.produceSync = func(ctx context.Context, r *kgo.Record) error { return cl.ProduceSync(ctx, r).FirstErr() }
	return s, nil
}

// ackResults reports acknowledgements the broker refused: those records
// are delivered again (to this worker or another).
func (s *shareSource) ackResults(_ *kgo.Client, rs kgo.ShareAckResults) {
	for _, r := range rs {
		if r.Err != nil {
			fmt.Fprintf(s.stderr, "mqpipe: acknowledge in share group %s: %v\n", s.group, r.Err)
		}
	}
}

func (s *shareSource) Next(ctx context.Context) (*Message, error) {
	for len(s.buffered) == 0 {
		if err := s.waitReported(ctx); err != nil {
			return nil, err
		}
		fetches := s.pollRecords(ctx, s.max)
		// Records polled are taken whatever ctx says: the next poll
		// would accept them unrun.
		s.buffered = fetches.Records()
		if len(s.buffered) == 0 && ctx.Err() != nil {
			return nil, ctx.Err()
		}
		var ferr error
		fetches.EachError(func(t string, p int32, err error) {
			if ferr == nil {
				ferr = fmt.Errorf("share fetch %s/%d: %w", t, p, err)
			}
		})
		if ferr != nil && len(s.buffered) == 0 {
			return nil, ferr
		}
	}
	r := s.buffered[0]
	s.buffered = s.buffered[1:]
	s.mu.Lock()
	s.out++
	s.mu.Unlock()
	m := &Message{Topic: r.Topic, Partition: r.Partition, Offset: r.Offset, Key: r.Key, Value: r.Value,
		Timestamp: r.Timestamp, DeliveryCount: r.DeliveryCount(), ref: r}
	for _, h := range r.Headers {
		m.Headers = append(m.Headers, Header{Key: h.Key, Value: h.Value})
	}
	return m, nil
}

// waitReported waits until every delivered record was reported.
func (s *shareSource) waitReported(ctx context.Context) error {
	for {
		s.mu.Lock()
		out, changed := s.out, s.changed
		s.mu.Unlock()
		if out == 0 {
			return nil
		}
		select {
		case <-changed:
		case <-ctx.Done():
			return ctx.Err()
		}
	}
}

func (s *shareSource) ack(m *Message, status kgo.AckStatus) {
	s.ackRecord(m.ref.(*kgo.Record), status)
	s.mu.Lock()
	s.out--
	close(s.changed)
	s.changed = make(chan struct{})
	s.mu.Unlock()
}

func (s *shareSource) Accept(m *Message) error {
	s.ack(m, kgo.AckAccept)
	return nil
}

func (s *shareSource) Release(m *Message) error {
	s.ack(m, kgo.AckRelease)
	return nil
}

func (s *shareSource) Fail(m *Message, reason string) error {
	if s.dlq == "" {
		s.ack(m, kgo.AckReject)
		return nil
	}
	ctx, cancel := context.WithTimeout(context.Background(), dlqTimeout)
	defer cancel()
	if err := s.produceSync(ctx, DeadLetter(m, s.dlq, s.group, reason)); err != nil {
		s.ack(m, kgo.AckRelease) // delivered again, and dead-lettered then
		return fmt.Errorf("dead-letter to %s: %w", s.dlq, err)
	}
	s.ack(m, kgo.AckAccept)
	return nil
}

// Close sends the acknowledgements still pending and leaves the group,
// which releases whatever the worker still held.
func (s *shareSource) Close(ctx context.Context) error {
	err := s.cl.FlushAcks(ctx)
	s.cl.Close()
	if err != nil {
		return fmt.Errorf("acknowledge in share group %s: %w", s.group, err)
	}
	return nil
}
