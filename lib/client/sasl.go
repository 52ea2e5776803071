package client

import (
	"os"
	"strings"

	"github.com/twmb/franz-go/pkg/sasl"
	"github.com/twmb/franz-go/pkg/sasl/plain"
	"github.com/twmb/franz-go/pkg/sasl/scram"
	"github.com/urfave/cli/v2"
)

// PasswordEnv is the environment variable a tool reads its SASL password
// from when --sasl-password-file is not given. A password is never a
// flag: flags are visible to every user in ps.
const PasswordEnv = "MQ_SASL_PASSWORD"

// SASL is a tool's SASL login: --sasl-mechanism, --sasl-user and
// --sasl-password-file (else $MQ_SASL_PASSWORD).
type SASL struct {
	Mechanism, User, PasswordFile string
	// Password, when set, is the password itself: mqpipe's kcat-style
	// -X sasl.password. It wins over the file and the environment.
	Password string
}

// SASLFlags are --sasl-mechanism, --sasl-user and --sasl-password-file,
// the same in every tool.
func SASLFlags() []cli.Flag {
	return []cli.Flag{
		&cli.StringFlag{Name: "sasl-mechanism", Usage: "authenticate with SASL `MECHANISM`: PLAIN, SCRAM-SHA-256 or SCRAM-SHA-512 (sasl.mechanisms); with ssl:// or --tls-* this is SASL_SSL, else SASL_PLAINTEXT"},
		&cli.StringFlag{Name: "sasl-user", Usage: "the SASL user `NAME` (sasl.username)"},
		&cli.StringFlag{Name: "sasl-password-file", Usage: "read the SASL password from the first line of `FILE` (default: $" + PasswordEnv + ")"},
	}
}

// SASLOf reads the SASL flags of c, at whatever level of the command
// line they were given (FlagString).
func SASLOf(c *cli.Context) SASL {
	return SASL{Mechanism: FlagString(c, "sasl-mechanism"), User: FlagString(c, "sasl-user"), PasswordFile: FlagString(c, "sasl-password-file")}
}

// Empty reports whether no SASL flag was given.
func (s SASL) Empty() bool { return s == SASL{} }

// Mechanism checks the login and returns the franz-go mechanism that
// performs it; nil when no SASL flag was given. getenv reads
// $MQ_SASL_PASSWORD. A user or password file without a mechanism, a
// mechanism without a user or a password, an unknown mechanism and an
// unreadable or empty password file are usage errors.
func (s SASL) mechanism(getenv func(string) string) (sasl.Mechanism, error) {
	if s.Empty() {
		return nil, nil
	}
	if s.Mechanism == "" {
		return nil, Usagef("--sasl-user and --sasl-password-file need --sasl-mechanism (PLAIN, SCRAM-SHA-256 or SCRAM-SHA-512)")
	}
	mech := strings.ToUpper(s.Mechanism)
	if mech != "PLAIN" && mech != "SCRAM-SHA-256" && mech != "SCRAM-SHA-512" {
		return nil, Usagef("--sasl-mechanism %s: want PLAIN, SCRAM-SHA-256 or SCRAM-SHA-512", s.Mechanism)
	}
	if s.User == "" {
		return nil, Usagef("--sasl-mechanism needs --sasl-user")
	}
	password := getenv(PasswordEnv)
	if s.Password != "" {
		password = s.Password
	} else if s.PasswordFile != "" {
		var err error
		if password, err = ReadPasswordFile(s.PasswordFile); err != nil {
			return nil, err
		}
	}
	if password == "" {
		return nil, Usagef("--sasl-mechanism needs a password: set $%s or give --sasl-password-file", PasswordEnv)
	}
	switch mech {
	case "PLAIN":
		return plain.Auth{User: s.User, Pass: password}.AsMechanism(), nil
	case "SCRAM-SHA-256":
		return scram.Auth{User: s.User, Pass: password}.AsSha256Mechanism(), nil
	}
	return scram.Auth{User: s.User, Pass: password}.AsSha512Mechanism(), nil
}

// ReadPasswordFile reads a password: the file's first line, without its
// line ending. An unreadable file or an empty password is a usage error
// naming the file.
func ReadPasswordFile(path string) (string, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return "", Usagef("--sasl-password-file: %v", err)
	}
	line, _, _ := strings.Cut(string(data), "\n")
	line = strings.TrimSuffix(line, "\r")
	if line == "" {
		return "", Usagef("--sasl-password-file %s: the first line is empty", path)
	}
	return line, nil
}

// withSASL is addrs each with mechanism m; SASL is over TCP only.
func withSASL(addrs []Addr, m sasl.Mechanism) ([]Addr, error) {
	if m == nil {
		for _, a := range addrs {
			if a.saslScheme {
				return nil, Usagef("%s needs --sasl-mechanism, --sasl-user and a password", a)
			}
		}
		return addrs, nil
	}
	out := make([]Addr, len(addrs))
	for i, a := range addrs {
		if a.Network == NetworkUnix {
			return nil, Usagef("SASL needs tcp://, ssl://, sasl_plaintext:// or sasl_ssl:// broker addresses, and %s is a Unix socket (which needs no login)", a)
		}
		a.SASL = m
		out[i] = a
	}
	return out, nil
}
