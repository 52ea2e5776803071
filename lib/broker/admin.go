package broker

import (
	"context"
	"fmt"
	"maps"
	"slices"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/mqproject/mq/lib/config"
	"github.com/mqproject/mq/lib/controller"
	"github.com/mqproject/mq/lib/server"
)

// adminAPIs lists the administrative APIs: topics and partitions (this
// file), configs (configs.go), the cluster (cluster.go) and the users'
// SCRAM credentials (users.go).
//
// They change the cluster image through the controller, synchronously on
// the connection's reader goroutine: a request pipelined after a
// CreateTopics on the same connection sees the new topic in the image.
func (b *Broker) adminAPIs() map[int16]api {
	return map[int16]api{
		kmsg.CreateTopics.Int16():                 {0, 7, b.handleCreateTopics},
		kmsg.DeleteTopics.Int16():                 {0, 6, b.handleDeleteTopics},
		kmsg.DescribeConfigs.Int16():              {0, 4, b.handleDescribeConfigs},
		kmsg.AlterConfigs.Int16():                 {0, 2, b.handleAlterConfigs},
		kmsg.CreatePartitions.Int16():             {0, 3, b.handleCreatePartitions},
		kmsg.IncrementalAlterConfigs.Int16():      {0, 1, b.handleIncrementalAlterConfigs},
		kmsg.DescribeCluster.Int16():              {0, 2, b.handleDescribeCluster},
		kmsg.DescribeLogDirs.Int16():              {0, 5, b.handleDescribeLogDirs},
		kmsg.ElectLeaders.Int16():                 {0, 2, b.handleElectLeaders},
		kmsg.DescribeQuorum.Int16():               {0, 1, b.handleDescribeQuorum},
		kmsg.AlterPartitionAssignments.Int16():    {0, 1, b.handleAlterPartitionReassignments},
		kmsg.ListPartitionReassignments.Int16():   {0, 0, b.handleListPartitionReassignments},
		kmsg.DescribeUserSCRAMCredentials.Int16(): {0, 0, b.handleDescribeUserScramCredentials},
		kmsg.AlterUserSCRAMCredentials.Int16():    {0, 0, b.handleAlterUserScramCredentials},
		kmsg.UnregisterBroker.Int16():             {0, 0, b.handleUnregisterBroker},
	}
}

// syncData makes the partitions apply the controller's image now, so
// that the answer to an admin request is only sent once its partitions
// are open (or its deleted data gone, or its config in force) on this
// node.
func (b *Broker) syncData() {
	b.parts.Refresh()
}

// refuse returns an adminError with a formatted message.
func refuse(code *kerr.Error, format string, args ...any) error {
	return &adminError{code: code, msg: fmt.Sprintf(format, args...)}
}

// defaultAdminTimeout bounds controller commands of requests that carry
// no timeout (AlterConfigs) or a timeout <= 0. Kafka reads a timeout <= 0
// as "start the change and answer at once"; our commands are done when
// they are committed, so they get this bound instead.
const defaultAdminTimeout = 30 * time.Second

// withTimeout derives the context for a request's controller commands.
func withTimeout(ctx context.Context, timeoutMillis int32) (context.Context, context.CancelFunc) {
	d := time.Duration(timeoutMillis) * time.Millisecond
	if d <= 0 {
		d = defaultAdminTimeout
	}
	return context.WithTimeout(ctx, d)
}

// validateTopicName refuses a topic name that breaks Kafka's rules
// (config.CheckTopicName), saying what is wrong with it.
func validateTopicName(name string) error {
	if err := config.CheckTopicName(name); err != nil {
		return refuse(kerr.InvalidTopicException, "%v", err)
	}
	return nil
}

// reservedTopics are names that clients may not create or delete: the
// internal topics of Kafka's coordinators (ours keep the same names) and
// Kafka's metadata log, which a Kafka client must never see as a topic.
var reservedTopics = map[string]bool{
	"__consumer_offsets":    true,
	"__transaction_state":   true,
	"__share_group_state":   true,
	"__cluster_metadata":    true,
	"__remote_log_metadata": true,
}

// isInternalTopic reports whether t is a topic that clients must not
// delete or repartition: the group coordinator maps groups to partitions
// of __consumer_offsets by hashing, so a changed partition count or a
// deleted topic loses every group's committed offsets.
func isInternalTopic(t *controller.Topic) bool {
	return t.Internal || reservedTopics[t.Name]
}

// eachDistinct calls fn once for each distinct item of a request (topics,
// config resources), in request order. An item listed more than once is
// answered once, with an INVALID_REQUEST error passed to fn, as Kafka does.
func eachDistinct[R any, K comparable](items []R, key func(*R) K, label func(K) string, fn func(item *R, err error)) {
	count := make(map[K]int, len(items))
	for i := range items {
		count[key(&items[i])]++
	}
	answered := make(map[K]bool, len(items))
	for i := range items {
		item := &items[i]
		k := key(item)
		if answered[k] {
			continue
		}
		answered[k] = true
		var err error
		if count[k] > 1 {
			err = refuse(kerr.InvalidRequest, "%s is listed more than once", label(k))
		}
		fn(item, err)
	}
}

func topicLabel(name string) string { return fmt.Sprintf("topic %q", name) }

// brokerIDs returns the IDs of the registered brokers, sorted.
func brokerIDs(img *controller.Image) []int32 {
	return slices.Sorted(maps.Keys(img.Brokers))
}

// checkReplicaList verifies one explicit replica list: not empty, no
// broker twice, every broker registered.
func checkReplicaList(img *controller.Image, partition int32, replicas []int32) error {
	if len(replicas) == 0 {
		return refuse(kerr.InvalidReplicaAssignment, "partition %d has no replicas", partition)
	}
	for i, r := range replicas {
		if slices.Contains(replicas[:i], r) {
			return refuse(kerr.InvalidReplicaAssignment, "partition %d lists broker %d twice", partition, r)
		}
		if _, ok := img.Brokers[r]; !ok {
			return refuse(kerr.InvalidReplicaAssignment, "partition %d: broker %d is not registered", partition, r)
		}
	}
	return nil
}

// handleCreateTopics answers CreateTopics (key 19).
func (b *Broker) handleCreateTopics(ctx context.Context, _ *server.ConnInfo, req *server.Request) server.Reply {
	r := req.Body.(*kmsg.CreateTopicsRequest)
	resp := r.ResponseKind().(*kmsg.CreateTopicsResponse)
	ctx, cancel := withTimeout(ctx, r.TimeoutMillis)
	defer cancel()

	// The request's size is checked first, before anything is allocated
	// per topic: one over the cap is refused whole, as Kafka 4 does.
	if err := b.checkRequestPartitions(createTopicsPartitions(r, b.effectiveSettings(b.ctrl.Image()).NumPartitions)); err != nil {
		resp.Topics = make([]kmsg.CreateTopicsResponseTopic, len(r.Topics))
		code, msg := kafkaError(err)
		for i, t := range r.Topics {
			rt := &resp.Topics[i]
			rt.Default()
			rt.Topic, rt.ErrorCode, rt.ErrorMessage = t.Topic, code, msg
		}
		return reply(resp)
	}
	cluster := b.clusterPartitions(b.ctrl.Image())
	key := func(t *kmsg.CreateTopicsRequestTopic) string { return t.Topic }
	eachDistinct(r.Topics, key, topicLabel, func(t *kmsg.CreateTopicsRequestTopic, err error) {
		rt := kmsg.NewCreateTopicsResponseTopic()
		rt.Topic = t.Topic
		if err == nil {
			var created createdTopic
			created, err = b.createTopic(ctx, t, r.ValidateOnly, cluster)
			if err == nil {
				rt.TopicID = created.id
				rt.NumPartitions = created.partitions
				rt.ReplicationFactor = created.replicationFactor
				rt.Configs = created.configs
			}
		}
		if err == nil {
			cluster.n += int64(rt.NumPartitions)
		}
		rt.ErrorCode, rt.ErrorMessage = kafkaError(err)
		resp.Topics = append(resp.Topics, rt)
	})
	// The new partitions are opened once for all the topics of the
	// request, not once per topic: each apply opens what is new since the
	// last, so ten topics of 1,000 partitions took ten applies.
	if !r.ValidateOnly {
		b.syncData()
	}
	return reply(resp)
}

// createTopicsPartitions is the partitions a CreateTopics request would
// add: each topic's assignments, else its partition count (numPartitions
// for -1), a topic counting at least one whatever it asks.
func createTopicsPartitions(r *kmsg.CreateTopicsRequest, numPartitions int32) int64 {
	var n int64
	for i := range r.Topics {
		t := &r.Topics[i]
		switch {
		case len(t.ReplicaAssignment) > 0:
			n += int64(len(t.ReplicaAssignment))
		case t.NumPartitions == -1:
			n += int64(max(numPartitions, 1))
		default:
			n += int64(max(t.NumPartitions, 1))
		}
	}
	return n
}

// checkRequestPartitions refuses a request that would add more than
// max.partitions.per.request partitions, with POLICY_VIOLATION (Kafka's
// code and wording for its fixed bound of 10,000).
func (b *Broker) checkRequestPartitions(n int64) error {
	if limit := int64(b.cfg.Settings.MaxPartitionsPerRequest); limit > 0 && n > limit {
		return refuse(kerr.PolicyViolation, "excessively large number of partitions per request: %d, max.partitions.per.request is %d", n, limit)
	}
	return nil
}

// partitionCount is the partitions the cluster holds, as a request sees
// it: its image's, plus those it created itself since.
type partitionCount struct{ n int64 }

// clusterPartitions counts the partitions of img.
func (b *Broker) clusterPartitions(img *controller.Image) *partitionCount {
	var n int64
	for _, t := range img.Topics {
		n += int64(len(t.Partitions))
	}
	return &partitionCount{n: n}
}

// checkClusterPartitions refuses adding n partitions to a cluster of
// have, over max.partitions, with POLICY_VIOLATION.
func (b *Broker) checkClusterPartitions(have *partitionCount, n int64) error {
	if limit := int64(b.cfg.Settings.MaxPartitions); limit > 0 && have.n+n > limit {
		return refuse(kerr.PolicyViolation, "the cluster holds %d partitions: %d more would go over max.partitions (%d)", have.n, n, limit)
	}
	return nil
}

// createdTopic is what a v5+ CreateTopics response tells about a topic.
type createdTopic struct {
	id                controller.TopicID
	partitions        int32
	replicationFactor int16
	configs           []kmsg.CreateTopicsResponseTopicConfig
}

// createTopic validates one topic of a CreateTopics request and, unless
// validateOnly, creates it in a cluster of cluster partitions. The
// checks of the request's form are here; those of the image are the
// controller's, which validateOnly runs too
// (Controller.ValidateCreateTopic), so that it answers what a real
// creation would.
func (b *Broker) createTopic(ctx context.Context, t *kmsg.CreateTopicsRequestTopic, validateOnly bool, cluster *partitionCount) (createdTopic, error) {
	if err := validateTopicName(t.Topic); err != nil {
		return createdTopic{}, err
	}
	if reservedTopics[t.Topic] {
		return createdTopic{}, refuse(kerr.InvalidTopicException, "topic name %q is reserved for internal use", t.Topic)
	}
	img := b.ctrl.Image()
	if _, ok := img.Topics[t.Topic]; ok {
		return createdTopic{}, refuse(kerr.TopicAlreadyExists, "topic %q already exists", t.Topic)
	}
	settings := b.effectiveSettings(img)

	cmd := controller.CreateTopic{Name: t.Topic}
	if len(t.ReplicaAssignment) > 0 {
		if t.NumPartitions != -1 || t.ReplicationFactor != -1 {
			return createdTopic{}, refuse(kerr.InvalidRequest, "a replica assignment was given with a partition count or replication factor; give -1 for both")
		}
		assignments, err := orderAssignments(img, t.ReplicaAssignment)
		if err != nil {
			return createdTopic{}, err
		}
		cmd.Assignments = assignments
		cmd.Partitions = int32(len(assignments))
		cmd.ReplicationFactor = int16(len(assignments[0]))
	} else {
		cmd.Partitions = t.NumPartitions
		if cmd.Partitions == -1 {
			cmd.Partitions = settings.NumPartitions
		}
		if cmd.Partitions <= 0 {
			return createdTopic{}, refuse(kerr.InvalidPartitions, "number of partitions must be at least 1 (or -1 for num.partitions), got %d", t.NumPartitions)
		}
		cmd.ReplicationFactor = t.ReplicationFactor
		if cmd.ReplicationFactor == -1 {
			cmd.ReplicationFactor = settings.DefaultReplicationFactor
		}
		if cmd.ReplicationFactor <= 0 {
			return createdTopic{}, refuse(kerr.InvalidReplicationFactor, "replication factor must be at least 1 (or -1 for default.replication.factor), got %d", t.ReplicationFactor)
		}
		if n := len(img.Brokers); int(cmd.ReplicationFactor) > n {
			return createdTopic{}, refuse(kerr.InvalidReplicationFactor, "replication factor %d is larger than the number of registered brokers (%d)", cmd.ReplicationFactor, n)
		}
	}

	configs := make(map[string]string, len(t.Configs))
	for _, c := range t.Configs {
		if _, ok := configs[c.Name]; ok {
			return createdTopic{}, refuse(kerr.InvalidRequest, "config %q is given more than once", c.Name)
		}
		if c.Value == nil {
			return createdTopic{}, refuse(kerr.InvalidConfig, "config %q has a null value", c.Name)
		}
		if err := config.ValidateTopicConfig(c.Name, *c.Value); err != nil {
			return createdTopic{}, refuse(kerr.InvalidConfig, "%v", err)
		}
		configs[c.Name] = *c.Value
	}
	if _, err := config.ResolveTopic(settings, configs); err != nil {
		return createdTopic{}, refuse(kerr.InvalidConfig, "%v", err)
	}
	cmd.Configs = configs
	if err := b.checkClusterPartitions(cluster, int64(cmd.Partitions)); err != nil {
		return createdTopic{}, err
	}

	out := createdTopic{partitions: cmd.Partitions, replicationFactor: cmd.ReplicationFactor}
	if validateOnly {
		if err := b.ctrl.ValidateCreateTopic(cmd); err != nil {
			return createdTopic{}, err
		}
	} else {
		id, err := b.ctrl.CreateTopic(ctx, cmd)
		if err != nil {
			return createdTopic{}, err
		}
		out.id = id
		b.log.Info("created topic", "topic", t.Topic, "id", id, "partitions", cmd.Partitions, "replication_factor", cmd.ReplicationFactor)
		img = b.ctrl.Image()
	}
	for _, e := range b.topicConfigs(img, configs) {
		c := kmsg.NewCreateTopicsResponseTopicConfig()
		c.Name = e.Name
		c.Value = e.visibleValue()
		c.ReadOnly = e.ReadOnly
		c.Source = int8(e.Source)
		c.IsSensitive = e.Sensitive
		out.configs = append(out.configs, c)
	}
	return out, nil
}

// orderAssignments turns CreateTopics replica assignments, which name
// their partition, into one replica list per partition 0..n-1, checking
// that every partition is given once and every list is valid and of the
// same length.
func orderAssignments(img *controller.Image, in []kmsg.CreateTopicsRequestTopicReplicaAssignment) ([][]int32, error) {
	out := make([][]int32, len(in))
	for _, a := range in {
		if a.Partition < 0 || int(a.Partition) >= len(in) {
			return nil, refuse(kerr.InvalidReplicaAssignment, "partitions must be numbered 0 to %d, got %d", len(in)-1, a.Partition)
		}
		if out[a.Partition] != nil {
			return nil, refuse(kerr.InvalidReplicaAssignment, "partition %d is assigned twice", a.Partition)
		}
		if err := checkReplicaList(img, a.Partition, a.Replicas); err != nil {
			return nil, err
		}
		out[a.Partition] = a.Replicas
	}
	for i, replicas := range out {
		if len(replicas) != len(out[0]) {
			return nil, refuse(kerr.InvalidReplicaAssignment, "partition %d has %d replicas, partition 0 has %d", i, len(replicas), len(out[0]))
		}
	}
	return out, nil
}

// deleteTarget is one topic of a DeleteTopics request, by name or by ID.
type deleteTarget struct {
	name *string
	id   controller.TopicID
}

// handleDeleteTopics answers DeleteTopics (key 20). Up to v5 topics are
// named; v6 names each topic or gives its ID.
//
// Internal topics (__consumer_offsets) are refused with
// INVALID_TOPIC_EXCEPTION. Kafka's brokers would delete them (only its
// kafka-topics tool refuses), losing every group's committed offsets; we
// refuse on the broker, with the error code Kafka uses when it refuses
// other operations on internal topics (DeleteRecords, Produce).
func (b *Broker) handleDeleteTopics(ctx context.Context, _ *server.ConnInfo, req *server.Request) server.Reply {
	r := req.Body.(*kmsg.DeleteTopicsRequest)
	resp := r.ResponseKind().(*kmsg.DeleteTopicsResponse)
	ctx, cancel := withTimeout(ctx, r.TimeoutMillis)
	defer cancel()

	var targets []deleteTarget
	if r.Version < 6 {
		for i := range r.TopicNames {
			targets = append(targets, deleteTarget{name: &r.TopicNames[i]})
		}
	} else {
		for _, t := range r.Topics {
			targets = append(targets, deleteTarget{name: t.Topic, id: t.TopicID})
		}
	}
	// A name or ID listed twice is answered once, with INVALID_REQUEST.
	key := func(t deleteTarget) string {
		if t.name != nil {
			return "name " + *t.name
		}
		return "id " + t.id.String()
	}
	count := map[string]int{}
	for _, t := range targets {
		count[key(t)]++
	}
	answered := map[string]bool{}
	for _, t := range targets {
		rt := kmsg.NewDeleteTopicsResponseTopic()
		rt.Topic, rt.TopicID = t.name, t.id
		var err error
		switch k := key(t); {
		case t.name != nil && !t.id.IsZero():
			err = refuse(kerr.InvalidRequest, "give a topic name or a topic id, not both")
		case t.name == nil && t.id.IsZero():
			err = refuse(kerr.InvalidRequest, "neither a topic name nor a topic id was given")
		case answered[k]:
			continue
		case count[k] > 1:
			answered[k] = true
			err = refuse(kerr.InvalidRequest, "topic %s is listed more than once", k)
		default:
			answered[k] = true
			var topic *controller.Topic
			topic, err = b.deleteTopic(ctx, t)
			if topic != nil {
				rt.Topic, rt.TopicID = &topic.Name, topic.ID
			}
		}
		rt.ErrorCode, rt.ErrorMessage = kafkaError(err)
		resp.Topics = append(resp.Topics, rt)
	}
	return reply(resp)
}

// deleteTopic deletes the topic t names and returns it, or the topic
// found when deletion was refused.
func (b *Broker) deleteTopic(ctx context.Context, t deleteTarget) (*controller.Topic, error) {
	img := b.ctrl.Image()
	var topic *controller.Topic
	if t.name != nil {
		if err := validateTopicName(*t.name); err != nil {
			return nil, err
		}
		if topic = img.Topics[*t.name]; topic == nil {
			return nil, refuse(kerr.UnknownTopicOrPartition, "topic %q does not exist", *t.name)
		}
	} else if topic = img.TopicsByID[t.id]; topic == nil {
		return nil, refuse(kerr.UnknownTopicID, "no topic has id %s", t.id)
	}
	if isInternalTopic(topic) {
		return topic, refuse(kerr.InvalidTopicException, "topic %q is internal and cannot be deleted", topic.Name)
	}
	if err := b.ctrl.DeleteTopic(ctx, topic.Name); err != nil {
		return topic, err
	}
	b.log.Info("deleted topic", "topic", topic.Name, "id", topic.ID)
	b.syncData()
	return topic, nil
}

// handleCreatePartitions answers CreatePartitions (key 37): topics only
// grow; new partitions get the topic's replication factor, placed by the
// controller unless the request assigns them.
func (b *Broker) handleCreatePartitions(ctx context.Context, _ *server.ConnInfo, req *server.Request) server.Reply {
	r := req.Body.(*kmsg.CreatePartitionsRequest)
	resp := r.ResponseKind().(*kmsg.CreatePartitionsResponse)
	ctx, cancel := withTimeout(ctx, r.TimeoutMillis)
	defer cancel()

	img := b.ctrl.Image()
	if err := b.checkRequestPartitions(createPartitionsAdded(img, r)); err != nil {
		resp.Topics = make([]kmsg.CreatePartitionsResponseTopic, len(r.Topics))
		code, msg := kafkaError(err)
		for i, t := range r.Topics {
			rt := &resp.Topics[i]
			rt.Default()
			rt.Topic, rt.ErrorCode, rt.ErrorMessage = t.Topic, code, msg
		}
		return reply(resp)
	}
	cluster := b.clusterPartitions(img)
	key := func(t *kmsg.CreatePartitionsRequestTopic) string { return t.Topic }
	eachDistinct(r.Topics, key, topicLabel, func(t *kmsg.CreatePartitionsRequestTopic, err error) {
		if err == nil {
			err = b.createPartitions(ctx, t, r.ValidateOnly, cluster)
		}
		rt := kmsg.NewCreatePartitionsResponseTopic()
		rt.Topic = t.Topic
		rt.ErrorCode, rt.ErrorMessage = kafkaError(err)
		resp.Topics = append(resp.Topics, rt)
	})
	return reply(resp)
}

// createPartitionsAdded is the partitions a CreatePartitions request
// would add to the topics of img: each topic's new count less its
// current one (the whole count for a topic img lacks), at least one.
func createPartitionsAdded(img *controller.Image, r *kmsg.CreatePartitionsRequest) int64 {
	var n int64
	for i := range r.Topics {
		t := &r.Topics[i]
		added := int64(t.Count)
		if topic := img.Topics[t.Topic]; topic != nil {
			added -= int64(len(topic.Partitions))
		}
		n += max(added, 1)
	}
	return n
}

// createPartitions validates and, unless validateOnly, applies one topic
// of a CreatePartitions request in a cluster of cluster partitions; the
// controller's checks run either way (Controller.ValidateCreatePartitions).
func (b *Broker) createPartitions(ctx context.Context, t *kmsg.CreatePartitionsRequestTopic, validateOnly bool, cluster *partitionCount) error {
	if err := validateTopicName(t.Topic); err != nil {
		return err
	}
	img := b.ctrl.Image()
	topic := img.Topics[t.Topic]
	if topic == nil {
		return refuse(kerr.UnknownTopicOrPartition, "topic %q does not exist", t.Topic)
	}
	if isInternalTopic(topic) {
		return refuse(kerr.InvalidTopicException, "topic %q is internal; its partition count cannot change", t.Topic)
	}
	current := int32(len(topic.Partitions))
	switch {
	case t.Count == current:
		return refuse(kerr.InvalidPartitions, "topic %q already has %d partitions", t.Topic, current)
	case t.Count < current:
		return refuse(kerr.InvalidPartitions, "topic %q has %d partitions; %d would not be an increase (partitions cannot be removed)", t.Topic, current, t.Count)
	}
	replicationFactor := len(topic.Partitions[0].Replicas)
	var assignments [][]int32
	if t.Assignment != nil {
		if added := t.Count - current; len(t.Assignment) != int(added) {
			return refuse(kerr.InvalidReplicaAssignment, "%d partitions are added but %d assignments were given", added, len(t.Assignment))
		}
		for i, a := range t.Assignment {
			p := current + int32(i)
			if err := checkReplicaList(img, p, a.Replicas); err != nil {
				return err
			}
			if len(a.Replicas) != replicationFactor {
				return refuse(kerr.InvalidReplicaAssignment, "partition %d has %d replicas, the topic's replication factor is %d", p, len(a.Replicas), replicationFactor)
			}
			assignments = append(assignments, a.Replicas)
		}
	} else if n := len(img.Brokers); replicationFactor > n {
		return refuse(kerr.InvalidReplicationFactor, "the topic's replication factor %d is larger than the number of registered brokers (%d)", replicationFactor, n)
	}
	if err := b.checkClusterPartitions(cluster, int64(t.Count-current)); err != nil {
		return err
	}
	if validateOnly {
		return b.ctrl.ValidateCreatePartitions(t.Topic, t.Count, assignments)
	}
	if err := b.ctrl.CreatePartitions(ctx, t.Topic, t.Count, assignments); err != nil {
		return err
	}
	cluster.n += int64(t.Count - current)
	b.log.Info("created partitions", "topic", t.Topic, "from", current, "to", t.Count)
	b.syncData()
	return nil
}
