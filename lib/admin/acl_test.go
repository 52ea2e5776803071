package admin

import (
	"errors"
	"testing"

	"github.com/mqproject/mq/lib/client"
)

func TestACLSpecIsCheckedAsKafkaACLsChecksIt(t *testing.T) {
	ok := ACLSpec{Allow: []string{"User:CN=a,O=b"}, Operations: []string{"DescribeConfigs", "cluster-action", "write"}, Topics: []string{"t"}}
	if err := ParseACLSpec("acl add", ok); err != nil {
		t.Fatalf("acl add %+v: %v", ok, err)
	}
	if err := ParseACLSpec("acl list", ACLSpec{}); err != nil {
		t.Fatalf("acl list with no filter: %v", err)
	}
	for _, tc := range []struct {
		what string
		s    ACLSpec
	}{
		{"acl add", ACLSpec{Operations: []string{"write"}, Topics: []string{"t"}}},                                              // no principal
		{"acl add", ACLSpec{Allow: []string{"alice"}, Operations: []string{"write"}, Topics: []string{"t"}}},                    // not TYPE:NAME
		{"acl add", ACLSpec{Allow: []string{"User:a"}, Topics: []string{"t"}}},                                                  // no operation
		{"acl add", ACLSpec{Allow: []string{"User:a"}, Operations: []string{"write"}}},                                          // no resource
		{"acl add", ACLSpec{Allow: []string{"User:a"}, Operations: []string{"fly"}, Topics: []string{"t"}}},                     // unknown operation
		{"acl add", ACLSpec{Allow: []string{"User:a"}, Operations: []string{"write"}, Topics: []string{"t"}, Pattern: "match"}}, // match is a filter's
		{"acl add", ACLSpec{Allow: []string{"User:a"}, Operations: []string{"write"}, Topics: []string{""}}},                    // empty name
		{"acl remove", ACLSpec{Allow: []string{"User:a"}}},                                                                      // no resource
		{"acl list", ACLSpec{Pattern: "sideways"}},
		{"acl list", ACLSpec{Hosts: []string{""}}},
	} {
		var ce *client.Error
		if err := ParseACLSpec(tc.what, tc.s); !errors.As(err, &ce) || ce.Code != client.ExitUsage {
			t.Errorf("%s %+v: %v, want a usage error", tc.what, tc.s, err)
		}
	}
}
