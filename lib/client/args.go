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
// kept. args[0] is the program name. Run calls it, and so does mqd.
//
// It also splits short options the way getopt (and so kcat) takes them,
// which Go's flag package does not: a value attached to a short option
// ("-K:", "-tTOPIC", "-o-10", "-bHOST:PORT" become "-K :", "-t TOPIC", ...)
// and short booleans run together ("-eq", or "-e0o-10": "-e -0 -o -10").
// A word that names a flag whole ("-topic", "-p=3") is left to the flag
// package, and so is one with a letter that is no short option of the
// command, which it then reports.
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
				if split, needsValue := splitShort(flags, a); split != nil {
					flagArgs = append(flagArgs, split...)
					if needsValue && i+1 < len(rest) {
						i++
						flagArgs = append(flagArgs, rest[i])
					}
					continue
				}
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

// splitShort splits a word of short options run together, or a short
// option with its value attached, into separate arguments: "-K:" into "-K"
// ":", "-eo-10" into "-e" "-o" "-10". It returns nil when arg is to be
// kept as it is: a long option, a word that names a flag whole, or one in
// which a letter before the value is not a short option of flags.
// needsValue says that the last option takes a value that was not
// attached: the next argument is its value ("-et TOPIC").
func splitShort(flags []cli.Flag, arg string) (out []string, needsValue bool) {
	if len(arg) < 3 || arg[0] != '-' {
		return nil, false
	}
	name := arg[1:]
	if len(name) < 2 || name[0] == '-' || name[1] == '=' || findFlag(flags, name) != nil {
		return nil, false
	}
	for i := 0; i < len(name); i++ {
		f := findFlag(flags, name[i:i+1])
		if f == nil {
			return nil, false
		}
		out = append(out, "-"+name[i:i+1])
		if flagTakesValue(f) {
			if i+1 < len(name) {
				return append(out, name[i+1:]), false
			}
			return out, true
		}
	}
	return out, false
}

// findFlag is the flag of flags that has name, or nil.
func findFlag(flags []cli.Flag, name string) cli.Flag {
	for _, f := range flags {
		for _, n := range f.Names() {
			if n == name {
				return f
			}
		}
	}
	return nil
}

// flagTakesValue reports whether f needs a value (it is not a bool flag).
func flagTakesValue(f cli.Flag) bool {
	if tv, ok := f.(interface{ TakesValue() bool }); ok {
		return tv.TakesValue()
	}
	return true
}

// takesValue reports whether the flag in arg ("-p", "--partitions") is one
// of flags and needs the next argument as its value (not a bool flag, and
// no "=value" in arg).
func takesValue(flags []cli.Flag, arg string) bool {
	name := strings.TrimLeft(arg, "-")
	if strings.Contains(name, "=") {
		return false
	}
	f := findFlag(flags, name)
	return f != nil && flagTakesValue(f)
}

func findCommand(cmds []*cli.Command, name string) *cli.Command {
	for _, c := range cmds {
		if c.HasName(name) {
			return c
		}
	}
	return nil
}
