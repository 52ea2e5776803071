package auth

import (
	"strconv"
	"strings"
)

// Anonymous is the principal of a connection that did not authenticate.
const Anonymous = "User:ANONYMOUS"

// User is the principal of the user name.
func User(name string) string { return "User:" + name }

// UnixUser is the principal of a Unix socket peer running as uid.
func UnixUser(uid uint32) string { return "User:uid:" + strconv.FormatUint(uint64(uid), 10) }

// Split parses a principal "TYPE:NAME" into its type and name; ok is false
// when it has no colon or an empty type.
func Split(principal string) (typ, name string, ok bool) {
	typ, name, ok = strings.Cut(principal, ":")
	return typ, name, ok && typ != ""
}
