package client

import (
	"fmt"
	"strconv"
	"strings"
	"time"
)

// TimeUsage says what ParseTime accepts, for flag help.
const TimeUsage = "an RFC 3339 time (2024-05-01T12:00:00Z), milliseconds since the epoch, " +
	"or a time ago: -30m, -1h, -2d, -1h30m (units ms, s, m, h, d, w), or now"

// ParseTime reads a point in time as every tool takes it on its command
// line: RFC 3339 (with or without fractional seconds), a non-negative
// count of milliseconds since the Unix epoch, as Kafka timestamps are, or
// a time before now, as date -d users write it: "-1h" (an hour ago),
// "-30m", "-2d", "-1h30m", "-1.5h"; and "now".
func ParseTime(s string) (time.Time, error) { return parseTime(s, time.Now()) }

func parseTime(s string, now time.Time) (time.Time, error) {
	if ms, err := strconv.ParseInt(s, 10, 64); err == nil && ms >= 0 {
		return time.UnixMilli(ms), nil
	}
	t, ok := now, s == "now"
	if ago, relative := strings.CutPrefix(s, "-"); relative {
		var d time.Duration
		if d, ok = parseAgo(ago); ok {
			t = now.Add(-d)
		}
	} else if !ok {
		var err error
		t, err = time.Parse(time.RFC3339Nano, s)
		ok = err == nil
	}
	if !ok {
		return time.Time{}, fmt.Errorf("want %s, got %q", TimeUsage, s)
	}
	// Kafka timestamps count from the epoch; negative ones name the log's
	// ends in ListOffsets.
	if t.UnixMilli() < 0 {
		return time.Time{}, fmt.Errorf("%q is before 1970, the start of Kafka timestamps", s)
	}
	return t, nil
}

// parseAgo reads a duration such as 1h30m or 2d: Go's duration syntax
// with days (d, 24h) and weeks (w) besides; every number needs its unit.
func parseAgo(s string) (time.Duration, bool) {
	if s == "" {
		return 0, false
	}
	var total time.Duration
	for s != "" {
		i := 0
		for i < len(s) && (s[i] >= '0' && s[i] <= '9' || s[i] == '.') {
			i++
		}
		j := i
		for j < len(s) && (s[j] < '0' || s[j] > '9') && s[j] != '.' {
			j++
		}
		num, unit := s[:i], s[i:j]
		if num == "" || unit == "" {
			return 0, false
		}
		var d time.Duration
		switch unit {
		case "d", "w":
			n, err := strconv.ParseFloat(num, 64)
			if err != nil {
				return 0, false
			}
			day := 24 * time.Hour
			if unit == "w" {
				day *= 7
			}
			d = time.Duration(n * float64(day))
		default:
			var err error
			if d, err = time.ParseDuration(num + unit); err != nil {
				return 0, false
			}
		}
		total += d
		s = s[j:]
	}
	return total, total > 0
}

// ParseDuration reads a length of time as the tools take it on their
// command lines: Go's duration syntax with days (d) and weeks (w) besides,
// every number with its unit ("30s", "5m", "1h30m", "2d"), above zero.
func ParseDuration(s string) (time.Duration, error) {
	d, ok := parseAgo(s)
	if !ok || d <= 0 {
		return 0, fmt.Errorf("%q is not a duration above zero such as 30s, 5m, 1h30m or 2d", s)
	}
	return d, nil
}
