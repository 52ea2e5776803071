package client

import (
	"context"
	"fmt"
	"io"
	"os"
	"slices"
	"strings"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
	"github.com/urfave/cli/v2"
)

// completionTimeout bounds how long completing a topic or group name may
// ask the broker: a shell waits for it at every TAB.
const completionTimeout = time.Second

// complete prints the candidates for the last of words, the word being
// completed (possibly ""), after the words before it: the program's
// command line without its name, as the completion scripts pass it. It
// prints subcommands, flags, and for a flag or argument that takes a topic
// or a group the names the broker has (asked with a short timeout; none
// when it does not answer). It never runs a command.
func complete(ctx context.Context, app *cli.App, words []string, w io.Writer) {
	cur := ""
	if n := len(words); n > 0 {
		cur, words = words[n-1], words[:n-1]
	}
	flags, cmds := app.Flags, app.Commands
	var cmd *cli.Command
	var positional []string
	var broker string
	var valueOf cli.Flag // the flag whose value cur is
	for i := 0; i < len(words); i++ {
		word := words[i]
		if len(word) < 2 || word[0] != '-' {
			if len(positional) == 0 {
				if c := findCommand(cmds, word); c != nil {
					cmd, flags, cmds = c, c.Flags, c.Subcommands
					continue
				}
			}
			positional = append(positional, word)
			continue
		}
		f, value, needsValue := lastOption(flags, word)
		if needsValue {
			if i+1 == len(words) {
				valueOf = f
				break
			}
			i++
			value = words[i]
		}
		if f != nil && f.Names()[0] == "broker" {
			broker = value
		}
	}
	var cands []string
	if split, needsValue := splitShort(flags, cur); split != nil && !needsValue && !strings.HasPrefix(split[len(split)-1], "-") {
		// a value attached to a short option: -tTOP
		f, value, _ := lastOption(flags, cur)
		for _, name := range brokerNames(ctx, broker, placeholder(f)) {
			cands = append(cands, cur[:len(cur)-len(value)]+name)
		}
	}
	switch {
	case cands != nil:
	case valueOf != nil:
		cands = brokerNames(ctx, broker, placeholder(valueOf))
	case strings.HasPrefix(cur, "-"):
		for _, f := range flags {
			for _, n := range f.Names() {
				if n == "help" || n == "h" {
					continue
				}
				if len(n) == 1 {
					cands = append(cands, "-"+n)
				} else {
					cands = append(cands, "--"+n)
				}
			}
		}
	case len(cmds) > 0 && len(positional) == 0:
		for _, c := range cmds {
			if !c.Hidden && c.Name != "help" {
				cands = append(cands, c.Name)
			}
		}
	case cmd != nil:
		for _, kind := range argumentKinds(cmd.ArgsUsage, positional) {
			if kind == "TOPIC" || kind == "GROUP" {
				cands = append(cands, brokerNames(ctx, broker, kind)...)
			} else {
				cands = append(cands, kind)
			}
		}
	}
	for _, c := range cands {
		if strings.HasPrefix(c, cur) {
			fmt.Fprintln(w, c)
		}
	}
}

// lastOption reads one option word ("-t", "--topic=x", "-eK:") against
// flags: the flag of its last option, the value attached to it, and
// whether that flag takes the next word as its value.
func lastOption(flags []cli.Flag, word string) (f cli.Flag, value string, needsValue bool) {
	if split, nv := splitShort(flags, word); split != nil {
		for i := len(split) - 1; i >= 0; i-- {
			if strings.HasPrefix(split[i], "-") {
				f = findFlag(flags, split[i][1:])
				if i+1 < len(split) {
					value = split[i+1]
				}
				return f, value, nv
			}
		}
	}
	name, value, hasValue := strings.Cut(strings.TrimLeft(word, "-"), "=")
	f = findFlag(flags, name)
	return f, value, f != nil && !hasValue && flagTakesValue(f)
}

// argumentKinds are what may come at the next argument of a command whose
// ArgsUsage is argsUsage ("TOPIC...", "[GROUP...]", "topic TOPIC [NAME...]
// | broker [ID|default] [NAME...]"), after the arguments given: TOPIC,
// GROUP, or the lowercase keywords the synopsis names (topic, broker,
// default).
func argumentKinds(argsUsage string, given []string) []string {
	var out []string
	for _, alt := range splitAlternatives(argsUsage) {
		tokens := strings.Fields(alt)
		if len(tokens) == 0 {
			continue
		}
		matches := true
		for i, g := range given {
			if i >= len(tokens) {
				break
			}
			if lit := strings.Trim(tokens[i], "[]."); isKeyword(lit) && lit != g {
				matches = false
				break
			}
		}
		if !matches {
			continue
		}
		k := len(given)
		if k >= len(tokens) {
			if !strings.HasSuffix(tokens[len(tokens)-1], "...") {
				continue
			}
			k = len(tokens) - 1
		}
		for _, part := range strings.Split(strings.Trim(tokens[k], "[]."), "|") {
			switch {
			case isKeyword(part):
				out = append(out, part)
			case strings.HasPrefix(part, "TOPIC"):
				out = append(out, "TOPIC")
			case strings.HasPrefix(part, "GROUP"):
				out = append(out, "GROUP")
			}
		}
	}
	return out
}

// splitAlternatives splits a synopsis at the "|" that separate whole
// alternatives (" | "), not those inside brackets ("[ID|default]").
func splitAlternatives(s string) []string { return strings.Split(s, " | ") }

func isKeyword(s string) bool {
	if s == "" {
		return false
	}
	for _, r := range s {
		if r < 'a' || r > 'z' {
			return false
		}
	}
	return true
}

// brokerNames are the topic names (kind TOPIC, internal topics left out)
// or group names (GROUP) of the broker, or none when it does not answer
// within completionTimeout.
func brokerNames(ctx context.Context, broker, kind string) []string {
	if !strings.HasPrefix(kind, "TOPIC") && !strings.HasPrefix(kind, "GROUP") {
		return nil
	}
	addrs, err := Resolve(broker, os.Getenv, os.Getuid())
	if err != nil {
		return nil
	}
	ctx, cancel := context.WithTimeout(ctx, completionTimeout)
	defer cancel()
	cl, err := NewClient(addrs, kgo.DialTimeout(completionTimeout/2), kgo.RequestRetries(0), kgo.RetryTimeout(completionTimeout))
	if err != nil {
		return nil
	}
	defer cl.Close()
	var names []string
	if strings.HasPrefix(kind, "TOPIC") {
		resp, err := kmsg.NewPtrMetadataRequest().RequestWith(ctx, cl)
		if err != nil {
			return nil
		}
		for _, t := range resp.Topics {
			if t.Topic != nil && !t.IsInternal && !strings.HasPrefix(*t.Topic, "__") {
				names = append(names, *t.Topic)
			}
		}
	} else {
		resp, err := kmsg.NewPtrListGroupsRequest().RequestWith(ctx, cl)
		if err != nil {
			return nil
		}
		for _, g := range resp.Groups {
			names = append(names, g.Group)
		}
	}
	slices.Sort(names)
	return names
}
