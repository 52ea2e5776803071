package pipe

import (
	"io"
	"net"
	"syscall"
	"testing"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
)

// TestFetchErrorOutlivesALostGroupSession: a group session that ended
// because the coordinator's connection broke (its broker was killed) or
// because the coordinator no longer knows the member is not the end of
// consuming, kgo joins again; a session the group refused, and a storage
// error, are.
func TestFetchErrorOutlivesALostGroupSession(t *testing.T) {
	refused := &net.OpError{Op: "dial", Net: "tcp", Err: syscall.ECONNREFUSED}
	for _, c := range []struct {
		name  string
		err   error
		fatal bool
	}{
		{"connection closed by the coordinator", &kgo.ErrGroupSession{Err: io.EOF}, false},
		{"coordinator's broker refuses connections", &kgo.ErrGroupSession{Err: refused}, false},
		{"coordinator moved", &kgo.ErrGroupSession{Err: kerr.NotCoordinator}, false},
		{"member expired", &kgo.ErrGroupSession{Err: kerr.UnknownMemberID}, false},
		{"generation unknown to a new coordinator", &kgo.ErrGroupSession{Err: kerr.IllegalGeneration}, false},
		{"session timeout refused", &kgo.ErrGroupSession{Err: kerr.InvalidSessionTimeout}, true},
		{"group not authorized", &kgo.ErrGroupSession{Err: kerr.GroupAuthorizationFailed}, true},
		{"storage error", kerr.KafkaStorageError, true},
		{"unexpected end of a file", io.ErrUnexpectedEOF, true},
	} {
		fetches := kgo.Fetches{{Topics: []kgo.FetchTopic{{Topic: "t", Partitions: []kgo.FetchPartition{{Partition: 0, Err: c.err}}}}}}
		err := fetchError(fetches, positions{})
		if got := err != nil; got != c.fatal {
			t.Errorf("%s: fetchError = %v, want fatal %v", c.name, err, c.fatal)
		}
	}
}
