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

// handleCreateTopics answers CreateTopics (key 19).
func (b *Broker) handleCreateTopics(ctx context.Context, _ *server.ConnInfo, req *server.Request) server.Reply {
	r := req.Body.(*kmsg.CreateTopicsRequest)
	resp := r.ResponseKind().(*kmsg.CreateTopicsResponse)
	ctx, cancel := withTimeout(ctx, r.TimeoutMillis)
	defer cancel()

	// The request's size is checked first, before anything is allocated
	// per topic: one over the cap is refused whole, as Kafka 4 does.
	if err := b.cfg.Settings.CheckRequestPartitions(createTopicsPartitions(r, b.effectiveSettings(b.ctrl.Image()).NumPartitions)); err != nil {
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

// partitionCount is the partitions the cluster holds, as a request sees
// it: its image's, plus those it created itself since.
type partitionCount struct{ n int64 }

// clusterPartitions counts the partitions of img.
func (b *Broker) clusterPartitions(img *controller.Image) *partitionCount {
	return &partitionCount{n: img.PartitionCount()}
}

// checkClusterPartitions refuses adding n partitions to a cluster of
// have, over max.partitions (config.ErrPartitionLimit).
func (b *Broker) checkClusterPartitions(have *partitionCount, n int64) error {
	return b.cfg.Settings.CheckClusterPartitions(have.n, n)
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
// request's checks are the controller's (Image.NewTopic) and lib/config's
// (TopicOverrides, the partition limit); those of the command run for
// validateOnly too (Controller.ValidateCreateTopic), so that it answers
// what a real creation would.
func (b *Broker) createTopic(ctx context.Context, t *kmsg.CreateTopicsRequestTopic, validateOnly bool, cluster *partitionCount) (createdTopic, error) {
	if err := validateTopicName(t.Topic); err != nil {
		return createdTopic{}, err
	}
	img := b.ctrl.Image()
	settings := b.effectiveSettings(img)
	topic := controller.TopicRequest{Name: t.Topic, Partitions: t.NumPartitions, ReplicationFactor: t.ReplicationFactor}
	for _, a := range t.ReplicaAssignment {
		topic.Assignments = append(topic.Assignments, controller.Assignment{Partition: a.Partition, Replicas: a.Replicas})
	}
	cmd, err := img.NewTopic(topic, settings.NumPartitions, settings.DefaultReplicationFactor)
	if err != nil {
		return createdTopic{}, err
	}
	given := make([]config.Op, len(t.Configs))
	for i, c := range t.Configs {
		given[i] = config.Op{Name: c.Name, Type: config.OpSet, Value: c.Value}
	}
	if cmd.Configs, err = config.TopicOverrides(settings, given); err != nil {
		return createdTopic{}, err
	}
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
	for _, e := range b.layers(img).DescribeTopic(cmd.Configs) {
		c := kmsg.NewCreateTopicsResponseTopicConfig()
		c.Name = e.Name
		c.Value = e.VisibleValue()
		c.ReadOnly = e.ReadOnly
		c.Source = int8(e.Source)
		c.IsSensitive = e.Sensitive
		out.configs = append(out.configs, c)
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
// found when deletion was refused (Image.TopicToDelete).
func (b *Broker) deleteTopic(ctx context.Context, t deleteTarget) (*controller.Topic, error) {
	if t.name != nil {
		if err := validateTopicName(*t.name); err != nil {
			return nil, err
		}
	}
	topic, err := b.ctrl.Image().TopicToDelete(t.name, t.id)
	if err != nil {
		return topic, err
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
	if err := b.cfg.Settings.CheckRequestPartitions(createPartitionsAdded(img, r)); err != nil {
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
// of a CreatePartitions request in a cluster of cluster partitions: the
// request's checks are the controller's (Image.NewPartitions) and the
// partition limit; the command's run either way
// (Controller.ValidateCreatePartitions).
func (b *Broker) createPartitions(ctx context.Context, t *kmsg.CreatePartitionsRequestTopic, validateOnly bool, cluster *partitionCount) error {
	if err := validateTopicName(t.Topic); err != nil {
		return err
	}
	var assignments [][]int32
	if t.Assignment != nil {
		assignments = make([][]int32, len(t.Assignment))
		for i, a := range t.Assignment {
			assignments[i] = a.Replicas
		}
	}
	current, err := b.ctrl.Image().NewPartitions(t.Topic, t.Count, assignments)
	if err != nil {
		return err
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
