// Package replica holds the state of one partition replica on this node:
// its log, its role (leader or follower), the leader epoch, the replica set
// and the in-sync replicas (ISR), the high-water mark, and — on a leader —
// each follower's fetch position.
//
// The same code serves a single node and a cluster. A single mqd is the
// leader of every partition with ISR = {self}: after each append the
// high-water mark moves to the log end offset. With followers, the
// high-water mark is the smallest log end offset among the ISR, as learned
// from the followers' fetch offsets (RecordFollowerFetch).
//
// # Using a Partition
//
//	l, err := log.Open(dir, logConfig, log.Options{...})          // the partition's log
//	p := replica.New(replica.Config{Topic: "t", Partition: 0, NodeID: 1, MinInsyncReplicas: 2}, l)
//	err = p.Become(epoch, leader, replicas, isr) // from the controller's image; epochs never go back
//	res, err := p.Append(batch, acks)            // leader only; on the connection's reader goroutine
//	err = p.WaitHighWatermark(ctx, res.LastOffset) // acks=all: until HW > LastOffset
//	r, info, err := p.Read(offset, maxBytes, replicaID)
//	defer r.Release()
//	<-p.Changed()                                // fetch long-poll: closed at the next HW or log end advance
//	p.SetMinInsyncReplicas(n)                    // a topic config change
//	err = p.Close()                              // closes the log too
//
// Example (in example_test.go) runs the single-node case.
//
// # Invariants
//
//   - The high-water mark never decreases while this replica is leader, never
//     exceeds the log end offset known to be on every ISR member, and is
//     never below the log start offset.
//   - The leader epoch never decreases: Become with an older epoch is refused
//     (ErrStaleLeaderEpoch) and changes nothing.
//   - Consumers (replica id < 0) never read at or above the high-water mark.
//   - Appends, Become, SetMinInsyncReplicas and Close may be called concurrently from
//     any goroutine; every method of Partition is safe for concurrent use.
//     Appends are serialized by the log; Become waits for appends in flight,
//     so no batch is appended under an epoch the partition already left.
//
// Waiting is done on channels, never timers: Changed returns a channel
// that is closed the next time the high-water mark or the log end offset
// advances, the role or leader epoch changes, or the partition closes.
// WaitHighWatermark (acks=all) and fetch long-polls are built on it.
//
// Not yet done here: the follower side (fetching from the leader, truncating
// with OffsetForLeaderEpoch) and a high-water mark checkpoint; a replica
// that becomes leader starts from the log start offset and, with
// ISR = {self}, moves at once to the log end.
package replica
