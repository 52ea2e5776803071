// Package controller keeps the cluster metadata of mq: which brokers exist,
// which topics and partitions, where their replicas are, who leads each
// partition in which leader epoch, the in-sync replica sets, dynamic
// configs, producer ID blocks and the ACLs. The metadata is a hashicorp/raft
// replicated state machine: every change is a command in the Raft log,
// every node applies the log to the same deterministic FSM, and so every
// node holds the same cluster image.
//
// # Using it
//
// Open starts this node's member of the controller quorum in a directory
// of its own (DATA_DIR/__controller):
//
//	c, err := controller.Open(controller.Config{NodeID: 1, Dir: dir, Logger: logger})
//	...
//	defer c.Close()
//	epoch, err := c.RegisterBroker(ctx, controller.Broker{ID: 1, Host: "localhost", Port: 9092})
//	id, err := c.CreateTopic(ctx, controller.CreateTopic{Name: "orders", Partitions: 3, ReplicationFactor: 1})
//
// With no Voters the node (NodeID, 1 for a lone mqd) is the only voter of
// a one-voter quorum, on an in-memory transport: on first start Open bootstraps the Raft
// configuration (only when the directory holds no Raft state at all), then
// waits until the node has elected itself and applied its election
// record, which also fixes the ClusterID on the very first start. On later
// starts Open recovers the image from the latest snapshot and the log
// after it. With Voters (see ParseVoters; Kafka's controller.quorum.voters
// syntax) the nodes talk over TCP and each voter bootstraps the same
// configuration; Open waits for the election only when this node is the
// sole voter listed.
//
// Commands (RegisterBroker, CreateTopic, ...) work on every node. Each
// returns after its record is committed and applied on the leader, or
// with the error the FSM refused it with (ErrTopicExists,
// ErrUnknownTopic, ErrInvalidPartitions, ...; test with errors.Is). On
// the leader the next Image shows the command's effect; on other nodes it
// shows soon after, except for CreateTopic, CreatePartitions and
// DeleteTopic, which also wait (up to localApplyWait, 5 s, or the
// context) until this node's image holds the change: a client that
// created a topic through a broker finds it there at once (the leader's
// answer carries the command's log index, which the image's Version then
// reaches). ErrNotController means no leader could be reached
// within the context (or leadership was lost while committing, when the
// command may or may not have been applied). ValidateCreateTopic and
// ValidateCreatePartitions run the checks of those commands' apply, the
// same code, on this node's image without proposing anything (a
// request's validate_only). Before either, a client's request is checked
// against the image by Image.NewTopic, NewPartitions and TopicToDelete
// (requests.go): its -1 defaults, reserved and internal topics
// (Topic.IsInternal), explicit replica lists, with refusals worded for
// the client that match the sentinels above (and ErrInvalidRequest,
// ErrInternalTopic, ErrUnknownTopicID).
//
// AlterACLs (type 18) deletes the ACL bindings a list of auth.Filter
// selects and creates a list of auth.Binding, in one record; a binding or
// filter that does not validate refuses all of it (ErrInvalidACL).
// Image.ACLs is the resulting auth.ACLs, indexed for the broker's
// authorizer and kept in the snapshot (the field "acls", sorted).
//
// Readers take Image for the current image, and follow changes with
// Changes, which returns a channel closed at the next change:
//
//	for {
//		changed := c.Changes()
//		img := c.Image()
//		... act on img ...
//		<-changed
//	}
//
// # One port, forwarding, non-voters
//
// A node's Raft TCP port carries two kinds of connection, told apart by
// their first byte: 'V' is hashicorp/raft's NetworkTransport, 'M' the
// controller RPCs (length-prefixed JSON: propose a command, heartbeat,
// join, describe the quorum). The port is the one channel between nodes
// the controller needs: every node knows the voters' addresses from
// --voters and the leader's from Raft, before it has any image. A command
// on a node that is not the Raft leader is sent to the leader and run
// there; while there is no leader it is retried until its context ends.
// Errors cross the wire as the name of their sentinel and come back as
// the same sentinel.
//
// A node keeps its RPC connections to each other node open between
// calls: a call takes an idle one (at most two are kept per address;
// calls at once open more) and gives it back when answered; any error
// closes it, and Close closes them all. An idle connection the peer
// closed (it restarted) is dropped unused. A request on a reused
// connection that fails before any answer arrived is sent once more on
// a new connection when that is harmless (heartbeat, join, quorum,
// hello); a propose or an election sent on it fails with
// ErrNotController, its outcome unknown, and is never sent twice.
//
// A node not in Voters (it must have a RaftAddr of its own) is a Raft
// non-voter: it starts without bootstrapping and asks the voters, in the
// background and until it succeeds, to add it (AddNonvoter); Open does
// not wait for that. It then holds the whole image like a voter.
//
// Every RPC carries the sender's voter set, and its cluster ID once its
// image has one. A node whose set (or cluster ID) differs
// refuses it with ErrVotersMismatch, and the sender's Fatal channel
// receives the error (mqd exits on it). The refusal names neither set,
// nor does any refusal name a broker's current epoch or a partition's:
// they are what a forged request would need. A Raft connection carries
// both too, right after its first byte ('C': the voter set, then the
// cluster ID, empty before the image has one; 'V', the voter set alone,
// is still accepted), since Raft's own RPCs name no cluster: one with
// another set or another cluster ID (a node of another cluster on a
// stale or reused address), or without a set, is closed before Raft
// reads from it, with a warning. Each voter greets the others once at start, so the check does
// not wait for a first command. A node restarted with other --voters than
// the voters of its stored Raft configuration fails Open with
// ErrVotersMismatch.
//
// # Authenticated nodes (TLS)
//
// With Config.TLS (NewTLS over TLSFiles: the node's certificate and key,
// the cluster CA) every connection of the Raft port, Raft's and the
// RPCs', is mutual TLS 1.2 or later. The accepting node requires a
// client certificate that chains to the cluster CA, within
// handshakeTimeout, before it reads the kind byte: a connection without
// one, or with another CA's, is closed unread (logged at most once a
// second), so a stranger's AppendEntries or RequestVote never reaches
// hashicorp/raft. The dialing node checks the other's certificate
// against the same CA (not its host name: nodes are dialed at the
// addresses of --voters and of the image). A node certificate carries
// both extended key usages, serverAuth and clientAuth. TLS.Reload reads
// the files again (mqd does on SIGHUP); open connections keep theirs.
//
// A certificate's principal is "User:" and its subject (CertPrincipal,
// the Kafka listeners' mapping). RegisterBroker, for the node's own
// broker, first proposes BindNode (command 19): the image's
// NodePrincipals binds the node ID to the principal of its certificate,
// once and for good (a renewed certificate keeps its subject), until
// UnregisterBroker (command 30) removes the broker, which unbinds its
// node ID and certificate. The
// leader then takes from a connection only what its principal may say:
// the request's sender (rpcRequest.From) must be bound to it, or, not
// bound yet, be binding itself with a principal bound to no other node
// (before that it may only greet, join and describe the quorum);
// registrations, heartbeats, controlled shutdowns, joins, and ISR changes
// and resignations as a partition's leader must name the sender's own
// ID; FenceBroker, UnfenceBroker, the election record, ElectLeaders 2
// (an unclean election naming its leaders) and OverridePartition are
// never taken from another node, since only the active controller
// proposes them itself. Anything else is refused with
// ErrNodeNotAuthorized.
//
// Without Config.TLS the port is plain TCP and the checks of principals
// are off: any host that reaches it and sends the voter set is trusted.
//
// UnregisterBroker retires a node for good: it proposes
// UnregisterBroker (command 30), which removes the broker's
// registration and its certificate binding and is refused
// (ErrBrokerInUse) while the broker is alive or a replica of any
// partition, then removes a non-voter that joined from the Raft
// configuration (RemoveNonvoter). A voter is refused (ErrVoter): the
// voters are fixed by --voters.
//
// # Limits of the port
//
// What the port reads from a peer is bounded before anything is
// trusted. An accepted connection must send its greeting (kind byte and,
// for Raft, voter set) within handshakeTimeout (10 s); at most
// maxGreeting (128) connections may be greeting at once, more are closed
// as they are accepted. An RPC message announces its length: one over
// maxRPCMessage (64 MiB) is refused unread, and the body is buffered as
// it arrives, never allocated at the announced size. A served RPC
// connection must send each whole request within rpcIdleTimeout (2 min)
// of its last answer, and a Raft connection served here is closed after
// raftIdleTimeout (2 min) without a byte, with a log line; the dialing
// side redials. Raft's own messages (an RPC type byte and a msgpack
// value, read whole by hashicorp/raft) carry no length of their own:
// raftFrames (raftframe.go) follows them as the bytes arrive and closes
// the connection, with a log line, at the first header announcing more
// than raftMaxMessage (about 257 MiB) for one message, containers
// nested deeper than raftMaxDepth (32), or an unknown RPC type, before
// hashicorp/raft's decoder reads that header. An InstallSnapshot's data,
// which follows its request raw, is not counted. The bound holds every
// message a leader sends: a command is at most maxCommand (16 MiB; a
// larger proposal is refused with ErrCommandTooLarge before it reaches
// the log) and an AppendEntries carries at most raftMaxAppendEntries (16)
// of them. The answers read on a Raft connection this node dialed are
// followed the same way (an error string and a response each, at most
// raftMaxResponse, 1 MiB).
//
// A propose sent over the RPC must be a record this build writes: one
// that does not decode, or of a version kept only to replay old logs
// (RegisterBroker 1 and 2, FenceBroker 1, UnfenceBroker 1), is refused
// with ErrUnknownCommand or ErrInvalidCommand before it reaches the log.
//
// # Broker liveness
//
// Brokers register (RegisterBroker, which returns the broker epoch) and
// then call Heartbeat every broker.heartbeat.interval.ms through their own
// node's controller. The active controller keeps each broker's last
// heartbeat in memory; it starts every session afresh when it becomes
// the Raft leader, before it announces its election (a heartbeat that
// arrives while it announces is recorded, and the broker asked to send
// it again), so a failover never fences a live broker by itself. A
// broker is fenced with a FenceBroker command, for one of two reasons
// (FencingReasons; counted by BrokerFencings and logged with the reason):
//
//   - session_timeout: silent for longer than BrokerSessionTimeout, at
//     the active controller's next session check (see Time). This covers
//     every way a broker can be lost: a frozen process, a cut network, a
//     machine gone.
//   - process_gone: its process is seen to be gone. The active controller
//     notes which broker (ID, epoch) registers or heartbeats on each RPC
//     connection; when such a connection ends while it is active and not
//     closing, it probes the broker's RaftAddr (lib/probe, 2 s a dial).
//     The process is gone when the dial is refused (ECONNREFUSED: the
//     host says nothing listens there) or reset, or when it connects but
//     the connection is reset or closed within the probe, or stays quiet
//     and a second dial is refused or reset: a dying process may release
//     its connections before its listener, whose close then resets the
//     connections it had not accepted, while a live node's port keeps a
//     connection open until the dialer speaks. It is fenced only when no
//     heartbeat of that broker epoch arrived meanwhile. A connection that
//     stays open, a dial that times out or fails otherwise does nothing. A new
//     active controller probes every other live broker the same way as
//     soon as it is active, so the brokers that died with the former
//     controller are fenced at once rather than a session later.
//     Brokers fenced already or in controlled shutdown are left alone.
//     Config.NoProcessProbes turns these probes off.
//
// Fencing a broker:
//
//   - each partition it led goes to the first replica, in Replicas order,
//     that is in the ISR and alive (neither fenced nor shutting down);
//   - otherwise the partition has no leader (-1) and keeps its ISR, so
//     the last in-sync replica leads again when it comes back (or an
//     unclean election gives it another leader, below);
//   - the broker leaves every ISR that has other members.
//
// A registration may name the broker's replicas that lost records they
// knew as committed (their log opened below its checkpointed high-water
// mark, LostReplica): the broker leaves those ISRs. Where it led, or
// nobody did, the first other live ISR member leads; where it was the
// last ISR member, the partition keeps no leader and an empty ISR, so
// only an unclean election gives it one. The replica rejoins the ISR the
// usual way, once it caught up with a leader.
//
// A fenced broker's heartbeat, once its node has applied the image up to
// its registration (Heartbeat.AppliedVersion >= broker epoch), unfences
// it and makes it leader of the partitions without a leader whose ISR
// holds it.
//
// # Producer IDs
//
// AllocateProducerIDs reserves a block of producer IDs no other broker is
// given (a command of the FSM). ProducerIDs is a broker's side of it: it
// hands IDs out of a block at hand and fetches the next block ahead,
// once fewer than a tenth is left, in Run (which lib/node runs), so
// that InitProducerId needs no controller while a block lasts. Its mutex
// is never held across the allocation, and at most one allocation is in
// flight, which every Take that needs it waits for on its own context.
//
// # Unclean elections
//
// Each heartbeat carries, in Offline, the position of the broker's log
// (last leader epoch, end offset) of every partition it hosts that has no
// leader in its node's image. The active controller keeps each broker's
// latest report in memory, per session, and forgets them all when it
// loses the leadership. For every partition without a leader and without
// a live ISR member where unclean leader election is allowed (the
// topic's unclean.leader.election.enable, else the cluster-wide dynamic
// default in BrokerConfigs[-1], else Config.UncleanLeaderElection), its
// supervising loop chooses among the live replicas the one that reported
// the most advanced log: the latest last epoch, then the largest end
// offset, then Replicas order. A live replica that has not reported is
// waited for two Config.BrokerHeartbeatInterval, counted from when the
// partition was first seen needing the election or the replica's
// session began, whichever is later; then the best report wins, and with
// none nobody is elected yet. The controller proposes an ElectLeaders
// record that names the chosen leader; the FSM elects it (ISR {it}) only
// if the partition still has no leader nor live ISR member, the leader
// is a live replica and the configs still allow it, so Apply stays
// deterministic. The election is logged at Warn with the new leader, its
// end offset and epoch, and the former ISR, whose records above that
// offset may be lost.
//
// A heartbeat with WantShutDown starts a controlled shutdown: the broker
// is marked InControlledShutdown, its leaderships move to other live ISR
// members and it leaves the ISRs that have other members. The answer says
// ShouldShutDown once it leads no partition another live ISR member could
// take. A registration clears Fenced and InControlledShutdown; when the
// broker was registered before (a restart: it may have lost what it had
// not flushed), its leaderships first move to other live ISR members, it
// leaves the ISRs that have other members, and where it was the last
// in-sync replica it stays leader in a new leader epoch.
//
// Every change of a partition's leader moves its leader epoch by one,
// every change of leader or ISR its partition epoch by one.
//
// # ISR changes, elections, placement
//
// A partition's leader changes its ISR with AlterPartition, naming the
// leader epoch and partition epoch it saw: a proposal based on anything
// but the current ones is refused (ErrFencedLeaderEpoch,
// ErrInvalidUpdateVersion), so a deposed leader never overwrites a newer
// ISR; an ISR may only add live brokers (ErrIneligibleReplica).
// AlterPartitions carries many partitions' changes in one command, each
// checked and applied on its own, in order, with its outcome reported at
// its index: a leader whose follower came back changes thousands of ISRs
// at once.
//
// A leader that cannot serve its log whole (a damaged range) gives the
// partition up with ResignLeadership, under the same epochs: the first
// live ISR member in replica order leads, and the former leader leaves the
// ISR, in one change. Without another live ISR member it is refused
// (ErrEligibleLeadersNotAvailable) and the leader keeps the partition.
//
// ElectLeaders runs preferred or unclean elections and reports per
// partition. An unclean one, run on the active controller, elects the
// live replica with the most advanced log among the reports at hand
// (ErrEligibleLeadersNotAvailable when no live replica reported),
// whatever the configs say. With AutoLeaderRebalance the active controller elects, every
// LeaderImbalanceCheckInterval, the preferred replica of each partition
// where it is alive and in the ISR but not the leader.
//
// # Reassignments
//
// AlterReassignments moves partitions to new replica sets (KIP-455). The
// image holds the move: Replicas is the target followed by the replicas
// that leave, AddingReplicas those not in the original set,
// RemovingReplicas those not in the target. The added replicas are
// followers like any other: the brokers open them from the image, they
// catch up from the leader and the leader proposes them into the ISR.
// The AlterPartition that puts the last of them in the ISR also completes
// the move in the same change: Replicas becomes the target, the leaving
// replicas leave the ISR, and where the leader leaves the first live ISR
// member of the target leads, in a new leader epoch. A move that adds no
// replica completes at once. A new target replaces the move in progress
// (the original set is kept); cancelling restores the original set, the
// added replicas leaving the ISR, and is refused where that would leave
// no live original replica in the ISR to lead. When a move ends, either
// way, the partition:broker pairs naming it leave the topic's
// leader/follower.replication.throttled.replicas (a "*" stays): the
// throttle set for a move ends with it. A broker deletes a
// replica's data when the image no longer names it among the replicas:
// only once the new set is in force.
//
// New topics and partitions are placed on live brokers only: replica r of
// partition i is the broker at (start+i+r) mod n of the placement order,
// the start derived from the topic ID. The order is by broker ID, or,
// when every live broker has a rack, alternates between racks, so the
// replicas of a partition are on different racks as far as the racks
// allow. Preferred leaders (first replicas) are spread evenly. A new
// partition's ISR is its live replicas, its leader the first of them.
//
// Quorum describes the quorum from the leader: term, last log index, and
// every voter and non-voter with the image version and time of its
// broker's last heartbeat.
//
// # Time
//
// Config.Clock (lib/clock; nil is clock.Real, the wall clock) is the
// controller's own time. It drives
//
//   - broker liveness: the time of each heartbeat and session start,
//     session expiry, and the wait for reports before an unclean election;
//   - the active controller's periodic checks: of the sessions (fencing,
//     then unclean elections) every quarter of BrokerSessionTimeout,
//     within 10ms..1s, and of leader imbalance every
//     LeaderImbalanceCheckInterval. Each is an AfterFunc of the clock that
//     re-arms itself when its run ends; runs never overlap;
//   - the retry backoffs: of a command while there is no leader, of the
//     election record, of greeting the voters and joining as a non-voter,
//     of the listener after a failed accept;
//   - Open's wait for a lone voter's election (StartTimeout).
//
// Tests pass a clock.Manual and step it. A check falling due runs in the
// goroutine that calls Advance, at its due time, before Advance returns,
// so the test sees its effect at once and never sleeps:
//
//	m := clock.NewManual(start)
//	c, err := controller.Open(controller.Config{NodeID: 1, Dir: dir, Clock: m, BrokerSessionTimeout: 4 * time.Second})
//	... RegisterBroker and a Heartbeat of broker 1 ...
//	m.Advance(4 * time.Second) // silent for exactly the timeout: not fenced
//	m.Advance(time.Second)     // the next check fences it
//
// On a Manual clock the backoffs and waits above end only when the test
// moves the time (or the context ends). What stays on wall time is not
// the controller's to move:
//
//   - hashicorp/raft's own timers: heartbeat, election and leader lease
//     timeouts (500ms each with several voters, sized for a
//     LAN: a follower stands for election after one to two heartbeat
//     timeouts without the leader; pre-vote is on), and its transport's
//     I/O timeout; and CatchUp's poll of
//     Raft's applied index, which moves on Raft's goroutines (on a Manual
//     clock the poll would wait for the very caller it blocks);
//   - network I/O deadlines (net.Conn's are wall time): an accepted
//     connection's first byte (handshakeTimeout), dials, RPC connections;
//   - command deadlines: a context's deadline, the caller's or
//     defaultCommandTimeout, is wall time, and it becomes Raft's apply
//     timeout and the RPC's I/O deadline.
//
// # Invariants
//
//   - An Image is immutable once published. Apply builds the next image
//     copy-on-write, sharing unchanged maps, topics and slices with the
//     previous one, so any number of goroutines read images without locks.
//     Nobody may modify an Image or anything reachable from it.
//   - Apply is deterministic: its result depends only on the previous image,
//     the record and its log index. It reads no clock and draws no random
//     numbers: topic IDs and the cluster ID are generated by the proposing
//     method and carried in the command; round-robin replica placement
//     starts at a broker derived from the topic ID; a broker's epoch is the
//     log index of its registration.
//   - A command the image refuses, or a record that does not decode, leaves
//     the image exactly as it was (Version included) and wakes no watcher.
//     Image.Version is the log index of the last command that changed it.
//   - Every published image passes the same checks Restore applies to a
//     snapshot: topics indexed by name and ID alike, replica lists without
//     duplicates, the ISR a subset of the replicas, a leader always in the
//     ISR and never fenced, a fenced broker in an ISR only as its last
//     member, leader epochs that never decrease.
//   - A command that is accepted but changes nothing (fencing a fenced
//     broker, an election no partition needed) publishes no image either.
//
// # Records and their versions
//
// A record is one byte of command type, one byte of version, and a body.
// The body is JSON. Commands are small and rare (metadata, not messages),
// so compactness buys nothing, while JSON is readable when debugging a log
// and easy to keep several versions of. Decoding is strict: exactly one
// object, no unknown fields, nothing after it, so a node never silently
// drops a field written by a newer one. An unknown type or version is refused with
// ErrUnknownCommand, a bad body with ErrInvalidCommand, and the FSM logs
// it; a record is never guessed at and never panics the FSM.
//
// A new field or a change in the meaning of a command gets a new version
// number; the decoder reads every version ever written, each with its own
// meaning, since records stay in logs and are replayed. Type numbers are
// never reused. The versions written:
//
//   - RegisterBroker 3, or 4 when the broker names replicas that lost
//     committed records (RegisterBrokerAfterLoss). From version 2 a
//     registration carries the Raft address, lifts the fence, and makes a
//     broker registered before give up its leaderships. Version 2 also
//     elects the first live replica from outside the ISR where
//     unclean.leader.election.enable allows it (the record carries its
//     proposer's static default); 3 and 4 never do.
//   - AlterPartition 2 (a leader's change, checked against the partition
//     epoch), 3 (many partitions' changes in one record, each applied as
//     2 applies one), and 1 for OverridePartition (set by hand, unchecked).
//   - FenceBroker 2 and UnfenceBroker 2, which never elect from outside
//     the ISR; version 1 elects uncleanly as RegisterBroker 2 does.
//   - ElectLeaders 1 for preferred and 2 for unclean elections: 2 names
//     the chosen leaders, where 1 elects the first live replica.
//   - Every other command 1 (BindNode, type 19, included; the
//     remote-log metadata's RemoteSegmentUploaded 20,
//     RemoteSegmentsDeleted 21 and RemotePurged 22, remote.go: a segment
//     is recorded and remote segments deleted only with the partition's
//     current leader epoch, segments contiguous, deletions of the oldest
//     up to a segment boundary; 23 and 24 are kept for tiered storage).
//
// Nothing checks that every node reads a type or version before one
// writes it (ResignLeadership, type 14, and AlterPartition 3 included): a
// node that cannot read a record refuses it and its image misses the
// change, so the nodes of a cluster run one build.
//
// Snapshots carry the whole image (the remote logs and pending purges
// too): "MQCI", one version byte (2; version 1,
// without the brokers' Raft address and liveness, is still read), and a
// JSON body with brokers and topics in sorted order, so equal images give
// equal snapshots. Restore refuses anything else with ErrInvalidSnapshot
// and keeps the current image.
//
// # Users
//
// Image.ScramCredentials holds the SCRAM credentials of the users SASL
// authenticates (user, then mechanism): salt, iterations, StoredKey and
// ServerKey, never a password or a salted password. AlterScramCredentials
// changes them with one AlterScramCredentials command (type 17), all or
// none: a credential no exchange could use (unknown mechanism, iterations
// outside 4096 to 16384, no salt or keys) refuses it. Snapshots carry
// them (scram_credentials, added within version 3: a node that does not
// know the field refuses the snapshot rather than lose the users).
//
// # On disk
//
//	Dir/raft.db                       Raft log and stable store (bbolt, raft-boltdb/v2)
//	Dir/snapshots/<term>-<index>-<ms>/ the two newest snapshots (meta.json, state.bin)
package controller
