package server

import (
	"context"
	"fmt"
	"net"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/mqproject/mq/lib/mqtest"
)

// recordingObserver keeps what Answered was told.
type recordingObserver struct {
	mu   sync.Mutex
	keys []int16
	errs []int16
}

func (o *recordingObserver) Answered(key int16, elapsed time.Duration, resp Response) {
	o.mu.Lock()
	defer o.mu.Unlock()
	if elapsed <= 0 {
		o.errs = append(o.errs, -1)
	}
	o.keys = append(o.keys, key)
	o.errs = append(o.errs, resp.ErrorCodes...)
}

func (o *recordingObserver) seen() ([]int16, []int16) {
	o.mu.Lock()
	defer o.mu.Unlock()
	return append([]int16(nil), o.keys...), append([]int16(nil), o.errs...)
}

// TestObserverSeesEveryRequestAndConnectionsAreCounted: the Observer is
// told of each answered request (ApiVersions, answered by the server, and
// the handler's), with the error codes of a pre-encoded response; the
// server counts its connections.
func TestObserverSeesEveryRequestAndConnectionsAreCounted(t *testing.T) {
	obs := &recordingObserver{}
	s := startServer(t, Config{Observer: obs}, newFake(func(_ context.Context, _ *ConnInfo, req *Request) Reply {
		return req.Ready(Response{Msg: req.Body.ResponseKind(), ErrorCodes: []int16{6}})
	}))
	if s.Connections() != 0 || s.ConnectionsAccepted() != 0 {
		t.Fatalf("before any connection: %d open, %d accepted", s.Connections(), s.ConnectionsAccepted())
	}
	network, addr, _ := parseListener(s.Addrs()[0])
	cl, err := kgo.NewClient(kgo.SeedBrokers("mq:9092"), kgo.Dialer(func(ctx context.Context, _, _ string) (net.Conn, error) {
		var d net.Dialer
		return d.DialContext(ctx, network, addr)
	}))
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if _, err := cl.Request(ctx, kmsg.NewPtrMetadataRequest()); err != nil {
		t.Fatal(err)
	}
	// The observer is told once a response is written: the client may have
	// it a moment before.
	// kgo asks ApiVersions at v5 first, is told v4 (KIP-511) and asks
	// again.
	mqtest.WaitFor(t, "the observer to be told of the three requests", func() (bool, string) {
		keys, _ := obs.seen()
		return len(keys) >= 3, fmt.Sprintf("keys %v", keys)
	})
	keys, errs := obs.seen()
	if !slices.Equal(keys, []int16{18, 18, 3}) {
		t.Errorf("observed keys %v, want ApiVersions (18) twice then Metadata (3)", keys)
	}
	if len(errs) != 1 || errs[0] != 6 {
		t.Errorf("observed error codes %v, want [6] (and no zero durations, -1)", errs)
	}
	if s.Connections() != 1 || s.ConnectionsAccepted() != 1 {
		t.Errorf("with one client: %d open, %d accepted; want 1 and 1", s.Connections(), s.ConnectionsAccepted())
	}
	cl.Close()
	mqtest.WaitFor(t, "the closed connection to be gone", func() (bool, string) {
		n := s.Connections()
		return n == 0, fmt.Sprintf("%d connections", n)
	})
	if s.ConnectionsAccepted() != 1 {
		t.Errorf("after the client closed: %d accepted; want 1", s.ConnectionsAccepted())
	}
}
