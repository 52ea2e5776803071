// Package txn is the transaction coordinator of mq (Kafka's KIP-98, with
// KIP-360's epoch recovery and KIP-890's defenses): a pure state machine
// over a Store, the partitions of the compacted internal topic
// __transaction_state.
//
// A transactional id lives in partition PartitionFor(id, n), Kafka's
// abs(javaHashCode(id)) % n, and is coordinated by that partition's
// leader: lib/coordinator's Topic loads a partition here (LoadAsync) when
// this node becomes its leader and unloads it when it stops. Until replay
// is done its ids answer ErrLoadInProgress; ids of partitions not owned
// answer ErrNotCoordinator. The partitions owned are an owned.Partitions
// (lib/coordinator/owned), as lib/group's.
//
// # States
//
// Each id has a producer id, an epoch, a timeout and a State (Kafka's
// states and codes):
//
//	Empty ──AddPartitions──► Ongoing ──EndTxn──► PrepareCommit ──markers──► CompleteCommit
//	  ▲                        │    └──EndTxn(abort), timeout, fence──► PrepareAbort ──markers──► CompleteAbort
//	  └──InitProducerID────────┴─── (from Empty or Complete*: the epoch + 1)
//
// InitProducerID bumps the epoch (a new id at the first use, and when the
// epoch is exhausted): a producer holding an older epoch is fenced
// (ErrProducerFenced) on every later request. When the id has an Ongoing
// transaction, InitProducerID aborts it with a bumped epoch and answers
// ErrConcurrent until the abort completes; a transaction open longer than
// its timeout is aborted the same way by a timer (AbortCheckInterval), so
// a hung producer is fenced as in Kafka. EndTxn answers once the Prepare
// record is durable; the markers (Markers.Write; MarkerWriter sends
// WriteTxnMarkers to every partition's leader over Peers, which lib/peer
// implements) are written in the background, and the
// Complete record follows. A transaction in a Prepare state answers
// ErrConcurrent (the client retries); Describe lists, meanwhile, the
// partitions still without their marker, as Kafka does. Replay restarts
// the markers of every transaction found in a Prepare state.
//
// A client ending with EndTxn v5 (transaction.version 2, KIP-890 part 2)
// bumps the epoch at every end: the markers carry the new epoch, the
// answer gives it to the producer, and a retry of that end (the old
// epoch) is answered as done. Its next end, in the new epoch, while the
// markers are still on their way, answers ErrConcurrent. At the exhausted epoch the markers carry
// the reserved last epoch and the producer continues with a new producer
// id (Metadata.NextProducerID). Older clients keep their epoch between
// transactions. Such a client adds no partitions itself: the partition
// leaders (before a transaction's first batch, Produce v12) and the group
// coordinator (TxnOffsetCommit v5) call AddPartitions for it, in the
// epoch of its transaction; while the transaction before is in a Prepare
// state they get ErrConcurrent, so no batch of the new epoch joins a
// transaction whose markers are not all written. lib/broker advertises
// the protocol (the transaction.version feature of ApiVersions).
//
// Verify answers the partition leaders' question of KIP-890 part 1
// (AddPartitionsToTxn v4+ with VerifyOnly): is this partition in this
// producer's ongoing transaction. Ids unused (no transaction) for
// IDExpiration are removed with a tombstone (ExpireCheckInterval).
//
// # Records
//
// One record per change, keyed by transactional id, in Kafka's layouts
// (records.go). A record is written under the coordinator's mutex and
// waited for without it; meanwhile the id is pending and its requests
// answer ErrConcurrent, as Kafka's pending state does. A write that does
// not become durable changes nothing.
//
// # Goroutines and locks
//
// One mutex guards all ids. Goroutines: one per partition load, one per
// transaction whose markers are on their way (it writes the Complete
// record after), one per timed-out abort or expiry, and the clock's two
// timers. Markers.Write and Store.Pending.Wait run without the mutex.
package txn
