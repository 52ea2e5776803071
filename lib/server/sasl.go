package server

import (
	"errors"
	"fmt"
	"slices"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/mqproject/mq/lib/auth"
)

// The API keys of SASL, which the server answers itself.
const (
	saslHandshakeKey    = 17
	saslAuthenticateKey = 36
)

// DefaultSASLMaxReceiveSize is Kafka's sasl.server.max.receive.size
// default: the largest frame a connection on a SASL listener may send
// before it has authenticated.
const DefaultSASLMaxReceiveSize = 512 << 10

// DefaultSASLMechanisms are the mechanisms enabled when SASL.Mechanisms
// is empty (Kafka's sasl.enabled.mechanisms default is GSSAPI, which mq
// does not have).
var DefaultSASLMechanisms = []string{auth.ScramSHA256, auth.ScramSHA512}

// SASL serves the sasl_plaintext:// and sasl_ssl:// listeners.
type SASL struct {
	// Mechanisms are those enabled (sasl.enabled.mechanisms): auth.Plain,
	// auth.ScramSHA256, auth.ScramSHA512; default DefaultSASLMechanisms.
	Mechanisms []string
	// PlainWithoutTLS lets PLAIN be used on sasl_plaintext:// listeners,
	// where the password crosses the network in the clear. Without it
	// PLAIN is offered on sasl_ssl:// listeners only.
	PlainWithoutTLS bool
	// Credentials looks up the users' SCRAM credentials; it is called on
	// connection goroutines, concurrently.
	Credentials auth.Credentials
	// MaxReceiveSize is the largest frame accepted before a connection
	// has authenticated (sasl.server.max.receive.size); a larger one
	// closes the connection before its body is read. Default
	// DefaultSASLMaxReceiveSize.
	MaxReceiveSize int32
	// FailedAuthenticationDelay holds back the answer to a refused
	// SaslAuthenticate, and the close, this long
	// (connection.failed.authentication.delay.ms), so that a client
	// guessing passwords gets a few guesses a second per connection. The
	// wait is the connection's own: others are not held up. Default
	// DefaultFailedAuthenticationDelay; negative means none.
	FailedAuthenticationDelay time.Duration
}

// DefaultFailedAuthenticationDelay is Kafka's
// connection.failed.authentication.delay.ms default.
const DefaultFailedAuthenticationDelay = 100 * time.Millisecond

// check validates s and fills in its defaults.
func (s *SASL) check() error {
	if s.Credentials == nil {
		return errors.New("server: SASL without a credential lookup")
	}
	if len(s.Mechanisms) == 0 {
		s.Mechanisms = DefaultSASLMechanisms
	}
	for _, m := range s.Mechanisms {
		if m != auth.Plain && !slices.Contains(auth.ScramMechanisms, m) {
			return fmt.Errorf("server: SASL mechanism %q: want PLAIN, SCRAM-SHA-256 or SCRAM-SHA-512", m)
		}
	}
	if s.MaxReceiveSize == 0 {
		s.MaxReceiveSize = DefaultSASLMaxReceiveSize
	}
	if s.FailedAuthenticationDelay == 0 {
		s.FailedAuthenticationDelay = DefaultFailedAuthenticationDelay
	}
	if s.MaxReceiveSize < minRequestHeader {
		return fmt.Errorf("server: SASL MaxReceiveSize %d below the minimum request size %d", s.MaxReceiveSize, minRequestHeader)
	}
	return nil
}

// saslAPIs are the versions of the SASL APIs the server advertises when
// it has SASL. SaslHandshake v0 is listed, because librdkafka takes a
// broker without it for one that has no SASL at all, but not served:
// after a v0 handshake the client would send bare tokens without
// Kafka's request framing. A v0 request is answered UNSUPPORTED_VERSION
// and the connection closed; every client that sends ApiVersions (and
// finds SaslAuthenticate in the answer) uses v1. SaslAuthenticate v2 is
// its flexible version.
var saslAPIs = []kmsg.ApiVersionsResponseApiKey{
	{ApiKey: saslHandshakeKey, MinVersion: 0, MaxVersion: 1},
	{ApiKey: saslAuthenticateKey, MinVersion: 0, MaxVersion: 2},
}

// mechanisms are the mechanisms offered on the connection's listener:
// PLAIN only with TLS unless PlainWithoutTLS.
func (c *conn) mechanisms() []string {
	cfg := c.s.cfg.SASL
	if c.tls || cfg.PlainWithoutTLS {
		return cfg.Mechanisms
	}
	return slices.DeleteFunc(slices.Clone(cfg.Mechanisms), func(m string) bool { return m == auth.Plain })
}

// saslRequest answers SaslHandshake and SaslAuthenticate on the reader
// goroutine. The connection's SASL state (saslPending, session) and its
// ConnInfo.Principal are the reader's: the first request after a
// successful SaslAuthenticate is read after they are set.
func (c *conn) saslRequest(body kmsg.Request) Response {
	switch r := body.(type) {
	case *kmsg.SASLHandshakeRequest:
		resp := r.ResponseKind().(*kmsg.SASLHandshakeResponse)
		if !c.saslListener {
			resp.ErrorCode = kerr.IllegalSaslState.Code
			return Response{Msg: resp}
		}
		if r.Version == 0 {
			resp.ErrorCode = kerr.UnsupportedVersion.Code
			c.logAuth("SaslHandshake v0 (bare SASL tokens) is not served, only v1; closing connection")
			return Response{Msg: resp, CloseAfter: true}
		}
		if !c.saslPending || c.session != nil {
			resp.ErrorCode = kerr.IllegalSaslState.Code
			return Response{Msg: resp, CloseAfter: true}
		}
		offered := c.mechanisms()
		resp.SupportedMechanisms = offered
		if !slices.Contains(offered, r.Mechanism) {
			resp.ErrorCode = kerr.UnsupportedSaslMechanism.Code
			c.logAuth("SASL mechanism not enabled on this listener; closing connection", "mechanism", r.Mechanism, "enabled", offered)
			return Response{Msg: resp, CloseAfter: true}
		}
		s, err := auth.NewSession(r.Mechanism, c.s.cfg.SASL.Credentials)
		if err != nil {
			resp.ErrorCode = kerr.UnsupportedSaslMechanism.Code
			return Response{Msg: resp, CloseAfter: true}
		}
		c.session = s
		return Response{Msg: resp}
	case *kmsg.SASLAuthenticateRequest:
		resp := r.ResponseKind().(*kmsg.SASLAuthenticateResponse)
		if !c.saslPending || c.session == nil {
			resp.ErrorCode = kerr.IllegalSaslState.Code
			msg := "SaslAuthenticate without a SaslHandshake before it"
			resp.ErrorMessage = &msg
			return Response{Msg: resp, CloseAfter: true}
		}
		out, err := c.session.Step(r.SASLAuthBytes)
		if err != nil {
			c.s.authFailures.Add(1)
			c.logAuth("SASL authentication failed; closing connection", "mechanism", c.session.Mechanism(), "err", err)
			c.session = nil
			c.failedAuthenticationDelay()
			resp.ErrorCode = kerr.SaslAuthenticationFailed.Code
			msg := "authentication failed: invalid credentials"
			resp.ErrorMessage = &msg
			return Response{Msg: resp, CloseAfter: true}
		}
		resp.SASLAuthBytes = out
		if c.session.Done() {
			c.info.Principal = auth.User(c.session.User())
			c.saslPending = false
			c.log.Debug("SASL authenticated", "mechanism", c.session.Mechanism(), "principal", c.info.Principal)
			c.session = nil
		}
		// SessionLifetimeMillis stays 0: the session does not expire and
		// the client never re-authenticates (KIP-368).
		return Response{Msg: resp}
	}
	return Response{CloseAfter: true}
}

// failedAuthenticationDelay waits SASL.FailedAuthenticationDelay on the
// reader goroutine, or until the connection or the server closes.
func (c *conn) failedAuthenticationDelay() {
	d := c.s.cfg.SASL.FailedAuthenticationDelay
	if d <= 0 {
		return
	}
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
	case <-c.ctx.Done():
	case <-c.s.draining:
	}
}

// logAuth logs a refused authentication, at most one line a second for
// the whole server (the line counts those held back).
func (c *conn) logAuth(msg string, args ...any) {
	if ok, held := c.s.authLog.allow(time.Now()); ok {
		if held > 0 {
			args = append(args, "more_refused_since_last_logged", held)
		}
		c.log.Info(msg, args...)
	}
}
