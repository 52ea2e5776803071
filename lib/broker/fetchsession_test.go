package broker

import (
	"context"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/mqproject/mq/lib/controller"
	"github.com/mqproject/mq/lib/record"
)

// followerID is the replica id the session tests fetch as.
const followerID = 2

// sessionFetch is a follower's Fetch v13 in session id at epoch, naming
// partition → fetch offset of topic, and forgetting the partitions listed.
func sessionFetch(topic controller.TopicID, id, epoch int32, maxWait int32, offsets map[int32]int64, forget ...int32) *kmsg.FetchRequest {
	req := kmsg.NewPtrFetchRequest()
	req.ReplicaID = followerID
	req.MaxWaitMillis = maxWait
	req.MinBytes = 1
	req.MaxBytes = 1 << 20
	req.SessionID, req.SessionEpoch = id, epoch
	if len(offsets) > 0 {
		rt := kmsg.NewFetchRequestTopic()
		rt.TopicID = topic
		for p := int32(0); p < 16; p++ { // in partition order
			off, ok := offsets[p]
			if !ok {
				continue
			}
			rp := kmsg.NewFetchRequestTopicPartition()
			rp.Partition, rp.FetchOffset, rp.PartitionMaxBytes = p, off, 1<<20
			rp.CurrentLeaderEpoch = -1
			rt.Partitions = append(rt.Partitions, rp)
		}
		req.Topics = append(req.Topics, rt)
	}
	if len(forget) > 0 {
		ft := kmsg.NewFetchRequestForgottenTopic()
		ft.TopicID = topic
		ft.Partitions = forget
		req.ForgottenTopics = append(req.ForgottenTopics, ft)
	}
	return req
}

// answered lists a response's partitions: partition → records length, or
// -1 for an error.
func answered(resp *kmsg.FetchResponse) map[int32]int {
	out := map[int32]int{}
	for _, t := range resp.Topics {
		for _, p := range t.Partitions {
			if p.ErrorCode != 0 {
				out[p.Partition] = -1
				continue
			}
			out[p.Partition] = len(p.RecordBatches)
		}
	}
	return out
}

func TestFetchSessionOfAFollower(t *testing.T) {
	tb := startBroker(t, "", nil)
	topic := tb.createTopic(t, "fs", 3, nil)
	for p := int32(0); p < 3; p++ {
		produce(t, tb, "fs", p, 1, testBatch(t, record.BuildOptions{}, "a", 1))
	}
	fetch := func(req *kmsg.FetchRequest) *kmsg.FetchResponse {
		t.Helper()
		return tb.do(t, 13, req).(*kmsg.FetchResponse)
	}

	// A full fetch at epoch 0 creates a session and answers every partition.
	resp := fetch(sessionFetch(topic, 0, 0, 0, map[int32]int64{0: 0, 1: 0, 2: 0}))
	if resp.ErrorCode != 0 || resp.SessionID == 0 {
		t.Fatalf("full fetch: error %v session %d", kerr.ErrorForCode(resp.ErrorCode), resp.SessionID)
	}
	id := resp.SessionID
	if got := answered(resp); len(got) != 3 || got[0] <= 0 || got[1] <= 0 || got[2] <= 0 {
		t.Fatalf("full fetch answered %v, want all three with records", got)
	}

	// Epoch 1 names the new fetch offsets. The records were fetched and
	// the high-water marks told: nothing new, so after the wait the answer
	// holds no partition.
	start := time.Now()
	resp = fetch(sessionFetch(topic, id, 1, 100, map[int32]int64{0: 1, 1: 1, 2: 1}))
	if resp.ErrorCode != 0 || resp.SessionID != id || len(resp.Topics) != 0 {
		t.Fatalf("epoch 1: error %v session %d topics %+v, want an empty answer in session %d",
			kerr.ErrorForCode(resp.ErrorCode), resp.SessionID, resp.Topics, id)
	}
	if waited := time.Since(start); waited < 90*time.Millisecond {
		t.Fatalf("epoch 1 answered after %v, want the long-poll of 100ms", waited)
	}

	// Epoch 2 names nothing; a produce to partition 1 wakes the long-poll,
	// which waits on every partition of the session, and only partition 1
	// is answered.
	done := make(chan *kmsg.FetchResponse, 1)
	go func() { done <- fetch(sessionFetch(topic, id, 2, 10_000, nil)) }()
	produce(t, tb, "fs", 1, 1, testBatch(t, record.BuildOptions{}, "b", 1))
	select {
	case resp = <-done:
	case <-time.After(5 * time.Second):
		t.Fatal("the produce did not wake the session's long-poll")
	}
	if got := answered(resp); len(got) != 1 || got[1] <= 0 {
		t.Fatalf("epoch 2 answered %v, want partition 1 with records", got)
	}

	// Epoch 3 forgets partition 0 and moves partition 2 back to offset 0:
	// partition 2 is answered with its records again, partition 0 is gone.
	resp = fetch(sessionFetch(topic, id, 3, 0, map[int32]int64{1: 2, 2: 0}, 0))
	if got := answered(resp); len(got) != 1 || got[2] <= 0 {
		t.Fatalf("epoch 3 answered %v, want partition 2 with records", got)
	}
	s := tb.sessions.get(id)
	s.mu.Lock()
	parts := len(s.parts)
	s.mu.Unlock()
	if parts != 2 {
		t.Fatalf("session holds %d partitions after forgetting one, want 2", parts)
	}
	// A produce to the forgotten partition 0 does not end the next wait.
	produce(t, tb, "fs", 0, 1, testBatch(t, record.BuildOptions{}, "c", 1))
	resp = fetch(sessionFetch(topic, id, 4, 50, map[int32]int64{2: 1}))
	if len(resp.Topics) != 0 {
		t.Fatalf("epoch 4 answered %+v, want nothing: partition 0 was forgotten", resp.Topics)
	}

	// A wrong epoch is refused and leaves the session as it was.
	resp = fetch(sessionFetch(topic, id, 4, 0, nil))
	if resp.ErrorCode != kerr.InvalidFetchSessionEpoch.Code {
		t.Fatalf("epoch 4 again: %v, want INVALID_FETCH_SESSION_EPOCH", kerr.ErrorForCode(resp.ErrorCode))
	}
	resp = fetch(sessionFetch(topic, id, 5, 0, nil))
	if resp.ErrorCode != 0 || resp.SessionID != id {
		t.Fatalf("epoch 5: error %v session %d", kerr.ErrorForCode(resp.ErrorCode), resp.SessionID)
	}

	// The final epoch closes the session with a full, sessionless answer.
	resp = fetch(sessionFetch(topic, id, -1, 0, map[int32]int64{0: 0}))
	if resp.ErrorCode != 0 || resp.SessionID != 0 || answered(resp)[0] <= 0 {
		t.Fatalf("final epoch: error %v session %d answered %v", kerr.ErrorForCode(resp.ErrorCode), resp.SessionID, answered(resp))
	}
	if resp = fetch(sessionFetch(topic, id, 6, 0, nil)); resp.ErrorCode != kerr.FetchSessionIDNotFound.Code {
		t.Fatalf("after close: %v, want FETCH_SESSION_ID_NOT_FOUND", kerr.ErrorForCode(resp.ErrorCode))
	}
}

func TestFetchSessionRefusals(t *testing.T) {
	tb := startBroker(t, "", nil)
	topic := tb.createTopic(t, "fr", 1, nil)
	resp := tb.do(t, 13, sessionFetch(topic, 0, 0, 0, map[int32]int64{0: 0})).(*kmsg.FetchResponse)
	if resp.SessionID == 0 {
		t.Fatal("no session created")
	}
	id := resp.SessionID
	for _, tc := range []struct {
		name    string
		version int16
		req     func() *kmsg.FetchRequest
		want    *kerr.Error
	}{
		{"unknown id", 13, func() *kmsg.FetchRequest { return sessionFetch(topic, id+1, 1, 0, nil) }, kerr.FetchSessionIDNotFound},
		{"id 0 with an epoch", 13, func() *kmsg.FetchRequest { return sessionFetch(topic, 0, 1, 0, nil) }, kerr.FetchSessionIDNotFound},
		{"another replica", 13, func() *kmsg.FetchRequest {
			req := sessionFetch(topic, id, 1, 0, nil)
			req.ReplicaID = followerID + 1
			return req
		}, kerr.FetchSessionIDNotFound},
		{"epoch ahead", 13, func() *kmsg.FetchRequest { return sessionFetch(topic, id, 2, 0, nil) }, kerr.InvalidFetchSessionEpoch},
		{"epoch below -1", 13, func() *kmsg.FetchRequest { return sessionFetch(topic, id, -2, 0, nil) }, kerr.InvalidFetchSessionEpoch},
		{"topic names in an ID session", 12, func() *kmsg.FetchRequest { return sessionFetch(topic, id, 1, 0, nil) }, kerr.FetchSessionTopicIDError},
		{"a consumer naming the session", 13, func() *kmsg.FetchRequest {
			req := sessionFetch(topic, id, 1, 0, nil)
			req.ReplicaID = -1
			return req
		}, kerr.FetchSessionIDNotFound},
	} {
		t.Run(tc.name, func(t *testing.T) {
			resp := tb.do(t, tc.version, tc.req()).(*kmsg.FetchResponse)
			if resp.ErrorCode != tc.want.Code {
				t.Fatalf("%v, want %v", kerr.ErrorForCode(resp.ErrorCode), tc.want)
			}
		})
	}
	// None of the refusals used the session's epoch 1.
	if resp := tb.do(t, 13, sessionFetch(topic, id, 1, 0, nil)).(*kmsg.FetchResponse); resp.ErrorCode != 0 {
		t.Fatalf("epoch 1 after the refusals: %v", kerr.ErrorForCode(resp.ErrorCode))
	}
}

// A consumer asking for a session gets a full answer and none, and the
// leader keeps no session for it.
func TestFetchSessionDeclinedForConsumers(t *testing.T) {
	tb := startBroker(t, "", nil)
	topic := tb.createTopic(t, "fc", 1, nil)
	req := sessionFetch(topic, 0, 0, 0, map[int32]int64{0: 0})
	req.ReplicaID = -1
	resp := tb.do(t, 13, req).(*kmsg.FetchResponse)
	if resp.ErrorCode != 0 || resp.SessionID != 0 || len(resp.Topics) != 1 {
		t.Fatalf("consumer full fetch: error %v session %d topics %d", kerr.ErrorForCode(resp.ErrorCode), resp.SessionID, len(resp.Topics))
	}
	if n := tb.sessions.size(); n != 0 {
		t.Fatalf("%d sessions after a consumer's fetch, want 0", n)
	}
}

// A connection's new full fetch replaces its session; sessions of a
// closed connection go when its replica makes a new one.
func TestFetchSessionReplacedOnANewFullFetch(t *testing.T) {
	tb := startBroker(t, "", nil)
	topic := tb.createTopic(t, "fn", 1, nil)
	full := func(ctx context.Context) int32 {
		t.Helper()
		resp := tb.doCtx(t, ctx, 13, sessionFetch(topic, 0, 0, 0, map[int32]int64{0: 0})).(*kmsg.FetchResponse)
		if resp.SessionID == 0 {
			t.Fatal("no session created")
		}
		return resp.SessionID
	}
	conn1, close1 := context.WithCancel(context.Background())
	first := full(conn1)
	second := full(conn1)
	if first == second || tb.sessions.get(first) != nil || tb.sessions.size() != 1 {
		t.Fatalf("sessions %d then %d, %d held: want the first replaced", first, second, tb.sessions.size())
	}
	close1()
	third := full(context.Background())
	if tb.sessions.get(second) != nil || tb.sessions.get(third) == nil || tb.sessions.size() != 1 {
		t.Fatalf("after the connection closed: %d sessions held, want only the new one", tb.sessions.size())
	}
}
