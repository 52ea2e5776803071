package controller

import (
	"context"
	"slices"
	"time"
)

// chooseUnclean picks the unclean leader of p, which has no live ISR
// member: among its live replicas, the one whose reported log is the most
// advanced (the latest last leader epoch, then the largest end offset;
// the earlier in Replicas order between equals). position returns what a
// replica reported; waiting reports whether a live replica that has not
// reported is still waited for, in which case nothing is chosen yet. ok
// is false when nothing is chosen (none reported, or still waiting).
func chooseUnclean(img *Image, p Partition, position func(id int32) (ReplicaPosition, bool), waiting func(id int32) bool) (leader int32, pos ReplicaPosition, ok bool) {
	leader = -1
	for _, r := range p.Replicas {
		if !img.BrokerAlive(r) {
			continue
		}
		rp, reported := position(r)
		if !reported {
			if waiting(r) {
				return -1, ReplicaPosition{}, false
			}
			continue
		}
		if leader < 0 || rp.ahead(pos) {
			leader, pos = r, rp
		}
	}
	return leader, pos, leader >= 0
}

// position returns what broker id reported, at its current epoch in img,
// of partition tp's log.
func (l *liveness) position(img *Image, id int32, tp TopicPartition) (ReplicaPosition, bool) {
	b, ok := img.Brokers[id]
	if !ok {
		return ReplicaPosition{}, false
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	s, ok := l.sessions[id]
	if !ok || s.epoch != b.Epoch {
		return ReplicaPosition{}, false
	}
	pos, ok := s.offline[tp]
	return pos, ok
}

// waitingFor reports whether a report of broker id on partition tp is
// still worth waiting for: tp was first seen needing an unclean election
// (offlineSince), or the broker's session at its current epoch in img
// began, less than patience ago (or the session has not begun).
func (l *liveness) waitingFor(img *Image, tp TopicPartition, id int32, now time.Time, patience time.Duration) bool {
	b, ok := img.Brokers[id]
	if !ok {
		return false
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	s, ok := l.sessions[id]
	if !ok || s.epoch != b.Epoch {
		return true
	}
	since := l.offline[tp]
	if s.started.After(since) {
		since = s.started
	}
	return now.Sub(since) < patience
}

// sawOffline records the partitions that need an unclean election now:
// those first seen now get now as their offlineSince, those no longer in
// offline are forgotten.
func (l *liveness) sawOffline(offline []TopicPartition, now time.Time) {
	l.mu.Lock()
	defer l.mu.Unlock()
	next := make(map[TopicPartition]time.Time, len(offline))
	for _, tp := range offline {
		since, ok := l.offline[tp]
		if !ok {
			since = now
		}
		next[tp] = since
	}
	l.offline = next
}

// needsUnclean lists the partitions of img that have no leader and no
// live ISR member, those of wanted when not nil, and where allowed.
func needsUnclean(img *Image, wanted map[TopicPartition]bool, allowed func(*Topic) bool) []TopicPartition {
	var out []TopicPartition
	for _, t := range sortedTopics(img) {
		for _, p := range t.Partitions {
			tp := TopicPartition{t.Name, p.ID}
			if p.Leader != -1 || (wanted != nil && !wanted[tp]) || !allowed(t) {
				continue
			}
			if firstAlive(img, p.Replicas, -1, func(r int32) bool { return slices.Contains(p.ISR, r) }) >= 0 {
				continue // a clean election will do
			}
			out = append(out, tp)
		}
	}
	return out
}

// uncleanLeaders chooses the unclean leaders of partitions (see
// chooseUnclean, waiting being its argument for each partition).
func (c *Controller) uncleanLeaders(img *Image, partitions []TopicPartition, waiting func(tp TopicPartition, id int32) bool) []uncleanLeaderV2 {
	var out []uncleanLeaderV2
	for _, tp := range partitions {
		p := img.Partition(tp.Topic, tp.Partition)
		if p == nil {
			continue
		}
		position := func(id int32) (ReplicaPosition, bool) { return c.live.position(img, id, tp) }
		if leader, pos, ok := chooseUnclean(img, *p, position, func(id int32) bool { return waiting(tp, id) }); ok {
			out = append(out, uncleanLeaderV2{Topic: tp.Topic, Partition: tp.Partition, Leader: leader, LastEpoch: pos.LastEpoch, EndOffset: pos.EndOffset})
		}
	}
	return out
}

// electUnclean is the active controller's unclean election: every
// partition without a leader or a live ISR member, where
// unclean.leader.election.enable allows, gets the live replica with the
// most advanced log, once every live replica reported its log or was
// waited for two heartbeat intervals.
func (c *Controller) electUnclean() {
	img := c.Image()
	now := c.cfg.Clock.Now()
	patience := 2 * c.cfg.BrokerHeartbeatInterval
	offline := needsUnclean(img, nil, func(t *Topic) bool { return uncleanAllowed(img, t, c.cfg.UncleanLeaderElection) })
	c.live.sawOffline(offline, now)
	leaders := c.uncleanLeaders(img, offline, func(tp TopicPartition, id int32) bool {
		return c.live.waitingFor(img, tp, id, now, patience)
	})
	if len(leaders) == 0 {
		return
	}
	cmd := &electLeadersV2{Type: int8(ElectUnclean), Leaders: leaders, Configured: true, Default: c.cfg.UncleanLeaderElection}
	for _, l := range leaders {
		cmd.Partitions = append(cmd.Partitions, topicPartitionV1{Topic: l.Topic, Partition: l.Partition})
	}
	ctx, cancel := c.commandContext()
	defer cancel()
	if err := c.applyCommandHere(ctx, cmdElectLeaders, cmd); err != nil {
		c.logger.Warn("controller: unclean leader election", "err", err)
	}
}

// electRequest is an operator's ElectLeaders sent to the active
// controller, which chooses the unclean leaders.
type electRequest struct {
	Type       int8               `json:"type"`
	Partitions []topicPartitionV1 `json:"partitions"`
}

// electLocal runs an unclean election on the active controller: the
// leaders are chosen from the reports it has, without waiting.
func (c *Controller) electLocal(ctx context.Context, req electRequest) (applyResult, error) {
	if !c.isActive() {
		return applyResult{}, errRetry
	}
	img := c.Image()
	var wanted map[TopicPartition]bool
	if req.Partitions != nil {
		wanted = map[TopicPartition]bool{}
		for _, tp := range req.Partitions {
			wanted[TopicPartition{tp.Topic, tp.Partition}] = true
		}
	}
	cmd := &electLeadersV2{
		Type: req.Type, Partitions: req.Partitions,
		Leaders: c.uncleanLeaders(img, needsUnclean(img, wanted, func(*Topic) bool { return true }),
			func(TopicPartition, int32) bool { return false }),
	}
	data, err := encodeCommand(cmdElectLeaders, cmd)
	if err != nil {
		return applyResult{}, err
	}
	return c.applyLocal(ctx, data)
}

// electOnLeader runs electLocal on the active controller, this node or
// the leader it asks.
func (c *Controller) electOnLeader(ctx context.Context, req electRequest) (applyResult, error) {
	return c.applyOnLeader(ctx, opElect, req, func(ctx context.Context) (applyResult, error) {
		return c.electLocal(ctx, req)
	})
}
