package client

import (
	"fmt"
	"strconv"
	"time"
)

// TimeUsage says what ParseTime accepts, for flag help.
const TimeUsage = "an RFC 3339 time (2024-05-01T12:00:00Z) or milliseconds since the epoch"

// ParseTime reads a point in time as every tool takes it on its command
// line: RFC 3339 (with or without fractional seconds) or a non-negative
// count of milliseconds since the Unix epoch, as Kafka timestamps are.
func ParseTime(s string) (time.Time, error) {
	if ms, err := strconv.ParseInt(s, 10, 64); err == nil && ms >= 0 {
		return time.UnixMilli(ms), nil
	}
	t, err := time.Parse(time.RFC3339Nano, s)
	if err != nil {
		return time.Time{}, fmt.Errorf("want %s, got %q", TimeUsage, s)
	}
	return t, nil
}
