// Package queue is KIP-932's share groups: topic partitions consumed as
// queues. Many members may read a partition at once; each record is
// acquired by one member at a time, under a lock, and acknowledged one by
// one. Two pure state machines, with the time passed in, and the two
// roles of a node built on them:
//
//   - Partition, one group's share-partition of one topic partition;
//   - Group, a share group's membership, member epochs and assignment;
//   - Groups, the share groups this node coordinates (the node
//     coordinating the group's partition of __consumer_offsets), in
//     memory: ShareGroupHeartbeat and ShareGroupDescribe;
//   - Leader, the share-partitions of the topic partitions this node
//     leads, with the members' share sessions: ShareFetch (Fetch),
//     ShareAcknowledge (Acknowledge), resets of an empty group (Reset).
//     It reads the log through a Source, keeps each share-partition's
//     state in a Store (lib/coordinator, __share_group_state) and writes
//     dead letters through its LeaderConfig; its lock rule is
//     lib/coordinator's: state written under the share-partition's
//     mutex, waited for without it (Leader's doc says where the
//     exceptions are and why).
//
// lib/coordinator's NewSet builds a node's Groups and Leader (the
// heartbeats go through its Set.ShareHeartbeat, which refuses a consumer
// group's id first); lib/broker maps the Kafka requests onto them and
// their errors onto Kafka codes; AcksFrom turns a request's acknowledgement
// batches into Acks, and DescribeState says what a stored state holds
// (DescribeShareGroupOffsets: its start, window counts and lag).
//
// # The share-partition
//
// A Partition never reads the log or the clock: the high-water mark and
// the time come into every call. Its state is
//
//   - the start offset (SPSO): every offset below it is done with;
//   - the end offset: every offset at or past it was never acquired;
//   - for each offset between them, its State (available, acquired,
//     acknowledged, archived), its delivery count, and while acquired
//     its holder and lock deadline.
//
// Transitions:
//
//   - Acquire takes available records, oldest first, then new offsets up
//     to the high-water mark, while the window End−Start stays within
//     MaxRecordLocks; each one's delivery count goes up by one and its
//     lock lasts LockDuration.
//   - Acknowledge applies a member's Accept (acknowledged), Release
//     (available again), Reject and Gap (archived) and Renew (a new lock),
//     all or none: an offset the member does not hold refuses the whole
//     call with ErrInvalidRecordState and changes nothing.
//   - An expired lock (Expire; every call expires first) or a member's
//     end (ReleaseMember) releases its records.
//   - A released record that has been delivered DeliveryAttemptLimit
//     times is archived instead, as is a rejected one: those are the dead
//     letters (TakeDeadLetters), each reported once.
//   - The start offset advances past the acknowledged/archived prefix.
//
// Snapshot and Restore carry the state across restarts: offsets, states
// and delivery counts, not locks (an acquired record comes back
// available, with its count).
package queue
