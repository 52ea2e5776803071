package partition

import (
	"github.com/mqproject/mq/lib/config"
	"github.com/mqproject/mq/lib/replica"
)

// throttles are the two sides of this node's replication throttle
// (KIP-73): one replica.Quota each, shared by every throttled replica,
// whose rates follow the dynamic broker configs of the image applied
// last, or the auto throttle when replication.throttle.auto.target.ms
// turns it on. lib/broker's fetch handler asks the leader side for its
// answers to throttled followers, the replica Fetchers the follower
// side; lib/broker's produce handler times each acks=all produce's wait
// for the high-water mark into commitLatency, which the auto throttle
// reads.
type throttles struct {
	leader, follower *replica.Quota
	commitLatency    *replica.LatencyWindow
	auto             *autoThrottle
}

// ReplicationQuotas returns the leader and follower sides of the
// replication throttle: leader.replication.throttled.rate and
// follower.replication.throttled.rate as the image applied last sets
// them, or as the auto throttle sets them when it is on.
func (m *Manager) ReplicationQuotas() (leader, follower *replica.Quota) {
	return m.throttles.leader, m.throttles.follower
}

// CommitLatency is where the produce handler counts how long each
// acks=all produce of a partition led here waited, from its append to the
// high-water mark passing its last batch: the signal of the auto
// replication throttle. Observe allocates nothing.
func (m *Manager) CommitLatency() *replica.LatencyWindow {
	return m.throttles.commitLatency
}

// setThrottleRates gives the quotas the rates of settings, the broker
// configs with the image's dynamic ones applied, or hands them to the
// auto throttle: a change reaches them with the image that carries it.
func (m *Manager) setThrottleRates(settings config.Broker) {
	t := &m.throttles
	leader, follower := t.leader.Rate(), t.follower.Rate()
	t.auto.configure(settings.ReplicationThrottleAutoTarget, settings.LeaderReplicationThrottledRate, settings.FollowerReplicationThrottledRate)
	for _, side := range []struct {
		name      string
		q         *replica.Quota
		was, rate int64
	}{
		{"leader.replication.throttled.rate", t.leader, leader, settings.LeaderReplicationThrottledRate},
		{"follower.replication.throttled.rate", t.follower, follower, settings.FollowerReplicationThrottledRate},
	} {
		if side.q.Rate() != side.was {
			m.log.Info("replication throttle", side.name, side.rate, "effective", side.q.Rate(),
				"replication.throttle.auto.target.ms", settings.ReplicationThrottleAutoTarget.Milliseconds())
		}
	}
}

// setThrottled tells h's replica whether its topic config names it in
// the throttled-replicas lists, for this node.
func (m *Manager) setThrottled(h *Hosted, tcfg *config.Topic) {
	self, p := m.cfg.Settings.NodeID, h.Partition.Partition()
	h.SetThrottled(config.ThrottledReplica(tcfg.LeaderThrottledReplicas, p, self),
		config.ThrottledReplica(tcfg.FollowerThrottledReplicas, p, self))
}

// ThrottleCounts returns what the two sides of the replication throttle
// counted since the node started.
func (m *Manager) ThrottleCounts() (leader, follower replica.QuotaCounts) {
	return m.throttles.leader.Counts(), m.throttles.follower.Counts()
}
