package queue

import (
	"errors"
	"reflect"
	"testing"
)

func TestAcksFromRequestBatches(t *testing.T) {
	for _, tc := range []struct {
		name        string
		first, last []int64
		types       [][]int8
		want        []Ack
		bad         bool
	}{
		{"one type for a range", []int64{5}, []int64{9}, [][]int8{{1}}, []Ack{{First: 5, Last: 9, Type: Accept}}, false},
		{"a type per offset, neighbours of one type merged", []int64{0}, []int64{4}, [][]int8{{1, 1, 2, 3, 3}},
			[]Ack{{First: 0, Last: 1, Type: Accept}, {First: 2, Last: 2, Type: Release}, {First: 3, Last: 4, Type: Reject}}, false},
		{"merged across batches", []int64{0, 2}, []int64{1, 3}, [][]int8{{1, 1}, {1, 0}},
			[]Ack{{First: 0, Last: 2, Type: Accept}, {First: 3, Last: 3, Type: Gap}}, false},
		{"several batches", []int64{0, 10}, []int64{3, 10}, [][]int8{{2}, {4}},
			[]Ack{{First: 0, Last: 3, Type: Release}, {First: 10, Last: 10, Type: Renew}}, false},
		{"first after last", []int64{3}, []int64{2}, [][]int8{{1}}, nil, true},
		{"no type", []int64{0}, []int64{2}, [][]int8{{}}, nil, true},
		{"types not one per offset", []int64{0}, []int64{2}, [][]int8{{1, 1}}, nil, true},
	} {
		got, err := AcksFrom(tc.first, tc.last, tc.types)
		if tc.bad {
			if !errors.Is(err, ErrInvalidAck) {
				t.Errorf("%s: err = %v, want ErrInvalidAck", tc.name, err)
			}
			continue
		}
		if err != nil || !reflect.DeepEqual(got, tc.want) {
			t.Errorf("%s: AcksFrom = %v, %v; want %v", tc.name, got, err, tc.want)
		}
	}
}

// TestDescribeStateCountsTheStoredWindow: a stored state is described as
// stored (an acquired record counts as acquired), its start as restored
// (past the done prefix), and its lag from the stored start.
func TestDescribeStateCountsTheStoredWindow(t *testing.T) {
	s := Snapshot{Start: 10, End: 20, Runs: []Run{
		{First: 10, Last: 11, State: Acknowledged, Deliveries: 1},
		{First: 12, Last: 13, State: Archived, Deliveries: 5},
		{First: 14, Last: 16, State: Acquired, Deliveries: 1},
		{First: 17, Last: 19, State: Available, Deliveries: 0},
	}}
	o, err := DescribeState(s)
	if err != nil {
		t.Fatal(err)
	}
	want := Counts{Available: 3, Acquired: 3, Acknowledged: 2, Archived: 2}
	if o.Counts != want || o.Start != 14 || o.End != 20 {
		t.Fatalf("DescribeState = %+v, want start 14, end 20, %+v", o, want)
	}
	if lag := o.Lag(25); lag != 11 { // 15 records from 10, 4 of them done with
		t.Fatalf("Lag(25) = %d, want 11", lag)
	}
	if lag := o.Lag(12); lag != 0 {
		t.Fatalf("Lag(12) = %d, want 0", lag)
	}
	if _, err := DescribeState(Snapshot{Start: 5, End: 4}); !errors.Is(err, ErrBadSnapshot) {
		t.Fatalf("DescribeState of a bad snapshot: %v, want ErrBadSnapshot", err)
	}
}
