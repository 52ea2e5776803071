package admin

import (
	"reflect"
	"testing"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/mqproject/mq/lib/kafkaext"
)

func quorumResponse(code int16, voters, observers []kmsg.DescribeQuorumResponseTopicPartitionReplicaState) *kmsg.DescribeQuorumResponse {
	resp := kmsg.NewPtrDescribeQuorumResponse()
	rt := kmsg.NewDescribeQuorumResponseTopic()
	rt.Topic = quorumTopic
	rp := kmsg.NewDescribeQuorumResponseTopicPartition()
	rp.ErrorCode, rp.LeaderID, rp.LeaderEpoch, rp.HighWatermark = code, 2, 7, 50
	rp.CurrentVoters, rp.Observers = voters, observers
	rt.Partitions = append(rt.Partitions, rp)
	resp.Topics = append(resp.Topics, rt)
	return resp
}

func replicaState(id int32, end, fetch int64) kmsg.DescribeQuorumResponseTopicPartitionReplicaState {
	s := kmsg.NewDescribeQuorumResponseTopicPartitionReplicaState()
	s.ReplicaID, s.LogEndOffset, s.LastFetchTimestamp = id, end, fetch
	return s
}

func TestQuorumFromDescribeQuorum(t *testing.T) {
	resp := quorumResponse(0,
		[]kmsg.DescribeQuorumResponseTopicPartitionReplicaState{replicaState(3, 40, 1000), replicaState(2, 55, -1), replicaState(1, 55, 900)},
		[]kmsg.DescribeQuorumResponseTopicPartitionReplicaState{replicaState(5, -1, -1), replicaState(4, 60, 800)})
	q, msg := quorumFrom(resp)
	want := &QuorumDescription{Leader: 2, Epoch: 7, HighWatermark: 50, Members: []QuorumMember{
		{ID: 1, Voter: true, LogEndOffset: 55, Lag: 0, LastFetchMillis: 900, LastCaughtUpMillis: -1},
		{ID: 2, Voter: true, LogEndOffset: 55, Lag: 0, LastFetchMillis: -1, LastCaughtUpMillis: -1},
		{ID: 3, Voter: true, LogEndOffset: 40, Lag: 15, LastFetchMillis: 1000, LastCaughtUpMillis: -1},
		{ID: 4, LogEndOffset: 60, Lag: 0, LastFetchMillis: 800, LastCaughtUpMillis: -1}, // ahead of a stale answer: no negative lag
		{ID: 5, LogEndOffset: -1, Lag: -1, LastFetchMillis: -1, LastCaughtUpMillis: -1},
	}}
	if msg != "" || !reflect.DeepEqual(q, want) {
		t.Fatalf("got %+v %q\nwant %+v", q, msg, want)
	}
}

// TestQuorumUnavailableOnUnsupportedVersion: a broker that refuses
// DescribeQuorum with UNSUPPORTED_VERSION (at the top or for the metadata
// log) has no quorum to show, which is not an error of cluster describe.
func TestQuorumUnavailableOnUnsupportedVersion(t *testing.T) {
	top := kmsg.NewPtrDescribeQuorumResponse()
	top.ErrorCode = kerr.UnsupportedVersion.Code
	for name, resp := range map[string]*kmsg.DescribeQuorumResponse{
		"top level":    top,
		"metadata log": quorumResponse(kerr.UnsupportedVersion.Code, nil, nil),
	} {
		if q, msg := quorumFrom(resp); q != nil || msg != "unavailable" {
			t.Errorf("%s: %+v %q, want unavailable", name, q, msg)
		}
	}
	if q, msg := quorumFrom(quorumResponse(kerr.NotLeaderForPartition.Code, nil, nil)); q != nil || msg == "" || msg == "unavailable" {
		t.Errorf("another error: %+v %q, want its text", q, msg)
	}
	if q, msg := quorumFrom(kmsg.NewPtrDescribeQuorumResponse()); q != nil || msg == "" {
		t.Errorf("no partition: %+v %q", q, msg)
	}
}

func TestBrokerStateFromDescribeCluster(t *testing.T) {
	shutting := kmsg.NewDescribeClusterResponseBroker()
	if err := kafkaext.Set(&shutting.UnknownTags, kafkaext.DescribeClusterBroker, kafkaext.ClusterBroker{InControlledShutdown: true}); err != nil {
		t.Fatal(err)
	}
	fenced := kmsg.NewDescribeClusterResponseBroker()
	fenced.IsFenced = true
	for _, tc := range []struct {
		b    kmsg.DescribeClusterResponseBroker
		want string
	}{
		{kmsg.NewDescribeClusterResponseBroker(), BrokerAlive},
		{fenced, BrokerFenced},
		{shutting, BrokerShuttingDown},
	} {
		if got := brokerState(tc.b); got != tc.want {
			t.Errorf("%+v: %q, want %q", tc.b, got, tc.want)
		}
	}
}
