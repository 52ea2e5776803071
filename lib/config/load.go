package config

import (
	"bufio"
	"bytes"
	"fmt"
	"os"
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

// Load builds mqd's settings, each layer overriding the one before:
//
//  1. the defaults (Defaults, computed in env);
//  2. the config file, if file is not empty: "key = value" lines with
//     Kafka's property names; blank lines and lines starting with # are
//     ignored, whitespace around keys and values is trimmed, a property may
//     appear once;
//  3. the environment: MQ_<PROPERTY> for every property (see EnvName) and
//     MQ_DATA_DIR, MQ_LISTEN (comma-separated), MQ_ADVERTISE, MQ_VOTERS;
//     empty variables are ignored. env is a lookup, so MQ_* variables that
//     name no property are never seen (MQ_CONFIG, MQ_SOCKET and the tools'
//     MQ_BROKER are not properties);
//  4. flags: property name → value, as the command line gives them.
//
// Durations given in several units resolve like Kafka's, whatever the
// layer: log.retention.ms beats log.retention.minutes beats
// log.retention.hours, log.roll.ms beats log.roll.hours.
//
// The first error is returned, an *Error saying where the property came
// from ("mqd.conf:3", "$MQ_NUM_PARTITIONS", "command line"); it matches
// ErrUnknownConfig or ErrInvalidValue. A config file that cannot be read is
// an error too.
func Load(file string, env func(string) string, flags map[string]string) (Broker, error) {
	if env == nil {
		env = func(string) string { return "" }
	}
	b := defaultsFor(env, os.Getuid())
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
			if err := b.Set(p.Name, p.Value); err != nil {
				return Broker{}, at(fmt.Sprintf("%s:%d", file, p.Line), err)
			}
		}
	}
	for i := range brokerProperties {
		name := brokerProperties[i].name
		envName := EnvName(name)
		if v := env(envName); v != "" {
			if err := b.Set(name, v); err != nil {
				return Broker{}, at("$"+envName, err)
			}
		}
	}
	for _, a := range envAliases {
		if v := env(a.env); v != "" {
			if err := b.Set(a.name, v); err != nil {
				return Broker{}, at("$"+a.env, err)
			}
		}
	}
	for _, name := range sortedKeys(flags) {
		if err := b.Set(name, flags[name]); err != nil {
			return Broker{}, at("command line", err)
		}
	}
	if err := b.checkTogether(); err != nil {
		return Broker{}, err
	}
	return b, nil
}

// checkTogether checks what no property can check alone, once every layer
// is applied: queued.max.request.bytes must hold a request of
// socket.request.max.bytes (Kafka refuses the same), else the largest
// requests could never be read.
func (b *Broker) checkTogether() error {
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
