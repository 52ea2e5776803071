package client

import (
	"crypto/x509/pkix"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/mqproject/mq/lib/mqtest"
)

func TestParseAddrsReadsSSLAsTCPWithTLS(t *testing.T) {
	addrs, err := ParseAddrs("ssl://mq.example:9093,tcp://127.0.0.1:9092")
	if err != nil {
		t.Fatal(err)
	}
	if addrs[0].Network != NetworkTCP || addrs[0].Address != "mq.example:9093" || addrs[0].TLS == nil || addrs[0].String() != "ssl://mq.example:9093" {
		t.Fatalf("ssl:// address parsed as %+v (%s)", addrs[0], addrs[0])
	}
	if addrs[1].TLS != nil {
		t.Fatalf("tcp:// address has TLS: %+v", addrs[1])
	}
}

func TestTLSFilesAreCheckedBeforeConnecting(t *testing.T) {
	dir := t.TempDir()
	ca := mqtest.NewCA(t, "tools CA")
	f := ca.WriteFiles(t, dir, "tool", mqtest.Leaf{Subject: pkix.Name{CommonName: "tool"}, Client: true})
	other := ca.WriteFiles(t, dir, "other", mqtest.Leaf{Subject: pkix.Name{CommonName: "other"}, Client: true})
	bad := filepath.Join(dir, "bad.pem")
	if err := os.WriteFile(bad, []byte("not PEM"), 0o600); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name  string
		files TLSFiles
		want  string
	}{
		{"key without certificate", TLSFiles{Key: f.Key}, "--tls-key needs --tls-cert"},
		{"certificate without key", TLSFiles{Cert: f.Cert}, "--tls-cert needs --tls-key"},
		{"missing CA file", TLSFiles{CA: filepath.Join(dir, "nope.pem")}, "--tls-ca: open"},
		{"CA file without PEM", TLSFiles{CA: bad}, "no PEM certificate"},
		{"certificate file without PEM", TLSFiles{Cert: bad, Key: f.Key}, "--tls-cert " + bad},
		{"key of another certificate", TLSFiles{Cert: f.Cert, Key: other.Key}, "private key does not match"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := tc.files.Apply([]Addr{{Network: NetworkTCP, Address: "127.0.0.1:9093"}})
			if err == nil || !strings.Contains(err.Error(), tc.want) || ExitCode(err) != ExitUsage {
				t.Fatalf("Apply: %v (exit %d), want a usage error with %q", err, ExitCode(err), tc.want)
			}
		})
	}
	good := TLSFiles{CA: f.CA, Cert: f.Cert, Key: f.Key}
	addrs, err := good.Apply([]Addr{{Network: NetworkTCP, Address: "127.0.0.1:9093"}})
	if err != nil {
		t.Fatal(err)
	}
	if cfg := addrs[0].TLS; cfg == nil || cfg.RootCAs == nil || len(cfg.Certificates) != 1 {
		t.Fatalf("Apply gave %+v", addrs[0])
	}
	if _, err := good.Apply([]Addr{{Network: NetworkUnix, Address: "/run/mq/mqd.sock"}}); err == nil || ExitCode(err) != ExitUsage {
		t.Fatalf("TLS to a Unix socket: %v", err)
	}
	// No files and no ssl:// address: nothing changes.
	plain := []Addr{{Network: NetworkUnix, Address: "/run/mq/mqd.sock"}}
	if got, err := (TLSFiles{}).Apply(plain); err != nil || got[0].TLS != nil {
		t.Fatalf("Apply without TLS: %+v, %v", got, err)
	}
}
