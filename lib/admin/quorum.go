package admin

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"io"
	"slices"
	"strings"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/mqproject/mq/lib/client"
	"github.com/mqproject/mq/lib/kafkaext"
)

// Broker states in cluster describe.
const (
	BrokerAlive        = "alive"
	BrokerFenced       = "fenced"        // stopped heartbeating: leads nothing, serves nothing
	BrokerShuttingDown = "shutting down" // moving its leaderships away before it stops
	BrokerUnreachable  = "unreachable"   // counted alive by the controller, but it does not answer
)

// QuorumDescription is the controller quorum in cluster describe, as
// DescribeQuorum (KIP-595, KIP-836) tells it.
type QuorumDescription struct {
	Leader        int32 `json:"leader"` // the active controller, -1: none
	Epoch         int32 `json:"epoch"`  // the leader's term
	HighWatermark int64 `json:"high_watermark"`
	// Members are the voters, then the non-voters (brokers that hold the
	// image without voting), each by id.
	Members []QuorumMember `json:"members"`
}

// QuorumMember is one node of the controller quorum.
type QuorumMember struct {
	ID           int32 `json:"id"`
	Voter        bool  `json:"voter"`
	LogEndOffset int64 `json:"log_end_offset"` // -1: unknown
	// Lag is how far its log is behind the leader's: the leader's log end
	// offset less its own; -1 when either is unknown.
	Lag int64 `json:"lag"`
	// LastFetchMillis and LastCaughtUpMillis are when it last fetched
	// from the leader and was last caught up with it (Unix ms, the
	// leader's clock); -1: unknown.
	LastFetchMillis    int64 `json:"last_fetch_ms"`
	LastCaughtUpMillis int64 `json:"last_caught_up_ms"`
}

// quorumTopic is the metadata log DescribeQuorum asks about (Kafka's).
const quorumTopic = "__cluster_metadata"

// quorumUnavailable is what cluster describe says of a quorum the
// brokers do not describe (a broker without DescribeQuorum).
const quorumUnavailable = "unavailable"

// quorumWait bounds how long describeQuorum waits: a node without a
// quorum looks for an active controller for longer (10 s) before it
// answers NOT_CONTROLLER.
const quorumWait = 5 * time.Second

// describeQuorum asks broker via, which asks its controller, to describe
// the quorum. A broker that answers UNSUPPORTED_VERSION gives (nil,
// "unavailable"); another failure (nil, its text). noQuorum is set when
// there is no active controller: the answer is NOT_CONTROLLER, or none
// came within quorumWait.
func (a *Admin) describeQuorum(ctx context.Context, via int32) (q *QuorumDescription, failure string, noQuorum bool) {
	ctx, wait, cancel := boundedWait(ctx, quorumWait)
	defer cancel()
	req := kmsg.NewPtrDescribeQuorumRequest()
	rt := kmsg.NewDescribeQuorumRequestTopic()
	rt.Topic = quorumTopic
	rp := kmsg.NewDescribeQuorumRequestTopicPartition()
	rt.Partitions = append(rt.Partitions, rp)
	req.Topics = append(req.Topics, rt)
	resp, err := req.RequestWith(ctx, a.cl.Broker(int(via)))
	if errors.Is(err, context.DeadlineExceeded) {
		return nil, fmt.Sprintf("no active controller answered within %s (asked through broker %d)", wait, via), true
	}
	if err != nil {
		return nil, brokerErrText(err, wait), false
	}
	q, failure = quorumFrom(resp)
	return q, failure, q == nil && strings.HasPrefix(failure, kerr.NotController.Message)
}

// quorumFrom reads a DescribeQuorum answer.
func quorumFrom(resp *kmsg.DescribeQuorumResponse) (*QuorumDescription, string) {
	failed := func(code int16, msg *string) (*QuorumDescription, string) {
		err := kerr.ErrorForCode(code)
		if errors.Is(err, kerr.UnsupportedVersion) {
			return nil, quorumUnavailable
		}
		m := ""
		if msg != nil {
			m = *msg
		}
		return nil, errText(err, m)
	}
	if resp.ErrorCode != 0 {
		return failed(resp.ErrorCode, resp.ErrorMessage)
	}
	if len(resp.Topics) != 1 || len(resp.Topics[0].Partitions) != 1 {
		return nil, "no answer for the metadata log"
	}
	p := resp.Topics[0].Partitions[0]
	if p.ErrorCode != 0 {
		return failed(p.ErrorCode, p.ErrorMessage)
	}
	q := &QuorumDescription{Leader: p.LeaderID, Epoch: p.LeaderEpoch, HighWatermark: p.HighWatermark, Members: []QuorumMember{}}
	leaderEnd := int64(-1)
	for _, v := range p.CurrentVoters {
		if v.ReplicaID == p.LeaderID {
			leaderEnd = v.LogEndOffset
		}
	}
	add := func(states []kmsg.DescribeQuorumResponseTopicPartitionReplicaState, voter bool) {
		start := len(q.Members)
		for _, s := range states {
			m := QuorumMember{ID: s.ReplicaID, Voter: voter, LogEndOffset: s.LogEndOffset, Lag: -1,
				LastFetchMillis: s.LastFetchTimestamp, LastCaughtUpMillis: s.LastCaughtUpTimestamp}
			if leaderEnd >= 0 && s.LogEndOffset >= 0 {
				m.Lag = max(leaderEnd-s.LogEndOffset, 0)
			}
			q.Members = append(q.Members, m)
		}
		slices.SortFunc(q.Members[start:], func(x, y QuorumMember) int { return cmp.Compare(x.ID, y.ID) })
	}
	add(p.CurrentVoters, true)
	add(p.Observers, false)
	return q, ""
}

// quorumTable writes the quorum part of cluster describe's table.
func (d ClusterDescription) quorumTable(w io.Writer) error {
	if d.Quorum == nil {
		_, err := io.WriteString(w, "quorum: "+d.QuorumError+"\n")
		return err
	}
	q := d.Quorum
	leader := "none"
	if q.Leader >= 0 {
		leader = itoa(q.Leader)
	}
	if err := client.WriteTable(w, nil, [][]string{{"QUORUM-LEADER", leader}, {"QUORUM-EPOCH", itoa(q.Epoch)}}); err != nil {
		return err
	}
	if _, err := io.WriteString(w, "\n"); err != nil {
		return err
	}
	rows := make([][]string, len(q.Members))
	for i, m := range q.Members {
		role := "non-voter"
		switch {
		case m.ID == q.Leader:
			role = "leader"
		case m.Voter:
			role = "voter"
		}
		lag := "?"
		if m.Lag >= 0 {
			lag = itoa(m.Lag)
		}
		rows[i] = []string{itoa(m.ID), role, offset(m.LogEndOffset), lag, d.ago(m.LastFetchMillis)}
	}
	return client.WriteTable(w, []string{"NODE", "ROLE", "LOG-END", "LAG", "LAST-FETCH"}, rows)
}

// ago is a Unix-ms time as the table shows it: "1.2s ago", "-" unknown.
func (d ClusterDescription) ago(ms int64) string {
	if ms < 0 || d.now.IsZero() {
		return "-"
	}
	return FormatLagTime(max(d.now.Sub(time.UnixMilli(ms)), 0)) + " ago"
}

// brokerState is a broker's state from DescribeCluster: fenced (v2
// IsFenced), shutting down (mq's kafkaext.ClusterBroker field), or alive.
func brokerState(b kmsg.DescribeClusterResponseBroker) string {
	if b.IsFenced {
		return BrokerFenced
	}
	var ext kafkaext.ClusterBroker
	if ok, err := kafkaext.Get(&b.UnknownTags, kafkaext.DescribeClusterBroker, &ext); ok && err == nil && ext.InControlledShutdown {
		return BrokerShuttingDown
	}
	return BrokerAlive
}
