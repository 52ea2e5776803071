package controller

import (
	"fmt"
	"maps"
	"math"
	"slices"
	"strconv"
)

// UncleanLeaderElectionConfig is the topic config (and cluster-wide
// dynamic default, BrokerConfigs[-1]) that allows electing a leader from
// outside the ISR.
const UncleanLeaderElectionConfig = "unclean.leader.election.enable"

// ElectionType is the kind of leader election ElectLeaders runs, with
// Kafka's numbers.
type ElectionType int8

const (
	// ElectPreferred makes the preferred replica (the first of Replicas)
	// the leader where it is alive and in the ISR.
	ElectPreferred ElectionType = 0
	// ElectUnclean elects a leader for partitions that have none: the
	// first live ISR member, or else the live replica whose log is the
	// most advanced (which may still lack acknowledged records).
	ElectUnclean ElectionType = 1
)

// TopicPartition names one partition.
type TopicPartition struct {
	Topic     string
	Partition int32
}

// uncleanElection records a leader elected from outside the ISR: the
// replicas of the former ISR may hold acknowledged records it lacks,
// those above its end offset.
type uncleanElection struct {
	Topic     string  `json:"topic"`
	Partition int32   `json:"partition"`
	Leader    int32   `json:"leader"`
	FormerISR []int32 `json:"former_isr"`
	// LastEpoch and EndOffset are the position of the leader's log it
	// reported; -1 when the command did not carry it (version 1 records).
	LastEpoch int32 `json:"last_epoch"`
	EndOffset int64 `json:"end_offset"`
}

// uncleanRule says whether a partition of t may get a leader from outside
// its ISR when its leader is lost or a replica comes back; nil: never.
type uncleanRule func(t *Topic) bool

// legacyUnclean is the rule of the version 1 fence and unfence commands
// and version 2 registrations, which elected uncleanly themselves:
// unclean.leader.election.enable, def being the proposer's default.
func legacyUnclean(img *Image, def bool) uncleanRule {
	return func(t *Topic) bool { return uncleanAllowed(img, t, def) }
}

// firstLiveUnclean is the unclean choice of version 1 records: the first
// live replica in Replicas order, other than gone.
func firstLiveUnclean(img *Image, t *Topic, p Partition, gone int32) (uncleanElection, bool) {
	c := firstAlive(img, p.Replicas, gone, nil)
	return uncleanElection{Topic: t.Name, Partition: p.ID, Leader: c, FormerISR: slices.Clone(p.ISR), LastEpoch: -1, EndOffset: -1}, c >= 0
}

// partitionChange is what a rule decides for one partition: the new
// leader and ISR, and whether the leader epoch moves even though the
// leader stays (a re-registered broker is a new incarnation).
type partitionChange struct {
	leader    int32
	isr       []int32
	bumpEpoch bool
}

// updatePartitions applies rule to every partition, topics in name order,
// replacing (copy-on-write) each partition whose leader or ISR the rule
// changes. A new leader (or bumpEpoch) moves the leader epoch by one; any
// change moves the partition epoch by one. It reports whether anything
// changed.
func updatePartitions(img *Image, rule func(t *Topic, p Partition) (partitionChange, bool)) bool {
	changed := false
	for _, old := range sortedTopics(img) {
		var parts []Partition
		for i, p := range old.Partitions {
			c, ok := rule(old, p)
			if !ok {
				continue
			}
			leaderMoved := c.leader != p.Leader || c.bumpEpoch
			if !leaderMoved && slices.Equal(c.isr, p.ISR) {
				continue
			}
			if parts == nil {
				parts = slices.Clone(old.Partitions)
			}
			if leaderMoved {
				p.LeaderEpoch = bumped(p.LeaderEpoch)
			}
			p.PartitionEpoch = bumped(p.PartitionEpoch)
			p.Leader = c.leader
			p.ISR = c.isr
			parts[i] = p
		}
		if parts != nil {
			t := *old
			t.Partitions = parts
			replaceTopic(img, &t)
			changed = true
		}
	}
	return changed
}

// bumped is epoch+1, saturating: 2^31 changes of one partition do not
// happen, and an epoch must never wrap to a smaller one.
func bumped(epoch int32) int32 {
	if epoch == math.MaxInt32 {
		return epoch
	}
	return epoch + 1
}

// firstAlive returns the first of candidates (in order) that is alive in
// img, is not except, and passes keep; -1 if none.
func firstAlive(img *Image, candidates []int32, except int32, keep func(int32) bool) int32 {
	for _, r := range candidates {
		if r != except && img.BrokerAlive(r) && (keep == nil || keep(r)) {
			return r
		}
	}
	return -1
}

func without(isr []int32, id int32) []int32 {
	return slices.DeleteFunc(slices.Clone(isr), func(r int32) bool { return r == id })
}

// uncleanAllowed resolves unclean.leader.election.enable for t: the topic's
// config, else the cluster-wide dynamic default, else def (the proposing
// controller's static setting, carried in the command).
func uncleanAllowed(img *Image, t *Topic, def bool) bool {
	for _, cfg := range []map[string]string{t.Configs, img.BrokerConfigs[-1]} {
		if v, ok := cfg[UncleanLeaderElectionConfig]; ok {
			if b, err := strconv.ParseBool(v); err == nil {
				return b
			}
		}
	}
	return def
}

// electAfterLoss is the rule for a partition whose leader gone is leaving
// (fenced, or re-registered as a new incarnation): the first live ISR
// member in replica order leads; without one, under a legacy rule that
// allows it, the first live replica; otherwise nobody (leader -1, ISR
// kept), until the active controller elects uncleanly (electLeadersV2).
func electAfterLoss(img *Image, t *Topic, p Partition, gone int32, unclean uncleanRule, res *applyResult) partitionChange {
	if c := firstAlive(img, p.Replicas, gone, func(r int32) bool { return slices.Contains(p.ISR, r) }); c >= 0 {
		return partitionChange{leader: c, isr: without(p.ISR, gone)}
	}
	if unclean != nil && unclean(t) {
		if u, ok := firstLiveUnclean(img, t, p, gone); ok {
			res.unclean = append(res.unclean, u)
			return partitionChange{leader: u.Leader, isr: []int32{u.Leader}}
		}
	}
	return partitionChange{leader: -1, isr: p.ISR}
}

// electOffline is the rule that gives a leader to partitions that have
// none once broker id is alive again: id leads where it is in the ISR,
// and, under a legacy rule that allows it, where it is only a replica.
func electOffline(t *Topic, p Partition, id int32, unclean uncleanRule, res *applyResult) (partitionChange, bool) {
	if p.Leader != -1 || !slices.Contains(p.Replicas, id) {
		return partitionChange{}, false
	}
	if slices.Contains(p.ISR, id) {
		return partitionChange{leader: id, isr: p.ISR}, true
	}
	if unclean != nil && unclean(t) {
		res.unclean = append(res.unclean, uncleanElection{Topic: t.Name, Partition: p.ID, Leader: id, FormerISR: slices.Clone(p.ISR), LastEpoch: -1, EndOffset: -1})
		return partitionChange{leader: id, isr: []int32{id}}, true
	}
	return partitionChange{}, false
}

// checkBrokerEpoch finds broker id at epoch, or refuses with
// ErrStaleBrokerEpoch.
func checkBrokerEpoch(img *Image, id int32, epoch int64) (Broker, error) {
	b, ok := img.Brokers[id]
	if !ok {
		return Broker{}, fmt.Errorf("%w: broker %d is not registered", ErrStaleBrokerEpoch, id)
	}
	if b.Epoch != epoch {
		return Broker{}, fmt.Errorf("%w: broker %d is not at epoch %d", ErrStaleBrokerEpoch, id, epoch)
	}
	return b, nil
}

func setBroker(img *Image, b Broker) {
	img.Brokers = maps.Clone(img.Brokers)
	img.Brokers[b.ID] = b
}

func applyRegisterBrokerV2(img *Image, index uint64, c *registerBrokerV2, res *applyResult) error {
	v3 := registerBrokerV3{ID: c.ID, Host: c.Host, Port: c.Port, Rack: c.Rack, Listeners: c.Listeners, RaftAddr: c.RaftAddr}
	return applyRegistration(img, index, &v3, legacyUnclean(img, c.Unclean), nil, res)
}

// LostReplica is a replica that lost records it knew as committed: when
// its broker opened its log, the log ended (EndOffset) below the
// high-water mark it had checkpointed (HighWatermark).
type LostReplica struct {
	Topic         string
	Partition     int32
	EndOffset     int64
	HighWatermark int64
}

// lostReplica is what a registration did with a LostReplica: the
// partition's leader and ISR after it.
type lostReplica struct {
	LostReplica
	broker int32
	leader int32
	isr    []int32
}

func applyRegisterBrokerV4(img *Image, index uint64, c *registerBrokerV4, res *applyResult) error {
	lost := map[TopicPartition]LostReplica{}
	for _, l := range c.LostCommitted {
		lost[TopicPartition{l.Topic, l.Partition}] = LostReplica{Topic: l.Topic, Partition: l.Partition, EndOffset: l.EndOffset, HighWatermark: l.HighWatermark}
	}
	return applyRegistration(img, index, &c.registerBrokerV3, nil, lost, res)
}

// leaveAfterLoss is the rule for a partition whose replica on broker id
// lost committed records: id leaves the ISR, and where it led (or
// nobody did) the first other live ISR member in replica order leads;
// without one, nobody, until an unclean election (which may still pick
// id, should its log be the most advanced). A partition of one replica is
// the exception (applyRegistration): it leads on what it kept.
func leaveAfterLoss(img *Image, p Partition, id int32) partitionChange {
	isr := without(p.ISR, id)
	leader := p.Leader
	if leader == id || leader == -1 {
		leader = firstAlive(img, p.Replicas, id, func(r int32) bool { return slices.Contains(isr, r) })
	}
	return partitionChange{leader: leader, isr: isr}
}

// applyRegistration is a registration of version 2 or later, under the
// unclean rule of its version; lost are the broker's replicas that lost
// committed records (version 4), by partition.
func applyRegistration(img *Image, index uint64, c *registerBrokerV3, unclean uncleanRule, lost map[TopicPartition]LostReplica, res *applyResult) error {
	if c.ID < 0 || c.Port < 0 || c.Port > math.MaxUint16 {
		return fmt.Errorf("%w: id %d port %d", ErrInvalidBroker, c.ID, c.Port)
	}
	b := Broker{
		ID:        c.ID,
		Host:      c.Host,
		Port:      c.Port,
		Listeners: slices.Clone(c.Listeners),
		Epoch:     int64(index & math.MaxInt64),
		RaftAddr:  c.RaftAddr,
	}
	if c.Rack != nil {
		rack := *c.Rack
		b.Rack = &rack
	}
	setBroker(img, b)
	res.brokerEpoch = b.Epoch
	// A new incarnation may have lost what the old one had not flushed:
	// its leaderships move to replicas that stayed in sync, it leaves the
	// ISRs that have other members, and where it alone is in sync it stays
	// leader in a new epoch.
	updatePartitions(img, func(t *Topic, p Partition) (partitionChange, bool) {
		if l, ok := lost[TopicPartition{t.Name, p.ID}]; ok && slices.Contains(p.Replicas, b.ID) {
			change := leaveAfterLoss(img, p, b.ID)
			if len(p.Replicas) == 1 {
				// The only copy: no other replica can ever have more, so
				// waiting for an unclean election would keep nothing safe
				// and only keep a lone node's topics down after every
				// power loss. It leads on what it kept (and it is logged).
				change = partitionChange{leader: b.ID, isr: []int32{b.ID}, bumpEpoch: true}
			}
			res.leftISR = append(res.leftISR, lostReplica{LostReplica: l, broker: b.ID, leader: change.leader, isr: change.isr})
			return change, true
		}
		switch {
		case p.Leader == b.ID:
			if n := firstAlive(img, p.Replicas, b.ID, func(r int32) bool { return slices.Contains(p.ISR, r) }); n >= 0 {
				return partitionChange{leader: n, isr: without(p.ISR, b.ID)}, true
			}
			return partitionChange{leader: b.ID, isr: p.ISR, bumpEpoch: true}, true
		case p.Leader != -1 && slices.Contains(p.ISR, b.ID) && len(p.ISR) > 1:
			return partitionChange{leader: p.Leader, isr: without(p.ISR, b.ID)}, true
		}
		return electOffline(t, p, b.ID, unclean, res)
	})
	return nil
}

func applyFenceBroker(img *Image, id int32, epoch int64, unclean uncleanRule, res *applyResult) error {
	b, err := checkBrokerEpoch(img, id, epoch)
	if err != nil {
		return err
	}
	if b.Fenced {
		res.unchanged = true
		return nil
	}
	b.Fenced = true
	setBroker(img, b)
	updatePartitions(img, func(t *Topic, p Partition) (partitionChange, bool) {
		switch {
		case p.Leader == b.ID:
			return electAfterLoss(img, t, p, b.ID, unclean, res), true
		case slices.Contains(p.ISR, b.ID) && len(p.ISR) > 1:
			return partitionChange{leader: p.Leader, isr: without(p.ISR, b.ID)}, true
		}
		return partitionChange{}, false
	})
	return nil
}

func applyUnfenceBroker(img *Image, id int32, epoch int64, unclean uncleanRule, res *applyResult) error {
	b, err := checkBrokerEpoch(img, id, epoch)
	if err != nil {
		return err
	}
	if !b.Fenced {
		res.unchanged = true
		return nil
	}
	b.Fenced = false
	setBroker(img, b)
	if b.alive() {
		updatePartitions(img, func(t *Topic, p Partition) (partitionChange, bool) {
			return electOffline(t, p, b.ID, unclean, res)
		})
	}
	return nil
}

func applyControlledShutdown(img *Image, c *controlledShutdownV1, res *applyResult) error {
	b, err := checkBrokerEpoch(img, c.ID, c.Epoch)
	if err != nil {
		return err
	}
	wasShuttingDown := b.InControlledShutdown
	if !wasShuttingDown {
		b.InControlledShutdown = true
		setBroker(img, b)
	}
	moved := updatePartitions(img, func(t *Topic, p Partition) (partitionChange, bool) {
		switch {
		case p.Leader == b.ID:
			if n := firstAlive(img, p.Replicas, b.ID, func(r int32) bool { return slices.Contains(p.ISR, r) }); n >= 0 {
				return partitionChange{leader: n, isr: without(p.ISR, b.ID)}, true
			}
		case slices.Contains(p.ISR, b.ID) && len(p.ISR) > 1:
			return partitionChange{leader: p.Leader, isr: without(p.ISR, b.ID)}, true
		}
		return partitionChange{}, false
	})
	res.unchanged = wasShuttingDown && !moved
	return nil
}

// canShutDown reports whether broker id leads no partition that another
// live ISR member could take over.
func (img *Image) canShutDown(id int32) bool {
	for _, t := range img.Topics {
		for _, p := range t.Partitions {
			if p.Leader == id && firstAlive(img, p.Replicas, id, func(r int32) bool { return slices.Contains(p.ISR, r) }) >= 0 {
				return false
			}
		}
	}
	return true
}

// leaderProposal finds the partition a leader's proposal names and checks
// that it is based on the partition's current leader, leader epoch and
// partition epoch (AlterPartition, ResignLeadership).
func leaderProposal(img *Image, topic string, partition, leader, leaderEpoch, partitionEpoch int32) (*Topic, Partition, string, error) {
	old, ok := img.Topics[topic]
	if !ok {
		return nil, Partition{}, "", fmt.Errorf("%w: %q", ErrUnknownTopic, topic)
	}
	return checkLeaderProposal(old, partition, leader, leaderEpoch, partitionEpoch)
}

// checkLeaderProposal is leaderProposal for a partition of old.
func checkLeaderProposal(old *Topic, partition, leader, leaderEpoch, partitionEpoch int32) (*Topic, Partition, string, error) {
	topic := old.Name
	if partition < 0 || int(partition) >= len(old.Partitions) {
		return nil, Partition{}, "", fmt.Errorf("%w: %q partition %d", ErrUnknownPartition, topic, partition)
	}
	p := old.Partitions[partition]
	where := fmt.Sprintf("%q partition %d", topic, partition)
	switch {
	case leaderEpoch != p.LeaderEpoch:
		return nil, p, where, fmt.Errorf("%w: %s: leader epoch %d is not the current one", ErrFencedLeaderEpoch, where, leaderEpoch)
	case leader != p.Leader || leader < 0:
		return nil, p, where, fmt.Errorf("%w: %s: broker %d, leader is %d", ErrNotLeader, where, leader, p.Leader)
	case partitionEpoch != p.PartitionEpoch:
		return nil, p, where, fmt.Errorf("%w: %s: partition epoch %d is not the current one", ErrInvalidUpdateVersion, where, partitionEpoch)
	}
	return old, p, where, nil
}

// applyResignLeadership moves the leadership of a partition its leader
// gives up to the first live ISR member in replica order, and takes the
// former leader out of the ISR: it is a clean election (the new leader
// has every committed record), and the former leader, a follower now
// outside the ISR, may cut and fetch again what it could not serve.
// ErrEligibleLeadersNotAvailable where no other ISR member is alive: the
// leader keeps the partition.
func applyResignLeadership(img *Image, c *resignLeadershipV1, res *applyResult) error {
	_, p, where, err := leaderProposal(img, c.Topic, c.Partition, c.Leader, c.LeaderEpoch, c.PartitionEpoch)
	if err != nil {
		return err
	}
	next := firstAlive(img, p.Replicas, c.Leader, func(r int32) bool { return slices.Contains(p.ISR, r) })
	if next < 0 {
		return fmt.Errorf("%w: %s: no other live ISR member than broker %d (ISR %v)", ErrEligibleLeadersNotAvailable, where, c.Leader, p.ISR)
	}
	updatePartitions(img, func(t *Topic, q Partition) (partitionChange, bool) {
		if t.Name != c.Topic || q.ID != c.Partition {
			return partitionChange{}, false
		}
		return partitionChange{leader: next, isr: without(q.ISR, c.Leader)}, true
	})
	q := img.Topics[c.Topic].Partitions[c.Partition]
	res.partition = &q
	return nil
}

func applyAlterPartitionV2(img *Image, c *alterPartitionV2, res *applyResult) error {
	out, changed := applyAlterations(img, []alterPartitionV2{*c})
	if out[0].err != nil {
		return out[0].err
	}
	res.partition, res.unchanged = out[0].partition, !changed
	return nil
}

// maxAlterations bounds the changes of one AlterPartition record: about
// 110 bytes of JSON each.
const maxAlterations = 4096

// applyAlterPartitionV3 applies many changes as version 2 applies one
// (applyAlterations). The command is refused only when malformed.
func applyAlterPartitionV3(img *Image, c *alterPartitionV3, res *applyResult) error {
	if len(c.Changes) == 0 || len(c.Changes) > maxAlterations {
		return fmt.Errorf("%w: AlterPartition of %d changes, want 1..%d", ErrInvalidCommand, len(c.Changes), maxAlterations)
	}
	var changed bool
	res.alterations, changed = applyAlterations(img, c.Changes)
	res.unchanged = !changed
	return nil
}

// alteration is the outcome of one ISR change: the partition after it,
// or why it was refused.
type alteration struct {
	partition *Partition
	err       error
}

// applyAlterations checks and applies each ISR change to img, in order,
// each on its own: a refused change leaves img as it was and the others
// apply, and a later change of the same partition is checked against the
// earlier one's epochs. A topic's partitions are copied once, however
// many of them change. It returns each change's outcome and whether img
// changed.
func applyAlterations(img *Image, changes []alterPartitionV2) ([]alteration, bool) {
	out := make([]alteration, len(changes))
	copied := topicCopies{}
	for i := range changes {
		ch := &changes[i]
		p, changed, err := alterISR(img, copied.topic(img, ch.Topic), ch)
		if err != nil {
			out[i].err = err
			continue
		}
		out[i].partition = &p
		if changed {
			copied.set(img, ch.Topic, p)
		}
	}
	return out, copied.publish(img)
}

// topicCopies are the topics a command changes, each copied once however
// many of its partitions change.
type topicCopies map[string]*Topic

// topic is the topic named, as the command changed it so far; nil when
// the image has none.
func (c topicCopies) topic(img *Image, name string) *Topic {
	if t := c[name]; t != nil {
		return t
	}
	return img.Topics[name]
}

// set makes p the partition of its ID in topic name. Where p ends a
// reassignment, the throttle set for it ends too (endThrottles).
func (c topicCopies) set(img *Image, name string, p Partition) {
	t := c[name]
	if t == nil {
		own := *img.Topics[name]
		own.Partitions = slices.Clone(own.Partitions)
		t = &own
		c[name] = t
	}
	if t.Partitions[p.ID].Reassigning() && !p.Reassigning() {
		t.Configs = endThrottles(t.Configs, p.ID)
	}
	t.Partitions[p.ID] = p
}

// publish puts the changed topics into img and reports whether there
// were any.
func (c topicCopies) publish(img *Image) bool {
	if len(c) > 0 {
		replaceTopics(img, c)
	}
	return len(c) > 0
}

// alterISR checks an ISR change a leader proposes for a partition of
// topic t (nil: unknown) and returns the partition with the change made,
// and whether that differs from the partition now.
func alterISR(img *Image, t *Topic, c *alterPartitionV2) (Partition, bool, error) {
	if t == nil {
		return Partition{}, false, fmt.Errorf("%w: %q", ErrUnknownTopic, c.Topic)
	}
	_, p, where, err := checkLeaderProposal(t, c.Partition, c.Leader, c.LeaderEpoch, c.PartitionEpoch)
	if err != nil {
		return Partition{}, false, err
	}
	if err := checkPartitionState(p.Replicas, c.Leader, c.ISR); err != nil {
		return Partition{}, false, fmt.Errorf("%s: %w", where, err)
	}
	for _, r := range c.ISR {
		if !slices.Contains(p.ISR, r) && !img.BrokerAlive(r) {
			return Partition{}, false, fmt.Errorf("%w: %s: broker %d is fenced, shutting down or not registered", ErrIneligibleReplica, where, r)
		}
	}
	if slices.Equal(c.ISR, p.ISR) {
		return p, false, nil
	}
	p.ISR = slices.Clone(c.ISR)
	p.PartitionEpoch = bumped(p.PartitionEpoch)
	// The ISR a reassignment waits for: the move completes in this change.
	return completeReassignment(img, p), true, nil
}

// electionResult is the outcome of an election for one partition.
type electionResult struct {
	TopicPartition
	err error
}

// uncleanPick chooses the unclean leader of a partition of t that has no
// live ISR member; false: none.
type uncleanPick func(t *Topic, p Partition) (uncleanElection, bool)

func applyElectLeadersV1(img *Image, c *electLeadersV1, res *applyResult) error {
	return applyElectLeaders(img, c.Type, c.Partitions, func(t *Topic, p Partition) (uncleanElection, bool) {
		return firstLiveUnclean(img, t, p, -1)
	}, res)
}

// applyElectLeadersV2 elects, uncleanly, only the leaders the command
// names, where they are live replicas (and, for the controller's own
// election, where unclean.leader.election.enable allows).
func applyElectLeadersV2(img *Image, c *electLeadersV2, res *applyResult) error {
	named := map[TopicPartition]uncleanLeaderV2{}
	for _, l := range c.Leaders {
		named[TopicPartition{l.Topic, l.Partition}] = l
	}
	return applyElectLeaders(img, c.Type, c.Partitions, func(t *Topic, p Partition) (uncleanElection, bool) {
		l, ok := named[TopicPartition{t.Name, p.ID}]
		if !ok || !slices.Contains(p.Replicas, l.Leader) || !img.BrokerAlive(l.Leader) || (c.Configured && !uncleanAllowed(img, t, c.Default)) {
			return uncleanElection{}, false
		}
		return uncleanElection{
			Topic: t.Name, Partition: p.ID, Leader: l.Leader, FormerISR: slices.Clone(p.ISR),
			LastEpoch: l.LastEpoch, EndOffset: l.EndOffset,
		}, true
	}, res)
}

func applyElectLeaders(img *Image, electionType int8, partitions []topicPartitionV1, pick uncleanPick, res *applyResult) error {
	typ := ElectionType(electionType)
	if typ != ElectPreferred && typ != ElectUnclean {
		return fmt.Errorf("%w: election type %d", ErrInvalidCommand, electionType)
	}
	// The partitions asked for, each once; nil means all of them, and then
	// partitions that need no election are not reported.
	all := partitions == nil
	wanted := map[TopicPartition]bool{}
	for _, tp := range partitions {
		key := TopicPartition{tp.Topic, tp.Partition}
		if wanted[key] {
			continue
		}
		wanted[key] = true
		t, ok := img.Topics[tp.Topic]
		switch {
		case !ok:
			res.elections = append(res.elections, electionResult{key, fmt.Errorf("%w: %q", ErrUnknownTopic, tp.Topic)})
		case tp.Partition < 0 || int(tp.Partition) >= len(t.Partitions):
			res.elections = append(res.elections, electionResult{key, fmt.Errorf("%w: %q partition %d", ErrUnknownPartition, tp.Topic, tp.Partition)})
		}
	}
	changed := updatePartitions(img, func(t *Topic, p Partition) (partitionChange, bool) {
		key := TopicPartition{t.Name, p.ID}
		if !all && !wanted[key] {
			return partitionChange{}, false
		}
		change, err := elect(img, t, p, typ, pick, res)
		if err != nil && !(all && err == ErrElectionNotNeeded) {
			res.elections = append(res.elections, electionResult{key, fmt.Errorf("%w: %q partition %d", err, t.Name, p.ID)})
		}
		if err == nil {
			res.elections = append(res.elections, electionResult{key, nil})
		}
		return change, err == nil
	})
	res.unchanged = !changed
	slices.SortFunc(res.elections, func(a, b electionResult) int {
		if a.Topic != b.Topic {
			if a.Topic < b.Topic {
				return -1
			}
			return 1
		}
		return int(a.Partition - b.Partition)
	})
	return nil
}

// elect decides one partition's election of type typ.
func elect(img *Image, t *Topic, p Partition, typ ElectionType, pick uncleanPick, res *applyResult) (partitionChange, error) {
	if typ == ElectPreferred {
		preferred := p.Replicas[0]
		switch {
		case p.Leader == preferred:
			return partitionChange{}, ErrElectionNotNeeded
		case !img.BrokerAlive(preferred) || !slices.Contains(p.ISR, preferred):
			return partitionChange{}, ErrPreferredLeaderNotAvailable
		}
		return partitionChange{leader: preferred, isr: p.ISR}, nil
	}
	if p.Leader != -1 {
		return partitionChange{}, ErrElectionNotNeeded
	}
	if c := firstAlive(img, p.Replicas, -1, func(r int32) bool { return slices.Contains(p.ISR, r) }); c >= 0 {
		return partitionChange{leader: c, isr: p.ISR}, nil
	}
	if u, ok := pick(t, p); ok {
		res.unclean = append(res.unclean, u)
		return partitionChange{leader: u.Leader, isr: []int32{u.Leader}}, nil
	}
	return partitionChange{}, ErrEligibleLeadersNotAvailable
}
