package main

import (
	"fmt"
	"io"
	"math"
	"strconv"
	"strings"

	"github.com/mqproject/mq/lib/config"
)

// This file lists every broker and topic setting (lib/config's tables)
// for people: as text for mqd --help-config, and as roff for the man
// page, where TestManPageCurrent puts it after the options.

// settingsSection is one list of settings with the paragraphs before it.
type settingsSection struct {
	title   string
	intro   []string
	entries []settingEntry
}

// settingEntry is one setting: a heading line and paragraphs.
type settingEntry struct {
	name string // the property name, which the heading starts with
	head string
	body []string
}

var brokerIntro = []string{
	`Broker settings use Apache Kafka's property names. Each is taken from, in increasing precedence: ` +
		`its default, the --config file ("key = value" lines), the environment variable MQ_ ` +
		`plus the name in upper case with dots as underscores (MQ_NUM_PARTITIONS=3), and the command line: ` +
		`the flags, then --set (-c key=value).`,
	`A dynamic setting may also be changed while mqd runs, for every broker (mqctl config set broker ` +
		`key=value) or for one (mqctl config set broker ID key=value); the others are read when mqd starts. ` +
		`mqctl config get broker shows the values in effect and where each comes from.`,
}

var topicIntro = []string{
	`Topic configs are set per topic, when it is created (mqctl topic create -c key=value) or at any ` +
		`time (mqctl config set topic TOPIC key=value), and apply at once. A topic without its own value ` +
		`takes the broker setting named as its default, so changing that setting changes every such topic.`,
}

// settingsSections builds the two lists from lib/config.
func settingsSections() []settingsSection {
	flags := map[string]string{}
	for _, f := range flagProperty {
		flags[f.property] = f.flag
	}
	broker := settingsSection{title: "BROKER SETTINGS", intro: brokerIntro}
	for _, s := range config.BrokerSettings() {
		head := s.Name
		if len(s.Aliases) > 0 {
			head += ", alias " + strings.Join(s.Aliases, ", ")
		}
		if s.Dynamic {
			head += " (dynamic)"
		} else {
			head += " (read at startup)"
		}
		body := []string{s.Doc, "Default: " + withUnit(s.Name, s.Default) + ".", "Valid: " + s.Allowed + "."}
		if f := flags[s.Name]; f != "" {
			body = append(body, "Flag: --"+f+".")
		}
		broker.entries = append(broker.entries, settingEntry{name: s.Name, head: head, body: body})
	}
	topic := settingsSection{title: "TOPIC CONFIGS", intro: topicIntro}
	for _, s := range config.TopicSettings() {
		def := withUnit(s.Name, s.Default)
		if s.BrokerDefault != "" {
			def = "the broker's " + s.BrokerDefault + "; " + def + " unless set"
		}
		body := []string{s.Doc, "Default: " + def + ".", "Valid: " + s.Allowed + "."}
		topic.entries = append(topic.entries, settingEntry{name: s.Name, head: s.Name + " (dynamic)", body: body})
	}
	return []settingsSection{broker, topic}
}

// withUnit adds what a default means in larger units to a count of
// milliseconds, minutes, hours or bytes: 604800000 (7 days), 1073741824
// (1 GiB). The property's name says the unit.
func withUnit(name, value string) string {
	n, err := strconv.ParseInt(value, 10, 64)
	if err != nil || n <= 0 {
		return value
	}
	if n == math.MaxInt64 {
		return value + " (no limit)"
	}
	unit := name[strings.LastIndexByte(name, '.')+1:]
	ms := map[string]int64{"ms": 1, "minutes": 60_000, "hours": 3_600_000}[unit]
	switch {
	case ms > 0 && n <= math.MaxInt64/ms && n*ms%1000 == 0:
		return value + " (" + duration(n*ms) + ")"
	case strings.Contains(name, "bytes") && n >= 1024:
		for _, u := range []struct {
			name string
			size int64
		}{{"GiB", 1 << 30}, {"MiB", 1 << 20}, {"KiB", 1 << 10}} {
			if n%u.size == 0 {
				return fmt.Sprintf("%s (%d %s)", value, n/u.size, u.name)
			}
		}
	}
	return value
}

// duration says a whole number of seconds, given in milliseconds, in the
// largest unit that divides it: 7 days, 5 minutes, 1 second.
func duration(ms int64) string {
	for _, u := range []struct {
		name string
		ms   int64
	}{{"day", 86_400_000}, {"hour", 3_600_000}, {"minute", 60_000}, {"second", 1000}} {
		if ms%u.ms == 0 {
			n := ms / u.ms
			if n == 1 {
				return "1 " + u.name
			}
			return fmt.Sprintf("%d %ss", n, u.name)
		}
	}
	return fmt.Sprintf("%d ms", ms)
}

// helpWidth is the width --help-config wraps at: an 80-column terminal.
const helpWidth = 79

// writeSettingsHelp writes the settings as plain text for --help-config.
func writeSettingsHelp(w io.Writer) error {
	var b strings.Builder
	for _, sec := range settingsSections() {
		b.WriteString(sec.title + "\n\n")
		for _, p := range sec.intro {
			wrap(&b, p, "", helpWidth)
			b.WriteString("\n")
		}
		for _, e := range sec.entries {
			b.WriteString(e.head + "\n")
			for _, p := range e.body {
				wrap(&b, p, "    ", helpWidth)
			}
			b.WriteString("\n")
		}
	}
	_, err := io.WriteString(w, strings.TrimSuffix(b.String(), "\n"))
	return err
}

// wrap writes text in lines of at most width columns (longer words stand
// alone), each starting with indent.
func wrap(b *strings.Builder, text, indent string, width int) {
	line := indent
	for _, word := range strings.Fields(text) {
		if line != indent && len([]rune(line))+1+len([]rune(word)) > width {
			b.WriteString(line + "\n")
			line = indent
		}
		if line != indent {
			line += " "
		}
		line += word
	}
	b.WriteString(line + "\n")
}

// settingsManPage is the settings as man page sections (roff), for
// client.CheckManPage.
func settingsManPage() string {
	var b strings.Builder
	for _, sec := range settingsSections() {
		b.WriteString("\n\n.SH " + sec.title + "\n")
		for _, p := range sec.intro {
			b.WriteString(".PP\n" + roff(p) + "\n")
		}
		for _, e := range sec.entries {
			head := `\fB` + roff(e.name) + `\fR` + roff(strings.TrimPrefix(e.head, e.name))
			b.WriteString(".TP\n" + head + "\n" + strings.Join(roffLines(e.body), "\n.br\n") + "\n")
		}
	}
	return b.String()
}

func roffLines(ps []string) []string {
	out := make([]string, len(ps))
	for i, p := range ps {
		out[i] = roff(p)
	}
	return out
}

// roff escapes text for a roff text line: backslashes, hyphens (so that
// -1 and --config print as typed), a leading dot or quote (a request),
// and characters beyond ASCII (\[uXXXX], which groff and mandoc know).
func roff(text string) string {
	var b strings.Builder
	for i, r := range text {
		switch {
		case r == '\\':
			b.WriteString(`\e`)
		case r == '-':
			b.WriteString(`\-`)
		case (r == '.' || r == '\'') && i == 0:
			b.WriteString(`\&` + string(r))
		case r > 127:
			fmt.Fprintf(&b, `\[u%04X]`, r)
		default:
			b.WriteRune(r)
		}
	}
	return b.String()
}
