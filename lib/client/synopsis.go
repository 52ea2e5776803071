package client

import (
	"reflect"
	"strings"

	"github.com/urfave/cli/v2"
)

// FillSynopses gives every runnable command of app that has no UsageText
// one generated from its flags (CommandSynopsis), so that its --help and
// the man page open with a synopsis like a man page's. Commands with a
// UsageText keep theirs: by the convention of our tools its first
// paragraph is the synopsis. Prepare and CheckManPage call it; it is
// idempotent.
func FillSynopses(app *cli.App) {
	var walk func(path string, cmds []*cli.Command)
	walk = func(path string, cmds []*cli.Command) {
		for _, c := range cmds {
			p := strings.TrimSpace(path + " " + c.Name)
			if c.UsageText == "" && (c.Action != nil || len(c.Subcommands) == 0) {
				c.UsageText = CommandSynopsis(app.Name+" "+p, c.Flags, c.ArgsUsage)
			}
			walk(p, c.Subcommands)
		}
	}
	walk("", app.Commands)
}

// Synopses are the lines of the man page's SYNOPSIS: for a program
// without commands its own synopsis, else (after its own, when it has an
// action) one line per runnable command,
// each the first paragraph of its UsageText (after FillSynopses) or
// generated from its flags.
func Synopses(app *cli.App) []string {
	if len(app.Commands) == 0 {
		if app.UsageText != "" {
			return firstParagraph(app.UsageText)
		}
		return []string{CommandSynopsis(app.Name, app.Flags, app.ArgsUsage)}
	}
	// A program that runs itself and has commands besides (mqtail, and
	// its completion command) lists its own synopsis first.
	var out []string
	if app.Action != nil && app.UsageText != "" {
		out = firstParagraph(app.UsageText)
	}
	var walk func(path string, cmds []*cli.Command)
	walk = func(path string, cmds []*cli.Command) {
		for _, c := range cmds {
			if c.Hidden || c.Name == "help" {
				continue
			}
			p := strings.TrimSpace(path + " " + c.Name)
			if c.Action != nil || len(c.Subcommands) == 0 {
				if c.UsageText != "" {
					out = append(out, firstParagraph(c.UsageText)...)
				} else {
					out = append(out, CommandSynopsis(app.Name+" "+p, c.Flags, c.ArgsUsage))
				}
			}
			walk(p, c.Subcommands)
		}
	}
	walk("", app.Commands)
	return out
}

func firstParagraph(s string) []string {
	s = strings.TrimLeft(s, "\n")
	if i := strings.Index(s, "\n\n"); i >= 0 {
		s = s[:i]
	}
	return strings.Split(strings.TrimRight(s, "\n"), "\n")
}

// CommandSynopsis is the synopsis of the command name (its program and
// path, "mqpipe consume") with flags and argsUsage, as man pages write
// one: required flags bare, the others in brackets, a repeatable one
// followed by "...", then the arguments:
//
//	mqpipe consume [-b ADDR] -t TOPIC... [-p N]... [-o OFFSET] [-e]
func CommandSynopsis(name string, flags []cli.Flag, argsUsage string) string {
	parts := []string{name}
	for _, f := range flags {
		if !visible(f) || f.Names()[0] == "help" {
			continue
		}
		s := flagSynopsis(f)
		if !isRequired(f) {
			s = "[" + s + "]"
		}
		if repeatable(f) {
			s += "..."
		}
		parts = append(parts, s)
	}
	if a := strings.TrimSpace(argsUsage); a != "" {
		parts = append(parts, a)
	}
	return strings.Join(parts, " ")
}

// flagSynopsis is how a synopsis or an error names flag f: its one-letter
// name if it has one, else its long name, and the placeholder of its
// value: "-t TOPIC", "--linger DURATION", "-e".
func flagSynopsis(f cli.Flag) string {
	names := f.Names()
	name := "--" + names[0]
	for _, n := range names {
		if len(n) == 1 {
			name = "-" + n
			break
		}
	}
	if !flagTakesValue(f) {
		return name
	}
	return name + " " + placeholder(f)
}

// placeholder is the name of f's value: the `quoted` word of its usage
// (urfave/cli's convention), else one after its type.
func placeholder(f cli.Flag) string {
	if d, ok := f.(cli.DocGenerationFlag); ok {
		u := d.GetUsage()
		if i := strings.IndexByte(u, '`'); i >= 0 {
			if j := strings.IndexByte(u[i+1:], '`'); j > 0 {
				return u[i+1 : i+1+j]
			}
		}
	}
	switch f.(type) {
	case *cli.DurationFlag:
		return "DURATION"
	case *cli.IntFlag, *cli.Int64Flag, *cli.UintFlag, *cli.Uint64Flag, *cli.Float64Flag,
		*cli.IntSliceFlag, *cli.Int64SliceFlag, *cli.Float64SliceFlag, *cli.UintSliceFlag, *cli.Uint64SliceFlag:
		return "N"
	}
	return "VALUE"
}

func repeatable(f cli.Flag) bool {
	switch f.(type) {
	case *cli.StringSliceFlag, *cli.IntSliceFlag, *cli.Int64SliceFlag, *cli.Float64SliceFlag, *cli.UintSliceFlag, *cli.Uint64SliceFlag:
		return true
	}
	return false
}

func visible(f cli.Flag) bool {
	v, ok := f.(cli.VisibleFlag)
	return !ok || v.IsVisible()
}

func isRequired(f cli.Flag) bool {
	r, ok := f.(cli.RequiredFlag)
	return ok && r.IsRequired()
}

// takeRequired returns the required flags of flags and clears their
// Required (every flag type of urfave/cli has that field), so that
// urfave/cli, which prints the whole help to stdout for a missing one,
// leaves the check to the action Prepare wraps.
func takeRequired(flags []cli.Flag) []cli.Flag {
	var out []cli.Flag
	for _, f := range flags {
		if !isRequired(f) {
			continue
		}
		v := reflect.ValueOf(f)
		if v.Kind() != reflect.Pointer || v.Elem().Kind() != reflect.Struct {
			continue
		}
		field := v.Elem().FieldByName("Required")
		if !field.IsValid() || field.Kind() != reflect.Bool || !field.CanSet() {
			continue
		}
		field.SetBool(false)
		out = append(out, f)
	}
	return out
}
