package auth

import (
	"testing"

	"github.com/twmb/franz-go/pkg/kmsg"
)

const (
	topic    = kmsg.ACLResourceTypeTopic
	group    = kmsg.ACLResourceTypeGroup
	cluster  = kmsg.ACLResourceTypeCluster
	literal  = kmsg.ACLResourcePatternTypeLiteral
	prefixed = kmsg.ACLResourcePatternTypePrefixed
	allow    = kmsg.ACLPermissionTypeAllow
	deny     = kmsg.ACLPermissionTypeDeny

	read            = kmsg.ACLOperationRead
	write           = kmsg.ACLOperationWrite
	create          = kmsg.ACLOperationCreate
	del             = kmsg.ACLOperationDelete
	alter           = kmsg.ACLOperationAlter
	describe        = kmsg.ACLOperationDescribe
	describeConfigs = kmsg.ACLOperationDescribeConfigs
	alterConfigs    = kmsg.ACLOperationAlterConfigs
	all             = kmsg.ACLOperationAll
)

// acl is a binding from any host.
func acl(typ ResourceType, name string, pat PatternType, principal string, op Operation, perm Permission) Binding {
	return Binding{ResourceType: typ, ResourceName: name, PatternType: pat, Principal: principal, Host: Wildcard, Operation: op, Permission: perm}
}

func TestAuthorize(t *testing.T) {
	alice, bob := "User:alice", "User:bob"
	onHost := func(b Binding, host string) Binding { b.Host = host; return b }
	for _, tc := range []struct {
		name   string
		policy Policy
		acls   []Binding
		req    Request
		want   bool
	}{
		{"no ACL at all, allow.everyone off", Policy{}, nil,
			Request{Principal: alice, Operation: read, Type: topic, Name: "orders"}, false},
		{"no ACL at all, allow.everyone on", Policy{AllowEveryoneIfNoACLFound: true}, nil,
			Request{Principal: alice, Operation: read, Type: topic, Name: "orders"}, true},
		{"no ACL on this resource, allow.everyone on", Policy{AllowEveryoneIfNoACLFound: true},
			[]Binding{acl(topic, "other", literal, bob, read, allow)},
			Request{Principal: alice, Operation: read, Type: topic, Name: "orders"}, true},
		{"an ACL for someone else on the resource closes it, allow.everyone on", Policy{AllowEveryoneIfNoACLFound: true},
			[]Binding{acl(topic, "orders", literal, bob, read, allow)},
			Request{Principal: alice, Operation: read, Type: topic, Name: "orders"}, false},
		{"literal allow", Policy{}, []Binding{acl(topic, "orders", literal, alice, read, allow)},
			Request{Principal: alice, Operation: read, Type: topic, Name: "orders"}, true},
		{"literal is not prefix", Policy{}, []Binding{acl(topic, "orders", literal, alice, read, allow)},
			Request{Principal: alice, Operation: read, Type: topic, Name: "orders-eu"}, false},
		{"other operation", Policy{}, []Binding{acl(topic, "orders", literal, alice, read, allow)},
			Request{Principal: alice, Operation: write, Type: topic, Name: "orders"}, false},
		{"other principal", Policy{}, []Binding{acl(topic, "orders", literal, alice, read, allow)},
			Request{Principal: bob, Operation: read, Type: topic, Name: "orders"}, false},
		{"other resource type", Policy{}, []Binding{acl(group, "orders", literal, alice, read, allow)},
			Request{Principal: alice, Operation: read, Type: topic, Name: "orders"}, false},
		{"prefixed allow", Policy{}, []Binding{acl(topic, "orders-", prefixed, alice, write, allow)},
			Request{Principal: alice, Operation: write, Type: topic, Name: "orders-eu"}, true},
		{"prefixed: the prefix itself", Policy{}, []Binding{acl(topic, "orders-", prefixed, alice, write, allow)},
			Request{Principal: alice, Operation: write, Type: topic, Name: "orders-"}, true},
		{"prefixed does not match a shorter name", Policy{}, []Binding{acl(topic, "orders-", prefixed, alice, write, allow)},
			Request{Principal: alice, Operation: write, Type: topic, Name: "orders"}, false},
		{"prefixed * is a prefix, not a wildcard", Policy{}, []Binding{acl(topic, "*", prefixed, alice, write, allow)},
			Request{Principal: alice, Operation: write, Type: topic, Name: "orders"}, false},
		{"literal * matches every name", Policy{}, []Binding{acl(topic, "*", literal, alice, write, allow)},
			Request{Principal: alice, Operation: write, Type: topic, Name: "orders"}, true},
		{"User:* matches every user", Policy{}, []Binding{acl(topic, "orders", literal, AnyUser, read, allow)},
			Request{Principal: bob, Operation: read, Type: topic, Name: "orders"}, true},
		{"User:* matches the anonymous", Policy{}, []Binding{acl(topic, "orders", literal, AnyUser, read, allow)},
			Request{Operation: read, Type: topic, Name: "orders"}, true},
		{"an unauthenticated connection is User:ANONYMOUS", Policy{}, []Binding{acl(topic, "orders", literal, Anonymous, read, allow)},
			Request{Operation: read, Type: topic, Name: "orders"}, true},
		{"host must match", Policy{}, []Binding{onHost(acl(topic, "orders", literal, alice, read, allow), "10.0.0.1")},
			Request{Principal: alice, Host: "10.0.0.2", Operation: read, Type: topic, Name: "orders"}, false},
		{"host matches", Policy{}, []Binding{onHost(acl(topic, "orders", literal, alice, read, allow), "10.0.0.1")},
			Request{Principal: alice, Host: "10.0.0.1", Operation: read, Type: topic, Name: "orders"}, true},
		{"the Unix socket matches only host *", Policy{}, []Binding{onHost(acl(topic, "orders", literal, alice, read, allow), "127.0.0.1")},
			Request{Principal: alice, Local: true, Operation: read, Type: topic, Name: "orders"}, false},
		{"deny wins over allow on the same pattern", Policy{}, []Binding{
			acl(topic, "orders", literal, alice, read, allow), acl(topic, "orders", literal, alice, read, deny)},
			Request{Principal: alice, Operation: read, Type: topic, Name: "orders"}, false},
		{"deny on a prefix wins over a literal allow", Policy{}, []Binding{
			acl(topic, "orders", literal, alice, read, allow), acl(topic, "ord", prefixed, alice, read, deny)},
			Request{Principal: alice, Operation: read, Type: topic, Name: "orders"}, false},
		{"deny to User:* wins over allow to alice", Policy{}, []Binding{
			acl(topic, "orders", literal, alice, read, allow), acl(topic, "*", literal, AnyUser, read, deny)},
			Request{Principal: alice, Operation: read, Type: topic, Name: "orders"}, false},
		{"deny ALL denies everything", Policy{}, []Binding{
			acl(topic, "orders", literal, alice, all, allow), acl(topic, "orders", literal, alice, all, deny)},
			Request{Principal: alice, Operation: describe, Type: topic, Name: "orders"}, false},
		{"deny of another operation leaves this one", Policy{}, []Binding{
			acl(topic, "orders", literal, alice, all, allow), acl(topic, "orders", literal, alice, write, deny)},
			Request{Principal: alice, Operation: read, Type: topic, Name: "orders"}, true},
		{"deny from another host leaves this one", Policy{}, []Binding{
			acl(topic, "orders", literal, alice, read, allow), onHost(acl(topic, "orders", literal, alice, read, deny), "10.0.0.9")},
			Request{Principal: alice, Host: "10.0.0.1", Operation: read, Type: topic, Name: "orders"}, true},
		{"ALL allows every operation", Policy{}, []Binding{acl(topic, "orders", literal, alice, all, allow)},
			Request{Principal: alice, Operation: alterConfigs, Type: topic, Name: "orders"}, true},
		{"READ implies DESCRIBE", Policy{}, []Binding{acl(topic, "orders", literal, alice, read, allow)},
			Request{Principal: alice, Operation: describe, Type: topic, Name: "orders"}, true},
		{"WRITE implies DESCRIBE", Policy{}, []Binding{acl(topic, "orders", literal, alice, write, allow)},
			Request{Principal: alice, Operation: describe, Type: topic, Name: "orders"}, true},
		{"DELETE implies DESCRIBE", Policy{}, []Binding{acl(topic, "orders", literal, alice, del, allow)},
			Request{Principal: alice, Operation: describe, Type: topic, Name: "orders"}, true},
		{"ALTER implies DESCRIBE", Policy{}, []Binding{acl(topic, "orders", literal, alice, alter, allow)},
			Request{Principal: alice, Operation: describe, Type: topic, Name: "orders"}, true},
		{"CREATE does not imply DESCRIBE", Policy{}, []Binding{acl(topic, "orders", literal, alice, create, allow)},
			Request{Principal: alice, Operation: describe, Type: topic, Name: "orders"}, false},
		{"ALTER_CONFIGS implies DESCRIBE_CONFIGS", Policy{}, []Binding{acl(topic, "orders", literal, alice, alterConfigs, allow)},
			Request{Principal: alice, Operation: describeConfigs, Type: topic, Name: "orders"}, true},
		{"DESCRIBE does not imply READ", Policy{}, []Binding{acl(topic, "orders", literal, alice, describe, allow)},
			Request{Principal: alice, Operation: read, Type: topic, Name: "orders"}, false},
		{"a DENY of READ does not deny DESCRIBE", Policy{}, []Binding{
			acl(topic, "orders", literal, alice, describe, allow), acl(topic, "orders", literal, alice, read, deny)},
			Request{Principal: alice, Operation: describe, Type: topic, Name: "orders"}, true},
		{"super user beats a deny", Policy{SuperUsers: []string{alice}}, []Binding{acl(topic, "*", literal, AnyUser, all, deny)},
			Request{Principal: alice, Operation: write, Type: topic, Name: "orders"}, true},
		{"super user with no ACL and allow.everyone off", Policy{SuperUsers: []string{alice}}, nil,
			Request{Principal: alice, Operation: alter, Type: cluster, Name: ClusterName}, true},
		{"local super user on the socket", Policy{LocalSuperUsers: []string{UnixUser(0)}}, []Binding{acl(topic, "*", literal, AnyUser, all, deny)},
			Request{Principal: UnixUser(0), Local: true, Operation: write, Type: topic, Name: "orders"}, true},
		{"local super user elsewhere is no one special", Policy{LocalSuperUsers: []string{UnixUser(0)}}, nil,
			Request{Principal: UnixUser(0), Operation: write, Type: topic, Name: "orders"}, false},
		{"another uid on the socket", Policy{LocalSuperUsers: []string{UnixUser(0)}}, nil,
			Request{Principal: UnixUser(1000), Local: true, Operation: write, Type: topic, Name: "orders"}, false},
		{"cluster", Policy{}, []Binding{acl(cluster, ClusterName, literal, alice, alter, allow)},
			Request{Principal: alice, Operation: alter, Type: cluster, Name: ClusterName}, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			z := NewAuthorizer(tc.policy)
			if got := z.Authorize(NewACLs(tc.acls), tc.req); got != tc.want {
				t.Errorf("Authorize(%+v) = %v, want %v", tc.req, got, tc.want)
			}
		})
	}
}

func TestAuthorizeAnyIsKafkasAuthorizeByResourceType(t *testing.T) {
	alice := "User:alice"
	req := Request{Principal: alice, Operation: write, Type: topic}
	for _, tc := range []struct {
		name   string
		policy Policy
		acls   []Binding
		want   bool
	}{
		{"nothing", Policy{}, nil, false},
		{"nothing, allow.everyone", Policy{AllowEveryoneIfNoACLFound: true}, nil, true},
		{"an ACL of the type for another, allow.everyone", Policy{AllowEveryoneIfNoACLFound: true},
			[]Binding{acl(topic, "a", literal, "User:bob", write, allow)}, false},
		{"write on one topic", Policy{}, []Binding{acl(topic, "a", literal, alice, write, allow)}, true},
		{"write on a prefix", Policy{}, []Binding{acl(topic, "a-", prefixed, alice, write, allow)}, true},
		{"read only", Policy{}, []Binding{acl(topic, "a", literal, alice, read, allow)}, false},
		{"denied on the same topic", Policy{}, []Binding{
			acl(topic, "a", literal, alice, write, allow), acl(topic, "a", literal, alice, write, deny)}, false},
		{"denied on a broader prefix", Policy{}, []Binding{
			acl(topic, "ab-", prefixed, alice, write, allow), acl(topic, "a", prefixed, alice, write, deny)}, false},
		{"denied on another topic", Policy{}, []Binding{
			acl(topic, "a", literal, alice, write, allow), acl(topic, "b", literal, alice, write, deny)}, true},
		{"denied on *", Policy{}, []Binding{
			acl(topic, "a", literal, alice, write, allow), acl(topic, "*", literal, AnyUser, write, deny)}, false},
		{"super user", Policy{SuperUsers: []string{alice}}, []Binding{acl(topic, "*", literal, AnyUser, all, deny)}, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := NewAuthorizer(tc.policy).AuthorizeAny(NewACLs(tc.acls), req); got != tc.want {
				t.Errorf("AuthorizeAny = %v, want %v", got, tc.want)
			}
		})
	}
}

func TestAuthorizeDoesNotAllocate(t *testing.T) {
	acls := NewACLs([]Binding{
		acl(topic, "orders", literal, "User:alice", read, allow),
		acl(topic, "ord", prefixed, "User:bob", write, deny),
		acl(topic, "*", literal, AnyUser, describe, allow),
	})
	z := NewAuthorizer(Policy{SuperUsers: []string{"User:root"}, AllowEveryoneIfNoACLFound: true})
	reqs := []Request{
		{Principal: "User:alice", Host: "10.0.0.1", Operation: read, Type: topic, Name: "orders"},
		{Principal: "User:bob", Operation: write, Type: topic, Name: "orders"},
		{Principal: "User:root", Operation: write, Type: topic, Name: "orders"},
		{Operation: write, Type: group, Name: "g"},
	}
	if n := testing.AllocsPerRun(100, func() {
		for _, r := range reqs {
			z.Authorize(acls, r)
		}
		z.Authorize(nil, reqs[0])
	}); n != 0 {
		t.Fatalf("Authorize allocated %v times", n)
	}
}

// TestUnrestricted: super users may do anything; others only while no
// ACL exists and allow.everyone.if.no.acl.found holds.
func TestUnrestricted(t *testing.T) {
	acls := NewACLs([]Binding{acl(topic, "orders", literal, "User:alice", read, allow)})
	for _, c := range []struct {
		everyone bool
		acls     *ACLs
		r        Request
		want     bool
	}{
		{true, nil, Request{Principal: "User:alice"}, true},
		{false, nil, Request{Principal: "User:alice"}, false},
		{true, acls, Request{Principal: "User:alice"}, false},
		{false, acls, Request{Principal: "User:root"}, true},
		{false, acls, Request{Principal: "User:uid:0"}, false},
		{false, acls, Request{Principal: "User:uid:0", Local: true}, true},
	} {
		z := NewAuthorizer(Policy{SuperUsers: []string{"User:root"}, LocalSuperUsers: []string{"User:uid:0"}, AllowEveryoneIfNoACLFound: c.everyone})
		if got := z.Unrestricted(c.acls, c.r); got != c.want {
			t.Errorf("everyone %v, acls %v, %+v: %v, want %v", c.everyone, c.acls != nil, c.r, got, c.want)
		}
	}
	z := NewAuthorizer(Policy{SuperUsers: []string{"User:root"}, AllowEveryoneIfNoACLFound: true})
	if n := testing.AllocsPerRun(100, func() { z.Unrestricted(acls, Request{Principal: "User:bob"}) }); n != 0 {
		t.Errorf("Unrestricted allocated %v times", n)
	}
}

func TestParseSuperUsers(t *testing.T) {
	got := ParseSuperUsers(" User:alice ;User:CN=b,O=c;;")
	if len(got) != 2 || got[0] != "User:alice" || got[1] != "User:CN=b,O=c" {
		t.Fatalf("ParseSuperUsers = %q", got)
	}
	if got := ParseSuperUsers(""); got != nil {
		t.Fatalf("ParseSuperUsers(\"\") = %q", got)
	}
}

// BenchmarkAuthorize is one decision against a set of 1,000 bindings
// (literal, prefixed and wildcard, over 3 resource types), as a produce
// of one topic asks it.
func BenchmarkAuthorize(b *testing.B) {
	var bs []Binding
	for i := range 1000 {
		name := "topic-" + string(rune('a'+i%26)) + string(rune('a'+i/26%26))
		pat := literal
		if i%10 == 0 {
			pat = prefixed
		}
		bs = append(bs, acl(ResourceType(2+i%3), name, pat, "User:u"+name, write, allow))
	}
	bs = append(bs, acl(topic, "*", literal, AnyUser, describe, allow))
	acls := NewACLs(bs)
	z := NewAuthorizer(Policy{})
	r := Request{Principal: "User:utopic-ab", Operation: write, Type: topic, Name: "topic-ab"}
	b.ReportAllocs()
	for b.Loop() {
		z.Authorize(acls, r)
	}
}
