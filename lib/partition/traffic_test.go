package partition

import "testing"

func TestISRCountersTellShrinksFromExpands(t *testing.T) {
	var c isrCounters
	c.count([]int32{1, 2, 3}, []int32{1, 2})    // shrink
	c.count([]int32{1, 2}, []int32{1, 2, 3})    // expand
	c.count([]int32{1, 2}, []int32{1, 3})       // both: 2 left, 3 joined
	c.count([]int32{1, 2, 3}, []int32{3, 2, 1}) // the same set
	if s, e := c.shrinks.Load(), c.expands.Load(); s != 2 || e != 2 {
		t.Errorf("shrinks %d, expands %d; want 2 and 2", s, e)
	}
}

func TestTrafficCountersKeepOnlyHostedTopics(t *testing.T) {
	tc := &trafficCounters{}
	a := tc.of("a")
	a.BytesIn.Add(5)
	if tc.of("a") != a {
		t.Fatal("a topic's counters are made twice")
	}
	tc.of("b").MessagesOut.Add(1)
	tc.retain(map[string]bool{"a": true})
	m := &Manager{}
	m.traffic.topics = tc.topics
	got := m.Traffic()
	if len(got) != 1 || got[0].Topic != "a" || got[0].BytesIn != 5 {
		t.Errorf("after retain(a): %+v", got)
	}
}
