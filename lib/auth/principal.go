package auth

import (
	"crypto/x509"
	"errors"
	"strconv"
	"strings"
)

// ErrUnacceptableUser refuses a user name for a SASL credential
// (CheckUserName).
var ErrUnacceptableUser = errors.New("auth: unacceptable user name")

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

// CheckUserName refuses a name a SASL user may not have: empty, or
// starting with "uid:", which would make its principal a Unix socket
// peer's (UnixUser) and match that peer's ACLs. Refusals match
// ErrUnacceptableUser; their message is the reason alone.
func CheckUserName(name string) error {
	switch {
	case name == "":
		return &userError{"the user name must not be empty"}
	case strings.HasPrefix(name, "uid:"):
		return &userError{"user names starting with uid: are the Unix socket's principals"}
	}
	return nil
}

type userError struct{ msg string }

func (e *userError) Error() string { return e.msg }
func (e *userError) Unwrap() error { return ErrUnacceptableUser }

// Split parses a principal "TYPE:NAME" into its type and name; ok is false
// when it has no colon or an empty type.
func Split(principal string) (typ, name string, ok bool) {
	typ, name, ok = strings.Cut(principal, ":")
	return typ, name, ok && typ != ""
}
