package client

import (
	"fmt"
	"io"
	"os"
	"sync"

	"github.com/urfave/cli/v2"
)

// VerboseFlag is -v/--verbose, which every command with a -b flag has
// (Prepare adds it): say on stderr which broker address Resolve picked,
// and why.
func VerboseFlag() *cli.BoolFlag {
	return &cli.BoolFlag{
		Name:    "verbose",
		Aliases: []string{"v"},
		Usage:   "say on stderr which broker address is used, and where it came from",
	}
}

// versionFlag is --version without urfave/cli's -v alias, which -v
// (verbose, as kcat's and rpk's) takes over.
var versionFlag = &cli.BoolFlag{Name: "version", Usage: "print the version"}

// addVerboseFlags gives -v to the app and every command that has -b, and
// then leaves --version its long name only; it is idempotent. An app
// without -b (mqd) keeps urfave/cli's -v for --version.
func addVerboseFlags(app *cli.App) {
	added := false
	add := func(flags *[]cli.Flag) {
		if hasFlag(*flags, "broker") && !hasFlag(*flags, "verbose") {
			*flags = append(*flags, VerboseFlag())
			added = true
		}
	}
	add(&app.Flags)
	var walk func([]*cli.Command)
	walk = func(cmds []*cli.Command) {
		for _, c := range cmds {
			add(&c.Flags)
			walk(c.Subcommands)
		}
	}
	walk(app.Commands)
	if added || hasFlag(app.Flags, "verbose") {
		cli.VersionFlag = versionFlag
	}
}

func hasFlag(flags []cli.Flag, name string) bool {
	for _, f := range flags {
		for _, n := range f.Names() {
			if n == name {
				return true
			}
		}
	}
	return false
}

// notes is where Resolve says which address it picked. The action wrapper
// of Prepare sets it from the command line before a command runs: the
// program's name, its stderr, -v, and whether stderr is a terminal. A
// program resolves its broker once or a few times; the note is written
// once.
var notes struct {
	mu       sync.Mutex
	w        io.Writer // nil: say nothing
	name     string
	verbose  bool // -v: say where the address came from, always
	terminal bool // stderr is a terminal: say when the default socket was missing
	said     bool
}

// setNotes arranges Resolve's notes for the command of c.
func setNotes(c *cli.Context) {
	notes.mu.Lock()
	defer notes.mu.Unlock()
	notes.w, notes.name = c.App.ErrWriter, c.App.Name
	notes.verbose = false
	for _, ctx := range c.Lineage() {
		if ctx.Command == nil && ctx.App == nil {
			continue
		}
		for _, n := range ctx.LocalFlagNames() {
			if n == "verbose" || n == "v" {
				notes.verbose = true
			}
		}
	}
	notes.terminal = isTerminal(notes.w)
}

// isTerminal reports whether w is a character device: a terminal, or
// /dev/null, where a note is lost anyway.
func isTerminal(w io.Writer) bool {
	f, ok := w.(*os.File)
	if !ok {
		return false
	}
	fi, err := f.Stat()
	return err == nil && fi.Mode()&os.ModeCharDevice != 0
}

// noteResolved writes, once, which address Resolve picked: with -v always
// ("broker ADDR (from SOURCE)"); without, only when the default socket was
// missing and stderr is a terminal, since the fallback to
// 127.0.0.1:9092 may reach another broker on the same host (a scripted
// run's stderr stays quiet).
func noteResolved(addrs []Addr, source string, fellBack bool) {
	notes.mu.Lock()
	defer notes.mu.Unlock()
	if notes.w == nil || notes.said {
		return
	}
	switch {
	case notes.verbose:
		fmt.Fprintf(notes.w, "%s: broker %s (%s)\n", notes.name, joinAddrs(addrs), source)
	case fellBack && notes.terminal:
		fmt.Fprintf(notes.w, "%s: %s: using %s\n", notes.name, source, joinAddrs(addrs))
	default:
		return
	}
	notes.said = true
}
