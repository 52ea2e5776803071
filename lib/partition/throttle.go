package partition

import (
	"github.com/mqproject/mq/lib/config"
	"github.com/mqproject/mq/lib/replica"
)

// throttles are the two sides of this node's replication throttle
// (KIP-73): one replica.Quota each, shared by every throttled replica,
// whose rates follow the dynamic broker configs of the image applied
// last. lib/broker's fetch handler asks the leader side for its answers
// to throttled followers, the replica Fetchers the follower side.
type throttles struct {
	leader, follower *replica.Quota
}

// ReplicationQuotas returns the leader and follower sides of the
// replication throttle: leader.replication.throttled.rate and
// follower.replication.throttled.rate as the image applied last sets
// them.
func (m *Manager) ReplicationQuotas() (leader, follower *replica.Quota) {
	return m.throttles.leader, m.throttles.follower
}

// setThrottleRates gives the quotas the rates of settings, the broker
// configs with the image's dynamic ones applied: a change reaches them
// with the image that carries it.
func (m *Manager) setThrottleRates(settings config.Broker) {
	for _, side := range []struct {
		name string
		q    *replica.Quota
		rate int64
	}{
		{"leader.replication.throttled.rate", m.throttles.leader, settings.LeaderReplicationThrottledRate},
		{"follower.replication.throttled.rate", m.throttles.follower, settings.FollowerReplicationThrottledRate},
	} {
		if side.q.Rate() != side.rate {
			side.q.SetRate(side.rate)
			m.log.Info("replication throttle", side.name, side.rate)
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
