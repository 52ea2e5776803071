// Package broker answers the Kafka APIs for one mq node, on the parts
// lib/node gives it in a Config: the controller and the hosted partitions
// (lib/partition). docs/ARCHITECTURE.md puts it in the whole.
//
// The Broker is a thin mapping from Kafka requests onto the parts below
// it, one file per API family: produce.go, fetch.go, offsets.go
// (ListOffsets), epochs.go (OffsetForLeaderEpoch, for followers and for
// consumers' truncation detection), metadata.go (Metadata,
// InitProducerId), admin.go and configs.go (topics, configs,
// DeleteRecords), groups*.go (the group APIs onto lib/group), logdirs.go
// (DescribeLogDirs), fetchsession.go (the leader's KIP-227 fetch sessions
// for followers), damage.go (mq's SkipDamaged and Refetch, lib/kafkaext). hints.go holds the KIP-951 current-leader
// hints that Produce and Fetch add to NOT_LEADER_OR_FOLLOWER and
// FENCED_LEADER_EPOCH answers. errors.go is the one place where internal
// errors become Kafka codes: one table per internal error domain (the
// broker's own, lib/record, lib/log, lib/replica, lib/controller,
// lib/config, lib/group, context), and per API family a list of those
// tables with its own rows first (produceError, fetchError, …). A test
// finds every sentinel error of the packages below in their sources and
// fails on one no table names.
//
// # Goroutines
//
//   - A connection's reader goroutine (lib/server) calls Handle, one request
//     at a time, in order. Whatever must happen in request order happens
//     there: produce validates and appends; fetch reads the first time;
//     JoinGroup and SyncGroup register with the coordinator. A handler must
//     not block on anything that waits for another request.
//   - The connection's writer goroutine calls the Reply a handler returns:
//     acks=all waits for the high-water mark there, a fetch long-polls
//     there (on the partitions' Changed channels, up to MaxWaitMillis),
//     JoinGroup and SyncGroup wait for the rebalance there. Replies select
//     on the connection's context, so a closed connection ends them.
//   - lib/partition's loops apply the controller's images to the hosted
//     partitions, run the replica fetchers, the ISR proposals and the log
//     tasks; after each image they call the group coordinator's
//     syncOwnership (partition.Manager.AfterApply).
//   - Handlers that need a topic they just created apply the current
//     image themselves (partition.Manager.Refresh).
//   - lib/group runs its timers (sessions, rebalances, offset retention) on
//     its Clock and replays a partition of __consumer_offsets in a goroutine
//     of its own when this node starts leading it (LoadAsync).
//   - The controller runs hashicorp/raft's goroutines.
//
// # Locks, in the order they may be taken
//
//  1. groupCoordinator.createMu: one creation of __consumer_offsets at a
//     time; held across the controller's CreateTopic and the refresh after.
//  2. lib/partition's locks (Manager.syncMu, then Manager.mu): the
//     refresh after a creation takes them.
//
// Below them come the locks of the parts: lib/group's coordinator mutex
// (it appends commits to __consumer_offsets under it, through offsetsStore:
// replica and log locks after it; the wait for the in-sync replicas
// happens without it), lib/replica's stateMu then mu, and
// lib/log's (see Log.mu). producerIDBlock.mu is taken alone, across a Raft
// round trip for a new block of producer IDs. fetchSessions.mu, then a
// fetchSession's mu, are taken with no other lock held and never across
// I/O.
//
// # Pooled state
//
// The produce and fetch paths take their per-request state from pools
// (producing, fetch) and recycle the request (server.Request.Recycle): a
// handler on those paths must not keep any byte field or string of the
// request after its response is written. State kept longer (group
// metadata, assignments) is copied out of the request first.
package broker
