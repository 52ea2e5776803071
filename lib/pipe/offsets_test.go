package pipe

import (
	"strings"
	"testing"
	"time"
)

func TestParseOffset(t *testing.T) {
	for _, c := range []struct {
		in   string
		want OffsetSpec
	}{
		{"beginning", OffsetSpec{Kind: OffsetBeginning}},
		{"earliest", OffsetSpec{Kind: OffsetBeginning}},
		{"end", OffsetSpec{Kind: OffsetEnd}},
		{"latest", OffsetSpec{Kind: OffsetEnd}},
		{"stored", OffsetSpec{Kind: OffsetStored}},
		{"0", OffsetSpec{Kind: OffsetExact, N: 0}},
		{"42", OffsetSpec{Kind: OffsetExact, N: 42}},
		{"-10", OffsetSpec{Kind: OffsetLast, N: 10}},
		{"-0", OffsetSpec{Kind: OffsetLast, N: 0}},
		{"@1700000000123", OffsetSpec{Kind: OffsetTime, Time: time.UnixMilli(1700000000123)}},
		{"@2024-05-01T12:00:00Z", OffsetSpec{Kind: OffsetTime, Time: time.Date(2024, 5, 1, 12, 0, 0, 0, time.UTC)}},
		{"@2024-05-01T14:00:00.5+02:00", OffsetSpec{Kind: OffsetTime, Time: time.Date(2024, 5, 1, 12, 0, 0, 5e8, time.UTC)}},
	} {
		got, err := ParseOffset(c.in)
		if err != nil {
			t.Errorf("%q: %v", c.in, err)
			continue
		}
		if got.Kind != c.want.Kind || got.N != c.want.N || !got.Time.Equal(c.want.Time) {
			t.Errorf("%q: got %+v, want %+v", c.in, got, c.want)
		}
		if again, err := ParseOffset(got.String()); err != nil || again.Kind != got.Kind || again.N != got.N || !again.Time.Equal(got.Time) {
			t.Errorf("%q: String %q does not parse back (%v)", c.in, got.String(), err)
		}
	}
}

func TestParseOffsetRejects(t *testing.T) {
	for _, in := range []string{"", "begin", "+5", "1.5", "-x", "@", "@yesterday", "@2024-05-01", "@-5", "@-1y", "@+1h", "99999999999999999999"} {
		if _, err := ParseOffset(in); err == nil || !strings.Contains(err.Error(), "offset") {
			t.Errorf("%q: got %v, want an error", in, err)
		}
	}
}

func TestOffsetStartStaysInTheLog(t *testing.T) {
	p := PartitionOffsets{LogStart: 10, HighWatermark: 100, AtTime: 50}
	noTime := PartitionOffsets{LogStart: 10, HighWatermark: 100, AtTime: -1}
	empty := PartitionOffsets{LogStart: 7, HighWatermark: 7, AtTime: -1}
	for _, c := range []struct {
		spec string
		p    PartitionOffsets
		want int64
	}{
		{"beginning", p, 10},
		{"end", p, 100},
		{"50", p, 50},
		{"5", p, 10},
		{"500", p, 100},
		{"-1", p, 99},
		{"-30", p, 70},
		{"-1000", p, 10},
		{"-0", p, 100},
		{"@0", p, 50},
		{"@0", noTime, 100},
		{"beginning", empty, 7},
		{"-5", empty, 7},
		{"3", empty, 7},
	} {
		spec, err := ParseOffset(c.spec)
		if err != nil {
			t.Fatal(err)
		}
		if got := spec.Start(c.p); got != c.want {
			t.Errorf("%s on %+v: got %d, want %d", c.spec, c.p, got, c.want)
		}
	}
}

func TestParseOffsetTakesATimeAgo(t *testing.T) {
	before := time.Now()
	got, err := ParseOffset("@-1h30m")
	after := time.Now()
	if err != nil {
		t.Fatal(err)
	}
	const ago = 90 * time.Minute
	if got.Kind != OffsetTime || got.Time.Before(before.Add(-ago)) || got.Time.After(after.Add(-ago)) {
		t.Errorf("@-1h30m = %+v, want the time 90 minutes before %v", got, before)
	}
}

func TestParseOffsetsTakesAStartAndAnEndAtATime(t *testing.T) {
	t1 := time.Date(2024, 5, 1, 12, 0, 0, 0, time.UTC)
	t2 := time.Date(2024, 5, 1, 13, 0, 0, 0, time.UTC)
	for _, c := range []struct {
		in    []string
		start OffsetSpec
		until time.Time
	}{
		{nil, OffsetSpec{Kind: OffsetBeginning}, time.Time{}},
		{[]string{"-10"}, OffsetSpec{Kind: OffsetLast, N: 10}, time.Time{}},
		{[]string{"s@2024-05-01T12:00:00Z"}, OffsetSpec{Kind: OffsetTime, Time: t1}, time.Time{}},
		{[]string{"e@2024-05-01T13:00:00Z"}, OffsetSpec{Kind: OffsetBeginning}, t2},
		{[]string{"e@2024-05-01T13:00:00Z", "s@2024-05-01T12:00:00Z"}, OffsetSpec{Kind: OffsetTime, Time: t1}, t2},
		{[]string{"@2024-05-01T12:00:00Z:2024-05-01T13:00:00Z"}, OffsetSpec{Kind: OffsetTime, Time: t1}, t2},
		{[]string{"@1714564800000:1714568400000"}, OffsetSpec{Kind: OffsetTime, Time: t1}, t2},
		{[]string{"5", "e@1714568400000"}, OffsetSpec{Kind: OffsetExact, N: 5}, t2},
	} {
		start, until, err := ParseOffsets(c.in)
		if err != nil {
			t.Errorf("%q: %v", c.in, err)
			continue
		}
		if start.Kind != c.start.Kind || start.N != c.start.N || !start.Time.Equal(c.start.Time) || !until.Equal(c.until) {
			t.Errorf("%q: start %+v until %v; want %+v until %v", c.in, start, until, c.start, c.until)
		}
	}
	for _, bad := range [][]string{
		{"1", "2"},
		{"e@1714568400000", "e@1714568400001"},
		{"@1714568400000:1714564800000"},
		{"e@soon"},
		{"@x:y"},
	} {
		if _, _, err := ParseOffsets(bad); err == nil {
			t.Errorf("%q accepted", bad)
		}
	}
}
