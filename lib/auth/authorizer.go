package auth

import (
	"os"
	"strings"

	"github.com/twmb/franz-go/pkg/kmsg"
)

// Policy is the authorizer's static configuration.
type Policy struct {
	// SuperUsers may do anything, whatever the ACLs (super.users).
	SuperUsers []string
	// LocalSuperUsers may do anything when they come on the Unix socket
	// (Request.Local): root's and mqd's own uid, so the first ACLs can be
	// created from the machine without a password. Honoured only on the
	// socket, so no other way of authenticating can claim the names.
	LocalSuperUsers []string
	// AllowEveryoneIfNoACLFound allows every operation on a resource no
	// ACL matches (allow.everyone.if.no.acl.found).
	AllowEveryoneIfNoACLFound bool
}

// NodePolicy is the Policy of an mqd: the super users of superUsers
// (super.users, ParseSuperUsers), root and the user mqd runs as on the
// Unix socket (so that the first ACLs are created from the machine), and
// allowEveryone (allow.everyone.if.no.acl.found in effect).
func NodePolicy(superUsers string, allowEveryone bool) Policy {
	return Policy{
		SuperUsers:                ParseSuperUsers(superUsers),
		LocalSuperUsers:           []string{UnixUser(0), UnixUser(uint32(os.Getuid()))},
		AllowEveryoneIfNoACLFound: allowEveryone,
	}
}

// ParseSuperUsers splits Kafka's super.users, principals separated by
// ';' (spaces around them ignored).
func ParseSuperUsers(s string) []string {
	var out []string
	for _, p := range strings.Split(s, ";") {
		if p = strings.TrimSpace(p); p != "" {
			out = append(out, p)
		}
	}
	return out
}

// Request is one operation to authorize.
type Request struct {
	// Principal is who asks ("" is Anonymous); Host the IP address it
	// connects from, as text ("" on the Unix socket: only the host "*"
	// matches it).
	Principal string
	Host      string
	// Local: the request came on the Unix socket.
	Local     bool
	Operation Operation
	Type      ResourceType
	Name      string // the resource's name; ClusterName for the CLUSTER
}

// Authorizer decides requests by a Policy and a set of ACLs, Kafka's
// way:
//
//   - a super user is allowed everything;
//   - the bindings that apply to a resource are those of its type whose
//     pattern matches its name: LITERAL of the name or of "*", PREFIXED
//     of a prefix of the name. When there are none, the request is
//     allowed only if AllowEveryoneIfNoACLFound;
//   - of those, the ones for the principal (or "User:*") and host (or
//     "*") decide: any DENY of the operation (or of ALL) refuses; else
//     any ALLOW of the operation, of ALL or of an operation that implies
//     it allows; else the request is refused. Deny wins.
//
// READ, WRITE, DELETE and ALTER each imply DESCRIBE; ALTER_CONFIGS
// implies DESCRIBE_CONFIGS. A DENY implies nothing.
//
// An Authorizer is immutable and safe for concurrent use; Authorize
// does not allocate.
type Authorizer struct {
	super, local  map[string]struct{}
	allowEveryone bool
}

// NewAuthorizer returns the Authorizer of p.
func NewAuthorizer(p Policy) *Authorizer {
	z := &Authorizer{super: map[string]struct{}{}, local: map[string]struct{}{}, allowEveryone: p.AllowEveryoneIfNoACLFound}
	for _, s := range p.SuperUsers {
		z.super[s] = struct{}{}
	}
	for _, s := range p.LocalSuperUsers {
		z.local[s] = struct{}{}
	}
	return z
}

// AllowsEveryone reports whether a resource no ACL matches is open to
// all (allow.everyone.if.no.acl.found).
func (z *Authorizer) AllowsEveryone() bool { return z.allowEveryone }

// Unrestricted reports whether r's principal may do anything at all
// with acls: a super user, or no ACL exists (acls is nil) and
// allow.everyone.if.no.acl.found holds. It needs no resource in r, and
// does not allocate, so that callers may ask it of every request first.
func (z *Authorizer) Unrestricted(acls *ACLs, r Request) bool {
	return (acls == nil && z.allowEveryone) || z.IsSuperUser(r)
}

// IsSuperUser reports whether r's principal is allowed everything.
func (z *Authorizer) IsSuperUser(r Request) bool {
	p := principalOf(r)
	if _, ok := z.super[p]; ok {
		return true
	}
	if r.Local {
		if _, ok := z.local[p]; ok {
			return true
		}
	}
	return false
}

func principalOf(r Request) string {
	if r.Principal == "" {
		return Anonymous
	}
	return r.Principal
}

// Authorize reports whether r is allowed by acls.
func (z *Authorizer) Authorize(acls *ACLs, r Request) bool {
	if z.IsSuperUser(r) {
		return true
	}
	if acls == nil || int(r.Type) < 0 || int(r.Type) >= len(acls.byType) {
		return z.allowEveryone
	}
	res := &acls.byType[r.Type]
	p := principalOf(r)
	found, allowed := false, false
	decide := func(bs []Binding) bool { // false: denied
		for i := range bs {
			b := &bs[i]
			found = true
			if !b.appliesTo(p, r.Host) {
				continue
			}
			if b.Permission == kmsg.ACLPermissionTypeDeny {
				if b.Operation == r.Operation || b.Operation == kmsg.ACLOperationAll {
					return false
				}
			} else if implies(b.Operation, r.Operation) {
				allowed = true
			}
		}
		return true
	}
	if !decide(res.literal[r.Name]) || !decide(res.literal[Wildcard]) {
		return false
	}
	for i := range res.prefixed {
		if strings.HasPrefix(r.Name, res.prefixed[i].ResourceName) && !decide(res.prefixed[i:i+1]) {
			return false
		}
	}
	if !found {
		return z.allowEveryone
	}
	return allowed
}

// AuthorizeAny reports whether r's principal may do r.Operation on at
// least one resource of r.Type (r.Name is ignored): Kafka's
// authorizeByResourceType, which InitProducerId asks of WRITE on topics.
// A super user may; a DENY of the operation on the LITERAL "*" refuses;
// an ALLOW of it on any pattern that no DENY on the same or a broader
// pattern cancels allows; with no binding of the type at all,
// AllowEveryoneIfNoACLFound decides.
func (z *Authorizer) AuthorizeAny(acls *ACLs, r Request) bool {
	if z.IsSuperUser(r) {
		return true
	}
	if acls == nil || int(r.Type) < 0 || int(r.Type) >= len(acls.byType) {
		return z.allowEveryone
	}
	p := principalOf(r)
	var denies, allows []Binding
	found := false
	for _, b := range acls.all {
		if b.ResourceType != r.Type {
			continue
		}
		found = true
		if !b.appliesTo(p, r.Host) {
			continue
		}
		switch {
		case b.Permission == kmsg.ACLPermissionTypeDeny && (b.Operation == r.Operation || b.Operation == kmsg.ACLOperationAll):
			if b.PatternType == kmsg.ACLResourcePatternTypeLiteral && b.ResourceName == Wildcard {
				return false
			}
			denies = append(denies, b)
		case b.Permission == kmsg.ACLPermissionTypeAllow && implies(b.Operation, r.Operation):
			allows = append(allows, b)
		}
	}
	if !found {
		return z.allowEveryone
	}
	for _, a := range allows {
		covered := false
		for _, d := range denies {
			// A DENY covers an ALLOW when it applies to every name the
			// ALLOW does.
			switch {
			case d.PatternType == kmsg.ACLResourcePatternTypePrefixed && strings.HasPrefix(a.ResourceName, d.ResourceName):
				covered = true
			case d.PatternType == kmsg.ACLResourcePatternTypeLiteral && a.PatternType == kmsg.ACLResourcePatternTypeLiteral && d.ResourceName == a.ResourceName:
				covered = true
			}
		}
		if !covered {
			return true
		}
	}
	return false
}

// appliesTo reports whether b is written for principal p connecting
// from host.
func (b *Binding) appliesTo(p, host string) bool {
	if b.Principal != p && !(b.Principal == AnyUser && strings.HasPrefix(p, "User:")) {
		return false
	}
	return b.Host == Wildcard || b.Host == host
}

// implies reports whether allowing granted allows op.
func implies(granted, op Operation) bool {
	switch {
	case granted == op, granted == kmsg.ACLOperationAll:
		return true
	case op == kmsg.ACLOperationDescribe:
		switch granted {
		case kmsg.ACLOperationRead, kmsg.ACLOperationWrite, kmsg.ACLOperationDelete, kmsg.ACLOperationAlter:
			return true
		}
	case op == kmsg.ACLOperationDescribeConfigs:
		return granted == kmsg.ACLOperationAlterConfigs
	}
	return false
}
