// Package replica holds the state of one partition replica on this node:
// its log, its role (leader or follower), the leader and partition epochs,
// the replica set and the in-sync replicas (ISR), the high-water mark, on a
// leader each follower's fetch position and its ISR proposal, and on a
// follower what its fetcher needs.
//
// The same code serves a single node and a cluster. A single mqd is the
// leader of every partition with ISR = {self}: after each append the
// high-water mark moves to the log end offset. With followers, the
// high-water mark is the smallest log end offset among the ISR, as learned
// from the followers' fetch offsets (Read with a replica id).
//
// # Using a Partition
//
//	l, err := log.Open(dir, logConfig, log.Options{...})          // the partition's log
//	p := replica.New(replica.Config{Topic: "t", Partition: 0, NodeID: 1, MinInsyncReplicas: 2}, l)
//	err = p.Become(replica.PartitionState{...})  // from the controller's image; epochs never go back
//	p.SetMinInsyncReplicas(n)                    // a topic config change
//	l.CheckpointHighWatermark(p.HighWatermarkToCheckpoint()) // periodically
//	err = p.Close()                              // checkpoints the high-water mark, closes the log
//
// On a leader:
//
//	res, err := p.Append(batch, acks)            // on the connection's reader goroutine
//	err = p.WaitHighWatermark(ctx, res.LastOffset) // acks=all: until HW > LastOffset
//	w, err := p.WriteMarker(marker, ts)          // WriteTxnMarkers: a transaction's control batch
//	err = w.Wait(ctx)                            // until it is on every in-sync replica (MarkerWaitTimeout)
//	r, info, err := p.Read(offset, maxBytes, replicaID) // a follower's fetch records its offset
//	defer r.Release()
//	r, info, err = p.ReadCommitted(offset, maxBytes, epoch, anyReplica) // read_committed: below info.LastStableOffset
//	<-p.Changed()                                // fetch long-poll: closed at the next HW or log end advance
//	change, ok := p.ProposeISR(eligible)         // the ISR loop: send AlterPartition when ok (eligible: the broker may join)
//	p.ISRProposalRefused(change)                 // refused, provably nothing applied
//	p.ISRProposalUnresolved(change)              // timeout, broken connection: maybe applied
//
// On a follower, the Fetcher replicates from the leader (one Fetcher per
// leader, for every partition this node follows there). It runs the
// follower protocol against an Upstream, the leader's requests for many
// partitions at once, which lib/peer implements over the network:
//
//	f := replica.NewFetcher(replica.FetcherConfig{Leader: 2, Backoff: b, Clock: c}, upstream)
//	go f.Run()
//	f.Set(partitions)                            // after every image; keeps the state of those kept
//	f.Close()                                    // stops Run and waits for it
//
// Each round of Run does, for the partitions ready:
//
//	pos, ok := p.FetchPosition()                 // leader, epoch, fetch offset
//	<damage found: Refetch on the leader, then p.RefetchDamaged where granted>
//	<pos.NeedsTruncation: OffsetForLeaderEpoch(pos.LastFetchedEpoch) on the leader>
//	err = p.TruncateFromLeader(pos.LeaderEpoch, end, epoch)
//	<else: Fetch at pos.FetchOffset with replica id NodeID>
//	n, err := p.AppendFromLeader(pos.LeaderEpoch, records, hw, logStart)
//	err = p.ResetFetchOffset(pos.LeaderEpoch, logStart, logEnd) // on ErrOutOfLeaderRange
//
// AppendFromLeader appends a response's batches and, under
// flush.policy=always, fsyncs them once, together, before it returns:
// the next fetch reports them to the leader, which counts them toward
// its high-water mark. (An fsync a batch would leave a follower catching
// up unable to outrun the leader's producers, who share theirs.)
//
// A partition the leader refuses is asked about again after 5 ms, the
// delay doubling up to the backoff, and at once when its own leader
// epoch changes; a request that fails as a whole backs off. Run is one
// goroutine, the only caller of the Upstream; Set may be called from any
// goroutine. The Fetcher's mutex guards its partition set and their
// refusals; it is taken before a Partition's locks (reading positions)
// and never held across a request to the Upstream.
//
// Example (in example_test.go) runs the single-node case; the scripts in
// testdata/ run several replicas through leadership changes, their
// followers replicating with the real Fetcher against their leader's
// Partition in memory (fetchloop_test.go).
//
// # The replication throttle
//
// KIP-73's throttle caps, in bytes per second, what the replicas out of
// the ISR move, each side with one Quota per broker shared by all its
// throttled replicas: a token bucket that may go into debt, so that a
// batch larger than the allowance still goes whole and the rate holds on
// average.
//
//	q := replica.NewQuota(clock)                  // unlimited
//	q.SetRate(bytesPerSecond)                     // any time; replica.Unlimited for none
//	p.SetThrottled(leaderListed, followerListed)  // from the topic's throttled-replicas lists
//	p.LeaderThrottled(replicaID)                  // leader: listed, and the follower out of the maximal ISR
//	pos.Throttled                                 // follower (FetchPosition): listed, and out of the committed ISR
//	if n := q.Reserve(); n > 0 { …move ≤ n (or one whole batch)…; q.Settle(n, moved) } else { wait := q.Hold() }
//	s := q.Share()                                // one request's throttled partitions, read one by one
//	n := s.Limit(want); …read ≤ n…; s.Moved(read); s.Settle() // n 0: held, s.Held() until it gives
//
// Reserve takes the whole allowance out of the bucket until Settle gives
// back what was not moved, so requests served at once never spend the
// same bytes, and no request moves more than its allowance and one
// batch: the Quota owes at most a batch per request in flight.
//
// The leader side is lib/broker's fetch handler: a throttled follower's
// partition is read up to what the fetch's Share has left, and over
// quota with Read's maxBytes 0, which records the follower's fetch and
// reads nothing. The follower side is the Fetcher's (FetcherConfig.Quota):
// its throttled partitions are left out of a fetch while the Quota gives
// nothing, the leader holding that fetch no longer than the Quota takes
// to give again (Upstream.Fetch's maxWait), and a round with nothing
// else to fetch waits for it (Hold); while it gives, they share the
// allowance as their FetchQuery.MaxBytes, so that the follower never
// asks for replica.fetch.max.bytes on a small allowance and then owes
// the Quota for seconds, fetching nothing. A follower
// being added to the ISR is not throttled by its leader, so acks=all
// does not wait for the leader's throttle; the follower stops throttling
// itself when its image shows it in the ISR, a controller round trip
// later. A Quota is safe for concurrent use; its mutex is taken alone.
//
// A LatencyWindow is where lib/broker counts how long acks=all produces
// waited for the high-water mark, one atomic add each and no allocation;
// Drain hands over a window's count and p99 (to a quarter) and starts
// the next. lib/partition's auto throttle drains it every 100 ms
// and sets the Quotas' rates from it.
//
//	var w replica.LatencyWindow
//	w.Observe(waited)        // any goroutine
//	s := w.Drain()           // one caller: s.Count, s.P99
//
// # Leadership changes and truncation
//
// A leader epoch starts with Become. The new leader records the epoch at
// its log end at once (log.BeginEpoch), so OffsetForLeaderEpoch answers for
// it before anything is appended in it. A follower of a new leadership
// truncates before it fetches, by the leader's answer about the latest
// epoch of its own history: to min(the leader's end offset for the epoch
// found, its own end offset for that epoch) (KIP-101, KIP-279), in more
// than one round when it lacks that epoch; never to its high-water mark.
// TruncateFromLeader documents the cases. A fetch out of the leader's
// range (ResetFetchOffset) cuts the log to the leader's end, or empties it
// and starts over at the leader's log start; but a leader whose log ends
// below what the follower already fetched from it in the same epoch lost
// records (a power loss), and the follower keeps its log
// (ErrLeaderLostRecords) until a new epoch.
//
// # The ISR and the high-water mark
//
// The leader proposes ISR changes (ProposeISR): followers that have not
// caught up with its log end for replica.lag.time.max.ms leave, followers
// that reached both the high-water mark and the start of its epoch join.
// The proposal carries the leader and partition epochs it was made under;
// one is pending at a time, until the image shows a newer partition epoch,
// ISRProposalRefused or ISRProposalUnresolved. The high-water mark waits
// for the maximal ISR: the committed ISR and the followers being added,
// including those of proposals whose outcome is unknown (the controller
// may have committed them): they stay, and are proposed again, until an
// image with a newer partition epoch says whether they are in the ISR.
// Only a refusal that proves nothing was applied drops them; otherwise the
// mark could pass records a follower the controller put in the ISR lacks,
// and that follower could be elected leader without them. An acks=all append is
// refused (ErrNotEnoughReplicas) when the committed ISR is smaller than
// min.insync.replicas, and answered ErrNotEnoughReplicasAfterAppend when it
// shrank below it while the batch waited. A follower's high-water mark is
// min(the leader's, its log end offset).
//
// The high-water mark is checkpointed in the log's directory
// (log.CheckpointHighWatermark) by the broker's loop and by Close; New
// starts from the checkpoint brought within [log start, log end]. A log
// that ends below the checkpoint lost records this replica knew as
// committed (LostCommitted): the broker reports it to the controller,
// which keeps the replica out of the ISR until it caught up again. A
// follower's truncation below the high-water mark checkpoints the lowered
// mark at once, so that it is never taken for such a loss.
//
// # Invariants
//
//   - The high-water mark never decreases while this replica is leader, never
//     exceeds the log end offset known to be on every ISR member, and is
//     never below the log start offset nor above the log end offset. On a
//     follower it decreases only when a truncation cuts the log below it.
//   - The leader epoch never decreases, nor the partition epoch within a
//     leader epoch: Become with an older state is refused
//     (ErrStaleLeaderEpoch) and changes nothing.
//   - Consumers (replica id < 0) never read at or above the high-water mark.
//   - A follower appends only under the leader epoch it follows, and only
//     after the truncation its leadership change required.
//   - Every method of Partition is safe for concurrent use. Appends are
//     serialized by the log; Become waits for the appends and the
//     follower-side calls in flight, so no batch is appended under an
//     epoch the partition already left.
//
// Waiting is done on channels, never timers: Changed returns a channel
// that is closed the next time the high-water mark or the log end offset
// advances, the role, leader epoch or partition epoch changes, or the
// partition closes. WaitHighWatermark (acks=all) and fetch long-polls are
// built on it.
package replica
