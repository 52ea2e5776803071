package server

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kmsg"
)

// fakeHandler answers with handle, advertising versions.
type fakeHandler struct {
	versions []kmsg.ApiVersionsResponseApiKey
	handle   func(ctx context.Context, c *ConnInfo, req *Request) Reply
}

func (h *fakeHandler) Handle(ctx context.Context, c *ConnInfo, req *Request) Reply {
	return h.handle(ctx, c, req)
}

func (h *fakeHandler) ApiVersions() []kmsg.ApiVersionsResponseApiKey { return h.versions }

// defaultVersions advertises Metadata and Produce at every version kmsg knows.
var defaultVersions = []kmsg.ApiVersionsResponseApiKey{
	{ApiKey: 0, MinVersion: 0, MaxVersion: 13},
	{ApiKey: 3, MinVersion: 0, MaxVersion: 13},
}

// echoReply answers any request with its response kind, empty.
func echoReply(_ context.Context, _ *ConnInfo, req *Request) Reply {
	return func() Response { return Response{Msg: req.Body.ResponseKind()} }
}

func newFake(handle func(context.Context, *ConnInfo, *Request) Reply) *fakeHandler {
	if handle == nil {
		handle = echoReply
	}
	return &fakeHandler{versions: defaultVersions, handle: handle}
}

// testLogger sends server logs to the test log, so a failure shows them.
func testLogger(t testing.TB) *slog.Logger {
	return slog.New(slog.NewTextHandler(tWriter{t}, &slog.HandlerOptions{Level: slog.LevelDebug}))
}

type tWriter struct{ t testing.TB }

func (w tWriter) Write(p []byte) (int, error) {
	w.t.Log(strings.TrimSpace(string(p)))
	return len(p), nil
}

// shortSocketPath returns a socket path short enough for sun_path (108
// bytes); t.TempDir can be too long.
func shortSocketPath(t testing.TB) string {
	dir, err := os.MkdirTemp("", "mqs")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	return filepath.Join(dir, "sub", "mqd.sock")
}

// startServer starts a server on a TCP and a Unix listener; it is closed
// when the test ends.
func startServer(t testing.TB, cfg Config, h Handler) *Server {
	t.Helper()
	if cfg.Listeners == nil {
		cfg.Listeners = []string{"tcp://127.0.0.1:0", "unix://" + shortSocketPath(t)}
	}
	if cfg.Logger == nil {
		if _, ok := t.(*testing.T); ok {
			cfg.Logger = testLogger(t)
		}
	}
	s, err := New(cfg, h)
	if err != nil {
		t.Fatal(err)
	}
	if err := s.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		s.Close()
		// Close does not wait; make sure no connection goroutine outlives
		// the test (and logs to it).
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		if err := s.Shutdown(ctx); err != nil {
			t.Errorf("connections still running after Close: %v", err)
		}
		if n := s.panics.Load(); n != 0 {
			t.Errorf("server recovered %d panics", n)
		}
	})
	return s
}

// dial connects to addr ("tcp://…" or "unix://…").
func dial(t testing.TB, addr string) net.Conn {
	t.Helper()
	network, a, err := parseListener(addr)
	if err != nil {
		t.Fatal(err)
	}
	c, err := net.DialTimeout(network, a, 5*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	c.SetDeadline(time.Now().Add(20 * time.Second))
	return c
}

// appendRequest appends a request frame: size, header (v1, or v2 with an
// empty tag section when flexible), body.
func appendRequest(dst []byte, req kmsg.Request, correlationID int32, clientID *string) []byte {
	start := len(dst)
	dst = append(dst, 0, 0, 0, 0)
	dst = binary.BigEndian.AppendUint16(dst, uint16(req.Key()))
	dst = binary.BigEndian.AppendUint16(dst, uint16(req.GetVersion()))
	dst = binary.BigEndian.AppendUint32(dst, uint32(correlationID))
	if clientID == nil {
		dst = binary.BigEndian.AppendUint16(dst, 0xffff)
	} else {
		dst = binary.BigEndian.AppendUint16(dst, uint16(len(*clientID)))
		dst = append(dst, *clientID...)
	}
	if req.IsFlexible() {
		dst = append(dst, 0)
	}
	dst = req.AppendTo(dst)
	binary.BigEndian.PutUint32(dst[start:], uint32(len(dst)-start-4))
	return dst
}

func send(t testing.TB, c net.Conn, req kmsg.Request, correlationID int32) {
	t.Helper()
	id := "test"
	if _, err := c.Write(appendRequest(nil, req, correlationID, &id)); err != nil {
		t.Fatal(err)
	}
}

// readFrame reads one response frame and returns its correlation id and the
// rest (header tag section, if any, included).
func readFrame(c net.Conn) (int32, []byte, error) {
	var size [4]byte
	if _, err := io.ReadFull(c, size[:]); err != nil {
		return 0, nil, err
	}
	n := binary.BigEndian.Uint32(size[:])
	if n < 4 || n > 64<<20 {
		return 0, nil, fmt.Errorf("bad response size %d", n)
	}
	b := make([]byte, n)
	if _, err := io.ReadFull(c, b); err != nil {
		return 0, nil, err
	}
	return int32(binary.BigEndian.Uint32(b)), b[4:], nil
}

// recv reads one response into resp (version set by the caller) and returns
// its correlation id.
func recv(t testing.TB, c net.Conn, resp kmsg.Response) int32 {
	t.Helper()
	corr, b, err := readFrame(c)
	if err != nil {
		t.Fatalf("read response: %v", err)
	}
	if resp.IsFlexible() && resp.Key() != apiVersionsKey {
		if len(b) == 0 || b[0] != 0 {
			t.Fatalf("flexible response header: want empty tag section, got % x", b[:min(len(b), 1)])
		}
		b = b[1:]
	}
	if err := resp.ReadFrom(b); err != nil {
		t.Fatalf("decode %s v%d response: %v", kmsg.NameForKey(resp.Key()), resp.GetVersion(), err)
	}
	return corr
}

// expectClosed reads until the server closes c, failing if it does not
// within the connection's deadline.
func expectClosed(t testing.TB, c net.Conn) {
	t.Helper()
	c.SetReadDeadline(time.Now().Add(10 * time.Second))
	_, err := io.Copy(io.Discard, c)
	var ne net.Error
	if errors.As(err, &ne) && ne.Timeout() {
		t.Fatal("connection not closed by the server")
	}
}

// checkAlive does an ApiVersions round trip on a new connection.
func checkAlive(t testing.TB, addr string) {
	t.Helper()
	c := dial(t, addr)
	req := kmsg.NewPtrApiVersionsRequest()
	req.SetVersion(3)
	send(t, c, req, 77)
	resp := kmsg.NewPtrApiVersionsResponse()
	resp.SetVersion(3)
	if corr := recv(t, c, resp); corr != 77 || resp.ErrorCode != 0 {
		t.Fatalf("ApiVersions on a fresh connection: corr %d error %d", corr, resp.ErrorCode)
	}
	c.Close()
}

func metadataRequest(version int16) *kmsg.MetadataRequest {
	req := kmsg.NewPtrMetadataRequest()
	req.SetVersion(version)
	return req
}
