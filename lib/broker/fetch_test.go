package broker

import (
	"bytes"
	"context"
	"errors"
	"os"
	"path/filepath"
	"reflect"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/mqproject/mq/lib/clock"
	"github.com/mqproject/mq/lib/log"
	"github.com/mqproject/mq/lib/record"
	"github.com/mqproject/mq/lib/replica"
)

// TestFetchEncodingDecodesWithKmsg checks the hand-written Fetch response
// encoder against kmsg's decoder for every advertised version.
func TestFetchEncodingDecodesWithKmsg(t *testing.T) {
	batch1 := testBatch(t, record.BuildOptions{}, "one", 3)
	batch2 := testBatch(t, record.BuildOptions{}, "two", 2)
	file, err := os.Create(filepath.Join(t.TempDir(), "segment"))
	if err != nil {
		t.Fatal(err)
	}
	defer file.Close()
	junk := []byte("junk before the batches")
	for _, b := range [][]byte{junk, batch1, batch2} {
		if _, err := file.Write(b); err != nil {
			t.Fatal(err)
		}
	}
	pos1 := int64(len(junk))
	pos2 := pos1 + int64(len(batch1))
	topicID := [16]byte{1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 16}

	b := &Broker{}
	fetchAPI := b.dataAPIs()[kmsg.Fetch.Int16()]
	for v := fetchAPI.min; v <= fetchAPI.max; v++ {
		f := &fetch{version: v, topics: []fetchTopic{
			{name: "alpha", id: topicID, parts: []fetchPartition{
				{partition: 0, highWatermark: 5, lastStableOffset: 5, logStartOffset: 0, region: log.RegionOf(file, pos1, int64(len(batch1)), 0, 2)},
				{partition: 1, highWatermark: 9, lastStableOffset: 9, logStartOffset: 2}, // no records
				{partition: 2, highWatermark: -1, lastStableOffset: -1, logStartOffset: -1, err: log.ErrOffsetOutOfRange},
				{partition: 4, highWatermark: 8, lastStableOffset: 8, logStartOffset: 0, remote: batch2}, // read from the remote store
				{partition: 5, highWatermark: 8, lastStableOffset: -1, logStartOffset: 0, err: errMovedToTieredStorage},
			}},
			{name: "beta", id: [16]byte{9}, parts: []fetchPartition{
				{partition: 3, highWatermark: 7, lastStableOffset: 7, logStartOffset: 1, region: log.RegionOf(file, pos2, int64(len(batch2)), 3, 4)},
			}},
			{name: "gamma", parts: nil},
		}}
		resp := f.response()
		if resp.Flexible != (v >= 12) {
			t.Fatalf("v%d: Flexible %v", v, resp.Flexible)
		}
		got := kmsg.NewPtrFetchResponse()
		got.Version = v
		if err := got.ReadFrom(partsBytes(t, resp.Parts)); err != nil {
			t.Fatalf("v%d: kmsg cannot decode: %v", v, err)
		}

		want := kmsg.NewPtrFetchResponse()
		want.Version = v
		part := func(p int32, code int16, hw, start int64, recs []byte) kmsg.FetchResponseTopicPartition {
			fp := kmsg.NewFetchResponseTopicPartition()
			fp.Partition, fp.ErrorCode, fp.HighWatermark, fp.LastStableOffset = p, code, hw, hw
			if code != 0 {
				fp.LastStableOffset = -1 // an error's, as Kafka answers it
			}
			if v >= 5 {
				fp.LogStartOffset = start
			}
			fp.RecordBatches = recs
			return fp
		}
		topic := func(name string, id [16]byte, parts ...kmsg.FetchResponseTopicPartition) kmsg.FetchResponseTopic {
			ft := kmsg.NewFetchResponseTopic()
			if v >= 13 {
				ft.TopicID = id
			} else {
				ft.Topic = name
			}
			ft.Partitions = parts
			return ft
		}
		want.Topics = []kmsg.FetchResponseTopic{
			topic("alpha", topicID,
				part(0, 0, 5, 0, batch1),
				part(1, 0, 9, 2, []byte{}),
				part(2, kerr.OffsetOutOfRange.Code, -1, -1, []byte{}),
				part(4, 0, 8, 0, batch2),
				part(5, kerr.OffsetMovedToTieredStorage.Code, 8, 0, []byte{})),
			topic("beta", [16]byte{9}, part(3, 0, 7, 1, batch2)),
			topic("gamma", [16]byte{}),
		}
		normalizeFetch(got)
		normalizeFetch(want)
		if !reflect.DeepEqual(got, want) {
			t.Fatalf("v%d: decoded\n%+v\nwant\n%+v", v, got, want)
		}
	}
}

// normalizeFetch makes empty and nil slices compare equal.
func normalizeFetch(r *kmsg.FetchResponse) {
	for i := range r.Topics {
		if len(r.Topics[i].Partitions) == 0 {
			r.Topics[i].Partitions = nil
		}
		for j := range r.Topics[i].Partitions {
			p := &r.Topics[i].Partitions[j]
			if len(p.RecordBatches) == 0 {
				p.RecordBatches = nil
			}
			if len(p.AbortedTransactions) == 0 {
				p.AbortedTransactions = nil
			}
		}
	}
}

func fetchRequest(topic string, id [16]byte, partition int32, offset int64, maxWait int32) *kmsg.FetchRequest {
	req := kmsg.NewPtrFetchRequest()
	req.MaxWaitMillis = maxWait
	req.MinBytes = 1
	req.MaxBytes = 1 << 20
	req.SessionEpoch = -1
	rt := kmsg.NewFetchRequestTopic()
	rt.Topic, rt.TopicID = topic, id
	rp := kmsg.NewFetchRequestTopicPartition()
	rp.Partition = partition
	rp.FetchOffset = offset
	rp.PartitionMaxBytes = 1 << 20
	rt.Partitions = append(rt.Partitions, rp)
	req.Topics = append(req.Topics, rt)
	return req
}

func fetchOne(t *testing.T, tb *testBroker, version int16, req *kmsg.FetchRequest) kmsg.FetchResponseTopicPartition {
	t.Helper()
	resp := tb.do(t, version, req).(*kmsg.FetchResponse)
	if resp.ErrorCode != 0 {
		t.Fatalf("fetch: top-level %v", kerr.ErrorForCode(resp.ErrorCode))
	}
	return resp.Topics[0].Partitions[0]
}

// recordValues decodes the values of every record in batches.
func recordValues(t *testing.T, batches []byte) []string {
	t.Helper()
	var out []string
	for len(batches) > 0 {
		b, rest, _, err := record.Next(batches)
		if err != nil {
			t.Fatal(err)
		}
		if err := record.Iterate(b, 1<<20, func(r *record.Record) error {
			out = append(out, string(r.Value))
			return nil
		}); err != nil {
			t.Fatal(err)
		}
		batches = rest
	}
	return out
}

func TestFetchReturnsProducedRecords(t *testing.T) {
	tb := startBroker(t, "", nil)
	id := tb.createTopic(t, "f", 1, nil)
	produce(t, tb, "f", 0, 1, testBatch(t, record.BuildOptions{}, "a", 2))
	produce(t, tb, "f", 0, 1, testBatch(t, record.BuildOptions{}, "b", 1))
	for _, v := range []int16{4, 11, 12, 13, 16} {
		got := fetchOne(t, tb, v, fetchRequest("f", id, 0, 1, 0))
		if got.ErrorCode != 0 || got.HighWatermark != 3 || got.LastStableOffset != 3 {
			t.Fatalf("v%d: %v hw %d lso %d", v, kerr.ErrorForCode(got.ErrorCode), got.HighWatermark, got.LastStableOffset)
		}
		// The batch holding offset 1 comes whole, from its first record.
		values := recordValues(t, got.RecordBatches)
		if want := []string{"a-0", "a-1", "b-0"}; !reflect.DeepEqual(values, want) {
			t.Fatalf("v%d: values %q, want %q", v, values, want)
		}
	}
}

func TestFetchErrors(t *testing.T) {
	tb := startBroker(t, "", nil)
	id := tb.createTopic(t, "e", 1, nil)
	produce(t, tb, "e", 0, 1, testBatch(t, record.BuildOptions{}, "a", 2))
	tests := []struct {
		name    string
		version int16
		req     *kmsg.FetchRequest
		want    int16
	}{
		{"offset past end", 11, fetchRequest("e", id, 0, 3, 0), kerr.OffsetOutOfRange.Code},
		{"unknown topic", 11, fetchRequest("zz", id, 0, 0, 0), kerr.UnknownTopicOrPartition.Code},
		{"unknown partition", 11, fetchRequest("e", id, 4, 0, 0), kerr.UnknownTopicOrPartition.Code},
		{"unknown topic id", 13, fetchRequest("", [16]byte{7}, 0, 0, 0), kerr.UnknownTopicID.Code},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := fetchOne(t, tb, tt.version, tt.req); got.ErrorCode != tt.want {
				t.Fatalf("%v, want %v", kerr.ErrorForCode(got.ErrorCode), kerr.ErrorForCode(tt.want))
			}
		})
	}
	t.Run("not leader", func(t *testing.T) {
		tb2 := startBroker(t, "", nil)
		id2 := tb2.createTopic(t, "moved", 1, nil)
		h := tb2.parts.Lookup("moved", 0)
		if err := h.Become(replica.PartitionState{Leader: 2, LeaderEpoch: h.LeaderEpoch() + 1, PartitionEpoch: h.State().PartitionEpoch, Replicas: []int32{1, 2}, ISR: []int32{2}}); err != nil {
			t.Fatal(err)
		}
		if got := fetchOne(t, tb2, 10, fetchRequest("moved", id2, 0, 0, 0)); got.ErrorCode != kerr.NotLeaderForPartition.Code {
			t.Fatalf("v10: %v, want NOT_LEADER_OR_FOLLOWER", kerr.ErrorForCode(got.ErrorCode))
		}
		if got := fetchOne(t, tb2, 12, fetchRequest("moved", id2, 0, 0, 0)); got.ErrorCode != 0 {
			t.Fatalf("v12, which a follower serves (KIP-392): %v", kerr.ErrorForCode(got.ErrorCode))
		}
		if got := produce(t, tb2, "moved", 0, 1, testBatch(t, record.BuildOptions{}, "x", 1)); got.ErrorCode != kerr.NotLeaderForPartition.Code {
			t.Fatalf("produce: %v, want NOT_LEADER_OR_FOLLOWER", kerr.ErrorForCode(got.ErrorCode))
		}
	})
	t.Run("fenced leader epoch", func(t *testing.T) {
		h := tb.parts.Lookup("e", 0)
		req := fetchRequest("e", id, 0, 0, 0)
		req.Topics[0].Partitions[0].CurrentLeaderEpoch = h.LeaderEpoch() + 1
		if got := fetchOne(t, tb, 12, req); got.ErrorCode != kerr.UnknownLeaderEpoch.Code {
			t.Fatalf("%v, want UNKNOWN_LEADER_EPOCH", kerr.ErrorForCode(got.ErrorCode))
		}
	})
}

// Sessions by topic name (Fetch v7–v12) work as by topic ID.
func TestFetchSessionByTopicName(t *testing.T) {
	tb := startBroker(t, "", nil)
	id := tb.createTopic(t, "s", 1, nil)
	produce(t, tb, "s", 0, 1, testBatch(t, record.BuildOptions{}, "a", 1))
	req := fetchRequest("s", id, 0, 0, 0)
	req.SessionEpoch = 0
	resp := tb.do(t, 12, req).(*kmsg.FetchResponse)
	if resp.ErrorCode != 0 || resp.SessionID == 0 || len(resp.Topics) != 1 {
		t.Fatalf("new-session fetch: error %v session %d topics %d", kerr.ErrorForCode(resp.ErrorCode), resp.SessionID, len(resp.Topics))
	}
	session := resp.SessionID
	req = fetchRequest("s", id, 0, 1, 0)
	req.SessionID, req.SessionEpoch = session, 1
	if resp = tb.do(t, 12, req).(*kmsg.FetchResponse); resp.ErrorCode != 0 || len(resp.Topics) != 0 {
		t.Fatalf("incremental fetch at the log end: error %v topics %+v, want an empty answer", kerr.ErrorForCode(resp.ErrorCode), resp.Topics)
	}
	req = fetchRequest("s", id, 0, 0, 0)
	req.SessionID, req.SessionEpoch = session+1, 1
	if resp = tb.do(t, 12, req).(*kmsg.FetchResponse); resp.ErrorCode != kerr.FetchSessionIDNotFound.Code {
		t.Fatalf("incremental fetch of an unknown session: %v, want FETCH_SESSION_ID_NOT_FOUND", kerr.ErrorForCode(resp.ErrorCode))
	}
}

func TestFetchLongPollWokenByProduce(t *testing.T) {
	tb := startBroker(t, "", nil)
	id := tb.createTopic(t, "lp", 1, nil)
	done := make(chan kmsg.FetchResponseTopicPartition, 1)
	start := time.Now()
	go func() { done <- fetchOne(t, tb, 12, fetchRequest("lp", id, 0, 0, 10_000)) }()
	time.Sleep(20 * time.Millisecond) // let the fetch start waiting; not needed for correctness
	produce(t, tb, "lp", 0, 1, testBatch(t, record.BuildOptions{}, "wake", 1))
	select {
	case got := <-done:
		if values := recordValues(t, got.RecordBatches); !reflect.DeepEqual(values, []string{"wake-0"}) {
			t.Fatalf("woken fetch returned %q", values)
		}
		if time.Since(start) > 5*time.Second {
			t.Fatalf("fetch took %v: not woken by the produce", time.Since(start))
		}
	case <-time.After(9 * time.Second):
		t.Fatal("fetch not woken by a produce")
	}
}

func TestFetchAtHighWatermarkWaitsThenReturnsEmpty(t *testing.T) {
	clk := clock.NewManual(time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC))
	tb := startBrokerOn(t, "", nil, nil, clk)
	id := tb.createTopic(t, "idle", 2, nil)
	produce(t, tb, "idle", 0, 1, testBatch(t, record.BuildOptions{}, "a", 1))
	req := fetchRequest("idle", id, 0, 1, 100)
	// Two partitions: the wait watches both.
	p1 := kmsg.NewFetchRequestTopicPartition()
	p1.Partition, p1.FetchOffset, p1.PartitionMaxBytes = 1, 0, 1<<20
	req.Topics[0].Partitions = append(req.Topics[0].Partitions, p1)
	waiting := clk.Pending()
	answer := make(chan *kmsg.FetchResponse, 1)
	go func() { answer <- tb.do(t, 12, req).(*kmsg.FetchResponse) }()
	waitUntil(t, "the fetch waits on the broker's clock", func() bool { return clk.Pending() > waiting })
	clk.Advance(99 * time.Millisecond)
	select {
	case <-answer:
		t.Fatal("fetch at the high-water mark answered before max.wait.ms passed")
	default:
	}
	clk.Advance(time.Millisecond)
	resp := <-answer
	for _, p := range resp.Topics[0].Partitions {
		if p.ErrorCode != 0 || len(p.RecordBatches) != 0 {
			t.Fatalf("partition %d: %v with %d bytes, want empty", p.Partition, kerr.ErrorForCode(p.ErrorCode), len(p.RecordBatches))
		}
	}
}

func TestFetchContextCancelEndsWait(t *testing.T) {
	tb := startBroker(t, "", nil)
	id := tb.createTopic(t, "c", 1, nil)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() {
		tb.doCtx(t, ctx, 12, fetchRequest("c", id, 0, 0, 60_000))
		close(done)
	}()
	cancel()
	select {
	case <-done:
	case <-time.After(10 * time.Second):
		t.Fatal("fetch wait did not end with its connection")
	}
}

func TestFetchMaxBytes(t *testing.T) {
	tb := startBroker(t, "", nil)
	id := tb.createTopic(t, "mb", 2, nil)
	big := testBatch(t, record.BuildOptions{}, string(bytes.Repeat([]byte("x"), 500)), 2)
	for range 3 {
		produce(t, tb, "mb", 0, 1, big)
		produce(t, tb, "mb", 1, 1, big)
	}
	req := fetchRequest("mb", id, 0, 0, 0)
	p1 := kmsg.NewFetchRequestTopicPartition()
	p1.Partition, p1.PartitionMaxBytes = 1, 1<<20
	req.Topics[0].Partitions = append(req.Topics[0].Partitions, p1)

	// MaxBytes smaller than one batch: the first batch of the first
	// partition still comes whole (KIP-74), the second partition nothing.
	req.MaxBytes = 10
	resp := tb.do(t, 12, req).(*kmsg.FetchResponse)
	p0, p1r := resp.Topics[0].Partitions[0], resp.Topics[0].Partitions[1]
	if len(p0.RecordBatches) != len(big) || len(p1r.RecordBatches) != 0 {
		t.Fatalf("MaxBytes 10: %d and %d bytes, want %d and 0", len(p0.RecordBatches), len(p1r.RecordBatches), len(big))
	}
	if p1r.HighWatermark != 6 {
		t.Fatalf("partition skipped for size reports high-water mark %d, want 6", p1r.HighWatermark)
	}
	// Room for two batches in all: two from partition 0 and none from 1.
	req.MaxBytes = int32(2*len(big) + 10)
	resp = tb.do(t, 12, req).(*kmsg.FetchResponse)
	p0, p1r = resp.Topics[0].Partitions[0], resp.Topics[0].Partitions[1]
	if len(p0.RecordBatches) != 2*len(big) || len(p1r.RecordBatches) != 0 {
		t.Fatalf("MaxBytes for 2 batches: %d and %d bytes", len(p0.RecordBatches), len(p1r.RecordBatches))
	}
	// PartitionMaxBytes limits each partition.
	req.MaxBytes = 1 << 20
	req.Topics[0].Partitions[0].PartitionMaxBytes = int32(len(big))
	req.Topics[0].Partitions[1].PartitionMaxBytes = int32(len(big))
	resp = tb.do(t, 12, req).(*kmsg.FetchResponse)
	p0, p1r = resp.Topics[0].Partitions[0], resp.Topics[0].Partitions[1]
	if len(p0.RecordBatches) != len(big) || len(p1r.RecordBatches) != len(big) {
		t.Fatalf("PartitionMaxBytes one batch: %d and %d bytes", len(p0.RecordBatches), len(p1r.RecordBatches))
	}
}

func TestFollowerFetchRecordsPosition(t *testing.T) {
	tb := startBroker(t, "", nil)
	id := tb.createTopic(t, "rep", 1, nil)
	h := tb.parts.Lookup("rep", 0)
	if err := h.Become(replica.PartitionState{Leader: 1, LeaderEpoch: h.LeaderEpoch(), PartitionEpoch: h.State().PartitionEpoch, Replicas: []int32{1, 2}, ISR: []int32{1, 2}}); err != nil {
		t.Fatal(err)
	}
	produce(t, tb, "rep", 0, 1, testBatch(t, record.BuildOptions{}, "r", 3))
	if hw := h.HighWatermark(); hw != 0 {
		t.Fatalf("high-water mark %d before the follower fetched, want 0", hw)
	}
	// A consumer sees nothing yet; the follower reads above the HW.
	if got := fetchOne(t, tb, 12, fetchRequest("rep", id, 0, 0, 0)); len(got.RecordBatches) != 0 {
		t.Fatalf("consumer read above the high-water mark")
	}
	req := fetchRequest("rep", id, 0, 0, 0)
	req.ReplicaID = 2
	if got := fetchOne(t, tb, 12, req); len(recordValues(t, got.RecordBatches)) != 3 {
		t.Fatalf("follower fetch got %d bytes", len(got.RecordBatches))
	}
	req = fetchRequest("", id, 0, 3, 0)
	req.ReplicaState.ID = 2
	fetchOne(t, tb, 15, req)
	if got := h.FollowerOffset(2); got != 3 {
		t.Fatalf("follower offset %d, want 3", got)
	}
	if hw := h.HighWatermark(); hw != 3 {
		t.Fatalf("high-water mark %d after the follower caught up, want 3", hw)
	}
}

func TestFetchErrorMapping(t *testing.T) {
	for _, tt := range []struct {
		err  error
		want int16
	}{
		{nil, 0},
		{log.ErrOffsetOutOfRange, kerr.OffsetOutOfRange.Code},
		{replica.ErrNotLeader, kerr.NotLeaderForPartition.Code},
		{replica.ErrFencedLeaderEpoch, kerr.FencedLeaderEpoch.Code},
		{errUnknownTopicID, kerr.UnknownTopicID.Code},
		{&log.DamagedError{Offset: 7, Damage: log.Damage{From: 5, To: 9}}, kerr.InvalidRecord.Code},
		{errors.New("disk on fire"), kerr.KafkaStorageError.Code},
	} {
		if got := fetchError(tt.err); got != tt.want {
			t.Errorf("fetchError(%v) = %d, want %d", tt.err, got, tt.want)
		}
	}
}

// TestFetchAsANonReplicaIsRefused: a client that fetches with a replica
// id that is not a follower of the partition (no such broker, or this
// leader's own id) gets NOT_LEADER_OR_FOLLOWER and no records, from
// above the high-water mark or below it, and the high-water mark stays
// where the real follower left it.
func TestFetchAsANonReplicaIsRefused(t *testing.T) {
	tb := startBroker(t, "", nil)
	id := tb.createFollowedTopic(t, "imp", 1, nil, 2)
	h := tb.parts.Lookup("imp", 0)
	produce(t, tb, "imp", 0, 1, testBatch(t, record.BuildOptions{}, "r", 3))
	hw := h.HighWatermark()
	for _, replica := range []int32{999, 1, 3} {
		for _, version := range []int16{12, 15} {
			req := fetchRequest("imp", id, 0, 0, 0)
			if version >= 15 {
				req.ReplicaState.ID = replica
			} else {
				req.ReplicaID = replica
			}
			got := fetchOne(t, tb, version, req)
			if got.ErrorCode != kerr.NotLeaderForPartition.Code || len(got.RecordBatches) != 0 {
				t.Fatalf("fetch v%d as replica %d: %v with %d bytes, want NOT_LEADER_OR_FOLLOWER and nothing",
					version, replica, kerr.ErrorForCode(got.ErrorCode), len(got.RecordBatches))
			}
		}
	}
	if got := h.HighWatermark(); got != hw {
		t.Fatalf("high-water mark moved from %d to %d by fetches of non-replicas", hw, got)
	}
	// The replica itself is served.
	req := fetchRequest("imp", id, 0, 0, 0)
	req.ReplicaID = 2
	if got := fetchOne(t, tb, 12, req); got.ErrorCode != 0 || len(got.RecordBatches) == 0 {
		t.Fatalf("fetch as the follower: %v with %d bytes", kerr.ErrorForCode(got.ErrorCode), len(got.RecordBatches))
	}
}

// TestFetchWithAStaleBrokerEpochIsRefused: a follower's Fetch v15 carries
// its broker epoch (KIP-903); one older than the image's registration of
// that broker (a process from before its latest registration) is
// refused STALE_BROKER_EPOCH and reads nothing. The current epoch, none
// (-1), or one newer than this node's image knows are served.
func TestFetchWithAStaleBrokerEpochIsRefused(t *testing.T) {
	tb := startBroker(t, "", nil)
	id := tb.createFollowedTopic(t, "kip903", 1, nil, 2)
	produce(t, tb, "kip903", 0, 1, testBatch(t, record.BuildOptions{}, "r", 3))
	current := tb.ctrl.Image().Brokers[2].Epoch
	for _, tc := range []struct {
		epoch int64
		want  *kerr.Error
	}{
		{current - 1, kerr.StaleBrokerEpoch},
		{current, nil},
		{-1, nil},
		{current + 10, nil},
	} {
		req := fetchRequest("", id, 0, 0, 0)
		req.ReplicaState.ID, req.ReplicaState.Epoch = 2, tc.epoch
		resp := tb.do(t, 15, req).(*kmsg.FetchResponse)
		switch {
		case tc.want != nil:
			if resp.ErrorCode != tc.want.Code || len(resp.Topics) != 0 {
				t.Fatalf("epoch %d (current %d): %v with %d topics, want %v", tc.epoch, current, kerr.ErrorForCode(resp.ErrorCode), len(resp.Topics), tc.want)
			}
		case resp.ErrorCode != 0 || len(resp.Topics) != 1 || len(resp.Topics[0].Partitions[0].RecordBatches) == 0:
			t.Fatalf("epoch %d (current %d): %v, want the records", tc.epoch, current, kerr.ErrorForCode(resp.ErrorCode))
		}
	}
}

// TestReadCommittedFetchEncodingDecodesWithKmsg checks a read_committed
// answer (a last stable offset below the high-water mark, the aborted
// transactions) against kmsg's decoder for every version that has them.
func TestReadCommittedFetchEncodingDecodesWithKmsg(t *testing.T) {
	batch := testBatch(t, record.BuildOptions{}, "one", 3)
	file, err := os.Create(filepath.Join(t.TempDir(), "segment"))
	if err != nil {
		t.Fatal(err)
	}
	defer file.Close()
	if _, err := file.Write(batch); err != nil {
		t.Fatal(err)
	}
	aborted := []log.AbortedTxn{{ProducerID: 11, FirstOffset: 0, LastOffset: 9}, {ProducerID: 12, FirstOffset: 2, LastOffset: 3}}
	b := &Broker{}
	fetchAPI := b.dataAPIs()[kmsg.Fetch.Int16()]
	for v := max(fetchAPI.min, 4); v <= fetchAPI.max; v++ {
		f := &fetch{version: v, committed: true, topics: []fetchTopic{
			{name: "alpha", id: [16]byte{1}, parts: []fetchPartition{
				{partition: 0, highWatermark: 20, lastStableOffset: 3, logStartOffset: 0, aborted: aborted,
					region: log.RegionOf(file, 0, int64(len(batch)), 0, 2)},
				{partition: 1, highWatermark: 9, lastStableOffset: 9, logStartOffset: 2}, // nothing aborted
				{partition: 2, highWatermark: -1, lastStableOffset: -1, logStartOffset: -1, err: log.ErrOffsetOutOfRange},
			}},
		}}
		resp := f.response()
		got := kmsg.NewPtrFetchResponse()
		got.Version = v
		if err := got.ReadFrom(partsBytes(t, resp.Parts)); err != nil {
			t.Fatalf("v%d: kmsg cannot decode: %v", v, err)
		}
		ps := got.Topics[0].Partitions
		if len(ps) != 3 {
			t.Fatalf("v%d: %d partitions", v, len(ps))
		}
		p0 := ps[0]
		if p0.HighWatermark != 20 || p0.LastStableOffset != 3 || !bytes.Equal(p0.RecordBatches, batch) {
			t.Fatalf("v%d: partition 0 %+v", v, p0)
		}
		if len(p0.AbortedTransactions) != 2 || p0.AbortedTransactions[0].ProducerID != 11 || p0.AbortedTransactions[0].FirstOffset != 0 ||
			p0.AbortedTransactions[1].ProducerID != 12 || p0.AbortedTransactions[1].FirstOffset != 2 {
			t.Fatalf("v%d: aborted %+v", v, p0.AbortedTransactions)
		}
		if ps[1].AbortedTransactions == nil || len(ps[1].AbortedTransactions) != 0 || ps[1].LastStableOffset != 9 {
			t.Fatalf("v%d: partition 1 %+v: want an empty, not null, aborted list", v, ps[1])
		}
		if ps[2].ErrorCode != kerr.OffsetOutOfRange.Code || ps[2].LastStableOffset != -1 {
			t.Fatalf("v%d: partition 2 %+v", v, ps[2])
		}
	}
}
