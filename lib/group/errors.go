package group

import "errors"

// Errors of the coordinator. Each stands for one Kafka error code; the
// broker maps them (lib/broker/errors.go).
var (
	ErrNotCoordinator         = errors.New("group: this node is not the coordinator of the group")
	ErrLoadInProgress         = errors.New("group: the coordinator is loading the group's partition")
	ErrCoordinatorUnavailable = errors.New("group: the group is being removed")
	ErrInvalidGroupID         = errors.New("group: invalid group id")
	ErrUnknownMemberID        = errors.New("group: unknown member id")
	ErrMemberIDRequired       = errors.New("group: member id required")
	ErrIllegalGeneration      = errors.New("group: illegal generation")
	ErrRebalanceInProgress    = errors.New("group: rebalance in progress")
	ErrFencedInstanceID       = errors.New("group: fenced instance id")
	ErrInconsistentProtocol   = errors.New("group: inconsistent group protocol")
	ErrInvalidSessionTimeout  = errors.New("group: invalid session timeout")
	ErrGroupNotFound          = errors.New("group: group id not found")
	ErrNonEmptyGroup          = errors.New("group: group is not empty")
	ErrSubscribedToTopic      = errors.New("group: group is subscribed to the topic")
	ErrMetadataTooLarge       = errors.New("group: offset metadata too large")
	ErrClosed                 = errors.New("group: coordinator closed")
)
