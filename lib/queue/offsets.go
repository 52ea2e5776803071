package queue

import "fmt"

// StateOffsets is what a share-partition's durable state says of its
// progress (DescribeShareGroupOffsets): where it starts once restored, and
// its in-flight window as stored.
type StateOffsets struct {
	// Start is the start offset the state restores to (Restore: past the
	// prefix that is done with).
	Start int64
	// End is the offset after the last one ever acquired.
	End int64
	// Counts counts the stored window by state; an acquired record counts
	// as acquired (its lock is not kept: restored, it is available).
	Counts
	stored int64 // the snapshot's start offset
}

// DescribeState returns what a stored snapshot says of its
// share-partition's progress; an error when it does not restore.
func DescribeState(s Snapshot) (StateOffsets, error) {
	q, err := Restore(Config{DeliveryAttemptLimit: 1 << 15}, s)
	if err != nil {
		return StateOffsets{}, err
	}
	return StateOffsets{Start: q.Start(), End: s.End, Counts: s.counts(), stored: s.Start}, nil
}

// Lag is how many records of the partition up to highWatermark are not
// yet acknowledged or archived: from the stored start on, never below 0.
func (o StateOffsets) Lag(highWatermark int64) int64 {
	return max(highWatermark-o.stored-int64(o.Acknowledged+o.Archived), 0)
}

// counts counts the snapshot's runs by state.
func (s Snapshot) counts() Counts {
	var c Counts
	for _, run := range s.Runs {
		n := int(run.Last - run.First + 1)
		switch run.State {
		case Available:
			c.Available += n
		case Acquired:
			c.Acquired += n
		case Acknowledged:
			c.Acknowledged += n
		case Archived:
			c.Archived += n
		}
	}
	return c
}

// AcksFrom turns a request's acknowledgement batches (first[i] to
// last[i], with types[i]: one type for the whole range, or one per
// offset) into Acks, merging neighbouring offsets of one type;
// ErrInvalidAck when a batch does not parse.
func AcksFrom(first, last []int64, types [][]int8) ([]Ack, error) {
	var out []Ack
	for i := range first {
		f, l, ts := first[i], last[i], types[i]
		switch {
		case f > l || len(ts) == 0:
			return nil, fmt.Errorf("%w: batch %d-%d with %d types", ErrInvalidAck, f, l, len(ts))
		case len(ts) == 1:
			out = append(out, Ack{First: f, Last: l, Type: AckType(ts[0])})
		case int64(len(ts)) != l-f+1:
			return nil, fmt.Errorf("%w: batch %d-%d with %d types", ErrInvalidAck, f, l, len(ts))
		default:
			for j, t := range ts {
				o := f + int64(j)
				if n := len(out); n > 0 && out[n-1].Last == o-1 && out[n-1].Type == AckType(t) {
					out[n-1].Last = o
					continue
				}
				out = append(out, Ack{First: o, Last: o, Type: AckType(t)})
			}
		}
	}
	return out, nil
}
