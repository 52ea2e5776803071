package server

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"net"
	"sync"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/mqproject/mq/lib/mqtest"
)

// acquireAsync starts a reservation of n bytes on b; the channel reports
// whether it was granted. Closing stop gives up.
func acquireAsync(b *budget, n int64, stop <-chan struct{}) <-chan bool {
	done := make(chan bool, 1)
	go func() { done <- b.acquire(n, nil, stop, nil) }()
	return done
}

// waitWaiting waits until n reservations wait on b.
func waitWaiting(t *testing.T, b *budget, n int) {
	t.Helper()
	mqtest.WaitFor(t, fmt.Sprintf("%d reservations to wait", n), func() (bool, string) {
		st := b.stats()
		return st.waiting == n, fmt.Sprintf("%+v", st)
	})
}

func granted(t *testing.T, what string, c <-chan bool) {
	t.Helper()
	select {
	case ok := <-c:
		if !ok {
			t.Fatalf("%s: not granted", what)
		}
	case <-time.After(10 * time.Second):
		t.Fatalf("%s: still waiting", what)
	}
}

// acquireNow reserves n bytes on b, failing if that waits.
func acquireNow(t *testing.T, b *budget, n int64) {
	t.Helper()
	select {
	case ok := <-acquireAsync(b, n, nil):
		if !ok {
			t.Fatal("reservation refused")
		}
	case <-time.After(10 * time.Second):
		t.Fatalf("reservation of %d bytes waits; stats %+v", n, b.stats())
	}
}

func stillWaiting(t *testing.T, what string, c <-chan bool) {
	t.Helper()
	select {
	case ok := <-c:
		t.Fatalf("%s: returned %v while it should wait", what, ok)
	default:
	}
}

func TestBudgetLetsSmallFramesPassAndLargeOnesInOrder(t *testing.T) {
	const MiB = 1 << 20
	b := newBudget(16*MiB, 8*MiB) // large frames may hold 14 MiB
	acquireNow(t, b, 8*MiB)
	l2 := acquireAsync(b, 8*MiB, nil) // 16 MiB of large frames: over 14
	waitWaiting(t, b, 1)
	l3 := acquireAsync(b, 2*MiB, nil) // would fit, but l2 is ahead
	waitWaiting(t, b, 2)
	acquireNow(t, b, MiB) // small: passes both
	stillWaiting(t, "large frame behind a waiting one", l3)
	b.release(8*MiB, nil)
	granted(t, "waiting large frame", l2)
	granted(t, "large frame behind it", l3)
	if st := b.stats(); st.used != 11*MiB || st.peak != 11*MiB || st.waits != 2 {
		t.Fatalf("stats %+v, want 11 MiB used and peak, 2 waits", st)
	}

	// Small frames take what large ones may not, up to the whole budget,
	// and wait when it is all taken.
	for range 5 {
		acquireNow(t, b, MiB)
	}
	s := acquireAsync(b, MiB, nil)
	waitWaiting(t, b, 1)
	b.release(MiB, nil)
	granted(t, "small frame", s)
	if st := b.stats(); st.used != 16*MiB || st.peak != 16*MiB {
		t.Fatalf("stats %+v, want the whole budget used", st)
	}
}

func TestBudgetWaiterThatGivesUpLetsOthersIn(t *testing.T) {
	const MiB = 1 << 20
	b := newBudget(16*MiB, 8*MiB)
	acquireNow(t, b, 8*MiB)
	stop := make(chan struct{})
	l2 := acquireAsync(b, 8*MiB, stop)
	waitWaiting(t, b, 1)
	l3 := acquireAsync(b, 4*MiB, nil)
	waitWaiting(t, b, 2)
	close(stop)
	select {
	case ok := <-l2:
		if ok {
			t.Fatal("reservation granted after giving up")
		}
	case <-time.After(10 * time.Second):
		t.Fatal("waiter did not give up")
	}
	granted(t, "large frame behind the one that gave up", l3)
	if st := b.stats(); st.used != 12*MiB || st.waiting != 0 {
		t.Fatalf("stats %+v, want 12 MiB used, none waiting", st)
	}
}

func TestBudgetWithNoBoundNeverWaits(t *testing.T) {
	b := newBudget(-1, DefaultMaxRequestBytes)
	for range 100 {
		acquireNow(t, b, DefaultMaxRequestBytes)
	}
	if st := b.stats(); st.waits != 0 || st.used != 100*DefaultMaxRequestBytes {
		t.Fatalf("stats %+v", st)
	}
}

// budgetUsed waits until s's budget has used bytes reserved.
func budgetUsed(t *testing.T, s *Server, used int64) {
	t.Helper()
	mqtest.WaitFor(t, fmt.Sprintf("the budget to settle at %d bytes used", used), func() (bool, string) {
		st := s.budget.stats()
		return st.used == used, fmt.Sprintf("%+v", st)
	})
}

// gatedProduce answers produce requests once gate is closed, recycling
// those with an odd correlation id; other requests at once.
func gatedProduce(gate <-chan struct{}) *fakeHandler {
	return newFake(func(ctx context.Context, _ *ConnInfo, req *Request) Reply {
		if req.Key != produceKey {
			return req.Ready(Response{Msg: req.Body.ResponseKind()})
		}
		if req.CorrelationID%2 == 1 {
			req.Recycle()
		}
		return func() Response {
			select {
			case <-gate:
			case <-ctx.Done():
			}
			return Response{Msg: req.Body.ResponseKind()}
		}
	})
}

// largeFrame is a produce request frame of size bytes (its size prefix
// not counted).
func largeFrame(size int, correlationID int32) []byte {
	id := "big"
	overhead := len(appendRequest(nil, produceWithRecords(nil), correlationID, &id)) - 4
	return appendRequest(nil, produceWithRecords(make([]byte, size-overhead)), correlationID, &id)
}

// Many connections sending large frames at once never make the server hold
// more than its budget: those that do not fit are not read until others
// are answered, while small requests of another client keep being served.
func TestRequestBudgetBoundsLargeFramesAcrossConnections(t *testing.T) {
	const (
		MiB      = 1 << 20
		maxFrame = 2 * MiB
		limit    = 8 * MiB // large frames may hold 7 MiB: three at once
		conns    = 12
		perConn  = 2
	)
	gate := make(chan struct{})
	s := startServer(t, Config{MaxRequestBytes: maxFrame, QueuedMaxRequestBytes: limit}, gatedProduce(gate))
	frames := [2][]byte{largeFrame(maxFrame, 0), largeFrame(maxFrame, 1)} // kept, recycled
	cost := frameCost(maxFrame)

	var wg sync.WaitGroup
	errs := make(chan error, conns)
	for i := range conns {
		c := dial(t, s.Addrs()[i%2])
		wg.Add(1)
		go func() {
			defer wg.Done()
			// Write from another goroutine: the server reads frames only
			// as the budget allows, so writes block.
			go func() {
				for j := range perConn {
					if _, err := c.Write(frames[(i+j)%2]); err != nil {
						return
					}
				}
			}()
			for range perConn {
				if _, _, err := readFrame(c); err != nil {
					errs <- err
					return
				}
			}
		}()
	}
	// Three frames are reserved and wait for their responses (the last
	// 2 MiB are for small frames); every other connection waits for room
	// for its next frame, which it leaves unread. (One may have had both its
	// frames reserved.)
	mqtest.WaitFor(t, "the large frames to fill their share of the budget", func() (bool, string) {
		st := s.budget.stats()
		return st.used == 3*cost && st.waiting >= conns-1, fmt.Sprintf("%+v", st)
	})

	small := dial(t, s.Addrs()[0])
	for i := range 20 {
		send(t, small, metadataRequest(4), int32(i))
		if corr := recv(t, small, &kmsg.MetadataResponse{Version: 4}); corr != int32(i) {
			t.Fatalf("metadata correlation id %d, want %d", corr, i)
		}
	}

	close(gate)
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatalf("reading a large frame's response: %v", err)
	}
	budgetUsed(t, s, 0)
	if st := s.budget.stats(); st.peak > limit || st.peak < 3*cost {
		t.Fatalf("peak reserved %d, want between %d and the budget %d", st.peak, 3*cost, limit)
	}
}

// A budget holding exactly one frame of the largest size serves a
// connection that pipelines such frames: each waits for the response to the
// one before.
func TestBudgetOfOneLargestFrameServesPipelinedLargestFrames(t *testing.T) {
	const maxFrame = 2 << 20
	s := startServer(t, Config{MaxRequestBytes: maxFrame, QueuedMaxRequestBytes: maxFrame}, gatedProduce(closedChan()))
	frame := largeFrame(maxFrame, 1)
	c := dial(t, s.Addrs()[1])
	go func() {
		for range 3 {
			if _, err := c.Write(frame); err != nil {
				return
			}
		}
	}()
	for range 3 {
		if _, _, err := readFrame(c); err != nil {
			t.Fatal(err)
		}
	}
	budgetUsed(t, s, 0)
}

// A peer that announces a large frame and then sends nothing holds its
// reservation only until the body timeout: then its connection is closed
// and a large frame waiting behind it is read. Small requests are served
// meanwhile.
func TestStalledFrameIsCutOffAndItsBudgetGivenBack(t *testing.T) {
	const (
		MiB      = 1 << 20
		maxFrame = 3 * MiB
	)
	s := startServer(t, Config{
		MaxRequestBytes:       maxFrame,
		QueuedMaxRequestBytes: 4 * MiB, // one large frame at a time, 1 MiB for small ones
		RequestBodyTimeout:    200 * time.Millisecond,
	}, gatedProduce(closedChan()))
	frame := largeFrame(maxFrame, 1)

	stalled := dial(t, s.Addrs()[0])
	if _, err := stalled.Write(frame[:4+100]); err != nil {
		t.Fatal(err)
	}
	mqtest.WaitFor(t, "the stalled frame's reservation", func() (bool, string) {
		st := s.budget.stats()
		return st.used == maxFrame, fmt.Sprintf("%+v", st)
	})
	honest := dial(t, s.Addrs()[0])
	go honest.Write(frame)
	waitWaiting(t, s.budget, 1)

	small := dial(t, s.Addrs()[1])
	send(t, small, metadataRequest(4), 5)
	if corr := recv(t, small, &kmsg.MetadataResponse{Version: 4}); corr != 5 {
		t.Fatalf("metadata correlation id %d", corr)
	}

	expectClosed(t, stalled)
	if _, _, err := readFrame(honest); err != nil {
		t.Fatalf("large frame behind the stalled one: %v", err)
	}
	budgetUsed(t, s, 0)
}

func closedChan() chan struct{} {
	c := make(chan struct{})
	close(c)
	return c
}

// A frame may take longer than RequestBodyTimeout as long as it keeps
// arriving at MinRequestBodyRate; one that falls behind that rate is cut
// off.
func TestSlowFrameIsReadWhileItKeepsTheMinimumRate(t *testing.T) {
	const (
		piece  = 8 << 10
		pieces = 8
		every  = 50 * time.Millisecond // 8 pieces: 4 times the timeout
	)
	for _, tc := range []struct {
		name     string
		rate     int64
		answered bool
	}{
		// 160 KiB/s sent: each piece extends the deadline by 2 s.
		{"above the rate", 4 << 10, true},
		// Each piece extends the deadline by 8 ms: it falls behind.
		{"below the rate", 1 << 20, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s := startServer(t, Config{RequestBodyTimeout: 100 * time.Millisecond, MinRequestBodyRate: tc.rate}, gatedProduce(closedChan()))
			frame := largeFrame(piece*pieces, 1)
			c := dial(t, s.Addrs()[0])
			go func() {
				tick := time.NewTicker(every)
				defer tick.Stop()
				for off := 0; off < len(frame); off += piece {
					if _, err := c.Write(frame[off:min(off+piece, len(frame))]); err != nil {
						return
					}
					<-tick.C
				}
			}()
			_, _, err := readFrame(c)
			switch {
			case tc.answered && err != nil:
				t.Fatalf("slow frame not answered: %v", err)
			case !tc.answered && err == nil:
				t.Fatal("frame below the minimum rate answered")
			case !tc.answered && !errors.Is(err, io.EOF) && !isReset(err):
				t.Fatalf("frame below the minimum rate: %v, want the connection closed", err)
			}
			budgetUsed(t, s, 0)
		})
	}
}

// largeBytes is a frame of size bytes starting with start, then zeros.
func largeBytes(size int, start ...byte) []byte {
	b := binary.BigEndian.AppendUint32(nil, uint32(size))
	b = append(b, start...)
	return append(b, make([]byte, size-len(start))...)
}

func isReset(err error) bool {
	var oe *net.OpError
	return errors.As(err, &oe) && !oe.Timeout()
}

// Frames cut off by their peer, refused or left behind by a failing
// handler give their bytes back.
func TestBudgetIsGivenBackWhenFramesEndBadly(t *testing.T) {
	h := newFake(func(_ context.Context, _ *ConnInfo, req *Request) Reply {
		switch req.CorrelationID {
		case 1:
			panic("handler bug")
		case 2:
			return func() Response { panic("reply bug") }
		}
		return func() Response { return Response{Msg: req.Body.ResponseKind()} }
	})
	s, err := New(Config{Listeners: []string{"tcp://127.0.0.1:0"}, Logger: testLogger(t)}, h)
	if err != nil {
		t.Fatal(err)
	}
	if err := s.Start(); err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	addr := s.Addrs()[0]
	frame := largeFrame(3<<20, 3)
	for _, tc := range []struct {
		name  string
		bytes []byte
		half  bool // close after writing
	}{
		{"large frame cut off", frame[:len(frame)/2], true},
		{"large frame, unknown API", largeBytes(3<<20, 0x27, 0x0f), false},
		// Metadata v4 with 2^30 topics.
		{"large frame, malformed", largeBytes(3<<20, 0, 3, 0, 4, 0, 0, 0, 9, 0xff, 0xff, 0x40, 0, 0, 0), false},
		{"handler panics", appendRequest(nil, metadataRequest(4), 1, nil), false},
		{"reply panics", appendRequest(nil, metadataRequest(4), 2, nil), false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := dial(t, addr)
			if _, err := c.Write(tc.bytes); err != nil {
				t.Fatal(err)
			}
			if tc.half {
				c.Close()
			} else {
				expectClosed(t, c)
			}
			budgetUsed(t, s, 0)
		})
	}
	if n := s.panics.Load(); n != 2 {
		t.Fatalf("panics %d, want 2", n)
	}
}

// A source (a peer's address) that announces large frames on many
// connections holds one share of the budget; its frames over that wait
// without holding up the large frames of other sources.
func TestBudgetKeepsOneSourceToItsShare(t *testing.T) {
	const MiB = 1 << 20
	b := newBudget(256*MiB, 100*MiB) // large frames 224 MiB, a source 112
	var a, other budgetSource
	acquire := func(n int64, src *budgetSource) <-chan bool {
		done := make(chan bool, 1)
		go func() { done <- b.acquire(n, src, nil, nil) }()
		return done
	}
	granted(t, "the source's first frame", acquire(100*MiB, &a))
	a2 := acquire(100*MiB, &a)
	waitWaiting(t, b, 1)
	a3 := acquire(100*MiB, &a)
	waitWaiting(t, b, 2)
	granted(t, "another source's large frame behind two waiting ones", acquire(100*MiB, &other))
	granted(t, "another source's second large frame", acquire(10*MiB, &other))
	stillWaiting(t, "the source's second frame", a2)
	b.release(100*MiB, &a)
	granted(t, "the source's second frame once its first is done", a2)
	stillWaiting(t, "the source's third frame", a3)
	if a.large != 100*MiB || other.large != 110*MiB {
		t.Fatalf("sources hold %d and %d bytes, want 100 and 110 MiB", a.large, other.large)
	}
}
