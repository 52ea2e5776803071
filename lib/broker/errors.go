package broker

import (
	"context"
	"errors"

	"github.com/twmb/franz-go/pkg/kerr"

	"github.com/mqproject/mq/lib/auth"
	"github.com/mqproject/mq/lib/config"
	"github.com/mqproject/mq/lib/controller"
	"github.com/mqproject/mq/lib/coordinator"
	"github.com/mqproject/mq/lib/group"
	"github.com/mqproject/mq/lib/log"
	"github.com/mqproject/mq/lib/partition"
	"github.com/mqproject/mq/lib/queue"
	"github.com/mqproject/mq/lib/record"
	"github.com/mqproject/mq/lib/replica"
	"github.com/mqproject/mq/lib/tier"
	"github.com/mqproject/mq/lib/txn"
)

// This file is the one place where internal errors become Kafka error
// codes. Each internal error domain has one table saying what its errors
// mean to a Kafka client; each API family's mapping (produceError,
// fetchError, …) is a list of tables, most specific first, and a fallback
// for what none of them names. So an error reads the same in every API,
// unless an API's own table says otherwise (and why).

// errorCode is one row of a table: an internal error, matched with
// errors.Is, and the Kafka error it becomes.
type errorCode struct {
	err  error
	code *kerr.Error
}

// Errors of lib/broker itself, the same for every API.
var (
	errEmptyRecords     = errors.New("broker: produce without a record batch")
	errTransactional    = errors.New("broker: transactions are not supported")
	errControlBatch     = errors.New("broker: control batches cannot be produced")
	errTxnWithoutID     = errors.New("broker: transactional batches need the request's transactional id")
	errMessageTooLarge  = errors.New("broker: message too large")
	errInvalidAcks      = errors.New("broker: acks must be -1, 0 or 1")
	errUnknownTopicID   = errors.New("broker: unknown topic id")
	errInvalidTimestamp = errors.New("broker: invalid list offsets timestamp")
	errInvalidTopicName = errors.New("broker: invalid topic name")
	errUnknownTopic     = errors.New("broker: unknown topic")
	errKeyless          = errors.New("broker: a record without a key in a compacted topic")
	// errTopicAuthorization: the ACLs refuse the principal the topic.
	errTopicAuthorization = errors.New("broker: topic authorization failed")
	// errInternalTopic: clients may not write internal topics, whatever
	// the ACLs; only the coordinators do.
	errInternalTopic = errors.New("broker: internal topics are written by the coordinators only")
	// errShareGroupID is a consumer group's request for the id of a
	// share group.
	errShareGroupID = errors.New("broker: the group is a share group, not a consumer group")
)

var brokerCodes = []errorCode{
	{errMovedToTieredStorage, kerr.OffsetMovedToTieredStorage},
	{errTieredDeleteRecords, kerr.PolicyViolation},
	{errShareGroupID, kerr.GroupIDNotFound},
	{errUnknownTopic, kerr.UnknownTopicOrPartition},
	{errTopicAuthorization, kerr.TopicAuthorizationFailed},
	// Kafka's answer to a client's produce to, or DeleteRecords of, an
	// internal topic.
	{errInternalTopic, kerr.InvalidTopicException},
	{errUnknownTopicID, kerr.UnknownTopicID},
	{errInvalidTopicName, kerr.InvalidTopicException},
	{errInvalidAcks, kerr.InvalidRequiredAcks},
	{errMessageTooLarge, kerr.MessageTooLarge},
	// mq has no transaction coordinator; this is what Kafka answers a
	// producer that may not use transactions, and clients treat it as
	// fatal for the transactional producer instead of retrying forever.
	{errTransactional, kerr.TransactionalIDAuthorizationFailed},
	{errEmptyRecords, kerr.InvalidRecord},
	{errControlBatch, kerr.InvalidRecord},
	{errTxnWithoutID, kerr.InvalidRecord},
	// The coordinator could not be asked whether a transactional batch
	// belongs to an ongoing transaction: the producer retries.
	{errTxnVerification, kerr.NotEnoughReplicas},
	{errKeyless, kerr.InvalidRecord},
	{errInvalidTimestamp, kerr.InvalidRequest},
}

// recordCodes: a batch that fails its checks.
var recordCodes = []errorCode{
	{record.ErrBadCount, kerr.InvalidRecord},
	{record.ErrBadMagic, kerr.InvalidRecord},
	{record.ErrBadCRC, kerr.CorruptMessage},
	{record.ErrTruncated, kerr.CorruptMessage},
	{record.ErrBadLength, kerr.CorruptMessage},
	{record.ErrBadCodec, kerr.CorruptMessage},
	{record.ErrCorrupt, kerr.CorruptMessage},
	{record.ErrTooLarge, kerr.MessageTooLarge},
	{record.ErrBadControl, kerr.InvalidRecord},
}

// logCodes: a partition log's refusals.
var logCodes = []errorCode{
	{log.ErrOffsetOutOfRange, kerr.OffsetOutOfRange},
	// A remote segment deleted by retention between the lookup and the read.
	{tier.ErrNoRemoteData, kerr.OffsetOutOfRange},
	{tier.ErrNotFound, kerr.OffsetOutOfRange},
	// Not CORRUPT_MESSAGE, which is what Kafka answers: kgo retries that
	// one silently forever, so a consumer would hang at the damage.
	// INVALID_RECORD is not retriable for kgo and reaches the application
	// in every client (librdkafka as a consumer error, the Java client as
	// an exception), naming the partition.
	{log.ErrDamaged, kerr.InvalidRecord},
	{log.ErrOutOfOrderSequence, kerr.OutOfOrderSequenceNumber},
	{log.ErrInvalidProducerEpoch, kerr.InvalidProducerEpoch},
	{log.ErrInvalidTxnState, kerr.InvalidTxnState},
	{log.ErrCoordinatorFenced, kerr.TransactionCoordinatorFenced},
	{log.ErrUnknownProducerID, kerr.UnknownProducerID},
	// A log closed under a request was moved or deleted: the client looks
	// the leader up again.
	{log.ErrClosed, kerr.NotLeaderForPartition},
}

// partitionCodes: a lookup of the partitions this node hosts. Every API
// that reads brokerCodes reads these next.
var partitionCodes = []errorCode{
	{partition.ErrUnknownPartition, kerr.UnknownTopicOrPartition},
	{partition.ErrNotHosted, kerr.NotLeaderForPartition},
}

// replicaCodes: a partition replica's refusals.
var replicaCodes = []errorCode{
	// A fetch or Refetch as a replica id the leader does not know: what
	// Kafka answers, and a real follower re-reads the metadata on it.
	{replica.ErrNotReplica, kerr.NotLeaderForPartition},
	{replica.ErrNotLeader, kerr.NotLeaderForPartition},
	{replica.ErrClosed, kerr.NotLeaderForPartition},
	{replica.ErrFencedLeaderEpoch, kerr.FencedLeaderEpoch},
	{replica.ErrUnknownLeaderEpoch, kerr.UnknownLeaderEpoch},
	{replica.ErrNotEnoughReplicas, kerr.NotEnoughReplicas},
	{replica.ErrNotEnoughReplicasAfterAppend, kerr.NotEnoughReplicasAfterAppend},
	// Retriable: kgo strips the partition and fetches again (KIP-392's
	// answer of a replica whose high-water mark is behind).
	{replica.ErrHighWatermarkBehind, kerr.OffsetNotAvailable},
}

// controllerCodes: the controller's refusals of admin commands.
var controllerCodes = []errorCode{
	{controller.ErrTopicExists, kerr.TopicAlreadyExists},
	{controller.ErrInvalidACL, kerr.InvalidRequest},
	// One change too large for one controller record: Kafka refuses what
	// its limits forbid with POLICY_VIOLATION.
	{controller.ErrCommandTooLarge, kerr.PolicyViolation},
	{controller.ErrBrokerNotRegistered, kerr.BrokerIDNotRegistered},
	{controller.ErrBrokerInUse, kerr.InvalidRequest},
	{controller.ErrVoter, kerr.InvalidRequest},
	{auth.ErrInvalid, kerr.InvalidRequest},
	{auth.ErrUnacceptableUser, kerr.UnacceptableCredential},
	// The controller refused this node's certificate for what it asked:
	// the cluster's own authentication failed, not the client's.
	{controller.ErrNodeNotAuthorized, kerr.ClusterAuthorizationFailed},
	{controller.ErrUnknownTopic, kerr.UnknownTopicOrPartition},
	{controller.ErrUnknownPartition, kerr.UnknownTopicOrPartition},
	{controller.ErrUnknownTopicID, kerr.UnknownTopicID},
	{controller.ErrInvalidRequest, kerr.InvalidRequest},
	// Kafka's answer when it refuses an operation on an internal topic.
	{controller.ErrInternalTopic, kerr.InvalidTopicException},
	{controller.ErrInvalidPartitions, kerr.InvalidPartitions},
	{controller.ErrInvalidReplicationFactor, kerr.InvalidReplicationFactor},
	{controller.ErrInvalidReplicaAssignment, kerr.InvalidReplicaAssignment},
	{controller.ErrInvalidConfig, kerr.InvalidConfig},
	{controller.ErrStaleBrokerEpoch, kerr.StaleBrokerEpoch},
	{controller.ErrFencedLeaderEpoch, kerr.FencedLeaderEpoch},
	{controller.ErrInvalidUpdateVersion, kerr.InvalidUpdateVersion},
	{controller.ErrNotLeader, kerr.NotLeaderForPartition},
	{controller.ErrIneligibleReplica, kerr.IneligibleReplica},
	{controller.ErrElectionNotNeeded, kerr.ElectionNotNeeded},
	{controller.ErrPreferredLeaderNotAvailable, kerr.PreferredLeaderNotAvailable},
	{controller.ErrEligibleLeadersNotAvailable, kerr.EligibleLeadersNotAvailable},
	{controller.ErrNoReassignmentInProgress, kerr.NoReassignmentInProgress},
	// Retriable: the client refreshes metadata and finds the controller.
	{controller.ErrNotController, kerr.NotController},
	{controller.ErrClosed, kerr.NotController},
}

// configCodes: a config that is not one, or a bad value.
var configCodes = []errorCode{
	{config.ErrUnknownConfig, kerr.InvalidConfig},
	{config.ErrInvalidValue, kerr.InvalidConfig},
	{config.ErrNotDynamic, kerr.InvalidConfig},
	{config.ErrInvalidRequest, kerr.InvalidRequest},
	// Kafka refuses what its limits forbid with POLICY_VIOLATION.
	{config.ErrPartitionLimit, kerr.PolicyViolation},
}

// groupCodes: the group coordinator's refusals.
var groupCodes = []errorCode{
	{group.ErrNotCoordinator, kerr.NotCoordinator},
	{group.ErrLoadInProgress, kerr.CoordinatorLoadInProgress},
	{group.ErrCoordinatorUnavailable, kerr.CoordinatorNotAvailable},
	{group.ErrClosed, kerr.CoordinatorNotAvailable},
	{group.ErrInvalidGroupID, kerr.InvalidGroupID},
	{group.ErrUnknownMemberID, kerr.UnknownMemberID},
	{group.ErrMemberIDRequired, kerr.MemberIDRequired},
	{group.ErrIllegalGeneration, kerr.IllegalGeneration},
	{group.ErrRebalanceInProgress, kerr.RebalanceInProgress},
	{group.ErrFencedInstanceID, kerr.FencedInstanceID},
	{group.ErrInconsistentProtocol, kerr.InconsistentGroupProtocol},
	{group.ErrInvalidSessionTimeout, kerr.InvalidSessionTimeout},
	{group.ErrGroupNotFound, kerr.GroupIDNotFound},
	{group.ErrNonEmptyGroup, kerr.NonEmptyGroup},
	{group.ErrSubscribedToTopic, kerr.GroupSubscribedToTopic},
	{group.ErrMetadataTooLarge, kerr.OffsetMetadataTooLarge},
}

// txnCodes: the transaction coordinator's refusals.
var txnCodes = []errorCode{
	{txn.ErrNotCoordinator, kerr.NotCoordinator},
	{txn.ErrClosed, kerr.NotCoordinator},
	{txn.ErrLoadInProgress, kerr.CoordinatorLoadInProgress},
	{txn.ErrConcurrent, kerr.ConcurrentTransactions},
	{txn.ErrProducerIDMapping, kerr.InvalidProducerIDMapping},
	{txn.ErrProducerFenced, kerr.ProducerFenced},
	{txn.ErrInvalidState, kerr.InvalidTxnState},
	{txn.ErrInvalidTimeout, kerr.InvalidTransactionTimeout},
	{txn.ErrNotFound, kerr.TransactionalIDNotFound},
}

// queueCodes: share groups (KIP-932): membership, share sessions and
// acknowledgements.
var queueCodes = []errorCode{
	{queue.ErrUnknownMember, kerr.UnknownMemberID},
	{queue.ErrFencedMemberEpoch, kerr.FencedMemberEpoch},
	{queue.ErrInvalidHeartbeat, kerr.InvalidRequest},
	{queue.ErrInvalidRecordState, kerr.InvalidRecordState},
	{queue.ErrInvalidAck, kerr.InvalidRequest},
	{queue.ErrSessionNotFound, kerr.ShareSessionNotFound},
	{queue.ErrInvalidSessionEpoch, kerr.InvalidShareSessionEpoch},
}

// coordinatorCodes: state kept in an internal topic on another node that
// cannot be reached (clients retry), a share-partition of a topic ID the
// image does not hold, a share group's heartbeat for a consumer group's
// id, a change to the offsets of a share group with members.
var coordinatorCodes = []errorCode{
	{coordinator.ErrLeaderUnknown, kerr.CoordinatorNotAvailable},
	{coordinator.ErrClosed, kerr.CoordinatorNotAvailable},
	{coordinator.ErrUnknownTopicID, kerr.UnknownTopicID},
	{coordinator.ErrConsumerGroupID, kerr.GroupIDNotFound},
	{coordinator.ErrShareGroupNotEmpty, kerr.NonEmptyGroup},
}

// contextCodes: a request that ran out of time, or whose connection went.
var contextCodes = []errorCode{
	{context.DeadlineExceeded, kerr.RequestTimedOut},
	{context.Canceled, kerr.RequestTimedOut},
}

// kafkaCode maps err through the tables in order: the first row whose
// error err matches decides; nil is 0, and an error no table names is
// fallback.
func kafkaCode(err error, fallback *kerr.Error, tables ...[]errorCode) int16 {
	if err == nil {
		return 0
	}
	for _, t := range tables {
		for _, row := range t {
			if errors.Is(err, row.err) {
				return row.code.Code
			}
		}
	}
	return fallback.Code
}

// produceError maps an error of the produce path to its Kafka error code.
// Anything unnamed is the disk's fault (a full disk, an I/O error), which
// producers retry.
func produceError(err error, version int16) int16 {
	code := kafkaCode(err, kerr.KafkaStorageError, brokerCodes, partitionCodes, replicaCodes, logCodes, recordCodes, contextCodes)
	// INVALID_RECORD exists from Produce v8 (KIP-467); older clients know
	// the same condition as CORRUPT_MESSAGE.
	if code == kerr.InvalidRecord.Code && version < 8 {
		code = kerr.CorruptMessage.Code
	}
	return code
}

// fetchError maps an error of the fetch path to its Kafka error code.
func fetchError(err error) int16 {
	return kafkaCode(err, kerr.KafkaStorageError, brokerCodes, partitionCodes, replicaCodes, logCodes)
}

// offsetsError maps an error of ListOffsets to its Kafka error code.
func offsetsError(err error) int16 {
	return kafkaCode(err, kerr.KafkaStorageError, brokerCodes, partitionCodes, replicaCodes, logCodes, contextCodes)
}

// epochsError maps an error of OffsetForLeaderEpoch to its Kafka error
// code.
func epochsError(err error) int16 {
	return kafkaCode(err, kerr.KafkaStorageError, brokerCodes, partitionCodes, replicaCodes, logCodes)
}

// metadataCodes: Metadata creates topics on the fly (auto-create), and
// clients of Metadata do not know NOT_CONTROLLER there: a controller that
// is not reachable yet is COORDINATOR_NOT_AVAILABLE, which they retry.
var metadataCodes = []errorCode{
	{controller.ErrNotController, kerr.CoordinatorNotAvailable},
	{controller.ErrClosed, kerr.CoordinatorNotAvailable},
	{context.DeadlineExceeded, kerr.CoordinatorNotAvailable},
	{context.Canceled, kerr.CoordinatorNotAvailable},
}

// metadataError maps an error of Metadata (and InitProducerId) to its
// Kafka error code.
func metadataError(err error) int16 {
	return kafkaCode(err, kerr.UnknownServerError, metadataCodes, brokerCodes, partitionCodes, controllerCodes)
}

// adminError is an admin refusal that carries its own Kafka error and
// message (validation of a request's fields).
type adminError struct {
	code *kerr.Error
	msg  string
}

func (e *adminError) Error() string { return e.code.Message + ": " + e.msg }

// kafkaError maps an error of the admin APIs to its Kafka error code and
// the message for the response's ErrorMessage.
func kafkaError(err error) (int16, *string) {
	if err == nil {
		return 0, nil
	}
	msg := err.Error()
	var ae *adminError
	if errors.As(err, &ae) {
		return ae.code.Code, &ae.msg
	}
	return kafkaCode(err, kerr.UnknownServerError, brokerCodes, partitionCodes, controllerCodes, configCodes, contextCodes), &msg
}

// shareError maps an error of the share-partition APIs (ShareFetch,
// ShareAcknowledge, the share group offsets) to its Kafka code.
func shareError(err error) int16 {
	return kafkaCode(err, kerr.KafkaStorageError, queueCodes, coordinatorCodes, brokerCodes, partitionCodes, replicaCodes, logCodes, contextCodes)
}

// groupError maps an error of the group APIs to its Kafka error code.
//
// A failure to write __consumer_offsets is NOT_COORDINATOR when this node
// lost the partition's leadership (clients look the coordinator up again),
// REQUEST_TIMED_OUT when the in-sync replicas did not confirm it in time,
// and COORDINATOR_NOT_AVAILABLE otherwise (clients retry), as Kafka maps
// its storage errors for these APIs.
func groupError(err error) int16 {
	var se *group.StoreError
	if errors.As(err, &se) {
		if coordinator.IsNotLeader(se.Err) {
			return kerr.NotCoordinator.Code
		}
		if errors.Is(se.Err, context.DeadlineExceeded) {
			return kerr.RequestTimedOut.Code
		}
		return kerr.CoordinatorNotAvailable.Code
	}
	return kafkaCode(err, kerr.UnknownServerError, groupCodes, queueCodes, brokerCodes, partitionCodes, coordinatorCodes)
}

// txnError maps an error of the transaction APIs to its Kafka error code
// (txnCode turns PRODUCER_FENCED into what older versions know). A
// failure to write __transaction_state is NOT_COORDINATOR when this node
// lost the partition's leadership, else COORDINATOR_NOT_AVAILABLE (clients
// retry), as Kafka maps its storage errors for these APIs; so is a
// producer id the controller could not hand out.
func txnError(err error) int16 {
	var se *txn.StoreError
	if errors.As(err, &se) {
		if coordinator.IsNotLeader(se.Err) {
			return kerr.NotCoordinator.Code
		}
		return kerr.CoordinatorNotAvailable.Code
	}
	return kafkaCode(err, kerr.CoordinatorNotAvailable, txnCodes, coordinatorCodes)
}

// skipDamagedError maps an error of SkipDamaged to its Kafka error code.
func skipDamagedError(err error) int16 {
	return kafkaCode(err, kerr.KafkaStorageError, brokerCodes, partitionCodes, replicaCodes, logCodes)
}

// groupErrorMessage is the ErrorMessage for a code-carrying error, nil
// for none.
func groupErrorMessage(err error) *string {
	if err == nil {
		return nil
	}
	s := err.Error()
	return &s
}
