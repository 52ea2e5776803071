package broker

import (
	"context"
	"slices"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/mqproject/mq/lib/clock"
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

// highWatermark is the high-water mark a response answers partition p
// with, -2 when it does not answer p.
func highWatermark(resp *kmsg.FetchResponse, p int32) int64 {
	for _, t := range resp.Topics {
		for _, rp := range t.Partitions {
			if rp.Partition == p {
				return rp.HighWatermark
			}
		}
	}
	return -2
}

func TestFetchSessionOfAFollower(t *testing.T) {
	tb := startBroker(t, "", nil)
	topic := tb.createFollowedTopic(t, "fs", 3, nil, followerID)
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

	// Caught up, the follower joins the ISR at the leader's next check
	// (the leader's ticker, in its own time). Once it has joined partition
	// 1's, that partition's high-water mark moves only with the follower's
	// fetch offset, so that the answers below are the same whenever the
	// other partitions' ISRs change.
	tb.waitFor(t, "the follower in partition 1's ISR", func() bool {
		return slices.Contains(tb.parts.Lookup("fs", 1).State().ISR, followerID)
	})

	// Epoch 2 names nothing; a produce to partition 1 wakes the long-poll,
	// which waits on every partition of the session, and only partition 1
	// is answered, with the high-water mark the follower's offset 1 gives.
	done := make(chan *kmsg.FetchResponse, 1)
	go func() { done <- fetch(sessionFetch(topic, id, 2, 10_000, nil)) }()
	produce(t, tb, "fs", 1, 1, testBatch(t, record.BuildOptions{}, "b", 1))
	select {
	case resp = <-done:
	case <-time.After(5 * time.Second):
		t.Fatal("the produce did not wake the session's long-poll")
	}
	if got := answered(resp); len(got) != 1 || got[1] <= 0 || highWatermark(resp, 1) != 1 {
		t.Fatalf("epoch 2 answered %v, high-water mark %d, want partition 1 with records and 1", got, highWatermark(resp, 1))
	}

	// Epoch 3 forgets partition 0 and moves partition 2 back to offset 0:
	// partition 2 is answered with its records again, partition 0 is gone.
	// Partition 1's fetch offset 2 moves its high-water mark to 2, which
	// the answer tells without records.
	resp = fetch(sessionFetch(topic, id, 3, 0, map[int32]int64{1: 2, 2: 0}, 0))
	if got := answered(resp); len(got) != 2 || got[2] <= 0 || got[1] != 0 || highWatermark(resp, 1) != 2 {
		t.Fatalf("epoch 3 answered %v, partition 1's high-water mark %d, want partition 2 with records and partition 1 without, at 2",
			got, highWatermark(resp, 1))
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
	topic := tb.createFollowedTopic(t, "fr", 1, nil, followerID)
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

// A consumer's session works as a follower's, and neither can use the
// other's.
func TestFetchSessionOfAConsumer(t *testing.T) {
	tb := startBroker(t, "", nil)
	topic := tb.createTopic(t, "fc", 2, nil)
	produce(t, tb, "fc", 0, 1, testBatch(t, record.BuildOptions{}, "a", 1))
	consumerFetch := func(id, epoch int32, offsets map[int32]int64) *kmsg.FetchResponse {
		t.Helper()
		req := sessionFetch(topic, id, epoch, 0, offsets)
		req.ReplicaID = -1
		return tb.do(t, 13, req).(*kmsg.FetchResponse)
	}
	resp := consumerFetch(0, 0, map[int32]int64{0: 0, 1: 0})
	if resp.ErrorCode != 0 || resp.SessionID == 0 {
		t.Fatalf("consumer full fetch: error %v session %d", kerr.ErrorForCode(resp.ErrorCode), resp.SessionID)
	}
	id := resp.SessionID
	if got := answered(resp); len(got) != 2 || got[0] <= 0 {
		t.Fatalf("full fetch answered %v, want both partitions, 0 with records", got)
	}
	// Partition 0's new offset is all the request names; a produce to
	// partition 1 is what the answer holds.
	produce(t, tb, "fc", 1, 1, testBatch(t, record.BuildOptions{}, "b", 1))
	if got := answered(consumerFetch(id, 1, map[int32]int64{0: 1})); len(got) != 1 || got[1] <= 0 {
		t.Fatalf("epoch 1 answered %v, want partition 1 with records", got)
	}
	if resp := tb.do(t, 13, sessionFetch(topic, id, 2, 0, nil)).(*kmsg.FetchResponse); resp.ErrorCode != kerr.FetchSessionIDNotFound.Code {
		t.Fatalf("a follower naming the consumer's session: %v, want FETCH_SESSION_ID_NOT_FOUND", kerr.ErrorForCode(resp.ErrorCode))
	}
	if resp := consumerFetch(id, 2, map[int32]int64{1: 1}); resp.ErrorCode != 0 || len(resp.Topics) != 0 {
		t.Fatalf("epoch 2: error %v topics %+v, want an empty answer", kerr.ErrorForCode(resp.ErrorCode), resp.Topics)
	}
	if n := tb.sessions.consumers.full.Load(); n != 1 {
		t.Fatalf("%d consumer sessions created, want 1", n)
	}
}

// When the response's bytes run out, a session's next fetch starts after
// the last partition answered with records, so that every partition has
// its turn; read from the same partition each time, the later ones of a
// busy session would starve.
func TestFetchSessionReadsRoundTheSession(t *testing.T) {
	tb := startBroker(t, "", nil)
	topic := tb.createTopic(t, "fround", 3, nil)
	for p := int32(0); p < 3; p++ {
		produce(t, tb, "fround", p, 1, testBatch(t, record.BuildOptions{}, "a", 1))
	}
	fetch := func(id, epoch int32, offsets map[int32]int64) *kmsg.FetchResponse {
		t.Helper()
		req := sessionFetch(topic, id, epoch, 0, offsets)
		req.ReplicaID = -1
		req.MaxBytes = 1 // room for one partition's first batch (KIP-74)
		resp := tb.do(t, 13, req).(*kmsg.FetchResponse)
		if resp.ErrorCode != 0 {
			t.Fatalf("epoch %d: %v", epoch, kerr.ErrorForCode(resp.ErrorCode))
		}
		return resp
	}
	resp := fetch(0, 0, map[int32]int64{0: 0, 1: 0, 2: 0})
	id := resp.SessionID
	var order []int32
	if got := answered(resp); got[0] > 0 && got[1] == 0 && got[2] == 0 {
		order = append(order, 0)
	} else {
		t.Fatalf("full fetch answered %v, want records of partition 0 only", got)
	}
	// No offset moves: every partition still has its batch to give.
	for epoch := int32(1); epoch <= 3; epoch++ {
		got := answered(fetch(id, epoch, nil))
		if len(got) != 1 {
			t.Fatalf("epoch %d answered %v, want one partition with records", epoch, got)
		}
		for p := range got {
			order = append(order, p)
		}
	}
	if want := []int32{0, 1, 2, 0}; !slices.Equal(order, want) {
		t.Fatalf("partitions answered in turn %v, want %v", order, want)
	}
}

// The session cache's bounds: consumers beyond them are declined rather
// than evicting each other, an idle or smaller session makes room, and a
// follower always gets one, at a consumer's expense first.
func TestFetchSessionCacheBounds(t *testing.T) {
	c := newFetchSessions()
	c.maxSessions, c.maxParts = 3, 10
	now := time.Unix(1000, 0)
	create := func(replica int32, parts int, at time.Duration) *fetchSession {
		t.Helper()
		conn, cancel := context.WithCancel(context.Background()) // a connection each
		t.Cleanup(cancel)
		s := c.create(replica, conn, true, parts, now.Add(at))
		if s != nil {
			s.mu.Lock()
			s.update(sessionFetch(controller.TopicID{1}, 0, 0, 0, partitionsUpTo(parts)), 13)
			s.mu.Unlock()
		}
		return s
	}
	held := func(want ...*fetchSession) {
		t.Helper()
		parts := 0
		for _, s := range want {
			if c.get(s.id) != s {
				t.Fatalf("session %d (replica %d, %d partitions) not held", s.id, s.replica, len(s.parts))
			}
			parts += len(s.parts)
		}
		if c.size() != len(want) || c.parts.Load() != int64(parts) {
			t.Fatalf("%d sessions of %d partitions held, want %d of %d", c.size(), c.parts.Load(), len(want), parts)
		}
	}
	a := create(-1, 2, 0)
	b := create(-1, 2, time.Second)
	f := create(followerID, 2, 2*time.Second)
	held(a, b, f)
	if s := create(-1, 2, 3*time.Second); s != nil {
		t.Fatal("a consumer's session evicted a fresh one as large")
	}
	// A larger one evicts the least recently used smaller consumer session.
	d := create(-1, 3, 4*time.Second)
	held(b, f, d)
	// Idle for two minutes, b goes for a smaller one.
	e := create(-1, 1, time.Second+sessionEvictionIdle)
	held(f, d, e)
	// Too many partitions together (2+3+1 held, 8 more): smaller consumer
	// sessions go, the least recently used first, not the follower's.
	g := create(-1, 8, 5*time.Second+sessionEvictionIdle)
	held(f, g)
	// A follower evicts consumers first, then followers.
	h := create(followerID+1, 3, 6*time.Second+sessionEvictionIdle)
	held(f, h)
	i := create(followerID+2, 1, 7*time.Second+sessionEvictionIdle)
	held(f, h, i)
	j := create(followerID+3, 1, 8*time.Second+sessionEvictionIdle)
	held(h, i, j)
	if s := create(-1, 1, 9*time.Second+sessionEvictionIdle); s != nil {
		t.Fatal("a consumer's session evicted a follower's")
	}
	// A closed connection's sessions go at the next creation.
	closed, cancel := context.WithCancel(context.Background())
	c.remove(j.id)
	k := c.create(-1, closed, true, 0, now)
	cancel()
	held(h, i, k)
	l := create(-1, 1, 10*time.Second+sessionEvictionIdle)
	held(h, i, l)
}

// partitionsUpTo is partition → offset 0 for partitions 0 … n-1.
func partitionsUpTo(n int) map[int32]int64 {
	m := map[int32]int64{}
	for p := range int32(n) {
		m[p] = 0
	}
	return m
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

// A consumer's session skips the partitions with nothing new since its
// last read, and reads again each one whose offset, leader epoch or data
// changed; what no Changed channel tells (a log start moved by
// DeleteRecords) is found by the whole read due each sessionRescan.
func TestFetchSessionSkipsUnchangedPartitions(t *testing.T) {
	clk := clock.NewManual(time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC))
	tb := startBrokerOn(t, "", nil, nil, clk)
	topic := tb.createTopic(t, "fskip", 3, nil)
	for p := int32(0); p < 3; p++ {
		produce(t, tb, "fskip", p, 1, testBatch(t, record.BuildOptions{}, "a", 1))
	}
	counts := &tb.sessions.consumers
	epoch := int32(0)
	var id int32
	// fetch sends the session's next request; it returns what it answered
	// and how many partitions its reads skipped.
	fetch := func(offsets map[int32]int64, mod func(*kmsg.FetchRequest)) (map[int32]int, int64) {
		t.Helper()
		req := sessionFetch(topic, id, epoch, 0, offsets)
		req.ReplicaID = -1
		if mod != nil {
			mod(req)
		}
		before := counts.skipped.Load()
		resp := tb.do(t, 13, req).(*kmsg.FetchResponse)
		if resp.ErrorCode != 0 {
			t.Fatalf("epoch %d: %v", epoch, kerr.ErrorForCode(resp.ErrorCode))
		}
		id, epoch = resp.SessionID, epoch+1
		return answered(resp), counts.skipped.Load() - before
	}
	if got, _ := fetch(map[int32]int64{0: 0, 1: 0, 2: 0}, nil); len(got) != 3 {
		t.Fatalf("full fetch answered %v", got)
	}
	// At the log end: read once, then skipped while nothing changes.
	if got, skipped := fetch(map[int32]int64{0: 1, 1: 1, 2: 1}, nil); len(got) != 0 || skipped != 0 {
		t.Fatalf("at the log end: answered %v, skipped %d; want nothing, every partition read", got, skipped)
	}
	if got, skipped := fetch(nil, nil); len(got) != 0 || skipped != 3 {
		t.Fatalf("nothing changed: answered %v, skipped %d; want nothing, all 3 skipped", got, skipped)
	}
	// A produce to partition 1 is read; partition 0 asked at offset 0 again
	// is read.
	produce(t, tb, "fskip", 1, 1, testBatch(t, record.BuildOptions{}, "b", 1))
	if got, skipped := fetch(map[int32]int64{0: 0}, nil); len(got) != 2 || got[0] <= 0 || got[1] <= 0 || skipped != 1 {
		t.Fatalf("after a produce and a rewind: answered %v, skipped %d; want partitions 0 and 1 with records, 2 skipped", got, skipped)
	}
	// A leader epoch the partition has not reached is refused, not skipped.
	if got, _ := fetch(map[int32]int64{0: 1, 1: 2}, func(req *kmsg.FetchRequest) {
		rp := kmsg.NewFetchRequestTopicPartition()
		rp.Partition, rp.FetchOffset, rp.PartitionMaxBytes = 2, 1, 1<<20
		rp.CurrentLeaderEpoch = tb.parts.Lookup("fskip", 2).LeaderEpoch() + 1
		req.Topics[0].Partitions = append(req.Topics[0].Partitions, rp)
	}); got[2] != -1 {
		t.Fatalf("a future leader epoch: answered %v, want partition 2's error", got)
	}
	fetch(map[int32]int64{2: 1}, nil) // back to the current epoch
	// DeleteRecords moves partition 2's log start; no channel tells, so
	// the session answers from its last read until the whole read is due.
	del := kmsg.NewPtrDeleteRecordsRequest()
	dt := kmsg.NewDeleteRecordsRequestTopic()
	dt.Topic = "fskip"
	dp := kmsg.NewDeleteRecordsRequestTopicPartition()
	dp.Partition, dp.Offset = 2, 1
	dt.Partitions = append(dt.Partitions, dp)
	del.Topics = append(del.Topics, dt)
	del.TimeoutMillis = 1000
	if resp := tb.do(t, 2, del).(*kmsg.DeleteRecordsResponse); resp.Topics[0].Partitions[0].ErrorCode != 0 {
		t.Fatalf("delete records: %v", kerr.ErrorForCode(resp.Topics[0].Partitions[0].ErrorCode))
	}
	if got, skipped := fetch(nil, nil); len(got) != 0 || skipped != 3 {
		t.Fatalf("within the rescan interval: answered %v, skipped %d; want nothing, all skipped", got, skipped)
	}
	clk.Advance(sessionRescan)
	req := sessionFetch(topic, id, epoch, 0, nil)
	req.ReplicaID = -1
	resp := tb.do(t, 13, req).(*kmsg.FetchResponse)
	epoch++
	if len(resp.Topics) != 1 || len(resp.Topics[0].Partitions) != 1 || resp.Topics[0].Partitions[0].Partition != 2 ||
		resp.Topics[0].Partitions[0].LogStartOffset != 1 {
		t.Fatalf("after the rescan interval: answered %+v, want partition 2 with log start 1", resp.Topics)
	}
}

// A session's partitions are looked up again when the image or the
// hosted partitions change: a deleted topic is answered as unknown.
func TestFetchSessionLooksUpAgainAfterAChange(t *testing.T) {
	tb := startBroker(t, "", nil)
	topic := tb.createTopic(t, "flook", 1, nil)
	produce(t, tb, "flook", 0, 1, testBatch(t, record.BuildOptions{}, "a", 1))
	req := sessionFetch(topic, 0, 0, 0, map[int32]int64{0: 1})
	req.ReplicaID = -1
	resp := tb.do(t, 13, req).(*kmsg.FetchResponse)
	id := resp.SessionID
	req = sessionFetch(topic, id, 1, 0, nil)
	req.ReplicaID = -1
	if resp = tb.do(t, 13, req).(*kmsg.FetchResponse); resp.ErrorCode != 0 || len(resp.Topics) != 0 {
		t.Fatalf("epoch 1: error %v topics %+v, want an empty answer", kerr.ErrorForCode(resp.ErrorCode), resp.Topics)
	}
	if resp := deleteTopics(t, tb.Broker, 4, []string{"flook"}); resp.Topics[0].ErrorCode != 0 {
		t.Fatalf("delete topic: %v", kerr.ErrorForCode(resp.Topics[0].ErrorCode))
	}
	req = sessionFetch(topic, id, 2, 0, nil)
	req.ReplicaID = -1
	resp = tb.do(t, 13, req).(*kmsg.FetchResponse)
	if got := answered(resp); got[0] != -1 || resp.Topics[0].Partitions[0].ErrorCode != kerr.UnknownTopicID.Code {
		t.Fatalf("after the topic's deletion: answered %+v, want partition 0 UNKNOWN_TOPIC_ID", resp.Topics)
	}
}
