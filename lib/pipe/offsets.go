package pipe

import (
	"fmt"
	"strconv"
	"strings"
	"time"

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
