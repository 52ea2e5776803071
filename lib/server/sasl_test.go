package server

import (
	"context"
	"crypto/tls"
	"encoding/binary"
	"errors"
	"fmt"
	"os"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
	"github.com/twmb/franz-go/pkg/sasl"
	"github.com/twmb/franz-go/pkg/sasl/plain"
	"github.com/twmb/franz-go/pkg/sasl/scram"

	"github.com/mqproject/mq/lib/auth"
	"github.com/mqproject/mq/lib/mqtest"
)

// users is an in-memory credential store.
type users map[string]map[string]auth.Credential

func (u users) lookup(user, mechanism string) (auth.Credential, bool) {
	c, ok := u[user][mechanism]
	return c, ok
}

func newUsers(t *testing.T, password string, names ...string) users {
	t.Helper()
	u := users{}
	for _, name := range names {
		u[name] = map[string]auth.Credential{}
		for _, m := range auth.ScramMechanisms {
			c, err := auth.NewCredential(m, password, auth.MinIteration)
			if err != nil {
				t.Fatal(err)
			}
			u[name][m] = c
		}
	}
	return u
}

// startSASLServer serves sasl_plaintext://, sasl_ssl:// and tcp://
// listeners, in that order, for alice (password "s3cret").
// Its clients trust the server with tlsCfg.
func startSASLServer(t *testing.T, h Handler, cfg SASL) (s *Server, logs *logBuffer, tlsCfg *tls.Config) {
	t.Helper()
	p := newPKI(t)
	tl, err := NewTLS(p.files(ClientAuthNone))
	if err != nil {
		t.Fatal(err)
	}
	cfg.Credentials = newUsers(t, "s3cret", "alice").lookup
	logs = &logBuffer{}
	s = startServer(t, Config{
		Listeners: []string{"sasl_plaintext://127.0.0.1:0", "sasl_ssl://127.0.0.1:0", "tcp://127.0.0.1:0"},
		TLS:       tl,
		SASL:      &cfg,
		Logger:    logs.logger(t),
	}, h)
	ca, err := os.ReadFile(p.server.CA)
	if err != nil {
		t.Fatal(err)
	}
	return s, logs, clientTLS(t, ca, nil)
}

func scramMechanism(name, user, password string) sasl.Mechanism {
	a := scram.Auth{User: user, Pass: password}
	if name == auth.ScramSHA512 {
		return a.AsSha512Mechanism()
	}
	return a.AsSha256Mechanism()
}

// metadataWith connects to addr (sasl_plaintext:// or sasl_ssl://) with
// kgo and m (trusting the server with tlsCfg), and does one Metadata
// round trip; it may be called from any goroutine.
func metadataWith(t *testing.T, addr string, tlsCfg *tls.Config, m sasl.Mechanism) error {
	t.Helper()
	scheme, hostPort, _ := strings.Cut(addr, "://")
	opts := []kgo.Opt{kgo.SeedBrokers(hostPort), kgo.SASL(m), kgo.RequestRetries(0), kgo.RetryTimeout(time.Second)}
	if scheme == "sasl_ssl" {
		opts = append(opts, kgo.DialTLSConfig(tlsCfg.Clone()))
	}
	cl, err := kgo.NewClient(opts...)
	if err != nil {
		return err
	}
	defer cl.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	_, err = kmsg.NewPtrMetadataRequest().RequestWith(ctx, cl)
	return err
}

func TestSASLScramLogsInAndTheHandlerSeesThePrincipal(t *testing.T) {
	var seen principals
	s, _, tlsCfg := startSASLServer(t, seen.handler(), SASL{})
	for _, mech := range auth.ScramMechanisms {
		for _, addr := range s.Addrs()[:2] {
			if err := metadataWith(t, addr, tlsCfg, scramMechanism(mech, "alice", "s3cret")); err != nil {
				t.Fatalf("%s on %s: %v", mech, addr, err)
			}
			scheme, _, _ := strings.Cut(addr, "://")
			want := scheme + " tls=" + map[string]string{"sasl_plaintext": "false", "sasl_ssl": "true"}[scheme] + ` principal="User:alice"`
			if got := seen.last(); got != want {
				t.Fatalf("%s on %s: handler saw %s, want %s", mech, addr, got, want)
			}
		}
	}
	if n := s.AuthenticationFailures(); n != 0 {
		t.Fatalf("%d failures counted after good logins", n)
	}
}

func TestSASLWrongPasswordAndUnknownUserAreRefusedAlike(t *testing.T) {
	var seen principals
	s, logs, tlsCfg := startSASLServer(t, seen.handler(), SASL{})
	addr := s.Addrs()[0]
	var messages []string
	for _, tc := range []struct{ user, password string }{{"alice", "wrong-pw-1"}, {"mallory", "s3cret"}} {
		err := metadataWith(t, addr, tlsCfg, scramMechanism(auth.ScramSHA256, tc.user, tc.password))
		if !errors.Is(err, kerr.SaslAuthenticationFailed) {
			t.Fatalf("user %s: %v, want SASL_AUTHENTICATION_FAILED", tc.user, err)
		}
		messages = append(messages, err.Error())
	}
	if s.AuthenticationFailures() != 2 {
		t.Fatalf("%d failures counted, want 2", s.AuthenticationFailures())
	}
	if messages[0] != messages[1] {
		t.Fatalf("a wrong password and an unknown user read differently:\n%s\n%s", messages[0], messages[1])
	}
	if !logs.contains("SASL authentication failed") || !logs.contains("remote=127.0.0.1:") {
		t.Fatalf("no log line with the peer address for the refusal:\n%s", logs)
	}
	if logs.contains("wrong-pw-1") {
		t.Fatalf("the log holds the password:\n%s", logs)
	}
	if seen.last() != "" {
		t.Fatalf("a refused client reached the handler: %s", seen.last())
	}
	// Others are still served.
	if err := metadataWith(t, addr, tlsCfg, scramMechanism(auth.ScramSHA512, "alice", "s3cret")); err != nil {
		t.Fatalf("good login after the refusals: %v", err)
	}
}

func TestSASLPlainIsOfferedOnlyOverTLSUnlessAllowed(t *testing.T) {
	var seen principals
	s, _, tlsCfg := startSASLServer(t, seen.handler(), SASL{Mechanisms: []string{auth.Plain, auth.ScramSHA256}})
	plainAuth := plain.Auth{User: "alice", Pass: "s3cret"}.AsMechanism()
	if err := metadataWith(t, s.Addrs()[0], tlsCfg, plainAuth); !errors.Is(err, kerr.UnsupportedSaslMechanism) {
		t.Fatalf("PLAIN over sasl_plaintext: %v, want UNSUPPORTED_SASL_MECHANISM", err)
	}
	if err := metadataWith(t, s.Addrs()[1], tlsCfg, plainAuth); err != nil {
		t.Fatalf("PLAIN over sasl_ssl: %v", err)
	}
	if got := seen.last(); got != `sasl_ssl tls=true principal="User:alice"` {
		t.Fatalf("handler saw %s", got)
	}
	if err := metadataWith(t, s.Addrs()[1], tlsCfg, plain.Auth{User: "alice", Pass: "nope"}.AsMechanism()); !errors.Is(err, kerr.SaslAuthenticationFailed) {
		t.Fatalf("PLAIN with a wrong password: %v", err)
	}

	allowed, _, tlsCfg := startSASLServer(t, seen.handler(), SASL{Mechanisms: []string{auth.Plain}, PlainWithoutTLS: true})
	if err := metadataWith(t, allowed.Addrs()[0], tlsCfg, plainAuth); err != nil {
		t.Fatalf("PLAIN over sasl_plaintext when allowed: %v", err)
	}
	// SCRAM not enabled there.
	if err := metadataWith(t, allowed.Addrs()[0], tlsCfg, scramMechanism(auth.ScramSHA256, "alice", "s3cret")); !errors.Is(err, kerr.UnsupportedSaslMechanism) {
		t.Fatalf("SCRAM where only PLAIN is enabled: %v", err)
	}
}

func TestSASLListenerServesOnlyApiVersionsAndSaslBeforeAuthentication(t *testing.T) {
	s, logs, _ := startSASLServer(t, newFake(nil), SASL{})
	addr := s.Addrs()[0]

	// ApiVersions is answered and lists the SASL APIs.
	c := dial(t, strings.Replace(addr, "sasl_plaintext://", "tcp://", 1))
	req := kmsg.NewPtrApiVersionsRequest()
	req.SetVersion(3)
	send(t, c, req, 1)
	resp := kmsg.NewPtrApiVersionsResponse()
	resp.SetVersion(3)
	recv(t, c, resp)
	for _, k := range []int16{saslHandshakeKey, saslAuthenticateKey} {
		if !slices.ContainsFunc(resp.ApiKeys, func(a kmsg.ApiVersionsResponseApiKey) bool { return a.ApiKey == k }) {
			t.Fatalf("ApiVersions does not list key %d: %+v", k, resp.ApiKeys)
		}
	}
	// Anything else closes the connection.
	send(t, c, metadataRequest(9), 2)
	expectClosed(t, c)
	if !logs.contains("request before SASL authentication") {
		t.Fatalf("no log line for the request before authentication:\n%s", logs)
	}

	// SaslAuthenticate without a handshake: ILLEGAL_SASL_STATE, closed.
	c = dial(t, strings.Replace(addr, "sasl_plaintext://", "tcp://", 1))
	areq := kmsg.NewPtrSASLAuthenticateRequest()
	areq.SetVersion(1)
	areq.SASLAuthBytes = []byte("n,,n=alice,r=x")
	send(t, c, areq, 3)
	aresp := kmsg.NewPtrSASLAuthenticateResponse()
	aresp.SetVersion(1)
	recv(t, c, aresp)
	if aresp.ErrorCode != kerr.IllegalSaslState.Code {
		t.Fatalf("SaslAuthenticate without a handshake: error %d", aresp.ErrorCode)
	}
	expectClosed(t, c)

	// SaslHandshake v0 (bare tokens afterwards) is not served.
	c = dial(t, strings.Replace(addr, "sasl_plaintext://", "tcp://", 1))
	hreq := kmsg.NewPtrSASLHandshakeRequest()
	hreq.SetVersion(0)
	hreq.Mechanism = auth.ScramSHA256
	send(t, c, hreq, 4)
	hresp := kmsg.NewPtrSASLHandshakeResponse()
	hresp.SetVersion(0)
	recv(t, c, hresp)
	if hresp.ErrorCode != kerr.UnsupportedVersion.Code {
		t.Fatalf("SaslHandshake v0: error %d, want UNSUPPORTED_VERSION", hresp.ErrorCode)
	}
	expectClosed(t, c)

	// The tcp:// listener needs no authentication.
	checkAlive(t, s.Addrs()[2])
}

func TestSASLFrameAboveTheCapBeforeAuthenticationClosesTheConnection(t *testing.T) {
	s, logs, _ := startSASLServer(t, newFake(nil), SASL{MaxReceiveSize: 1000})
	addr := strings.Replace(s.Addrs()[0], "sasl_plaintext://", "tcp://", 1)
	c := dial(t, addr)
	// Only the size: the server must not wait for a body it will not read.
	var size [4]byte
	binary.BigEndian.PutUint32(size[:], 1001)
	if _, err := c.Write(size[:]); err != nil {
		t.Fatal(err)
	}
	expectClosed(t, c)
	if !logs.contains("sasl.server.max.receive.size") {
		t.Fatalf("no log line for the oversized frame:\n%s", logs)
	}
	// A frame within the cap is read (ApiVersions), and after
	// authentication the cap no longer applies.
	checkAlive(t, addr)
	big := kmsg.NewPtrMetadataRequest()
	big.SetVersion(9)
	for i := range 100 {
		tp := kmsg.NewMetadataRequestTopic()
		tp.Topic = kmsg.StringPtr(strings.Repeat("t", 20) + string(rune('a'+i%26)))
		big.Topics = append(big.Topics, tp)
	}
	if n := len(big.AppendTo(nil)); n <= 1000 {
		t.Fatalf("the request after authentication is only %d bytes", n)
	}
	cl, err := kgo.NewClient(kgo.SeedBrokers(strings.TrimPrefix(addr, "tcp://")), kgo.SASL(scramMechanism(auth.ScramSHA256, "alice", "s3cret")))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if _, err := big.RequestWith(ctx, cl); err != nil {
		t.Fatalf("a large request after authentication: %v", err)
	}
}

func TestNewRefusesASASLListenerWithoutSASL(t *testing.T) {
	if _, err := New(Config{Listeners: []string{"sasl_plaintext://127.0.0.1:0"}}, newFake(nil)); err == nil {
		t.Fatal("sasl_plaintext:// without SASL accepted")
	}
	if _, err := New(Config{Listeners: []string{"sasl_ssl://127.0.0.1:0"}, SASL: &SASL{Credentials: users{}.lookup}}, newFake(nil)); err == nil {
		t.Fatal("sasl_ssl:// without TLS accepted")
	}
	if _, err := New(Config{Listeners: []string{"tcp://127.0.0.1:0"}, SASL: &SASL{Credentials: users{}.lookup, Mechanisms: []string{"GSSAPI"}}}, newFake(nil)); err == nil {
		t.Fatal("GSSAPI accepted")
	}
}

func TestSASLRefusalIsDelayedWithoutHoldingUpOthers(t *testing.T) {
	const delay = 2 * time.Second
	s, _, tlsCfg := startSASLServer(t, newFake(nil), SASL{FailedAuthenticationDelay: delay})
	addr := s.Addrs()[0]
	start := time.Now()
	refused := make(chan error, 1)
	go func() {
		refused <- metadataWith(t, addr, tlsCfg, scramMechanism(auth.ScramSHA256, "alice", "guess"))
	}()
	mqtest.WaitFor(t, "the refused login counted", func() (bool, string) {
		return s.AuthenticationFailures() == 1, fmt.Sprintf("%d failures", s.AuthenticationFailures())
	})
	// The refusal waits; another client logs in and is served meanwhile.
	if err := metadataWith(t, addr, tlsCfg, scramMechanism(auth.ScramSHA256, "alice", "s3cret")); err != nil {
		t.Fatalf("good login while a refusal waits: %v", err)
	}
	select {
	case err := <-refused:
		t.Fatalf("the refusal came back before the good login was served (%v): %v", time.Since(start), err)
	default:
	}
	if err := <-refused; !errors.Is(err, kerr.SaslAuthenticationFailed) {
		t.Fatalf("refused login: %v", err)
	}
	if elapsed := time.Since(start); elapsed < delay {
		t.Fatalf("refusal answered after %v, before the %v delay", elapsed, delay)
	}
}
