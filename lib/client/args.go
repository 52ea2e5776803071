package client

import (
	"strings"

	"github.com/urfave/cli/v2"
)

// completionFlag is what the completion scripts append to the command line;
// urfave/cli only recognises it as the last argument.
const completionFlag = "--generate-bash-completion"

// Intersperse reorders a command line so that flags may follow positional
// arguments ("mqctl topic create orders -p 3"): urfave/cli v2, like Go's
// flag package, stops at the first argument that is not a flag. Each
// command's flags are moved before its arguments, with their values; a
// "--" ends the flags and what follows it stays an argument. The order of
// the flags among themselves and of the arguments among themselves is
// kept. args[0] is the program name. Run calls it.
func Intersperse(app *cli.App, args []string) []string {
	if len(args) < 2 {
		return args
	}
	out := []string{args[0]}
	rest := args[1:]
	complete := false
	if n := len(rest); n > 0 && rest[n-1] == completionFlag {
		complete, rest = true, rest[:n-1]
	}
	flags, cmds := app.Flags, app.Commands
	for {
		var flagArgs, positional []string
		sawDashes := false
		var sub *cli.Command
		i := 0
		for ; i < len(rest); i++ {
			a := rest[i]
			if sawDashes {
				positional = append(positional, a)
				continue
			}
			if a == "--" {
				sawDashes = true
				continue
			}
			if len(a) > 1 && a[0] == '-' {
				flagArgs = append(flagArgs, a)
				if takesValue(flags, a) && i+1 < len(rest) {
					i++
					flagArgs = append(flagArgs, rest[i])
				}
				continue
			}
			if len(positional) == 0 {
				if c := findCommand(cmds, a); c != nil {
					sub = c
					break
				}
			}
			positional = append(positional, a)
		}
		out = append(out, flagArgs...)
		if sub != nil {
			out = append(out, rest[i])
			flags, cmds, rest = sub.Flags, sub.Subcommands, rest[i+1:]
			continue
		}
		if sawDashes {
			out = append(out, "--")
		}
		out = append(out, positional...)
		break
	}
	if complete {
		out = append(out, completionFlag)
	}
	return out
}

// takesValue reports whether the flag in arg ("-p", "--partitions") is one
// of flags and needs the next argument as its value (not a bool flag, and
// no "=value" in arg).
func takesValue(flags []cli.Flag, arg string) bool {
	name := strings.TrimLeft(arg, "-")
	if strings.Contains(name, "=") {
		return false
	}
	for _, f := range flags {
		for _, n := range f.Names() {
			if n != name {
				continue
			}
			if tv, ok := f.(interface{ TakesValue() bool }); ok {
				return tv.TakesValue()
			}
			return true
		}
	}
	return false
}

func findCommand(cmds []*cli.Command, name string) *cli.Command {
	for _, c := range cmds {
		if c.HasName(name) {
			return c
		}
	}
	return nil
}
