package broker

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"hash/fnv"
	"net"
	"strconv"
	"sync"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/mqproject/mq/lib/controller"
	"github.com/mqproject/mq/lib/partition"
	"github.com/mqproject/mq/lib/peer"
	"github.com/mqproject/mq/lib/queue"
	"github.com/mqproject/mq/lib/record"
)

// shareStateTopic is where share-partitions keep their state: one record
// per change, keyed by group, topic ID and partition, valued with the
// share-partition's encoded queue.Snapshot. It is compacted, so the
// latest state of each share-partition is what stays.
const shareStateTopic = "__share_group_state"

// errShareStateElsewhere is a state partition led by a node this one
// cannot reach.
var errShareStateElsewhere = errors.New("broker: the share state partition's leader is unknown")

// shareKey names one share-partition.
type shareKey struct {
	group     string
	topicID   controller.TopicID
	partition int32
}

// encode is the key of the share-partition's records: a version byte,
// the group's length and bytes, the topic ID, the partition.
func (k shareKey) encode() []byte {
	b := []byte{1}
	b = binary.AppendUvarint(b, uint64(len(k.group)))
	b = append(b, k.group...)
	b = append(b, k.topicID[:]...)
	return binary.BigEndian.AppendUint32(b, uint32(k.partition))
}

// stateFor is the partition of __share_group_state holding k.
func (k shareKey) stateFor(n int32) int32 { return stateHash(k.encode(), n) }

func stateHash(key []byte, n int32) int32 {
	h := fnv.New32a()
	h.Write(key)
	return int32(h.Sum32() % uint32(n))
}

// The index of a group's topics: one record per topic the group has
// share-partition state for, keyed by version byte 2, the group and the
// topic ID, all in the partition of indexPrefix(group), so that a
// describe of the group without topics finds them in one partition.
func indexPrefix(group string) []byte {
	b := []byte{2}
	b = binary.AppendUvarint(b, uint64(len(group)))
	return append(b, group...)
}

func indexKey(group string, topic controller.TopicID) []byte {
	return append(indexPrefix(group), topic[:]...)
}

// shareStore reads and writes share-partition state in
// __share_group_state, through the replicated log: a write is durable
// when the partition's in-sync replicas have it, as an acks=all produce.
type shareStore struct {
	b        *Broker
	createMu sync.Mutex
	peers    *peer.Pool // connections to the other nodes
}

// topic returns __share_group_state, created (compacted, internal) on
// first use.
func (s *shareStore) topic(ctx context.Context) (*controller.Topic, error) {
	n := s.b.cfg.Settings.ShareStateTopicPartitions
	if n <= 0 {
		n = 50
	}
	return s.b.ensureInternalTopic(ctx, &s.createMu, shareStateTopic, n, nil)
}

// leader returns the local leader replica of k's state partition, or
// else the partition and the node that leads it.
func (s *shareStore) leader(ctx context.Context, k shareKey) (*partition.Hosted, int32, int32, error) {
	return s.leaderFor(ctx, k.encode())
}

// leaderFor is leader for the partition of a record key.
func (s *shareStore) leaderFor(ctx context.Context, key []byte) (*partition.Hosted, int32, int32, error) {
	t, err := s.topic(ctx)
	if err != nil {
		return nil, 0, -1, err
	}
	p := stateHash(key, int32(len(t.Partitions)))
	h, err := s.b.parts.Leader(t, p)
	if err != nil {
		if leader := t.Partitions[p].Leader; leader >= 0 && leader != s.b.cfg.Settings.NodeID {
			return nil, p, leader, nil
		}
		return nil, p, -1, err
	}
	return h, p, s.b.cfg.Settings.NodeID, nil
}

// load returns the latest state of k, and false when it has none.
func (s *shareStore) load(ctx context.Context, k shareKey) (queue.Snapshot, bool, error) {
	h, p, leader, err := s.leader(ctx, k)
	if err != nil {
		return queue.Snapshot{}, false, err
	}
	key := string(k.encode())
	var last []byte
	found := false
	fn := func(rk, rv []byte) error {
		if string(rk) == key {
			last, found = append(last[:0], rv...), rv != nil
		}
		return nil
	}
	if h != nil {
		err = replayLog(h, fn)
	} else {
		err = s.replayRemote(ctx, leader, p, fn)
	}
	if err != nil || !found {
		return queue.Snapshot{}, false, err
	}
	snap, err := queue.DecodeSnapshot(last)
	if err != nil {
		return queue.Snapshot{}, false, fmt.Errorf("%s: state of %s/%x/%d: %w", shareStateTopic, k.group, k.topicID[:], k.partition, err)
	}
	return snap, true, nil
}

// write appends k's new state and returns what waits for it to be
// durable. The caller appends under the share-partition's mutex (so the
// records are in the order of the changes) and waits without it. A
// state partition led by another node is written there with an acks=all
// Produce, durable when write returns.
func (s *shareStore) write(ctx context.Context, k shareKey, snap queue.Snapshot) (shareWait, error) {
	return s.writeValue(ctx, k, snap.Encode())
}

// remove deletes k's state (a tombstone), durably when it returns.
func (s *shareStore) remove(ctx context.Context, k shareKey) error {
	w, err := s.writeValue(ctx, k, nil)
	if err != nil {
		return err
	}
	return w.Wait(ctx)
}

func (s *shareStore) writeValue(ctx context.Context, k shareKey, value []byte) (shareWait, error) {
	return s.writeRecord(ctx, k.encode(), k.encode(), value)
}

// index records (or, with present false, forgets) that group has state
// for topic, durably when it returns.
func (s *shareStore) index(ctx context.Context, group string, topic controller.TopicID, present bool) error {
	var value []byte
	if present {
		value = []byte{1}
	}
	w, err := s.writeRecord(ctx, indexPrefix(group), indexKey(group, topic), value)
	if err != nil {
		return err
	}
	return w.Wait(ctx)
}

// indexed returns the topics group has state for.
func (s *shareStore) indexed(ctx context.Context, group string) ([]controller.TopicID, error) {
	prefix := indexPrefix(group)
	h, p, leader, err := s.leaderFor(ctx, prefix)
	if err != nil {
		return nil, err
	}
	present := map[controller.TopicID]bool{}
	fn := func(k, v []byte) error {
		if len(k) == len(prefix)+16 && string(k[:len(prefix)]) == string(prefix) {
			present[controller.TopicID(k[len(prefix):])] = v != nil
		}
		return nil
	}
	if h != nil {
		err = replayLog(h, fn)
	} else {
		err = s.replayRemote(ctx, leader, p, fn)
	}
	var out []controller.TopicID
	for id, ok := range present {
		if ok {
			out = append(out, id)
		}
	}
	return out, err
}

// writeRecord appends one record to the partition of placement.
func (s *shareStore) writeRecord(ctx context.Context, placement, key, value []byte) (shareWait, error) {
	h, p, leader, err := s.leaderFor(ctx, placement)
	if err != nil {
		return shareWait{}, err
	}
	batch, err := record.Build(record.BuildOptions{BaseTimestamp: s.b.clock.Now().UnixMilli()},
		[]record.Record{{Key: key, Value: value}})
	if err != nil {
		return shareWait{}, err
	}
	if h == nil {
		return shareWait{}, s.produceRemote(ctx, leader, p, batch)
	}
	res, err := h.Append(batch, -1)
	if err != nil {
		return shareWait{}, err
	}
	return shareWait{&offsetsPending{h, res.LastOffset, res.LeaderEpoch}}, nil
}

// shareWait waits for a state write; the zero value is durable already.
type shareWait struct{ p *offsetsPending }

func (w shareWait) Wait(ctx context.Context) error {
	if w.p == nil {
		return nil
	}
	return w.p.Wait(ctx)
}

// peerTimeout bounds one request to another node's state partition.
const peerTimeout = 10 * time.Second

// peer returns a connection to node, from the idle ones or new. Give it
// back with s.peers.Put.
func (s *shareStore) peer(ctx context.Context, node int32) (*peer.Conn, error) {
	br, ok := s.b.ctrl.Image().Brokers[node]
	if !ok {
		return nil, fmt.Errorf("%w: node %d is not registered", errShareStateElsewhere, node)
	}
	return s.peers.Get(ctx, net.JoinHostPort(br.Host, strconv.Itoa(int(br.Port))))
}

// produceRemote appends batch to partition p of the state topic on node,
// as an acks=all produce.
func (s *shareStore) produceRemote(ctx context.Context, node, p int32, batch []byte) error {
	c, err := s.peer(ctx, node)
	if err != nil {
		return err
	}
	req := kmsg.NewPtrProduceRequest()
	req.Version = 9
	req.Acks, req.TimeoutMillis = -1, int32(offsetsCommitTimeout.Milliseconds())
	rt := kmsg.NewProduceRequestTopic()
	rt.Topic = shareStateTopic
	rp := kmsg.NewProduceRequestTopicPartition()
	rp.Partition, rp.Records = p, batch
	rt.Partitions = append(rt.Partitions, rp)
	req.Topics = append(req.Topics, rt)
	kresp, err := c.Do(ctx, req, peerTimeout)
	s.peers.Put(c, err)
	if err != nil {
		return err
	}
	resp := kresp.(*kmsg.ProduceResponse)
	if len(resp.Topics) != 1 || len(resp.Topics[0].Partitions) != 1 {
		return fmt.Errorf("%w: produce answer without the partition", peer.ErrProtocol)
	}
	if err := kerr.ErrorForCode(resp.Topics[0].Partitions[0].ErrorCode); err != nil {
		return fmt.Errorf("write %s-%d on node %d: %w", shareStateTopic, p, node, err)
	}
	return nil
}

// replayRemote reads partition p of the state topic from node, its start
// to its high-water mark, and calls fn for each record.
func (s *shareStore) replayRemote(ctx context.Context, node, p int32, fn func(key, value []byte) error) error {
	c, err := s.peer(ctx, node)
	if err != nil {
		return err
	}
	offset := int64(0)
	for {
		req := kmsg.NewPtrFetchRequest()
		req.Version = 11
		req.ReplicaID, req.MaxWaitMillis, req.MinBytes, req.MaxBytes = -1, 0, 1, replayReadBytes
		ft := kmsg.NewFetchRequestTopic()
		ft.Topic = shareStateTopic
		fp := kmsg.NewFetchRequestTopicPartition()
		fp.Partition, fp.FetchOffset, fp.PartitionMaxBytes, fp.CurrentLeaderEpoch = p, offset, replayReadBytes, -1
		ft.Partitions = append(ft.Partitions, fp)
		req.Topics = append(req.Topics, ft)
		kresp, err := c.Do(ctx, req, peerTimeout)
		if err != nil {
			s.peers.Put(c, err)
			return err
		}
		resp := kresp.(*kmsg.FetchResponse)
		if len(resp.Topics) != 1 || len(resp.Topics[0].Partitions) != 1 {
			s.peers.Put(c, peer.ErrProtocol)
			return fmt.Errorf("%w: fetch answer without the partition", peer.ErrProtocol)
		}
		rp := resp.Topics[0].Partitions[0]
		if rp.ErrorCode == kerr.OffsetOutOfRange.Code && offset < rp.LogStartOffset {
			offset = rp.LogStartOffset
			continue
		}
		if err := kerr.ErrorForCode(rp.ErrorCode); err != nil {
			s.peers.Put(c, nil)
			return fmt.Errorf("read %s-%d on node %d: %w", shareStateTopic, p, node, err)
		}
		// The batches refer into the connection's buffer: parse them
		// before the next request.
		next, err := replayBatches(rp.RecordBatches, offset, fn)
		if err != nil {
			s.peers.Put(c, err)
			return err
		}
		if next <= offset || next >= rp.HighWatermark {
			s.peers.Put(c, nil)
			return nil
		}
		offset = next
	}
}

// replayLog calls fn for every record of a hosted partition's log, from
// its start to its end.
func replayLog(h *partition.Hosted, fn func(key, value []byte) error) error {
	l := h.Log()
	offset, end := l.StartOffset(), l.EndOffset()
	for offset < end {
		data, err := l.ReadBytes(offset, end, replayReadBytes)
		if err != nil {
			return err
		}
		if len(data) == 0 {
			break
		}
		next, err := replayBatches(data, offset, fn)
		if err != nil {
			return fmt.Errorf("%s: %w", h, err)
		}
		offset = next
	}
	return nil
}

// replayBatches calls fn for each record at or past offset in data (whole
// batches) and returns the offset after the last batch.
func replayBatches(data []byte, offset int64, fn func(key, value []byte) error) (int64, error) {
	for rest := data; len(rest) > 0; {
		batch, next, hdr, err := record.Next(rest)
		if err != nil {
			return offset, fmt.Errorf("at %d: %w", offset, err)
		}
		if batch == nil {
			break
		}
		if !hdr.Control() {
			err := record.Iterate(batch, 0, func(r *record.Record) error {
				if r.Offset(&hdr) < offset {
					return nil
				}
				return fn(r.Key, r.Value)
			})
			if err != nil {
				return offset, fmt.Errorf("at %d: %w", hdr.BaseOffset, err)
			}
		}
		offset = hdr.LastOffset() + 1
		rest = next
	}
	return offset, nil
}
