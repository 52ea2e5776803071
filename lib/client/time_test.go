package client

import (
	"testing"
	"time"
)

func TestParseTimeTakesRFC3339AndEpochMillis(t *testing.T) {
	for _, tc := range []struct {
		in   string
		want time.Time
		ok   bool
	}{
		{"0", time.UnixMilli(0), true},
		{"1700000000123", time.UnixMilli(1700000000123), true},
		{"2024-05-01T12:00:00Z", time.Date(2024, 5, 1, 12, 0, 0, 0, time.UTC), true},
		{"2024-05-01T12:00:00.5+02:00", time.Date(2024, 5, 1, 10, 0, 0, 5e8, time.UTC), true},
		{"-5", time.Time{}, false},
		{"yesterday", time.Time{}, false},
		{"", time.Time{}, false},
		{"2024-05-01", time.Time{}, false},
	} {
		got, err := ParseTime(tc.in)
		if (err == nil) != tc.ok {
			t.Errorf("ParseTime(%q) error = %v, want ok=%v", tc.in, err, tc.ok)
			continue
		}
		if tc.ok && !got.Equal(tc.want) {
			t.Errorf("ParseTime(%q) = %v, want %v", tc.in, got, tc.want)
		}
	}
}
