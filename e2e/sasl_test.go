package e2e

import (
	"bytes"
	"context"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/binary"
	"errors"
	"io"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
	"github.com/twmb/franz-go/pkg/sasl"
	"github.com/twmb/franz-go/pkg/sasl/plain"
	"github.com/twmb/franz-go/pkg/sasl/scram"

	"github.com/mqproject/mq/lib/mqtest"
)

// saslBroker is an mqd with sasl_plaintext:// and sasl_ssl:// listeners
// (beside the harness's tcp:// and unix://), every mechanism enabled,
// and the user alice (password alicePassword) created through the Unix
// socket, which needs no login: how a cluster's first user is made.
type saslBroker struct {
	*broker
	plainAddr, sslAddr string // host:port of sasl_plaintext:// and sasl_ssl://
	server             mqtest.TLSFiles
	ca                 *mqtest.CA
	pwFile             string // alice's password, in a file
	dir                string
}

const alicePassword = "correct horse battery staple"

func startSASLBroker(t *testing.T, props ...string) *saslBroker {
	t.Helper()
	dir := t.TempDir()
	ca := mqtest.NewCA(t, "e2e SASL CA")
	sb := &saslBroker{ca: ca, dir: dir,
		server: ca.WriteFiles(t, dir, "server", mqtest.Leaf{Subject: pkix.Name{CommonName: "mqd"}, Hosts: []string{"127.0.0.1", "localhost"}}),
	}
	addrs := freeAddrs(t, 2)
	sb.plainAddr, sb.sslAddr = addrs[0], addrs[1]
	props = append([]string{openACLs, "sasl.enabled.mechanisms=PLAIN,SCRAM-SHA-256,SCRAM-SHA-512",
		"ssl.certificate.location=" + sb.server.Cert, "ssl.key.location=" + sb.server.Key}, props...)
	sb.broker = startBroker(t, brokerOpts{props: props, args: []string{"--listen", "sasl_plaintext://" + sb.plainAddr, "--listen", "sasl_ssl://" + sb.sslAddr}})
	sb.pwFile = filepath.Join(dir, "alice.pw")
	if err := os.WriteFile(sb.pwFile, []byte(alicePassword+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	for _, mech := range []string{"SCRAM-SHA-256", "SCRAM-SHA-512"} {
		r := runTool(t, time.Minute, "", "mqctl", "-b", "unix://"+sb.socket, "user", "create", "alice", "--mechanism", mech, "--password-file", sb.pwFile)
		if r.code != 0 {
			t.Fatalf("mqctl user create alice over the Unix socket: exit %d\n%s", r.code, r.stderr)
		}
	}
	return sb
}

func (sb *saslBroker) tlsConfig() *tls.Config {
	pool := x509.NewCertPool()
	pool.AppendCertsFromPEM(sb.ca.PEM)
	return &tls.Config{RootCAs: pool, MinVersion: tls.VersionTLS12}
}

// saslClient is a kgo client logging in with m, on the sasl_ssl://
// listener when withTLS, else on sasl_plaintext://.
func (sb *saslBroker) saslClient(t *testing.T, m sasl.Mechanism, withTLS bool, opts ...kgo.Opt) *kgo.Client {
	t.Helper()
	seed := sb.plainAddr
	all := []kgo.Opt{kgo.SASL(m), kgo.AllowAutoTopicCreation()}
	if withTLS {
		seed = sb.sslAddr
		all = append(all, kgo.DialTLSConfig(sb.tlsConfig()))
	}
	cl, err := kgo.NewClient(append(append(all, kgo.SeedBrokers(seed)), opts...)...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(cl.Close)
	return cl
}

// loginError is what a client logging in with m gets for a Metadata
// request: nil when it logged in.
func (sb *saslBroker) loginError(t *testing.T, m sasl.Mechanism, withTLS bool) error {
	t.Helper()
	cl := sb.saslClient(t, m, withTLS, kgo.RequestRetries(0), kgo.RetryTimeout(time.Second))
	_, err := kmsg.NewPtrMetadataRequest().RequestWith(ctxFor(t, 20*time.Second), cl)
	return err
}

func TestSASLScramKgoProducesAndConsumes(t *testing.T) {
	sb := startSASLBroker(t)
	for _, tc := range []struct {
		name string
		m    sasl.Mechanism
	}{
		{"SCRAM-SHA-256", scram.Auth{User: "alice", Pass: alicePassword}.AsSha256Mechanism()},
		{"SCRAM-SHA-512", scram.Auth{User: "alice", Pass: alicePassword}.AsSha512Mechanism()},
	} {
		t.Run(tc.name, func(t *testing.T) {
			cl := sb.saslClient(t, tc.m, false, kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()))
			produceConsume(t, cl, "sasl-"+strings.ToLower(tc.name), 20)
		})
	}
}

func TestSASLPlainOnlyOverTLS(t *testing.T) {
	sb := startSASLBroker(t)
	m := plain.Auth{User: "alice", Pass: alicePassword}.AsMechanism()
	cl := sb.saslClient(t, m, true, kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()))
	produceConsume(t, cl, "sasl-plain-tls", 10)
	if err := sb.loginError(t, m, false); !errors.Is(err, kerr.UnsupportedSaslMechanism) {
		t.Fatalf("PLAIN over sasl_plaintext: %v, want UNSUPPORTED_SASL_MECHANISM", err)
	}
}

func TestSASLRefusalsLeaveTheBrokerServingOthers(t *testing.T) {
	sb := startSASLBroker(t, "sasl.server.max.receive.size=4096")
	good := scram.Auth{User: "alice", Pass: alicePassword}.AsSha256Mechanism()

	// A wrong password and an unknown user read alike.
	wrong := sb.loginError(t, scram.Auth{User: "alice", Pass: "guess"}.AsSha256Mechanism(), false)
	unknown := sb.loginError(t, scram.Auth{User: "mallory", Pass: alicePassword}.AsSha512Mechanism(), true)
	for _, err := range []error{wrong, unknown} {
		if !errors.Is(err, kerr.SaslAuthenticationFailed) {
			t.Fatalf("bad login: %v, want SASL_AUTHENTICATION_FAILED", err)
		}
	}
	if !strings.Contains(sb.stderr.String(), "SASL authentication failed") {
		t.Fatalf("mqd did not log the refused login:\n%s", tail(sb.stderr.String(), 20))
	}

	// A request other than ApiVersions and SASL before authentication:
	// the connection is closed unanswered.
	c := dialRaw(t, sb.plainAddr)
	id := "e2e"
	req := kmsg.NewPtrMetadataRequest()
	req.SetVersion(9)
	if _, err := c.Write(rawRequest(req, &id)); err != nil {
		t.Fatal(err)
	}
	expectEOF(t, c, "Metadata before authentication")

	// A frame above sasl.server.max.receive.size before authentication:
	// closed on its size alone.
	c = dialRaw(t, sb.plainAddr)
	var size [4]byte
	binary.BigEndian.PutUint32(size[:], 4097)
	c.Write(size[:])
	expectEOF(t, c, "an oversized frame before authentication")

	// Others are served all along.
	cl := sb.saslClient(t, good, false, kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()))
	produceConsume(t, cl, "sasl-after-refusals", 5)
}

func dialRaw(t *testing.T, addr string) net.Conn {
	t.Helper()
	c, err := net.DialTimeout("tcp", addr, 5*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	return c
}

// rawRequest frames req with a v1 request header (v2 when flexible).
func rawRequest(req kmsg.Request, clientID *string) []byte {
	b := []byte{0, 0, 0, 0}
	b = binary.BigEndian.AppendUint16(b, uint16(req.Key()))
	b = binary.BigEndian.AppendUint16(b, uint16(req.GetVersion()))
	b = binary.BigEndian.AppendUint32(b, 1)
	b = binary.BigEndian.AppendUint16(b, uint16(len(*clientID)))
	b = append(b, *clientID...)
	if req.IsFlexible() {
		b = append(b, 0)
	}
	b = req.AppendTo(b)
	binary.BigEndian.PutUint32(b, uint32(len(b)-4))
	return b
}

// expectEOF waits for the broker to close c without answering.
func expectEOF(t *testing.T, c net.Conn, what string) {
	t.Helper()
	c.SetReadDeadline(time.Now().Add(15 * time.Second))
	n, err := io.Copy(io.Discard, c)
	var ne net.Error
	if errors.As(err, &ne) && ne.Timeout() {
		t.Fatalf("%s: the connection is still open", what)
	}
	if n != 0 {
		t.Fatalf("%s: answered with %d bytes", what, n)
	}
}

// kcatSASL runs kcat with librdkafka's SASL settings on the
// sasl_plaintext:// listener.
func kcatSASL(t *testing.T, sb *saslBroker, mech, user, password, stdin string, args ...string) (string, string, bool) {
	t.Helper()
	path, err := exec.LookPath("kcat")
	if err != nil {
		t.Skip("kcat not installed (CI installs it: apt-get install kcat)")
	}
	all := []string{"-b", sb.plainAddr, "-X", "security.protocol=SASL_PLAINTEXT", "-X", "sasl.mechanisms=" + mech,
		"-X", "sasl.username=" + user, "-X", "sasl.password=" + password}
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

func TestKcatWithSCRAM(t *testing.T) {
	if _, err := exec.LookPath("kcat"); err != nil {
		t.Skip("kcat not installed (CI installs it: apt-get install kcat)")
	}
	sb := startSASLBroker(t)
	for _, mech := range []string{"SCRAM-SHA-256", "SCRAM-SHA-512"} {
		topic := "kc-" + strings.ToLower(mech)
		if _, stderr, ok := kcatSASL(t, sb, mech, "alice", alicePassword, "a:one\nb:two\n", "-P", "-t", topic, "-K:"); !ok {
			t.Fatalf("kcat %s produce failed:\n%s\nmqd:\n%s", mech, stderr, tail(sb.stderr.String(), 10))
		}
		out, stderr, ok := kcatSASL(t, sb, mech, "alice", alicePassword, "", "-C", "-t", topic, "-e", "-f", `%k %s %o\n`)
		if !ok || out != "a one 0\nb two 1\n" {
			t.Fatalf("kcat %s consume: %q\n%s", mech, out, stderr)
		}
	}
	meta, _, _ := kcatSASL(t, sb, "SCRAM-SHA-256", "alice", alicePassword, "", "-L")
	if !strings.Contains(meta, "broker 1 at "+sb.plainAddr) {
		t.Fatalf("kcat -L on sasl_plaintext does not name the sasl_plaintext port %s:\n%s", sb.plainAddr, meta)
	}
	if out, stderr, ok := kcatSASL(t, sb, "SCRAM-SHA-256", "alice", "guess", "", "-L", "-m", "5"); ok || !strings.Contains(stderr, "uthentication") {
		t.Fatalf("kcat with a wrong password: ok %v\n%s\n%s", ok, out, stderr)
	}
}

func TestToolsWithSASL(t *testing.T) {
	sb := startSASLBroker(t)
	login := []string{"--sasl-mechanism", "SCRAM-SHA-512", "--sasl-user", "alice", "--sasl-password-file", sb.pwFile}
	run := func(stdin, name string, args ...string) toolResult {
		t.Helper()
		r := runTool(t, time.Minute, stdin, name, args...)
		if r.code != 0 {
			t.Fatalf("%s %s: exit %d\n%s", name, strings.Join(args, " "), r.code, r.stderr)
		}
		return r
	}
	b := "sasl_plaintext://" + sb.plainAddr
	run("one\ntwo\n", "mqpipe", append([]string{"produce", "-b", b, "-t", "tools-sasl"}, login...)...)
	if r := run("", "mqpipe", append([]string{"consume", "-b", b, "-t", "tools-sasl", "-e"}, login...)...); r.stdout != "one\ntwo\n" {
		t.Fatalf("mqpipe consume with SASL: %q", r.stdout)
	}
	// kcat's -X spelling, with mqpipe.
	kcatX := []string{"-X", "security.protocol=SASL_SSL", "-X", "ssl.ca.location=" + sb.server.CA, "-X", "sasl.mechanisms=PLAIN",
		"-X", "sasl.username=alice", "-X", "sasl.password=" + alicePassword}
	if r := run("", "mqpipe", append([]string{"consume", "-b", sb.sslAddr, "-t", "tools-sasl", "-e"}, kcatX...)...); r.stdout != "one\ntwo\n" {
		t.Fatalf("mqpipe consume with kcat's -X: %q", r.stdout)
	}
	// PLAIN over TLS: ssl:// with the CA and a SASL login is SASL_SSL.
	plainTLS := []string{"-b", "ssl://" + sb.sslAddr, "--tls-ca", sb.server.CA, "--sasl-mechanism", "PLAIN", "--sasl-user", "alice", "--sasl-password-file", sb.pwFile}
	if r := run("", "mqctl", append(plainTLS, "topic", "list")...); !strings.Contains(r.stdout, "tools-sasl") {
		t.Fatalf("mqctl topic list with PLAIN over TLS:\n%s", r.stdout)
	}
	// The password from the environment; users managed over SASL.
	t.Setenv("MQ_SASL_PASSWORD", alicePassword)
	env := []string{"-b", b, "--sasl-mechanism", "SCRAM-SHA-256", "--sasl-user", "alice"}
	bobPw := filepath.Join(sb.dir, "bob.pw")
	os.WriteFile(bobPw, []byte("bobs password\n"), 0o600)
	run("", "mqctl", append(env, "user", "create", "bob", "--mechanism", "SCRAM-SHA-256", "--password-file", bobPw, "--iterations", "4096")...)
	if r := run("", "mqctl", append(env, "user", "list", "-o", "json")...); !strings.Contains(r.stdout, `"name":"bob"`) || !strings.Contains(r.stdout, `"iterations":4096`) {
		t.Fatalf("mqctl user list -o json:\n%s", r.stdout)
	}
	if r := run("", "mqtail", append(env, "--once", "-o", "json", "--interval", "100ms")...); !strings.Contains(r.stdout, "tools-sasl") {
		t.Fatalf("mqtail --once with SASL:\n%s", r.stdout)
	}
	run("", "mqctl", append(env, "user", "delete", "bob")...)
	if r := run("", "mqctl", append(env, "user", "list")...); strings.Contains(r.stdout, "bob") {
		t.Fatalf("bob after user delete:\n%s", r.stdout)
	}
	t.Setenv("MQ_SASL_PASSWORD", "")

	// A wrong password: refused by the broker (exit 1, not usage).
	wrongPw := filepath.Join(sb.dir, "wrong.pw")
	os.WriteFile(wrongPw, []byte("guess\n"), 0o600)
	if r := runTool(t, time.Minute, "", "mqctl", "-b", b, "--sasl-mechanism", "SCRAM-SHA-256", "--sasl-user", "alice", "--sasl-password-file", wrongPw, "topic", "list"); r.code != 1 || !strings.Contains(r.stderr, "SASL_AUTHENTICATION_FAILED") {
		t.Fatalf("mqctl with a wrong password: exit %d\n%s", r.code, r.stderr)
	}
	// Flags that make no sense: one line on stderr, exit 2.
	for _, tc := range []struct {
		name string
		args []string
		want string
	}{
		{"mqctl", []string{"-b", b, "--sasl-user", "alice", "topic", "list"}, "need --sasl-mechanism"},
		{"mqctl", []string{"-b", b, "--sasl-mechanism", "SCRAM-SHA-256", "--sasl-user", "alice", "topic", "list"}, "needs a password"},
		{"mqpipe", []string{"consume", "-b", b, "-t", "x", "--sasl-mechanism", "GSSAPI", "--sasl-user", "alice"}, "want PLAIN, SCRAM-SHA-256 or SCRAM-SHA-512"},
		{"mqctl", []string{"-b", b, "topic", "list"}, "needs --sasl-mechanism"},
		{"mqpipe", []string{"consume", "-b", sb.plainAddr, "-t", "x", "-X", "security.protocol=sasl_plaintext"}, "needs -X sasl.mechanisms"},
		{"mqctl", []string{"-b", "unix://" + sb.socket, "user", "create", "carol", "--mechanism", "SCRAM-SHA-256"}, "--password-file FILE is required"},
		{"mqctl", []string{"-b", "unix://" + sb.socket, "user", "create", "carol", "--mechanism", "SCRAM-SHA-256", "--password-file", bobPw, "--iterations", "100"}, "want 4096 to 16384"},
	} {
		r := runTool(t, 30*time.Second, "", tc.name, tc.args...)
		if r.code != 2 || !strings.Contains(r.stderr, tc.want) || strings.Count(strings.TrimSpace(r.stderr), "\n") != 0 {
			t.Errorf("%s %s: exit %d, stderr %q; want exit 2 and one line with %q", tc.name, strings.Join(tc.args, " "), r.code, r.stderr, tc.want)
		}
	}
}
