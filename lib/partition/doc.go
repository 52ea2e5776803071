// Package partition holds the partitions this node hosts and keeps them
// in step with the controller's image: the broker side of the cluster's
// partition lifecycle. lib/broker's handlers look partitions up here;
// lib/node builds the Manager before them and closes it after them.
//
//	m, err := partition.Open(partition.Config{Settings: s, Controller: ctrl, AwaitRegistration: true})
//	err = m.Opened(ctx)             // the partitions of the first image are open
//	m.Registered(epoch)             // this process's broker registration is in the controller
//	err = m.AwaitLeading(ctx)       // an image that lets this node lead has been applied
//	m.StartLogTasks()               // retention, compaction, scrubbing
//	h := m.Replica(topic, 0)        // the hosted replica, or nil
//	h, err := m.Leader(topic, 0)    // the replica if it leads: ErrUnknownPartition, ErrNotHosted, replica.ErrNotLeader
//	m.AfterApply(fn)                // fn runs after every image applied (a coordinator's ownership)
//	src := partition.ShareSource{h} // h as lib/queue's share-partitions read it (queue.Source)
//	ds, err := m.SkipDamaged(t, 0, -1) // give up the damaged ranges of a partition led here
//	end := partition.ListEnd(h.Offsets(), -1, true) // how far ListOffsets answers a read_committed consumer
//	err = m.Close()                 // checkpoints, flushes and closes every log; records the clean shutdown
//
// A Hosted is one replica: a lib/replica Partition over its lib/log Log in
// DATA_DIR/TOPIC-PARTITION/, with the topic config it was last given and
// its topic's traffic counters.
//
// # Applying an image
//
// One loop, follow, applies the controller's images in order. For each it
// opens the partitions the image places on this node (recovering them
// from disk; up to openWorkers at once, up to batchMax sharing one
// log.SyncBatch, each served once its batch committed), gives every
// replica the leader, epochs, replica set and ISR of the image
// (replica.Become; a replica already in that state is left alone),
// reconfigures those whose topic config changed, and closes and deletes
// those the image no longer places here (a reassignment that completed
// deletes the leaving replicas this way). A directory the checkpoints
// say another topic of the same name wrote is set aside, never deleted.
// At start, a directory of no hosted partition is deleted when the
// checkpoints say the image's topic of that name wrote it (a replica
// moved away while the node was down), and otherwise logged and kept.
// Then it hands each followed partition to the replica Fetcher of its
// leader (num.replica.fetchers per leader, lib/replica over lib/peer;
// with Config.PeerTLS, security.inter.broker.protocol SSL, over the
// leader's ssl:// listener with this node's certificate, and not at all
// from a leader without one), and calls the AfterApply hooks. Refresh applies the current image at
// once, serialized with the loop, for a handler that just created a
// topic.
//
// A lookup (Replica, Leader) never answers from an image older than the
// controller's: when the hosted replica is behind the topic the handler
// read from the controller's image (not open though the image places it
// here, or in an earlier leader epoch: a follower just elected leader),
// the lookup applies the controller's image itself when no apply is
// running, and otherwise waits up to applyWait (1 s) for the running
// one. A client told by any broker that this one leads now is answered
// at once, not sent away with NOT_LEADER_OR_FOLLOWER or
// UNKNOWN_LEADER_EPOCH to retry after its backoff. A wait that ran out
// (an image opening many partitions) is not waited again by the lookups
// after it: they get the retriable error at once.
//
// The controller's image may itself be behind the active controller's:
// a follower applies a command when the leader's next message carries
// its commit. AwaitTopics, for a Metadata request naming a topic the
// image lacks, waits up to topicWait (1 s) for this node's controller to
// apply the log as far as the active controller's reached
// (controller.CatchUp): a topic created through another broker a moment
// ago is then answered, not called unknown. TopicAt, for a request that
// carries the client's current leader epoch (Fetch, ListOffsets,
// OffsetForLeaderEpoch), waits up to applyWait for the controller's
// image of an election the client learnt of elsewhere, when its epoch is
// newer than the image's: the lookup then finds the replica led here,
// not UNKNOWN_LEADER_EPOCH.
//
// The fetchers' connections feed the node's peer.Watch, which the
// Manager has track every other broker (at its ssl:// listener with
// Config.PeerTLS, as the fetchers dial; PeerAddr gives the same address
// to the node's other connections: lib/peer's Nodes, the coordinators'
// remote reads and writes, the share-group requests forwarded to a
// share-partition's leader). Gone, LeaderGone
// and Await let the Metadata and FindCoordinator handlers hold an answer
// naming a leader the Watch found gone, for up to goneLeaderHold (4 s)
// after its connection broke, until the controller has elected another:
// a client that lost its leader or coordinator asks at once, and an
// answer naming the dead broker would add its own retry interval
// (franz-go: 5 s) to the stall.
//
// Until Registered, with Config.AwaitRegistration, the node leads
// nothing (MayLead): a restarted node's image may name it leader in the
// epochs of its previous incarnation, whose unflushed records a crash may
// have taken.
//
// # The replication throttle
//
// The Manager owns the node's two replica.Quota (ReplicationQuotas):
// leader.replication.throttled.rate and
// follower.replication.throttled.rate, set from the broker configs with
// the image's dynamic ones at every apply, so a change reaches them with
// the image that carries it. Each hosted replica is told, when it opens
// and when its topic config changes, whether the topic's
// leader.replication.throttled.replicas and
// follower.replication.throttled.replicas name it on this node
// (config.ThrottledReplica); the Fetchers share the follower Quota, and
// lib/broker's fetch handler uses the leader one.
//
// With replication.throttle.auto.target.ms above 0 the rates are the auto
// throttle's instead (autothrottle.go), and the configured ones its
// ceilings. lib/broker's produce handler counts how long each acks=all
// produce waited, from its appends to the high-water mark passing its
// last batch, into the Manager's replica.LatencyWindow (CommitLatency);
// every autoInterval (100 ms) the maintain loop drains it and sets each
// side's rate from its p99, additive increase and multiplicative
// decrease as in TCP's congestion control, with a threshold thresh kept
// per side (none at first):
//
//	p99 > target, or a stall         rate > floor: thresh = max(floor, min(rate, used)/2), rate = floor
//	                                 else: unchanged (the queue of the window before draining)
//	p99 <= 3/4 target, or no sample  used < rate/2 and not held: rate = max(floor, 2*used, rate/2)
//	                                 rate < thresh:               rate = min(2*rate, thresh)
//	                                 else:                        rate = min(ceiling, rate + max(rate/8, floor))
//	otherwise                        unchanged
//
// where used is what the side's throttled replicas moved per second in
// the last autoUseWindows (5) windows, held whether the quota held one
// back in them (a follower's fetch may take longer than a window; they want
// more, even when a large batch's debt let them move nothing), a stall
// a window in which no acks=all produce was answered after one with
// autoBusy (8) or more (they are all waiting, and their p99 cannot show
// it until they are answered), floor is autoFloor (1 MiB/s, or the
// ceiling when lower) and ceiling the configured rate (none when
// unset). The bound this keeps: a window's rate is at most an eighth
// above one under which the produces met 3/4 of the target (or at most
// half of one they did not meet), and a window over the target is
// followed by the floor; so what the catch-up adds to the produces' wait
// beyond the target is at most the queue an eighth too much builds in
// one window, autoInterval/autoGrowth = 12.5 ms of the shared disk's or
// CPUs' time (TestAutoThrottleKeepsItsBound plays this on the injected
// clock). A rate that is not used sinks, by half a step at most, to
// twice what is, so that the next catch-up starts low, not with a burst
// at a rate set long ago, while one quiet window does not undo a climb.
// Each node steers on the produces it leads: a node that leads none
// raises its sides to their ceilings, and the other end of the catch-up
// (the leader's side or the follower's) is what holds it. The
// rate starts at the floor when turned on, is logged when it moved by
// autoLogFactor (4) from the rate last logged (at most every
// autoLogEvery, 5 s), and is the gauge
// mq_replication_throttle_rate_bytes. Only
// throttled replicas (named in the lists, out of the ISR) are held to
// it: the throttle never slows an ISR member, so acks=all latency is a
// signal of the load the catch-up puts on the disks and the network,
// not of the throttle itself.
//
// # Leading
//
// The maintain loop runs, every isrCheckInterval, the leader's proposals
// to the controller for the partitions it leads with other replicas
// (LeadShared): ISR changes (replica.ProposeISR, up to maxISRBatch in one
// AlterPartition command, maxISRProposals commands in flight) and
// hand-overs of damaged partitions (replica.ProposeResignation);
// every replica.high.watermark.checkpoint.interval.ms it checkpoints the
// high-water marks; and every autoInterval it steps the auto replication
// throttle. An answer settles each proposal as isrOutcome reads
// the controller's error: refused only when nothing can have been
// applied.
//
// # Log tasks
//
// StartLogTasks runs, on the Manager's clock: retention every
// log.retention.check.interval.ms; log.cleaner.threads compaction loops,
// each cleaning the compacted log that most needs it up to its
// high-water mark (dirty past min.cleanable.dirty.ratio or
// max.compaction.lag.ms, or holding tombstones past delete.retention.ms,
// which a log nobody writes to must lose too), looking again every
// log.cleaner.backoff.ms when none does; and the scrubber at
// log.scrub.bytes.per.sec, woken when a partition opens.
//
// The tiering task (tier.go, SyncTiers) runs every
// remote.log.manager.task.interval.ms: each tiered partition led here
// runs tier.Sync (uploads, then remote retention), waiting a backoff of
// 1 s doubling to a minute after a failure; each followed one takes the
// remote end from the image (log.SetRemoteEnd), so its local retention
// too deletes only what is recorded remotely; on the active
// controller's node, deleted topics' remote data is purged. The Tier
// (and its store, remote.log.storage.url) is made on first need and
// closed by Close.
//
// The remote part's reads (remote.go) serve lib/broker's Fetch,
// ListOffsets and DescribeLogDirs handlers: whether the remote log holds
// an offset below the local log (RemoteCovers; BelowLocalOfTiered for a
// follower, which is not served remotely), the log start a consumer is
// told (LogStart), remote reads (ReadRemote, with the aborted
// transactions of a read_committed one) and lookups by timestamp
// (RemoteOffsetForTimestamp, RemoteMaxTimestamp and MaxTimestampBelow,
// which weighs the local log against it), each bounded by the
// Tier's read timeout, and the extents and upload health of
// DescribeLogDirs (TieredExtent, TierHealth). The checks read the image only and allocate nothing: the
// fetch path calls them.
//
// # Goroutines
//
//   - follow: applies images, syncs the fetchers, calls the hooks.
//   - maintain: ISR and resignation proposals, each in a goroutine of its
//     own while in flight; high-water mark checkpoints.
//   - one goroutine per replica Fetcher.
//   - the log tasks, once started: one for retention, one for tiering,
//     one scrubber, log.cleaner.threads cleaners.
//   - each lib/log Log may run a flusher and background fsyncs.
//
// # Locks, in the order they may be taken
//
//  1. Manager.syncMu: one image applied at a time (follow, Refresh);
//     opening and closing logs happens under it.
//  2. Manager.mu: the map of hosted partitions; held only to read or
//     change the map, never across I/O. cleanMu, hooksMu and the traffic
//     counters' mutex are taken alone.
//  3. replicaFetchers.mu, then a Fetcher's own (lib/replica).
//  4. tiering.mu: the Tier and the uploads' backoff; taken alone, and
//     held while the store is first opened (Tier), never across a
//     Sync.
//
// Below them come lib/replica's and lib/log's locks. No lock of this
// package is held across a call to the controller.
//
// # On disk
//
// DATA_DIR/TOPIC-PARTITION/ per hosted partition (lib/log), the log
// checkpoints of every partition in CheckpointsFile, and
// CleanShutdownFile, written once every log closed cleanly and removed
// (durably) at Open, before any log opens.
package partition
