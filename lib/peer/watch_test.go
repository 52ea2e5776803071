package peer

import (
	"context"
	"encoding/binary"
	"io"
	"net"
	"sync"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/mqproject/mq/lib/clock"
	"github.com/mqproject/mq/lib/mqtest"
)

// refusedAddr returns an address nothing listens on: a port that was
// just listened on and closed.
func refusedAddr(t *testing.T) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	ln.Close()
	return addr
}

// settle waits until no probe of w runs.
func settle(t *testing.T, w *Watch, id int32) {
	t.Helper()
	waitWatch(t, w, func() bool { return !w.state(id).probing })
}

// state is what w knows of broker id.
func (w *Watch) state(id int32) watched {
	w.mu.Lock()
	defer w.mu.Unlock()
	if b := w.brokers[id]; b != nil {
		return *b
	}
	return watched{}
}

func TestWatchFindsABrokerWhoseListenerRefuses(t *testing.T) {
	clk := clock.NewManual(time.Unix(1000, 0))
	w := NewWatch(clk, nil)
	if w.Any() {
		t.Fatal("a new watch suspects someone")
	}
	w.Lost(2, refusedAddr(t))
	// Suspect from the loss on, while the probe runs.
	if since, ok := w.Gone(2); !ok || !since.Equal(clk.Now()) {
		t.Fatalf("Gone(2) = %v, %v right after Lost; want suspect since now", since, ok)
	}
	settle(t, w, 2)
	clk.Advance(time.Second)
	since, ok := w.Gone(2)
	if !ok || !since.Equal(time.Unix(1000, 0)) {
		t.Fatalf("Gone(2) = %v, %v after a refused probe; want gone since the loss", since, ok)
	}
	// Another loss while gone keeps the time of the first.
	w.Lost(2, refusedAddr(t))
	if since, _ := w.Gone(2); !since.Equal(time.Unix(1000, 0)) {
		t.Fatalf("a second loss moved the time to %v", since)
	}
	if _, ok := w.Gone(3); ok {
		t.Fatal("broker 3 is gone without any loss")
	}
	// An exchange begun before the loss, answered only now, proves
	// nothing; one begun after it does: the broker is back.
	w.Reached(2, 0)
	if _, ok := w.Gone(2); !ok {
		t.Fatal("an exchange begun before the loss cleared broker 2")
	}
	w.Reached(2, w.Mark())
	if _, ok := w.Gone(2); ok || w.Any() {
		t.Fatal("broker 2 still gone after it was reached")
	}
}

func TestWatchClearsABrokerThatStillListens(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	var open []net.Conn // kept open, as a broker's listener does
	defer func() {
		for _, c := range open {
			c.Close()
		}
	}()
	accepted := make(chan struct{})
	go func() {
		defer close(accepted)
		c, err := ln.Accept()
		if err == nil {
			open = append(open, c)
		}
	}()
	w := NewWatch(nil, nil)
	w.Lost(2, ln.Addr().String())
	settle(t, w, 2)
	<-accepted
	if _, ok := w.Gone(2); ok || w.Any() {
		t.Fatal("a broker whose listener accepts is gone: a broken connection alone must not make it so")
	}
}

// A killed process's listener may complete a dial after its connections
// were reset; the probe's own connection is then reset or closed at once.
func TestWatchFindsABrokerWhoseListenerClosesWhatItAccepts(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			c.Close()
		}
	}()
	w := NewWatch(nil, nil)
	w.Lost(2, ln.Addr().String())
	settle(t, w, 2)
	if _, ok := w.Gone(2); !ok {
		t.Fatal("a broker whose listener closes every connection at once is not gone")
	}
}

func TestWatchClearsWhenReachedDuringTheProbe(t *testing.T) {
	w := NewWatch(nil, nil)
	release := make(chan struct{})
	w.probe = func(ctx context.Context, addr string) bool {
		<-release
		return true
	}
	w.Lost(2, "peer:9092")
	w.Lost(2, "peer:9092") // one probe at a time
	w.Reached(2, w.Mark())
	ch := w.Changed()
	close(release)
	<-ch // wait for the probe's end
	settle(t, w, 2)
	if _, ok := w.Gone(2); ok || w.Any() {
		t.Fatal("a refused probe that ended after the broker was reached made it gone")
	}
}

// killableBroker accepts connections and answers nothing; kill closes
// its listener and every connection, as the kernel does for a process
// that dies.
type killableBroker struct {
	ln    net.Listener
	first chan struct{} // closed at the first request, of clientID
	mu    sync.Mutex
	conns []net.Conn
	// clientID is the client id of the first request, set before first
	// is closed.
	clientID string
}

func newKillableBroker(t *testing.T) *killableBroker {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	b := &killableBroker{ln: ln, first: make(chan struct{})}
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			b.mu.Lock()
			b.conns = append(b.conns, c)
			b.mu.Unlock()
			go func() {
				if id := answerApiVersions(c); id != "" {
					b.mu.Lock()
					if b.clientID == "" {
						b.clientID = id
						close(b.first)
					}
					b.mu.Unlock()
				}
			}()
		}
	}()
	t.Cleanup(b.kill)
	return b
}

// answerApiVersions answers the ApiVersions requests read from c (with
// no versions: the Watch only needs an answer) until c ends, and
// returns the client id of the first.
func answerApiVersions(c net.Conn) (clientID string) {
	first := make(chan string, 1)
	go func() {
		defer close(first)
		for {
			var size [4]byte
			if _, err := io.ReadFull(c, size[:]); err != nil {
				return
			}
			frame := make([]byte, binary.BigEndian.Uint32(size[:]))
			if _, err := io.ReadFull(c, frame); err != nil || len(frame) < 10 {
				return
			}
			n := int(binary.BigEndian.Uint16(frame[8:]))
			if 10+n <= len(frame) {
				select {
				case first <- string(frame[10 : 10+n]):
				default:
				}
			}
			resp := kmsg.NewApiVersionsResponse()
			resp.Version = int16(binary.BigEndian.Uint16(frame[2:]))
			out := binary.BigEndian.AppendUint32(make([]byte, 4), binary.BigEndian.Uint32(frame[4:]))
			out = resp.AppendTo(out)
			binary.BigEndian.PutUint32(out, uint32(len(out)-4))
			if _, err := c.Write(out); err != nil {
				return
			}
		}
	}()
	return <-first
}

func (b *killableBroker) kill() {
	b.ln.Close()
	b.mu.Lock()
	defer b.mu.Unlock()
	for _, c := range b.conns {
		c.Close()
	}
	b.conns = nil
}

// waitWatch waits for cond on w's changes.
func waitWatch(t *testing.T, w *Watch, cond func() bool) {
	t.Helper()
	for {
		ch := w.Changed()
		if cond() {
			return
		}
		<-ch
	}
}

func TestTrackedBrokerIsGoneTheMomentItsProcessDies(t *testing.T) {
	b := newKillableBroker(t)
	w := NewWatch(nil, nil)
	defer w.Track(nil, "")
	w.Track(map[int32]string{2: b.ln.Addr().String()}, "test")
	// The tracker says who it is at once, then nothing is exchanged
	// on the connection, so only its end can tell.
	select {
	case <-b.first:
	case <-time.After(trackTimeout):
		t.Fatalf("the tracked connection sent no request within %v", trackTimeout)
	}
	if b.clientID != "test" {
		t.Errorf("the tracked connection's first request came from client id %q, want test", b.clientID)
	}
	if _, ok := w.Gone(2); ok {
		t.Fatal("a live broker is gone")
	}
	b.kill()
	waitWatch(t, w, func() bool { return w.state(2).gone })
	// Untracked, the broker is no longer dialed.
	w.Track(map[int32]string{}, "test")
	w.trackMu.Lock()
	n := len(w.tracked)
	w.trackMu.Unlock()
	if n != 0 {
		t.Fatalf("%d brokers still tracked", n)
	}
}

func TestTrackedBrokerThatComesBackIsReached(t *testing.T) {
	addr := refusedAddr(t)
	w := NewWatch(nil, nil)
	defer w.Track(nil, "")
	w.Track(map[int32]string{2: addr}, "test")
	waitWatch(t, w, func() bool { return w.state(2).gone })
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		t.Fatalf("listening again on %s: %v", addr, err)
	}
	defer ln.Close()
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			defer c.Close()
			go answerApiVersions(c)
		}
	}()
	waitWatch(t, w, func() bool { _, ok := w.Gone(2); return !ok })
}

// CheckHangups finds a tracked connection the broker closed without the
// tracking goroutine's help: here there is none, as if it had not been
// scheduled yet.
func TestCheckHangupsFindsAClosedConnectionBeforeItsReader(t *testing.T) {
	b := newKillableBroker(t)
	c, err := Dial(context.Background(), b.ln.Addr().String(), "test")
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	if _, err := c.Do(context.Background(), kmsg.NewPtrApiVersionsRequest(), time.Minute); err != nil {
		t.Fatal(err)
	}
	<-b.first
	w := NewWatch(nil, nil)
	w.tracked[2] = &tracker{addr: b.ln.Addr().String(), stop: make(chan struct{}), done: make(chan struct{}), conn: c}
	w.CheckHangups()
	if _, ok := w.Gone(2); ok || c.HungUp() {
		t.Fatal("an open connection is hung up")
	}
	b.kill()
	mqtest.WaitFor(t, "the kernel to see the close", func() (bool, string) { return c.HungUp(), "open" })
	w.CheckHangups()
	if _, ok := w.Gone(2); !ok {
		t.Fatal("a broker whose connection the kernel saw closed is not suspect after CheckHangups")
	}
	waitWatch(t, w, func() bool { return w.state(2).gone })
}
