package broker

import (
	"bytes"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/mqproject/mq/lib/clock"
	"github.com/mqproject/mq/lib/record"
)

// TestLeaderThrottleHoldsOnlyThrottledFollowers: a follower fetch of a
// partition named in leader.replication.throttled.replicas, by a
// follower out of the ISR, gets only what the leader's quota allows;
// over quota it gets nothing at once when other partitions have records,
// and when it would wait it is read again as soon as the quota gives,
// before its max wait. The same follower's fetch of an un-throttled
// partition, and a consumer's fetch, are never held.
func TestLeaderThrottleHoldsOnlyThrottledFollowers(t *testing.T) {
	clk := clock.NewManual(time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC))
	tb := startBrokerOn(t, "", nil, nil, clk)
	thrID := tb.createFollowedTopic(t, "thr", 1, map[string]string{"leader.replication.throttled.replicas": "*"}, 2)
	freeID := tb.createFollowedTopic(t, "free", 1, nil, 2)
	big := testBatch(t, record.BuildOptions{}, string(bytes.Repeat([]byte("x"), 1000)), 10) // about 10 kB
	for range 4 {
		produce(t, tb, "thr", 0, 1, big)
		produce(t, tb, "free", 0, 1, big)
	}
	quota, _ := tb.parts.ReplicationQuotas()
	quota.SetRate(100_000) // empty: a quantum (5 kB) after 50 ms

	// Broker 2 is a replica out of the ISR (it never runs): a follower
	// fetch (replica id 2) of both topics.
	follower := func(maxWait int32) *kmsg.FetchRequest {
		req := fetchRequest("thr", thrID, 0, 0, maxWait)
		req.ReplicaID = 2
		free := fetchRequest("free", freeID, 0, 0, maxWait)
		req.Topics = append(req.Topics, free.Topics...)
		return req
	}
	bytesOf := func(resp *kmsg.FetchResponse) (thr, free int) {
		for _, t := range resp.Topics {
			for _, p := range t.Partitions {
				if p.ErrorCode != 0 {
					panic(kerr.ErrorForCode(p.ErrorCode))
				}
				if t.TopicID == thrID {
					thr += len(p.RecordBatches)
				} else {
					free += len(p.RecordBatches)
				}
			}
		}
		return thr, free
	}
	thr, free := bytesOf(tb.do(t, 13, follower(500)).(*kmsg.FetchResponse))
	if thr != 0 || free == 0 {
		t.Fatalf("over quota: %d throttled bytes and %d others, want none and some", thr, free)
	}
	clk.Advance(100 * time.Millisecond) // 10 kB earned: a batch (KIP-74: whole)
	thr, _ = bytesOf(tb.do(t, 13, follower(500)).(*kmsg.FetchResponse))
	if thr == 0 || thr > 2*len(big) {
		t.Fatalf("with 10 kB of quota the throttled partition got %d bytes, want a batch or two", thr)
	}
	if c := quota.Counts(); c.Bytes != uint64(thr) {
		t.Fatalf("quota counted %d bytes, sent %d", c.Bytes, thr)
	}

	// Only the throttled partition, over quota: the fetch waits for the
	// quota, not for its max wait.
	req := follower(10_000)
	req.Topics = req.Topics[:1]
	waiting := clk.Pending()
	answer := make(chan *kmsg.FetchResponse, 1)
	go func() { answer <- tb.do(t, 13, req).(*kmsg.FetchResponse) }()
	waitUntil(t, "the held fetch waits on the broker's clock", func() bool { return clk.Pending() > waiting })
	clk.Advance(time.Second)
	select {
	case resp := <-answer:
		if thr, _ := bytesOf(resp); thr == 0 {
			t.Fatal("read again once the quota gave, and got nothing")
		}
	case <-time.After(10 * time.Second):
		t.Fatal("a fetch held by the throttle was not read again when the quota gave")
	}

	// A consumer is never throttled.
	resp := fetchOne(t, tb, 13, fetchRequest("thr", thrID, 0, 0, 0))
	if resp.ErrorCode != 0 || len(resp.RecordBatches) < 4*len(big) {
		t.Fatalf("consumer fetch: %v, %d bytes, want everything", kerr.ErrorForCode(resp.ErrorCode), len(resp.RecordBatches))
	}
}

// TestThrottledFollowerFetchAllocatesNothing: the leader side of the
// throttle adds no allocation to a follower's fetch, held to a rate or
// not.
func TestThrottledFollowerFetchAllocatesNothing(t *testing.T) {
	h := newFollowedHotPath(t, map[string]string{"leader.replication.throttled.replicas": "*"}, 2)
	h.fetch.ReplicaID = 2 // a replica out of the ISR: throttled
	quota, _ := h.tb.parts.ReplicationQuotas()
	for _, rate := range []int64{1 << 40, 1} { // always an allowance; never one
		quota.SetRate(rate)
		for range 10 {
			h.round()
		}
		allocs := testing.AllocsPerRun(500, h.round)
		t.Logf("rate %d: %.2f allocations per produce and throttled follower fetch", rate, allocs)
		limit := 1.0
		if raceEnabled {
			limit = 8
		}
		if allocs > limit {
			t.Errorf("rate %d: %.2f allocations per produce and throttled follower fetch, want at most %g", rate, allocs, limit)
		}
	}
	if c := quota.Counts(); c.Bytes == 0 || c.Holds == 0 {
		t.Fatalf("the fetches were not throttled: %+v", c)
	}
}
