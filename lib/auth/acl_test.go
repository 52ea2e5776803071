package auth

import (
	"errors"
	"slices"
	"testing"

	"github.com/twmb/franz-go/pkg/kmsg"
)

func ptr(s string) *string { return &s }

func TestFilterMatchesAsKafkasDescribeAndDeleteAcls(t *testing.T) {
	every := Filter{ResourceType: kmsg.ACLResourceTypeAny, PatternType: kmsg.ACLResourcePatternTypeAny,
		Operation: kmsg.ACLOperationAny, Permission: kmsg.ACLPermissionTypeAny}
	with := func(f func(*Filter)) Filter { g := every; f(&g); return g }
	lit := acl(topic, "orders", literal, "User:alice", read, allow)
	star := acl(topic, "*", literal, "User:alice", read, allow)
	pre := acl(topic, "ord", prefixed, "User:alice", read, allow)
	grp := acl(group, "orders", literal, "User:bob", read, deny)
	bindings := []Binding{lit, star, pre, grp}
	for _, tc := range []struct {
		name string
		f    Filter
		want []Binding
	}{
		{"ANY of everything", every, bindings},
		{"resource type", with(func(f *Filter) { f.ResourceType = group }), []Binding{grp}},
		{"ANY pattern: the name exactly", with(func(f *Filter) { f.ResourceName = ptr("orders") }), []Binding{lit, grp}},
		{"ANY pattern: * is a name like another", with(func(f *Filter) { f.ResourceName = ptr("*") }), []Binding{star}},
		{"LITERAL", with(func(f *Filter) { f.PatternType = literal }), []Binding{lit, star, grp}},
		{"LITERAL named", with(func(f *Filter) { f.PatternType = literal; f.ResourceName = ptr("orders") }), []Binding{lit, grp}},
		{"PREFIXED", with(func(f *Filter) { f.PatternType = prefixed }), []Binding{pre}},
		{"PREFIXED named is exact", with(func(f *Filter) { f.PatternType = prefixed; f.ResourceName = ptr("orders") }), nil},
		{"MATCH: what applies to the topic orders", with(func(f *Filter) {
			f.ResourceType = topic
			f.PatternType = kmsg.ACLResourcePatternTypeMatch
			f.ResourceName = ptr("orders")
		}), []Binding{lit, star, pre}},
		{"MATCH: what applies to the topic other", with(func(f *Filter) {
			f.ResourceType = topic
			f.PatternType = kmsg.ACLResourcePatternTypeMatch
			f.ResourceName = ptr("other")
		}), []Binding{star}},
		{"MATCH without a name: all", with(func(f *Filter) { f.PatternType = kmsg.ACLResourcePatternTypeMatch }), bindings},
		{"principal exactly", with(func(f *Filter) { f.Principal = ptr("User:bob") }), []Binding{grp}},
		{"principal User:* is a principal like another", with(func(f *Filter) { f.Principal = ptr(AnyUser) }), nil},
		{"host", with(func(f *Filter) { f.Host = ptr("10.0.0.1") }), nil},
		{"operation", with(func(f *Filter) { f.Operation = read }), bindings},
		{"operation exactly, no implication", with(func(f *Filter) { f.Operation = describe }), nil},
		{"permission", with(func(f *Filter) { f.Permission = deny }), []Binding{grp}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var got []Binding
			for _, b := range bindings {
				if tc.f.Matches(b) {
					got = append(got, b)
				}
			}
			if !slices.Equal(got, tc.want) {
				t.Errorf("matched %v, want %v", got, tc.want)
			}
		})
	}
}

func TestValidate(t *testing.T) {
	good := acl(topic, "orders", literal, "User:alice", read, allow)
	if err := good.Validate(); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name string
		f    func(*Binding)
	}{
		{"resource type ANY", func(b *Binding) { b.ResourceType = kmsg.ACLResourceTypeAny }},
		{"resource type UNKNOWN", func(b *Binding) { b.ResourceType = kmsg.ACLResourceTypeUnknown }},
		{"pattern MATCH", func(b *Binding) { b.PatternType = kmsg.ACLResourcePatternTypeMatch }},
		{"pattern ANY", func(b *Binding) { b.PatternType = kmsg.ACLResourcePatternTypeAny }},
		{"empty name", func(b *Binding) { b.ResourceName = "" }},
		{"cluster of another name", func(b *Binding) { b.ResourceType = cluster; b.ResourceName = "c" }},
		{"operation ANY", func(b *Binding) { b.Operation = kmsg.ACLOperationAny }},
		{"operation out of range", func(b *Binding) { b.Operation = 99 }},
		{"permission ANY", func(b *Binding) { b.Permission = kmsg.ACLPermissionTypeAny }},
		{"principal without type", func(b *Binding) { b.Principal = "alice" }},
		{"empty host", func(b *Binding) { b.Host = "" }},
	} {
		b := good
		tc.f(&b)
		if err := b.Validate(); !errors.Is(err, ErrInvalid) {
			t.Errorf("%s: Validate = %v, want ErrInvalid", tc.name, err)
		}
	}
	f := Filter{ResourceType: kmsg.ACLResourceTypeAny, PatternType: kmsg.ACLResourcePatternTypeUnknown,
		Operation: kmsg.ACLOperationAny, Permission: kmsg.ACLPermissionTypeAny}
	if err := f.Validate(); !errors.Is(err, ErrInvalid) {
		t.Errorf("filter with an UNKNOWN pattern: Validate = %v", err)
	}
	f.PatternType = kmsg.ACLResourcePatternTypeMatch
	if err := f.Validate(); err != nil {
		t.Errorf("filter: %v", err)
	}
}

func TestACLsAddAndDeleteMakeNewSets(t *testing.T) {
	a := acl(topic, "a", literal, "User:alice", read, allow)
	b := acl(topic, "b", prefixed, "User:bob", write, deny)
	s1 := NewACLs([]Binding{b, a, a})
	if got := s1.Bindings(); !slices.Equal(got, []Binding{a, b}) {
		t.Fatalf("NewACLs kept %v", got)
	}
	s2 := s1.Add([]Binding{a})
	if s2.Len() != 2 {
		t.Fatalf("adding a duplicate: %d bindings", s2.Len())
	}
	byName := func(n string) Filter {
		return Filter{ResourceType: topic, ResourceName: ptr(n), PatternType: kmsg.ACLResourcePatternTypeAny,
			Operation: kmsg.ACLOperationAny, Permission: kmsg.ACLPermissionTypeAny}
	}
	s3, deleted := s2.Delete([]Filter{byName("a"), byName("a"), byName("zzz")})
	if s3.Len() != 1 || s3.Bindings()[0] != b {
		t.Fatalf("after delete: %v", s3.Bindings())
	}
	if len(deleted) != 3 || len(deleted[0]) != 1 || len(deleted[1]) != 1 || len(deleted[2]) != 0 {
		t.Fatalf("deleted %v", deleted)
	}
	if s2.Len() != 2 {
		t.Fatal("Delete modified the set it was called on")
	}
	s4, _ := s3.Delete([]Filter{byName("b")})
	if s4.Len() != 0 || s4.Bindings() != nil {
		t.Fatalf("empty set: %v", s4.Bindings())
	}
	var none *ACLs
	if none.Len() != 0 || none.Describe(byName("a")) != nil {
		t.Fatal("the nil set is not empty")
	}
}
