package broker

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"sync"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/mqproject/mq/lib/controller"
	"github.com/mqproject/mq/lib/partition"
	"github.com/mqproject/mq/lib/peer"
	"github.com/mqproject/mq/lib/queue"
	"github.com/mqproject/mq/lib/server"
)

// sharePartitions are the share-partitions of the partitions this node
// leads, and the share sessions of the members fetching them.
//
// Locks: mu guards the maps; a sharePart's mu guards its state and is
// held while its new state is appended to __share_group_state (so the
// records are in the order of the changes), never while waiting for the
// append to be durable. mu is never taken while holding a part's mu.
type sharePartitions struct {
	b        *Broker
	store    *shareStore
	mu       sync.Mutex
	parts    map[shareKey]*sharePart
	sessions map[shareSessionKey]*shareSession
}

type shareSessionKey struct{ group, member string }

// shareSession is a member's share session with this node (KIP-932): the
// partitions it fetches, and the epoch its next request must carry.
type shareSession struct {
	epoch    int32
	parts    []shareTP // in the order they were added
	lastUsed time.Time
}

// shareSessionIdle is how long a share session may go unused before a
// new session's creation drops it: its member died without closing it
// (its records' locks have long expired by then).
const shareSessionIdle = 10 * time.Minute

type shareTP struct {
	id        controller.TopicID
	partition int32
}

// sharePart is one share-partition led here.
type sharePart struct {
	key shareKey
	mu  sync.Mutex
	// q is the state, nil until loaded (and after a failed write, so that
	// the next use reloads what is durable). leaderEpoch is the
	// partition's leader epoch it was loaded at: another epoch means
	// another leader may have changed it since, so it is loaded again.
	q           *queue.Partition
	leaderEpoch int32
}

func newSharePartitions(b *Broker) *sharePartitions {
	return &sharePartitions{b: b, store: &shareStore{b: b, peers: peer.NewPool("mq-share-" + strconv.Itoa(int(b.cfg.Settings.NodeID)))}, parts: map[shareKey]*sharePart{}, sessions: map[shareSessionKey]*shareSession{}}
}

func (sp *sharePartitions) part(k shareKey) *sharePart {
	sp.mu.Lock()
	defer sp.mu.Unlock()
	p := sp.parts[k]
	if p == nil {
		p = &sharePart{key: k}
		sp.parts[k] = p
	}
	return p
}

// loadLocked makes p.q current for the partition h at its leader epoch,
// from __share_group_state or, for a share-partition without state, at
// the log start (share.auto.offset.reset=earliest) or the high-water mark
// (latest), which is written at once so that the start stays put.
func (sp *sharePartitions) loadLocked(ctx context.Context, p *sharePart, h *partition.Hosted, s shareGroupSettings) error {
	epoch := h.LeaderEpoch()
	if p.q != nil && p.leaderEpoch == epoch {
		p.q.SetConfig(s.queue)
		return nil
	}
	p.q = nil
	snap, found, err := sp.store.load(ctx, p.key)
	if err != nil {
		return err
	}
	var q *queue.Partition
	if found {
		if q, err = queue.Restore(s.queue, snap); err != nil {
			return err
		}
	} else {
		info := h.Offsets()
		start := info.HighWatermark
		if s.earliest {
			start = info.LogStartOffset
		}
		q = queue.New(s.queue, start)
		if err := sp.store.index(ctx, p.key.group, p.key.topicID, true); err != nil {
			return err
		}
		w, err := sp.store.write(ctx, p.key, q.Snapshot())
		if err != nil {
			return err
		}
		if err := w.Wait(ctx); err != nil {
			return err
		}
	}
	p.q, p.leaderEpoch = q, epoch
	return nil
}

// shareError maps an error of the share-partition path to its Kafka code.
func shareError(err error) int16 {
	switch {
	case err == nil:
		return 0
	case errors.Is(err, queue.ErrInvalidRecordState):
		return kerr.InvalidRecordState.Code
	case errors.Is(err, queue.ErrInvalidAck):
		return kerr.InvalidRequest.Code
	case errors.Is(err, errShareStateElsewhere):
		return kerr.CoordinatorNotAvailable.Code
	}
	return kafkaCode(err, kerr.KafkaStorageError, brokerCodes, partitionCodes, replicaCodes, logCodes, contextCodes)
}

// acksFrom turns a request's acknowledgement batches into queue.Acks: one
// type for the whole range, or one per offset.
func acksFrom(first, last []int64, types [][]int8) ([]queue.Ack, error) {
	var out []queue.Ack
	for i := range first {
		f, l, ts := first[i], last[i], types[i]
		switch {
		case f > l || len(ts) == 0:
			return nil, fmt.Errorf("%w: batch %d-%d with %d types", queue.ErrInvalidAck, f, l, len(ts))
		case len(ts) == 1:
			out = append(out, queue.Ack{First: f, Last: l, Type: queue.AckType(ts[0])})
		case int64(len(ts)) != l-f+1:
			return nil, fmt.Errorf("%w: batch %d-%d with %d types", queue.ErrInvalidAck, f, l, len(ts))
		default:
			for j, t := range ts {
				o := f + int64(j)
				if n := len(out); n > 0 && out[n-1].Last == o-1 && out[n-1].Type == queue.AckType(t) {
					out[n-1].Last = o
					continue
				}
				out = append(out, queue.Ack{First: o, Last: o, Type: queue.AckType(t)})
			}
		}
	}
	return out, nil
}

// partAck is one partition's acknowledgements in a request.
type partAck struct {
	tp   shareTP
	acks []queue.Ack
	err  error // the batches do not parse
}

// partResult is what a request did to one share-partition.
type partResult struct {
	tp        shareTP
	err       error // fetch error
	ackErr    error
	acked     bool // the request acknowledged records here
	records   []byte
	leases    []queue.Lease
	leader    int32
	epoch     int32
	pending   *shareWait // the state write to wait for
	part      *sharePart
	writeFail bool
}

// resolve returns the topic and hosted leader of a partition named by ID.
func (b *Broker) resolveShare(img *controller.Image, tp shareTP) (*controller.Topic, *partition.Hosted, error) {
	t := img.TopicsByID[tp.id]
	if t == nil {
		return nil, nil, errUnknownTopicID
	}
	h, err := b.parts.Leader(t, tp.partition)
	return t, h, err
}

// apply runs one request's acknowledgements and acquisitions on one
// share-partition: acks first, then (when fetch) up to maxRecords records
// and maxBytes bytes for member. The new state is appended to
// __share_group_state before the part's mutex is let go; res.pending
// waits for it.
func (sp *sharePartitions) apply(ctx context.Context, img *controller.Image, group, member string, tp shareTP, acks *partAck, fetch bool, maxRecords int, maxBytes int, s shareGroupSettings) partResult {
	res := partResult{tp: tp, leader: -1, epoch: -1}
	t, h, err := sp.b.resolveShare(img, tp)
	if t != nil && int(tp.partition) < len(t.Partitions) && tp.partition >= 0 {
		res.leader, res.epoch = t.Partitions[tp.partition].Leader, t.Partitions[tp.partition].LeaderEpoch
	}
	if err != nil {
		res.err = err
		if acks != nil {
			res.ackErr, res.acked = err, true
		}
		return res
	}
	p := sp.part(shareKey{group: group, topicID: tp.id, partition: tp.partition})
	res.part = p
	p.mu.Lock()
	defer p.mu.Unlock()
	if err := sp.loadLocked(ctx, p, h, s); err != nil {
		res.err = err
		if acks != nil {
			res.ackErr, res.acked = err, true
		}
		return res
	}
	now := sp.b.clock.Now()
	before := p.q.Snapshot()
	if acks != nil {
		res.acked = true
		res.ackErr = acks.err
		if res.ackErr == nil {
			res.ackErr = p.q.Acknowledge(member, now, acks.acks)
		}
	}
	if fetch && maxRecords > 0 {
		res.records, res.leases, res.err = sp.acquire(p.q, h, member, now, maxRecords, maxBytes)
	}
	p.q.Expire(now)
	// Dead letters are archived records; the dead-letter topic (when the
	// group names one) gets them before the archive is written.
	if dead := p.q.TakeDeadLetters(); len(dead) > 0 {
		if err := sp.b.deadLetter(ctx, img, group, t, h, dead, s); err != nil {
			sp.b.log.Warn("dead-letter records", "group", group, "partition", h.String(), "err", err)
			p.q = nil // not archived: reload the durable state
			res.err, res.records, res.leases = err, nil, nil
			if res.acked && res.ackErr == nil {
				res.ackErr = err
			}
			return res
		}
	}
	after := p.q.Snapshot()
	if snapshotsEqual(before, after) {
		return res
	}
	w, err := sp.store.write(ctx, p.key, after)
	if err != nil {
		p.q = nil
		res.writeFail = true
		res.err, res.records, res.leases = err, nil, nil
		if res.acked && res.ackErr == nil {
			res.ackErr = err
		}
		return res
	}
	res.pending = &w
	return res
}

func snapshotsEqual(a, b queue.Snapshot) bool {
	if a.Start != b.Start || a.End != b.End || len(a.Runs) != len(b.Runs) {
		return false
	}
	for i := range a.Runs {
		if a.Runs[i] != b.Runs[i] {
			return false
		}
	}
	return true
}

// acquire reads the log from the first available offset, at most
// maxBytes (at least one batch), and acquires for member what those
// bytes hold. It returns the batches that overlap what was acquired.
func (sp *sharePartitions) acquire(q *queue.Partition, h *partition.Hosted, member string, now time.Time, maxRecords, maxBytes int) ([]byte, []queue.Lease, error) {
	info := h.Offsets()
	if info.LogStartOffset > q.Start() {
		q.SkipTo(info.LogStartOffset) // retention went past: those are gone
	}
	from := q.FirstAvailable()
	if from >= info.HighWatermark {
		return nil, nil, nil
	}
	data, covered, err := readBatches(h, from, maxBytes)
	if err != nil || len(data) == 0 {
		return nil, nil, err
	}
	leases := q.Acquire(member, now, min(covered, info.HighWatermark), maxRecords)
	if len(leases) == 0 {
		return nil, nil, nil
	}
	return trimBatches(data, leases[len(leases)-1].Last), leases, nil
}

// readBatches reads whole batches from the one holding offset on, below
// the high-water mark, up to maxBytes (the first whole, however large),
// and returns them with the offset after the last one.
func readBatches(h *partition.Hosted, offset int64, maxBytes int) ([]byte, int64, error) {
	var buf bytes.Buffer
	next := offset
	for {
		budget := maxBytes - buf.Len()
		if buf.Len() > 0 && budget <= 0 {
			break
		}
		region, _, err := h.Read(next, max(budget, 1), -1)
		if err != nil {
			if buf.Len() > 0 {
				break // serve what was read; the error comes again next time
			}
			return nil, 0, err
		}
		if region.Len == 0 {
			region.Release()
			break
		}
		_, err = region.WriteTo(&buf)
		last := region.LastOffset
		region.Release()
		if err != nil {
			return nil, 0, err
		}
		next = last + 1
	}
	return buf.Bytes(), next, nil
}

// trimBatches drops the batches that start after last.
func trimBatches(data []byte, last int64) []byte {
	const baseOffsetLen, lengthLen = 8, 4
	pos := 0
	for pos+baseOffsetLen+lengthLen <= len(data) {
		base := int64(beUint64(data[pos:]))
		if base > last {
			break
		}
		n := int(beUint32(data[pos+baseOffsetLen:]))
		pos += baseOffsetLen + lengthLen + n
	}
	return data[:min(pos, len(data))]
}

func beUint64(b []byte) uint64 {
	return uint64(b[0])<<56 | uint64(b[1])<<48 | uint64(b[2])<<40 | uint64(b[3])<<32 |
		uint64(b[4])<<24 | uint64(b[5])<<16 | uint64(b[6])<<8 | uint64(b[7])
}

func beUint32(b []byte) uint32 {
	return uint32(b[0])<<24 | uint32(b[1])<<16 | uint32(b[2])<<8 | uint32(b[3])
}

// settle waits for the results' state writes; a write that does not
// become durable fails its partition (records withheld, acks answered
// with the error) and drops the in-memory state, so the next request
// starts from what is durable.
func (sp *sharePartitions) settle(ctx context.Context, results []partResult) {
	for i := range results {
		r := &results[i]
		if r.pending == nil {
			continue
		}
		if err := r.pending.Wait(ctx); err != nil {
			r.part.mu.Lock()
			r.part.q = nil
			r.part.mu.Unlock()
			r.err, r.records, r.leases = err, nil, nil
			if r.acked && r.ackErr == nil {
				r.ackErr = err
			}
		}
	}
}

// releaseMember releases what member holds on a session's partitions (its
// session closed).
func (sp *sharePartitions) releaseMember(ctx context.Context, img *controller.Image, group, member string, parts []shareTP, s shareGroupSettings) {
	var results []partResult
	for _, tp := range parts {
		_, h, err := sp.b.resolveShare(img, tp)
		if err != nil {
			continue
		}
		p := sp.part(shareKey{group: group, topicID: tp.id, partition: tp.partition})
		p.mu.Lock()
		if err := sp.loadLocked(ctx, p, h, s); err != nil {
			p.mu.Unlock()
			continue
		}
		before := p.q.Snapshot()
		p.q.ReleaseMember(member)
		if dead := p.q.TakeDeadLetters(); len(dead) > 0 {
			t := img.TopicsByID[tp.id]
			if err := sp.b.deadLetter(ctx, img, group, t, h, dead, s); err != nil {
				p.q = nil
				p.mu.Unlock()
				continue
			}
		}
		if after := p.q.Snapshot(); !snapshotsEqual(before, after) {
			if w, err := sp.store.write(ctx, p.key, after); err == nil {
				results = append(results, partResult{pending: &w, part: p})
			} else {
				p.q = nil
			}
		}
		p.mu.Unlock()
	}
	sp.settle(ctx, results)
}

// session checks and advances a member's share session for a request at
// epoch, and returns it (nil for epoch -1, which closes it).
func (sp *sharePartitions) session(k shareSessionKey, epoch int32) (*shareSession, []shareTP, error) {
	sp.mu.Lock()
	defer sp.mu.Unlock()
	s := sp.sessions[k]
	now := sp.b.clock.Now()
	if s != nil {
		s.lastUsed = now
	}
	switch {
	case epoch == 0:
		for key, old := range sp.sessions {
			if now.Sub(old.lastUsed) > shareSessionIdle {
				delete(sp.sessions, key)
			}
		}
		s = &shareSession{epoch: 1, lastUsed: now}
		sp.sessions[k] = s
		return s, nil, nil
	case s == nil:
		return nil, nil, kerr.ShareSessionNotFound
	case epoch == -1:
		delete(sp.sessions, k)
		return nil, s.parts, nil
	case epoch != s.epoch:
		return nil, nil, kerr.InvalidShareSessionEpoch
	}
	s.epoch++
	if s.epoch <= 0 {
		s.epoch = 1
	}
	return s, nil, nil
}

// update adds and forgets partitions of a session.
func (sp *sharePartitions) update(s *shareSession, add, forget []shareTP) []shareTP {
	sp.mu.Lock()
	defer sp.mu.Unlock()
	for _, tp := range add {
		found := false
		for _, have := range s.parts {
			if have == tp {
				found = true
				break
			}
		}
		if !found {
			s.parts = append(s.parts, tp)
		}
	}
	for _, tp := range forget {
		for i, have := range s.parts {
			if have == tp {
				s.parts = append(s.parts[:i], s.parts[i+1:]...)
				break
			}
		}
	}
	return append([]shareTP(nil), s.parts...)
}

const (
	shareDefaultMaxRecords = 500
	shareMaxWait           = 30 * time.Second
)

func (b *Broker) handleShareFetch(ctx context.Context, _ *server.ConnInfo, req *server.Request) server.Reply {
	r := req.Body.(*kmsg.ShareFetchRequest)
	return func() server.Response { return server.Response{Msg: b.shareFetch(ctx, r)} }
}

func (b *Broker) shareFetch(ctx context.Context, r *kmsg.ShareFetchRequest) *kmsg.ShareFetchResponse {
	resp := r.ResponseKind().(*kmsg.ShareFetchResponse)
	group, member := optString(r.GroupID), optString(r.MemberID)
	if group == "" || member == "" {
		resp.ErrorCode = kerr.InvalidRequest.Code
		resp.ErrorMessage = kmsg.StringPtr("share fetch without a group or member id")
		return resp
	}
	img := b.ctrl.Image()
	s := b.shareSettings(img, group)
	resp.AcquisitionLockTimeoutMillis = int32(s.queue.LockDuration.Milliseconds())
	sp := b.shares
	session, closed, err := sp.session(shareSessionKey{group, member}, r.ShareSessionEpoch)
	if err != nil {
		resp.ErrorCode = err.(*kerr.Error).Code
		return resp
	}

	var listed []shareTP
	acks := map[shareTP]*partAck{}
	for _, t := range r.Topics {
		for _, p := range t.Partitions {
			tp := shareTP{controller.TopicID(t.TopicID), p.Partition}
			listed = append(listed, tp)
			if len(p.AcknowledgementBatches) == 0 {
				continue
			}
			var first, last []int64
			var types [][]int8
			for _, a := range p.AcknowledgementBatches {
				first, last, types = append(first, a.FirstOffset), append(last, a.LastOffset), append(types, a.AcknowledgeTypes)
			}
			qa, err := acksFrom(first, last, types)
			acks[tp] = &partAck{tp: tp, acks: qa, err: err}
		}
	}
	var forget []shareTP
	for _, t := range r.ForgottenTopicsData {
		for _, p := range t.Partitions {
			forget = append(forget, shareTP{controller.TopicID(t.TopicID), p})
		}
	}
	var parts []shareTP
	fetch := session != nil
	if session != nil {
		parts = sp.update(session, listed, forget)
	}
	// Partitions named only for their acknowledgements (forgotten in the
	// same request, or any at epoch -1) are acknowledged, not fetched.
	var ackOnly []shareTP
	for _, tp := range listed {
		if acks[tp] != nil && !slices.Contains(parts, tp) && !slices.Contains(ackOnly, tp) {
			ackOnly = append(ackOnly, tp)
		}
	}

	maxRecords := int(r.MaxRecords)
	if maxRecords <= 0 {
		maxRecords = shareDefaultMaxRecords
	}
	maxBytes := int(r.MaxBytes)
	if maxBytes <= 0 {
		maxBytes = 1 << 20
	}
	wait := min(time.Duration(r.MaxWaitMillis)*time.Millisecond, shareMaxWait)
	deadline := b.clock.Now().Add(wait)

	var results []partResult
	byTP := map[shareTP]int{}
	run := func(withAcks bool) int {
		got := 0
		recs, bytesLeft := maxRecords, maxBytes
		all := parts
		if withAcks {
			all = append(slices.Clip(parts), ackOnly...)
		}
		for i, tp := range all {
			var a *partAck
			if withAcks {
				a = acks[tp]
			}
			fetchHere := fetch && i < len(parts) && recs > 0 && bytesLeft > 0
			res := sp.apply(ctx, img, group, member, tp, a, fetchHere, recs, bytesLeft, s)
			for _, l := range res.leases {
				n := int(l.Last - l.First + 1)
				recs -= n
				got += n
			}
			bytesLeft -= len(res.records)
			if i, ok := byTP[tp]; ok {
				prev := results[i]
				if prev.acked {
					res.acked, res.ackErr = true, prev.ackErr
				}
				if res.pending == nil {
					res.pending = prev.pending
				}
				results[i] = res
			} else {
				byTP[tp] = len(results)
				results = append(results, res)
			}
		}
		return got
	}
	got := run(true)
	if session == nil && len(closed) > 0 {
		b.shares.releaseMember(ctx, img, group, member, closed, s)
	}
	for got == 0 && fetch && len(acks) == 0 && b.clock.Now().Before(deadline) {
		if !b.waitShareChange(ctx, img, parts, deadline) {
			break
		}
		img = b.ctrl.Image()
		got = run(false)
	}
	sp.settle(ctx, results)
	return b.shareFetchResponse(resp, img, results, listed)
}

// waitShareChange waits until a partition of parts has new records, a
// lock may have expired, or deadline; false when ctx ended.
func (b *Broker) waitShareChange(ctx context.Context, img *controller.Image, parts []shareTP, deadline time.Time) bool {
	var chans []<-chan struct{}
	for _, tp := range parts {
		if _, h, err := b.resolveShare(img, tp); err == nil {
			chans = append(chans, h.Changed())
		}
	}
	until := deadline
	b.shares.mu.Lock()
	var locks []*sharePart
	for _, p := range b.shares.parts {
		locks = append(locks, p)
	}
	b.shares.mu.Unlock()
	for _, p := range locks {
		p.mu.Lock()
		if p.q != nil {
			if d, ok := p.q.NextDeadline(); ok && d.Before(until) {
				until = d
			}
		}
		p.mu.Unlock()
	}
	timer := b.clock.NewTimer(max(until.Sub(b.clock.Now()), time.Millisecond))
	defer timer.Stop()
	merged := make(chan struct{}, 1)
	stop := make(chan struct{})
	defer close(stop)
	for _, ch := range chans {
		go func(ch <-chan struct{}) {
			select {
			case <-ch:
				select {
				case merged <- struct{}{}:
				default:
				}
			case <-stop:
			}
		}(ch)
	}
	select {
	case <-ctx.Done():
		return false
	case <-timer.C():
	case <-merged:
	}
	return true
}

// shareFetchResponse encodes the results: every partition with records,
// an error, or acknowledgements of this request.
func (b *Broker) shareFetchResponse(resp *kmsg.ShareFetchResponse, img *controller.Image, results []partResult, listed []shareTP) *kmsg.ShareFetchResponse {
	topicIdx := map[controller.TopicID]int{}
	leaders := map[int32]bool{}
	for _, r := range results {
		if len(r.leases) == 0 && r.err == nil && !r.acked {
			continue
		}
		i, ok := topicIdx[r.tp.id]
		if !ok {
			i = len(resp.Topics)
			topicIdx[r.tp.id] = i
			resp.Topics = append(resp.Topics, kmsg.ShareFetchResponseTopic{TopicID: r.tp.id})
		}
		rp := kmsg.NewShareFetchResponseTopicPartition()
		rp.Partition = r.tp.partition
		rp.ErrorCode = shareError(r.err)
		if r.err != nil {
			rp.ErrorMessage = kmsg.StringPtr(r.err.Error())
		}
		rp.AcknowledgeErrorCode = shareError(r.ackErr)
		if r.ackErr != nil {
			rp.AcknowledgeErrorMessage = kmsg.StringPtr(r.ackErr.Error())
		}
		rp.CurrentLeader.LeaderID, rp.CurrentLeader.LeaderEpoch = r.leader, r.epoch
		if rp.ErrorCode == kerr.NotLeaderForPartition.Code && r.leader >= 0 {
			leaders[r.leader] = true
		}
		rp.Records = r.records
		for _, l := range r.leases {
			rp.AcquiredRecords = append(rp.AcquiredRecords, kmsg.ShareFetchResponseTopicPartitionAcquiredRecord{
				FirstOffset: l.First, LastOffset: l.Last, DeliveryCount: l.Deliveries,
			})
		}
		resp.Topics[i].Partitions = append(resp.Topics[i].Partitions, rp)
	}
	for id := range leaders {
		if br, ok := img.Brokers[id]; ok {
			resp.NodeEndpoints = append(resp.NodeEndpoints, kmsg.ShareFetchResponseNodeEndpoint{NodeID: br.ID, Host: br.Host, Port: br.Port, Rack: br.Rack})
		}
	}
	return resp
}

// handleShareAcknowledge applies acknowledgements outside a fetch; epoch
// -1 also closes the member's share session, releasing what it still
// holds.
func (b *Broker) handleShareAcknowledge(ctx context.Context, _ *server.ConnInfo, req *server.Request) server.Reply {
	r := req.Body.(*kmsg.ShareAcknowledgeRequest)
	return func() server.Response { return server.Response{Msg: b.shareAcknowledge(ctx, r)} }
}

func (b *Broker) shareAcknowledge(ctx context.Context, r *kmsg.ShareAcknowledgeRequest) *kmsg.ShareAcknowledgeResponse {
	resp := r.ResponseKind().(*kmsg.ShareAcknowledgeResponse)
	group, member := optString(r.GroupID), optString(r.MemberID)
	if group == "" || member == "" {
		resp.ErrorCode = kerr.InvalidRequest.Code
		resp.ErrorMessage = kmsg.StringPtr("share acknowledge without a group or member id")
		return resp
	}
	img := b.ctrl.Image()
	s := b.shareSettings(img, group)
	resp.AcquisitionLockTimeoutMillis = int32(s.queue.LockDuration.Milliseconds())
	if r.ShareSessionEpoch == 0 {
		resp.ErrorCode = kerr.InvalidShareSessionEpoch.Code
		return resp
	}
	sp := b.shares
	_, closed, err := sp.session(shareSessionKey{group, member}, r.ShareSessionEpoch)
	if err != nil {
		resp.ErrorCode = err.(*kerr.Error).Code
		return resp
	}
	var results []partResult
	for _, t := range r.Topics {
		for _, p := range t.Partitions {
			tp := shareTP{controller.TopicID(t.TopicID), p.Partition}
			var first, last []int64
			var types [][]int8
			for _, a := range p.AcknowledgementBatches {
				first, last, types = append(first, a.FirstOffset), append(last, a.LastOffset), append(types, a.AcknowledgeTypes)
			}
			qa, err := acksFrom(first, last, types)
			results = append(results, sp.apply(ctx, img, group, member, tp, &partAck{tp: tp, acks: qa, err: err}, false, 0, 0, s))
		}
	}
	sp.settle(ctx, results)
	if r.ShareSessionEpoch == -1 {
		sp.releaseMember(ctx, img, group, member, closed, s)
	}
	topicIdx := map[controller.TopicID]int{}
	for _, res := range results {
		i, ok := topicIdx[res.tp.id]
		if !ok {
			i = len(resp.Topics)
			topicIdx[res.tp.id] = i
			resp.Topics = append(resp.Topics, kmsg.ShareAcknowledgeResponseTopic{TopicID: res.tp.id})
		}
		rp := kmsg.NewShareAcknowledgeResponseTopicPartition()
		rp.Partition = res.tp.partition
		rp.ErrorCode = shareError(res.ackErr)
		if res.ackErr != nil {
			rp.ErrorMessage = kmsg.StringPtr(res.ackErr.Error())
		}
		rp.CurrentLeader.LeaderID, rp.CurrentLeader.LeaderEpoch = res.leader, res.epoch
		resp.Topics[i].Partitions = append(resp.Topics[i].Partitions, rp)
	}
	return resp
}
