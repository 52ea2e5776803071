package e2e

import (
	"bytes"
	"context"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/mqproject/mq/lib/mqtest"
)

// tlsBroker is an mqd with a tcp://, a unix:// and an ssl:// listener,
// its certificates from a CA of the test's.
type tlsBroker struct {
	*broker
	sslAddr string          // host:port of the ssl:// listener
	ca      *mqtest.CA      // signed the server's and the client's certificates
	server  mqtest.TLSFiles // the broker's certificate, key and the CA
	alice   mqtest.TLSFiles // a client certificate: CN=alice,O=example
	dir     string
}

// openACLs lets every principal do what no ACL names: these tests are
// about the transport, and a TLS listener otherwise closes what no ACL
// opens (acl_test.go).
const openACLs = "allow.everyone.if.no.acl.found=true"

// startTLSBroker starts mqd with TLS; clientAuth is ssl.client.auth.
func startTLSBroker(t *testing.T, clientAuth string, props ...string) *tlsBroker {
	t.Helper()
	dir := t.TempDir()
	ca := mqtest.NewCA(t, "e2e CA")
	tb := &tlsBroker{ca: ca, dir: dir,
		server: ca.WriteFiles(t, dir, "server", mqtest.Leaf{Subject: pkix.Name{CommonName: "mqd"}, Hosts: []string{"127.0.0.1", "localhost"}}),
		alice:  ca.WriteFiles(t, dir, "alice", mqtest.Leaf{Subject: pkix.Name{CommonName: "alice", Organization: []string{"example"}}, Client: true}),
	}
	addr, err := freeAddr()
	if err != nil {
		t.Fatal(err)
	}
	tb.sslAddr = addr
	props = append(props, "ssl.certificate.location="+tb.server.Cert, "ssl.key.location="+tb.server.Key,
		"ssl.ca.location="+tb.server.CA, "ssl.client.auth="+clientAuth)
	tb.broker = startBroker(t, brokerOpts{props: props, args: []string{"--listen", "ssl://" + addr}})
	return tb
}

// tlsConfig is a client's: trusting the test's CA, presenting files'
// certificate when given.
func (tb *tlsBroker) tlsConfig(t *testing.T, files *mqtest.TLSFiles) *tls.Config {
	t.Helper()
	pool := x509.NewCertPool()
	pool.AppendCertsFromPEM(tb.ca.PEM)
	cfg := &tls.Config{RootCAs: pool, MinVersion: tls.VersionTLS12}
	if files != nil {
		cert, err := tls.LoadX509KeyPair(files.Cert, files.Key)
		if err != nil {
			t.Fatal(err)
		}
		// Sent whatever CAs the broker names, as librdkafka does.
		cfg.GetClientCertificate = func(*tls.CertificateRequestInfo) (*tls.Certificate, error) { return &cert, nil }
	}
	return cfg
}

// tlsClient is a kgo client that bootstraps from the ssl:// listener.
func (tb *tlsBroker) tlsClient(t *testing.T, files *mqtest.TLSFiles, opts ...kgo.Opt) *kgo.Client {
	t.Helper()
	cl, err := kgo.NewClient(append([]kgo.Opt{kgo.SeedBrokers(tb.sslAddr), kgo.DialTLSConfig(tb.tlsConfig(t, files)), kgo.AllowAutoTopicCreation()}, opts...)...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(cl.Close)
	return cl
}

// waitLog waits until mqd's log holds s.
func (tb *tlsBroker) waitLog(t *testing.T, s string) {
	t.Helper()
	mqtest.WaitFor(t, "mqd to log "+s, func() (bool, string) {
		log := tb.stderr.String()
		return strings.Contains(log, s), tail(log, 10)
	})
}

// produceConsume produces n records to topic with cl and reads them back.
func produceConsume(t *testing.T, cl *kgo.Client, topic string, n int) {
	t.Helper()
	ctx := ctxFor(t, time.Minute)
	for i := range n {
		r := &kgo.Record{Topic: topic, Value: fmt.Appendf(nil, "secret %d", i)}
		if err := cl.ProduceSync(ctx, r).FirstErr(); err != nil {
			t.Fatalf("produce over TLS: %v", err)
		}
	}
	cl.AddConsumeTopics(topic)
	var got []string
	for len(got) < n {
		fs := cl.PollFetches(ctx)
		if err := ctx.Err(); err != nil {
			t.Fatalf("consumed %d of %d over TLS: %v", len(got), n, err)
		}
		fs.EachError(func(_ string, _ int32, err error) { t.Fatalf("fetch over TLS: %v", err) })
		fs.EachRecord(func(r *kgo.Record) { got = append(got, string(r.Value)) })
	}
	for i, v := range got {
		if want := fmt.Sprintf("secret %d", i); v != want {
			t.Fatalf("record %d = %q, want %q", i, v, want)
		}
	}
}

func TestTLSListenerServesKgo(t *testing.T) {
	tb := startTLSBroker(t, "none", openACLs)
	// mqd also listens on plaintext TCP: the metadata a client on the
	// TLS port gets must send it to the TLS port, or it could not
	// produce at all.
	cl := tb.tlsClient(t, nil, kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()))
	produceConsume(t, cl, "tls-kgo", 20)
	// The plaintext listener serves the same records.
	plain := tb.client(kgo.ConsumeTopics("tls-kgo"), kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()))
	fs := plain.PollRecords(ctxFor(t, 30*time.Second), 1)
	if fs.NumRecords() == 0 || string(fs.Records()[0].Value) != "secret 0" {
		t.Fatalf("plaintext consumer of what TLS produced: %v", fs.Errors())
	}
}

func TestTLSRequiredClientCertificates(t *testing.T) {
	tb := startTLSBroker(t, "required", openACLs, "log.level=debug")
	// Each refused client tries again until mqd's log says why: mqd logs
	// one failed handshake a second, so the refusal just before may hold
	// its line back.
	refused := func(name string, files *mqtest.TLSFiles, why string) {
		t.Helper()
		mqtest.WaitFor(t, "mqd to refuse "+name+" and log "+why, func() (bool, string) {
			cl := tb.tlsClient(t, files, kgo.RequestRetries(0))
			ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
			defer cancel()
			err := cl.Ping(ctx)
			cl.Close()
			if err == nil {
				t.Fatalf("%s: the broker answered", name)
			}
			log := tb.stderr.String()
			return strings.Contains(log, why), fmt.Sprintf("client error %v; mqd log: %s", err, tail(log, 5))
		})
	}
	refused("no client certificate", nil, "tls: client didn't provide a certificate")
	other := mqtest.NewCA(t, "another CA")
	stranger := other.WriteFiles(t, tb.dir, "mallory", mqtest.Leaf{Subject: pkix.Name{CommonName: "mallory"}, Client: true})
	refused("a certificate of another CA", &stranger, "certificate signed by unknown authority")
	expired := tb.ca.WriteFiles(t, tb.dir, "expired", mqtest.Leaf{Subject: pkix.Name{CommonName: "old"}, Client: true,
		NotBefore: time.Now().Add(-48 * time.Hour), NotAfter: time.Now().Add(-24 * time.Hour)})
	refused("an expired certificate", &expired, "certificate has expired")

	// A valid certificate: served, and its principal is the subject's DN.
	cl := tb.tlsClient(t, &tb.alice, kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()))
	produceConsume(t, cl, "tls-mtls", 5)
	tb.waitLog(t, `principal="User:CN=alice,O=example"`)
	if !tb.running() {
		t.Fatalf("mqd exited:\n%s", tb.stderr.String())
	}
}

func TestPlaintextClientOnTLSPortIsRefused(t *testing.T) {
	tb := startTLSBroker(t, "none", openACLs)
	cl, err := kgo.NewClient(kgo.SeedBrokers(tb.sslAddr), kgo.RequestRetries(1))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if err := cl.Ping(ctx); err == nil {
		t.Fatal("a plaintext client was answered on the TLS port")
	}
	tb.waitLog(t, "TLS handshake failed")
	// mqd serves on: a TLS client is answered.
	if err := tb.tlsClient(t, nil).Ping(ctxFor(t, 10*time.Second)); err != nil {
		t.Fatal(err)
	}
}

// servedSerial is the serial of the certificate the TLS port presents to
// a new connection.
func (tb *tlsBroker) servedSerial(t *testing.T) string {
	t.Helper()
	c, err := tls.DialWithDialer(&net.Dialer{Timeout: 5 * time.Second}, "tcp", tb.sslAddr, tb.tlsConfig(t, nil))
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	return c.ConnectionState().PeerCertificates[0].SerialNumber.String()
}

func TestSIGHUPReloadsTheCertificate(t *testing.T) {
	tb := startTLSBroker(t, "none", openACLs)
	first := tb.servedSerial(t)
	open := tb.tlsClient(t, nil)
	if err := open.Ping(ctxFor(t, 10*time.Second)); err != nil {
		t.Fatal(err)
	}

	certPEM, keyPEM := tb.ca.Issue(t, mqtest.Leaf{Subject: pkix.Name{CommonName: "mqd renewed"}, Hosts: []string{"127.0.0.1"}})
	writeFileAtomic(t, tb.server.Cert, certPEM)
	writeFileAtomic(t, tb.server.Key, keyPEM)
	if err := tb.cmd.Process.Signal(syscall.SIGHUP); err != nil {
		t.Fatal(err)
	}
	tb.waitLog(t, "SIGHUP: TLS certificate reloaded")
	second := tb.servedSerial(t)
	if second == first {
		t.Fatal("new connections still get the old certificate after SIGHUP")
	}
	// A connection made before goes on working.
	if err := open.Ping(ctxFor(t, 10*time.Second)); err != nil {
		t.Fatal(err)
	}

	// A key that is not the certificate's: refused, the pair before kept.
	_, otherKey := tb.ca.Issue(t, mqtest.Leaf{Subject: pkix.Name{CommonName: "other"}})
	writeFileAtomic(t, tb.server.Key, otherKey)
	if err := tb.cmd.Process.Signal(syscall.SIGHUP); err != nil {
		t.Fatal(err)
	}
	tb.waitLog(t, "SIGHUP: TLS reload failed; still serving the previous certificate")
	if got := tb.servedSerial(t); got != second {
		t.Fatalf("served serial %s after a failed reload, want %s", got, second)
	}
	if !tb.running() {
		t.Fatalf("mqd exited:\n%s", tb.stderr.String())
	}
}

func writeFileAtomic(t *testing.T, path string, data []byte) {
	t.Helper()
	tmp := path + ".tmp"
	if err := os.WriteFile(tmp, data, 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.Rename(tmp, path); err != nil {
		t.Fatal(err)
	}
}

// kcatTLS runs kcat against the TLS port with librdkafka's ssl settings
// and returns its stdout, stderr and whether it succeeded.
func kcatTLS(t *testing.T, tb *tlsBroker, files *mqtest.TLSFiles, stdin string, args ...string) (string, string, bool) {
	t.Helper()
	path, err := exec.LookPath("kcat")
	if err != nil {
		t.Skip("kcat not installed (CI installs it: apt-get install kcat)")
	}
	all := []string{"-b", tb.sslAddr, "-X", "security.protocol=ssl", "-X", "ssl.ca.location=" + tb.server.CA}
	if files != nil {
		all = append(all, "-X", "ssl.certificate.location="+files.Cert, "-X", "ssl.key.location="+files.Key)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, path, append(all, args...)...)
	cmd.Stdin = strings.NewReader(stdin)
	var out, errOut bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errOut
	err = cmd.Run()
	if ctx.Err() != nil {
		t.Fatalf("kcat %s did not finish in 60s\n%s", strings.Join(args, " "), errOut.String())
	}
	return out.String(), errOut.String(), err == nil
}

func TestKcatOverTLS(t *testing.T) {
	if _, err := exec.LookPath("kcat"); err != nil {
		t.Skip("kcat not installed (CI installs it: apt-get install kcat)")
	}
	t.Run("server certificate", func(t *testing.T) {
		tb := startTLSBroker(t, "none", openACLs)
		if _, stderr, ok := kcatTLS(t, tb, nil, "a:one\nb:two\n", "-P", "-t", "kc-tls", "-K:"); !ok {
			t.Fatalf("kcat produce over TLS failed:\n%s", stderr)
		}
		out, stderr, ok := kcatTLS(t, tb, nil, "", "-C", "-t", "kc-tls", "-e", "-f", `%k %s %o\n`)
		if !ok || out != "a one 0\nb two 1\n" {
			t.Fatalf("kcat consume over TLS: %q\n%s", out, stderr)
		}
		meta, _, _ := kcatTLS(t, tb, nil, "", "-L")
		if !strings.Contains(meta, "broker 1 at "+tb.sslAddr) {
			t.Fatalf("kcat -L over TLS does not name the TLS port %s:\n%s", tb.sslAddr, meta)
		}
	})
	t.Run("client certificate required", func(t *testing.T) {
		tb := startTLSBroker(t, "required", openACLs)
		if _, stderr, ok := kcatTLS(t, tb, &tb.alice, "k:v\n", "-P", "-t", "kc-mtls", "-K:"); !ok {
			t.Fatalf("kcat produce with a client certificate failed:\n%s", stderr)
		}
		out, stderr, ok := kcatTLS(t, tb, &tb.alice, "", "-C", "-t", "kc-mtls", "-e", "-f", `%k %s\n`)
		if !ok || out != "k v\n" {
			t.Fatalf("kcat consume with a client certificate: %q\n%s", out, stderr)
		}
		if out, _, ok := kcatTLS(t, tb, nil, "", "-L", "-m", "5"); ok {
			t.Fatalf("kcat without a client certificate was answered:\n%s", out)
		}
		tb.waitLog(t, "TLS handshake failed")
	})
}

func TestToolsOverTLS(t *testing.T) {
	tb := startTLSBroker(t, "required", openACLs)
	b := "ssl://" + tb.sslAddr
	tlsArgs := []string{"--tls-ca", tb.server.CA, "--tls-cert", tb.alice.Cert, "--tls-key", tb.alice.Key}
	run := func(stdin, name string, args ...string) toolResult {
		t.Helper()
		r := runTool(t, time.Minute, stdin, name, args...)
		if r.code != 0 {
			t.Fatalf("%s %s: exit %d\n%s", name, strings.Join(args, " "), r.code, r.stderr)
		}
		return r
	}
	run("one\ntwo\nthree\n", "mqpipe", append([]string{"produce", "-b", b, "-t", "tools-tls"}, tlsArgs...)...)
	if r := run("", "mqpipe", append([]string{"consume", "-b", b, "-t", "tools-tls", "-e"}, tlsArgs...)...); r.stdout != "one\ntwo\nthree\n" {
		t.Fatalf("mqpipe consume over TLS: %q", r.stdout)
	}
	// A tcp:// address with --tls-* is TLS too; flags before the command.
	if r := run("", "mqctl", append(append([]string{}, tlsArgs...), "-b", "tcp://"+tb.sslAddr, "topic", "list")...); !strings.Contains(r.stdout, "tools-tls") {
		t.Fatalf("mqctl topic list over TLS:\n%s", r.stdout)
	}
	if r := run("", "mqtail", append([]string{"-b", b, "--once", "-o", "json", "--interval", "100ms"}, tlsArgs...)...); !strings.Contains(r.stdout, "tools-tls") {
		t.Fatalf("mqtail --once over TLS:\n%s", r.stdout)
	}
	run("", "mqbench", append([]string{"produce", "-b", b, "-t", "bench-tls", "-n", "200", "-s", "100"}, tlsArgs...)...)

	// Without the client certificate the broker refuses: not a usage error.
	if r := runTool(t, time.Minute, "", "mqctl", "-b", b, "--tls-ca", tb.server.CA, "topic", "list"); r.code == 0 || r.code == 2 {
		t.Fatalf("mqctl without a client certificate: exit %d\n%s", r.code, r.stderr)
	}
}

func TestToolsRefuseBadTLSFlags(t *testing.T) {
	dir := t.TempDir()
	ca := mqtest.NewCA(t, "flags CA")
	f := ca.WriteFiles(t, dir, "tool", mqtest.Leaf{Subject: pkix.Name{CommonName: "tool"}, Client: true})
	bad := filepath.Join(dir, "bad.pem")
	if err := os.WriteFile(bad, []byte("not PEM\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	// Nothing listens there: the flags are refused before any connection.
	b := "ssl://127.0.0.1:1"
	for _, tc := range []struct {
		name string
		args []string
		want string
	}{
		{"mqpipe", []string{"produce", "-b", b, "-t", "x", "--tls-ca", filepath.Join(dir, "missing.pem")}, "--tls-ca: open"},
		{"mqpipe", []string{"consume", "-b", b, "-t", "x", "--tls-key", f.Key}, "--tls-key needs --tls-cert"},
		{"mqctl", []string{"-b", b, "--tls-ca", bad, "topic", "list"}, "no PEM certificate"},
		{"mqctl", []string{"-b", b, "topic", "list", "--tls-cert", f.Cert}, "--tls-cert needs --tls-key"},
		{"mqtail", []string{"-b", b, "--once", "--tls-cert", bad, "--tls-key", f.Key}, "--tls-cert " + bad},
		{"mqbench", []string{"produce", "-b", b, "--tls-ca", bad}, "no PEM certificate"},
		{"mqpipe", []string{"produce", "-t", "x", "-b", "unix:///tmp/none.sock", "--tls-ca", f.CA}, "is a Unix socket"},
	} {
		r := runTool(t, 30*time.Second, "", tc.name, tc.args...)
		lines := strings.Split(strings.TrimRight(r.stderr, "\n"), "\n")
		if r.code != 2 || len(lines) != 1 || !strings.Contains(r.stderr, tc.want) || r.stdout != "" {
			t.Errorf("%s %s: exit %d, stderr %q; want exit 2 and one line with %q", tc.name, strings.Join(tc.args, " "), r.code, r.stderr, tc.want)
		}
	}
}

func TestMQDRefusesIncompleteTLSSettings(t *testing.T) {
	dir := t.TempDir()
	addr, err := freeAddr()
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"--listen", "ssl://" + addr}, "ssl.certificate.location"},
		{[]string{"--listen", "ssl://" + addr, "-c", "ssl.certificate.location=" + filepath.Join(dir, "none.pem"), "-c", "ssl.key.location=" + filepath.Join(dir, "none-key.pem")}, "no such file"},
	} {
		args := append([]string{"--data-dir", filepath.Join(dir, "data"), "--listen", "unix://" + filepath.Join(dir, "s.sock")}, tc.args...)
		r := runTool(t, 30*time.Second, "", "mqd", args...)
		if r.code != 2 || !strings.Contains(r.stderr, tc.want) {
			t.Errorf("mqd %s: exit %d\n%s\nwant exit 2 naming %q", strings.Join(tc.args, " "), r.code, r.stderr, tc.want)
		}
	}
}
