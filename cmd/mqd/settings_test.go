package main

import (
	"bytes"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/mqproject/mq/lib/config"
)

// everySetting is every broker setting and topic config, by section.
func everySetting() map[string][]config.Setting {
	return map[string][]config.Setting{"BROKER SETTINGS": config.BrokerSettings(), "TOPIC CONFIGS": config.TopicSettings()}
}

// TestHelpConfigListsEverySetting runs mqd --help-config and finds every
// setting of lib/config's tables in it: a heading that says whether it is
// dynamic, its doc, default and valid values, in lines that fit an
// 80-column terminal.
func TestHelpConfigListsEverySetting(t *testing.T) {
	cmd := exec.Command(mqdBinary, "--help-config")
	cmd.Env = testEnv(t)
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Run(); err != nil || stderr.Len() > 0 {
		t.Fatalf("mqd --help-config: %v, stderr %q; want exit 0 and nothing on stderr", err, stderr.String())
	}
	out := stdout.String()
	for i, line := range strings.Split(out, "\n") {
		if n := utf8.RuneCountInString(line); n > 79 {
			t.Errorf("line %d has %d columns: %q", i+1, n, line)
		}
	}
	for title, settings := range everySetting() {
		_, section, ok := strings.Cut(out, "\n"+title+"\n")
		if !ok && strings.HasPrefix(out, title+"\n") {
			section, ok = out[len(title)+1:], true
		}
		if !ok {
			t.Fatalf("no %s section:\n%s", title, out)
		}
		for _, s := range settings {
			entry := helpEntry(section, s.Name)
			if entry == "" {
				t.Errorf("%s: %s not listed", title, s.Name)
				continue
			}
			heading, body, _ := strings.Cut(entry, "\n")
			if strings.Contains(heading, "(dynamic)") != s.Dynamic {
				t.Errorf("%s: heading %q, dynamic %v", s.Name, heading, s.Dynamic)
			}
			flat := strings.Join(strings.Fields(body), " ")
			for _, want := range []string{strings.Join(strings.Fields(s.Doc), " "), "Default: ", "Valid: " + s.Allowed} {
				if !strings.Contains(flat, want) {
					t.Errorf("%s: entry lacks %q:\n%s", s.Name, want, entry)
				}
			}
		}
	}
}

// helpEntry is the entry of one setting in --help-config's section: its
// heading line and the indented lines under it.
func helpEntry(section, name string) string {
	lines := strings.Split(section, "\n")
	for i, l := range lines {
		if l == name || strings.HasPrefix(l, name+" (") || strings.HasPrefix(l, name+", ") {
			end := i + 1
			for end < len(lines) && strings.HasPrefix(lines[end], "    ") {
				end++
			}
			return strings.Join(lines[i:end], "\n")
		}
	}
	return ""
}

// TestManPageListsEverySetting reads the committed man page: every setting
// has its tagged paragraph under its section (TestManPageCurrent keeps the
// page in step with the tables).
func TestManPageListsEverySetting(t *testing.T) {
	page, err := os.ReadFile(filepath.Join("..", "..", "man", "mqd.8"))
	if err != nil {
		t.Fatal(err)
	}
	for title, settings := range everySetting() {
		_, section, ok := strings.Cut(string(page), "\n.SH "+title+"\n")
		if !ok {
			t.Fatalf("man page has no %s section", title)
		}
		section, _, _ = strings.Cut(section, "\n.SH ")
		for _, s := range settings {
			if !strings.Contains(section, ".TP\n\\fB"+roff(s.Name)+"\\fR") {
				t.Errorf("%s: %s not listed in the man page", title, s.Name)
			}
		}
	}
}

func TestRoffEscapesWhatRoffWouldInterpret(t *testing.T) {
	for in, want := range map[string]string{
		"-1 keeps them":       `\-1 keeps them`,
		".ms wins":            `\&.ms wins`,
		"'quoted":             `\&'quoted`,
		`a\b`:                 `a\eb`,
		"an integer ≥ 0":      `an integer \[u2265] 0`,
		"id@host:port,…":      `id@host:port,\[u2026]`,
		"log.retention.hours": "log.retention.hours",
	} {
		if got := roff(in); got != want {
			t.Errorf("roff(%q) = %q, want %q", in, got, want)
		}
	}
}

func TestWithUnitSaysLargeDefaultsInLargerUnits(t *testing.T) {
	for _, c := range []struct{ name, value, want string }{
		{"log.retention.ms", "604800000", "604800000 (7 days)"},
		{"log.retention.hours", "168", "168 (7 days)"},
		{"offsets.retention.minutes", "10080", "10080 (7 days)"},
		{"connections.max.idle.ms", "600000", "600000 (10 minutes)"},
		{"log.flush.interval.ms", "1000", "1000 (1 second)"},
		{"log.roll.jitter.ms", "0", "0"},
		{"log.flush.interval.ms", "1500", "1500"},
		{"log.retention.hours", "9223372036854775806", "9223372036854775806"},
		{"log.segment.bytes", "1073741824", "1073741824 (1 GiB)"},
		{"message.max.bytes", "1048588", "1048588"},
		{"log.retention.bytes", "-1", "-1"},
		{"max.compaction.lag.ms", "9223372036854775807", "9223372036854775807 (no limit)"},
		{"num.partitions", "1", "1"},
		{"log.level", "info", "info"},
	} {
		if got := withUnit(c.name, c.value); got != c.want {
			t.Errorf("withUnit(%s, %s) = %q, want %q", c.name, c.value, got, c.want)
		}
	}
}
