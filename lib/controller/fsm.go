package controller

import (
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"maps"
	"math"
	"slices"
	"sort"
	"sync"
	"sync/atomic"
	"time"

	"github.com/hashicorp/raft"

	"github.com/mqproject/mq/lib/auth"
)

const (
	// maxProducerIDBlock bounds one AllocateProducerIDs command.
	maxProducerIDBlock = 1 << 24
	// MaxPartitions bounds the partitions of one topic, so that one command
	// cannot make the image (and every snapshot) enormous.
	MaxPartitions = 100_000
)

// applyResult is what fsm.Apply returns to the proposer through
// raft.ApplyFuture.Response.
type applyResult struct {
	err error
	// unchanged is set by a command that was accepted but changes nothing
	// (a broker fenced already, an election not needed): the image is not
	// republished and its Version stays.
	unchanged bool
	// firstProducerID is the first ID of a block from AllocateProducerIDs.
	firstProducerID int64
	// brokerEpoch is the epoch a RegisterBroker gave the broker.
	brokerEpoch int64
	// partition is the partition after an AlterPartition.
	partition *Partition
	// alterations are the outcomes of an AlterPartition of many
	// partitions (version 3), in the order of its changes.
	alterations []alteration
	// elections are ElectLeaders' per-partition outcomes.
	elections []electionResult
	// reassignments are AlterReassignments' per-partition outcomes, in
	// the order of the command.
	reassignments []electionResult
	// unclean lists the leaders elected from outside the ISR.
	unclean []uncleanElection
	// leftISR lists the partitions a registering broker left the ISR of
	// because its replica lost committed records.
	leftISR []lostReplica
	// index is the Raft log index the command was committed at (0 from
	// a leader of an older version).
	index uint64
}

// fsm is the controller's raft.FSM. Raft calls Apply, Snapshot and Restore
// from one goroutine; image and changes may be read from any goroutine.
type fsm struct {
	logger *slog.Logger
	image  atomic.Pointer[Image]

	mu      sync.Mutex
	changes chan struct{} // closed and replaced when image changes

	// applied is the log index of the last command Apply was given,
	// refused and unchanging ones included; appliedKnown is false until
	// the first Apply and after a Restore, whose index Raft keeps to
	// itself (Controller.appliedIndex).
	applied      atomic.Uint64
	appliedKnown atomic.Bool

	// applyDelay slows every Apply down by this many nanoseconds: set by
	// a test only (DelayApplyForTest), to widen the moment in which this
	// node's image is behind the leader's.
	applyDelay atomic.Int64
}

var _ raft.FSM = (*fsm)(nil)

// newFSM returns an FSM holding the empty image; a nil logger is silent.
func newFSM(logger *slog.Logger) *fsm {
	if logger == nil {
		logger = slog.New(slog.DiscardHandler)
	}
	f := &fsm{logger: logger, changes: make(chan struct{})}
	f.image.Store(emptyImage())
	return f
}

// Image returns the current image.
func (f *fsm) Image() *Image { return f.image.Load() }

// Changes returns a channel closed at the next publication of an image.
func (f *fsm) Changes() <-chan struct{} {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.changes
}

// publish makes img the current image and wakes the watchers.
func (f *fsm) publish(img *Image) {
	f.image.Store(img)
	f.mu.Lock()
	close(f.changes)
	f.changes = make(chan struct{})
	f.mu.Unlock()
}

// Apply implements raft.FSM. It never panics on bad input: a record that
// does not decode, or a command the image refuses, leaves the image as it
// was and returns the error in the applyResult.
func (f *fsm) Apply(l *raft.Log) any {
	if d := f.applyDelay.Load(); d > 0 {
		time.Sleep(time.Duration(d))
	}
	res := f.apply(l.Index, l.Data)
	f.applied.Store(l.Index)
	f.appliedKnown.Store(true)
	return res
}

func (f *fsm) apply(index uint64, data []byte) applyResult {
	t, body, err := decodeCommand(data)
	if err != nil {
		// Refused records are rare and worth a look: a newer node wrote a
		// command this version cannot read, or something is corrupt.
		f.logger.Warn("controller: refusing raft record", "index", index, "type", t, "err", err)
		return applyResult{err: err}
	}
	old := f.image.Load()
	next, res := applyCommand(old, index, body)
	if res.err != nil {
		f.logger.Debug("controller: command refused", "index", index, "type", t, "err", res.err)
		return res
	}
	if res.unchanged {
		return res
	}
	next.Version = index
	f.publish(next)
	f.logger.Debug("controller: command applied", "index", index, "type", t)
	return res
}

// applyCommand computes the image that follows old after body, committed at
// log index. It does not modify old: it returns a new image sharing every
// unchanged part. It depends on nothing but its arguments.
func applyCommand(old *Image, index uint64, body any) (*Image, applyResult) {
	next := *old
	var err error
	var res applyResult
	switch c := body.(type) {
	case *controllerElectedV1:
		err = applyControllerElected(&next, c)
	case *registerBrokerV1:
		err = applyRegisterBroker(&next, index, c)
		res.brokerEpoch = int64(index & math.MaxInt64)
	case *registerBrokerV2:
		err = applyRegisterBrokerV2(&next, index, c, &res)
	case *registerBrokerV3:
		err = applyRegistration(&next, index, c, nil, nil, &res)
	case *registerBrokerV4:
		err = applyRegisterBrokerV4(&next, index, c, &res)
	case *fenceBrokerV1:
		err = applyFenceBroker(&next, c.ID, c.Epoch, legacyUnclean(&next, c.Unclean), &res)
	case *fenceBrokerV2:
		err = applyFenceBroker(&next, c.ID, c.Epoch, nil, &res)
	case *unfenceBrokerV1:
		err = applyUnfenceBroker(&next, c.ID, c.Epoch, legacyUnclean(&next, c.Unclean), &res)
	case *unfenceBrokerV2:
		err = applyUnfenceBroker(&next, c.ID, c.Epoch, nil, &res)
	case *controlledShutdownV1:
		err = applyControlledShutdown(&next, c, &res)
	case *alterPartitionV2:
		err = applyAlterPartitionV2(&next, c, &res)
	case *alterPartitionV3:
		err = applyAlterPartitionV3(&next, c, &res)
	case *resignLeadershipV1:
		err = applyResignLeadership(&next, c, &res)
	case *electLeadersV1:
		err = applyElectLeadersV1(&next, c, &res)
	case *electLeadersV2:
		err = applyElectLeadersV2(&next, c, &res)
	case *createTopicV1:
		err = applyCreateTopic(&next, c)
	case *deleteTopicV1:
		err = applyDeleteTopic(&next, c)
	case *createPartitionsV1:
		err = applyCreatePartitions(&next, c)
	case *alterTopicConfigsV1:
		err = applyAlterTopicConfigs(&next, c)
	case *alterBrokerConfigsV1:
		err = applyAlterBrokerConfigs(&next, c)
	case *alterGroupConfigsV1:
		err = applyAlterGroupConfigs(&next, c)
	case *alterPartitionV1:
		err = applyAlterPartition(&next, c)
	case *allocateProducerIDsV1:
		res.firstProducerID, err = applyAllocateProducerIDs(&next, c)
	case *alterReassignmentsV1:
		err = applyAlterReassignments(&next, c, &res)
	case *alterScramCredentialsV1:
		err = applyAlterScramCredentials(&next, c)
	case *alterACLsV1:
		err = applyAlterACLs(&next, c, &res)
	case *bindNodeV1:
		err = applyBindNode(&next, c, &res)
	case *unregisterBrokerV1:
		err = applyUnregisterBroker(&next, c, &res)
	case *remoteSegmentUploadedV1:
		err = applyRemoteSegmentUploaded(&next, c)
	case *remoteSegmentsDeletedV1:
		err = applyRemoteSegmentsDeleted(&next, c)
	case *remotePurgedV1:
		err = applyRemotePurged(&next, c, &res)
	default:
		err = fmt.Errorf("%w: no handler for %T", ErrUnknownCommand, body)
	}
	if err != nil {
		return old, applyResult{err: err}
	}
	if res.unchanged {
		return old, res
	}
	return &next, res
}

func applyBindNode(img *Image, c *bindNodeV1, res *applyResult) error {
	if c.ID < 0 || c.Principal == "" {
		return fmt.Errorf("%w: node %d principal %q", ErrInvalidCommand, c.ID, c.Principal)
	}
	if bound, ok := img.NodePrincipals[c.ID]; ok {
		if bound != c.Principal {
			return fmt.Errorf("%w: node %d is bound to another principal", ErrNodeNotAuthorized, c.ID)
		}
		res.unchanged = true
		return nil
	}
	for id, p := range img.NodePrincipals {
		if p == c.Principal {
			return fmt.Errorf("%w: principal %s is bound to node %d", ErrNodeNotAuthorized, c.Principal, id)
		}
	}
	bound := maps.Clone(img.NodePrincipals)
	if bound == nil {
		bound = map[int32]string{}
	}
	bound[c.ID] = c.Principal
	img.NodePrincipals = bound
	return nil
}

// applyUnregisterBroker removes a broker from the image: its
// registration and its node's certificate binding (a new node may then
// bind that ID or that certificate). Its dynamic configs stay, as
// Kafka's do. A broker that is alive (not fenced, not shut down) or
// still a replica of a partition is refused with ErrBrokerInUse; one
// the image does not know leaves it unchanged.
func applyUnregisterBroker(img *Image, c *unregisterBrokerV1, res *applyResult) error {
	if c.ID < 0 {
		return fmt.Errorf("%w: broker id %d", ErrInvalidCommand, c.ID)
	}
	b, registered := img.Brokers[c.ID]
	if registered && b.alive() {
		return fmt.Errorf("%w: broker %d is running (neither fenced nor shut down): stop it first", ErrBrokerInUse, c.ID)
	}
	hosted, first := 0, ""
	for _, t := range sortedTopics(img) {
		for _, p := range t.Partitions {
			if slices.Contains(p.Replicas, c.ID) {
				if hosted == 0 {
					first = fmt.Sprintf("%s:%d", t.Name, p.ID)
				}
				hosted++
			}
		}
	}
	if hosted > 0 {
		return fmt.Errorf("%w: broker %d still hosts replicas of %d partitions (%s among them): move them off it first", ErrBrokerInUse, c.ID, hosted, first)
	}
	_, bound := img.NodePrincipals[c.ID]
	if !registered && !bound {
		res.unchanged = true
		return nil
	}
	if registered {
		brokers := maps.Clone(img.Brokers)
		delete(brokers, c.ID)
		img.Brokers = brokers
	}
	if bound {
		principals := maps.Clone(img.NodePrincipals)
		delete(principals, c.ID)
		if len(principals) == 0 {
			principals = nil
		}
		img.NodePrincipals = principals
	}
	return nil
}

func applyControllerElected(img *Image, c *controllerElectedV1) error {
	if c.NodeID < 0 {
		return fmt.Errorf("%w: controller id %d", ErrInvalidCommand, c.NodeID)
	}
	if img.ClusterID == "" {
		if c.ClusterID == "" || len(c.ClusterID) > 64 {
			return fmt.Errorf("%w: cluster id %q", ErrInvalidCommand, c.ClusterID)
		}
		img.ClusterID = c.ClusterID
	}
	img.ControllerID = c.NodeID
	return nil
}

func applyRegisterBroker(img *Image, index uint64, c *registerBrokerV1) error {
	if c.ID < 0 || c.Port < 0 || c.Port > math.MaxUint16 {
		return fmt.Errorf("%w: id %d port %d", ErrInvalidBroker, c.ID, c.Port)
	}
	b := Broker{
		ID:        c.ID,
		Host:      c.Host,
		Port:      c.Port,
		Listeners: slices.Clone(c.Listeners),
		Epoch:     int64(index & math.MaxInt64),
	}
	if c.Rack != nil {
		rack := *c.Rack
		b.Rack = &rack
	}
	img.Brokers = maps.Clone(img.Brokers)
	img.Brokers[b.ID] = b
	return nil
}

func applyCreateTopic(img *Image, c *createTopicV1) error {
	assignments, err := checkCreateTopic(img, c)
	if err != nil {
		return err
	}
	t := &Topic{
		Name:       c.Name,
		ID:         c.ID,
		Partitions: make([]Partition, len(assignments)),
		Configs:    maps.Clone(c.Configs),
		Internal:   c.Internal,
	}
	if t.Configs == nil {
		t.Configs = map[string]string{}
	}
	for i, replicas := range assignments {
		t.Partitions[i] = newPartition(img, int32(i), replicas)
	}
	img.Topics = maps.Clone(img.Topics)
	img.TopicsByID = maps.Clone(img.TopicsByID)
	img.Topics[t.Name] = t
	img.TopicsByID[t.ID] = t
	return nil
}

// checkCreateTopic is every check of applyCreateTopic, which it changes
// nothing for: it returns the replicas of the new partitions, or why c
// is refused. Controller.ValidateCreateTopic runs it alone.
func checkCreateTopic(img *Image, c *createTopicV1) ([][]int32, error) {
	if c.Name == "" {
		return nil, fmt.Errorf("%w: empty topic name", ErrInvalidCommand)
	}
	if _, ok := img.Topics[c.Name]; ok {
		return nil, fmt.Errorf("%w: %q", ErrTopicExists, c.Name)
	}
	if !c.ID.valid() {
		return nil, fmt.Errorf("%w: reserved topic id %s", ErrInvalidCommand, c.ID)
	}
	if other, ok := img.TopicsByID[c.ID]; ok {
		return nil, fmt.Errorf("%w: topic id %s already names %q", ErrTopicExists, c.ID, other.Name)
	}
	if err := checkConfigs(c.Configs, nil); err != nil {
		return nil, err
	}
	var assignments [][]int32
	if len(c.Assignments) > 0 {
		if c.Partitions > 0 && int(c.Partitions) != len(c.Assignments) {
			return nil, fmt.Errorf("%w: %d partitions but %d assignments", ErrInvalidPartitions, c.Partitions, len(c.Assignments))
		}
		if len(c.Assignments) > MaxPartitions {
			return nil, fmt.Errorf("%w: %d assignments, at most %d", ErrInvalidPartitions, len(c.Assignments), MaxPartitions)
		}
		if c.ReplicationFactor > 0 {
			for _, a := range c.Assignments {
				if len(a) != int(c.ReplicationFactor) {
					return nil, fmt.Errorf("%w: %d replicas with replication factor %d", ErrInvalidReplicaAssignment, len(a), c.ReplicationFactor)
				}
			}
		}
		if err := checkAssignments(img, c.Assignments); err != nil {
			return nil, err
		}
		assignments = c.Assignments
	} else {
		if c.Partitions <= 0 || c.Partitions > MaxPartitions {
			return nil, fmt.Errorf("%w: %d, want 1..%d", ErrInvalidPartitions, c.Partitions, MaxPartitions)
		}
		var err error
		assignments, err = assignReplicas(img, c.ID, 0, c.Partitions, c.ReplicationFactor)
		if err != nil {
			return nil, err
		}
	}
	return assignments, nil
}

// newPartition returns a new partition whose alive replicas are in sync,
// led by the first of them; the replicas are checked by checkAssignments
// or placed by assignReplicas, so at least one is alive.
func newPartition(img *Image, id int32, replicas []int32) Partition {
	isr := slices.DeleteFunc(slices.Clone(replicas), func(r int32) bool { return !img.BrokerAlive(r) })
	return Partition{
		ID:       id,
		Replicas: slices.Clone(replicas),
		ISR:      isr,
		Leader:   isr[0],
	}
}

// checkAssignments verifies explicit replica lists: each valid, all of the
// same length, every broker registered, at least one alive in each.
func checkAssignments(img *Image, assignments [][]int32) error {
	for i, replicas := range assignments {
		if err := checkReplicas(replicas); err != nil {
			return fmt.Errorf("partition %d: %w", i, err)
		}
		if len(replicas) != len(assignments[0]) {
			return fmt.Errorf("%w: partition %d has %d replicas, partition 0 has %d", ErrInvalidReplicaAssignment, i, len(replicas), len(assignments[0]))
		}
		for _, r := range replicas {
			if _, ok := img.Brokers[r]; !ok {
				return fmt.Errorf("%w: broker %d is not registered", ErrInvalidReplicaAssignment, r)
			}
		}
		if !slices.ContainsFunc(replicas, img.BrokerAlive) {
			return fmt.Errorf("%w: partition %d: brokers %v are all fenced or shutting down", ErrInvalidReplicaAssignment, i, replicas)
		}
	}
	return nil
}

// assignReplicas places partitions first..first+count-1 of the topic id
// over the alive brokers (see placementOrder): replica r of partition i is
// order[(start+i+r) % n]. The start is derived from the topic ID, so
// different topics start on different brokers while Apply stays
// deterministic; consecutive partitions start one broker further, so the
// preferred leaders (first replicas) are spread evenly.
func assignReplicas(img *Image, id TopicID, first, count int32, replicationFactor int16) ([][]int32, error) {
	brokers := placementOrder(img)
	if replicationFactor <= 0 || int(replicationFactor) > len(brokers) {
		return nil, fmt.Errorf("%w: %d with %d live brokers", ErrInvalidReplicationFactor, replicationFactor, len(brokers))
	}
	n := uint64(len(brokers))
	start := uint64(binary.BigEndian.Uint32(id[:4]))
	out := make([][]int32, count)
	for i := range out {
		replicas := make([]int32, replicationFactor)
		for r := range replicas {
			replicas[r] = brokers[(start+uint64(first)+uint64(i)+uint64(r))%n]
		}
		out[i] = replicas
	}
	return out, nil
}

// placementOrder lists the alive brokers in the order replicas are dealt
// out. Without racks (or when some alive broker has none) it is ID order.
// With racks it alternates between them: the first broker of each rack
// (racks by name, brokers by ID), then the second of each, and so on, so
// consecutive brokers, and thus the replicas of one partition, are on
// different racks as far as the racks allow.
func placementOrder(img *Image) []int32 {
	var alive []int32
	racks := map[string][]int32{}
	withRacks := true
	for _, id := range sortedKeys(img.Brokers) {
		b := img.Brokers[id]
		if !b.alive() {
			continue
		}
		alive = append(alive, id)
		if b.Rack == nil {
			withRacks = false
			continue
		}
		racks[*b.Rack] = append(racks[*b.Rack], id)
	}
	if !withRacks || len(racks) < 2 {
		return alive
	}
	names := slices.Sorted(maps.Keys(racks))
	out := make([]int32, 0, len(alive))
	for round := 0; len(out) < len(alive); round++ {
		for _, name := range names {
			if round < len(racks[name]) {
				out = append(out, racks[name][round])
			}
		}
	}
	return out
}

func applyDeleteTopic(img *Image, c *deleteTopicV1) error {
	t, ok := img.Topics[c.Name]
	if !ok {
		return fmt.Errorf("%w: %q", ErrUnknownTopic, c.Name)
	}
	img.Topics = maps.Clone(img.Topics)
	img.TopicsByID = maps.Clone(img.TopicsByID)
	delete(img.Topics, t.Name)
	delete(img.TopicsByID, t.ID)
	dropRemoteLogs(img, t.ID)
	return nil
}

func applyCreatePartitions(img *Image, c *createPartitionsV1) error {
	old, assignments, err := checkCreatePartitions(img, c)
	if err != nil {
		return err
	}
	current := int32(len(old.Partitions))
	t := *old
	t.Partitions = slices.Grow(slices.Clip(old.Partitions), len(assignments))
	for i, replicas := range assignments {
		t.Partitions = append(t.Partitions, newPartition(img, current+int32(i), replicas))
	}
	replaceTopic(img, &t)
	return nil
}

// checkCreatePartitions is every check of applyCreatePartitions, which it
// changes nothing for: it returns the topic and the replicas of its new
// partitions, or why c is refused. Controller.ValidateCreatePartitions
// runs it alone.
func checkCreatePartitions(img *Image, c *createPartitionsV1) (*Topic, [][]int32, error) {
	old, ok := img.Topics[c.Topic]
	if !ok {
		return nil, nil, fmt.Errorf("%w: %q", ErrUnknownTopic, c.Topic)
	}
	current := int32(len(old.Partitions))
	if c.Total <= current {
		return nil, nil, fmt.Errorf("%w: topic %q has %d partitions, asked for %d", ErrInvalidPartitions, c.Topic, current, c.Total)
	}
	if c.Total > MaxPartitions {
		return nil, nil, fmt.Errorf("%w: %d, at most %d", ErrInvalidPartitions, c.Total, MaxPartitions)
	}
	added := c.Total - current
	var assignments [][]int32
	if len(c.Assignments) > 0 {
		if len(c.Assignments) != int(added) {
			return nil, nil, fmt.Errorf("%w: %d new partitions but %d assignments", ErrInvalidReplicaAssignment, added, len(c.Assignments))
		}
		if len(c.Assignments[0]) != len(old.Partitions[0].Replicas) {
			return nil, nil, fmt.Errorf("%w: %d replicas, topic has %d", ErrInvalidReplicaAssignment, len(c.Assignments[0]), len(old.Partitions[0].Replicas))
		}
		if err := checkAssignments(img, c.Assignments); err != nil {
			return nil, nil, err
		}
		assignments = c.Assignments
	} else {
		rf := len(old.Partitions[0].Replicas)
		if rf > math.MaxInt16 {
			return nil, nil, fmt.Errorf("%w: %d", ErrInvalidReplicationFactor, rf)
		}
		var err error
		assignments, err = assignReplicas(img, old.ID, current, added, int16(rf))
		if err != nil {
			return nil, nil, err
		}
	}
	return old, assignments, nil
}

// replaceTopic puts t in place of the topic of the same name and ID.
func replaceTopic(img *Image, t *Topic) {
	replaceTopics(img, map[string]*Topic{t.Name: t})
}

// replaceTopics is replaceTopic for many topics, copying the image's maps
// once.
func replaceTopics(img *Image, ts map[string]*Topic) {
	img.Topics = maps.Clone(img.Topics)
	img.TopicsByID = maps.Clone(img.TopicsByID)
	for _, t := range ts {
		img.Topics[t.Name] = t
		img.TopicsByID[t.ID] = t
	}
}

// checkConfigs refuses empty keys and a key both set and deleted.
func checkConfigs(set map[string]string, del []string) error {
	for k := range set {
		if k == "" {
			return fmt.Errorf("%w: empty config name", ErrInvalidConfig)
		}
	}
	for _, k := range del {
		if k == "" {
			return fmt.Errorf("%w: empty config name", ErrInvalidConfig)
		}
		if _, ok := set[k]; ok {
			return fmt.Errorf("%w: %q both set and deleted", ErrInvalidConfig, k)
		}
	}
	return nil
}

// alterConfigs returns a copy of old with set applied and del removed.
func alterConfigs(old, set map[string]string, del []string) map[string]string {
	out := maps.Clone(old)
	if out == nil {
		out = map[string]string{}
	}
	maps.Copy(out, set)
	for _, k := range del {
		delete(out, k)
	}
	return out
}

func applyAlterTopicConfigs(img *Image, c *alterTopicConfigsV1) error {
	old, ok := img.Topics[c.Topic]
	if !ok {
		return fmt.Errorf("%w: %q", ErrUnknownTopic, c.Topic)
	}
	if err := checkConfigs(c.Set, c.Delete); err != nil {
		return err
	}
	t := *old
	t.Configs = alterConfigs(old.Configs, c.Set, c.Delete)
	replaceTopic(img, &t)
	return nil
}

func applyAlterBrokerConfigs(img *Image, c *alterBrokerConfigsV1) error {
	if c.BrokerID < -1 {
		return fmt.Errorf("%w: broker id %d", ErrInvalidConfig, c.BrokerID)
	}
	if err := checkConfigs(c.Set, c.Delete); err != nil {
		return err
	}
	cfg := alterConfigs(img.BrokerConfigs[c.BrokerID], c.Set, c.Delete)
	img.BrokerConfigs = maps.Clone(img.BrokerConfigs)
	if len(cfg) == 0 {
		delete(img.BrokerConfigs, c.BrokerID)
	} else {
		img.BrokerConfigs[c.BrokerID] = cfg
	}
	return nil
}

func applyAlterGroupConfigs(img *Image, c *alterGroupConfigsV1) error {
	if c.Group == "" {
		return fmt.Errorf("%w: empty group id", ErrInvalidConfig)
	}
	if err := checkConfigs(c.Set, c.Delete); err != nil {
		return err
	}
	cfg := alterConfigs(img.GroupConfigs[c.Group], c.Set, c.Delete)
	img.GroupConfigs = maps.Clone(img.GroupConfigs)
	if img.GroupConfigs == nil {
		img.GroupConfigs = map[string]map[string]string{}
	}
	if len(cfg) == 0 {
		delete(img.GroupConfigs, c.Group)
	} else {
		img.GroupConfigs[c.Group] = cfg
	}
	return nil
}

func applyAlterScramCredentials(img *Image, c *alterScramCredentialsV1) error {
	for _, u := range c.Upsertions {
		if err := checkScramCredential(u); err != nil {
			return err
		}
	}
	for _, d := range c.Deletions {
		if d.User == "" || !slices.Contains(auth.ScramMechanisms, d.Mechanism) {
			return fmt.Errorf("%w: delete SCRAM credential of user %q, mechanism %q", ErrInvalidCommand, d.User, d.Mechanism)
		}
	}
	creds := maps.Clone(img.ScramCredentials)
	if creds == nil {
		creds = map[string]map[string]auth.Credential{}
	}
	for _, d := range c.Deletions {
		if _, ok := creds[d.User][d.Mechanism]; !ok {
			continue
		}
		byMech := maps.Clone(creds[d.User])
		delete(byMech, d.Mechanism)
		if len(byMech) == 0 {
			delete(creds, d.User)
		} else {
			creds[d.User] = byMech
		}
	}
	for _, u := range c.Upsertions {
		byMech := maps.Clone(creds[u.User])
		if byMech == nil {
			byMech = map[string]auth.Credential{}
		}
		byMech[u.Mechanism] = auth.Credential{
			Salt: u.Salt, Iterations: int(u.Iterations), StoredKey: u.StoredKey, ServerKey: u.ServerKey,
		}
		creds[u.User] = byMech
	}
	if len(creds) == 0 {
		creds = nil
	}
	img.ScramCredentials = creds
	return nil
}

// checkScramCredential refuses a credential a SCRAM exchange could not
// use.
func checkScramCredential(u scramCredentialV1) error {
	if u.User == "" || !slices.Contains(auth.ScramMechanisms, u.Mechanism) {
		return fmt.Errorf("%w: SCRAM credential of user %q, mechanism %q", ErrInvalidCommand, u.User, u.Mechanism)
	}
	if err := auth.CheckIterations(int(u.Iterations)); err != nil {
		return fmt.Errorf("%w: SCRAM credential of user %q: %v", ErrInvalidCommand, u.User, err)
	}
	if len(u.Salt) == 0 || len(u.StoredKey) == 0 || len(u.ServerKey) == 0 {
		return fmt.Errorf("%w: SCRAM credential of user %q without salt or keys", ErrInvalidCommand, u.User)
	}
	return nil
}

func applyAlterACLs(img *Image, c *alterACLsV1, res *applyResult) error {
	create := make([]auth.Binding, len(c.Create))
	for i, b := range c.Create {
		create[i] = b.binding()
		if err := create[i].Validate(); err != nil {
			return fmt.Errorf("%w: %v", ErrInvalidACL, err)
		}
	}
	filters := make([]auth.Filter, len(c.Delete))
	for i, f := range c.Delete {
		filters[i] = f.filter()
		if err := filters[i].Validate(); err != nil {
			return fmt.Errorf("%w: %v", ErrInvalidACL, err)
		}
	}
	acls, _ := img.ACLs.Delete(filters)
	if len(create) > 0 {
		acls = acls.Add(create)
	}
	if slices.Equal(acls.Bindings(), img.ACLs.Bindings()) {
		res.unchanged = true
		return nil
	}
	img.ACLs = acls
	return nil
}

func applyAlterPartition(img *Image, c *alterPartitionV1) error {
	old, ok := img.Topics[c.Topic]
	if !ok {
		return fmt.Errorf("%w: %q", ErrUnknownTopic, c.Topic)
	}
	if c.Partition < 0 || int(c.Partition) >= len(old.Partitions) {
		return fmt.Errorf("%w: %q partition %d", ErrUnknownPartition, c.Topic, c.Partition)
	}
	p := old.Partitions[c.Partition]
	if c.LeaderEpoch < p.LeaderEpoch {
		return fmt.Errorf("%w: %q partition %d: leader epoch %d < current %d", ErrStaleLeaderEpoch, c.Topic, c.Partition, c.LeaderEpoch, p.LeaderEpoch)
	}
	if c.Leader != p.Leader && c.LeaderEpoch == p.LeaderEpoch {
		return fmt.Errorf("%w: %q partition %d: leader change %d -> %d without a new leader epoch", ErrStaleLeaderEpoch, c.Topic, c.Partition, p.Leader, c.Leader)
	}
	if c.Leader < -1 {
		return fmt.Errorf("%w: leader %d", ErrInvalidPartitionState, c.Leader)
	}
	if len(c.ISR) == 0 && c.Leader != -1 {
		return fmt.Errorf("%w: empty isr with leader %d", ErrInvalidPartitionState, c.Leader)
	}
	if err := checkPartitionState(p.Replicas, c.Leader, c.ISR); err != nil {
		return fmt.Errorf("%q partition %d: %w", c.Topic, c.Partition, err)
	}
	for _, r := range c.ISR {
		if b, ok := img.Brokers[r]; ok && b.Fenced && (r == c.Leader || len(c.ISR) > 1) {
			return fmt.Errorf("%w: %q partition %d: broker %d is fenced", ErrIneligibleReplica, c.Topic, c.Partition, r)
		}
	}
	if p.PartitionEpoch == math.MaxInt32 {
		return fmt.Errorf("%w: partition epoch exhausted", ErrInvalidPartitionState)
	}
	p.Leader = c.Leader
	p.ISR = slices.Clone(c.ISR)
	p.LeaderEpoch = c.LeaderEpoch
	p.PartitionEpoch++
	t := *old
	t.Partitions = slices.Clone(old.Partitions)
	t.Partitions[c.Partition] = p
	replaceTopic(img, &t)
	return nil
}

func applyAllocateProducerIDs(img *Image, c *allocateProducerIDsV1) (int64, error) {
	if c.Count <= 0 || c.Count > maxProducerIDBlock {
		return 0, fmt.Errorf("%w: %d (want 1..%d)", ErrInvalidProducerIDCount, c.Count, maxProducerIDBlock)
	}
	first := img.NextProducerID
	if first > math.MaxInt64-c.Count {
		return 0, fmt.Errorf("%w: producer ids exhausted", ErrInvalidProducerIDCount)
	}
	img.NextProducerID = first + c.Count
	return first, nil
}

// Snapshot implements raft.FSM: the snapshot holds the current image,
// which is immutable, so Persist may run concurrently with Apply.
func (f *fsm) Snapshot() (raft.FSMSnapshot, error) {
	return &imageSnapshot{image: f.image.Load()}, nil
}

// Restore implements raft.FSM: it replaces the image with the one in rc,
// or keeps the current image and returns an error.
func (f *fsm) Restore(rc io.ReadCloser) error {
	defer rc.Close()
	img, err := readSnapshot(rc)
	if err != nil {
		f.logger.Error("controller: restore snapshot", "err", err)
		return err
	}
	f.appliedKnown.Store(false)
	f.publish(img)
	f.logger.Debug("controller: restored snapshot", "version", img.Version, "topics", len(img.Topics))
	return nil
}

type imageSnapshot struct{ image *Image }

func (s *imageSnapshot) Persist(sink raft.SnapshotSink) error {
	if err := writeSnapshot(sink, s.image); err != nil {
		return errors.Join(err, sink.Cancel())
	}
	return sink.Close()
}

func (s *imageSnapshot) Release() {}

// sortedTopics returns the topics of img ordered by name.
func sortedTopics(img *Image) []*Topic {
	out := slices.Collect(maps.Values(img.Topics))
	sort.Slice(out, func(i, j int) bool { return out[i].Name < out[j].Name })
	return out
}
