package controller

import (
	"fmt"
	"slices"
)

// The checks of a client's topic request (CreateTopics, CreatePartitions,
// DeleteTopics) against an image, before it becomes a command: what the
// request's fields mean (-1 for a default), the rules clients are held
// to that commands are not (reserved and internal topics), and refusals
// worded for the client. The command's apply checks the image again
// (checkCreateTopic, checkCreatePartitions), so a command from anywhere
// is held to the same invariants.

// refusal is a client's request refused, with its message and the error
// it matches (ErrInvalidRequest, ErrInternalTopic, ErrInvalidPartitions,
// ErrInvalidReplicationFactor, ErrInvalidReplicaAssignment,
// ErrTopicExists, ErrUnknownTopic, ErrUnknownTopicID).
type refusal struct {
	err error
	msg string
}

func (e *refusal) Error() string { return e.msg }
func (e *refusal) Unwrap() error { return e.err }

func refuse(err error, format string, args ...any) error {
	return &refusal{err: err, msg: fmt.Sprintf(format, args...)}
}

// reservedTopics are names that clients may not create or delete: the
// internal topics of Kafka's coordinators (ours keep the same names) and
// Kafka's metadata log, which a Kafka client must never see as a topic.
var reservedTopics = map[string]bool{
	"__consumer_offsets":    true,
	"__transaction_state":   true,
	"__share_group_state":   true,
	"__cluster_metadata":    true,
	"__remote_log_metadata": true,
}

// ReservedTopic reports whether clients may not create a topic of this
// name.
func ReservedTopic(name string) bool { return reservedTopics[name] }

// IsInternal reports whether t is internal (marked so, or of a reserved
// name): a topic that clients must not delete, repartition or write: the group coordinator maps groups to
// partitions of __consumer_offsets by hashing, so a changed partition
// count or a deleted topic loses every group's committed offsets.
func (t *Topic) IsInternal() bool {
	return t.Internal || reservedTopics[t.Name]
}

// PartitionCount is the number of partitions of every topic of img.
func (img *Image) PartitionCount() int64 {
	var n int64
	for _, t := range img.Topics {
		n += int64(len(t.Partitions))
	}
	return n
}

// checkReplicaList verifies one explicit replica list of a request: not
// empty, no broker twice, every broker registered.
func checkReplicaList(img *Image, partition int32, replicas []int32) error {
	if len(replicas) == 0 {
		return refuse(ErrInvalidReplicaAssignment, "partition %d has no replicas", partition)
	}
	for i, r := range replicas {
		if slices.Contains(replicas[:i], r) {
			return refuse(ErrInvalidReplicaAssignment, "partition %d lists broker %d twice", partition, r)
		}
		if _, ok := img.Brokers[r]; !ok {
			return refuse(ErrInvalidReplicaAssignment, "partition %d: broker %d is not registered", partition, r)
		}
	}
	return nil
}

// Assignment is one partition's replicas as a CreateTopics request gives
// them.
type Assignment struct {
	Partition int32
	Replicas  []int32
}

// TopicRequest is a topic as a CreateTopics request asks for it.
type TopicRequest struct {
	Name string
	// Partitions and ReplicationFactor: -1 for the broker's defaults;
	// both -1 with Assignments.
	Partitions        int32
	ReplicationFactor int16
	Assignments       []Assignment
}

// NewTopic checks a CreateTopics topic against img and returns the
// command creating it (without its configs), with numPartitions and
// defaultReplicationFactor (the effective num.partitions and
// default.replication.factor) for the counts given as -1. The name must
// be valid already (config.CheckTopicName).
func (img *Image) NewTopic(r TopicRequest, numPartitions int32, defaultReplicationFactor int16) (CreateTopic, error) {
	if ReservedTopic(r.Name) {
		return CreateTopic{}, refuse(ErrInternalTopic, "topic name %q is reserved for internal use", r.Name)
	}
	if _, ok := img.Topics[r.Name]; ok {
		return CreateTopic{}, refuse(ErrTopicExists, "topic %q already exists", r.Name)
	}
	cmd := CreateTopic{Name: r.Name}
	if len(r.Assignments) > 0 {
		if r.Partitions != -1 || r.ReplicationFactor != -1 {
			return CreateTopic{}, refuse(ErrInvalidRequest, "a replica assignment was given with a partition count or replication factor; give -1 for both")
		}
		assignments, err := orderAssignments(img, r.Assignments)
		if err != nil {
			return CreateTopic{}, err
		}
		cmd.Assignments = assignments
		cmd.Partitions = int32(len(assignments))
		cmd.ReplicationFactor = int16(len(assignments[0]))
		return cmd, nil
	}
	cmd.Partitions = r.Partitions
	if cmd.Partitions == -1 {
		cmd.Partitions = numPartitions
	}
	if cmd.Partitions <= 0 {
		return CreateTopic{}, refuse(ErrInvalidPartitions, "number of partitions must be at least 1 (or -1 for num.partitions), got %d", r.Partitions)
	}
	cmd.ReplicationFactor = r.ReplicationFactor
	if cmd.ReplicationFactor == -1 {
		cmd.ReplicationFactor = defaultReplicationFactor
	}
	if cmd.ReplicationFactor <= 0 {
		return CreateTopic{}, refuse(ErrInvalidReplicationFactor, "replication factor must be at least 1 (or -1 for default.replication.factor), got %d", r.ReplicationFactor)
	}
	if n := len(img.Brokers); int(cmd.ReplicationFactor) > n {
		return CreateTopic{}, refuse(ErrInvalidReplicationFactor, "replication factor %d is larger than the number of registered brokers (%d)", cmd.ReplicationFactor, n)
	}
	return cmd, nil
}

// orderAssignments turns CreateTopics replica assignments, which name
// their partition, into one replica list per partition 0..n-1, checking
// that every partition is given once and every list is valid and of the
// same length.
func orderAssignments(img *Image, in []Assignment) ([][]int32, error) {
	out := make([][]int32, len(in))
	for _, a := range in {
		if a.Partition < 0 || int(a.Partition) >= len(in) {
			return nil, refuse(ErrInvalidReplicaAssignment, "partitions must be numbered 0 to %d, got %d", len(in)-1, a.Partition)
		}
		if out[a.Partition] != nil {
			return nil, refuse(ErrInvalidReplicaAssignment, "partition %d is assigned twice", a.Partition)
		}
		if err := checkReplicaList(img, a.Partition, a.Replicas); err != nil {
			return nil, err
		}
		out[a.Partition] = a.Replicas
	}
	for i, replicas := range out {
		if len(replicas) != len(out[0]) {
			return nil, refuse(ErrInvalidReplicaAssignment, "partition %d has %d replicas, partition 0 has %d", i, len(replicas), len(out[0]))
		}
	}
	return out, nil
}

// NewPartitions checks a CreatePartitions topic against img: the topic
// exists and is not internal, count grows it, and assignments (nil: the
// controller places them) name one valid replica list per new partition
// with the topic's replication factor. It returns the topic's current
// partition count. The name must be valid already.
func (img *Image) NewPartitions(topic string, count int32, assignments [][]int32) (current int32, err error) {
	t := img.Topics[topic]
	if t == nil {
		return 0, refuse(ErrUnknownTopic, "topic %q does not exist", topic)
	}
	if t.IsInternal() {
		return 0, refuse(ErrInternalTopic, "topic %q is internal; its partition count cannot change", topic)
	}
	current = int32(len(t.Partitions))
	switch {
	case count == current:
		return 0, refuse(ErrInvalidPartitions, "topic %q already has %d partitions", topic, current)
	case count < current:
		return 0, refuse(ErrInvalidPartitions, "topic %q has %d partitions; %d would not be an increase (partitions cannot be removed)", topic, current, count)
	}
	replicationFactor := len(t.Partitions[0].Replicas)
	if assignments != nil {
		if added := count - current; len(assignments) != int(added) {
			return 0, refuse(ErrInvalidReplicaAssignment, "%d partitions are added but %d assignments were given", added, len(assignments))
		}
		for i, replicas := range assignments {
			p := current + int32(i)
			if err := checkReplicaList(img, p, replicas); err != nil {
				return 0, err
			}
			if len(replicas) != replicationFactor {
				return 0, refuse(ErrInvalidReplicaAssignment, "partition %d has %d replicas, the topic's replication factor is %d", p, len(replicas), replicationFactor)
			}
		}
	} else if n := len(img.Brokers); replicationFactor > n {
		return 0, refuse(ErrInvalidReplicationFactor, "the topic's replication factor %d is larger than the number of registered brokers (%d)", replicationFactor, n)
	}
	return current, nil
}

// TopicToDelete finds the topic a DeleteTopics entry names (by name when
// name is not nil, else by id) and checks that clients may delete it. It
// returns the topic found even when deletion is refused. A name must be
// valid already.
func (img *Image) TopicToDelete(name *string, id TopicID) (*Topic, error) {
	var topic *Topic
	if name != nil {
		if topic = img.Topics[*name]; topic == nil {
			return nil, refuse(ErrUnknownTopic, "topic %q does not exist", *name)
		}
	} else if topic = img.TopicsByID[id]; topic == nil {
		return nil, refuse(ErrUnknownTopicID, "no topic has id %s", id)
	}
	if topic.IsInternal() {
		return topic, refuse(ErrInternalTopic, "topic %q is internal and cannot be deleted", topic.Name)
	}
	return topic, nil
}
