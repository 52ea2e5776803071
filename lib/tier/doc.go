// Package tier is mq's tiered storage: it copies the closed segments of
// partitions with remote.storage.enable to a remote object store,
// records them in the remote-log metadata the controller replicates
// (controller.RemoteLog), applies retention to the remote part, deletes
// the remote data of deleted topics, and reads remote segments back for
// Fetch and ListOffsets.
//
// # Use
//
//	store, err := tier.OpenStore(ctx, "file:///var/lib/mq/remote") // or s3://bucket?endpoint=…&region=…, mem://
//	t := tier.New(tier.Config{Store: store, Metadata: ctrl})
//	err = t.Sync(ctx, tier.Partition{…})        // on the leader, from lib/partition's tiering task
//	b, err := t.Read(ctx, remoteLog, offset, n) // whole batches of the remote segment holding offset
//
// # Store
//
// Stores are reached through gocloud.dev/blob. Credentials of an s3://
// store come from the environment and the AWS credential files, as the
// AWS SDK finds them; never from a flag, and the store's URL is logged
// without its query. A segment is five objects under
// "<topic id>/<partition>/<base offset>-<leader epoch>-<random>": .log
// (the data file as it was closed), .index and .timeindex (lib/log's
// formats), .epochs (the leader-epoch entries of its range, in the
// text of lib/log's leader-epoch checkpoint), .producers (the last
// batch of each idempotent producer in it, see producerState) and, for a
// segment holding abort markers, .txnindex (lib/log's aborted-transaction
// index entries of those markers; the record says so,
// RemoteSegment.TxnIndex, and a segment without one holds no abort
// marker). Only segments wholly below the last stable offset are
// uploaded (lib/partition passes it as Partition.HighWatermark when
// lower): a remote read is not cut there, so no open transaction's
// records are remote.
//
// # Uploads and the metadata
//
// Sync runs on a partition's leader only. It uploads, oldest first, the
// closed local segments wholly below the high-water mark that end after
// the remote log's end, and records each (controller.RecordRemoteSegment)
// with the leader's epoch. The controller refuses a record from any epoch
// but the partition's current one and a segment that does not start at
// the remote end, so a segment is recorded once, whichever leader
// uploaded it, and a new leader continues from what the image says. A
// segment whose record is refused has its objects deleted again. A new
// leader's segments may start before the remote end (replicas roll at
// their own sizes): the segment is then recorded from the remote end on
// (RemoteSegment.BaseOffset), its objects holding the earlier offsets too
// (ObjectBase), whose bytes (Skipped) the remote log's size leaves out. A leader that stops between uploading and recording
// leaves objects no record names; the next leader's first Sync deletes
// the partition's unrecorded objects of earlier epochs (sweep), which
// those epochs can never record.
//
// After each upload the log learns where the remote copy ends
// (log.SetRemoteEnd): local retention (local.retention.ms/bytes) deletes
// only segments below it, so a store that is down fills the local disk
// rather than lose data. Followers get the remote end from the image.
//
// # Retention
//
// Retention (retention.ms, retention.bytes) applies to the whole log:
// RetentionPlan counts the remote bytes plus the local bytes from the
// remote end on, so offsets held both remotely and locally count once
// (counting them twice made a new Kafka leader delete data within
// retention). The leader deletes the oldest remote segments first in the
// metadata, with its epoch (refused when stale: nothing is deleted),
// then their objects. A deleted topic's remote logs leave the image at
// once and its ID waits in Image.RemotePurges; Purge (run by the active
// controller's node) deletes its objects and then forgets it.
//
// # Reads
//
// Read finds the remote segment holding an offset in the image, the
// position from the segment's offset index (index objects stay in
// memory, at most maxIndexes of them), and returns whole batches from
// the one holding the offset, up to maxBytes, reading the data object
// through the Tier's Cache (below) in windows of at least 64 KiB. Every read gives up after
// Config.ReadTimeout. OffsetForTimestamp answers ListOffsets by
// timestamp from the time indexes, MaxTimestamp ListOffsets
// MAX_TIMESTAMP (the segment with the largest max timestamp in the
// metadata, then its time index). AbortedTxns gives a read_committed
// read of remote offsets its aborted transactions, as log.AbortedTxns
// does locally, from the .txnindex objects of the segments from the one
// read on (kept in memory with the indexes), saying when the caller must
// go on into the local log's (a transaction whose marker is past the
// remote end).
//
// # Reading remote objects: Cache
//
// A Cache holds fixed-size chunks (CacheConfig.ChunkBytes) of immutable
// remote objects, read with one ranged GET each through a Ranger, in at
// most CacheConfig.MaxBytes of memory, the GETs in flight included:
//
//	c := tier.NewCache(store, tier.CacheConfig{MaxBytes: 256 << 20})
//	defer c.Close()
//	n, err := c.ReadAt(ctx, key, size, p, off) // like io.ReaderAt
//	c.Forget(key)                              // the object was deleted
//
// Rules it keeps:
//   - One GET per chunk at a time: readers of a chunk that is loading wait
//     for its GET (they count as misses) rather than start another.
//   - GETs run on the cache's context, cancelled only by Close: a
//     reader's context bounds its own wait, and a reader that gives up
//     leaves the GET to finish for the others. A failed GET is not kept:
//     its waiting readers get the error, the next reader tries again.
//   - Read-ahead: a read that starts at an object's start, or within a
//     chunk of where one of the last four reads of that object ended, is
//     sequential; it starts the GETs of up to CacheConfig.ReadAhead chunks
//     past its end, in parallel, so a replay is bounded by the store's
//     bandwidth and not by one round trip per chunk. Read-ahead only
//     takes room that is free or held by chunks already read; it never
//     waits for room and never evicts a chunk nobody read yet.
//   - A read that needs a GET and finds no room evicts the least recently
//     used cached chunk that no reader is copying from, and otherwise
//     waits for room (GETs in flight end; readers unpin).
//   - The lock is never held across a GET: a slow store delays only the
//     reads that need its chunks.
//   - Objects are immutable: a read with another size than the object's
//     chunks were read with drops them first.
//
// # Goroutines and locks
//
// Cache.mu guards the cache's maps, LRU list, counters and every chunk's
// state; a chunk's data and error are written once by its GET goroutine
// before its done channel closes. One goroutine per GET in flight; Close
// cancels them and waits for them, so a Ranger must return when its
// context is cancelled.
//
// A Tier's methods may be called from any goroutine. idxMu guards the
// index objects in memory, lagMu the upload lag of each partition; no
// lock is held across a store request. Sync of one partition must not
// run concurrently with itself (lib/partition's one tiering goroutine
// calls it).
package tier
