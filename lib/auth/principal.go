package auth

import (
	"crypto/x509"
	"strconv"
	"strings"
)

// Anonymous is the principal of a connection that did not authenticate.
const Anonymous = "User:ANONYMOUS"

// User is the principal of the user name.
func User(name string) string { return "User:" + name }

// CertificateUser is the principal of a verified certificate: "User:"
// and its subject as an RFC 2253 distinguished name, Kafka's default
// mapping. The Kafka listeners (lib/server) and the controller port
// (lib/controller) both use it, so that the principal a node's
// certificate is bound to on one is the one it has on the other.
func CertificateUser(cert *x509.Certificate) string { return User(cert.Subject.String()) }

// UnixUser is the principal of a Unix socket peer running as uid.
func UnixUser(uid uint32) string { return "User:uid:" + strconv.FormatUint(uint64(uid), 10) }

// Split parses a principal "TYPE:NAME" into its type and name; ok is false
// when it has no colon or an empty type.
func Split(principal string) (typ, name string, ok bool) {
	typ, name, ok = strings.Cut(principal, ":")
	return typ, name, ok && typ != ""
}
