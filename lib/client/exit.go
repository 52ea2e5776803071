package client

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/signal"
	"strings"
	"sync/atomic"
	"syscall"

	"github.com/urfave/cli/v2"
)

// Exit codes of every mq tool, documented in README.md and each man page.
const (
	ExitOK          = 0   // success
	ExitFailure     = 1   // the operation failed: the broker said no, messages not acknowledged
	ExitUsage       = 2   // bad flag, argument, value or address
	ExitUnreachable = 3   // cannot reach the broker
	ExitInterrupted = 130 // SIGINT or SIGTERM
)

// Error is an error with the exit status it calls for.
type Error struct {
	Code int
	Err  error
	// Help is, for a usage error, the command whose --help explains it
	// ("mqctl topic create"); Run fills it in for the command that
	// failed, and the line on stderr ends with "(see HELP --help)".
	Help string
}

func (e *Error) Error() string { return e.Err.Error() }
func (e *Error) Unwrap() error { return e.Err }

// Usagef is a usage error (ExitUsage): a bad flag, argument or value.
func Usagef(format string, a ...any) error {
	return &Error{Code: ExitUsage, Err: fmt.Errorf(format, a...)}
}

// Failf is a failed operation (ExitFailure).
func Failf(format string, a ...any) error {
	return &Error{Code: ExitFailure, Err: fmt.Errorf(format, a...)}
}

// ErrTerminated is the cause (context.Cause) of the end of Run's context
// when SIGTERM ended it: a service manager asking the program to stop. A
// command that then stops cleanly returns nil, and the program exits 0
// rather than 130, which systemd counts as a failed unit. SIGINT ends the
// context with context.Canceled as its cause.
var ErrTerminated = errors.New("terminated by SIGTERM")

// errInterrupted is what Run reports after a signal cancelled the app.
var errInterrupted = &Error{Code: ExitInterrupted, Err: errors.New("interrupted")}

// ExitCode is the exit status for err: ExitOK for nil, the Code of an
// *Error, ExitUsage for the parse errors of urfave/cli, ExitUnreachable for
// connection errors (IsUnreachable), ExitInterrupted for a cancelled
// context, else ExitFailure.
func ExitCode(err error) int {
	code, _ := classify(err)
	return code
}

// classify returns the exit code for err and the message that explains it.
func classify(err error) (int, string) {
	if err == nil {
		return ExitOK, ""
	}
	var e *Error
	if errors.As(err, &e) {
		if e.Code == ExitUsage && e.Help != "" {
			return e.Code, err.Error() + " (see " + e.Help + " --help)"
		}
		return e.Code, err.Error()
	}
	msg := err.Error()
	// urfave/cli reports an unknown help topic as "No help topic for 'x'"
	// with status 3, which would read as "cannot reach the broker".
	if strings.HasPrefix(msg, "Required flag") || strings.HasPrefix(msg, "No help topic for") {
		return ExitUsage, msg
	}
	if errors.Is(err, context.Canceled) {
		return ExitInterrupted, "interrupted"
	}
	if IsUnreachable(err) {
		return ExitUnreachable, "cannot reach mqd: " + Reason(err) + " — is mqd running?"
	}
	var ec cli.ExitCoder
	if errors.As(err, &ec) && ec.ExitCode() != 0 {
		return ec.ExitCode(), msg
	}
	return ExitFailure, msg
}

// Run runs app with args (os.Args) and returns the exit status for
// os.Exit. The app's context is cancelled by the first SIGINT or SIGTERM;
// a second one exits at once with ExitInterrupted. An error is written to
// stderr as one line, "NAME: message"; see ExitCode for the statuses.
//
// Run prepares the app for the conventions of our tools: every command
// with -b gets -v (VerboseFlag); usage errors of
// every command exit 2 without printing help to stdout; an unknown
// subcommand is a usage error; flags may follow arguments and short
// options take attached values (Intersperse); shell completion is
// answered (complete).
func Run(app *cli.App, args []string) int {
	ctx, cancel := context.WithCancelCause(context.Background())
	defer cancel(nil)
	var signalled atomic.Bool
	sigs := make(chan os.Signal, 2)
	signal.Notify(sigs, syscall.SIGINT, syscall.SIGTERM)
	defer signal.Stop(sigs)
	// done ends the signal watcher when Run returns; ctx cannot, since
	// the first signal cancels it and the watcher must still see a second.
	done := make(chan struct{})
	defer close(done)
	go func() {
		var sig os.Signal
		select {
		case sig = <-sigs:
		case <-done:
			return
		}
		signalled.Store(true)
		if sig == syscall.SIGTERM {
			cancel(ErrTerminated)
		} else {
			cancel(nil)
		}
		select {
		case <-sigs:
			fmt.Fprintf(errWriter(app), "%s: interrupted\n", app.Name)
			os.Exit(ExitInterrupted)
		case <-done:
		}
	}()
	err := run(ctx, app, args)
	if err != nil && signalled.Load() {
		err = errInterrupted
	}
	return report(errWriter(app), app.Name, err)
}

func errWriter(app *cli.App) io.Writer {
	if app.ErrWriter != nil {
		return app.ErrWriter
	}
	return os.Stderr
}

// run prepares app (see Run) and runs it.
// A command line that ends with the completion flag is completed, not
// run (complete).
func run(ctx context.Context, app *cli.App, args []string) error {
	Prepare(app)
	if n := len(args); n > 1 && args[n-1] == completionFlag {
		w := app.Writer
		if w == nil {
			w = os.Stdout
		}
		complete(ctx, app, args[1:n-1], w)
		return nil
	}
	return app.RunContext(ctx, Intersperse(app, args))
}

// report writes err as one line to w and returns its exit code.
func report(w io.Writer, name string, err error) int {
	code, msg := classify(err)
	if code != ExitOK {
		msg = strings.Join(strings.Fields(strings.ReplaceAll(msg, "\n", "; ")), " ")
		fmt.Fprintf(w, "%s: %s\n", name, msg)
	}
	return code
}

// Prepare sets app up for the conventions of our tools; Run calls it, and
// tests that run an app another way may too. It is idempotent.
//
// Every usage error, whether urfave/cli finds it (an unknown flag, a bad
// value, a missing required flag) or a command returns it (Usagef), is
// one line on stderr naming the command and pointing to its --help, and
// prints nothing on stdout: urfave/cli prints the whole help to stdout for
// a missing required flag, so Prepare checks required flags itself (and
// clears their Required, after filling in the synopses that show them).
func Prepare(app *cli.App) {
	addVerboseFlags(app)
	FillSynopses(app)
	app.EnableBashCompletion = true
	app.ExitErrHandler = func(*cli.Context, error) {} // Run decides the exit status
	if app.OnUsageError == nil {
		app.OnUsageError = usageError("", app.Name)
	}
	if app.Action == nil && len(app.Commands) > 0 {
		app.Action = commandGroup("")
	}
	app.Action = checked(app.Action, "", app.Name, takeRequired(app.Flags))
	var walk func(path string, cmds []*cli.Command)
	walk = func(path string, cmds []*cli.Command) {
		for _, c := range cmds {
			p := strings.TrimSpace(path + " " + c.Name)
			help := app.Name + " " + p
			if c.OnUsageError == nil {
				c.OnUsageError = usageError(p, help)
			}
			if c.Action == nil && len(c.Subcommands) > 0 {
				c.Action = commandGroup(p)
			}
			c.Action = checked(c.Action, p, help, takeRequired(c.Flags))
			walk(p, c.Subcommands)
		}
	}
	walk("", app.Commands)
}

// usageError is the OnUsageError of the command at path (e.g. "topic
// create"; "" for the app): the parse error of urfave/cli as a usage
// error that names the command and its help.
func usageError(path, help string) cli.OnUsageErrorFunc {
	return func(_ *cli.Context, err error, _ bool) error {
		if path != "" {
			err = fmt.Errorf("%s: %w", path, err)
		}
		return &Error{Code: ExitUsage, Err: err, Help: help}
	}
}

// checked wraps the action of the command at path: it first refuses a
// missing required flag, and a usage error the action returns points to
// the command's help unless it already points somewhere.
func checked(action cli.ActionFunc, path, help string, required []cli.Flag) cli.ActionFunc {
	if action == nil {
		return nil
	}
	prefix := ""
	if path != "" {
		prefix = path + ": "
	}
	return func(c *cli.Context) error {
		setNotes(c)
		for _, f := range required {
			if !c.IsSet(f.Names()[0]) {
				return &Error{Code: ExitUsage, Err: fmt.Errorf("%smissing %s", prefix, flagSynopsis(f)), Help: help}
			}
		}
		err := action(c)
		var e *Error
		if errors.As(err, &e) && e.Code == ExitUsage && e.Help == "" {
			return &Error{Code: e.Code, Err: e.Err, Help: help}
		}
		return err
	}
}

// commandGroup is the action of a command that only has subcommands (path,
// e.g. "topic"; "" for the app itself): help when called alone, a usage
// error for an unknown subcommand.
func commandGroup(path string) cli.ActionFunc {
	return func(c *cli.Context) error {
		if c.Args().Present() {
			if path == "" {
				return Usagef("unknown command %q", c.Args().First())
			}
			return Usagef("%s: unknown command %q", path, c.Args().First())
		}
		if path != "" {
			return cli.ShowSubcommandHelp(c)
		}
		return cli.ShowAppHelp(c)
	}
}
