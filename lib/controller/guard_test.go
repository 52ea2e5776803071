package controller

import (
	"context"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/mqproject/mq/lib/clock"
	"github.com/mqproject/mq/lib/loopback"
	"github.com/mqproject/mq/lib/mqtest"
)

// TestProposeTakesOnlyCurrentVersions: the RPC's propose puts only
// records this build writes into the log. Versions kept to replay old
// logs (a registration that elects uncleanly, a fence that does) and
// records that do not decode are refused before Raft sees them.
func TestProposeTakesOnlyCurrentVersions(t *testing.T) {
	c := &Controller{raftStarted: make(chan struct{}), voterList: []string{"1@a"}, closing: context.Background(), fsm: newFSM(nil)}
	close(c.raftStarted)
	for _, tc := range []struct {
		name string
		data []byte
		want error
	}{
		{"RegisterBroker 1", mustEncode(t, cmdRegisterBroker, &registerBrokerV1{ID: 9, Host: "h", Port: 1}), ErrUnknownCommand},
		{"RegisterBroker 2", mustEncode(t, cmdRegisterBroker, &registerBrokerV2{ID: 9, Host: "h", Port: 1, Unclean: true}), ErrUnknownCommand},
		{"FenceBroker 1", mustEncode(t, cmdFenceBroker, &fenceBrokerV1{ID: 1, Epoch: 2, Unclean: true}), ErrUnknownCommand},
		{"UnfenceBroker 1", mustEncode(t, cmdUnfenceBroker, &unfenceBrokerV1{ID: 1, Epoch: 2, Unclean: true}), ErrUnknownCommand},
		{"unknown type", []byte{200, 1, '{', '}'}, ErrUnknownCommand},
		{"bad body", []byte{byte(cmdCreateTopic), 1, '{'}, ErrInvalidCommand},
		{"too short", []byte{1}, ErrUnknownCommand},
	} {
		body, err := json.Marshal(tc.data)
		if err != nil {
			t.Fatal(err)
		}
		_, err = c.handleRPC(&rpcRequest{Op: opPropose, From: 2, Voters: []string{"1@a"}, TimeoutMillis: 1000, Body: body}, nil, "")
		if !errors.Is(err, tc.want) {
			t.Errorf("%s: %v, want %v", tc.name, err, tc.want)
		}
	}
	for _, v := range []struct {
		t       commandType
		version byte
	}{{cmdRegisterBroker, 3}, {cmdRegisterBroker, 4}, {cmdFenceBroker, 2}, {cmdUnfenceBroker, 2}, {cmdAlterPartition, 1}, {cmdElectLeaders, 1}} {
		if retired(v.t, v.version) {
			t.Errorf("%v version %d is written by this build but counted as retired", v.t, v.version)
		}
	}
}

func mustEncode(t *testing.T, typ commandType, body any) []byte {
	t.Helper()
	data, err := encodeCommand(typ, body)
	if err != nil {
		t.Fatal(err)
	}
	return data
}

// TestVotersMismatchNamesNoVoters: the refusal of another voter set
// tells the sender it was refused, not the voter list a Raft connection
// must carry.
func TestVotersMismatchNamesNoVoters(t *testing.T) {
	c := &Controller{raftStarted: make(chan struct{}), voterList: []string{"1@secret-host:9093"}, closing: context.Background(),
		logger: slog.New(slog.DiscardHandler), fsm: newFSM(nil)}
	_, err := c.handleRPC(&rpcRequest{Op: opHello, From: 7, Voters: []string{"7@x:1"}}, nil, "")
	if !errors.Is(err, ErrVotersMismatch) {
		t.Fatalf("other voters: %v, want ErrVotersMismatch", err)
	}
	if strings.Contains(err.Error(), "secret-host") || strings.Contains(err.Error(), "9093") {
		t.Fatalf("refusal %q names this node's voters", err)
	}
}

// TestReadMessageAllocatesWhatArrives: a peer announcing the largest
// message and sending a few bytes costs a few bytes, not the announced
// size; one announcing more than the maximum is refused unread.
func TestReadMessageAllocatesWhatArrives(t *testing.T) {
	frame := binary.BigEndian.AppendUint32(nil, maxRPCMessage)
	frame = append(frame, `{"op":`...)
	var before, after runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&before)
	for range 8 {
		var req rpcRequest
		if err := readMessage(strings.NewReader(string(frame)), &req); !errors.Is(err, io.ErrUnexpectedEOF) {
			t.Fatalf("cut message: %v, want ErrUnexpectedEOF", err)
		}
	}
	runtime.ReadMemStats(&after)
	if grew := after.TotalAlloc - before.TotalAlloc; grew > 4<<20 {
		t.Fatalf("8 reads of a message announcing %d bytes allocated %d bytes", maxRPCMessage, grew)
	}
	big := binary.BigEndian.AppendUint32(nil, maxRPCMessage+1)
	var req rpcRequest
	if err := readMessage(strings.NewReader(string(big)), &req); err == nil || errors.Is(err, io.ErrUnexpectedEOF) {
		t.Fatalf("oversized message: %v, want a refusal before reading", err)
	}
}

// TestSilentConnectionsAreBounded: connections that send no greeting
// hold at most maxGreeting slots; the next is closed at once, and a
// greeting node is served again once the silent ones are gone.
func TestSilentConnectionsAreBounded(t *testing.T) {
	if testing.Short() {
		t.Skip("opens many connections")
	}
	bind, err := loopback.FreeAddr()
	if err != nil {
		t.Fatal(err)
	}
	served := make(chan struct{}, 1)
	m, err := listenMux(bind, bind, []string{"1@" + bind}, func(c net.Conn, _ string) {
		select {
		case served <- struct{}{}:
		default:
		}
		io.Copy(io.Discard, c) // served until the dialer closes it
	}, nil, nil, clock.Real(), slog.New(slog.DiscardHandler), raftLimits{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { m.Close() })
	var silent []net.Conn
	t.Cleanup(func() {
		for _, c := range silent {
			c.Close()
		}
	})
	for range maxGreeting {
		c, err := net.Dial("tcp", bind)
		if err != nil {
			t.Fatal(err)
		}
		silent = append(silent, c)
	}
	mqtest.WaitFor(t, "every silent connection accepted", func() (bool, string) {
		n := m.greeting.Load()
		return n == maxGreeting, fmt.Sprintf("%d greeting", n)
	})
	extra, err := net.Dial("tcp", bind)
	if err != nil {
		t.Fatal(err)
	}
	defer extra.Close()
	extra.Write([]byte{connRPC})
	extra.SetReadDeadline(time.Now().Add(handshakeTimeout / 2))
	// Closed unread, the connection ends with EOF or a reset.
	var timeout net.Error
	if _, err := extra.Read(make([]byte, 1)); err == nil || errors.As(err, &timeout) && timeout.Timeout() {
		t.Fatalf("connection past the cap: read %v, want it closed before the handshake timeout", err)
	}
	for _, c := range silent {
		c.Close()
	}
	silent = nil
	mqtest.WaitFor(t, "the silent connections gone", func() (bool, string) {
		n := m.greeting.Load()
		return n == 0, fmt.Sprintf("%d greeting", n)
	})
	ok, err := net.Dial("tcp", bind)
	if err != nil {
		t.Fatal(err)
	}
	defer ok.Close()
	ok.Write([]byte{connRPC})
	select {
	case <-served:
	case <-time.After(20 * time.Second):
		t.Fatal("a greeting connection was not served after the silent ones left")
	}
}
