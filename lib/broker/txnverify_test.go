package broker

import (
	"bufio"
	"encoding/binary"
	"errors"
	"io"
	"net"
	"sync"
	"testing"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// fakeTxnCoordinator is a Kafka listener that answers FindCoordinator
// (naming node 1, itself) and AddPartitionsToTxn v4 from a table of
// ongoing transactions, and records the AddPartitionsToTxn requests.
type fakeTxnCoordinator struct {
	ln      net.Listener
	mu      sync.Mutex
	conns   []net.Conn
	ongoing map[string]int64 // transactional id → producer id
	asked   []kmsg.AddPartitionsToTxnRequestTransaction
}

func startFakeTxnCoordinator(t *testing.T) *fakeTxnCoordinator {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	f := &fakeTxnCoordinator{ln: ln, ongoing: map[string]int64{}}
	var wg sync.WaitGroup
	t.Cleanup(func() {
		ln.Close()
		f.mu.Lock()
		for _, c := range f.conns {
			c.Close()
		}
		f.mu.Unlock()
		wg.Wait()
	})
	wg.Add(1)
	go func() {
		defer wg.Done()
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			f.mu.Lock()
			f.conns = append(f.conns, c)
			f.mu.Unlock()
			wg.Add(1)
			go func() {
				defer wg.Done()
				defer c.Close()
				f.serve(c)
			}()
		}
	}()
	return f
}

func (f *fakeTxnCoordinator) port() int32 {
	return int32(f.ln.Addr().(*net.TCPAddr).Port)
}

func (f *fakeTxnCoordinator) serve(c net.Conn) {
	r := bufio.NewReader(c)
	for {
		var size [4]byte
		if _, err := io.ReadFull(r, size[:]); err != nil {
			return
		}
		frame := make([]byte, binary.BigEndian.Uint32(size[:]))
		if _, err := io.ReadFull(r, frame); err != nil {
			return
		}
		key, version := int16(binary.BigEndian.Uint16(frame)), int16(binary.BigEndian.Uint16(frame[2:]))
		corr := frame[4:8]
		idLen := int(int16(binary.BigEndian.Uint16(frame[8:])))
		body := frame[10+max(idLen, 0):]
		req := kmsg.RequestForKey(key)
		req.SetVersion(version)
		if req.IsFlexible() {
			body = body[1:] // no header tags
		}
		if err := req.ReadFrom(body); err != nil {
			return
		}
		resp := f.answer(req)
		out := append([]byte{0, 0, 0, 0}, corr...)
		if req.IsFlexible() {
			out = append(out, 0)
		}
		out = resp.AppendTo(out)
		binary.BigEndian.PutUint32(out, uint32(len(out)-4))
		if _, err := c.Write(out); err != nil {
			return
		}
	}
}

func (f *fakeTxnCoordinator) answer(req kmsg.Request) kmsg.Response {
	switch r := req.(type) {
	case *kmsg.FindCoordinatorRequest:
		resp := r.ResponseKind().(*kmsg.FindCoordinatorResponse)
		for _, k := range r.CoordinatorKeys {
			c := kmsg.NewFindCoordinatorResponseCoordinator()
			c.Key, c.NodeID, c.Host, c.Port = k, 1, "127.0.0.1", f.port()
			if r.CoordinatorType != 1 {
				c.ErrorCode = kerr.InvalidRequest.Code
			}
			resp.Coordinators = append(resp.Coordinators, c)
		}
		return resp
	case *kmsg.AddPartitionsToTxnRequest:
		resp := r.ResponseKind().(*kmsg.AddPartitionsToTxnResponse)
		f.mu.Lock()
		defer f.mu.Unlock()
		for _, txn := range r.Transactions {
			f.asked = append(f.asked, txn)
			code := int16(0)
			if pid, ok := f.ongoing[txn.TransactionalID]; !ok || pid != txn.ProducerID {
				code = kerr.InvalidTxnState.Code
			}
			if !txn.VerifyOnly {
				f.ongoing[txn.TransactionalID], code = txn.ProducerID, 0
			}
			rt := kmsg.NewAddPartitionsToTxnResponseTransaction()
			rt.TransactionalID = txn.TransactionalID
			for _, tt := range txn.Topics {
				rtt := kmsg.NewAddPartitionsToTxnResponseTransactionTopic()
				rtt.Topic = tt.Topic
				for _, p := range tt.Partitions {
					rp := kmsg.NewAddPartitionsToTxnResponseTransactionTopicPartition()
					rp.Partition, rp.ErrorCode = p, code
					rtt.Partitions = append(rtt.Partitions, rp)
				}
				rt.Topics = append(rt.Topics, rtt)
			}
			resp.Transactions = append(resp.Transactions, rt)
		}
		return resp
	}
	return nil
}

// The real TxnVerifier finds the coordinator with FindCoordinator and
// asks it with AddPartitionsToTxn v4 over the peer connections.
func TestPeerVerifierAsksTheCoordinator(t *testing.T) {
	tb := startBroker(t, "", nil)
	tb.createTopic(t, "tx", 1, nil)
	f := startFakeTxnCoordinator(t)
	tb.register(t, f.port()) // node 1's address is now the fake coordinator's
	v := peerVerifier{tb.Broker}
	ctx := t.Context()
	if err := v.VerifyTxn(ctx, "tx-a", 7, 1, "tx", 0, false); !errors.Is(err, kerr.InvalidTxnState) {
		t.Fatalf("a producer in no transaction: %v", err)
	}
	f.mu.Lock()
	f.ongoing["tx-a"] = 7
	f.mu.Unlock()
	if err := v.VerifyTxn(ctx, "tx-a", 7, 1, "tx", 0, false); err != nil {
		t.Fatalf("a producer in its transaction: %v", err)
	}
	if err := v.VerifyTxn(ctx, "tx-b", 8, 0, "tx", 0, true); err != nil {
		t.Fatalf("transaction.version 2 add: %v", err)
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	if len(f.asked) != 3 || !f.asked[0].VerifyOnly || f.asked[2].VerifyOnly || f.asked[1].ProducerEpoch != 1 ||
		f.asked[1].Topics[0].Topic != "tx" || f.asked[1].Topics[0].Partitions[0] != 0 {
		t.Fatalf("coordinator asked %+v", f.asked)
	}
	if f.ongoing["tx-b"] != 8 {
		t.Fatal("the add did not reach the coordinator")
	}
}
