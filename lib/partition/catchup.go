package partition

import (
	"context"
	"slices"
	"sync/atomic"
	"time"

	"github.com/mqproject/mq/lib/clock"
	"github.com/mqproject/mq/lib/controller"
)

// applyWait bounds how long a lookup waits for the follow loop to apply
// an image the controller holds already (catchUp). An apply opening many
// partitions takes longer; the lookup then answers with the retriable
// error it would have answered without waiting, and the lookups after it
// for the same image do not wait again.
const applyWait = time.Second

// applies tells waiters that an image was applied: apply closes the
// channel and puts a new one in its place.
type applies struct {
	version atomic.Uint64 // the Version of the image applied last
	ch      atomic.Pointer[chan struct{}]
	// waitedOut is the highest image version a catchUp gave up waiting
	// for: later lookups of that image answer at once.
	waitedOut atomic.Uint64
	// epochWaitedOut is the version of the controller's image when a
	// TopicAt gave up waiting for a newer leader epoch: until the image
	// changes, a client's epoch newer than it is not waited for again (a
	// client of a deleted topic, recreated under the same name, may ask
	// in the old topic's epochs).
	epochWaitedOut atomic.Uint64
	// hold, set by HoldFollowForTest, keeps the follow loop from applying
	// the images that come until it is closed.
	hold atomic.Pointer[chan struct{}]
}

// done records that img was applied and wakes the waiters.
func (a *applies) done(img *controller.Image) {
	a.version.Store(img.Version)
	ch := make(chan struct{})
	if old := a.ch.Swap(&ch); old != nil {
		close(*old)
	}
}

// changed returns a channel closed when the next image is applied.
func (a *applies) changed() <-chan struct{} {
	for {
		if ch := a.ch.Load(); ch != nil {
			return *ch
		}
		ch := make(chan struct{})
		a.ch.CompareAndSwap(nil, &ch)
	}
}

// behind reports whether h, the hosted replica of t's partition (nil:
// none is open), is in a state older than t gives it: not open though t
// places a replica here, a replica of an earlier topic of the same name,
// or in an earlier leader epoch. t comes from the controller's image,
// which the follow loop applies a moment later: a client told by another
// broker that this one leads the partition now may ask before.
func (m *Manager) behind(h *Hosted, t *controller.Topic, partition int32) bool {
	p := &t.Partitions[partition]
	if h == nil {
		return slices.Contains(p.Replicas, m.cfg.Settings.NodeID)
	}
	return h.topicID != t.ID || h.LeaderEpoch() < p.LeaderEpoch
}

// catchUp brings the hosted partitions up to the controller's current
// image when they are behind it: it applies the image itself when no
// apply is running, and otherwise waits, up to applyWait, for the
// running ones to reach it. It returns at once when the partitions are
// up to date, or when a wait for this image already gave up.
func (m *Manager) catchUp() {
	target := m.ctrl.Image().Version
	if m.applies.version.Load() >= target || m.applies.waitedOut.Load() >= target {
		return
	}
	var timer clock.Timer
	for {
		changed := m.applies.changed()
		if m.applies.version.Load() >= target {
			return
		}
		if m.syncMu.TryLock() {
			m.syncMu.Unlock()
			m.Refresh()
			return
		}
		if timer == nil {
			timer = m.clock.NewTimer(applyWait)
			defer timer.Stop()
		}
		select {
		case <-changed:
		case <-timer.C():
			m.applies.waitedOut.Store(max(m.applies.waitedOut.Load(), target))
			return
		case <-m.stop:
			return
		}
	}
}

// HoldFollowForTest keeps the follow loop from applying the images that
// come until release is called: it widens, for a test, the moment in
// which the controller holds an image the hosted partitions have not
// applied yet. Only tests call it.
func (m *Manager) HoldFollowForTest() (release func()) {
	hold := make(chan struct{})
	m.applies.hold.Store(&hold)
	return func() {
		if m.applies.hold.CompareAndSwap(&hold, nil) {
			close(hold)
		}
	}
}

// awaitHold waits while a test holds the follow loop (HoldFollowForTest),
// or until the Manager closes; false then.
func (m *Manager) awaitHold() bool {
	hold := m.applies.hold.Load()
	if hold == nil {
		return true
	}
	select {
	case <-*hold:
		return true
	case <-m.stop:
		return false
	}
}

// topicWait bounds how long a Metadata answer waits for this node's
// controller to catch up with the leader's log (AwaitTopics).
const topicWait = time.Second

// TopicsMissing reports whether img lacks one of topics.
func TopicsMissing(img *controller.Image, topics []string) bool {
	for _, name := range topics {
		if img.Topics[name] == nil {
			return true
		}
	}
	return false
}

// AwaitTopics returns the controller's image once this node's controller
// has applied the log as far as the active controller's reached when
// asked (controller.CatchUp), for at most topicWait: called when img
// lacks a topic a client asked for (TopicsMissing). The topic may have
// been created a moment ago through another broker, which told its
// client so; this node applies the command only when the leader's next
// message carries its commit. A topic that does not exist costs one
// round trip to the active controller, and no wait. On the active
// controller, whose image holds every command committed, img is
// returned as it is.
func (m *Manager) AwaitTopics(ctx context.Context, img *controller.Image) *controller.Image {
	if m.ctrl.IsLeader() {
		return img
	}
	ctx, cancel := context.WithTimeout(ctx, topicWait)
	defer cancel()
	if err := m.ctrl.CatchUp(ctx); err != nil {
		m.log.Debug("catching up with the controller for a topic asked", "err", err)
	}
	return m.ctrl.Image()
}

// TopicAt returns t, the topic named name in an image a handler read
// (nil: that image lacks it), or the topic in a newer image of the
// controller's when the client's current leader epoch for the partition
// (-1: none given) is newer than t's: the client learnt of an election
// this node's controller has not applied yet. It waits for that image up
// to applyWait, and then returns what the controller holds; once a wait
// ran out, it does not wait again until the controller's image changes.
func (m *Manager) TopicAt(name string, t *controller.Topic, partition, currentEpoch int32) *controller.Topic {
	known := func(t *controller.Topic) bool {
		return t != nil && partition >= 0 && int(partition) < len(t.Partitions) && t.Partitions[partition].LeaderEpoch >= currentEpoch
	}
	if currentEpoch < 0 || known(t) {
		return t
	}
	if m.ctrl.Image().Version <= m.applies.epochWaitedOut.Load() {
		return m.ctrl.Image().Topics[name]
	}
	timer := m.clock.NewTimer(applyWait)
	defer timer.Stop()
	for {
		changes := m.ctrl.Changes()
		t = m.ctrl.Image().Topics[name]
		if known(t) {
			return t
		}
		select {
		case <-changes:
		case <-timer.C():
			img := m.ctrl.Image()
			m.applies.epochWaitedOut.Store(max(m.applies.epochWaitedOut.Load(), img.Version))
			return img.Topics[name]
		case <-m.stop:
			return t
		}
	}
}
