package broker

import (
	"errors"

	"github.com/twmb/franz-go/pkg/kerr"

	"github.com/mqproject/mq/lib/group"
)

// groupError maps an error of the group coordinator to its Kafka error
// code. This is the one place where group and offset errors become codes.
//
// A failure to write __consumer_offsets is NOT_COORDINATOR when this node
// lost the partition's leadership (clients look the coordinator up again)
// and COORDINATOR_NOT_AVAILABLE otherwise (clients retry), as Kafka maps
// its storage errors for these APIs.
func groupError(err error) int16 {
	var se *group.StoreError
	switch {
	case err == nil:
		return 0
	case errors.As(err, &se):
		if storeErrorIsNotLeader(se.Err) {
			return kerr.NotCoordinator.Code
		}
		return kerr.CoordinatorNotAvailable.Code
	case errors.Is(err, group.ErrNotCoordinator):
		return kerr.NotCoordinator.Code
	case errors.Is(err, group.ErrLoadInProgress):
		return kerr.CoordinatorLoadInProgress.Code
	case errors.Is(err, group.ErrCoordinatorUnavailable), errors.Is(err, group.ErrClosed):
		return kerr.CoordinatorNotAvailable.Code
	case errors.Is(err, group.ErrInvalidGroupID):
		return kerr.InvalidGroupID.Code
	case errors.Is(err, group.ErrUnknownMemberID):
		return kerr.UnknownMemberID.Code
	case errors.Is(err, group.ErrMemberIDRequired):
		return kerr.MemberIDRequired.Code
	case errors.Is(err, group.ErrIllegalGeneration):
		return kerr.IllegalGeneration.Code
	case errors.Is(err, group.ErrRebalanceInProgress):
		return kerr.RebalanceInProgress.Code
	case errors.Is(err, group.ErrFencedInstanceID):
		return kerr.FencedInstanceID.Code
	case errors.Is(err, group.ErrInconsistentProtocol):
		return kerr.InconsistentGroupProtocol.Code
	case errors.Is(err, group.ErrInvalidSessionTimeout):
		return kerr.InvalidSessionTimeout.Code
	case errors.Is(err, group.ErrGroupNotFound):
		return kerr.GroupIDNotFound.Code
	case errors.Is(err, group.ErrNonEmptyGroup):
		return kerr.NonEmptyGroup.Code
	case errors.Is(err, group.ErrSubscribedToTopic):
		return kerr.GroupSubscribedToTopic.Code
	case errors.Is(err, group.ErrMetadataTooLarge):
		return kerr.OffsetMetadataTooLarge.Code
	case errors.Is(err, errUnknownPartition):
		return kerr.UnknownTopicOrPartition.Code
	}
	return kerr.UnknownServerError.Code
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
