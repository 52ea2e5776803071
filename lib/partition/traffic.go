package partition

import (
	"maps"
	"slices"
	"sync"
	"sync/atomic"

	"github.com/mqproject/mq/lib/log"
)

// Traffic counts one topic's client traffic on this node since it
// started, or since the topic was (re)created: the broker adds to it on
// the produce and fetch paths, an atomic add per partition of a request.
type Traffic struct {
	BytesIn, MessagesIn, BytesOut, MessagesOut atomic.Uint64
}

// TopicTraffic is a topic's Traffic as read at one moment.
type TopicTraffic struct {
	Topic                                      string
	BytesIn, MessagesIn, BytesOut, MessagesOut uint64
}

// trafficCounters holds the Traffic of every topic this node hosts
// partitions of, by name. A topic's entry goes when the node hosts none
// of its partitions any more, so a topic hosted again counts from 0 (a
// counter reset); one deleted and re-created between two images keeps
// counting.
type trafficCounters struct {
	mu     sync.Mutex
	topics map[string]*Traffic
}

// of returns the counters of a topic, making them on first use.
func (t *trafficCounters) of(topic string) *Traffic {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.topics == nil {
		t.topics = map[string]*Traffic{}
	}
	c := t.topics[topic]
	if c == nil {
		c = new(Traffic)
		t.topics[topic] = c
	}
	return c
}

// retain drops the counters of topics not in keep.
func (t *trafficCounters) retain(keep map[string]bool) {
	t.mu.Lock()
	defer t.mu.Unlock()
	maps.DeleteFunc(t.topics, func(name string, _ *Traffic) bool { return !keep[name] })
}

// Traffic returns the traffic of every topic hosted here.
func (m *Manager) Traffic() []TopicTraffic {
	t := &m.traffic
	t.mu.Lock()
	defer t.mu.Unlock()
	out := make([]TopicTraffic, 0, len(t.topics))
	for name, c := range t.topics {
		out = append(out, TopicTraffic{Topic: name,
			BytesIn: c.BytesIn.Load(), MessagesIn: c.MessagesIn.Load(),
			BytesOut: c.BytesOut.Load(), MessagesOut: c.MessagesOut.Load()})
	}
	return out
}

// ISRCounts are the ISR changes this node made as a leader since it
// started, those it proposed that were not confirmed, and the ISR loop's
// rounds and the AlterPartition commands it sent.
type ISRCounts struct {
	Shrinks, Expands, Unconfirmed, Rounds, Commands uint64
}

// isrCounters count what ISRCounts reports.
type isrCounters struct {
	shrinks, expands, unconfirmed, rounds, commands atomic.Uint64
}

// count records an accepted ISR change from before to after.
func (c *isrCounters) count(before, after []int32) {
	removed := slices.ContainsFunc(before, func(id int32) bool { return !slices.Contains(after, id) })
	added := slices.ContainsFunc(after, func(id int32) bool { return !slices.Contains(before, id) })
	if removed {
		c.shrinks.Add(1)
	}
	if added {
		c.expands.Add(1)
	}
}

// ISRCounts returns the ISR loop's counters.
func (m *Manager) ISRCounts() ISRCounts {
	c := &m.isr
	return ISRCounts{Shrinks: c.shrinks.Load(), Expands: c.expands.Load(), Unconfirmed: c.unconfirmed.Load(),
		Rounds: c.rounds.Load(), Commands: c.commands.Load()}
}

// Files returns the segment descriptors' bound and counters
// (log.max.open.files).
func (m *Manager) Files() *log.Files { return m.files }

// Storage returns the failed writes and damaged ranges of the data
// directory's logs since mqd started.
func (m *Manager) Storage() *log.StorageCounters { return &m.storage }
