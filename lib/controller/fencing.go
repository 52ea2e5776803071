package controller

import (
	"sync"
	"sync/atomic"

	"github.com/mqproject/mq/lib/probe"
)

// Why the active controller fenced a broker: the label values of
// mq_controller_broker_fencings_total.
const (
	// FencedSessionTimeout: no heartbeat within BrokerSessionTimeout.
	FencedSessionTimeout = "session_timeout"
	// FencedProcessGone: the broker's Raft port refused or reset a
	// probe (after its connection to the active controller ended, or
	// when a new active controller looked): the process is gone.
	FencedProcessGone = "process_gone"
)

// FencingReasons are the reasons a broker is fenced for.
var FencingReasons = []string{FencedSessionTimeout, FencedProcessGone}

// fencings counts the brokers this node fenced as the active controller,
// by reason (FencingReasons order).
type fencings [2]atomic.Uint64

func (f *fencings) add(reason string) {
	for i, r := range FencingReasons {
		if r == reason {
			f[i].Add(1)
		}
	}
}

// BrokerFencings returns how many times this node, as the active
// controller, fenced a broker since it started, by reason (every one of
// FencingReasons is there).
func (c *Controller) BrokerFencings() map[string]uint64 {
	out := make(map[string]uint64, len(FencingReasons))
	for i, r := range FencingReasons {
		out[r] = c.fencings[i].Load()
	}
	return out
}

// fence proposes the FenceBroker command of b, for reason, and counts and
// logs it when it changed the image (another check may have fenced b
// first).
func (c *Controller) fence(b Broker, reason string) error {
	data, err := encodeCommand(cmdFenceBroker, &fenceBrokerV2{ID: b.ID, Epoch: b.Epoch})
	if err != nil {
		return err
	}
	ctx, cancel := c.commandContext()
	defer cancel()
	res, err := c.applyLocal(ctx, data)
	if err == nil {
		err = res.err
	}
	if err != nil {
		c.logger.Warn("controller: fencing broker", "broker", b.ID, "epoch", b.Epoch, "reason", reason, "err", err)
		return err
	}
	if res.unchanged {
		return nil
	}
	c.fencings.add(reason)
	switch reason {
	case FencedSessionTimeout:
		c.logger.Info("controller: broker fenced: no heartbeat within the session timeout",
			"broker", b.ID, "epoch", b.Epoch, "reason", reason, "timeout", c.cfg.BrokerSessionTimeout)
	default:
		c.logger.Info("controller: broker fenced: its process is gone (its raft port refused or reset a probe)",
			"broker", b.ID, "epoch", b.Epoch, "reason", reason, "raft_addr", b.RaftAddr)
	}
	return nil
}

// processGone reports whether the process that listened at address is
// gone (probe.Gone), unless this controller is closing meanwhile.
func (c *Controller) processGone(address string) bool {
	return probe.Gone(c.closing, address) && c.closing.Err() == nil
}

// probeable returns broker id as img has it when the active controller
// may fence it for a dead process: registered with epoch, neither fenced
// nor in controlled shutdown, another node than this one, with a Raft
// address to probe.
func (c *Controller) probeable(id int32, epoch int64) (Broker, bool) {
	b, ok := c.Image().Brokers[id]
	if !ok || b.Epoch != epoch || !b.alive() || b.ID == c.cfg.NodeID || b.RaftAddr == "" {
		return Broker{}, false
	}
	return b, true
}

// fenceIfGone probes broker id at epoch and fences it when its process is
// gone and it sent no heartbeat since beats (its count of heartbeats
// when the evidence was taken).
func (c *Controller) fenceIfGone(id int32, epoch int64, beats uint64) {
	b, ok := c.probeable(id, epoch)
	if !ok {
		return
	}
	gone := c.processGone(b.RaftAddr)
	c.logger.Debug("controller: probed a broker's process", "broker", id, "epoch", epoch, "raft_addr", b.RaftAddr, "gone", gone)
	if gone && c.live.beats(id, epoch) == beats && c.isActive() {
		if b, ok := c.probeable(id, epoch); ok {
			c.fence(b, FencedProcessGone)
		}
	}
	if c.cfg.probed != nil {
		c.cfg.probed(id, gone)
	}
}

// rpcConnEnded runs when an RPC connection that carried heartbeats of
// brokers (ID to epoch) ends: on the active controller, not closing, it
// probes each of them.
func (c *Controller) rpcConnEnded(heartbeaters map[int32]int64) {
	if len(heartbeaters) == 0 || c.cfg.NoProcessProbes || c.closing.Err() != nil || !c.isActive() {
		return
	}
	c.logger.Debug("controller: a connection that carried heartbeats ended", "brokers", heartbeaters)
	for id, epoch := range heartbeaters {
		c.fenceIfGone(id, epoch, c.live.beats(id, epoch))
	}
}

// fenceGoneBrokers probes, at once, every broker of the image that is
// alive and not this node, and fences those whose process is gone: a new
// active controller does not wait a session timeout for the brokers that
// died with the former one.
func (c *Controller) fenceGoneBrokers() {
	img := c.Image()
	var wg sync.WaitGroup
	for _, id := range sortedKeys(img.Brokers) {
		b := img.Brokers[id]
		if _, ok := c.probeable(b.ID, b.Epoch); !ok {
			continue
		}
		beats := c.live.beats(b.ID, b.Epoch)
		wg.Go(func() { c.fenceIfGone(b.ID, b.Epoch, beats) })
	}
	wg.Wait()
}

// registeredBroker is the broker ID of a decoded RegisterBroker body.
func registeredBroker(body any) (int32, bool) {
	switch b := body.(type) {
	case *registerBrokerV1:
		return b.ID, true
	case *registerBrokerV2:
		return b.ID, true
	case *registerBrokerV3:
		return b.ID, true
	case *registerBrokerV4:
		return b.ID, true
	}
	return 0, false
}
