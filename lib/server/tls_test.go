package server

import (
	"bytes"
	"context"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"os"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/mqproject/mq/lib/mqtest"
)

// pki is a CA with a server certificate for 127.0.0.1 and a client
// certificate, written into a temporary directory.
type pki struct {
	ca     *mqtest.CA
	server mqtest.TLSFiles
	client mqtest.TLSFiles
	dir    string
}

var aliceSubject = pkix.Name{CommonName: "alice", OrganizationalUnit: []string{"ops"}, Organization: []string{"example"}}

func newPKI(t *testing.T) *pki {
	t.Helper()
	p := &pki{ca: mqtest.NewCA(t, "test CA"), dir: t.TempDir()}
	p.server = p.ca.WriteFiles(t, p.dir, "server", mqtest.Leaf{Subject: pkix.Name{CommonName: "mqd"}, Hosts: []string{"127.0.0.1", "localhost"}})
	p.client = p.ca.WriteFiles(t, p.dir, "alice", mqtest.Leaf{Subject: aliceSubject, Client: true})
	return p
}

func (p *pki) files(auth ClientAuth) TLSFiles {
	return TLSFiles{Cert: p.server.Cert, Key: p.server.Key, CA: p.server.CA, ClientAuth: auth}
}

// principals records the ConnInfo.Principal of every request handled.
type principals struct {
	mu   sync.Mutex
	seen []string
}

func (p *principals) handler() *fakeHandler {
	return newFake(func(ctx context.Context, c *ConnInfo, req *Request) Reply {
		p.mu.Lock()
		p.seen = append(p.seen, fmt.Sprintf("%s tls=%v principal=%q", strings.SplitN(c.Listener, "://", 2)[0], c.TLS != nil, c.Principal))
		p.mu.Unlock()
		return echoReply(ctx, c, req)
	})
}

func (p *principals) last() string {
	p.mu.Lock()
	defer p.mu.Unlock()
	if len(p.seen) == 0 {
		return ""
	}
	return p.seen[len(p.seen)-1]
}

// startTLSServer serves an ssl:// and a tcp:// listener with files.
func startTLSServer(t *testing.T, files TLSFiles, h Handler, cfg Config) (*Server, *TLS, *logBuffer) {
	t.Helper()
	tl, err := NewTLS(files)
	if err != nil {
		t.Fatal(err)
	}
	logs := &logBuffer{}
	cfg.Listeners = []string{"ssl://127.0.0.1:0", "tcp://127.0.0.1:0"}
	cfg.TLS = tl
	cfg.Logger = logs.logger(t)
	return startServer(t, cfg, h), tl, logs
}

// clientTLS is a client's TLS config trusting ca, with the certificate
// of files when given.
func clientTLS(t *testing.T, ca []byte, files *mqtest.TLSFiles) *tls.Config {
	t.Helper()
	pool := x509.NewCertPool()
	if !pool.AppendCertsFromPEM(ca) {
		t.Fatal("bad CA PEM")
	}
	cfg := &tls.Config{RootCAs: pool, ServerName: "127.0.0.1"}
	if files != nil {
		cert, err := tls.LoadX509KeyPair(files.Cert, files.Key)
		if err != nil {
			t.Fatal(err)
		}
		// Sent whatever CAs the server names, as OpenSSL clients do (Go's
		// would send none that another CA signed).
		cfg.GetClientCertificate = func(*tls.CertificateRequestInfo) (*tls.Certificate, error) { return &cert, nil }
	}
	return cfg
}

// roundTrip dials addr (ssl://) with cfg and does a Metadata round trip,
// returning the first error: the handshake's (on the client side, TLS 1.3
// reports a refused client certificate only at the first read) or the
// exchange's.
func roundTrip(t *testing.T, addr string, cfg *tls.Config) error {
	t.Helper()
	c, err := tls.DialWithDialer(&net.Dialer{Timeout: 5 * time.Second}, "tcp", strings.TrimPrefix(addr, "ssl://"), cfg)
	if err != nil {
		return err
	}
	defer c.Close()
	c.SetDeadline(time.Now().Add(10 * time.Second))
	id := "test"
	if _, err := c.Write(appendRequest(nil, metadataRequest(9), 5, &id)); err != nil {
		return err
	}
	corr, _, err := readFrame(c)
	if err != nil {
		return err
	}
	if corr != 5 {
		return fmt.Errorf("correlation id %d, want 5", corr)
	}
	return nil
}

func TestTLSListenerServesAndRecordsTheClientPrincipal(t *testing.T) {
	p := newPKI(t)
	var seen principals
	s, _, _ := startTLSServer(t, p.files(ClientAuthRequired), seen.handler(), Config{})
	ssl, tcp := s.Addrs()[0], s.Addrs()[1]
	if !strings.HasPrefix(ssl, "ssl://127.0.0.1:") {
		t.Fatalf("Addrs()[0] = %q, want ssl://127.0.0.1:PORT", ssl)
	}
	if err := roundTrip(t, ssl, clientTLS(t, p.ca.PEM, &p.client)); err != nil {
		t.Fatal(err)
	}
	// Kafka's default principal: the subject's RFC 2253 DN.
	if got, want := seen.last(), `ssl tls=true principal="User:CN=alice,OU=ops,O=example"`; got != want {
		t.Fatalf("handler saw %s, want %s", got, want)
	}
	// The plaintext listener beside it: no TLS, no principal.
	checkAlive(t, tcp)
	c := dial(t, tcp)
	send(t, c, metadataRequest(9), 1)
	if _, _, err := readFrame(c); err != nil {
		t.Fatal(err)
	}
	if got, want := seen.last(), `tcp tls=false principal=""`; got != want {
		t.Fatalf("handler saw %s, want %s", got, want)
	}
}

func TestTLSRequiredClientAuthRefusesWhatDoesNotVerify(t *testing.T) {
	p := newPKI(t)
	other := mqtest.NewCA(t, "another CA")
	stranger := other.WriteFiles(t, p.dir, "stranger", mqtest.Leaf{Subject: pkix.Name{CommonName: "mallory"}, Client: true})
	expired := p.ca.WriteFiles(t, p.dir, "expired", mqtest.Leaf{Subject: pkix.Name{CommonName: "old"}, Client: true,
		NotBefore: time.Now().Add(-48 * time.Hour), NotAfter: time.Now().Add(-24 * time.Hour)})
	var seen principals
	s, _, logs := startTLSServer(t, p.files(ClientAuthRequired), seen.handler(), Config{})
	ssl := s.Addrs()[0]
	for _, tc := range []struct {
		name  string
		files *mqtest.TLSFiles
		log   string
	}{
		{"no certificate", nil, "certificate"},
		{"another CA's certificate", &stranger, "unknown authority"},
		{"expired certificate", &expired, "expired"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if err := roundTrip(t, ssl, clientTLS(t, p.ca.PEM, tc.files)); err == nil {
				t.Fatal("round trip succeeded; want the connection refused")
			}
			mqtest.WaitFor(t, "the refusal logged", func() (bool, string) {
				return logs.contains(tc.log), logs.String()
			})
			logs.reset()
		})
		// One line a second at most: let the next refusal's line through.
		s.handshakeLog.mu.Lock()
		s.handshakeLog.next = time.Time{}
		s.handshakeLog.mu.Unlock()
	}
	if got := seen.last(); got != "" {
		t.Fatalf("a refused connection reached the handler: %s", got)
	}
	// The server still serves a good client.
	if err := roundTrip(t, ssl, clientTLS(t, p.ca.PEM, &p.client)); err != nil {
		t.Fatal(err)
	}
}

func TestTLSRequestedClientAuthAcceptsAClientWithoutCertificate(t *testing.T) {
	p := newPKI(t)
	var seen principals
	s, _, _ := startTLSServer(t, p.files(ClientAuthRequested), seen.handler(), Config{})
	if err := roundTrip(t, s.Addrs()[0], clientTLS(t, p.ca.PEM, nil)); err != nil {
		t.Fatal(err)
	}
	if got, want := seen.last(), `ssl tls=true principal=""`; got != want {
		t.Fatalf("handler saw %s, want %s", got, want)
	}
	if err := roundTrip(t, s.Addrs()[0], clientTLS(t, p.ca.PEM, &p.client)); err != nil {
		t.Fatal(err)
	}
	if got, want := seen.last(), `ssl tls=true principal="User:CN=alice,OU=ops,O=example"`; got != want {
		t.Fatalf("handler saw %s, want %s", got, want)
	}
	// A certificate that does not verify is refused even when requested.
	other := mqtest.NewCA(t, "another CA")
	stranger := other.WriteFiles(t, p.dir, "stranger", mqtest.Leaf{Subject: pkix.Name{CommonName: "mallory"}, Client: true})
	if err := roundTrip(t, s.Addrs()[0], clientTLS(t, p.ca.PEM, &stranger)); err == nil {
		t.Fatal("a certificate of another CA was accepted")
	}
}

func TestPlaintextClientOnTLSListenerIsClosedAndLogged(t *testing.T) {
	p := newPKI(t)
	s, _, logs := startTLSServer(t, p.files(ClientAuthNone), newFake(nil), Config{})
	c, err := net.DialTimeout("tcp", strings.TrimPrefix(s.Addrs()[0], "ssl://"), 5*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	send(t, c, metadataRequest(9), 1)
	expectClosed(t, c)
	mqtest.WaitFor(t, "the failed handshake logged", func() (bool, string) {
		return logs.contains("TLS handshake failed"), logs.String()
	})
	if err := roundTrip(t, s.Addrs()[0], clientTLS(t, p.ca.PEM, nil)); err != nil {
		t.Fatal(err)
	}
}

func TestTLSHandshakeHasADeadlineAndDoesNotBlockAccepting(t *testing.T) {
	p := newPKI(t)
	s, _, logs := startTLSServer(t, p.files(ClientAuthNone), newFake(nil), Config{HandshakeTimeout: 300 * time.Millisecond})
	addr := strings.TrimPrefix(s.Addrs()[0], "ssl://")
	// A peer that connects and says nothing.
	silent, err := net.DialTimeout("tcp", addr, 5*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	defer silent.Close()
	// While it holds its handshake, others are accepted and served.
	if err := roundTrip(t, s.Addrs()[0], clientTLS(t, p.ca.PEM, nil)); err != nil {
		t.Fatal(err)
	}
	// And it is disconnected once the deadline passes.
	silent.SetReadDeadline(time.Now().Add(10 * time.Second))
	start := time.Now()
	_, err = io.Copy(io.Discard, silent)
	var ne net.Error
	if errors.As(err, &ne) && ne.Timeout() {
		t.Fatal("a silent peer kept its connection past the handshake deadline")
	}
	if waited := time.Since(start); waited > 5*time.Second {
		t.Fatalf("a silent peer was disconnected after %v; the deadline is 300ms", waited)
	}
	mqtest.WaitFor(t, "the timeout logged", func() (bool, string) {
		return logs.contains("TLS handshake failed"), logs.String()
	})
}

func TestTLSReloadServesTheNewCertificateAndKeepsTheOldOnAFailure(t *testing.T) {
	p := newPKI(t)
	s, tl, _ := startTLSServer(t, p.files(ClientAuthNone), newFake(nil), Config{})
	ssl := s.Addrs()[0]
	serial := func() string {
		t.Helper()
		c, err := tls.DialWithDialer(&net.Dialer{Timeout: 5 * time.Second}, "tcp", strings.TrimPrefix(ssl, "ssl://"), clientTLS(t, p.ca.PEM, nil))
		if err != nil {
			t.Fatal(err)
		}
		defer c.Close()
		return c.ConnectionState().PeerCertificates[0].SerialNumber.String()
	}
	first := serial()
	if first != tl.Certificate().SerialNumber.String() {
		t.Fatalf("served serial %s, Certificate() says %s", first, tl.Certificate().SerialNumber)
	}
	// A new pair in the same files.
	certPEM, keyPEM := p.ca.Issue(t, mqtest.Leaf{Subject: pkix.Name{CommonName: "mqd renewed"}, Hosts: []string{"127.0.0.1"}})
	writeFile(t, p.server.Cert, certPEM)
	writeFile(t, p.server.Key, keyPEM)
	if err := tl.Reload(); err != nil {
		t.Fatal(err)
	}
	second := serial()
	if second == first {
		t.Fatal("still served the old certificate after Reload")
	}
	// A key that does not match the certificate: refused, the pair before
	// it still served.
	_, otherKey := p.ca.Issue(t, mqtest.Leaf{Subject: pkix.Name{CommonName: "other"}, Hosts: []string{"127.0.0.1"}})
	writeFile(t, p.server.Key, otherKey)
	if err := tl.Reload(); err == nil {
		t.Fatal("Reload accepted a key that does not match the certificate")
	}
	if got := serial(); got != second {
		t.Fatalf("served serial %s after a failed reload, want the previous %s", got, second)
	}
}

func TestNewTLSRefusesBadFiles(t *testing.T) {
	p := newPKI(t)
	bad := p.dir + "/bad.pem"
	writeFile(t, bad, []byte("not PEM\n"))
	for _, tc := range []struct {
		name  string
		files TLSFiles
		want  string
	}{
		{"no key", TLSFiles{Cert: p.server.Cert}, "needs a certificate file and a key file"},
		{"missing certificate", TLSFiles{Cert: p.dir + "/nope.pem", Key: p.server.Key}, "no such file"},
		{"bad certificate", TLSFiles{Cert: bad, Key: p.server.Key}, "certificate"},
		{"mismatched key", TLSFiles{Cert: p.server.Cert, Key: p.client.Key}, "private key does not match"},
		{"required without CA", TLSFiles{Cert: p.server.Cert, Key: p.server.Key, ClientAuth: ClientAuthRequired}, "needs a CA file"},
		{"bad CA", TLSFiles{Cert: p.server.Cert, Key: p.server.Key, CA: bad, ClientAuth: ClientAuthRequested}, "no PEM certificate"},
		{"unknown client auth", TLSFiles{Cert: p.server.Cert, Key: p.server.Key, ClientAuth: "maybe"}, "want none, requested or required"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := NewTLS(tc.files)
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("NewTLS: %v, want an error with %q", err, tc.want)
			}
		})
	}
	if _, err := New(Config{Listeners: []string{"ssl://127.0.0.1:0"}}, newFake(nil)); err == nil || !strings.Contains(err.Error(), "no TLS certificate") {
		t.Fatalf("New with an ssl:// listener and no TLS: %v", err)
	}
}

func TestTLSRefusesVersionsBelow12(t *testing.T) {
	p := newPKI(t)
	s, _, _ := startTLSServer(t, p.files(ClientAuthNone), newFake(nil), Config{})
	cfg := clientTLS(t, p.ca.PEM, nil)
	cfg.MinVersion, cfg.MaxVersion = tls.VersionTLS10, tls.VersionTLS11
	if err := roundTrip(t, s.Addrs()[0], cfg); err == nil {
		t.Fatal("a TLS 1.1 client was served")
	}
}

func writeFile(t *testing.T, path string, data []byte) {
	t.Helper()
	if err := os.WriteFile(path, data, 0o600); err != nil {
		t.Fatal(err)
	}
}

// logBuffer keeps a server's log lines for a test to look for, and
// passes them to the test log too.
type logBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
	t   testing.TB
}

func (l *logBuffer) logger(t testing.TB) *slog.Logger {
	l.t = t
	return slog.New(slog.NewTextHandler(l, &slog.HandlerOptions{Level: slog.LevelDebug}))
}

func (l *logBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	l.buf.Write(p)
	l.mu.Unlock()
	l.t.Log(strings.TrimSpace(string(p)))
	return len(p), nil
}

func (l *logBuffer) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.buf.String()
}

func (l *logBuffer) contains(s string) bool { return strings.Contains(l.String(), s) }

func (l *logBuffer) reset() {
	l.mu.Lock()
	l.buf.Reset()
	l.mu.Unlock()
}

// A TLS connection cannot use sendfile: file regions, small ones staged
// and large ones copied, go through the TLS connection byte-exact.
func TestFilePartsOverTLSAreSentByteExact(t *testing.T) {
	p := newPKI(t)
	content := make([]byte, 1<<20)
	for i := range content {
		content[i] = byte(i*13 + i>>9)
	}
	f := writeTemp(t, content)
	h := newFake(func(_ context.Context, _ *ConnInfo, req *Request) Reply {
		return func() Response {
			return Response{Parts: []Part{
				{Bytes: []byte("head")},
				{File: f, Offset: 7, Len: 1000},         // staged
				{File: f, Offset: 5000, Len: 600 << 10}, // copied: above the staging size
				{File: f, Offset: 0, Len: 3},
			}}
		}
	})
	s, _, _ := startTLSServer(t, p.files(ClientAuthNone), h, Config{})
	c, err := tls.DialWithDialer(&net.Dialer{Timeout: 5 * time.Second}, "tcp", strings.TrimPrefix(s.Addrs()[0], "ssl://"), clientTLS(t, p.ca.PEM, nil))
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	c.SetDeadline(time.Now().Add(20 * time.Second))
	for corr := range int32(3) {
		send(t, c, metadataRequest(9), corr)
		got, body, err := readFrame(c)
		if err != nil || got != corr {
			t.Fatalf("response %d: correlation id %d, %v", corr, got, err)
		}
		want := slices.Concat([]byte("head"), content[7:1007], content[5000:5000+600<<10], content[:3])
		if !bytes.Equal(body, want) {
			t.Fatalf("response %d: %d bytes, want %d; equal prefix %d", corr, len(body), len(want), commonPrefix(body, want))
		}
	}
}

func commonPrefix(a, b []byte) int {
	n := 0
	for n < len(a) && n < len(b) && a[n] == b[n] {
		n++
	}
	return n
}

func TestLogLimiterLetsOneLineASecondThroughAndCountsTheRest(t *testing.T) {
	l := logLimiter{interval: time.Second}
	t0 := time.Unix(1000, 0)
	if ok, held := l.allow(t0); !ok || held != 0 {
		t.Fatalf("first line: %v %d", ok, held)
	}
	for i := range 5 {
		if ok, _ := l.allow(t0.Add(time.Duration(i) * 100 * time.Millisecond)); ok {
			t.Fatalf("line %d within the second let through", i)
		}
	}
	if ok, held := l.allow(t0.Add(time.Second)); !ok || held != 5 {
		t.Fatalf("line a second later: %v, held %d; want through, 5 held", ok, held)
	}
}
