package broker

import (
	"context"
	"errors"
	"fmt"
	"go/ast"
	"go/parser"
	"go/token"
	"io/fs"
	"path/filepath"
	"strings"
	"testing"

	"github.com/twmb/franz-go/pkg/kerr"

	"github.com/mqproject/mq/lib/config"
	"github.com/mqproject/mq/lib/controller"
	"github.com/mqproject/mq/lib/coordinator"
	"github.com/mqproject/mq/lib/group"
	"github.com/mqproject/mq/lib/log"
	"github.com/mqproject/mq/lib/partition"
	"github.com/mqproject/mq/lib/queue"
	"github.com/mqproject/mq/lib/record"
	"github.com/mqproject/mq/lib/replica"
)

// internalErrors are the sentinel errors of the packages below the broker,
// by qualified name. TestEveryInternalErrorHasItsCode finds them in the
// sources, so a new one cannot be forgotten here.
var internalErrors = map[string]error{
	"log.ErrInvalidTxnState":                    log.ErrInvalidTxnState,
	"log.ErrCoordinatorFenced":                  log.ErrCoordinatorFenced,
	"record.ErrBadControl":                      record.ErrBadControl,
	"queue.ErrUnknownMember":                    queue.ErrUnknownMember,
	"queue.ErrFencedMemberEpoch":                queue.ErrFencedMemberEpoch,
	"queue.ErrInvalidHeartbeat":                 queue.ErrInvalidHeartbeat,
	"queue.ErrInvalidRecordState":               queue.ErrInvalidRecordState,
	"queue.ErrInvalidAck":                       queue.ErrInvalidAck,
	"queue.ErrSessionNotFound":                  queue.ErrSessionNotFound,
	"queue.ErrInvalidSessionEpoch":              queue.ErrInvalidSessionEpoch,
	"queue.ErrBadSnapshot":                      queue.ErrBadSnapshot,
	"coordinator.ErrLeaderUnknown":              coordinator.ErrLeaderUnknown,
	"coordinator.ErrClosed":                     coordinator.ErrClosed,
	"coordinator.ErrUnknownTopicID":             coordinator.ErrUnknownTopicID,
	"coordinator.ErrConsumerGroupID":            coordinator.ErrConsumerGroupID,
	"coordinator.ErrShareGroupNotEmpty":         coordinator.ErrShareGroupNotEmpty,
	"partition.ErrUnknownPartition":             partition.ErrUnknownPartition,
	"partition.ErrNotHosted":                    partition.ErrNotHosted,
	"log.ErrOffsetOutOfRange":                   log.ErrOffsetOutOfRange,
	"log.ErrOffsetMismatch":                     log.ErrOffsetMismatch,
	"log.ErrNotFound":                           log.ErrNotFound,
	"log.ErrOutOfOrderSequence":                 log.ErrOutOfOrderSequence,
	"log.ErrInvalidProducerEpoch":               log.ErrInvalidProducerEpoch,
	"log.ErrUnknownProducerID":                  log.ErrUnknownProducerID,
	"log.ErrClosed":                             log.ErrClosed,
	"log.ErrFailed":                             log.ErrFailed,
	"log.ErrDamaged":                            log.ErrDamaged,
	"replica.ErrNotLeader":                      replica.ErrNotLeader,
	"replica.ErrNotReplica":                     replica.ErrNotReplica,
	"replica.ErrClosed":                         replica.ErrClosed,
	"replica.ErrFencedLeaderEpoch":              replica.ErrFencedLeaderEpoch,
	"replica.ErrUnknownLeaderEpoch":             replica.ErrUnknownLeaderEpoch,
	"replica.ErrNotEnoughReplicas":              replica.ErrNotEnoughReplicas,
	"replica.ErrStaleLeaderEpoch":               replica.ErrStaleLeaderEpoch,
	"record.ErrTruncated":                       record.ErrTruncated,
	"record.ErrBadLength":                       record.ErrBadLength,
	"record.ErrBadMagic":                        record.ErrBadMagic,
	"record.ErrBadCRC":                          record.ErrBadCRC,
	"record.ErrBadCount":                        record.ErrBadCount,
	"record.ErrBadCodec":                        record.ErrBadCodec,
	"record.ErrCorrupt":                         record.ErrCorrupt,
	"record.ErrTooLarge":                        record.ErrTooLarge,
	"controller.ErrNotController":               controller.ErrNotController,
	"controller.ErrClosed":                      controller.ErrClosed,
	"controller.ErrTopicExists":                 controller.ErrTopicExists,
	"controller.ErrUnknownTopic":                controller.ErrUnknownTopic,
	"controller.ErrUnknownPartition":            controller.ErrUnknownPartition,
	"controller.ErrInvalidPartitions":           controller.ErrInvalidPartitions,
	"controller.ErrInvalidReplicationFactor":    controller.ErrInvalidReplicationFactor,
	"controller.ErrInvalidReplicaAssignment":    controller.ErrInvalidReplicaAssignment,
	"controller.ErrInvalidConfig":               controller.ErrInvalidConfig,
	"controller.ErrInvalidBroker":               controller.ErrInvalidBroker,
	"controller.ErrInvalidCommand":              controller.ErrInvalidCommand,
	"controller.ErrUnknownCommand":              controller.ErrUnknownCommand,
	"controller.ErrInvalidPartitionState":       controller.ErrInvalidPartitionState,
	"controller.ErrInvalidProducerIDCount":      controller.ErrInvalidProducerIDCount,
	"controller.ErrInvalidACL":                  controller.ErrInvalidACL,
	"controller.ErrCommandTooLarge":             controller.ErrCommandTooLarge,
	"controller.ErrBrokerNotRegistered":         controller.ErrBrokerNotRegistered,
	"controller.ErrBrokerInUse":                 controller.ErrBrokerInUse,
	"controller.ErrVoter":                       controller.ErrVoter,
	"controller.ErrInvalidSnapshot":             controller.ErrInvalidSnapshot,
	"controller.ErrStaleLeaderEpoch":            controller.ErrStaleLeaderEpoch,
	"controller.ErrStaleBrokerEpoch":            controller.ErrStaleBrokerEpoch,
	"controller.ErrFencedLeaderEpoch":           controller.ErrFencedLeaderEpoch,
	"controller.ErrInvalidUpdateVersion":        controller.ErrInvalidUpdateVersion,
	"controller.ErrNotLeader":                   controller.ErrNotLeader,
	"controller.ErrIneligibleReplica":           controller.ErrIneligibleReplica,
	"controller.ErrElectionNotNeeded":           controller.ErrElectionNotNeeded,
	"controller.ErrPreferredLeaderNotAvailable": controller.ErrPreferredLeaderNotAvailable,
	"controller.ErrEligibleLeadersNotAvailable": controller.ErrEligibleLeadersNotAvailable,
	"controller.ErrNoReassignmentInProgress":    controller.ErrNoReassignmentInProgress,
	"controller.ErrVotersMismatch":              controller.ErrVotersMismatch,
	"controller.ErrNodeNotAuthorized":           controller.ErrNodeNotAuthorized,
	"controller.ErrRemoteSegmentExists":         controller.ErrRemoteSegmentExists,
	"controller.ErrInvalidRemoteDelete":         controller.ErrInvalidRemoteDelete,
	"config.ErrUnknownConfig":                   config.ErrUnknownConfig,
	"config.ErrInvalidValue":                    config.ErrInvalidValue,
	"config.ErrNotDynamic":                      config.ErrNotDynamic,
	"config.ErrInvalidRequest":                  config.ErrInvalidRequest,
	"config.ErrPartitionLimit":                  config.ErrPartitionLimit,
	"controller.ErrUnknownTopicID":              controller.ErrUnknownTopicID,
	"controller.ErrInvalidRequest":              controller.ErrInvalidRequest,
	"controller.ErrInternalTopic":               controller.ErrInternalTopic,
	"group.ErrNotCoordinator":                   group.ErrNotCoordinator,
	"group.ErrLoadInProgress":                   group.ErrLoadInProgress,
	"group.ErrCoordinatorUnavailable":           group.ErrCoordinatorUnavailable,
	"group.ErrClosed":                           group.ErrClosed,
	"group.ErrInvalidGroupID":                   group.ErrInvalidGroupID,
	"group.ErrUnknownMemberID":                  group.ErrUnknownMemberID,
	"group.ErrMemberIDRequired":                 group.ErrMemberIDRequired,
	"group.ErrIllegalGeneration":                group.ErrIllegalGeneration,
	"group.ErrRebalanceInProgress":              group.ErrRebalanceInProgress,
	"group.ErrFencedInstanceID":                 group.ErrFencedInstanceID,
	"group.ErrInconsistentProtocol":             group.ErrInconsistentProtocol,
	"group.ErrInvalidSessionTimeout":            group.ErrInvalidSessionTimeout,
	"group.ErrGroupNotFound":                    group.ErrGroupNotFound,
	"group.ErrNonEmptyGroup":                    group.ErrNonEmptyGroup,
	"group.ErrSubscribedToTopic":                group.ErrSubscribedToTopic,
	"group.ErrMetadataTooLarge":                 group.ErrMetadataTooLarge,
	"replica.ErrHighWatermarkBehind":            replica.ErrHighWatermarkBehind,
	"replica.ErrNotEnoughReplicasAfterAppend":   replica.ErrNotEnoughReplicasAfterAppend,
	"replica.ErrNotFollower":                    replica.ErrNotFollower,
	"replica.ErrTruncationNeeded":               replica.ErrTruncationNeeded,
	"replica.ErrLeaderLostRecords":              replica.ErrLeaderLostRecords,
	"replica.ErrOutOfLeaderRange":               replica.ErrOutOfLeaderRange,
}

// uncoded are the internal errors no table names, and why that is right:
// they never reach a handler, or the API's fallback is their code.
var uncoded = map[string]string{
	"queue.ErrBadSnapshot":                 "a share-partition state record that does not decode: the fallback, KAFKA_STORAGE_ERROR",
	"log.ErrOffsetMismatch":                "a follower's append; no client request sees it",
	"log.ErrNotFound":                      "ListOffsets answers offset -1 for it, as Kafka does",
	"log.ErrFailed":                        "a storage failure: the fallback, KAFKA_STORAGE_ERROR",
	"replica.ErrStaleLeaderEpoch":          "an older image applied; the follow loop logs it",
	"controller.ErrInvalidBroker":          "broker registration by mqd itself",
	"controller.ErrInvalidCommand":         "a Raft record that does not decode; the FSM logs it",
	"controller.ErrUnknownCommand":         "a Raft record of a newer release; the FSM logs it",
	"controller.ErrInvalidPartitionState":  "a partition state change by the controller itself",
	"controller.ErrInvalidProducerIDCount": "the broker asks for a fixed block size",
	"controller.ErrInvalidSnapshot":        "restoring a snapshot at start-up",
	"controller.ErrStaleLeaderEpoch":       "a partition state change by the controller itself",
	"controller.ErrVotersMismatch":         "a configuration conflict at start-up; mqd exits",
	"controller.ErrRemoteSegmentExists":    "the tiering task's own record of an upload; it logs it and tries again",
	"controller.ErrInvalidRemoteDelete":    "the tiering task's own remote retention; it logs it and tries again",
	"replica.ErrNotFollower":               "the replica fetcher's own calls; no client request sees it",
	"replica.ErrTruncationNeeded":          "the replica fetcher's own sequencing; no client request sees it",
	"replica.ErrLeaderLostRecords":         "the replica fetcher's own refusal to cut its log; no client request sees it",
	"replica.ErrOutOfLeaderRange":          "a leader's OFFSET_OUT_OF_RANGE as the replica fetcher sees it; no client request sees it",
}

var errorTables = map[string][]errorCode{
	"broker": brokerCodes, "partition": partitionCodes, "queue": queueCodes, "coordinator": coordinatorCodes, "record": recordCodes, "log": logCodes, "replica": replicaCodes,
	"controller": controllerCodes, "config": configCodes, "group": groupCodes, "context": contextCodes,
}

func TestEveryInternalErrorHasItsCode(t *testing.T) {
	found := map[string]bool{}
	for _, pkg := range []string{"log", "replica", "partition", "coordinator", "record", "controller", "config", "group", "queue"} {
		for _, name := range sentinelErrors(t, filepath.Join("..", pkg)) {
			q := pkg + "." + name
			found[q] = true
			err, ok := internalErrors[q]
			if !ok {
				t.Errorf("%s is new: add it to internalErrors, and to its package's table in errors.go (or to uncoded, saying why)", q)
				continue
			}
			inTable := ""
			for table, rows := range errorTables {
				for _, row := range rows {
					if row.err == err {
						inTable = table
					}
				}
			}
			switch _, isUncoded := uncoded[q]; {
			case inTable == "" && !isUncoded:
				t.Errorf("%s is in no table and not in uncoded", q)
			case inTable != "" && isUncoded:
				t.Errorf("%s is in table %s and in uncoded", q, inTable)
			case inTable != "" && inTable != pkg:
				t.Errorf("%s is in the %s table; it belongs in its own package's", q, inTable)
			}
		}
	}
	for q := range internalErrors {
		if !found[q] {
			t.Errorf("%s is listed but no longer declared", q)
		}
	}
}

// sentinelErrors returns the exported package-level Err* variables
// declared in the package in dir (tests excluded).
func sentinelErrors(t *testing.T, dir string) []string {
	t.Helper()
	fset := token.NewFileSet()
	pkgs, err := parser.ParseDir(fset, dir, func(fi fs.FileInfo) bool { return !strings.HasSuffix(fi.Name(), "_test.go") }, 0)
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, p := range pkgs {
		for _, f := range p.Files {
			for _, d := range f.Decls {
				gd, ok := d.(*ast.GenDecl)
				if !ok || gd.Tok != token.VAR {
					continue
				}
				for _, spec := range gd.Specs {
					for _, n := range spec.(*ast.ValueSpec).Names {
						if strings.HasPrefix(n.Name, "Err") {
							names = append(names, n.Name)
						}
					}
				}
			}
		}
	}
	return names
}

// TestAPIsMapErrorsAsKafkaClientsExpect checks each API family's mapping,
// its own rows first.
func TestAPIsMapErrorsAsKafkaClientsExpect(t *testing.T) {
	wrapped := func(err error) error { return fmt.Errorf("partition t-0: %w", err) }
	for _, tc := range []struct {
		api  string
		got  int16
		want *kerr.Error
	}{
		{"produce v9", produceError(wrapped(record.ErrBadCount), 9), kerr.InvalidRecord},
		{"produce v7: no INVALID_RECORD yet", produceError(wrapped(record.ErrBadCount), 7), kerr.CorruptMessage},
		{"produce", produceError(wrapped(replica.ErrNotEnoughReplicas), 9), kerr.NotEnoughReplicas},
		{"produce", produceError(wrapped(log.ErrClosed), 9), kerr.NotLeaderForPartition},
		{"produce", produceError(wrapped(errTransactional), 9), kerr.TransactionalIDAuthorizationFailed},
		{"produce: a full disk", produceError(errors.New("write: no space left on device"), 9), kerr.KafkaStorageError},
		{"produce", produceError(context.DeadlineExceeded, 9), kerr.RequestTimedOut},
		{"fetch", fetchError(wrapped(log.ErrDamaged)), kerr.InvalidRecord},
		{"fetch", fetchError(wrapped(log.ErrOffsetOutOfRange)), kerr.OffsetOutOfRange},
		{"list offsets", offsetsError(errInvalidTimestamp), kerr.InvalidRequest},
		{"metadata: no controller yet", metadataError(controller.ErrNotController), kerr.CoordinatorNotAvailable},
		{"metadata", metadataError(errInvalidTopicName), kerr.InvalidTopicException},
		{"admin: no controller", codeOnly(kafkaError(controller.ErrNotController)), kerr.NotController},
		{"admin", codeOnly(kafkaError(wrapped(config.ErrInvalidValue))), kerr.InvalidConfig},
		{"admin: its own code", codeOnly(kafkaError(&adminError{code: kerr.InvalidRequest, msg: "x"})), kerr.InvalidRequest},
		{"admin: unknown", codeOnly(kafkaError(errors.New("?"))), kerr.UnknownServerError},
		{"group", groupError(wrapped(group.ErrRebalanceInProgress)), kerr.RebalanceInProgress},
		{"group: offsets partition moved", groupError(&group.StoreError{Err: replica.ErrNotLeader}), kerr.NotCoordinator},
		{"group: offsets write failed", groupError(&group.StoreError{Err: errors.New("disk")}), kerr.CoordinatorNotAvailable},
		{"group: offsets write not replicated in time", groupError(&group.StoreError{Err: fmt.Errorf("wait: %w", context.DeadlineExceeded)}), kerr.RequestTimedOut},
		{"skip damaged", skipDamagedError(wrapped(log.ErrOffsetOutOfRange)), kerr.OffsetOutOfRange},
	} {
		if want := tc.want.Code; tc.got != want {
			t.Errorf("%s: code %v, want %s", tc.api, kerr.ErrorForCode(tc.got), tc.want.Message)
		}
	}
	if produceError(nil, 9) != 0 || fetchError(nil) != 0 || groupError(nil) != 0 || codeOnly(kafkaError(nil)) != 0 {
		t.Error("nil error is not 0")
	}
}

func codeOnly(code int16, _ *string) int16 { return code }
