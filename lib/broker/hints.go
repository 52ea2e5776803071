package broker

import (
	"encoding/binary"
	"slices"

	"github.com/twmb/franz-go/pkg/kerr"

	"github.com/mqproject/mq/lib/controller"
	"github.com/mqproject/mq/lib/server"
)

// KIP-951: a Produce (v10+) or Fetch (v12+ for the leader, v16+ for its
// address) answered NOT_LEADER_OR_FOLLOWER or FENCED_LEADER_EPOCH also
// names the partition's current leader and leader epoch, and the
// response lists that leader's endpoint, so the client redirects at once
// instead of refreshing its metadata first. Both come from the node's
// current image, as Kafka takes them from its metadata cache.

// leaderHint is a partition's current leader as a KIP-951 hint.
type leaderHint struct {
	set    bool // the response carries it
	leader int32
	epoch  int32
}

// wantsLeaderHint reports whether a partition error code is one KIP-951
// answers with the current leader.
func wantsLeaderHint(code int16) bool {
	return code == kerr.NotLeaderForPartition.Code || code == kerr.FencedLeaderEpoch.Code
}

// currentLeader returns the hint for a partition of t in the image: its
// leader and leader epoch, -1 for both when the topic or partition is not
// there.
func currentLeader(t *controller.Topic, partition int32) leaderHint {
	leader, epoch := t.CurrentLeader(partition)
	return leaderHint{set: true, leader: leader, epoch: epoch}
}

// appendEndpoint appends the registration of broker id to eps unless it
// is there already, not registered or fenced (clients are told of live
// brokers only).
func appendEndpoint(eps []controller.Broker, img *controller.Image, id int32, c *server.ConnInfo) []controller.Broker {
	if id < 0 || slices.ContainsFunc(eps, func(b controller.Broker) bool { return b.ID == id }) {
		return eps
	}
	br, ok := img.Brokers[id]
	if !ok || br.Fenced {
		return eps
	}
	return append(eps, forListener(c, br))
}

// appendLeaderHint writes a partition's tagged fields holding the
// CurrentLeader hint (Fetch tag 1; a LeaderIdAndEpoch: two int32 and its
// own empty tagged fields).
func appendLeaderHint(b []byte, tag byte, h leaderHint) []byte {
	b = append(b, 1, tag, 9) // one tagged field, its tag, its 9 bytes
	b = appendInt32(b, h.leader)
	b = appendInt32(b, h.epoch)
	return append(b, 0)
}

// appendNodeEndpoints writes a response's tagged fields holding
// NodeEndpoints (tag 0): the brokers named by the partitions' hints.
func appendNodeEndpoints(b []byte, eps []controller.Broker) []byte {
	size := uvarintLen(uint64(len(eps)) + 1)
	for i := range eps {
		size += 4 + compactStringLen(len(eps[i].Host)) + 4 + 1
		if eps[i].Rack == nil {
			size++
		} else {
			size += compactStringLen(len(*eps[i].Rack))
		}
	}
	b = append(b, 1, 0) // one tagged field, tag 0
	b = binary.AppendUvarint(b, uint64(size))
	b = binary.AppendUvarint(b, uint64(len(eps))+1)
	for i := range eps {
		b = appendInt32(b, eps[i].ID)
		b = appendString(b, eps[i].Host, true)
		b = appendInt32(b, eps[i].Port)
		if eps[i].Rack == nil {
			b = append(b, 0)
		} else {
			b = appendString(b, *eps[i].Rack, true)
		}
		b = append(b, 0) // the endpoint's tagged fields
	}
	return b
}

func uvarintLen(v uint64) int {
	n := 1
	for v >= 0x80 {
		v >>= 7
		n++
	}
	return n
}

func compactStringLen(n int) int { return uvarintLen(uint64(n)+1) + n }
