package txn

import "errors"

// Errors of the coordinator's requests; lib/broker maps them to Kafka's
// codes.
var (
	ErrNotCoordinator       = errors.New("txn: not the coordinator of the transactional id")       // NOT_COORDINATOR
	ErrLoadInProgress       = errors.New("txn: loading the transactional id's partition")          // COORDINATOR_LOAD_IN_PROGRESS
	ErrConcurrent           = errors.New("txn: the transaction is changing state")                 // CONCURRENT_TRANSACTIONS
	ErrProducerIDMapping    = errors.New("txn: the producer id is not the transactional id's")     // INVALID_PRODUCER_ID_MAPPING
	ErrProducerFenced       = errors.New("txn: a newer producer has the transactional id")         // PRODUCER_FENCED
	ErrInvalidState         = errors.New("txn: not valid in the transaction's state")              // INVALID_TXN_STATE
	ErrInvalidTimeout       = errors.New("txn: transaction timeout out of range")                  // INVALID_TRANSACTION_TIMEOUT
	ErrNotFound             = errors.New("txn: no such transactional id")                          // TRANSACTIONAL_ID_NOT_FOUND
	ErrClosed               = errors.New("txn: coordinator closed")                                // NOT_COORDINATOR
	ErrCoordinatorNotActive = errors.New("txn: the transaction's record could not be written now") // COORDINATOR_NOT_AVAILABLE
)

// StoreError is a failure of the Store to append or to make a record
// durable.
type StoreError struct{ Err error }

func (e *StoreError) Error() string { return "txn: store: " + e.Err.Error() }
func (e *StoreError) Unwrap() error { return e.Err }
