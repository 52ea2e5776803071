package log

import (
	"errors"
	"fmt"
)

// Errors returned by Log methods. Test with errors.Is; most are wrapped with
// detail.
var (
	// ErrOffsetOutOfRange: a read below the log start offset or above the
	// log end offset, or DeleteRecordsBefore past the end.
	ErrOffsetOutOfRange = errors.New("log: offset out of range")
	// ErrOffsetMismatch: AppendAsFollower got a batch whose base offset is
	// not the log end offset.
	ErrOffsetMismatch = errors.New("log: base offset is not the log end offset")
	// ErrNotFound: OffsetForTimestamp found no record at or after the time.
	ErrNotFound = errors.New("log: not found")
	// ErrOutOfOrderSequence: an idempotent batch whose first sequence does
	// not follow the producer's last one (or is not 0 for a new producer or
	// a new producer epoch).
	ErrOutOfOrderSequence = errors.New("log: out of order sequence number")
	// ErrInvalidProducerEpoch: an idempotent batch from an older epoch of
	// its producer id (the producer was fenced).
	ErrInvalidProducerEpoch = errors.New("log: invalid producer epoch")
	// ErrUnknownProducerID is reserved for producer-state expiry (Kafka
	// ≥ 2.5 answers UNKNOWN_PRODUCER_ID for a producer whose state expired).
	// The log keeps producer state until retention removes the producer's
	// batches and answers ErrOutOfOrderSequence for an unknown producer id
	// with a sequence other than 0.
	ErrUnknownProducerID = errors.New("log: unknown producer id")
	// ErrInvalidTxnState: a producer's batch that does not fit its
	// transaction: a non-transactional batch while its transaction is
	// open, or a transactional one the Verifier did not find in an
	// ongoing transaction.
	ErrInvalidTxnState = errors.New("log: invalid transaction state")
	// ErrCoordinatorFenced: a transaction marker from a coordinator
	// epoch older than the last one the producer's markers carried.
	ErrCoordinatorFenced = errors.New("log: transaction coordinator fenced")
	// ErrClosed: the log was closed.
	ErrClosed = errors.New("log: closed")
	// ErrFailed wraps the error that put the log in the failed state: a
	// failed write could not be undone, or an fsync failed under a policy
	// other than FlushAlways. Appends fail until the log is reopened;
	// reads of what was appended before keep working.
	ErrFailed = errors.New("log: failed")
)

// CorruptionError reports bad bytes in a segment: a torn or corrupt batch
// found by recovery or by a read.
type CorruptionError struct {
	Segment  string // file name of the segment
	Position int64  // byte position of the bad batch in the segment
	Err      error

	// walkFrom and walkNext are where the read's walk over batch headers
	// last started (a trusted position and the offset there), for finding
	// which batch is bad: it may be one before Position whose length led
	// there.
	walkFrom, walkNext int64
}

func (e *CorruptionError) Error() string {
	return fmt.Sprintf("log: corrupt segment %s at position %d: %v", e.Segment, e.Position, e.Err)
}

func (e *CorruptionError) Unwrap() error { return e.Err }
