// Package log stores one partition's log in one directory: Kafka
// RecordBatch v2 batches, appended as received and never decoded on the
// produce or fetch path.
//
// # Use
//
//	l, err := log.Open(dir, log.DefaultConfig(), log.Options{Logger: logger})
//	res, err := l.Append(batch, leaderEpoch) // batch checked with record.Validate
//	r, err := l.Read(offset, highWatermark, maxBytes)
//	defer r.Release()                        // always, once
//	r.WriteTo(conn) // or r.ReadAt, or f, err := r.File().AcquireFile() … r.File().ReleaseFile()
//	...
//	err = l.Close()
//
// Append patches the batch in place (base offset = log end offset,
// partition leader epoch, and with Config.LogAppendTime the max timestamp
// and CRC) and checks idempotent producers atomically with the write.
// AppendAsFollower appends batches whose offsets a leader assigned; a
// follower appends a whole fetch response with AppendAsFollowerUnsynced
// and makes it durable with one SyncFollowerAppends (FlushAlways).
// Read returns a Region of whole batches in one segment file, starting
// with the batch holding offset, stopping before maxOffset and maxBytes
// (the first batch is returned whole even when larger, as KIP-74 says).
// ReadBytes copies the same bytes into memory.
//
// A log with Config.RemoteStorage (remote.storage.enable, lib/tier) is
// told where its remote copy ends (SetRemoteEnd): EnforceRetention then
// applies local.retention.ms and local.retention.bytes, and never
// deletes a segment reaching past the remote end. ClosedSegments,
// SegmentData, SegmentTxnIndex and SizeFrom give the uploader what it
// copies; DecodeTxnIndex reads a .txnindex copy back.
//
// A leader calls BeginEpoch(epoch) when its leadership starts, so the
// leader-epoch history has the epoch at the log end before any append;
// EndOffsetForEpoch answers OffsetForLeaderEpoch from the history. A
// follower cuts a divergent suffix with TruncateTo, and RestartAt empties
// the log to start over at its leader's log start offset.
//
// # Files
//
// The directory (conventionally TOPIC-PARTITION) holds segments named by
// their base offset in 20 digits, and checkpoints, each written when its
// contents first differ from its default (a new log has its first
// segment's data file and nothing else):
//
//	00000000000000000000.log        batches back to back
//	00000000000000000000.index      offset index, once it has entries or the segment is sealed
//	00000000000000000000.timeindex  time index, likewise
//	00000000000000000000.txnindex   aborted transactions, when the segment holds an abort marker
//	recovery-point-offset-checkpoint  below it everything is fsynced (default: nothing)
//	log-start-offset-checkpoint     when the log start is not the first segment's base
//	leader-epoch-checkpoint         the history (default: none)
//	producer-state                  producers and their open transactions (default: none; rebuilt from the batches)
//	sealed-segments                 closed segments as they were sealed
//	damaged-ranges                  damage found, while there is some
//	high-water-mark-checkpoint      the replica's high-water mark, when one was written
//	cleaner-offset-checkpoint       the cleaner's first dirty offset and cleaned-at times
//	*.log.cleaned, *.log.swap, …    a cleaning pass's new segment (see Compaction)
//
// With Options.Checkpoints (a broker's logs) the recovery point, the
// leader-epoch history and the high-water mark are kept in one file for
// every log of the data directory instead (see Checkpoints), with the
// log's Options.Owner (a broker's topic ID), and the
// three files above are not written: a broker hosting thousands of
// partitions replaces one file every few seconds, not thousands, and
// creates none for a new partition.
//
// Index formats (big endian, no header; see index.go):
//
//	.index      (relative offset uint32, position uint32), one entry for a
//	            batch starting ≥ index.interval.bytes after the last entry
//	.timeindex  (timestamp int64, relative offset uint32), one entry for a
//	            batch whose max timestamp exceeds the last entry's; the
//	            relative offset is that batch's base offset minus the
//	            segment's base offset
//
// The active segment keeps its index entries in memory and writes them on
// Flush and roll, so its index files hold exactly their entries, or a
// prefix of them (nothing preallocated, nothing to trim), and at Close
// when the batches after their last entry on disk are more than walkBytes
// (256 KiB): the next Open walks those headers instead. Closed segments'
// indexes are whole; they are
// read when the segment is first read, and checked; a missing or
// inconsistent index (size not a multiple of the entry size, entries not
// increasing, an entry past the end of the data) is rebuilt from the data.
//
// The active segment also remembers where its newest batches (512 to 1024
// of them) start, in memory only: a read at or near the log end (a consumer
// keeping up) finds its batches there without reading the file. The list
// starts empty on Open and after a truncation, and is dropped on roll.
//
// Offset checkpoints are text: a header line "mq <kind> 1" ("1" is the
// format version), then the offset on its own line, kind being
// recovery-point, log-start or high-water-mark. The high-water mark is the
// replica's, not the log's: the log only stores it (CheckpointHighWatermark,
// written when it changed) and hands back what Open found
// (HighWatermarkCheckpoint, -1 without one), unclamped, since after a crash
// the log may end below it. The leader-epoch checkpoint is
// "mq leader-epoch 1", the number of entries, and one "<epoch> <start
// offset>" line each. The sealed-segments file is "mq sealed-segments 1",
// the count, and "<base> <size> <next offset>" per closed segment, written
// on every roll; damaged-ranges is "mq damaged-ranges 1", the count, and
// one line per range (see damage.go). The cleaner checkpoint is
// "mq cleaner-offset 1", the first dirty offset, the count, and one
// "<from> <to> <unix ms> <tombstones>" line per offset range telling when
// a pass first cleaned it and whether it may still hold tombstones (see
// cleanstate.go). The producer-state snapshot is binary (see
// producer.go): "MQPS", version byte 2 (1 is read too), the log end offset
// it is valid at, the producers with their epoch, coordinator epoch, open
// transaction's first offset, last timestamp and last five batches (first
// and last sequence, base and last offset), and a CRC32C; Close writes it only when
// the batches after the last one are more than walkBytes, which the next
// Open reads instead. Every checkpoint is
// replaced atomically: temporary file, fsync, rename, fsync of the
// directory. A checkpoint that cannot be parsed is ignored with a warning
// and its contents rebuilt from the log (the recovery point then is the
// start of the log: everything is scanned).
//
// The leader-epoch history is checkpointed before the recovery point
// passes the start of an epoch (a leader's BeginEpoch and a new epoch's
// first append change it in memory only): what recovery does not scan is
// covered by it, and what it scans rebuilds it, since every batch carries
// its epoch. A log with one segment and no recovery point checkpoint has
// nothing durable; a log writes one before its first roll, since closed
// segments without one are taken for fsynced whole (a roll fsyncs them).
//
// # Recovery
//
// Open lists the directory and stats the segments. Segments below the
// recovery point are trusted and not read: a clean shutdown (recovery point
// = log end offset) reads only the checkpoints and the active segment's
// indexes and the batches after its last index entry. Segment files are
// opened lazily, with the indexes of at most 32 closed segments in memory
// (least recently used dropped first), so a log of thousands of segments
// opens quickly. The descriptors of segment files, active ones included,
// are bounded across logs by the Files given in Options.Files (a broker's
// log.max.open.files): an idle one may be closed, and is opened again by
// name on its next use; see Files. From the segment holding the
// recovery point on, every batch is checked (header, magic, length within
// the file, CRC32C, base offset equal to the previous batch's last offset
// + 1) and the indexes are rebuilt. The first bad batch and everything
// after it (later segments included) are removed when it lies past the
// recovery point (a crash cut writes no fsync had covered), with a Warn
// log line naming the segment, the position and the number of bytes
// dropped; so are the segments after one that ends before the next one
// starts (a power loss cut its unsynced tail). Below the recovery point a
// bad batch is damage instead (see Damage): those bytes were fsynced, so
// nothing good is cut. The scanned segments are fsynced before the
// recovery point passes them: after a killed process they may be in the
// page cache only. The producer state is loaded from its snapshot and
// brought up to date by reading the batch headers after it; the
// leader-epoch history by the scanned batches.
//
// # Clean shutdown
//
// A Close that flushed everything records what it left
// (Log.CleanShutdown: the log end offset and the active segment's base
// and size). A caller that closes many logs keeps those records in one
// file (WriteCleanShutdownFile) and, at the next start, takes it
// (TakeCleanShutdownFile, which removes it durably before returning) and
// gives each Open its record (Options.Clean). Open trusts a record only
// where the files agree: the recovery point checkpoint equals the recorded
// end (an empty log may have none), the active segment has the recorded
// base and size, and the batch headers after its last index entry on disk
// end exactly there. Then it does no recovery scan: it keeps the indexes
// on disk and indexes the walked batches, rewrites no checkpoint and
// fsyncs nothing; the active segment's bytes are checked by the first read
// that returns them, like a closed segment's. A record the files
// contradict is logged at Warn and ignored: the log is recovered as after
// a crash. Apart from that, a checkpoint this process wrote durably is
// not written again with the same contents.
//
// # Many logs at once
//
// A caller opening or closing many logs together puts them in one
// SyncBatch (Options.Batch at Open, SyncBatch.Add before Close): their
// checkpoints go to temporary files without fsync, their new directory
// entries and, at Close, their data are not fsynced, and Commit syncs the
// file system (syncfs), renames the temporary files into place and syncs
// it again. A crash leaves every checkpoint old or new, as the fsyncs
// would; nothing of a batch may be served, or recorded as a clean
// shutdown, before Commit returned. A log with Checkpoints records its
// recovery point in them only at Commit, after the first sync: until then
// its data may not be durable.
//
// # Damage
//
// Every byte the log serves has been checked by this process: batches it
// appended were validated by the caller, recovery checks what it scans,
// and what it has not checked (after a restart, the segments below the
// recovery point, which Open does not read) is checked by the read that
// first returns it (header, dense offsets, CRC of each batch of the Region)
// or by Scrub, which a caller runs in the background at a bounded rate.
// Open also compares each trusted closed segment's size with
// sealed-segments, so a segment cut short or gone is known before anyone
// reads it.
//
// Bad bytes are damage, never a reason to drop good data: the extent of a
// bad batch is found by looking for the next good batch after it (its
// claimed length first, then every position; a candidate must pass its CRC
// and be followed by a header continuing its offsets), and the offsets in
// between become a Damage, logged once at Error level, counted
// (DamageFound), recorded in damaged-ranges and listed by Damaged. A
// Region stops before damage; a read at a damaged offset is a
// *DamagedError (ErrDamaged). Only past the recovery point, where a crash
// can cut writes no fsync had covered, is a bad batch a torn write, cut
// off by recovery with what follows it. A damaged
// range goes when retention or DeleteRecordsBefore passes it, or is
// SkipDamaged: then its offsets are a gap that reads step over, like the
// gaps of a compacted log.
//
// # Compaction
//
// Clean runs one cleaning pass (Kafka's log cleaner, cleanup.policy
// compact); the caller decides when, from CleanableState (the dirty
// ratio, MustClean for max.compaction.lag.ms, and TombstonesDue for
// tombstones past their delete retention), and passes the topic's
// settings in CleanOptions:
//
//	c, err := l.CleanableState(log.CleanOptions{Now: now, MinCompactionLag: lag, MaxOffset: hw})
//	if c.DirtyRatio >= minCleanableRatio || c.MustClean || c.TombstonesDue {
//		res, err := l.Clean(ctx, log.CleanOptions{Now: now, DeleteRetention: ..., MaxOffset: hw, ...})
//	}
//
// A pass cleans the closed segments from the first one up to the first
// that is not cleanable: never the active segment, nothing at or past the
// recovery point, CleanOptions.MaxOffset (a replica's high-water mark) or
// a damaged range, and no segment whose newest timestamp is within
// MinCompactionLag. It puts the keys of the dirty part (from the first
// dirty offset, the cleaner checkpoint) in an offset map, key hash →
// latest offset, bounded by DedupeBufferBytes; when the map fills, the
// pass cleans up to the batch where it filled (CleanResult.CleanedTo) and
// the next pass goes on from there. Then it rewrites the segments holding
// offsets below CleanedTo, in groups of consecutive segments whose sizes
// add up to at most SegmentBytes, each group becoming one segment:
//
//   - A record stays unless a later record of its key is in the map, or it
//     is a tombstone (null value) whose offset was first cleaned at least
//     DeleteRetention ago (cleaner-offset-checkpoint keeps, per offset
//     range, the time of the first pass that cleaned it; a pass records
//     its dirty range with its own time). The checkpoint also tells, per
//     range, whether the last pass over it kept a tombstone there; once
//     such a range is DeleteRetention old, CleanableState reports
//     TombstonesDue and a pass removes them even when nothing was written
//     since (no dirty bytes): such a pass has no new key in its map and
//     drops only those tombstones. Kafka keeps that horizon in the batch
//     header (KIP-534) instead. Records without a key always stay, since
//     the cleaner cannot know what they replace: a broker refuses them in
//     compacted topics, as Kafka does, but a log may hold some written
//     before its topic compacted.
//   - Offsets never change, and batches still tile the offsets: each
//     batch starts right after the one before, so reads, indexes,
//     recovery and the scrubber see a log like any other. The records
//     inside have gaps: a batch's last offset delta covers the offsets of
//     records it lost.
//   - Batches without a producer id, with CreateTime timestamps, in one
//     leader epoch, are merged: their surviving records are written into
//     batches of up to 64 KiB (before compression), in the codec of their
//     first batch (batches of other codecs start a new batch), timestamps
//     and headers as they were. The surviving records of a batch without
//     a producer id stamped with the log append time make a batch of their
//     own, with that time. The offsets of a batch left with nothing join
//     such a batch next to them (whatever its size), or else a batch
//     without records (record count 0, the last offset delta covering
//     them); a batch without records carries the leader epoch of the
//     offsets it covers, so a leader-epoch history rebuilt from the log is
//     unchanged, and as its timestamp the largest of the batches it
//     replaced, so retention.ms ages it as it aged them.
//   - A group whose result would hold no record at all is rewritten
//     together with the next group that keeps one, its offsets leading
//     that group's first batch, or with the group before it when no such
//     group follows in the pass: a read returns batches of one segment,
//     and a consumer that moves on by the records it reads (kafka-go's
//     reader) would fetch a segment of record-less batches forever. Kafka
//     drops such batches and leaves a gap; batches here tile the offsets,
//     so a batch without records is left only where no batch of the two
//     kinds above can take its offsets: between batches of idempotent
//     producers, at a leader epoch change, and a producer's newest batch
//     (below).
//   - Batches of an idempotent producer keep their header (base offset,
//     last offset delta, producer id, epoch, base sequence, timestamps, the
//     log append time) and codec; their surviving records are written
//     again, CRC recomputed. A producer's newest batch stays, without
//     records if none is left, so that a producer state rebuilt from the
//     log still knows its last sequence; the others go when they are left
//     with nothing. The producer state in memory and in its snapshot is
//     not touched: duplicates and sequence gaps are detected as before.
//   - A batch of an aborted transaction loses its records and keeps its
//     header (offsets, producer, sequence, the transactional bit), so a
//     producer state rebuilt from the log still sees the transaction its
//     abort marker ends; it puts no key in the offset map (an aborted
//     value must not hide an older committed one). The batches of
//     committed transactions are cleaned as an idempotent producer's
//     (above). Markers are copied as they are, and so are the batches at
//     or after CleanedTo: Kafka also removes a marker
//     once delete.retention.ms passed after its transaction's records
//     went; here markers stay, costing a batch each. A pass never reaches
//     the first open transaction (it may yet abort), and a group's
//     aborted-transaction entries are written to the new segment's
//     .txnindex before its swap commits.
//
// Since merged batches start where their first input batch started, an
// offset that was a batch boundary may now be inside a batch: a consumer
// reading from it skips the records before it, as with any batch, but a
// follower fetching from it gets a batch starting before its log end.
// Passing the high-water mark as MaxOffset keeps every in-sync follower
// at or past the cleaned part. Each replica cleans its own log; replicas
// may differ in layout, never in the latest value per key below the
// high-water mark.
//
// The rewritten segment's indexes are built from the batches written. A
// group is swapped in atomically (see cleanswap.go): its files are written
// as *.cleaned and fsynced, renamed to *.swap (the .log last) and the
// directory fsynced, which commits the swap; then sealed-segments is
// written for the new layout, the group's other segments removed and the
// *.swap files renamed over the first segment's. Open finishes a committed
// swap (a .log.swap whose batches end where a segment starts) and removes
// the files of one that did not commit, so a crash at any point leaves the
// old segments or the new one. Groups are swapped in offset order: a
// tombstone is only ever removed with, or after, the older records of its
// key. Appends and reads go on during a pass; the swap holds the log's
// lock. A truncation, retention or Close that changes a group's segments
// meanwhile makes the pass stop before it, without advancing CleanedTo.
//
// # Transactions
//
// A transactional batch (attributes bit 4) opens its producer's
// transaction on the log, at its base offset, unless one is open; a
// control batch (bit 5) holding a commit or abort marker
// (record.ControlType) closes it. LastStableOffset(hw) is hw, or the first
// offset of the oldest open transaction when lower: read_committed
// readers stop there. AppendMarker appends a marker for the transaction
// coordinator (WriteTxnMarkers); Append refuses, atomically with the
// write, a marker from an older producer epoch (ErrInvalidProducerEpoch)
// or coordinator epoch (ErrCoordinatorFenced), a transactional batch from
// an older producer epoch, and a producer's non-transactional batch while
// its transaction is open (ErrInvalidTxnState). After MarkTxnVerified
// (KIP-890: the coordinator confirmed the producer's transaction) a
// transactional batch that would open a transaction needs that
// confirmation, which the producer's next marker ends.
//
// An abort marker records an AbortedTxn (producer id, first offset, the
// marker's offset, the LSO it left) in memory and in its segment's
// .txnindex (txnindex.go: Kafka's 34-byte entries), appended and fsynced
// with the marker. The index is a cache of the markers: Open drops the
// entries from where it replays the batch headers into the producer
// state (the snapshot's offset, or the log's start without a usable
// snapshot or with an unreadable index) and makes them again, rewriting
// the files that differ; TruncateTo does the same, so an entry past the
// cut goes and its transaction is open again; a deleted segment takes
// its file and entries. AbortedTxns answers a read_committed read with
// the entries overlapping it. Producers lists the producer state
// (DescribeProducers).
//
// # Durability
//
// Config.FlushPolicy says when data is fsynced: FlushOS on roll, Flush and
// Close; FlushInterval also every Config.FlushInterval (a background
// goroutine on the Options.Clock); FlushAlways before Append returns, with
// concurrent appends sharing one fsync (group commit). RecoveryPoint tells
// what is known durable. A failed write is undone (the file is truncated
// back) and Append returns the error with nothing appended; when the undo
// fails the log enters the failed state (ErrFailed): appends fail until it
// is reopened, reads of earlier data go on. A failed fsync under
// FlushAlways rolls the log back to its last durable point and fails every
// append waiting for it; under the other policies it puts the log in the
// failed state, since acknowledged data may be lost.
//
// Every file operation goes through Options.FS, a vfs.FS (nil: the real
// file system); outside a SyncBatch a checkpoint is replaced with
// vfs.WriteFileAtomic, and directories are made and fsynced with
// vfs.MkdirAllDurable and vfs.SyncDir. The tests run logs on a faultfs.FS
// to fail writes and fsyncs and on a crashfs.FS to cut the power, and
// check the guarantees above after each.
//
// Health tells whether appends are failing for the storage's sake (a full
// disk, an I/O error, the failed state; not a batch refused for its
// contents or its producer), since when and with what error, until the
// next append that succeeds. Such an incident is logged twice, an Error
// line when it starts and an Info line with the number of failed appends
// when it ends, and counted in Options.Counters.
//
// # Concurrency
//
// Every method is safe for concurrent use. Appends (Append,
// AppendAsFollower) are serialized by one lock held only for the write
// system call and in-memory bookkeeping; under FlushAlways the fsync wait
// happens outside it. Reads (Read, ReadBytes) run concurrently with
// appends and with each other: they hold the lock shared only to look up
// positions, and see every batch whose append returned (under FlushAlways,
// possibly before it is durable: callers bound reads by a high-water mark).
// A Region stays readable after retention, DeleteRecordsBefore or
// TruncateTo, or a cleaning pass, delete its segment, until it is
// released. TruncateTo, DeleteRecordsBefore, EnforceRetention, Clean,
// CleanableState, SetConfig, Flush and Close may be called at any time
// (one Clean runs at a time; others wait); a Read racing a TruncateTo of
// the same offsets may fail.
//
// # Invariants
//
//   - Offsets are dense: each batch's base offset is the previous batch's
//     last offset + 1, and a segment's first batch has the segment's base
//     offset. (Records inside a cleaned batch may have gaps.)
//   - Batches below the log end offset are whole, or in a damaged range;
//     nothing at or above it, and nothing in a damaged range that is not
//     skipped, is ever returned, and nothing returned went unchecked by
//     this process.
//   - log start offset ≤ every readable offset < log end offset; segments
//     wholly below the log start offset are deleted.
//   - Everything below the recovery point is on stable storage, and so are
//     the index entries of the batches below it.
//   - The leader-epoch history has increasing epochs and non-decreasing
//     start offsets, all at most the log end offset: an epoch begun with
//     BeginEpoch starts at the log end until something is appended in it
//     (recovery, like truncation, drops it while it is empty).
package log
