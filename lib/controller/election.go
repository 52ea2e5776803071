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
	// first live ISR member, or else the first live replica (which may
	// lack acknowledged records).
	ElectUnclean ElectionType = 1
)

// TopicPartition names one partition.
type TopicPartition struct {
	Topic     string
	Partition int32
}

// uncleanElection records a leader elected from outside the ISR: the
// replicas of the former ISR may hold acknowledged records it lacks.
type uncleanElection struct {
	Topic     string  `json:"topic"`
	Partition int32   `json:"partition"`
	Leader    int32   `json:"leader"`
	FormerISR []int32 `json:"former_isr"`
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
		if r != except && img.brokerAlive(r) && (keep == nil || keep(r)) {
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
// member in replica order leads; without one, the first live replica when
// unclean elections are allowed; otherwise nobody (leader -1, ISR kept).
func electAfterLoss(img *Image, t *Topic, p Partition, gone int32, unclean bool, res *applyResult) partitionChange {
	if c := firstAlive(img, p.Replicas, gone, func(r int32) bool { return slices.Contains(p.ISR, r) }); c >= 0 {
		return partitionChange{leader: c, isr: without(p.ISR, gone)}
	}
	if uncleanAllowed(img, t, unclean) {
		if c := firstAlive(img, p.Replicas, gone, nil); c >= 0 {
			res.unclean = append(res.unclean, uncleanElection{Topic: t.Name, Partition: p.ID, Leader: c, FormerISR: slices.Clone(p.ISR)})
			return partitionChange{leader: c, isr: []int32{c}}
		}
	}
	return partitionChange{leader: -1, isr: p.ISR}
}

// electOffline is the rule that gives a leader to partitions that have
// none once broker id is alive again: id leads where it is in the ISR,
// and, when unclean elections are allowed, where it is only a replica.
func electOffline(img *Image, t *Topic, p Partition, id int32, unclean bool, res *applyResult) (partitionChange, bool) {
	if p.Leader != -1 || !slices.Contains(p.Replicas, id) {
		return partitionChange{}, false
	}
	if slices.Contains(p.ISR, id) {
		return partitionChange{leader: id, isr: p.ISR}, true
	}
	if uncleanAllowed(img, t, unclean) {
		res.unclean = append(res.unclean, uncleanElection{Topic: t.Name, Partition: p.ID, Leader: id, FormerISR: slices.Clone(p.ISR)})
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
		return Broker{}, fmt.Errorf("%w: broker %d is at epoch %d, not %d", ErrStaleBrokerEpoch, id, b.Epoch, epoch)
	}
	return b, nil
}

func setBroker(img *Image, b Broker) {
	img.Brokers = maps.Clone(img.Brokers)
	img.Brokers[b.ID] = b
}

func applyRegisterBrokerV2(img *Image, index uint64, c *registerBrokerV2, res *applyResult) error {
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
		switch {
		case p.Leader == b.ID:
			if n := firstAlive(img, p.Replicas, b.ID, func(r int32) bool { return slices.Contains(p.ISR, r) }); n >= 0 {
				return partitionChange{leader: n, isr: without(p.ISR, b.ID)}, true
			}
			return partitionChange{leader: b.ID, isr: p.ISR, bumpEpoch: true}, true
		case p.Leader != -1 && slices.Contains(p.ISR, b.ID) && len(p.ISR) > 1:
			return partitionChange{leader: p.Leader, isr: without(p.ISR, b.ID)}, true
		}
		return electOffline(img, t, p, b.ID, c.Unclean, res)
	})
	return nil
}

func applyFenceBroker(img *Image, c *fenceBrokerV1, res *applyResult) error {
	b, err := checkBrokerEpoch(img, c.ID, c.Epoch)
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
			return electAfterLoss(img, t, p, b.ID, c.Unclean, res), true
		case slices.Contains(p.ISR, b.ID) && len(p.ISR) > 1:
			return partitionChange{leader: p.Leader, isr: without(p.ISR, b.ID)}, true
		}
		return partitionChange{}, false
	})
	return nil
}

func applyUnfenceBroker(img *Image, c *unfenceBrokerV1, res *applyResult) error {
	b, err := checkBrokerEpoch(img, c.ID, c.Epoch)
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
			return electOffline(img, t, p, b.ID, c.Unclean, res)
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

func applyAlterPartitionV2(img *Image, c *alterPartitionV2, res *applyResult) error {
	old, ok := img.Topics[c.Topic]
	if !ok {
		return fmt.Errorf("%w: %q", ErrUnknownTopic, c.Topic)
	}
	if c.Partition < 0 || int(c.Partition) >= len(old.Partitions) {
		return fmt.Errorf("%w: %q partition %d", ErrUnknownPartition, c.Topic, c.Partition)
	}
	p := old.Partitions[c.Partition]
	where := fmt.Sprintf("%q partition %d", c.Topic, c.Partition)
	switch {
	case c.LeaderEpoch != p.LeaderEpoch:
		return fmt.Errorf("%w: %s: leader epoch %d, current %d", ErrFencedLeaderEpoch, where, c.LeaderEpoch, p.LeaderEpoch)
	case c.Leader != p.Leader || c.Leader < 0:
		return fmt.Errorf("%w: %s: broker %d, leader is %d", ErrNotLeader, where, c.Leader, p.Leader)
	case c.PartitionEpoch != p.PartitionEpoch:
		return fmt.Errorf("%w: %s: partition epoch %d, current %d", ErrInvalidUpdateVersion, where, c.PartitionEpoch, p.PartitionEpoch)
	}
	if err := checkPartitionState(p.Replicas, c.Leader, c.ISR); err != nil {
		return fmt.Errorf("%s: %w", where, err)
	}
	for _, r := range c.ISR {
		if !slices.Contains(p.ISR, r) && !img.brokerAlive(r) {
			return fmt.Errorf("%w: %s: broker %d is fenced, shutting down or not registered", ErrIneligibleReplica, where, r)
		}
	}
	if slices.Equal(c.ISR, p.ISR) {
		res.unchanged = true
		res.partition = &p
		return nil
	}
	p.ISR = slices.Clone(c.ISR)
	p.PartitionEpoch = bumped(p.PartitionEpoch)
	t := *old
	t.Partitions = slices.Clone(old.Partitions)
	t.Partitions[c.Partition] = p
	replaceTopic(img, &t)
	res.partition = &p
	return nil
}

// electionResult is the outcome of an election for one partition.
type electionResult struct {
	TopicPartition
	err error
}

func applyElectLeaders(img *Image, c *electLeadersV1, res *applyResult) error {
	typ := ElectionType(c.Type)
	if typ != ElectPreferred && typ != ElectUnclean {
		return fmt.Errorf("%w: election type %d", ErrInvalidCommand, c.Type)
	}
	// The partitions asked for, each once; nil means all of them, and then
	// partitions that need no election are not reported.
	all := c.Partitions == nil
	wanted := map[TopicPartition]bool{}
	for _, tp := range c.Partitions {
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
		change, err := elect(img, t, p, typ, res)
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
func elect(img *Image, t *Topic, p Partition, typ ElectionType, res *applyResult) (partitionChange, error) {
	if typ == ElectPreferred {
		preferred := p.Replicas[0]
		switch {
		case p.Leader == preferred:
			return partitionChange{}, ErrElectionNotNeeded
		case !img.brokerAlive(preferred) || !slices.Contains(p.ISR, preferred):
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
	if c := firstAlive(img, p.Replicas, -1, nil); c >= 0 {
		res.unclean = append(res.unclean, uncleanElection{Topic: t.Name, Partition: p.ID, Leader: c, FormerISR: slices.Clone(p.ISR)})
		return partitionChange{leader: c, isr: []int32{c}}, nil
	}
	return partitionChange{}, ErrEligibleLeadersNotAvailable
}
