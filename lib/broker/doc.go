// Package broker answers the Kafka APIs of one mq node: it maps each
// request onto the parts lib/node gives it in a Config (the controller,
// the hosted partitions of lib/partition, the connections to the other
// brokers, the group, transaction and share coordinators of
// lib/coordinator's Set, the authorizer, the producer IDs).
// docs/ARCHITECTURE.md puts it in the whole.
//
// One file per API family:
//
//   - produce.go (Produce), fetch.go (Fetch, with fetchsession.go's
//     KIP-227 sessions for followers and consumers), offsets.go
//     (ListOffsets, DeleteRecords), epochs.go (OffsetForLeaderEpoch),
//     tiered.go (tiered storage on those paths, calling lib/partition's
//     remote.go: a consumer's fetch below the local log start read from
//     the remote store in the Reply, OFFSET_MOVED_TO_TIERED_STORAGE to
//     followers there, ListOffsets EARLIEST and by timestamp into remote
//     data),
//     metadata.go (Metadata, whose automatic creation makes at most
//     auto.create.topics.max.per.request topics, and InitProducerId),
//     hints.go (KIP-951 leader
//     hints on NOT_LEADER_OR_FOLLOWER and FENCED_LEADER_EPOCH);
//   - txn_leader.go (WriteTxnMarkers: the transaction coordinator's
//     markers, written by replica.Partition.WriteMarker as acks=all
//     writes and answered once they reached the high-water mark, then Config.GroupTxnCompleted for
//     __consumer_offsets; DescribeProducers, KIP-664), txn_verify.go
//     (TxnVerifier: a transactional produce's first batch on a partition
//     is checked with the coordinator, AddPartitionsToTxn v4, before the
//     append, KIP-890; at Produce v12+, transaction.version 2, the
//     coordinator adds the partition instead, verification enabled or
//     not, asked again for up to a second while the coordinator answers
//     CONCURRENT_TRANSACTIONS (the markers of the producer's last
//     transaction on their way), and a batch of a newer epoch than the
//     partition's open transaction asks again). A Fetch or ListOffsets
//     with isolation level 1
//     (read_committed) reads below the last stable offset, and a fetch
//     then lists the aborted transactions of what it returns;
//   - admin.go (CreateTopics, DeleteTopics, CreatePartitions: the
//     request's checks are the controller image's (Image.NewTopic,
//     NewPartitions, TopicToDelete) and lib/config's (TopicOverrides,
//     the caps max.partitions.per.request and max.partitions);
//     validate_only runs the command's own checks too), configs.go
//     (DescribeConfigs, AlterConfigs, IncrementalAlterConfigs over
//     config.Layers and config's alterations),
//     elect.go (ElectLeaders, DescribeQuorum), cluster.go
//     (DescribeCluster), logdirs.go (DescribeLogDirs), reassign.go
//     (AlterPartitionReassignments, ListPartitionReassignments),
//     users.go (DescribeUserScramCredentials, AlterUserScramCredentials:
//     the SCRAM credentials SASL checks, kept in the controller image as
//     salted keys only; the salted password a client sends is turned
//     into StoredKey and ServerKey and dropped);
//   - groups.go, groups_offsets.go (the classic group and offset APIs
//     onto lib/group's Coordinator on __consumer_offsets, Config's
//     Coordinators.Groups (groups_store.go); a group id that is a
//     share group here is refused to JoinGroup and OffsetCommit);
//   - share.go, share_fetch.go, share_offsets.go (KIP-932 share groups
//     onto lib/queue's Groups and Leader, the heartbeats through
//     lib/coordinator's Set.ShareHeartbeat (which refuses a consumer
//     group's id), with their state in
//     __share_group_state and their dead letters through
//     lib/coordinator; the batches they read through lib/partition's
//     ShareSource; share_config.go the group configs of lib/config);
//   - txn.go (InitProducerId with a transactional id, AddPartitionsToTxn
//     from clients and, v4+, from partition leaders verifying
//     (KIP-890), AddOffsetsToTxn, EndTxn, DescribeTransactions,
//     ListTransactions onto lib/txn's Coordinator, with its records in
//     __transaction_state through lib/coordinator; TxnOffsetCommit onto
//     lib/group's, after txn_verify.go asked the transaction coordinator
//     that the group's partition is in the transaction, KIP-890);
//     lib/txn's MarkerWriter sends the markers of ended transactions
//     over Config.TxnPeers (lib/peer's Nodes): WriteTxnMarkers to each
//     partition's leader, retried until each has its marker;
//   - damage.go (mq's SkipDamaged and Refetch, lib/kafkaext, onto
//     partition.Manager.SkipDamaged and replica.Partition.GrantRefetch);
//   - acls.go (DescribeAcls, CreateAcls, DeleteAcls onto the
//     controller's image); unregister.go (UnregisterBroker onto
//     controller.UnregisterBroker).
//
// # Authorization
//
// Handle authorizes every request before its handler runs, in one place:
// authorize.go's access table says, by API key, which operations on which
// resources a request needs, as Kafka asks them (Produce WRITE on each
// topic; Fetch READ, or CLUSTER_ACTION with a replica id; ListOffsets and
// OffsetForLeaderEpoch DESCRIBE; CreateTopics CREATE on the cluster or
// each topic; DeleteTopics and DeleteRecords DELETE; CreatePartitions
// ALTER; the config APIs DESCRIBE_CONFIGS or ALTER_CONFIGS on the topic,
// group or cluster; the group APIs READ, DESCRIBE or DELETE on the group,
// and READ or DESCRIBE on the topics of offsets; share groups alike;
// FindCoordinator DESCRIBE on the group or transactional id; the
// transaction APIs WRITE on the transactional id (and READ on the group of
// AddOffsetsToTxn and TxnOffsetCommit, WRITE on each topic of
// AddPartitionsToTxn, answered per partition), DescribeTransactions
// DESCRIBE on each id, answered per id by its handler, ListTransactions
// listing only the ids the principal may DESCRIBE; the brokers' own
// AddPartitionsToTxn v4+ and WriteTxnMarkers CLUSTER_ACTION; the cluster
// APIs DESCRIBE or ALTER on the cluster, the ACL and SCRAM APIs included;
// Refetch CLUSTER_ACTION; SkipDamaged ALTER; WriteTxnMarkers
// CLUSTER_ACTION; DescribeProducers READ on each topic, checked by its
// handler). auth.Authorizer decides each with the ACLs of the current
// image. A request naming any resource it may not use is answered whole
// with TOPIC_, GROUP_, CLUSTER_ or TRANSACTIONAL_ID_AUTHORIZATION_FAILED
// on every resource of the answer (denied.go), where Kafka would serve the
// allowed ones beside the refused. Produce and Fetch, whose requests
// commonly name many topics, check their topics themselves, one by one
// (produce.go, fetch.go's lookup), and serve the allowed ones as Kafka
// does. Metadata hides the topics a principal may not describe from a
// listing of all, refuses them by name, and auto-creates only with CREATE
// on the cluster or topic; ListGroups lists only the describable groups
// without DESCRIBE on the cluster, ListTransactions the describable
// transactional ids; InitProducerId asks WRITE on its transactional id, or
// without one IDEMPOTENT_WRITE on the cluster or WRITE on some topic
// (KIP-679).
//
// A super user's request, and every request while the image has no ACL
// and allow.everyone.if.no.acl.found holds, is let through after two
// lookups and no allocation, so the produce and fetch paths cost nothing
// more unless ACLs exist.
//
// Internal topics (__consumer_offsets, __share_group_state,
// __transaction_state) are never
// written by clients, whatever the ACLs: a Produce to one, or a
// DeleteRecords, is INVALID_TOPIC_EXCEPTION, as Kafka answers, unless it
// is a coordinator's remote write (marked kafkaext.CoordinatorWrite, from
// a principal with CLUSTER_ACTION).
//
// Every answer that names brokers' addresses (Metadata, DescribeCluster,
// FindCoordinator, the KIP-951 endpoints of Produce, Fetch and
// ShareFetch) gives them as seen from the listener the request came on
// (endpoint.go, forListener; controller.Broker.ForScheme), as Kafka does:
// a client on an ssl:// listener gets each broker's ssl:// listener, any
// other client the advertised address.
//
// A Fetch with a replica id, and a Refetch, speak as a follower. With
// security.inter.broker.protocol SSL they are served only on a
// connection whose client certificate's principal is the one the image
// binds to that replica's node ID (controller.Image.NodePrincipals):
// anything else is answered CLUSTER_AUTHORIZATION_FAILED, unread. Either
// way the partition serves them only to one of its followers
// (replica.ErrNotReplica: NOT_LEADER_OR_FOLLOWER), so a fetch as an
// unknown replica never reads past the high-water mark nor moves it.
// A Fetch v15 whose ReplicaState carries a broker epoch older than the
// image's registration of that broker (KIP-903: a process from before
// the broker registered again, which may have lost its log) is refused
// STALE_BROKER_EPOCH, unread; a newer one (this node's image is behind)
// is served.
//
// broker.go registers every family's APIs and versions, which ApiVersions
// lists, with the transaction.version feature (KIP-1022) finalized at the
// setting's level (txn.go): at 2 Produce v12, EndTxn v5 and
// TxnOffsetCommit v5 are served and clients speak KIP-890 part 2; at 1
// those APIs stop a version below, and clients keep the earlier protocol. errors.go is the one place where internal errors become Kafka
// codes: one table per internal error domain (the broker's own,
// lib/partition, lib/record, lib/log, lib/replica, lib/controller,
// lib/config, lib/group, lib/queue, lib/coordinator, context), and per API
// family a list of those tables with its own rows first (produceError,
// fetchError, shareError, …). A test finds every sentinel error of the
// packages below in their sources and fails on one no table names.
//
// A follower's Fetch of a partition held to the replication throttle
// (replica.Partition.LeaderThrottled: named in its topic's
// leader.replication.throttled.replicas and the follower out of the ISR)
// reads at most what is left of the allowance the read reserved from the
// leader Quota (a replica.Share of partition.Manager.ReplicationQuotas),
// and nothing while it has none; the other partitions of the fetch and
// every consumer are served as usual. The read settles with the Quota
// before the response goes out, so fetches served at once never share an
// allowance. A fetch that would wait reads again when the Quota gives,
// before its max wait. An acks=all Produce that had to wait for the
// high-water mark counts the time from its appends to the answer in
// partition.Manager.CommitLatency, the signal of the auto throttle
// (replication.throttle.auto.target.ms).
//
// Produce checks each batch's structure and CRC without decoding its
// records, except for a compacted topic (cleanup.policy with compact),
// whose batches are decoded to refuse records without a key, as Kafka
// does: INVALID_RECORD, with KIP-467's per-record errors from Produce v8.
//
// # Goroutines
//
// The Broker has none of its own beyond request handling:
//
//   - A connection's reader goroutine (lib/server) calls Handle, one request
//     at a time, in order. Whatever must happen in request order happens
//     there: produce validates and appends; fetch reads the first time;
//     JoinGroup and SyncGroup register with the coordinator. A handler must
//     not block on anything that waits for another request.
//   - The connection's writer goroutine calls the Reply a handler returns:
//     acks=all waits for the high-water mark there, a fetch long-polls
//     there (on the partitions' Changed channels, up to MaxWaitMillis),
//     JoinGroup and SyncGroup wait for the rebalance, a ShareFetch for
//     records and for its state writes. Replies select on the connection's
//     context, so a closed connection ends them.
//
// InitProducerId takes its IDs from Config.ProducerIDs
// (controller.ProducerIDs, which the transaction coordinator takes its
// IDs from too), whose prefetch lib/node runs from the
// broker's registration on: with a block at hand it needs no controller
// round trip, and new idempotent producers start while the controller
// quorum is lost, until the blocks run out. Then it answers the
// retriable COORDINATOR_NOT_AVAILABLE while the controller cannot be
// reached.
//
// The parts run their own, started and stopped by lib/node, which built
// them: lib/partition's loops (which call the group and transaction
// coordinators' ownership syncs after each image: coordinator.Topic's
// FollowLeadership), lib/group's and lib/txn's timers and lib/txn's
// marker goroutines, lib/coordinator's remote-write senders. The Broker
// has no Close: once the server drained, lib/node closes the parts. Handlers that need a topic they just created apply the current
// image themselves (partition.Manager.Refresh).
//
// # Locks
//
// The Broker holds none across calls into its parts; each part's doc
// gives its own order. fetchSessions.mu, then a fetchSession's mu, are
// taken with no other lock held and never across I/O.
//
// # Pooled state
//
// The produce and fetch paths take their per-request state from pools
// (producing, fetch) and recycle the request (server.Request.Recycle): a
// handler on those paths must not keep any byte field or string of the
// request after its response is written. State kept longer (group
// metadata, assignments) is copied out of the request first.
package broker
