package controller

import (
	"slices"
	"testing"
)

func TestParseVoters(t *testing.T) {
	good := []struct {
		in   string
		want []Voter
	}{
		{"", nil},
		{"  ", nil},
		{"1@localhost:9093", []Voter{{1, "localhost:9093"}}},
		{"1@h:9093,2@h2:9093", []Voter{{1, "h:9093"}, {2, "h2:9093"}}},
		{" 1@h1:1 , 2@h2:2 ", []Voter{{1, "h1:1"}, {2, "h2:2"}}},
		{"0@10.0.0.1", []Voter{{0, "10.0.0.1:9093"}}},
		{"3@[::1]:19093", []Voter{{3, "[::1]:19093"}}},
		{"3@[fe80::1]", []Voter{{3, "[fe80::1]:9093"}}},
		{"2147483647@h:65535", []Voter{{2147483647, "h:65535"}}},
	}
	for _, tc := range good {
		got, err := ParseVoters(tc.in)
		if err != nil {
			t.Errorf("ParseVoters(%q): %v", tc.in, err)
			continue
		}
		if !slices.Equal(got, tc.want) {
			t.Errorf("ParseVoters(%q) = %v, want %v", tc.in, got, tc.want)
		}
	}
	bad := []string{
		"h:9093",             // no id
		"@h:9093",            // empty id
		"x@h:9093",           // id not a number
		"-1@h:9093",          // negative id
		"+1@h:9093",          // sign
		"01@h:9093",          // leading zero
		"2147483648@h:9093",  // id overflows int32
		"1@",                 // no address
		"1@:9093",            // no host
		"1@h:0",              // port 0
		"1@h:65536",          // port too big
		"1@h:port",           // port not a number
		"1@::1:9093",         // unbracketed IPv6
		"1@h:9093,",          // trailing comma
		",1@h:9093",          // leading comma
		"1@h:9093,1@h2:9093", // duplicate id
		"1@h:9093,2@h:9093",  // duplicate address
		"1@h:9093;2@h2:9093", // wrong separator
		"1@h@x:9093",         // two @
		"1@h:9093 2@h2:9093", // space separated
	}
	for _, in := range bad {
		if got, err := ParseVoters(in); err == nil {
			t.Errorf("ParseVoters(%q) = %v, want an error", in, got)
		}
	}
}

func TestVoterStringRoundTrips(t *testing.T) {
	in := []Voter{{1, "h1:9093"}, {2, "[::1]:9094"}}
	s := in[0].String() + "," + in[1].String()
	got, err := ParseVoters(s)
	if err != nil || !slices.Equal(got, in) {
		t.Fatalf("ParseVoters(%q) = %v, %v", s, got, err)
	}
}
