package peer

import (
	"context"
	"encoding/binary"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/mqproject/mq/lib/replica"
)

// TestFetchAsksAtMostEachPartitionsMaxBytes: a partition whose query
// sets MaxBytes (a throttled follower's allowance) is asked for no more
// than that, the others for replica.fetch.max.bytes, and MaxBytes never
// raises the configured limit.
func TestFetchAsksAtMostEachPartitionsMaxBytes(t *testing.T) {
	asked := make(chan map[int32]int32, 1)
	addr := fakeBroker(t, func(corr int32, body []byte) []byte {
		// Request header v2: api key, version, correlation id,
		// client id (int16 length), tagged fields (none: one byte).
		n := int(int16(binary.BigEndian.Uint16(body[8:10])))
		req := kmsg.NewPtrFetchRequest()
		req.Version = followerFetchVersion
		if err := req.ReadFrom(body[10+max(n, 0)+1:]); err != nil {
			t.Errorf("decode fetch: %v", err)
		}
		got := map[int32]int32{}
		for _, tp := range req.Topics {
			for _, p := range tp.Partitions {
				got[p.Partition] = p.PartitionMaxBytes
			}
		}
		asked <- got
		resp := kmsg.NewPtrFetchResponse()
		resp.Version = followerFetchVersion
		// Response header v1: correlation id, tagged fields.
		return resp.AppendTo(append(binary.BigEndian.AppendUint32(nil, uint32(corr)), 0))
	})
	l := NewLeader(LeaderConfig{NodeID: 1, Addr: addr, MaxWait: time.Millisecond, MaxBytes: 10 << 20, PartitionMaxBytes: 1 << 20})
	defer l.Close()
	id := [16]byte{1}
	qs := []replica.FetchQuery{
		{Key: replica.Key{Topic: "t", TopicID: id, Partition: 0}},
		{Key: replica.Key{Topic: "t", TopicID: id, Partition: 1}, MaxBytes: 5000},
		{Key: replica.Key{Topic: "t", TopicID: id, Partition: 2}, MaxBytes: 2 << 20},
	}
	if _, err := l.Fetch(context.Background(), qs, 0); err != nil {
		t.Fatal(err)
	}
	got := <-asked
	want := map[int32]int32{0: 1 << 20, 1: 5000, 2: 1 << 20}
	for p, w := range want {
		if got[p] != w {
			t.Errorf("partition %d asked for %d bytes, want %d (all: %v)", p, got[p], w, got)
		}
	}
}

// TestFetchCarriesTheBrokerEpoch: once the follower knows its broker
// epoch, its Fetch is v15 with ReplicaState (KIP-903) naming it and its
// epoch; before, v13 with the replica id alone.
func TestFetchCarriesTheBrokerEpoch(t *testing.T) {
	type sent struct {
		version   int16
		replica   int32
		id, epoch int64
	}
	asked := make(chan sent, 1)
	addr := fakeBroker(t, func(corr int32, body []byte) []byte {
		version := int16(binary.BigEndian.Uint16(body[2:4]))
		n := int(int16(binary.BigEndian.Uint16(body[8:10])))
		req := kmsg.NewPtrFetchRequest()
		req.Version = version
		if err := req.ReadFrom(body[10+max(n, 0)+1:]); err != nil {
			t.Errorf("decode fetch v%d: %v", version, err)
		}
		asked <- sent{version, req.ReplicaID, int64(req.ReplicaState.ID), req.ReplicaState.Epoch}
		resp := kmsg.NewPtrFetchResponse()
		resp.Version = version
		return resp.AppendTo(append(binary.BigEndian.AppendUint32(nil, uint32(corr)), 0))
	})
	var epoch int64
	l := NewLeader(LeaderConfig{NodeID: 3, Addr: addr, MaxWait: time.Millisecond, MaxBytes: 1 << 20, PartitionMaxBytes: 1 << 20,
		BrokerEpoch: func() int64 { return epoch }})
	defer l.Close()
	qs := []replica.FetchQuery{{Key: replica.Key{Topic: "t", TopicID: [16]byte{1}, Partition: 0}}}
	if _, err := l.Fetch(context.Background(), qs, 0); err != nil {
		t.Fatal(err)
	}
	if got := <-asked; got.version != followerFetchVersion || got.replica != 3 {
		t.Fatalf("before registering: %+v, want v%d as replica 3", got, followerFetchVersion)
	}
	epoch = 42
	if _, err := l.Fetch(context.Background(), qs, 0); err != nil {
		t.Fatal(err)
	}
	if got := <-asked; got.version != followerEpochFetchVersion || got.id != 3 || got.epoch != 42 {
		t.Fatalf("registered at epoch 42: %+v, want v%d with replica 3 at epoch 42", got, followerEpochFetchVersion)
	}
}
