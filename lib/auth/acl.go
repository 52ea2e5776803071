package auth

import (
	"errors"
	"fmt"
	"slices"
	"strings"

	"github.com/twmb/franz-go/pkg/kmsg"
)

// The ACL vocabulary is Kafka's wire enums, so a binding read from a
// CreateAcls request is stored and answered without translation.
type (
	// ResourceType is what a binding is about: a topic, a group, the
	// cluster, a transactional ID or a delegation token.
	ResourceType = kmsg.ACLResourceType
	// PatternType is how a binding's resource name matches: literally
	// (the name "*" matching every resource of its type) or as a
	// prefix (KIP-290).
	PatternType = kmsg.ACLResourcePatternType
	// Operation is what a binding allows or denies.
	Operation = kmsg.ACLOperation
	// Permission is ALLOW or DENY.
	Permission = kmsg.ACLPermissionType
)

const (
	// ClusterName is the name of the one CLUSTER resource, Kafka's.
	ClusterName = "kafka-cluster"
	// Wildcard, as a LITERAL resource name, names every resource of its
	// type; as a host, every host.
	Wildcard = "*"
	// AnyUser, as a binding's principal, matches every User principal.
	AnyUser = "User:*"
)

// ErrInvalid is wrapped by the errors of Binding.Validate and
// Filter.Validate: Kafka's INVALID_REQUEST.
var ErrInvalid = errors.New("auth: invalid ACL")

// Binding is one ACL: Principal, from Host, is allowed or denied
// (Permission) Operation on the resources of ResourceType whose names
// match ResourceName as PatternType says.
type Binding struct {
	ResourceType ResourceType
	ResourceName string
	PatternType  PatternType
	Principal    string
	Host         string
	Operation    Operation
	Permission   Permission
}

func (b Binding) String() string {
	return fmt.Sprintf("%s %s %s:%s:%s from %s on %s", b.Principal, b.Permission, b.ResourceType, b.PatternType, b.ResourceName, b.Host, b.Operation)
}

// Validate says whether b may be stored, by the rules of Kafka's
// CreateAcls: a concrete resource type, pattern type, operation and
// permission (not ANY, MATCH or UNKNOWN), a resource name (kafka-cluster
// for the CLUSTER), a principal "TYPE:NAME" and a host.
func (b Binding) Validate() error {
	switch b.ResourceType {
	case kmsg.ACLResourceTypeTopic, kmsg.ACLResourceTypeGroup, kmsg.ACLResourceTypeCluster,
		kmsg.ACLResourceTypeTransactionalId, kmsg.ACLResourceTypeDelegationToken:
	default:
		return fmt.Errorf("%w: resource type %s", ErrInvalid, b.ResourceType)
	}
	switch b.PatternType {
	case kmsg.ACLResourcePatternTypeLiteral, kmsg.ACLResourcePatternTypePrefixed:
	default:
		return fmt.Errorf("%w: pattern type %s", ErrInvalid, b.PatternType)
	}
	if b.ResourceName == "" {
		return fmt.Errorf("%w: empty resource name", ErrInvalid)
	}
	if b.ResourceType == kmsg.ACLResourceTypeCluster && b.ResourceName != ClusterName {
		return fmt.Errorf("%w: the only CLUSTER resource is %s", ErrInvalid, ClusterName)
	}
	if b.Operation <= kmsg.ACLOperationAny || b.Operation > kmsg.ACLOperationDescribeTokens {
		return fmt.Errorf("%w: operation %s", ErrInvalid, b.Operation)
	}
	if b.Permission != kmsg.ACLPermissionTypeAllow && b.Permission != kmsg.ACLPermissionTypeDeny {
		return fmt.Errorf("%w: permission %s", ErrInvalid, b.Permission)
	}
	if _, _, ok := Split(b.Principal); !ok {
		return fmt.Errorf("%w: principal %q is not TYPE:NAME", ErrInvalid, b.Principal)
	}
	if b.Host == "" {
		return fmt.Errorf("%w: empty host (%s for every host)", ErrInvalid, Wildcard)
	}
	return nil
}

// Filter selects bindings, for DescribeAcls and DeleteAcls. A nil name,
// principal or host matches any; ANY matches every resource type,
// pattern type, operation or permission. The fields other than the
// resource name and pattern type match exactly: the principal "User:*"
// selects the bindings written for "User:*", not every user's.
//
// The pattern type MATCH selects the bindings that would apply to the
// named resource: LITERAL ones of that name or "*", and PREFIXED ones
// whose prefix the name starts with. ANY selects every pattern type,
// each name compared exactly.
type Filter struct {
	ResourceType ResourceType
	ResourceName *string
	PatternType  PatternType
	Principal    *string
	Host         *string
	Operation    Operation
	Permission   Permission
}

// Validate refuses a filter with an UNKNOWN field (a value this version
// of the protocol does not know), as Kafka does.
func (f Filter) Validate() error {
	switch {
	case f.ResourceType <= kmsg.ACLResourceTypeUnknown || f.ResourceType > kmsg.ACLResourceTypeUser:
		return fmt.Errorf("%w: resource type %s", ErrInvalid, f.ResourceType)
	case f.PatternType <= kmsg.ACLResourcePatternTypeUnknown || f.PatternType > kmsg.ACLResourcePatternTypePrefixed:
		return fmt.Errorf("%w: pattern type %s", ErrInvalid, f.PatternType)
	case f.Operation <= kmsg.ACLOperationUnknown || f.Operation > kmsg.ACLOperationDescribeTokens:
		return fmt.Errorf("%w: operation %s", ErrInvalid, f.Operation)
	case f.Permission <= kmsg.ACLPermissionTypeUnknown || f.Permission > kmsg.ACLPermissionTypeAllow:
		return fmt.Errorf("%w: permission %s", ErrInvalid, f.Permission)
	}
	return nil
}

// Matches reports whether f selects b.
func (f Filter) Matches(b Binding) bool {
	if f.ResourceType != kmsg.ACLResourceTypeAny && f.ResourceType != b.ResourceType {
		return false
	}
	if !f.matchesName(b) {
		return false
	}
	return (f.Principal == nil || *f.Principal == b.Principal) &&
		(f.Host == nil || *f.Host == b.Host) &&
		(f.Operation == kmsg.ACLOperationAny || f.Operation == b.Operation) &&
		(f.Permission == kmsg.ACLPermissionTypeAny || f.Permission == b.Permission)
}

func (f Filter) matchesName(b Binding) bool {
	switch f.PatternType {
	case kmsg.ACLResourcePatternTypeAny:
		return f.ResourceName == nil || *f.ResourceName == b.ResourceName
	case kmsg.ACLResourcePatternTypeMatch:
		if f.ResourceName == nil {
			return true
		}
		return patternMatches(b.PatternType, b.ResourceName, *f.ResourceName)
	default:
		return f.PatternType == b.PatternType && (f.ResourceName == nil || *f.ResourceName == b.ResourceName)
	}
}

// patternMatches reports whether a binding's pattern (typ, pattern)
// applies to the resource called name.
func patternMatches(typ PatternType, pattern, name string) bool {
	switch typ {
	case kmsg.ACLResourcePatternTypeLiteral:
		return pattern == name || pattern == Wildcard
	case kmsg.ACLResourcePatternTypePrefixed:
		return strings.HasPrefix(name, pattern)
	}
	return false
}

// compareBindings orders bindings by resource, then entry: the order of
// ACLs.Bindings, DescribeAcls and the controller's snapshot.
func compareBindings(a, b Binding) int {
	if c := int(a.ResourceType) - int(b.ResourceType); c != 0 {
		return c
	}
	if c := strings.Compare(a.ResourceName, b.ResourceName); c != 0 {
		return c
	}
	if c := int(a.PatternType) - int(b.PatternType); c != 0 {
		return c
	}
	if c := strings.Compare(a.Principal, b.Principal); c != 0 {
		return c
	}
	if c := strings.Compare(a.Host, b.Host); c != 0 {
		return c
	}
	if c := int(a.Operation) - int(b.Operation); c != 0 {
		return c
	}
	return int(a.Permission) - int(b.Permission)
}

// ACLs is a set of bindings indexed for Authorize. It is immutable: Add
// and Delete return a new set. The nil *ACLs is the empty set. Safe for
// concurrent use.
type ACLs struct {
	all    []Binding                                  // sorted by compareBindings, no duplicates
	hosts  bool                                       // some binding names a host other than "*"
	byType [kmsg.ACLResourceTypeUser + 1]resourceACLs // by ResourceType
}

// resourceACLs are the bindings of one resource type.
type resourceACLs struct {
	literal  map[string][]Binding // by resource name, "*" included
	prefixed []Binding
}

// NewACLs returns the set of bindings bs (duplicates once). It does not
// validate them: the controller stores only what Validate passed.
func NewACLs(bs []Binding) *ACLs {
	if len(bs) == 0 {
		return nil
	}
	all := slices.Clone(bs)
	slices.SortFunc(all, compareBindings)
	all = slices.Compact(all)
	a := &ACLs{all: all}
	for _, b := range all {
		a.hosts = a.hosts || b.Host != Wildcard
		if int(b.ResourceType) < 0 || int(b.ResourceType) >= len(a.byType) {
			continue
		}
		r := &a.byType[b.ResourceType]
		switch b.PatternType {
		case kmsg.ACLResourcePatternTypeLiteral:
			if r.literal == nil {
				r.literal = make(map[string][]Binding)
			}
			r.literal[b.ResourceName] = append(r.literal[b.ResourceName], b)
		case kmsg.ACLResourcePatternTypePrefixed:
			r.prefixed = append(r.prefixed, b)
		}
	}
	return a
}

// Len is the number of bindings.
func (a *ACLs) Len() int {
	if a == nil {
		return 0
	}
	return len(a.all)
}

// NeedsHost reports whether some binding names a host other than "*":
// when none does, Authorize does not look at Request.Host, and the
// caller need not format it.
func (a *ACLs) NeedsHost() bool { return a != nil && a.hosts }

// Bindings returns every binding, sorted. Do not modify the slice.
func (a *ACLs) Bindings() []Binding {
	if a == nil {
		return nil
	}
	return a.all
}

// Add returns the set with bs added (those already in it are not added
// twice).
func (a *ACLs) Add(bs []Binding) *ACLs {
	return NewACLs(append(slices.Clone(a.Bindings()), bs...))
}

// Delete returns the set without the bindings any of filters selects,
// and for each filter the bindings it selected (a binding two filters
// select is listed under both, as Kafka's DeleteAcls answers).
func (a *ACLs) Delete(filters []Filter) (*ACLs, [][]Binding) {
	deleted := make([][]Binding, len(filters))
	var keep []Binding
	for _, b := range a.Bindings() {
		gone := false
		for i, f := range filters {
			if f.Matches(b) {
				deleted[i] = append(deleted[i], b)
				gone = true
			}
		}
		if !gone {
			keep = append(keep, b)
		}
	}
	if len(keep) == a.Len() {
		return a, deleted
	}
	return NewACLs(keep), deleted
}

// Describe returns the bindings f selects, sorted.
func (a *ACLs) Describe(f Filter) []Binding {
	var out []Binding
	for _, b := range a.Bindings() {
		if f.Matches(b) {
			out = append(out, b)
		}
	}
	return out
}
