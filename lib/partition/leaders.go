package partition

import (
	"context"
	"net"
	"strconv"
	"time"

	"github.com/mqproject/mq/lib/controller"
	"github.com/mqproject/mq/lib/peer"
)

// goneLeaderHold bounds how long after a leader's connection broke a
// Metadata answer naming it waits for the controller to elect another
// (Await). The controller fences a broker whose process is gone within
// tens of milliseconds, or, when that broker was the active controller
// too, once a new controller is elected and has probed it: one to two
// Raft election timeouts (0.5 s each) and a probe of up to 1 s
// (lib/controller), 2 s and more on a busy machine. A hold that ends
// first answers with the dead leader, and a client then waits its own
// retry interval (franz-go: 5 s) before it asks again; a longer hold
// costs only the clients that would otherwise wait that interval.
const goneLeaderHold = 4 * time.Second

// trackPeers has the Watch keep a connection to every other broker of
// img (peer.Watch.Track), to learn of its death at once.
func (m *Manager) trackPeers(img *controller.Image) {
	if m.cfg.Watch == nil {
		return
	}
	addrs := make(map[int32]string, len(img.Brokers))
	for id, b := range img.Brokers {
		if id == m.cfg.Settings.NodeID || b.Host == "" {
			continue
		}
		addr := net.JoinHostPort(b.Host, strconv.Itoa(int(b.Port)))
		if m.cfg.PeerTLS != nil {
			// As this node's followers do: the ssl:// listener, or none.
			if addr = SSLListener(b); addr == "" {
				continue
			}
		}
		addrs[id] = addr
	}
	m.cfg.Watch.Track(addrs, peer.WatchClientID+strconv.Itoa(int(m.cfg.Settings.NodeID)))
}

// Watch is the node's peer.Watch (nil when none was configured).
func (m *Manager) Watch() *peer.Watch { return m.cfg.Watch }

// Gone reports whether this node found broker id's process gone
// (peer.Watch) less than goneLeaderHold ago; never this node itself.
func (m *Manager) Gone(id int32) bool {
	w := m.cfg.Watch
	if w == nil || !w.Any() || id < 0 || id == m.cfg.Settings.NodeID {
		return false
	}
	since, ok := w.Gone(id)
	return ok && m.clock.Now().Sub(since) < goneLeaderHold
}

// LeaderGone reports whether img names a Gone broker as the leader of a
// partition of the topics (nil: every topic): the controller has not
// elected its partitions' new leaders yet.
func (m *Manager) LeaderGone(img *controller.Image, topics []string) bool {
	w := m.cfg.Watch
	if w == nil {
		return false
	}
	w.CheckHangups()
	if !w.Any() {
		return false
	}
	gone := func(t *controller.Topic) bool {
		for _, p := range t.Partitions {
			if m.Gone(p.Leader) {
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

// Await waits until held is false of the image (held names a Gone
// leader: LeaderGone, a coordinator's partition), the hold has passed,
// or ctx ends, and returns the image then. A client that lost its leader
// or coordinator asks again at once, and an answer it can use ends its
// stall; a stale one would send it back to the gone broker, to wait its
// own backoff (franz-go's MetadataMinAge is 5 s by default) before it
// asks again.
func (m *Manager) Await(ctx context.Context, held func(*controller.Image) bool) *controller.Image {
	t := m.clock.NewTimer(goneLeaderHold)
	defer t.Stop()
	start := m.clock.Now()
	for {
		changes, watched := m.ctrl.Changes(), m.cfg.Watch.Changed()
		img := m.ctrl.Image()
		if !held(img) {
			m.log.Info("an answer naming a gone broker waited for the controller", "waited", m.clock.Now().Sub(start))
			return img
		}
		select {
		case <-changes:
		case <-watched:
		case <-t.C():
			m.log.Info("an answer naming a gone broker waited the whole hold; answering as it is", "waited", m.clock.Now().Sub(start))
			return m.ctrl.Image()
		case <-ctx.Done():
			return m.ctrl.Image()
		}
	}
}
