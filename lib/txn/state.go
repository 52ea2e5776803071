package txn

import (
	"math"
	"slices"
	"strings"
	"time"
)

// State is where a transactional id's transaction is, Kafka's states with
// their codes in __transaction_state.
type State int8

const (
	Empty             State = 0 // a producer id and epoch, no transaction
	Ongoing           State = 1 // partitions added, not ended
	PrepareCommit     State = 2 // EndTxn(commit) recorded; markers on their way
	PrepareAbort      State = 3 // EndTxn(abort) or a timeout recorded; markers on their way
	CompleteCommit    State = 4 // every marker written
	CompleteAbort     State = 5
	Dead              State = 6 // expired: the id is being removed
	PrepareEpochFence State = 7 // a new producer fences the ongoing transaction's
)

var stateNames = [...]string{"Empty", "Ongoing", "PrepareCommit", "PrepareAbort", "CompleteCommit", "CompleteAbort", "Dead", "PrepareEpochFence"}

// String is Kafka's name of the state (DescribeTransactions,
// ListTransactions).
func (s State) String() string {
	if s < 0 || int(s) >= len(stateNames) {
		return "Unknown"
	}
	return stateNames[s]
}

// ParseState returns the state named s (case-insensitively); ok is false
// for a name that is none.
func ParseState(s string) (State, bool) {
	for i, n := range stateNames {
		if strings.EqualFold(n, s) {
			return State(i), true
		}
	}
	return 0, false
}

// TopicPartition names one partition of a transaction.
type TopicPartition struct {
	Topic     string
	Partition int32
}

func compareTopicPartitions(a, b TopicPartition) int {
	if c := strings.Compare(a.Topic, b.Topic); c != 0 {
		return c
	}
	return int(a.Partition) - int(b.Partition)
}

// maxEpoch is the last epoch a producer id is used with: at it, the
// next bump takes a new producer id (Kafka's Short.MaxValue - 1; the
// partition side reserves the maximum itself).
const maxEpoch = math.MaxInt16 - 1

// Metadata is the durable state of one transactional id: what its record
// in __transaction_state holds.
type Metadata struct {
	ID         string
	ProducerID int64
	Epoch      int16
	// PrevProducerID is the producer id before the last change of id
	// (epoch exhaustion), NextProducerID/NextEpoch the id and epoch a
	// transaction.version 2 transaction ends with when its end changed
	// the id: a retried EndTxn is recognized by them. -1: none.
	PrevProducerID int64
	NextProducerID int64
	NextEpoch      int16
	// LastEpoch is the epoch before the last bump while a transaction
	// ends (a fence, a timeout, a version 2 end): markers are written with
	// the bumped epoch, and a retry of the client's own request carries
	// the last one. -1: none.
	LastEpoch int16
	Timeout   time.Duration
	State     State
	// Partitions of the transaction, sorted; kept through Prepare* (the
	// markers go to them) and cleared by Complete*.
	Partitions []TopicPartition
	// Start is when the ongoing transaction began (its first partition);
	// Update when the record was last written.
	Start, Update time.Time
	// Version2 says the client ends its transactions with EndTxn v5+
	// (transaction.version 2): every end bumps the epoch.
	Version2 bool
}

// clone returns a copy of m that shares nothing with it.
func (m Metadata) clone() Metadata {
	m.Partitions = slices.Clone(m.Partitions)
	return m
}

// hasAll reports whether every partition of tps is in the transaction.
func (m *Metadata) hasAll(tps []TopicPartition) bool {
	for _, tp := range tps {
		if _, ok := slices.BinarySearchFunc(m.Partitions, tp, compareTopicPartitions); !ok {
			return false
		}
	}
	return true
}

// has reports whether tp is in the transaction.
func (m *Metadata) has(tp TopicPartition) bool {
	_, ok := slices.BinarySearchFunc(m.Partitions, tp, compareTopicPartitions)
	return ok
}

// addPartitions adds tps (sorted, without duplicates).
func (m *Metadata) addPartitions(tps []TopicPartition) {
	for _, tp := range tps {
		if i, ok := slices.BinarySearchFunc(m.Partitions, tp, compareTopicPartitions); !ok {
			m.Partitions = slices.Insert(m.Partitions, i, tp)
		}
	}
}

// bump moves to the next epoch, or to newID with epoch 0 when the epoch is
// exhausted (newID is then required: the caller allocated it, see
// needsNewID).
func (m *Metadata) bump(newID int64) {
	if m.Epoch >= maxEpoch {
		m.PrevProducerID, m.ProducerID, m.Epoch, m.LastEpoch = m.ProducerID, newID, 0, -1
		return
	}
	m.LastEpoch = m.Epoch
	m.Epoch++
}

// needsNewID reports whether the next bump changes the producer id.
func (m *Metadata) needsNewID() bool { return m.Epoch >= maxEpoch }

// completing reports whether the transaction's end is recorded and its
// markers are on their way.
func (s State) completing() bool {
	return s == PrepareCommit || s == PrepareAbort || s == PrepareEpochFence
}
