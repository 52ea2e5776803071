package client

import (
	"crypto/tls"
	"errors"
	"fmt"
	"net"
	"os"
	"strconv"
	"strings"

	"github.com/twmb/franz-go/pkg/sasl"

	"github.com/mqproject/mq/lib/config"
)

// Networks of an Addr.
const (
	NetworkUnix = "unix"
	NetworkTCP  = "tcp"
)

// DefaultTCP is the address tools try when nothing else is given and the
// default socket does not exist: Kafka's default port on the loopback.
var DefaultTCP = Addr{Network: NetworkTCP, Address: "127.0.0.1:9092"}

// defaultPort is Kafka's, used when a TCP address leaves the port out.
const defaultPort = "9092"

// Addr is one broker address: a Unix socket path or a TCP host:port.
type Addr struct {
	Network string // NetworkUnix or NetworkTCP
	Address string // socket path, or host:port
	// TLS, when set, is how the broker is reached over TCP: with TLS.
	// ParseAddrs sets it, to trust the system's CAs, for an
	// ssl://host:port address; TLSFiles.Apply for every address when a
	// tool is given --tls-* files.
	TLS *tls.Config
	// SASL, when set, is the login on every connection (TLSFiles.Apply).
	SASL sasl.Mechanism
	// saslScheme marks a sasl_plaintext:// or sasl_ssl:// address, which
	// is tcp:// or ssl:// with a login that the SASL flags must give.
	saslScheme bool
}

// String is the address in the form ParseAddrs reads back:
// unix:///run/mq/mqd.sock, tcp://127.0.0.1:9092 or ssl://127.0.0.1:9093.
func (a Addr) String() string {
	if (a.SASL != nil || a.saslScheme) && a.Network == NetworkTCP {
		if a.TLS != nil {
			return "sasl_ssl://" + a.Address
		}
		return "sasl_plaintext://" + a.Address
	}
	if a.TLS != nil && a.Network == NetworkTCP {
		return "ssl://" + a.Address
	}
	return a.Network + "://" + a.Address
}

// ParseAddrs reads a comma-separated list of broker addresses, each one of
// unix:///path/to.sock, tcp://host:port, ssl://host:port (TCP with TLS,
// Kafka's SSL security protocol), sasl_plaintext://host:port and
// sasl_ssl://host:port (tcp:// and ssl:// with the login of the SASL
// flags) or host:port (a missing port is Kafka's
// 9092). An absolute path alone is a Unix socket too.
func ParseAddrs(s string) ([]Addr, error) {
	var addrs []Addr
	for _, part := range strings.Split(s, ",") {
		part = strings.TrimSpace(part)
		if part == "" {
			continue
		}
		a, err := parseAddr(part)
		if err != nil {
			return nil, err
		}
		addrs = append(addrs, a)
	}
	if len(addrs) == 0 {
		return nil, errors.New("no broker address")
	}
	return addrs, nil
}

func parseAddr(s string) (Addr, error) {
	scheme, rest, hasScheme := strings.Cut(s, "://")
	switch {
	case !hasScheme && strings.HasPrefix(s, "/"):
		return Addr{Network: NetworkUnix, Address: s}, nil
	case !hasScheme:
		return parseTCP(s, s)
	case scheme == NetworkUnix:
		if rest == "" {
			return Addr{}, fmt.Errorf("address %q: missing socket path", s)
		}
		return Addr{Network: NetworkUnix, Address: rest}, nil
	case scheme == NetworkTCP:
		return parseTCP(s, rest)
	case scheme == "ssl":
		a, err := parseTCP(s, rest)
		a.TLS = &tls.Config{MinVersion: tls.VersionTLS12}
		return a, err
	case scheme == "sasl_plaintext":
		a, err := parseTCP(s, rest)
		a.saslScheme = true
		return a, err
	case scheme == "sasl_ssl":
		a, err := parseTCP(s, rest)
		a.TLS = &tls.Config{MinVersion: tls.VersionTLS12}
		a.saslScheme = true
		return a, err
	default:
		return Addr{}, fmt.Errorf("address %q: unknown scheme %q (want unix://, tcp://, ssl://, sasl_plaintext:// or sasl_ssl://)", s, scheme)
	}
}

func parseTCP(orig, hostport string) (Addr, error) {
	host, port, err := net.SplitHostPort(hostport)
	if err != nil {
		// No port: a bare host name or address, or a bracketed IPv6 one.
		if strings.ContainsAny(hostport, "/") || strings.Count(hostport, ":") == 1 {
			return Addr{}, fmt.Errorf("address %q: want host:port", orig)
		}
		host, port = strings.TrimSuffix(strings.TrimPrefix(hostport, "["), "]"), defaultPort
	}
	if host == "" {
		return Addr{}, fmt.Errorf("address %q: missing host", orig)
	}
	if strings.ContainsAny(host, "/ ") {
		return Addr{}, fmt.Errorf("address %q: bad host %q", orig, host)
	}
	if n, err := strconv.ParseUint(port, 10, 16); err != nil || n == 0 {
		return Addr{}, fmt.Errorf("address %q: bad port %q", orig, port)
	}
	return Addr{Network: NetworkTCP, Address: net.JoinHostPort(host, port)}, nil
}

// Resolve finds the broker a tool talks to: the -b/--broker flag when set,
// else $MQ_BROKER, else the daemon's default Unix socket
// (config.DefaultSocket(env, uid)) when it exists, else DefaultTCP. A bad
// address is a usage error. With -v the tool says on stderr which address
// it picked and why; without, it says so only when it fell back to
// DefaultTCP and stderr is a terminal (noteResolved).
func Resolve(flag string, env func(string) string, uid int) ([]Addr, error) {
	addrs, source, fellBack, err := resolve(flag, env, uid, func(path string) bool {
		_, err := os.Stat(path)
		return err == nil
	})
	if err == nil {
		noteResolved(addrs, source, fellBack)
	}
	return addrs, err
}

// resolve is Resolve with the file system as exists; it also returns
// where the addresses came from, in words, and whether they are the
// fallback.
func resolve(flag string, env func(string) string, uid int, exists func(string) bool) (addrs []Addr, source string, fellBack bool, err error) {
	if flag != "" {
		addrs, err := ParseAddrs(flag)
		if err != nil {
			return nil, "", false, Usagef("--broker: %v", err)
		}
		return addrs, "from -b", false, nil
	}
	if s := env("MQ_BROKER"); s != "" {
		addrs, err := ParseAddrs(s)
		if err != nil {
			return nil, "", false, Usagef("$MQ_BROKER: %v", err)
		}
		return addrs, "from $MQ_BROKER", false, nil
	}
	sock := config.DefaultSocket(env, uid)
	if exists(sock) {
		return []Addr{{Network: NetworkUnix, Address: sock}}, "the default mqd socket", false, nil
	}
	return []Addr{DefaultTCP}, "no mqd socket at " + sock, true, nil
}

// joinAddrs lists addresses for messages: "unix:///a.sock, tcp://h:1".
func joinAddrs(addrs []Addr) string {
	s := make([]string, len(addrs))
	for i, a := range addrs {
		s[i] = a.String()
	}
	return strings.Join(s, ", ")
}
