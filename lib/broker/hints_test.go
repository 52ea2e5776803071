package broker

import (
	"reflect"
	"testing"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/mqproject/mq/lib/controller"
	"github.com/mqproject/mq/lib/record"
	"github.com/mqproject/mq/lib/replica"
)

// TestFetchEncodingCarriesLeaderHints checks the hand-written encoding of
// the KIP-951 fields against kmsg's decoder for every advertised version:
// CurrentLeader from v12, NodeEndpoints from v16.
func TestFetchEncodingCarriesLeaderHints(t *testing.T) {
	rack := "r1"
	endpoints := []controller.Broker{
		{ID: 2, Host: "broker-two.example", Port: 9093, Rack: &rack},
		{ID: 3, Host: "b3", Port: 19094},
	}
	b := &Broker{}
	fetchAPI := b.dataAPIs()[kmsg.Fetch.Int16()]
	for v := fetchAPI.min; v <= fetchAPI.max; v++ {
		f := &fetch{version: v, endpoints: endpoints, topics: []fetchTopic{
			{name: "alpha", id: [16]byte{1}, parts: []fetchPartition{
				{partition: 0, highWatermark: -1, logStartOffset: -1, err: replica.ErrNotLeader,
					currentLeader: leaderHint{set: true, leader: 2, epoch: 7}},
				{partition: 1, highWatermark: 4, logStartOffset: 0},
				{partition: 2, highWatermark: -1, logStartOffset: -1, err: replica.ErrFencedLeaderEpoch,
					currentLeader: leaderHint{set: true, leader: 3, epoch: 300}},
			}},
		}}
		got := kmsg.NewPtrFetchResponse()
		got.Version = v
		if err := got.ReadFrom(partsBytes(t, f.response().Parts)); err != nil {
			t.Fatalf("v%d: kmsg cannot decode: %v", v, err)
		}
		parts := got.Topics[0].Partitions
		wantLeaders := [][2]int32{{-1, -1}, {-1, -1}, {-1, -1}}
		if v >= 12 {
			wantLeaders = [][2]int32{{2, 7}, {-1, -1}, {3, 300}}
		}
		wantCodes := []int16{kerr.NotLeaderForPartition.Code, 0, kerr.FencedLeaderEpoch.Code}
		for i, p := range parts {
			if l := [2]int32{p.CurrentLeader.LeaderID, p.CurrentLeader.LeaderEpoch}; l != wantLeaders[i] || p.ErrorCode != wantCodes[i] {
				t.Errorf("v%d partition %d: %v current leader %v, want %v %v", v, i, kerr.ErrorForCode(p.ErrorCode), l, kerr.ErrorForCode(wantCodes[i]), wantLeaders[i])
			}
		}
		var wantBrokers []kmsg.FetchResponseBroker
		if v >= 16 {
			wantBrokers = []kmsg.FetchResponseBroker{
				{NodeID: 2, Host: "broker-two.example", Port: 9093, Rack: &rack},
				{NodeID: 3, Host: "b3", Port: 19094},
			}
		}
		if !reflect.DeepEqual(got.Brokers, wantBrokers) {
			t.Errorf("v%d: node endpoints %+v, want %+v", v, got.Brokers, wantBrokers)
		}
	}
}

// TestNotLeaderAnswersNameTheCurrentLeader: Produce and Fetch answers for
// a partition another broker leads, or for an old leader epoch, carry the
// leader and its endpoint (KIP-951), and older versions do not.
func TestNotLeaderAnswersNameTheCurrentLeader(t *testing.T) {
	tb := startBroker(t, "", nil)
	rack := "rack-2"
	tb.registerPeer(t, 2, 9093, &rack)
	led := tb.createAssigned(t, "led", []int32{1, 2})
	follower := tb.createAssigned(t, "follower", []int32{2, 1})
	elsewhere := tb.createAssigned(t, "elsewhere", []int32{2})
	tb.moveLeader(t, "follower", 0, 2, []int32{2, 1}, 4)
	peer := kmsg.ProduceResponseBroker{NodeID: 2, Host: "127.0.0.1", Port: 9093, Rack: &rack}

	t.Run("produce", func(t *testing.T) {
		for _, tt := range []struct {
			topic       string
			version     int16
			wantLeader  [2]int32
			wantBrokers []kmsg.ProduceResponseBroker
		}{
			{"follower", 11, [2]int32{2, 4}, []kmsg.ProduceResponseBroker{peer}},
			{"follower", 10, [2]int32{2, 4}, []kmsg.ProduceResponseBroker{peer}},
			{"elsewhere", 11, [2]int32{2, 0}, []kmsg.ProduceResponseBroker{peer}},
			{"follower", 9, [2]int32{-1, -1}, nil},
		} {
			resp := tb.do(t, tt.version, produceRequest(tt.topic, 0, 1, testBatch(t, record.BuildOptions{}, "x", 1))).(*kmsg.ProduceResponse)
			p := resp.Topics[0].Partitions[0]
			if p.ErrorCode != kerr.NotLeaderForPartition.Code {
				t.Fatalf("%s v%d: %v, want NOT_LEADER_OR_FOLLOWER", tt.topic, tt.version, kerr.ErrorForCode(p.ErrorCode))
			}
			if l := [2]int32{p.CurrentLeader.LeaderID, p.CurrentLeader.LeaderEpoch}; l != tt.wantLeader {
				t.Errorf("%s v%d: current leader %v, want %v", tt.topic, tt.version, l, tt.wantLeader)
			}
			if !reflect.DeepEqual(resp.Brokers, tt.wantBrokers) {
				t.Errorf("%s v%d: brokers %+v, want %+v", tt.topic, tt.version, resp.Brokers, tt.wantBrokers)
			}
		}
		// A successful produce names no one.
		resp := tb.do(t, 11, produceRequest("led", 0, 1, testBatch(t, record.BuildOptions{}, "x", 1))).(*kmsg.ProduceResponse)
		if p := resp.Topics[0].Partitions[0]; p.ErrorCode != 0 || p.CurrentLeader.LeaderID != -1 || resp.Brokers != nil {
			t.Errorf("produce to the leader: %v, current leader %+v, brokers %+v", kerr.ErrorForCode(p.ErrorCode), p.CurrentLeader, resp.Brokers)
		}
	})

	t.Run("fetch", func(t *testing.T) {
		ledEpoch := tb.parts.Lookup("led", 0).LeaderEpoch()
		fencedReq := func() *kmsg.FetchRequest {
			req := fetchRequest("led", led, 0, 0, 0)
			req.Topics[0].Partitions[0].CurrentLeaderEpoch = ledEpoch - 1
			return req
		}
		if ledEpoch == 0 {
			// ISR {1}: the HW reaches the new epoch's start at once (a leader whose
			// HW is behind it answers consumers OFFSET_NOT_AVAILABLE).
			tb.moveLeader(t, "led", 0, 1, []int32{1}, 1)
			ledEpoch = 1
		}
		toSelf := kmsg.FetchResponseBroker{NodeID: 1, Host: "127.0.0.1", Port: 9092}
		toPeer := kmsg.FetchResponseBroker{NodeID: 2, Host: "127.0.0.1", Port: 9093, Rack: &rack}
		for _, tt := range []struct {
			name        string
			version     int16
			req         *kmsg.FetchRequest
			wantCode    *kerr.Error
			wantLeader  [2]int32
			wantBrokers []kmsg.FetchResponseBroker
		}{
			// A follower serves consumers from version 11 (KIP-392); older
			// ones, which have no hints, need the leader.
			{"follower v18: served", 18, fetchRequest("follower", follower, 0, 0, 0), nil, [2]int32{-1, -1}, nil},
			{"follower v10: leader only", 10, fetchRequest("follower", follower, 0, 0, 0), kerr.NotLeaderForPartition, [2]int32{-1, -1}, nil},
			{"not hosted", 17, fetchRequest("elsewhere", elsewhere, 0, 0, 0), kerr.NotLeaderForPartition, [2]int32{2, 0}, []kmsg.FetchResponseBroker{toPeer}},
			{"not hosted v16", 16, fetchRequest("elsewhere", elsewhere, 0, 0, 0), kerr.NotLeaderForPartition, [2]int32{2, 0}, []kmsg.FetchResponseBroker{toPeer}},
			{"not hosted v15: no endpoints yet", 15, fetchRequest("elsewhere", elsewhere, 0, 0, 0), kerr.NotLeaderForPartition, [2]int32{2, 0}, nil},
			{"not hosted v12, by name", 12, fetchRequest("elsewhere", elsewhere, 0, 0, 0), kerr.NotLeaderForPartition, [2]int32{2, 0}, nil},
			{"not hosted v11: not flexible", 11, fetchRequest("elsewhere", elsewhere, 0, 0, 0), kerr.NotLeaderForPartition, [2]int32{-1, -1}, nil},
			{"old epoch", 17, fencedReq(), kerr.FencedLeaderEpoch, [2]int32{1, ledEpoch}, []kmsg.FetchResponseBroker{toSelf}},
			{"no error", 17, fetchRequest("led", led, 0, 0, 0), nil, [2]int32{-1, -1}, nil},
		} {
			resp := tb.do(t, tt.version, tt.req).(*kmsg.FetchResponse)
			p := resp.Topics[0].Partitions[0]
			wantCode := int16(0)
			if tt.wantCode != nil {
				wantCode = tt.wantCode.Code
			}
			if p.ErrorCode != wantCode {
				t.Fatalf("%s: %v, want %v", tt.name, kerr.ErrorForCode(p.ErrorCode), kerr.ErrorForCode(wantCode))
			}
			if l := [2]int32{p.CurrentLeader.LeaderID, p.CurrentLeader.LeaderEpoch}; l != tt.wantLeader {
				t.Errorf("%s: current leader %v, want %v", tt.name, l, tt.wantLeader)
			}
			if !reflect.DeepEqual(resp.Brokers, tt.wantBrokers) {
				t.Errorf("%s: brokers %+v, want %+v", tt.name, resp.Brokers, tt.wantBrokers)
			}
		}
	})
}
