// Package queue is the share-partition of KIP-932 share groups: one
// group's view of one topic partition, consumed as a queue. Many members
// may read a partition at once; each record is acquired by one member at
// a time, under a lock, and acknowledged one by one.
//
// A Partition is a pure, deterministic state machine. It never reads the
// log or the clock: the broker passes the high-water mark and the time
// into every call (lib/broker's share.go owns the locking, the log reads
// and the persistence). Its state is
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
