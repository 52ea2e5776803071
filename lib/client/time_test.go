package client

import (
	"testing"
	"time"
)

func TestParseTimeTakesRFC3339EpochMillisAndTimesAgo(t *testing.T) {
	now := time.Date(2024, 5, 1, 12, 0, 0, 0, time.UTC)
	for _, tc := range []struct {
		in   string
		want time.Time
		ok   bool
	}{
		{"0", time.UnixMilli(0), true},
		{"1700000000123", time.UnixMilli(1700000000123), true},
		{"2024-05-01T12:00:00Z", time.Date(2024, 5, 1, 12, 0, 0, 0, time.UTC), true},
		{"2024-05-01T12:00:00.5+02:00", time.Date(2024, 5, 1, 10, 0, 0, 5e8, time.UTC), true},
		{"now", now, true},
		{"-1h", now.Add(-time.Hour), true},
		{"-30m", now.Add(-30 * time.Minute), true},
		{"-90s", now.Add(-90 * time.Second), true},
		{"-1h30m", now.Add(-90 * time.Minute), true},
		{"-1.5h", now.Add(-90 * time.Minute), true},
		{"-2d", now.Add(-48 * time.Hour), true},
		{"-1w2d", now.Add(-9 * 24 * time.Hour), true},
		{"-500ms", now.Add(-500 * time.Millisecond), true},
		{"-5", time.Time{}, false},       // a number needs its unit
		{"-100000d", time.Time{}, false}, // before the epoch
		{"1969-12-31T23:59:59Z", time.Time{}, false},
		{"-1h5", time.Time{}, false},
		{"-0s", time.Time{}, false},
		{"-", time.Time{}, false},
		{"-1y", time.Time{}, false},
		{"+1h", time.Time{}, false},
		{"--1h", time.Time{}, false},
		{"yesterday", time.Time{}, false},
		{"", time.Time{}, false},
		{"2024-05-01", time.Time{}, false},
	} {
		got, err := parseTime(tc.in, now)
		if (err == nil) != tc.ok {
			t.Errorf("parseTime(%q) error = %v, want ok=%v", tc.in, err, tc.ok)
			continue
		}
		if tc.ok && !got.Equal(tc.want) {
			t.Errorf("parseTime(%q) = %v, want %v", tc.in, got, tc.want)
		}
	}
}

func TestParseDurationTakesDaysAndRefusesWhatIsNotOne(t *testing.T) {
	for in, want := range map[string]time.Duration{"30s": 30 * time.Second, "1h30m": 90 * time.Minute, "2d": 48 * time.Hour, "1w": 7 * 24 * time.Hour} {
		if got, err := ParseDuration(in); err != nil || got != want {
			t.Errorf("ParseDuration(%q) = %v, %v; want %v", in, got, err, want)
		}
	}
	for _, in := range []string{"", "nonsense", "5", "-1m", "1x", "0s"} {
		if got, err := ParseDuration(in); err == nil {
			t.Errorf("ParseDuration(%q) = %v, want an error", in, got)
		}
	}
}
