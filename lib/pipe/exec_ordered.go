package pipe

import (
	"context"
	"fmt"
	"io"
	"slices"
	"strconv"
	"sync"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/mqproject/mq/lib/kafkaext"
)

// Tuning of the ordered source.
const (
	// orderedMaxBuffered bounds the records fetched and not yet done.
	orderedMaxBuffered = 1000
	// orderedCommitInterval is how often finished records are committed.
	orderedCommitInterval = 200 * time.Millisecond
	// dlqTimeout bounds producing one record to the dead-letter topic.
	dlqTimeout = 30 * time.Second
)

// orderedSource is the Source of exec --ordered: a classic consumer group
// (the group assigns partitions, the offsets are committed) that delivers
// one message at a time per key of a partition and commits, per
// partition, the offset past the contiguous run of finished records. A
// failed message is delivered again in place (nothing of its key runs
// meanwhile), and after the last attempt it is copied to the dead-letter
// topic and committed past; without one, Fail is an error, which stops the
// worker with the record uncommitted.
//
// Records without a key share one key (the empty one), so they keep the
// order of their partition. Of the ready records, Next takes from the
// partition of the one that has waited longest the one with the lowest
// offset: with one slot (-j 1) a partition runs in offset order, and with
// more its commit position advances as early as it can.
//
// The poller goroutine adds fetched records; the group's callbacks
// (kgo's goroutine) add and remove partitions; Next, Accept, Release and
// Fail come from the runner. All state is under mu.
type orderedSource struct {
	cl     *kgo.Client
	group  string
	dlq    string // "": no dead-letter topic
	stderr io.Writer

	stopPoll context.CancelFunc
	joined   chan struct{} // closed when the group first assigned partitions
	joinOnce sync.Once
	polled   chan struct{} // closed when the poller ends
	commits  chan struct{} // closed when the committer ends

	mu       sync.Mutex
	parts    map[topicPartition]*orderedPartition
	ready    []*Message // the next record of each key free to run, in arrival order (see Next)
	buffered int        // records held and not done
	changed  chan struct{}
	err      error // the poller's
}

type topicPartition struct {
	topic     string
	partition int32
}

// orderedPartition is one assigned partition.
type orderedPartition struct {
	tp          topicPartition
	revoked     bool
	outstanding []int64        // offsets added and not yet finished, in order
	done        map[int64]bool // finished offsets still in outstanding
	next        int64          // the offset after the last record added; -1: none yet
	committed   int64          // the offset last committed; -1: none
	keys        map[string]*orderedKey
	running     int // delivered, not reported
}

// orderedKey is the waiting records of one key of a partition, while a
// record of it is ready or running.
type orderedKey struct {
	waiting []*Message
}

type orderedRef struct {
	p   *orderedPartition
	key string
}

// newOrderedSource joins group on topics with the client options opts
// (the broker's, the session timeout) and starts fetching.
func newOrderedSource(addrsClient func(...kgo.Opt) (*kgo.Client, error), topics []string, group, dlq string, session time.Duration, stderr io.Writer) (*orderedSource, error) {
	s := &orderedSource{group: group, dlq: dlq, stderr: stderr, parts: map[topicPartition]*orderedPartition{},
		changed: make(chan struct{}), joined: make(chan struct{}), polled: make(chan struct{}), commits: make(chan struct{})}
	cl, err := addrsClient(
		kgo.ConsumerGroup(group),
		kgo.ConsumeTopics(topics...),
		kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()),
		kgo.DisableAutoCommit(),
		kgo.BlockRebalanceOnPoll(),
		kgo.SessionTimeout(session),
		kgo.HeartbeatInterval(min(3*time.Second, session/5)),
		kgo.OnPartitionsAssigned(s.assigned),
		kgo.OnPartitionsRevoked(func(ctx context.Context, cl *kgo.Client, m map[string][]int32) { s.revoked(ctx, m, true) }),
		kgo.OnPartitionsLost(func(ctx context.Context, cl *kgo.Client, m map[string][]int32) { s.revoked(ctx, m, false) }),
	)
	if err != nil {
		return nil, err
	}
	s.cl = cl
	ctx, cancel := context.WithCancel(context.Background())
	s.stopPoll = cancel
	go s.poll(ctx)
	go s.commitEvery(ctx)
	return s, nil
}

// notifyLocked wakes everyone waiting for a change.
func (s *orderedSource) notifyLocked() {
	close(s.changed)
	s.changed = make(chan struct{})
}

func (s *orderedSource) assigned(_ context.Context, _ *kgo.Client, m map[string][]int32) {
	s.joinOnce.Do(func() { close(s.joined) })
	s.mu.Lock()
	defer s.mu.Unlock()
	for t, ps := range m {
		for _, p := range ps {
			tp := topicPartition{t, p}
			s.parts[tp] = &orderedPartition{tp: tp, done: map[int64]bool{}, next: -1, committed: -1, keys: map[string]*orderedKey{}}
		}
	}
}

// revoked gives partitions up: their records not yet delivered are
// dropped (the next owner reads them from the committed offset), the
// running ones are waited for, and what finished is committed.
func (s *orderedSource) revoked(ctx context.Context, m map[string][]int32, commit bool) {
	s.mu.Lock()
	var gone []*orderedPartition
	for t, ps := range m {
		for _, p := range ps {
			part := s.parts[topicPartition{t, p}]
			if part == nil {
				continue
			}
			part.revoked = true
			gone = append(gone, part)
			for _, k := range part.keys {
				s.buffered -= len(k.waiting)
			}
			part.keys = map[string]*orderedKey{}
		}
	}
	s.ready = slices.DeleteFunc(s.ready, func(m *Message) bool {
		if m.ref.(*orderedRef).p.revoked {
			s.buffered--
			return true
		}
		return false
	})
	s.notifyLocked()
	for {
		running := 0
		for _, p := range gone {
			running += p.running
		}
		if running == 0 {
			break
		}
		changed := s.changed
		s.mu.Unlock()
		<-changed
		s.mu.Lock()
	}
	offsets := map[string]map[int32]kgo.EpochOffset{}
	for _, p := range gone {
		delete(s.parts, p.tp)
		if o, ok := p.commitOffset(); ok {
			setIn(offsets, p.tp.topic, p.tp.partition, kgo.EpochOffset{Epoch: -1, Offset: o})
		}
	}
	s.mu.Unlock()
	if commit && len(offsets) > 0 {
		s.commit(ctx, offsets)
	}
}

// poll fetches records while fewer than orderedMaxBuffered are held.
func (s *orderedSource) poll(ctx context.Context) {
	defer close(s.polled)
	for {
		s.mu.Lock()
		for s.buffered >= orderedMaxBuffered {
			changed := s.changed
			s.mu.Unlock()
			select {
			case <-changed:
			case <-ctx.Done():
				return
			}
			s.mu.Lock()
		}
		room := orderedMaxBuffered - s.buffered
		s.mu.Unlock()
		fetches := s.cl.PollRecords(ctx, room)
		if ctx.Err() != nil {
			s.cl.AllowRebalance()
			return
		}
		var ferr error
		fetches.EachError(func(t string, p int32, err error) {
			if ferr == nil {
				ferr = fmt.Errorf("fetch %s/%d: %w", t, p, err)
			}
		})
		s.mu.Lock()
		fetches.EachRecord(func(r *kgo.Record) { s.addLocked(r) })
		if ferr != nil && s.err == nil {
			s.err = ferr
		}
		s.notifyLocked()
		s.mu.Unlock()
		s.cl.AllowRebalance()
		if ferr != nil {
			return
		}
	}
}

func (s *orderedSource) addLocked(r *kgo.Record) {
	p := s.parts[topicPartition{r.Topic, r.Partition}]
	if p == nil || p.revoked || r.Offset < p.next {
		return
	}
	m := &Message{Topic: r.Topic, Partition: r.Partition, Offset: r.Offset, Key: r.Key, Value: r.Value, Timestamp: r.Timestamp,
		ref: &orderedRef{p: p, key: string(r.Key)}}
	for _, h := range r.Headers {
		m.Headers = append(m.Headers, Header{Key: h.Key, Value: h.Value})
	}
	p.outstanding = append(p.outstanding, r.Offset)
	p.next = r.Offset + 1
	s.buffered++
	k := p.keys[string(r.Key)]
	if k != nil {
		k.waiting = append(k.waiting, m)
		return
	}
	p.keys[string(r.Key)] = &orderedKey{}
	s.ready = append(s.ready, m)
}

func (s *orderedSource) Next(ctx context.Context) (*Message, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	for len(s.ready) == 0 {
		if s.err != nil {
			return nil, s.err
		}
		changed := s.changed
		s.mu.Unlock()
		select {
		case <-changed:
			s.mu.Lock()
		case <-ctx.Done():
			s.mu.Lock()
			return nil, ctx.Err()
		}
	}
	i := s.nextReadyLocked()
	m := s.ready[i]
	s.ready = slices.Delete(s.ready, i, i+1)
	m.DeliveryCount++
	m.ref.(*orderedRef).p.running++
	return m, nil
}

// nextReadyLocked picks the index in ready of the record Next delivers:
// of the partition of ready[0], the record with the lowest offset. A key's
// next record joins ready behind the other keys' when its predecessor
// finishes; taking the lowest offset puts it back in partition order.
func (s *orderedSource) nextReadyLocked() int {
	p := s.ready[0].ref.(*orderedRef).p
	best := 0
	for i, m := range s.ready {
		if m.ref.(*orderedRef).p == p && m.Offset < s.ready[best].Offset {
			best = i
		}
	}
	return best
}

// finishLocked marks m done and frees its key for the next record.
func (s *orderedSource) finishLocked(m *Message) {
	ref := m.ref.(*orderedRef)
	p := ref.p
	p.running--
	p.done[m.Offset] = true
	for len(p.outstanding) > 0 && p.done[p.outstanding[0]] {
		delete(p.done, p.outstanding[0])
		p.outstanding = p.outstanding[1:]
	}
	s.buffered--
	if k := p.keys[ref.key]; k != nil {
		if len(k.waiting) > 0 {
			s.ready = append(s.ready, k.waiting[0])
			k.waiting = k.waiting[1:]
		} else {
			delete(p.keys, ref.key)
		}
	}
	s.notifyLocked()
}

// dropLocked ends m's delivery without finishing it: its partition was
// revoked, or it could not be dead-lettered.
func (s *orderedSource) dropLocked(m *Message) {
	m.ref.(*orderedRef).p.running--
	s.buffered--
	s.notifyLocked()
}

func (s *orderedSource) Accept(m *Message) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.finishLocked(m)
	return nil
}

// Release delivers m again next, before any other record but a lower
// offset of its partition (see Next): nothing of its key runs meanwhile,
// so the order holds.
func (s *orderedSource) Release(m *Message) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	p := m.ref.(*orderedRef).p
	if p.revoked {
		s.dropLocked(m)
		return nil
	}
	p.running--
	s.ready = append([]*Message{m}, s.ready...)
	s.notifyLocked()
	return nil
}

func (s *orderedSource) Fail(m *Message, reason string) error {
	s.mu.Lock()
	revoked := m.ref.(*orderedRef).p.revoked
	s.mu.Unlock()
	if revoked {
		return s.Release(m) // the next owner tries it again
	}
	if s.dlq == "" {
		s.mu.Lock()
		s.dropLocked(m)
		s.mu.Unlock()
		return fmt.Errorf("gave up after %d attempts, and there is no --dlq: %s", m.DeliveryCount, oneLine(reason))
	}
	ctx, cancel := context.WithTimeout(context.Background(), dlqTimeout)
	defer cancel()
	err := s.cl.ProduceSync(ctx, DeadLetter(m, s.dlq, s.group, reason)).FirstErr()
	s.mu.Lock()
	defer s.mu.Unlock()
	if err != nil {
		s.dropLocked(m)
		return fmt.Errorf("dead-letter to %s: %w", s.dlq, err)
	}
	s.finishLocked(m)
	return nil
}

// DeadLetter is the record that carries m to the dead-letter topic dlq:
// its key, value, headers and timestamp, and the kafkaext.DLQ headers.
func DeadLetter(m *Message, dlq, group, reason string) *kgo.Record {
	r := &kgo.Record{Topic: dlq, Key: m.Key, Value: m.Value, Timestamp: m.Timestamp}
	for _, h := range m.Headers {
		r.Headers = append(r.Headers, kgo.RecordHeader{Key: h.Key, Value: h.Value})
	}
	r.Headers = append(r.Headers,
		kgo.RecordHeader{Key: kafkaext.DLQTopic, Value: []byte(m.Topic)},
		kgo.RecordHeader{Key: kafkaext.DLQPartition, Value: []byte(strconv.FormatInt(int64(m.Partition), 10))},
		kgo.RecordHeader{Key: kafkaext.DLQOffset, Value: []byte(strconv.FormatInt(m.Offset, 10))},
		kgo.RecordHeader{Key: kafkaext.DLQDeliveryCount, Value: []byte(strconv.FormatInt(int64(m.DeliveryCount), 10))},
		kgo.RecordHeader{Key: kafkaext.DLQGroup, Value: []byte(group)},
		kgo.RecordHeader{Key: kafkaext.DLQError, Value: []byte(reason)},
	)
	return r
}

// commitOffset is where the group resumes p: the first record not
// finished, else past the last one added; false when that is no further
// than what was committed.
func (p *orderedPartition) commitOffset() (int64, bool) {
	o := p.next
	if len(p.outstanding) > 0 {
		o = p.outstanding[0]
	}
	return o, o >= 0 && o > p.committed
}

// dueLocked is what to commit now: the partitions whose position moved
// past their last commit.
func (s *orderedSource) dueLocked() map[string]map[int32]kgo.EpochOffset {
	offsets := map[string]map[int32]kgo.EpochOffset{}
	for _, p := range s.parts {
		if o, ok := p.commitOffset(); ok && !p.revoked {
			setIn(offsets, p.tp.topic, p.tp.partition, kgo.EpochOffset{Epoch: -1, Offset: o})
		}
	}
	return offsets
}

// committed notes offsets that the group took.
func (s *orderedSource) committed(offsets map[string]map[int32]kgo.EpochOffset) {
	s.mu.Lock()
	defer s.mu.Unlock()
	for t, ps := range offsets {
		for part, eo := range ps {
			if p := s.parts[topicPartition{t, part}]; p != nil && eo.Offset > p.committed {
				p.committed = eo.Offset
			}
		}
	}
}

func (s *orderedSource) commitEvery(ctx context.Context) {
	defer close(s.commits)
	t := time.NewTicker(orderedCommitInterval)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		s.mu.Lock()
		offsets := s.dueLocked()
		s.mu.Unlock()
		if len(offsets) > 0 {
			s.commit(ctx, offsets)
		}
	}
}

// commit commits offsets; an error is reported, and the offsets are
// committed again with the next commit (or the records read again by
// the next owner).
func (s *orderedSource) commit(ctx context.Context, offsets map[string]map[int32]kgo.EpochOffset) error {
	var cerr error
	s.cl.CommitOffsetsSync(ctx, offsets, func(_ *kgo.Client, _ *kmsg.OffsetCommitRequest, resp *kmsg.OffsetCommitResponse, err error) {
		if err != nil {
			cerr = err
			return
		}
		for _, t := range resp.Topics {
			for _, p := range t.Partitions {
				if e := kerr.ErrorForCode(p.ErrorCode); e != nil && cerr == nil {
					cerr = fmt.Errorf("%s/%d: %w", t.Topic, p.Partition, e)
				}
			}
		}
	})
	if cerr != nil && ctx.Err() == nil {
		fmt.Fprintf(s.stderr, "mqpipe: commit offsets of group %s: %v\n", s.group, cerr)
	}
	if cerr == nil && ctx.Err() == nil {
		s.committed(offsets)
	}
	return cerr
}

// Close stops fetching, commits what finished and leaves the group.
func (s *orderedSource) Close(ctx context.Context) error {
	s.stopPoll()
	<-s.polled
	<-s.commits
	s.mu.Lock()
	offsets := s.dueLocked()
	s.mu.Unlock()
	var err error
	if len(offsets) > 0 {
		err = s.commit(ctx, offsets)
	}
	s.cl.AllowRebalance()
	s.cl.LeaveGroupContext(ctx)
	s.cl.Close()
	if err != nil {
		return fmt.Errorf("commit offsets of group %s: %w", s.group, err)
	}
	return nil
}
