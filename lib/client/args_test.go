package client

import (
	"io"
	"strings"
	"testing"
)

func TestIntersperseMovesFlagsBeforeArguments(t *testing.T) {
	app := testApp(io.Discard, io.Discard)
	app.Flags = append(app.Flags, BrokerFlag(), OutputFlag())
	for _, tc := range []struct{ in, want string }{
		{"tool topic create a b -p 3", "tool topic create -p 3 a b"},
		{"tool topic create -p 3 a b", "tool topic create -p 3 a b"},
		{"tool -o json topic create a --partitions=3 b", "tool -o json topic create --partitions=3 a b"},
		{"tool topic create a -- -p 3", "tool topic create -- a -p 3"},
		{"tool topic create create", "tool topic create create"},         // an argument named like a command
		{"tool -b topic topic create a", "tool -b topic topic create a"}, // a flag value named like a command
		{"tool topic create a --bogus b", "tool topic create --bogus a b"},
		{"tool topic create a -p 3 --generate-bash-completion", "tool topic create -p 3 a --generate-bash-completion"},
		{"tool frob -o json", "tool -o json frob"},
		{"tool", "tool"},
	} {
		got := strings.Join(Intersperse(app, strings.Fields(tc.in)), " ")
		if got != tc.want {
			t.Errorf("Intersperse(%q) = %q, want %q", tc.in, got, tc.want)
		}
	}
}
