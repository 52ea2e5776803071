package controller

import (
	"context"
	"io"
	"log"
	"log/slog"

	"github.com/hashicorp/go-hclog"
)

// hclogAdapter routes hashicorp/raft's hclog output into a *slog.Logger.
//
// Levels are lowered by one step: raft logs routine events (entering the
// follower or leader state, taking a snapshot) at Info and an ordinary
// election at Warn, which would make every start of a one-node mqd look
// alarming. So hclog Trace and Debug are slog Debug-4, Info is slog Debug,
// Warn is slog Info, and Error stays Error.
type hclogAdapter struct {
	logger *slog.Logger
	name   string
	args   []any
}

var _ hclog.Logger = (*hclogAdapter)(nil)

func newHCLogger(logger *slog.Logger) *hclogAdapter {
	return &hclogAdapter{logger: logger, name: "raft"}
}

func slogLevel(level hclog.Level) slog.Level {
	switch level {
	case hclog.Trace, hclog.Debug:
		return slog.LevelDebug - 4
	case hclog.Info, hclog.NoLevel, hclog.DefaultLevel:
		return slog.LevelDebug
	case hclog.Warn:
		return slog.LevelInfo
	default:
		return slog.LevelError
	}
}

// routineWarnings are messages raft logs at Warn that are part of every
// start, even of a single voter; they are logged at Debug.
var routineWarnings = map[string]bool{
	"heartbeat timeout reached, starting election": true,
}

func (a *hclogAdapter) Log(level hclog.Level, msg string, args ...any) {
	lvl := slogLevel(level)
	if level == hclog.Warn && routineWarnings[msg] {
		lvl = slog.LevelDebug
	}
	ctx := context.Background()
	if !a.logger.Enabled(ctx, lvl) {
		return
	}
	all := make([]any, 0, 2+len(a.args)+len(args))
	all = append(all, "component", a.name)
	all = append(all, a.args...)
	all = append(all, args...)
	a.logger.Log(ctx, lvl, msg, all...)
}

func (a *hclogAdapter) Trace(msg string, args ...any) { a.Log(hclog.Trace, msg, args...) }
func (a *hclogAdapter) Debug(msg string, args ...any) { a.Log(hclog.Debug, msg, args...) }
func (a *hclogAdapter) Info(msg string, args ...any)  { a.Log(hclog.Info, msg, args...) }
func (a *hclogAdapter) Warn(msg string, args ...any)  { a.Log(hclog.Warn, msg, args...) }
func (a *hclogAdapter) Error(msg string, args ...any) { a.Log(hclog.Error, msg, args...) }

func (a *hclogAdapter) enabled(level hclog.Level) bool {
	return a.logger.Enabled(context.Background(), slogLevel(level))
}

func (a *hclogAdapter) IsTrace() bool { return a.enabled(hclog.Trace) }
func (a *hclogAdapter) IsDebug() bool { return a.enabled(hclog.Debug) }
func (a *hclogAdapter) IsInfo() bool  { return a.enabled(hclog.Info) }
func (a *hclogAdapter) IsWarn() bool  { return a.enabled(hclog.Warn) }
func (a *hclogAdapter) IsError() bool { return a.enabled(hclog.Error) }

func (a *hclogAdapter) ImpliedArgs() []any { return a.args }

func (a *hclogAdapter) With(args ...any) hclog.Logger {
	c := *a
	c.args = append(append([]any(nil), a.args...), args...)
	return &c
}

func (a *hclogAdapter) Name() string { return a.name }

func (a *hclogAdapter) Named(name string) hclog.Logger {
	c := *a
	if c.name != "" {
		name = c.name + "." + name
	}
	c.name = name
	return &c
}

func (a *hclogAdapter) ResetNamed(name string) hclog.Logger {
	c := *a
	c.name = name
	return &c
}

// SetLevel does nothing: the slog handler decides what is logged.
func (a *hclogAdapter) SetLevel(hclog.Level) {}

func (a *hclogAdapter) GetLevel() hclog.Level {
	for _, l := range []hclog.Level{hclog.Trace, hclog.Debug, hclog.Info, hclog.Warn} {
		if a.enabled(l) {
			return l
		}
	}
	return hclog.Error
}

func (a *hclogAdapter) StandardLogger(*hclog.StandardLoggerOptions) *log.Logger {
	return slog.NewLogLogger(a.logger.With("component", a.name).Handler(), slog.LevelDebug)
}

func (a *hclogAdapter) StandardWriter(opts *hclog.StandardLoggerOptions) io.Writer {
	return a.StandardLogger(opts).Writer()
}
