package controller

import (
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"os"
	"sync"
	"sync/atomic"

	"github.com/mqproject/mq/lib/auth"
)

// TLSFiles names the PEM files of a node's identity on the Raft port.
type TLSFiles struct {
	// Cert is the node's certificate (then any intermediate CAs), Key its
	// private key. The node presents it both as a server (to the nodes
	// that dial it) and as a client (to the nodes it dials), so it must
	// carry both extended key usages, serverAuth and clientAuth.
	Cert, Key string
	// CA holds the cluster's CA certificates: every other node's
	// certificate must chain to one of them.
	CA string
}

// TLS is a node's identity on the Raft port: its certificate, the
// cluster CAs, read from TLSFiles and read again by Reload. Handshakes
// started after a Reload returns use what it read; open connections
// keep theirs. Safe for concurrent use.
type TLS struct {
	files   TLSFiles
	current atomic.Pointer[tlsState]
	reload  sync.Mutex
}

type tlsState struct {
	cert      tls.Certificate
	cas       *x509.CertPool
	principal string
}

// NewTLS reads files: the certificate must match its key and the CA file
// hold at least one certificate.
func NewTLS(files TLSFiles) (*TLS, error) {
	t := &TLS{files: files}
	st, err := files.load()
	if err != nil {
		return nil, err
	}
	t.current.Store(st)
	return t, nil
}

// Reload reads the files again. When they do not load it returns why and
// new handshakes keep using what was read before.
func (t *TLS) Reload() error {
	t.reload.Lock()
	defer t.reload.Unlock()
	st, err := t.files.load()
	if err != nil {
		return err
	}
	t.current.Store(st)
	return nil
}

// Principal is this node's own principal, from its certificate (see
// CertPrincipal).
func (t *TLS) Principal() string { return t.current.Load().principal }

// Certificate is the leaf certificate new handshakes present.
func (t *TLS) Certificate() *x509.Certificate { return t.current.Load().cert.Leaf }

// ServerConfig is the tls.Config of the Raft port: TLS 1.2 or later, a
// client certificate required and verified against the cluster CAs as
// they are at each handshake.
func (t *TLS) ServerConfig() *tls.Config {
	return &tls.Config{
		MinVersion: tls.VersionTLS12,
		GetConfigForClient: func(*tls.ClientHelloInfo) (*tls.Config, error) {
			st := t.current.Load()
			return &tls.Config{
				MinVersion:   tls.VersionTLS12,
				Certificates: []tls.Certificate{st.cert},
				ClientCAs:    st.cas,
				ClientAuth:   tls.RequireAndVerifyClientCert,
			}, nil
		},
	}
}

// ClientConfig is the tls.Config a node dials others with: it presents
// this node's certificate and accepts a server whose certificate chains
// to the cluster CAs. The server's host name is not checked: nodes are
// dialed at the addresses of --voters and of the image, which a
// certificate need not name; the CA is what makes a node a member.
func (t *TLS) ClientConfig() *tls.Config {
	st := t.current.Load()
	return &tls.Config{
		MinVersion:   tls.VersionTLS12,
		Certificates: []tls.Certificate{st.cert},
		// The chain is verified below, against the cluster CAs, without
		// a host name.
		InsecureSkipVerify: true,
		VerifyConnection: func(cs tls.ConnectionState) error {
			return verifyChain(cs.PeerCertificates, st.cas, x509.ExtKeyUsageServerAuth)
		},
	}
}

// verifyChain verifies a peer's certificate chain against cas for usage.
func verifyChain(certs []*x509.Certificate, cas *x509.CertPool, usage x509.ExtKeyUsage) error {
	if len(certs) == 0 {
		return errors.New("controller: the peer sent no certificate")
	}
	inter := x509.NewCertPool()
	for _, c := range certs[1:] {
		inter.AddCert(c)
	}
	_, err := certs[0].Verify(x509.VerifyOptions{Roots: cas, Intermediates: inter, KeyUsages: []x509.ExtKeyUsage{usage}})
	return err
}

// CertPrincipal is the principal of a connection's verified peer
// certificate, the mapping of the Kafka listeners: "User:" and the
// subject as an RFC 2253 distinguished name. Empty without one.
func CertPrincipal(cs *tls.ConnectionState) string {
	if cs == nil || len(cs.PeerCertificates) == 0 {
		return ""
	}
	return auth.CertificateUser(cs.PeerCertificates[0])
}

func (f TLSFiles) load() (*tlsState, error) {
	if f.Cert == "" || f.Key == "" || f.CA == "" {
		return nil, errors.New("controller: TLS needs a certificate, its key and the cluster CA file")
	}
	cert, err := tls.LoadX509KeyPair(f.Cert, f.Key)
	if err != nil {
		return nil, fmt.Errorf("controller: TLS certificate %s and key %s: %w", f.Cert, f.Key, err)
	}
	data, err := os.ReadFile(f.CA)
	if err != nil {
		return nil, fmt.Errorf("controller: TLS CA file: %w", err)
	}
	cas := x509.NewCertPool()
	if !cas.AppendCertsFromPEM(data) {
		return nil, fmt.Errorf("controller: TLS CA file %s: no PEM certificate in it", f.CA)
	}
	return &tlsState{cert: cert, cas: cas, principal: auth.CertificateUser(cert.Leaf)}, nil
}
