// Package group is the consumer group coordinator of mq: the classic
// group protocol (JoinGroup, SyncGroup, Heartbeat, LeaveGroup) for eager
// and cooperative clients and static members (KIP-345), and committed
// offsets (OffsetCommit, OffsetFetch, OffsetDelete), kept as records in the
// internal topic __consumer_offsets.
//
// A Coordinator serves the groups of the partitions of __consumer_offsets
// its node leads: a group lives in partition PartitionFor(group, n),
// Kafka's abs(javaHashCode(group)) % n, so a client's FindCoordinator goes
// to that partition's leader. lib/coordinator (Topic.FollowLeadership)
// loads a partition when the node becomes its leader (groups answer
// ErrLoadInProgress until replay is done) and unloads it when the node
// stops being leader; the partitions owned are an
// owned.Partitions (lib/coordinator/owned), as lib/txn's.
//
// # Groups
//
// Each group is a state machine (see State): members join, the join phase
// completes when all known members have joined again (or at the longest
// rebalance timeout, dropping the rest; a new group first waits
// InitialRebalanceDelay, extended as members keep coming, except for a
// first member that stays alone for InitialRebalanceAlone: mq's rule for
// the lone consumer, which keeps one rebalance for members started
// together), the leader receives every member's metadata and
// sends the assignment with its SyncGroup, and the group is Stable until a
// member joins with new metadata, leaves, or misses its session timeout.
// Join and Sync return channels: their answers come when the rebalance
// gets there, which is how the broker delays JoinGroup and SyncGroup
// responses. Every timeout runs on the injected clock.Clock; tests use
// a clock.Manual and testdata/*.txt (TestDataDriven) to step through them.
//
// A static member that restarts (a join without member id under a known
// group.instance.id) gets a new member id and its old assignment without
// a rebalance, unless its protocols change the protocol the group would
// select; its old incarnation is fenced (ErrFencedInstanceID).
//
// # Records
//
// Commits are appended to the group's partition (one batch per request,
// through the Store); group metadata is written when a generation becomes
// Stable or the group becomes Empty, and tombstones when offsets or groups
// are deleted or expire. What a record says becomes visible once its
// batch is durable (Pending.Wait): a commit is answered then, the leader's
// SyncGroup makes the group Stable then, and a deleted group answers
// ErrCoordinatorUnavailable until then. A write that does not become
// durable changes nothing (its request gets the error); writes of one key
// that become durable out of order leave the later record's value, as
// replay does. Unload answers the requests still waiting with
// ErrNotCoordinator. records.go
// documents the formats (Kafka's own layouts). Load replays a partition
// from its start: the last record of a key wins and tombstones delete, so
// replay is correct whether or not the log was compacted (compaction only
// makes replay shorter). A replayed group
// has its offsets, protocol type and generation, and, as in Kafka, the
// members its last group record holds: that is how a coordinator that
// takes over after a failover keeps a group going. A record with members
// is written only for a stable generation, so the group comes back Stable
// with the same member ids, leader and assignments, each member's session
// starting at load: members go on heartbeating and committing with their
// generation, and one that does not come back within its session timeout
// expires and the others rebalance. A record without members (the group
// became Empty) loads Empty; one with members that is not a stable
// generation (no protocol, a leader that is not a member: no writer makes
// one) loads without them, and they join again on ErrUnknownMemberID.
// Records of every value version load so (versions 0 to 2 are Kafka's
// older layouts: no rebalance timeout, which then is the session
// timeout, or no instance ids).
//
// # Transactions
//
// TxnCommitOffsets (TxnOffsetCommit) appends a transactional batch of the
// producer, as Kafka does, and holds its offsets as that producer's
// pending offsets, not shown by FetchOffsets (HasPendingOffsets tells
// OffsetFetch's require_stable). The partition leader's WriteTxnMarkers
// handler appends the transaction's marker to the partition and then
// calls CompleteTransaction: a commit makes the pending offsets the
// group's, an abort drops them. Replay does the same from the batches'
// producer ids and the markers (Store.Replay's Entry).
//
// Offsets of a group that has been Empty for OffsetsRetention, and were
// committed at least that long ago, are deleted every
// RetentionCheckInterval; an empty group left without offsets goes away.
// Offsets of a topic deleted from the cluster are deleted when the node
// applies the deletion (DeleteTopicOffsets, called by lib/coordinator),
// in the groups it has loaded, as Kafka does.
//
// All methods of Coordinator are safe for concurrent use. One mutex
// guards all groups; Store appends happen under it, which orders records
// like the state changes they record. Waits for durability happen
// outside it: a request that waits (CommitOffsets, DeleteOffsets,
// DeleteGroup) releases it meanwhile, and the records nobody waits for
// inline (group metadata, expiry) are waited for by a goroutine each, so
// a slow replica stalls only the groups that write to it, and only their
// writes.
package group
