package config

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"os"
	"slices"
	"strings"
)

// envAliases are the short environment variables for the properties cmd/mqd
// has dedicated flags for. They apply after the generic MQ_<PROPERTY>
// spelling, so MQ_DATA_DIR beats MQ_LOG_DIRS.
var envAliases = []struct{ env, name string }{
	{"MQ_DATA_DIR", "log.dirs"},
	{"MQ_LISTEN", "listeners"},
	{"MQ_ADVERTISE", "advertised.listeners"},
	{"MQ_VOTERS", "controller.quorum.voters"},
}

// EnvName is the environment variable that sets a property:
// MQ_ + the name in upper case with dots as underscores
// (num.partitions → MQ_NUM_PARTITIONS).
func EnvName(property string) string {
	return "MQ_" + strings.ToUpper(strings.ReplaceAll(property, ".", "_"))
}

// kafkaOnly are Apache Kafka broker properties that have no meaning in mq,
// with why. A config file may hold them (a stock Kafka server.properties
// does): Load accepts and ignores them, and says so in Broker.Ignored.
// Elsewhere (the environment, the command line, AlterConfigs) they are
// unknown properties.
var kafkaOnly = map[string]string{
	"process.roles":                            "every mqd is a broker, and a controller voter when --voters names it",
	"controller.listener.names":                "the controller quorum talks Raft on controller.quorum.voters' addresses, not on a listener",
	"inter.broker.listener.name":               "brokers reach each other at the address each registers (advertised.listeners)",
	"listener.security.protocol.map":           "an mq listener's scheme is its security protocol: tcp:// is PLAINTEXT, ssl:// is SSL, sasl_plaintext:// is SASL_PLAINTEXT, sasl_ssl:// is SASL_SSL",
	"num.network.threads":                      "each connection has its own reader and writer goroutine",
	"num.io.threads":                           "requests run on their connection's goroutines",
	"num.recovery.threads.per.data.dir":        "mq has no setting for the threads that open and recover logs",
	"socket.send.buffer.bytes":                 "mq leaves socket buffer sizes to the kernel",
	"socket.receive.buffer.bytes":              "mq leaves socket buffer sizes to the kernel",
	"transaction.state.log.replication.factor": "mq has no transactions",
	"transaction.state.log.min.isr":            "mq has no transactions",
	"zookeeper.connect":                        "mq keeps its metadata in its own Raft quorum",
	"zookeeper.connection.timeout.ms":          "mq keeps its metadata in its own Raft quorum",
}

// knownEnv are the MQ_* variables that are not MQ_<PROPERTY> spellings but
// mean something to mq: mqd's and the tools', those of deploy/cluster.sh,
// the Makefile and the e2e tests, and those mqpipe exec gives its commands
// (which may run anything, mqd too). MQ_HEADER_* are exec's as well.
var knownEnv = map[string]bool{
	"MQ_CONFIG": true, "MQ_SOCKET": true, "MQ_BROKER": true, "MQ_PPROF": true,
	"MQ_NODE_ID": true, "MQ_RAFT_ADDRESS": true, "MQ_RACK": true,
	"MQ_LOG_LEVEL": true, "MQ_LOG_FORMAT": true, "MQ_METRICS_LISTEN": true,
	"MQ_BIN": true, "MQ_IMAGE": true, "MQ_CLUSTER_DIR": true, "MQ_CLUSTER_NODES": true,
	"MQ_CLUSTER_PORT": true, "MQ_CLUSTER_RAFT": true, "MQ_E2E_RACE": true,
	"MQ_TOPIC": true, "MQ_PARTITION": true, "MQ_OFFSET": true, "MQ_KEY": true,
	"MQ_KEY_B64": true, "MQ_TIMESTAMP": true, "MQ_DELIVERY_COUNT": true, "MQ_GROUP": true,
}

// UnknownEnvironment returns a warning for each MQ_* variable of environ
// ("KEY=value" strings, as os.Environ gives them) that sets no property and
// is none of the variables mqd and the tools read, with the variable it is
// probably a typo of: Load never sees such a variable, and a misspelt
// setting would otherwise be ignored in silence.
func UnknownEnvironment(environ []string) []string {
	known := make([]string, 0, len(brokerProperties)+len(envAliases)+len(knownEnv))
	for i := range brokerProperties {
		known = append(known, EnvName(brokerProperties[i].name))
	}
	for _, a := range envAliases {
		known = append(known, a.env)
	}
	for name := range knownEnv {
		known = append(known, name)
	}
	var warnings []string
	for _, kv := range environ {
		name, _, _ := strings.Cut(kv, "=")
		if !strings.HasPrefix(name, "MQ_") || strings.HasPrefix(name, "MQ_HEADER_") || slices.Contains(known, name) {
			continue
		}
		w := "$" + name + " is not an mq setting; ignored"
		if s := closest(name, known); s != "" {
			w += " (did you mean $" + s + "?)"
		}
		warnings = append(warnings, w)
	}
	slices.Sort(warnings)
	return warnings
}

// kafkaListenerHint adds to the refusal of a listener written as Kafka
// writes it (PLAINTEXT://host:port, CONTROLLER://...) how mq writes it.
func kafkaListenerHint(err error, value string) error {
	var e *Error
	if !errors.As(err, &e) || (e.Name != "listeners" && e.Name != "advertised.listeners") {
		return err
	}
	scheme, _, ok := strings.Cut(value, "://")
	if !ok || scheme == "" || strings.ToUpper(scheme) != scheme {
		return err
	}
	c := *e
	c.Allowed += "; Kafka's PLAINTEXT://host:port is tcp://host:port here, SSL://host:port is ssl://host:port, SASL_PLAINTEXT:// and SASL_SSL:// are sasl_plaintext:// and sasl_ssl://, and a CONTROLLER listener is not needed (the Raft addresses are controller.quorum.voters')"
	return &c
}

// Errors is every property Load refused, in the order of the layers and,
// within the config file, of its lines: a file full of mistakes is fixed
// in one go, not one run per line. Each is an *Error.
type Errors []error

func (e Errors) Error() string {
	lines := make([]string, len(e))
	for i, err := range e {
		lines[i] = err.Error()
	}
	return strings.Join(lines, "\n")
}

func (e Errors) Unwrap() []error { return e }

// Load builds mqd's settings, each layer overriding the one before:
//
//  1. the defaults (Defaults, computed in env);
//  2. the config file, if file is not empty: "key = value" lines with
//     Kafka's property names; blank lines and lines starting with # are
//     ignored, whitespace around keys and values is trimmed, a property may
//     appear once; the Kafka properties that mean nothing to mq (kafkaOnly:
//     process.roles, num.io.threads, ...) are accepted and listed in
//     Broker.Ignored, so a stock Kafka server.properties can be used;
//  3. the environment: MQ_<PROPERTY> for every property (see EnvName) and
//     MQ_DATA_DIR, MQ_LISTEN (comma-separated), MQ_ADVERTISE, MQ_VOTERS;
//     empty variables are ignored. env is a lookup, so MQ_* variables that
//     name no property are never seen here (UnknownEnvironment finds
//     them; MQ_CONFIG, MQ_SOCKET and the tools' MQ_BROKER are not
//     properties);
//  4. flags: property name → value, as the command line gives them.
//
// Durations given in several units resolve like Kafka's, whatever the
// layer: log.retention.ms beats log.retention.minutes beats
// log.retention.hours, log.roll.ms beats log.roll.hours.
//
// Every refused property is reported, each an *Error saying where the
// property came from ("mqd.conf:3", "$MQ_NUM_PARTITIONS", "command
// line"), matching ErrUnknownConfig or ErrInvalidValue: one alone as
// itself, several as Errors. A config file that cannot be read or parsed
// is an error of its own.
func Load(file string, env func(string) string, flags map[string]string) (Broker, error) {
	if env == nil {
		env = func(string) string { return "" }
	}
	b := defaultsFor(env, os.Getuid())
	var errs Errors
	set := func(where, name, value string) {
		if err := b.Set(name, value); err != nil {
			errs = append(errs, at(where, kafkaListenerHint(err, value)))
		}
	}
	if file != "" {
		data, err := os.ReadFile(file)
		if err != nil {
			return Broker{}, fmt.Errorf("config file: %w", err)
		}
		props, err := ParseFile(file, data)
		if err != nil {
			return Broker{}, err
		}
		for _, p := range props {
			where := fmt.Sprintf("%s:%d", file, p.Line)
			if why, ok := kafkaOnly[p.Name]; ok && lookupBroker(p.Name) == nil {
				b.Ignored = append(b.Ignored, fmt.Sprintf("%s: %s is ignored: %s", where, p.Name, why))
				continue
			}
			set(where, p.Name, p.Value)
		}
	}
	for i := range brokerProperties {
		name := brokerProperties[i].name
		envName := EnvName(name)
		if v := env(envName); v != "" {
			set("$"+envName, name, v)
		}
	}
	for _, a := range envAliases {
		if v := env(a.env); v != "" {
			set("$"+a.env, a.name, v)
		}
	}
	for _, name := range sortedKeys(flags) {
		set("command line", name, flags[name])
	}
	switch len(errs) {
	case 0:
	case 1:
		return Broker{}, errs[0]
	default:
		return Broker{}, errs
	}
	if err := b.checkTogether(); err != nil {
		return Broker{}, err
	}
	return b, nil
}

// checkTogether checks what no property can check alone, once every layer
// is applied: queued.max.request.bytes must hold a request of
// socket.request.max.bytes (Kafka refuses the same), else the largest
// requests could never be read; and the TLS settings must be whole
// (checkTLS); and max.connections.per.ip 0 (no TCP connection but from
// the overrides) needs max.connections.per.ip.overrides, as Kafka
// requires.
func (b *Broker) checkTogether() error {
	if err := b.checkTLS(); err != nil {
		return err
	}
	if b.MaxConnectionsPerIP == 0 && b.MaxConnectionsPerIPOverrides == "" {
		return invalid("max.connections.per.ip", "0", "at least 1, or 0 with max.connections.per.ip.overrides naming the addresses that may connect")
	}
	q, max := b.QueuedMaxRequestBytes, int64(b.SocketRequestMaxBytes)
	if q <= 0 || q >= max {
		return nil
	}
	allowed := fmt.Sprintf("at least socket.request.max.bytes (%d), or -1 for no bound", max)
	if _, set := b.explicit["queued.max.request.bytes"]; !set {
		allowed += " (" + fmtInt(q) + " is its default: raise it with socket.request.max.bytes)"
	}
	return invalid("queued.max.request.bytes", fmtInt(q), allowed)
}

// Property is one "key = value" line of a config file.
type Property struct {
	Name, Value string
	Line        int
}

// ParseFile splits a config file into its properties, in file order,
// without checking names or values. Syntax errors name the file and line.
func ParseFile(name string, data []byte) ([]Property, error) {
	var props []Property
	seen := map[string]int{}
	sc := bufio.NewScanner(bytes.NewReader(data))
	sc.Buffer(nil, len(data)+1)
	for n := 1; sc.Scan(); n++ {
		line := strings.TrimSpace(sc.Text())
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		key, value, ok := strings.Cut(line, "=")
		key, value = strings.TrimSpace(key), strings.TrimSpace(value)
		switch {
		case !ok:
			return nil, fmt.Errorf("%s:%d: want key = value, got %q", name, n, line)
		case key == "":
			return nil, fmt.Errorf("%s:%d: missing property name before =", name, n)
		case strings.ContainsAny(key, " \t"):
			return nil, fmt.Errorf("%s:%d: property name %q contains a space", name, n, key)
		}
		if first, dup := seen[key]; dup {
			return nil, fmt.Errorf("%s:%d: %s already set on line %d", name, n, key, first)
		}
		seen[key] = n
		props = append(props, Property{Name: key, Value: value, Line: n})
	}
	if err := sc.Err(); err != nil {
		return nil, fmt.Errorf("%s: %w", name, err)
	}
	return props, nil
}

// Properties lists the names of every broker property Load accepts
// (aliases included), sorted.
func Properties() []string {
	names := make([]string, len(brokerProperties))
	for i := range brokerProperties {
		names[i] = brokerProperties[i].name
	}
	return names
}

// checkTLS checks that an ssl:// listener has a certificate and a key,
// that neither comes without the other, and that client certificates are
// asked for only with CAs to check them against. Whether the files hold
// what they should is for mqd to find when it reads them.
func (b *Broker) checkTLS() error {
	hasSSL := false
	for _, l := range b.Listeners {
		hasSSL = hasSSL || strings.HasPrefix(l, "ssl://") || strings.HasPrefix(l, "sasl_ssl://")
	}
	cert, key := b.SSLCertificateLocation, b.SSLKeyLocation
	switch {
	case cert == "" && key != "":
		return invalid("ssl.certificate.location", "", "a certificate file for ssl.key.location "+key)
	case cert != "" && key == "":
		return invalid("ssl.key.location", "", "the private key file of ssl.certificate.location "+cert)
	case hasSSL && cert == "":
		return invalid("ssl.certificate.location", "", "a certificate file, with ssl.key.location its key, for the ssl:// or sasl_ssl:// listener")
	}
	if b.SSLClientAuth != "" && b.SSLClientAuth != "none" && b.SSLCALocation == "" {
		return invalid("ssl.ca.location", "", "a file of CA certificates to check client certificates against, as ssl.client.auth is "+b.SSLClientAuth)
	}
	// The controller port's TLS takes all three files or none.
	ccert, ckey, cca := b.ControllerSSLCertificateLocation, b.ControllerSSLKeyLocation, b.ControllerSSLCALocation
	if ccert != "" || ckey != "" || cca != "" {
		switch {
		case ccert == "":
			return invalid("controller.ssl.certificate.location", "", "this node's certificate file, as controller.ssl.key.location or controller.ssl.ca.location is set")
		case ckey == "":
			return invalid("controller.ssl.key.location", "", "the private key file of controller.ssl.certificate.location "+ccert)
		case cca == "":
			return invalid("controller.ssl.ca.location", "", "the cluster CA file that the other nodes' certificates chain to")
		}
	}
	if b.InterBrokerProtocol == "SSL" {
		switch {
		case ccert == "":
			return invalid("controller.ssl.certificate.location", "", "this node's certificate, which security.inter.broker.protocol SSL presents to the leaders")
		case !hasSSL:
			return invalid("listeners", "", "an ssl:// listener, which security.inter.broker.protocol SSL fetches from")
		case b.SSLClientAuth != "requested" && b.SSLClientAuth != "required":
			return invalid("ssl.client.auth", b.SSLClientAuth, "requested or required, so that security.inter.broker.protocol SSL sees the followers' certificates")
		}
	}
	return nil
}
