package client

import (
	"context"
	"io"
	"strings"
	"testing"

	"github.com/urfave/cli/v2"
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

func TestIntersperseSplitsShortOptionsLikeGetopt(t *testing.T) {
	app := testApp(io.Discard, io.Discard)
	app.Flags = append(app.Flags, BrokerFlag(), OutputFlag(),
		&cli.BoolFlag{Name: "exit", Aliases: []string{"e"}},
		&cli.BoolFlag{Name: "null", Aliases: []string{"0"}},
		&cli.StringFlag{Name: "key-delimiter", Aliases: []string{"K"}},
		&cli.StringFlag{Name: "topic", Aliases: []string{"t"}},
	)
	for _, tc := range []struct{ in, want string }{
		{"tool -K: frob", "tool -K : frob"},
		{"tool -ttopic frob", "tool -t topic frob"},
		{"tool -o-10 frob", "tool -o -10 frob"},
		{"tool -b127.0.0.1:9092 frob", "tool -b 127.0.0.1:9092 frob"},
		{"tool -K== frob", "tool -K== frob"}, // -K=VALUE is the flag package's
		{"tool -e0 frob", "tool -e -0 frob"},
		{"tool -e0tx frob", "tool -e -0 -t x frob"},
		{"tool -et x frob", "tool -e -t x frob"},
		{"tool -topic x frob", "tool -topic x frob"},   // a long name with one dash
		{"tool -exz frob", "tool -exz frob"},           // x is no flag: the parser says so
		{"tool -e -t -K: frob", "tool -e -t -K: frob"}, // -K: is the value of -t
		{"tool frob -- -K:", "tool -- frob -K:"},
		{"tool -10", "tool -10"},
	} {
		got := strings.Join(Intersperse(app, strings.Fields(tc.in)), " ")
		if got != tc.want {
			t.Errorf("Intersperse(%q) = %q, want %q", tc.in, got, tc.want)
		}
	}
}

// TestCompleteListsWhatMayFollow: completion answers with subcommands
// (not "help"), flags, and keywords of the synopsis, for any word being
// completed, the empty one too.
func TestCompleteListsWhatMayFollow(t *testing.T) {
	app := testApp(io.Discard, io.Discard)
	app.Commands = append(app.Commands, &cli.Command{Name: "config", Subcommands: []*cli.Command{
		{Name: "get", ArgsUsage: "topic TOPIC [NAME...] | broker [ID|default] [NAME...]", Action: func(*cli.Context) error { return nil }},
	}})
	Prepare(app)
	for _, tc := range []struct{ in, want string }{
		{"", "topic completion config"},
		{"t", "topic"},
		{"topic ", "create req"},
		{"topic create -", "--partitions -p"},
		{"topic create --part", "--partitions"},
		{"topic create -p ", ""},
		{"config get ", "topic broker"},
		{"config get broker ", "default"},
		{"config get broker d", "default"},
		{"-", ""},
		{"-x", ""},
	} {
		var out strings.Builder
		words := strings.Split(tc.in, " ")
		complete(context.Background(), app, words, &out)
		if got := strings.Join(strings.Fields(out.String()), " "); got != tc.want {
			t.Errorf("complete(%q) = %q, want %q", tc.in, got, tc.want)
		}
	}
}
