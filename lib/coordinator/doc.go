// Package coordinator is the runtime of the coordinators whose state
// lives in compacted internal topics: lib/group's classic group
// coordinator on __consumer_offsets, lib/queue's share-partitions on
// __share_group_state, lib/txn's transaction coordinator on
// __transaction_state. One Topic per internal topic:
//
//	t := coordinator.New(coordinator.Config{Name: "__consumer_offsets", Partitions: 50, ...})
//	ct, err := t.Ensure(ctx)          // created (compacted, internal) on first use
//	t.FollowLeadership(groupCoord)    // load what this node leads, unload what it no longer does
//	w, err := t.Append(p, batch)      // under the caller's mutex: no wait for the followers
//	err = w.Wait(ctx)                 // without it: until the in-sync replicas have the batch
//	err = t.Replay(p, fn)             // every record of a partition led here, in offset order
//	w, err = t.Write(ctx, p, batch)   // any partition: here, or queued to its leader
//	err = t.Read(ctx, p, fn)          // any partition: here, or fetched from its leader
//
// A Topic reaches another node at the address Config.Hosted's PeerAddr
// gives, as every connection between brokers does: its ssl:// listener
// when the brokers speak TLS (security.inter.broker.protocol SSL, and
// Config.Peers a TLS pool), else its advertised host and port.
//
// Topic implements group.Store (Append, Replay: every record with its
// batch's producer, and the transaction markers, so that offsets
// committed in a transaction count from their commit marker on) and
// queue.Store (PartitionCount, Write, Read); TxnStore is its view as
// txn.Store.
//
// NewGroups starts lib/group's Coordinator on __consumer_offsets: the
// topic's partition count (an existing topic's own), the coordinator's
// Store, its loading of what this node leads once the topic is created
// here, FollowLeadership, and the deletion of a deleted topic's offsets
// (group.DeleteTopicOffsets) after each image that deletes one: a topic
// gone, or its name held by a new topic ID. NewTransactions does the same for lib/txn's
// Coordinator on __transaction_state; NewShares starts lib/queue's Leader
// on __share_group_state, reading the partitions led here through
// partition.ShareSource.
//
// NewSet starts all of one node's coordinators from its settings, with
// lib/queue's share groups (membership, in memory) and DeadLetters; it is
// what lib/node builds and gives lib/broker, and what lib/broker's tests
// build the same way. Set.ShareHeartbeat keeps one group id to one group
// type across lib/group's and lib/queue's coordinators (a share group's
// heartbeat for a consumer group's id is ErrConsumerGroupID), and
// Set.CheckShareGroupEmpty refuses a change to the offsets of a share
// group with members (ErrShareGroupNotEmpty). Set.Close stops them all;
// lib/node calls it once the server drained, before the partitions
// close.
//
// Locate answers FindCoordinator for a Keyed coordinator on a Topic: the
// leader of the key's partition, waiting within the caller's context for
// a leader found gone to be replaced, and, on that leader, for the key's
// partition to load.
//
// The coordinators keep which partitions they own, and their replays, in
// the sub-package owned (below them, where this package is above them).
//
// DeadLetters writes share groups' dead letters (lib/queue's
// LeaderConfig.DeadLetter) to their dead-letter topics, ordinary topics
// it creates with the broker's defaults on first use: the same append
// and wait for the in-sync replicas, on partitions led here.
//
// # The lock rule
//
// A coordinator changes its state under its own mutex and appends the
// record of the change before letting the mutex go, so that the records
// are in the order of the changes; it waits for the record to be durable
// without the mutex, and answers its client after. Append and Write never
// block on another node or on the followers for that reason: a local
// append returns a Pending that waits for the high-water mark; a write to
// a partition led elsewhere is queued to that partition's sender, which
// sends the writes in order, one acks=all Produce at a time, and
// completes each one's Pending with its answer. A write carries whole
// values (a group's offsets, a share-partition's whole state), so each is
// sent whatever became of the one before it.
//
// # Goroutines and locks
//
// A sender goroutine runs per partition while remote writes wait; Topic.mu
// guards the senders, each sender's mu its queue, createMu one creation of
// the topic at a time (held across the controller's CreateTopic). None is
// held across I/O other than createMu. Read and Replay run on the caller's
// goroutine.
package coordinator
