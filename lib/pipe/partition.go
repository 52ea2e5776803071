package pipe

import (
	"github.com/twmb/franz-go/pkg/kgo"
)

// Murmur2 is the 32-bit MurmurHash2 variant Apache Kafka's default
// partitioner hashes keys with (seed 0x9747b28c, little-endian 4-byte
// blocks). Its result, made non-negative by clearing the sign bit, modulo the
// partition count is the partition of a keyed record.
func Murmur2(data []byte) int32 {
	const (
		seed uint32 = 0x9747b28c
		m    uint32 = 0x5bd1e995
		r           = 24
	)
	n := len(data)
	h := seed ^ uint32(n)
	blocks := n &^ 3
	for i := 0; i < blocks; i += 4 {
		k := uint32(data[i]) | uint32(data[i+1])<<8 | uint32(data[i+2])<<16 | uint32(data[i+3])<<24
		k *= m
		k ^= k >> r
		k *= m
		h *= m
		h ^= k
	}
	tail := data[blocks:]
	switch len(tail) {
	case 3:
		h ^= uint32(tail[2]) << 16
		fallthrough
	case 2:
		h ^= uint32(tail[1]) << 8
		fallthrough
	case 1:
		h ^= uint32(tail[0])
		h *= m
	}
	h ^= h >> 13
	h *= m
	h ^= h >> 15
	return int32(h)
}

// KeyPartition is the partition, among n, that Kafka's default partitioner
// gives a record with this (non-null) key.
func KeyPartition(key []byte, n int) int {
	return int(uint32(Murmur2(key))&0x7fffffff) % n
}

// Partitioner places records the way mqpipe promises: a record whose
// Partition is set (>= 0) goes there; a keyed record goes to the partition
// of its key's murmur2 hash, like Kafka's default partitioner; a record with
// a null key sticks to one partition per batch (Kafka's sticky partitioner,
// KIP-480). Records must be produced with Partition = -1 unless they name
// one; a partition the topic does not have fails the record.
func Partitioner() kgo.Partitioner { return partitioner{} }

type partitioner struct{}

func (partitioner) ForTopic(topic string) kgo.TopicPartitioner {
	return &topicPartitioner{sticky: kgo.StickyPartitioner().ForTopic(topic)}
}

type topicPartitioner struct {
	sticky kgo.TopicPartitioner // for records with neither partition nor key
}

func (p *topicPartitioner) RequiresConsistency(r *kgo.Record) bool {
	return r.Partition >= 0 || r.Key != nil
}

func (p *topicPartitioner) Partition(r *kgo.Record, n int) int {
	switch {
	case r.Partition >= 0:
		return int(r.Partition) // out of range: kgo fails the record
	case r.Key != nil:
		return KeyPartition(r.Key, n)
	default:
		return p.sticky.Partition(r, n)
	}
}

// OnNewBatch lets the sticky choice for unkeyed records move on when a
// batch fills, as Kafka's sticky partitioner does.
func (p *topicPartitioner) OnNewBatch() {
	if nb, ok := p.sticky.(kgo.TopicPartitionerOnNewBatch); ok {
		nb.OnNewBatch()
	}
}
