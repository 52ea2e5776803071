package partition

import (
	"context"
	"time"

	"github.com/mqproject/mq/lib/controller"
	"github.com/mqproject/mq/lib/peer"
)

// goneLeaderHold bounds how long after a leader's connection broke a
// Metadata answer naming it waits for the controller to elect another
// (AwaitLeaders). The controller fences a broker whose process is gone
// within tens of milliseconds, or, when that broker was the active
// controller too, once a new controller is elected and has probed it: a
// Raft election timeout and a little more (lib/controller).
const goneLeaderHold = 2 * time.Second

// Watch is the node's peer.Watch (nil when none was configured).
func (m *Manager) Watch() *peer.Watch { return m.cfg.Watch }

// LeaderGone reports whether img names, as the leader of a partition of
// the topics (nil: every topic), a broker whose process this node found
// gone less than goneLeaderHold ago (peer.Watch): the controller has not
// elected its partitions' new leaders yet.
func (m *Manager) LeaderGone(img *controller.Image, topics []string) bool {
	w := m.cfg.Watch
	if w == nil || !w.Any() {
		return false
	}
	now := m.clock.Now()
	gone := func(t *controller.Topic) bool {
		for _, p := range t.Partitions {
			if p.Leader < 0 || p.Leader == m.cfg.Settings.NodeID {
				continue
			}
			if since, ok := w.Gone(p.Leader); ok && now.Sub(since) < goneLeaderHold {
				return true
			}
		}
		return false
	}
	if topics == nil {
		for _, t := range img.Topics {
			if gone(t) {
				return true
			}
		}
		return false
	}
	for _, name := range topics {
		if t := img.Topics[name]; t != nil && gone(t) {
			return true
		}
	}
	return false
}

// AwaitLeaders waits until the image names no gone leader for the topics
// (LeaderGone), the hold has passed, or ctx ends, and returns the image
// then. A client that lost its leader asks for metadata at once, and one
// it can use ends its stall; a stale answer would send it back to the
// gone broker and make it wait its metadata refresh interval (franz-go's
// MetadataMinAge, 5 s by default) before asking again.
func (m *Manager) AwaitLeaders(ctx context.Context, topics []string) *controller.Image {
	t := m.clock.NewTimer(goneLeaderHold)
	defer t.Stop()
	for {
		changes, watched := m.ctrl.Changes(), m.cfg.Watch.Changed()
		img := m.ctrl.Image()
		if !m.LeaderGone(img, topics) {
			return img
		}
		select {
		case <-changes:
		case <-watched:
		case <-t.C():
			return m.ctrl.Image()
		case <-ctx.Done():
			return m.ctrl.Image()
		}
	}
}
