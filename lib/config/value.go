package config

import (
	"fmt"
	"math"
	"net"
	"net/netip"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
)

// Kafka's DescribeConfigs ConfigType numbers, for Entry.Type.
const (
	TypeBoolean  int8 = 1
	TypeString   int8 = 2
	TypeInt      int8 = 3
	TypeShort    int8 = 4
	TypeLong     int8 = 5
	TypeDouble   int8 = 6
	TypeList     int8 = 7
	TypeClass    int8 = 8
	TypePassword int8 = 9
)

// kind is the type of a property's value: how to check and normalize it,
// and what to say is allowed when it is refused.
type kind struct {
	typ     int8
	allowed string
	// norm returns the canonical text of a valid value, or ok=false.
	norm func(v string) (string, bool)
}

func (k kind) check(name, value string) (string, error) {
	v, ok := k.norm(strings.TrimSpace(value))
	if !ok {
		return "", invalid(name, value, k.allowed)
	}
	return v, nil
}

func integer(typ int8, bits int, min, max int64) kind {
	typeMax := int64(1)<<(bits-1) - 1
	allowed := fmt.Sprintf("an integer from %d to %d", min, max)
	switch {
	case min == -typeMax-1 && max == typeMax:
		allowed = fmt.Sprintf("a %d-bit integer", bits)
	case max == typeMax:
		allowed = fmt.Sprintf("an integer ≥ %d", min)
	}
	return kind{typ: typ, allowed: allowed, norm: func(v string) (string, bool) {
		n, err := strconv.ParseInt(v, 10, bits)
		if err != nil || n < min || n > max {
			return "", false
		}
		return strconv.FormatInt(n, 10), true
	}}
}

// intAtLeast is Kafka's INT with Range.atLeast(min).
func intAtLeast(min int64) kind { return integer(TypeInt, 32, min, math.MaxInt32) }

// intBetween is Kafka's INT with Range.between(min, max).
func intBetween(min, max int64) kind { return integer(TypeInt, 32, min, max) }

// longAtLeast is Kafka's LONG with Range.atLeast(min).
func longAtLeast(min int64) kind { return integer(TypeLong, 64, min, math.MaxInt64) }

// connectionOverrides is max.connections.per.ip.overrides:
// ip:count,… (ParseConnectionOverrides).
var connectionOverrides = kind{typ: TypeString, allowed: "empty or a comma-separated list of ip:count (an IPv6 address in brackets), count ≥ 0", norm: func(v string) (string, bool) {
	m, err := ParseConnectionOverrides(v)
	if err != nil {
		return "", false
	}
	return formatConnectionOverrides(m), true
}}

// ParseConnectionOverrides parses max.connections.per.ip.overrides: a
// comma-separated list of ip:count, an IPv6 address in brackets
// ([::1]:5); empty is none. An address listed twice is an error.
func ParseConnectionOverrides(v string) (map[netip.Addr]int, error) {
	out := map[netip.Addr]int{}
	for _, item := range strings.Split(v, ",") {
		item = strings.TrimSpace(item)
		if item == "" {
			continue
		}
		host, count, ok := cutLast(item, ":")
		if !ok {
			return nil, fmt.Errorf("%q: want ip:count", item)
		}
		ip, err := netip.ParseAddr(strings.TrimSuffix(strings.TrimPrefix(host, "["), "]"))
		if err != nil || ip.Zone() != "" {
			return nil, fmt.Errorf("%q: %q is not an IP address", item, host)
		}
		n, err := strconv.ParseInt(strings.TrimSpace(count), 10, 32)
		if err != nil || n < 0 {
			return nil, fmt.Errorf("%q: %q is not a count", item, count)
		}
		ip = ip.Unmap()
		if _, dup := out[ip]; dup {
			return nil, fmt.Errorf("%s listed twice", ip)
		}
		out[ip] = int(n)
	}
	return out, nil
}

func cutLast(s, sep string) (before, after string, ok bool) {
	i := strings.LastIndex(s, sep)
	if i < 0 {
		return s, "", false
	}
	return s[:i], s[i+len(sep):], true
}

func formatConnectionOverrides(m map[netip.Addr]int) string {
	ips := make([]netip.Addr, 0, len(m))
	for ip := range m {
		ips = append(ips, ip)
	}
	slices.SortFunc(ips, netip.Addr.Compare)
	parts := make([]string, len(ips))
	for i, ip := range ips {
		parts[i] = netip.AddrPortFrom(ip, 0).String()
		parts[i] = parts[i][:len(parts[i])-1] + strconv.Itoa(m[ip])
	}
	return strings.Join(parts, ",")
}

// anyLong is Kafka's LONG without a validator.
var anyLong = integer(TypeLong, 64, math.MinInt64, math.MaxInt64)

var boolean = kind{typ: TypeBoolean, allowed: "true or false", norm: func(v string) (string, bool) {
	switch strings.ToLower(v) {
	case "true":
		return "true", true
	case "false":
		return "false", true
	}
	return "", false
}}

// oneOf accepts one of vals, ignoring case, and returns its canonical spelling.
func oneOf(vals ...string) kind {
	return kind{typ: TypeString, allowed: "one of " + strings.Join(vals, ", "), norm: func(v string) (string, bool) {
		for _, c := range vals {
			if strings.EqualFold(v, c) {
				return c, true
			}
		}
		return "", false
	}}
}

// ratio is Kafka's DOUBLE with Range.between(0, 1).
var ratio = kind{typ: TypeDouble, allowed: "a number from 0 to 1", norm: func(v string) (string, bool) {
	f, err := strconv.ParseFloat(v, 64)
	if err != nil || math.IsNaN(f) || f < 0 || f > 1 {
		return "", false
	}
	return strconv.FormatFloat(f, 'g', -1, 64), true
}}

// cleanupPolicy accepts a list of delete and compact, normalized to
// "delete", "compact" or "compact,delete".
var cleanupPolicy = kind{typ: TypeList, allowed: "delete, compact or compact,delete", norm: func(v string) (string, bool) {
	var del, compact bool
	for _, p := range strings.Split(v, ",") {
		switch strings.ToLower(strings.TrimSpace(p)) {
		case "delete":
			del = true
		case "compact":
			compact = true
		default:
			return "", false
		}
	}
	switch {
	case del && compact:
		return "compact,delete", true
	case compact:
		return "compact", true
	}
	return "delete", true
}}

// throttledReplicas is Kafka's ThrottledReplicaListValidator: "*", empty, or
// a list of partition:broker pairs.
var throttledReplicas = kind{typ: TypeList, allowed: `"*" or a comma-separated list of partition:broker`, norm: func(v string) (string, bool) {
	if v == "" || v == "*" {
		return v, true
	}
	parts := strings.Split(v, ",")
	for i, p := range parts {
		p = strings.TrimSpace(p)
		partition, broker, ok := strings.Cut(p, ":")
		if !ok || !isDigits(partition) || !isDigits(broker) {
			return "", false
		}
		parts[i] = p
	}
	return strings.Join(parts, ","), true
}}

func isDigits(s string) bool {
	if s == "" {
		return false
	}
	for _, c := range s {
		if c < '0' || c > '9' {
			return false
		}
	}
	return true
}

var directory = kind{typ: TypeString, allowed: "one directory path", norm: func(v string) (string, bool) {
	if v == "" || strings.Contains(v, ",") {
		return "", false
	}
	return filepath.Clean(v), true
}}

// saslMechanisms is a list of the SASL mechanisms mq has, upper case.
var saslMechanisms = kind{typ: TypeList, allowed: "a comma-separated list of PLAIN, SCRAM-SHA-256 and SCRAM-SHA-512", norm: func(v string) (string, bool) {
	var out []string
	for _, m := range strings.Split(v, ",") {
		m = strings.ToUpper(strings.TrimSpace(m))
		switch {
		case m == "":
			continue
		case m != "PLAIN" && m != "SCRAM-SHA-256" && m != "SCRAM-SHA-512":
			return "", false
		case !slices.Contains(out, m):
			out = append(out, m)
		}
	}
	if len(out) == 0 {
		return "", false
	}
	return strings.Join(out, ","), true
}}

var listenerList = kind{typ: TypeList, allowed: "a comma-separated list of unix:///absolute/path, tcp://host:port (or host:port), ssl://host:port, sasl_plaintext://host:port and sasl_ssl://host:port", norm: func(v string) (string, bool) {
	var out []string
	for _, l := range strings.Split(v, ",") {
		l = strings.TrimSpace(l)
		if l == "" {
			continue
		}
		n, err := parseListener(l)
		if err != nil {
			return "", false
		}
		out = append(out, n)
	}
	if len(out) == 0 {
		return "", false
	}
	return strings.Join(out, ","), true
}}

// parseListener checks one listener address and returns its canonical form:
// unix:///path, tcp://host:port, ssl://host:port (TCP with TLS, Kafka's
// SSL security protocol), sasl_plaintext://host:port or
// sasl_ssl://host:port (SASL_PLAINTEXT, SASL_SSL); a bare host:port is TCP, as the tools take it in
// -b.
func parseListener(l string) (string, error) {
	switch {
	case strings.HasPrefix(l, "unix://"):
		p := strings.TrimPrefix(l, "unix://")
		if !filepath.IsAbs(p) {
			return "", fmt.Errorf("listener %q: unix socket path must be absolute", l)
		}
		return "unix://" + filepath.Clean(p), nil
	case strings.HasPrefix(l, "tcp://"):
		hp := strings.TrimPrefix(l, "tcp://")
		if _, err := splitHostPort(hp, true); err != nil {
			return "", fmt.Errorf("listener %q: %w", l, err)
		}
		return l, nil
	case strings.HasPrefix(l, "ssl://"), strings.HasPrefix(l, "sasl_plaintext://"), strings.HasPrefix(l, "sasl_ssl://"):
		_, hp, _ := strings.Cut(l, "://")
		if _, err := splitHostPort(hp, true); err != nil {
			return "", fmt.Errorf("listener %q: %w", l, err)
		}
		return l, nil
	case !strings.Contains(l, "://"):
		if _, err := splitHostPort(l, true); err != nil {
			return "", fmt.Errorf("listener %q: %w", l, err)
		}
		return "tcp://" + l, nil
	}
	return "", fmt.Errorf("listener %q: want unix:///path, tcp://host:port, ssl://host:port, sasl_plaintext://host:port, sasl_ssl://host:port or host:port", l)
}

// splitHostPort checks host:port and returns the port; port 0 only when
// zeroOK (a listener picking a free port).
func splitHostPort(hp string, zeroOK bool) (int, error) {
	_, port, err := net.SplitHostPort(hp)
	if err != nil {
		return 0, err
	}
	n, err := strconv.ParseUint(port, 10, 16)
	if err != nil || (n == 0 && !zeroOK) {
		return 0, fmt.Errorf("bad port %q", port)
	}
	return int(n), nil
}

// advertised accepts host:port, optionally written tcp://host:port, or
// empty for "the first TCP listener".
var advertised = kind{typ: TypeString, allowed: "host:port with a port from 1 to 65535", norm: func(v string) (string, bool) {
	if v == "" {
		return "", true
	}
	v = strings.TrimPrefix(v, "tcp://")
	host, _, err := net.SplitHostPort(v)
	if err != nil || host == "" {
		return "", false
	}
	if _, err := splitHostPort(v, false); err != nil {
		return "", false
	}
	return v, true
}}

// filePath accepts a path to a file, or empty for none; its canonical
// form is cleaned.
var storeURL = kind{typ: TypeString, allowed: "empty, file:///absolute/path, s3://bucket with its query, or mem://", norm: func(v string) (string, bool) {
	switch {
	case v == "", v == "mem://":
		return v, true
	case strings.HasPrefix(v, "file:///"):
		return v, !strings.ContainsAny(v, "?#")
	case strings.HasPrefix(v, "s3://"):
		bucket, _, _ := strings.Cut(strings.TrimPrefix(v, "s3://"), "?")
		return v, bucket != "" && !strings.Contains(bucket, "/")
	}
	return "", false
}}

var filePath = kind{typ: TypeString, allowed: "a file path, or empty for none", norm: func(v string) (string, bool) {
	if v == "" {
		return "", true
	}
	return filepath.Clean(v), true
}}

// metricsListener accepts tcp://host:port (or host:port; port 0 picks a
// free one), or empty for no metrics endpoint. Its canonical form is
// tcp://host:port.
var metricsListener = kind{typ: TypeString, allowed: "tcp://host:port (port 0: any free port), or empty for none", norm: func(v string) (string, bool) {
	if v == "" {
		return "", true
	}
	if strings.Contains(v, "://") && !strings.HasPrefix(v, "tcp://") {
		return "", false
	}
	n, err := parseListener(v)
	if err != nil {
		return "", false
	}
	return n, true
}}

// rackName accepts any rack name without commas or control characters, or
// empty for no rack.
var rackName = kind{typ: TypeString, allowed: "a name without commas, spaces or control characters", norm: func(v string) (string, bool) {
	for _, r := range v {
		if r <= ' ' || r == ',' || r == 0x7f {
			return "", false
		}
	}
	return v, len(v) <= 255
}}

// principalList is Kafka's super.users: TYPE:NAME principals separated
// by ';', or empty.
var principalList = kind{typ: TypeList, allowed: "empty or principals TYPE:NAME separated by ';' (User:alice;User:bob)", norm: func(v string) (string, bool) {
	var out []string
	for _, p := range strings.Split(v, ";") {
		if p = strings.TrimSpace(p); p == "" {
			continue
		}
		if typ, _, ok := strings.Cut(p, ":"); !ok || typ == "" {
			return "", false
		}
		out = append(out, p)
	}
	return strings.Join(out, ";"), true
}}

var voterList = kind{typ: TypeList, allowed: "empty or a comma-separated list of id@host:port (controller.quorum.voters)", norm: func(v string) (string, bool) {
	vs, err := parseVoters(v)
	if err != nil {
		return "", false
	}
	return formatVoters(vs), true
}}

// defaultRaftPort is the Raft transport port of a voter given without one,
// as lib/controller reads it.
const defaultRaftPort = 9093

// voter is one member of controller.quorum.voters.
type voter struct {
	ID   int32
	Host string
	Port int
}

func (v voter) addr() string { return net.JoinHostPort(v.Host, strconv.Itoa(v.Port)) }

// parseVoters checks Kafka's controller.quorum.voters syntax,
// "1@host:port,2@host:port" (a voter without a port gets defaultRaftPort),
// the same way lib/controller's ParseVoters reads it. The empty string is
// no voters (a single node is the one voter of its own quorum). IDs must be
// distinct and ≥ 0.
func parseVoters(s string) ([]voter, error) {
	s = strings.TrimSpace(s)
	if s == "" {
		return nil, nil
	}
	var out []voter
	seen := map[int32]bool{}
	for _, part := range strings.Split(s, ",") {
		part = strings.TrimSpace(part)
		id, addr, ok := strings.Cut(part, "@")
		if !ok {
			return nil, fmt.Errorf("voter %q: want id@host:port", part)
		}
		n, err := strconv.ParseInt(id, 10, 32)
		if err != nil || n < 0 {
			return nil, fmt.Errorf("voter %q: bad node id %q", part, id)
		}
		if seen[int32(n)] {
			return nil, fmt.Errorf("voter %q: node id %d listed twice", part, n)
		}
		seen[int32(n)] = true
		v := voter{ID: int32(n), Port: defaultRaftPort}
		if host, port, err := net.SplitHostPort(addr); err == nil {
			p, err := strconv.ParseUint(port, 10, 16)
			if err != nil || p == 0 {
				return nil, fmt.Errorf("voter %q: bad port %q", part, port)
			}
			v.Host, v.Port = host, int(p)
		} else if !strings.Contains(addr, ":") {
			v.Host = addr
		} else {
			return nil, fmt.Errorf("voter %q: want id@host:port", part)
		}
		if v.Host == "" || strings.ContainsAny(v.Host, "/@ ") {
			return nil, fmt.Errorf("voter %q: bad host", part)
		}
		out = append(out, v)
	}
	return out, nil
}

func formatVoters(vs []voter) string {
	parts := make([]string, len(vs))
	for i, v := range vs {
		parts[i] = strconv.Itoa(int(v.ID)) + "@" + v.addr()
	}
	return strings.Join(parts, ",")
}
