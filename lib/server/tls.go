package server

import (
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"os"
	"sync"
	"sync/atomic"
	"time"

	"github.com/mqproject/mq/lib/auth"
)

// DefaultHandshakeTimeout bounds a TLS handshake when Config leaves
// HandshakeTimeout zero: a peer that connects to an ssl:// listener and
// does not finish its handshake in time is disconnected.
const DefaultHandshakeTimeout = 10 * time.Second

// ClientAuth says whether an ssl:// listener asks for client
// certificates (Kafka's ssl.client.auth).
type ClientAuth string

// The values of ssl.client.auth.
const (
	// ClientAuthNone asks for no client certificate.
	ClientAuthNone ClientAuth = "none"
	// ClientAuthRequested asks for one: a client may connect without,
	// but a certificate it sends must verify against the CA file.
	ClientAuthRequested ClientAuth = "requested"
	// ClientAuthRequired refuses a client without a certificate that
	// verifies against the CA file.
	ClientAuthRequired ClientAuth = "required"
)

// TLSFiles names the PEM files an ssl:// listener serves with.
type TLSFiles struct {
	// Cert is the server's certificate, followed by any intermediate
	// certificates; Key its private key (PKCS #1, PKCS #8 or SEC 1).
	Cert, Key string
	// CA holds the certificates that client certificates must chain to;
	// needed when ClientAuth is requested or required.
	CA string
	// ClientAuth is ClientAuthNone when empty.
	ClientAuth ClientAuth
}

// TLS serves the ssl:// listeners: the certificate and key, and the
// client CAs, read from TLSFiles and read again by Reload. Handshakes
// started after a Reload returns use what it read; connections already
// open keep what they were made with. Its methods are safe for
// concurrent use.
type TLS struct {
	files TLSFiles
	// current is what new handshakes use; Reload replaces it whole.
	current atomic.Pointer[tls.Config]
	// reload serializes Reloads, so that the files read last win.
	reload sync.Mutex
}

// NewTLS reads files and returns the TLS that serves them. Every file
// must be readable and hold what it should: a certificate that matches
// its key, and a CA file with at least one certificate when ClientAuth is
// requested or required.
func NewTLS(files TLSFiles) (*TLS, error) {
	switch files.ClientAuth {
	case "":
		files.ClientAuth = ClientAuthNone
	case ClientAuthNone, ClientAuthRequested, ClientAuthRequired:
	default:
		return nil, fmt.Errorf("server: client auth %q: want none, requested or required", files.ClientAuth)
	}
	t := &TLS{files: files}
	cfg, err := files.load()
	if err != nil {
		return nil, err
	}
	t.current.Store(cfg)
	return t, nil
}

// Reload reads the files again. When one cannot be read or does not hold
// a matching certificate and key (a file half replaced, say), it returns
// why and the listeners keep serving what they served.
func (t *TLS) Reload() error {
	t.reload.Lock()
	defer t.reload.Unlock()
	cfg, err := t.files.load()
	if err != nil {
		return err
	}
	t.current.Store(cfg)
	return nil
}

// Certificate returns the leaf certificate new handshakes present.
func (t *TLS) Certificate() *x509.Certificate {
	return t.current.Load().Certificates[0].Leaf
}

// serverConfig is the tls.Config of the listeners: it takes the current
// configuration at each handshake.
func (t *TLS) serverConfig() *tls.Config {
	return &tls.Config{
		MinVersion: tls.VersionTLS12,
		GetConfigForClient: func(*tls.ClientHelloInfo) (*tls.Config, error) {
			return t.current.Load(), nil
		},
	}
}

func (f TLSFiles) load() (*tls.Config, error) {
	if f.Cert == "" || f.Key == "" {
		return nil, errors.New("server: TLS needs a certificate file and a key file")
	}
	cert, err := tls.LoadX509KeyPair(f.Cert, f.Key)
	if err != nil {
		return nil, fmt.Errorf("server: TLS certificate %s and key %s: %w", f.Cert, f.Key, err)
	}
	cfg := &tls.Config{
		MinVersion:   tls.VersionTLS12,
		Certificates: []tls.Certificate{cert},
		ClientAuth:   tls.NoClientCert,
	}
	if f.ClientAuth == ClientAuthNone {
		return cfg, nil
	}
	if f.CA == "" {
		return nil, fmt.Errorf("server: TLS client auth %s needs a CA file", f.ClientAuth)
	}
	pool, err := loadCAs(f.CA)
	if err != nil {
		return nil, err
	}
	cfg.ClientCAs = pool
	cfg.ClientAuth = tls.VerifyClientCertIfGiven
	if f.ClientAuth == ClientAuthRequired {
		cfg.ClientAuth = tls.RequireAndVerifyClientCert
	}
	return cfg, nil
}

// loadCAs reads a PEM file of CA certificates.
func loadCAs(path string) (*x509.CertPool, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("server: TLS CA file: %w", err)
	}
	pool := x509.NewCertPool()
	if !pool.AppendCertsFromPEM(data) {
		return nil, fmt.Errorf("server: TLS CA file %s: no PEM certificate in it", path)
	}
	return pool, nil
}

// Principal is the principal of a verified client certificate, Kafka's
// default mapping: "User:" and the certificate's subject as an RFC 2253
// distinguished name ("User:CN=alice,OU=ops,O=example"). It is empty
// when the connection presented no verified certificate.
func Principal(st *tls.ConnectionState) string {
	if st == nil || len(st.VerifiedChains) == 0 || len(st.PeerCertificates) == 0 {
		return ""
	}
	return auth.CertificateUser(st.PeerCertificates[0])
}

// logLimiter lets through one log line per interval and counts the lines
// it held back, so that a flood of failed handshakes costs a line a
// second, not a line a connection.
type logLimiter struct {
	interval time.Duration
	mu       sync.Mutex
	next     time.Time
	held     int
}

// allow reports whether a line may be logged now, and how many were held
// back since the last one.
func (l *logLimiter) allow(now time.Time) (ok bool, held int) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if now.Before(l.next) {
		l.held++
		return false, 0
	}
	l.next = now.Add(l.interval)
	held, l.held = l.held, 0
	return true, held
}
