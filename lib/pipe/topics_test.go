package pipe

import (
	"errors"
	"slices"
	"testing"

	"github.com/mqproject/mq/lib/client"
)

func TestParseTopicsTakesCaretValuesForRegexes(t *testing.T) {
	s, err := parseTopics([]string{"plain", "^dev-.*", "plain", "a.b", "^x$"})
	if err != nil {
		t.Fatal(err)
	}
	if want := []string{"plain", "a.b"}; !slices.Equal(s.names, want) {
		t.Errorf("names %q, want %q", s.names, want)
	}
	for topic, want := range map[string]bool{"dev-1": true, "dev-": true, "x": true, "xx": false, "prod": false, "plain": false, "a.b": false} {
		if got := s.matches(topic); got != want {
			t.Errorf("matches(%q) = %v, want %v", topic, got, want)
		}
	}
	// For kgo's ConsumeRegex a name matches only itself: the dot of a.b
	// is no wildcard.
	if want := []string{`^plain$`, `^a\.b$`, `^dev-.*`, `^x$`}; !slices.Equal(s.regexes(), want) {
		t.Errorf("regexes %q, want %q", s.regexes(), want)
	}
}

func TestParseTopicsRefusesBadRegexesAndEmptyNames(t *testing.T) {
	for _, values := range [][]string{{"^de("}, {""}, {"ok", "^[z-a]"}} {
		_, err := parseTopics(values)
		var ce *client.Error
		if !errors.As(err, &ce) || ce.Code != client.ExitUsage {
			t.Errorf("parseTopics(%q) = %v, want a usage error", values, err)
		}
	}
}
