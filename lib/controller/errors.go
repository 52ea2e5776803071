package controller

import "errors"

// Errors returned by the Controller's commands and by the FSM. Callers test
// them with errors.Is; the FSM wraps them with detail ("%w: ...").
var (
	ErrTopicExists              = errors.New("controller: topic already exists")
	ErrUnknownTopic             = errors.New("controller: unknown topic")
	ErrUnknownPartition         = errors.New("controller: unknown partition")
	ErrInvalidPartitions        = errors.New("controller: invalid number of partitions")
	ErrInvalidReplicationFactor = errors.New("controller: invalid replication factor")
	ErrInvalidReplicaAssignment = errors.New("controller: invalid replica assignment")
	ErrInvalidPartitionState    = errors.New("controller: invalid leader or in-sync replica set")
	ErrStaleLeaderEpoch         = errors.New("controller: stale leader epoch")
	ErrInvalidConfig            = errors.New("controller: invalid config change")
	ErrInvalidBroker            = errors.New("controller: invalid broker registration")
	ErrInvalidProducerIDCount   = errors.New("controller: invalid producer id block size")
	ErrInvalidACL               = errors.New("controller: invalid ACL")
	ErrUnknownTopicID           = errors.New("controller: unknown topic id")
	// ErrInvalidRequest: a client's request whose fields contradict each
	// other (a replica assignment with a partition count, say).
	ErrInvalidRequest = errors.New("controller: invalid request")
	// ErrInternalTopic: clients may not create a topic of a reserved
	// name, nor delete or repartition an internal topic.
	ErrInternalTopic = errors.New("controller: internal topic")

	// ErrStaleBrokerEpoch refuses a heartbeat, fencing or shutdown of a
	// broker epoch that is not the broker's current registration (or of a
	// broker that is not registered): the broker must register again.
	ErrStaleBrokerEpoch = errors.New("controller: stale broker epoch")
	// ErrFencedLeaderEpoch refuses an AlterPartition whose leader epoch is
	// not the partition's current one.
	ErrFencedLeaderEpoch = errors.New("controller: fenced leader epoch")
	// ErrInvalidUpdateVersion refuses an AlterPartition whose partition
	// epoch is not the partition's current one: the ISR changed meanwhile.
	ErrInvalidUpdateVersion = errors.New("controller: stale partition epoch")
	// ErrNotLeader refuses an AlterPartition from a broker that is not the
	// partition's leader.
	ErrNotLeader = errors.New("controller: not the partition leader")
	// ErrIneligibleReplica refuses an AlterPartition that adds to the ISR a
	// broker that is fenced, shutting down or not registered.
	ErrIneligibleReplica = errors.New("controller: ineligible replica")
	// ErrElectionNotNeeded: the partition already has the leader the
	// election asked for (ElectLeaders).
	ErrElectionNotNeeded = errors.New("controller: election not needed")
	// ErrPreferredLeaderNotAvailable: the preferred replica is not alive
	// or not in the ISR (ElectLeaders, preferred).
	ErrPreferredLeaderNotAvailable = errors.New("controller: preferred leader not available")
	// ErrEligibleLeadersNotAvailable: no replica of the partition is alive
	// (ElectLeaders, unclean).
	ErrEligibleLeadersNotAvailable = errors.New("controller: eligible leaders not available")
	// ErrNoReassignmentInProgress: a cancel named a partition that is not
	// being reassigned (AlterReassignments).
	ErrNoReassignmentInProgress = errors.New("controller: no reassignment in progress")
	// ErrVotersMismatch: this node's voter set (--voters) differs from the
	// one stored in its Raft state, or from a peer's.
	ErrVotersMismatch = errors.New("controller: voters differ")
	// ErrNodeNotAuthorized: a request on the Raft port came from a
	// certificate that may not speak for the node it names, or asked
	// what only the active controller itself may propose (with
	// Config.TLS); or a BindNode would change a binding.
	ErrNodeNotAuthorized = errors.New("controller: not authorized for this node")

	// ErrNotController is returned by a command when no Raft leader could
	// be reached before its context ended, or when the leader lost its
	// leadership (or the connection to it broke) while committing: then
	// the command may or may not have been committed.
	ErrNotController = errors.New("controller: not the active controller")
	// ErrUnknownCommand is the FSM's answer to a record whose command type
	// or version it does not know. The record is refused, never guessed at.
	ErrUnknownCommand = errors.New("controller: unknown command type or version")
	// ErrInvalidCommand is the FSM's answer to a record of a known type and
	// version whose body does not decode.
	ErrInvalidCommand = errors.New("controller: malformed command")
	// ErrBrokerInUse refuses to unregister a broker that is alive or
	// still hosts a replica.
	ErrBrokerInUse = errors.New("controller: broker in use")
	// ErrBrokerNotRegistered: UnregisterBroker named a node the cluster
	// does not know (neither registered, bound, nor in Raft).
	ErrBrokerNotRegistered = errors.New("controller: broker not registered")
	// ErrVoter refuses to remove a voter of the controller quorum: the
	// voters are fixed by --voters.
	ErrVoter = errors.New("controller: node is a voter")
	// ErrCommandTooLarge refuses a proposal whose encoded command is over
	// maxCommand bytes (16 MiB), before it reaches the log: every entry
	// must fit in a Raft message its followers accept.
	ErrCommandTooLarge = errors.New("controller: command too large")
	// ErrInvalidSnapshot is returned by Restore for bytes that are not a
	// snapshot this version can read.
	ErrInvalidSnapshot = errors.New("controller: invalid snapshot")
	// ErrClosed is returned by commands after Close.
	ErrClosed = errors.New("controller: closed")
)
