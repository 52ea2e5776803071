package pipe

import (
	"context"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"

	"github.com/mqproject/mq/lib/client"
)

// OffsetKind says where -o starts reading a partition.
type OffsetKind int

const (
	OffsetBeginning OffsetKind = iota // the log start offset
	OffsetEnd                         // the high-water mark: only new records
	OffsetStored                      // the group's committed offset
	OffsetExact                       // offset N
	OffsetLast                        // the last N records (-N)
	OffsetTime                        // the first record at or after a time (@TIME)
)

// OffsetSpec is a parsed -o value.
type OffsetSpec struct {
	Kind OffsetKind
	N    int64     // OffsetExact, OffsetLast
	Time time.Time // OffsetTime
}

// OffsetUsage describes the -o values, for help texts and errors.
const OffsetUsage = "beginning, end, stored, N (offset N), -N (the last N of each partition) or @TIME (RFC 3339, milliseconds since the epoch, or a time ago: @-1h, @-30m, @-2d)"

// ParseOffset reads a -o value: beginning (or earliest), end (or latest),
// stored, N, -N or @TIME.
func ParseOffset(s string) (OffsetSpec, error) {
	switch s {
	case "beginning", "earliest", "start":
		return OffsetSpec{Kind: OffsetBeginning}, nil
	case "end", "latest":
		return OffsetSpec{Kind: OffsetEnd}, nil
	case "stored", "committed":
		return OffsetSpec{Kind: OffsetStored}, nil
	}
	if t, ok := strings.CutPrefix(s, "@"); ok {
		tm, err := client.ParseTime(t)
		if err != nil {
			return OffsetSpec{}, fmt.Errorf("offset %q: want @ and %s", s, client.TimeUsage)
		}
		return OffsetSpec{Kind: OffsetTime, Time: tm}, nil
	}
	n, err := strconv.ParseInt(s, 10, 64)
	if err != nil || s == "" || s[0] == '+' {
		return OffsetSpec{}, fmt.Errorf("offset %q: want %s", s, OffsetUsage)
	}
	if s[0] == '-' {
		return OffsetSpec{Kind: OffsetLast, N: -n}, nil
	}
	return OffsetSpec{Kind: OffsetExact, N: n}, nil
}

// OffsetsUsage describes the -o values of consume, which may also end
// the read at a time, as kcat's and rpk's do.
const OffsetsUsage = OffsetUsage + "; s@TIME starts at TIME and e@TIME stops before the first record at or after TIME (kcat's; give -o twice for both), @TIME1:TIME2 does both (rpk's)"

// ParseOffsets reads the -o values of consume: at most one start (what
// ParseOffset reads, or kcat's s@TIME) and at most one end, kcat's e@TIME:
// stop each partition before its first record at or after the time.
// @TIME1:TIME2 (rpk's) gives both. No value starts at the beginning; until
// is zero when no end is given.
func ParseOffsets(values []string) (start OffsetSpec, until time.Time, err error) {
	var haveStart bool
	setStart := func(v string, o OffsetSpec) error {
		if haveStart {
			return fmt.Errorf("offset %q: a start was given already (one start, and one end as e@TIME)", v)
		}
		start, haveStart = o, true
		return nil
	}
	setUntil := func(v string, t time.Time) error {
		if !until.IsZero() {
			return fmt.Errorf("offset %q: an end was given already", v)
		}
		until = t
		return nil
	}
	for _, v := range values {
		switch {
		case strings.HasPrefix(v, "s@"):
			o, err := ParseOffset(v[1:])
			if err != nil {
				return OffsetSpec{}, time.Time{}, err
			}
			if err := setStart(v, o); err != nil {
				return OffsetSpec{}, time.Time{}, err
			}
		case strings.HasPrefix(v, "e@"):
			t, err := client.ParseTime(v[2:])
			if err != nil {
				return OffsetSpec{}, time.Time{}, fmt.Errorf("offset %q: want e@ and %s", v, client.TimeUsage)
			}
			if err := setUntil(v, t); err != nil {
				return OffsetSpec{}, time.Time{}, err
			}
		default:
			o, err := ParseOffset(v)
			if err != nil {
				from, to, ok := timeRange(v)
				if !ok {
					return OffsetSpec{}, time.Time{}, err
				}
				if err := setUntil(v, to); err != nil {
					return OffsetSpec{}, time.Time{}, err
				}
				o = OffsetSpec{Kind: OffsetTime, Time: from}
			}
			if err := setStart(v, o); err != nil {
				return OffsetSpec{}, time.Time{}, err
			}
		}
	}
	if !haveStart {
		start = OffsetSpec{Kind: OffsetBeginning}
	}
	if !until.IsZero() && start.Kind == OffsetTime && !until.After(start.Time) {
		return OffsetSpec{}, time.Time{}, fmt.Errorf("offset: the end %s is not after the start %s", until.UTC().Format(time.RFC3339Nano), start.Time.UTC().Format(time.RFC3339Nano))
	}
	return start, until, nil
}

// timeRange reads @FROM:TO. Times hold colons themselves (RFC 3339), so
// it takes the first colon at which both sides are times.
func timeRange(v string) (from, to time.Time, ok bool) {
	s, found := strings.CutPrefix(v, "@")
	if !found {
		return time.Time{}, time.Time{}, false
	}
	for i := 0; i < len(s); i++ {
		if s[i] != ':' {
			continue
		}
		f, err1 := client.ParseTime(s[:i])
		t, err2 := client.ParseTime(s[i+1:])
		if err1 == nil && err2 == nil {
			return f, t, true
		}
	}
	return time.Time{}, time.Time{}, false
}

func (o OffsetSpec) String() string {
	switch o.Kind {
	case OffsetBeginning:
		return "beginning"
	case OffsetEnd:
		return "end"
	case OffsetStored:
		return "stored"
	case OffsetExact:
		return strconv.FormatInt(o.N, 10)
	case OffsetLast:
		return "-" + strconv.FormatInt(o.N, 10)
	case OffsetTime:
		return "@" + o.Time.UTC().Format(time.RFC3339Nano)
	}
	return "?"
}

// PartitionOffsets are what the broker says about one partition's log.
type PartitionOffsets struct {
	LogStart      int64 // the first offset still in the log
	HighWatermark int64 // the offset the next record will get
	AtTime        int64 // OffsetTime: the first offset at or after the time; -1 if none
}

// Start is the offset to start reading the partition from, always within
// [LogStart, HighWatermark]: an offset before the log start begins at the
// log start, one past the end waits for new records at the end, and -N
// never reaches before the log start.
func (o OffsetSpec) Start(p PartitionOffsets) int64 {
	var at int64
	switch o.Kind {
	case OffsetBeginning:
		at = p.LogStart
	case OffsetEnd:
		at = p.HighWatermark
	case OffsetExact:
		at = o.N
	case OffsetLast:
		at = p.HighWatermark - o.N
	case OffsetTime:
		at = p.AtTime
		if at < 0 {
			at = p.HighWatermark
		}
	default:
		at = p.LogStart
	}
	return max(p.LogStart, min(at, p.HighWatermark))
}

// endAtTime moves each partition's end in ends (its high-water mark) back
// to its first record at or after until, when it has one below.
func endAtTime(ctx context.Context, adm *kadm.Client, parts partitionSet, until time.Time, ends map[string]map[int32]int64) error {
	if len(parts) == 0 {
		return nil // listing no topic would list them all
	}
	at, err := adm.ListOffsetsAfterMilli(ctx, until.UnixMilli(), parts.names()...)
	if err == nil {
		err = at.Error()
	}
	if err != nil {
		return client.Failf("list offsets at %s: %v", until.UTC().Format(time.RFC3339Nano), err)
	}
	for t, ps := range parts {
		for _, p := range ps {
			if o, ok := at.Lookup(t, p); ok && o.Offset >= 0 && o.Offset < ends[t][p] {
				ends[t][p] = o.Offset
			}
		}
	}
	return nil
}
