package main

import (
	"slices"
	"strings"

	"github.com/urfave/cli/v2"

	"github.com/mqproject/mq/lib/client"
)

// propertyFlag is -X KEY=VALUE, kcat's librdkafka properties; mqpipe
// takes those of the connection's security (kcatProperties).
func propertyFlag() cli.Flag {
	return &cli.StringSliceFlag{Name: "X", Usage: "kcat's librdkafka property `KEY=VALUE`, repeated: security.protocol, sasl.mechanisms, sasl.username, sasl.password, ssl.ca.location, ssl.certificate.location, ssl.key.location"}
}

// connectionFlags are the connection flags and -X.
func connectionFlags() []cli.Flag {
	return append(client.ConnectionFlags(), propertyFlag())
}

// security is the TLS files and SASL login of c: the --tls-* and
// --sasl-* flags, then the -X properties (given at any level of the
// command line) on top.
func security(c *cli.Context) (client.TLSFiles, error) {
	f := client.TLSFilesOf(c)
	var props []string
	for _, ctx := range slices.Backward(c.Lineage()) {
		if ctx.Command == nil && ctx.App == nil {
			continue
		}
		if slices.Contains(ctx.LocalFlagNames(), "X") {
			props = append(props, ctx.StringSlice("X")...)
		}
	}
	return kcatProperties(f, props)
}

// kcatProperties applies kcat's -X properties to f:
// security.protocol (plaintext, ssl, sasl_plaintext, sasl_ssl, any case),
// sasl.mechanisms (or sasl.mechanism), sasl.username, sasl.password and
// the ssl.*.location files. sasl.password is taken as kcat takes it,
// though a command line is visible in ps: $MQ_SASL_PASSWORD or
// --sasl-password-file keep it out of sight. Any other property, a
// property without "=", and SASL settings with a protocol without SASL
// are usage errors.
func kcatProperties(f client.TLSFiles, props []string) (client.TLSFiles, error) {
	protocol := ""
	for _, p := range props {
		key, value, ok := strings.Cut(p, "=")
		if !ok {
			return f, client.Usagef("-X %s: want KEY=VALUE", p)
		}
		switch key {
		case "security.protocol":
			protocol = strings.ToLower(value)
			switch protocol {
			case "plaintext", "ssl", "sasl_plaintext", "sasl_ssl":
			default:
				return f, client.Usagef("-X security.protocol=%s: want plaintext, ssl, sasl_plaintext or sasl_ssl", value)
			}
		case "sasl.mechanisms", "sasl.mechanism":
			f.SASL.Mechanism = value
		case "sasl.username":
			f.SASL.User = value
		case "sasl.password":
			f.SASL.Password = value
		case "ssl.ca.location":
			f.CA = value
		case "ssl.certificate.location":
			f.Cert = value
		case "ssl.key.location":
			f.Key = value
		default:
			return f, client.Usagef("-X %s: mqpipe takes security.protocol, sasl.mechanisms, sasl.username, sasl.password and ssl.{ca,certificate,key}.location", key)
		}
	}
	switch protocol {
	case "ssl", "sasl_ssl":
		f.ForceTLS = true
	}
	if (protocol == "plaintext" || protocol == "ssl") && !f.SASL.Empty() {
		return f, client.Usagef("-X security.protocol=%s: the SASL settings need sasl_plaintext or sasl_ssl", protocol)
	}
	if strings.HasPrefix(protocol, "sasl_") && f.SASL.Mechanism == "" {
		return f, client.Usagef("-X security.protocol=%s needs -X sasl.mechanisms=PLAIN, SCRAM-SHA-256 or SCRAM-SHA-512", protocol)
	}
	return f, nil
}
