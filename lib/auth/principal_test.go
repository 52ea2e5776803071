package auth

import (
	"errors"
	"testing"
)

func TestPrincipalsAreWrittenAsKafkaWritesThem(t *testing.T) {
	for _, tc := range []struct{ got, want string }{
		{User("alice"), "User:alice"},
		{UnixUser(0), "User:uid:0"},
		{UnixUser(1000), "User:uid:1000"},
	} {
		if tc.got != tc.want {
			t.Errorf("got %q, want %q", tc.got, tc.want)
		}
	}
}

func TestSplitNeedsATypeAndAColon(t *testing.T) {
	for _, tc := range []struct {
		in        string
		typ, name string
		ok        bool
	}{
		{"User:alice", "User", "alice", true},
		{"User:uid:0", "User", "uid:0", true},
		{"User:CN=a,O=b", "User", "CN=a,O=b", true},
		{"alice", "alice", "", false},
		{":alice", "", "alice", false},
	} {
		typ, name, ok := Split(tc.in)
		if typ != tc.typ || name != tc.name || ok != tc.ok {
			t.Errorf("Split(%q) = %q, %q, %v; want %q, %q, %v", tc.in, typ, name, ok, tc.typ, tc.name, tc.ok)
		}
	}
}

func TestCheckUserNameRefusesWhatWouldPassForAUnixPeer(t *testing.T) {
	for name, ok := range map[string]bool{"alice": true, "uid": true, "x-uid:0": true, "": false, "uid:0": false, "uid:": false} {
		err := CheckUserName(name)
		if (err == nil) != ok || (err != nil && !errors.Is(err, ErrUnacceptableUser)) {
			t.Errorf("%q: %v", name, err)
		}
	}
}
