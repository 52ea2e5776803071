package server

import (
	"bytes"
	"context"
	"hash/crc32"
	"math/rand/v2"
	"strconv"
	"testing"

	"github.com/twmb/franz-go/pkg/kmsg"
)

// produceWithRecords is a produce request whose one partition carries
// records (any bytes: the fake handler does not parse them).
func produceWithRecords(records []byte) *kmsg.ProduceRequest {
	req := kmsg.NewPtrProduceRequest()
	req.SetVersion(8)
	req.Acks = 1
	t := kmsg.NewProduceRequestTopic()
	t.Topic = "t"
	p := kmsg.NewProduceRequestTopicPartition()
	p.Records = records
	t.Partitions = append(t.Partitions, p)
	req.Topics = append(req.Topics, t)
	return req
}

// A handler that calls Recycle sees each request's own bytes, even though
// the buffers (and Requests) are reused across requests of different
// sizes; one that does not keeps its byte fields and its Request intact
// while later requests arrive, also the first one after a recycled run
// (read into a pooled buffer).
func TestRecycledFramesAreReusedAndKeptFramesAreNot(t *testing.T) {
	const n = 300
	// Requests [0, n/3) and [2n/3, n) are recycled, the others kept.
	keep := func(i int32) bool { return i >= n/3 && i < 2*n/3 }
	var kept [][]byte // byte fields of requests not recycled; reader goroutine only
	var keptReqs []*Request
	var seen = map[*byte]bool{}
	var seenReqs = map[*Request]bool{}
	reused, reusedReqs := 0, 0
	h := newFake(func(_ context.Context, _ *ConnInfo, req *Request) Reply {
		r := req.Body.(*kmsg.ProduceRequest)
		recs := r.Topics[0].Partitions[0].Records
		resp := req.Body.ResponseKind().(*kmsg.ProduceResponse)
		rt := kmsg.NewProduceResponseTopic()
		rp := kmsg.NewProduceResponseTopicPartition()
		sum := strconv.FormatUint(uint64(crc32.ChecksumIEEE(recs)), 10)
		rp.ErrorMessage = &sum
		rt.Partitions = append(rt.Partitions, rp)
		resp.Topics = append(resp.Topics, rt)
		if !keep(req.CorrelationID) {
			req.Recycle()
			// Requests of one shape put their records at one offset of
			// the frame: a known address means a reused frame.
			if seen[&recs[0]] {
				reused++
			}
			seen[&recs[0]] = true
			if seenReqs[req] {
				reusedReqs++
			}
			seenReqs[req] = true
		} else {
			kept = append(kept, recs)
			keptReqs = append(keptReqs, req)
		}
		if req.CorrelationID%3 == 0 {
			return func() Response { return Response{Msg: resp} } // through the writer
		}
		return req.Ready(Response{Msg: resp})
	})
	s := startServer(t, Config{}, h)
	c := dial(t, s.Addrs()[0])
	rng := rand.New(rand.NewPCG(1, 2))
	var sent [][]byte
	for i := range int32(n) {
		// A few sizes, so that buffers are reused often, by requests
		// both smaller and larger than the one before.
		recs := make([]byte, []int{100, 900, 3000, 3900, 15000}[rng.IntN(5)])
		for j := range recs {
			recs[j] = byte(rng.Uint32())
		}
		sent = append(sent, recs)
		send(t, c, produceWithRecords(recs), i)
		resp := &kmsg.ProduceResponse{Version: 8}
		if corr := recv(t, c, resp); corr != i {
			t.Fatalf("response %d has correlation id %d", i, corr)
		}
		want := strconv.FormatUint(uint64(crc32.ChecksumIEEE(recs)), 10)
		if got := resp.Topics[0].Partitions[0].ErrorMessage; got == nil || *got != want {
			t.Fatalf("request %d: the handler saw other bytes than were sent", i)
		}
	}
	c.Close()
	for i, b := range kept {
		if !bytes.Equal(b, sent[n/3+i]) {
			t.Fatalf("request %d, not recycled, had its bytes overwritten", n/3+i)
		}
	}
	for i, r := range keptReqs {
		if r.CorrelationID != int32(n/3+i) || r.Body == nil {
			t.Fatalf("request %d, not recycled, had its Request reused (correlation id %d)", n/3+i, r.CorrelationID)
		}
	}
	if reused == 0 || reusedReqs == 0 {
		t.Fatalf("recycled frames reused %d times, Requests %d times; want both", reused, reusedReqs)
	}
}
