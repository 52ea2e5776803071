package client

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func TestSASLFlagsThatMakeNoSenseAreUsageErrors(t *testing.T) {
	dir := t.TempDir()
	pwFile := filepath.Join(dir, "pw")
	os.WriteFile(pwFile, []byte("s3cret\n"), 0o600)
	empty := filepath.Join(dir, "empty")
	os.WriteFile(empty, []byte("\n"), 0o600)
	noEnv := func(string) string { return "" }
	withEnv := func(k string) string {
		if k == PasswordEnv {
			return "from-env"
		}
		return ""
	}
	for _, tc := range []struct {
		name   string
		s      SASL
		getenv func(string) string
		want   string // "" for a mechanism
	}{
		{"nothing", SASL{}, noEnv, ""},
		{"user without mechanism", SASL{User: "alice"}, withEnv, "need --sasl-mechanism"},
		{"password file without mechanism", SASL{PasswordFile: pwFile}, withEnv, "need --sasl-mechanism"},
		{"mechanism without user", SASL{Mechanism: "PLAIN"}, withEnv, "needs --sasl-user"},
		{"unknown mechanism", SASL{Mechanism: "GSSAPI", User: "alice"}, withEnv, "want PLAIN, SCRAM-SHA-256 or SCRAM-SHA-512"},
		{"no password", SASL{Mechanism: "SCRAM-SHA-256", User: "alice"}, noEnv, "set $MQ_SASL_PASSWORD or give --sasl-password-file"},
		{"missing password file", SASL{Mechanism: "PLAIN", User: "a", PasswordFile: filepath.Join(dir, "nope")}, withEnv, "no such file"},
		{"empty password file", SASL{Mechanism: "PLAIN", User: "a", PasswordFile: empty}, withEnv, "the first line is empty"},
		{"password from the environment", SASL{Mechanism: "scram-sha-512", User: "alice"}, withEnv, ""},
		{"password from a file", SASL{Mechanism: "SCRAM-SHA-256", User: "alice", PasswordFile: pwFile}, noEnv, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			m, err := tc.s.mechanism(tc.getenv)
			if tc.want == "" {
				if err != nil || (m == nil) != tc.s.Empty() {
					t.Fatalf("mechanism %v, err %v", m, err)
				}
				return
			}
			var ce *Error
			if !errors.As(err, &ce) || ce.Code != ExitUsage || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("err %v, want a usage error with %q", err, tc.want)
			}
		})
	}
}

func TestPasswordFileIsItsFirstLine(t *testing.T) {
	dir := t.TempDir()
	for _, content := range []string{"s3cret", "s3cret\n", "s3cret\r\n", "s3cret\nignored\n"} {
		p := filepath.Join(dir, "pw")
		os.WriteFile(p, []byte(content), 0o600)
		if got, err := ReadPasswordFile(p); err != nil || got != "s3cret" {
			t.Errorf("%q: %q, %v", content, got, err)
		}
	}
}

func TestSASLAddressesNeedALoginAndTCP(t *testing.T) {
	t.Setenv(PasswordEnv, "pw")
	login := TLSFiles{SASL: SASL{Mechanism: "SCRAM-SHA-256", User: "alice"}}
	for _, tc := range []struct {
		addrs string
		f     TLSFiles
		want  string // the first address, or the usage error
	}{
		{"sasl_plaintext://h:9094", login, "sasl_plaintext://h:9094"},
		{"sasl_ssl://h:9095", login, "sasl_ssl://h:9095"},
		{"ssl://h:9093", login, "sasl_ssl://h:9093"},
		{"h:9092", login, "sasl_plaintext://h:9092"},
		{"sasl_plaintext://h:9094", TLSFiles{}, "needs --sasl-mechanism"},
		{"unix:///run/mq.sock", login, "is a Unix socket"},
	} {
		addrs, err := ParseAddrs(tc.addrs)
		if err != nil {
			t.Fatal(err)
		}
		got, err := tc.f.Apply(addrs)
		if err != nil {
			if !strings.Contains(err.Error(), tc.want) {
				t.Errorf("%s: %v, want %q", tc.addrs, err, tc.want)
			}
			continue
		}
		if got[0].String() != tc.want || got[0].SASL == nil {
			t.Errorf("%s: %s (SASL %v), want %s", tc.addrs, got[0], got[0].SASL != nil, tc.want)
		}
	}
}
