package client

import (
	"crypto/tls"
	"crypto/x509"
	"os"

	"github.com/urfave/cli/v2"
)

// TLSFiles are a tool's --tls-ca, --tls-cert and --tls-key: PEM files of
// the CAs that the broker's certificate must chain to (else the system's),
// and of the client certificate and its key that the broker may ask for;
// and its SASL login, which travels with them to every connection.
type TLSFiles struct {
	CA, Cert, Key string
	// ForceTLS dials with TLS (trusting the system's CAs unless CA) even
	// without files or an ssl:// address: mqpipe's -X
	// security.protocol=ssl or sasl_ssl.
	ForceTLS bool
	SASL     SASL
}

// TLSFlags are --tls-ca, --tls-cert and --tls-key, the same in every tool.
// Given any of them, the tool connects with TLS, as to an ssl://
// address.
func TLSFlags() []cli.Flag {
	return []cli.Flag{
		&cli.StringFlag{Name: "tls-ca", Usage: "connect with TLS, trusting the CA certificates in PEM `FILE` (default: the system's; ssl.ca.location)"},
		&cli.StringFlag{Name: "tls-cert", Usage: "connect with TLS, presenting the client certificate in PEM `FILE`, with --tls-key (ssl.certificate.location)"},
		&cli.StringFlag{Name: "tls-key", Usage: "the private key of --tls-cert, in PEM `FILE` (ssl.key.location)"},
	}
}

// ConnectionFlags are -b/--broker, the TLS flags and the SASL flags.
func ConnectionFlags() []cli.Flag {
	return append(append([]cli.Flag{BrokerFlag()}, TLSFlags()...), SASLFlags()...)
}

// TLSFilesOf reads the TLS and SASL flags of c, at whatever level of the
// command line they were given (FlagString).
func TLSFilesOf(c *cli.Context) TLSFiles {
	return TLSFiles{CA: FlagString(c, "tls-ca"), Cert: FlagString(c, "tls-cert"), Key: FlagString(c, "tls-key"), SASL: SASLOf(c)}
}

// Empty reports whether no TLS file was given.
func (f TLSFiles) Empty() bool { return f.CA == "" && f.Cert == "" && f.Key == "" }

// Config reads the files into a client's TLS configuration (TLS 1.2 at
// least); nil when none was given. A file that cannot be read or holds
// no PEM of what it should, and a key without a certificate or the
// reverse, are usage errors naming the flag.
func (f TLSFiles) Config() (*tls.Config, error) {
	if f.Empty() && !f.ForceTLS {
		return nil, nil
	}
	cfg := &tls.Config{MinVersion: tls.VersionTLS12}
	switch {
	case f.Key != "" && f.Cert == "":
		return nil, Usagef("--tls-key needs --tls-cert, the certificate of the key")
	case f.Cert != "" && f.Key == "":
		return nil, Usagef("--tls-cert needs --tls-key, the private key of the certificate")
	case f.Cert != "":
		cert, err := tls.LoadX509KeyPair(f.Cert, f.Key)
		if err != nil {
			return nil, Usagef("--tls-cert %s, --tls-key %s: %v", f.Cert, f.Key, err)
		}
		cfg.Certificates = []tls.Certificate{cert}
	}
	if f.CA != "" {
		data, err := os.ReadFile(f.CA)
		if err != nil {
			return nil, Usagef("--tls-ca: %v", err)
		}
		pool := x509.NewCertPool()
		if !pool.AppendCertsFromPEM(data) {
			return nil, Usagef("--tls-ca %s: no PEM certificate in it", f.CA)
		}
		cfg.RootCAs = pool
	}
	return cfg, nil
}

// Apply returns addrs to be reached with TLS when f names files (every
// address then uses them) or an address is ssl:// (which, without
// files, trusts the system's CAs), and to log in with f.SASL when
// given (password from $MQ_SASL_PASSWORD unless a file). TLS and SASL
// are over TCP only: a Unix socket among TLS or SASL addresses is a
// usage error, and so is a sasl_plaintext:// or sasl_ssl:// address
// without a login.
func (f TLSFiles) Apply(addrs []Addr) ([]Addr, error) {
	mech, err := f.SASL.mechanism(os.Getenv)
	if err != nil {
		return nil, err
	}
	addrs, err = f.applyTLS(addrs)
	if err != nil {
		return nil, err
	}
	return withSASL(addrs, mech)
}

func (f TLSFiles) applyTLS(addrs []Addr) ([]Addr, error) {
	cfg, err := f.Config()
	if err != nil {
		return nil, err
	}
	secure := cfg != nil
	for _, a := range addrs {
		if a.TLS != nil {
			secure = true
			if cfg == nil {
				cfg = a.TLS
			}
		}
	}
	if !secure {
		return addrs, nil
	}
	out := make([]Addr, len(addrs))
	for i, a := range addrs {
		if a.Network == NetworkUnix {
			return nil, Usagef("TLS needs tcp:// or ssl:// broker addresses, and %s is a Unix socket (give -b ssl://HOST:PORT)", a)
		}
		a.TLS = cfg
		out[i] = a
	}
	return out, nil
}

// ResolveTLS is Resolve followed by f.Apply: the addresses a tool given
// -b and the TLS flags connects to.
func ResolveTLS(flag string, f TLSFiles) ([]Addr, error) {
	addrs, err := Resolve(flag, os.Getenv, os.Getuid())
	if err != nil {
		return nil, err
	}
	return f.Apply(addrs)
}
