package broker

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/mqproject/mq/lib/auth"
	"github.com/mqproject/mq/lib/config"
	"github.com/mqproject/mq/lib/controller"
	"github.com/mqproject/mq/lib/server"
)

// validTopicName is config.CheckTopicName as errInvalidTopicName.
func validTopicName(name string) error {
	if config.CheckTopicName(name) != nil {
		return fmt.Errorf("%w: %q", errInvalidTopicName, name)
	}
	return nil
}

// handleMetadata answers brokers, cluster and controller ids and topics.
// Requested topics that do not exist are created when the request allows
// it (v4+ AllowAutoTopicCreation; always before v4) and the broker has
// auto.create.topics.enable, up to auto.create.topics.max.per.request of
// them and within max.partitions (autoCreate); invalid names are answered
// INVALID_TOPIC_EXCEPTION and never created. A requested topic this node's image lacks
// may have been created through another broker a moment ago: the answer
// waits, in the Reply, for this node's controller to catch up with the
// active one (partition.Manager.AwaitTopics) before it says the topic is
// unknown or creates it, a controller round trip too.
func (b *Broker) handleMetadata(ctx context.Context, c *server.ConnInfo, req *server.Request) server.Reply {
	r := req.Body.(*kmsg.MetadataRequest)
	img := b.ctrl.Image()
	all := r.Topics == nil || req.Version == 0 && len(r.Topics) == 0
	if !all && missingTopics(img, r) != nil {
		return func() server.Response {
			img := b.parts.AwaitTopics(ctx, img)
			var failed map[string]error
			settings := b.effectiveSettings(img) // auto.create.topics.enable and num.partitions are dynamic
			if create := missingTopics(img, r); len(create) > 0 && settings.AutoCreateTopics && (req.Version < 4 || r.AllowAutoTopicCreation) {
				// Auto-creation needs CREATE on the cluster or the topic,
				// as CreateTopics does; the others are refused.
				var refused map[string]error
				if !b.allowed(c, img, clusterResource, opCreate, auth.ClusterName) {
					create = slices.DeleteFunc(create, func(name string) bool {
						if b.allowed(c, img, topicResource, opCreate, name) {
							return false
						}
						if refused == nil {
							refused = map[string]error{}
						}
						refused[name] = errTopicAuthorization
						return true
					})
				}
				failed = b.autoCreate(ctx, settings, create)
				for name, err := range refused {
					if failed == nil {
						failed = map[string]error{}
					}
					failed[name] = err
				}
				img = b.ctrl.Image()
			}
			return server.Response{Msg: b.metadata(c, img, r, req.Version, all, failed)}
		}
	}
	var topics []string
	if !all {
		topics = requestedTopics(r)
	}
	if b.parts.LeaderGone(img, topics) {
		// Not a leader the client would find gone: the controller
		// is electing others (partition.Manager.Await).
		return func() server.Response {
			img := b.parts.Await(ctx, func(img *controller.Image) bool { return b.parts.LeaderGone(img, topics) })
			return server.Response{Msg: b.metadata(c, img, r, req.Version, all, nil)}
		}
	}
	return reply(b.metadata(c, img, r, req.Version, all, nil))
}

// missingTopics returns the topics r names, by a valid name, that img lacks.
func missingTopics(img *controller.Image, r *kmsg.MetadataRequest) []string {
	var out []string
	for _, rt := range r.Topics {
		if rt.Topic != nil && img.Topics[*rt.Topic] == nil && validTopicName(*rt.Topic) == nil && !slices.Contains(out, *rt.Topic) {
			out = append(out, *rt.Topic)
		}
	}
	return out
}

// autoCreate creates topics with the broker's settings (dynamic ones
// applied) and returns the
// errors of those that could not be created. It creates the first
// auto.create.topics.max.per.request of names only, and none that would
// take the cluster over max.partitions; the others stay unknown
// (UNKNOWN_TOPIC_OR_PARTITION, which clients retry).
func (b *Broker) autoCreate(ctx context.Context, settings config.Broker, names []string) map[string]error {
	failed := map[string]error{}
	if limit := int(b.cfg.Settings.AutoCreateTopicsPerRequest); len(names) > limit {
		b.log.Info("metadata request names more unknown topics than auto.create.topics.max.per.request: creating the first",
			"unknown", len(names), "auto_create_topics_max_per_request", limit)
		names = names[:limit]
	}
	partitions := max(settings.NumPartitions, 1)
	cluster := b.clusterPartitions(b.ctrl.Image())
	for _, name := range names {
		if err := b.checkClusterPartitions(cluster, int64(partitions)); err != nil {
			b.log.Warn("auto-create topic", "topic", name, "err", err)
			break
		}
		_, err := b.ctrl.CreateTopic(ctx, controller.CreateTopic{
			Name:              name,
			Partitions:        partitions,
			ReplicationFactor: max(settings.DefaultReplicationFactor, 1),
		})
		if err == nil {
			cluster.n += int64(partitions)
		}
		if err != nil && !errors.Is(err, controller.ErrTopicExists) {
			b.log.Warn("auto-create topic", "topic", name, "err", err)
			failed[name] = err
			continue
		}
		if err == nil {
			b.log.Info("topic auto-created", "topic", name)
		}
	}
	// Open the new partitions now, so the answer can say they are ready.
	b.parts.Refresh()
	return failed
}

// metadata builds the response from img, for a client connected on c
// (forListener).
func (b *Broker) metadata(c *server.ConnInfo, img *controller.Image, r *kmsg.MetadataRequest, version int16, all bool, failed map[string]error) *kmsg.MetadataResponse {
	resp := r.ResponseKind().(*kmsg.MetadataResponse)
	for _, id := range slices.Sorted(maps.Keys(img.Brokers)) {
		br := img.Brokers[id]
		if br.Fenced {
			continue // as Kafka: clients are told of live brokers only
		}
		br = forListener(c, br)
		rb := kmsg.NewMetadataResponseBroker()
		rb.NodeID, rb.Host, rb.Port, rb.Rack = br.ID, br.Host, br.Port, br.Rack
		resp.Brokers = append(resp.Brokers, rb)
	}
	if img.ClusterID != "" {
		id := img.ClusterID
		resp.ClusterID = &id
	}
	resp.ControllerID = img.ControllerID
	// Topics the principal may not describe are hidden from a listing of
	// all, and refused by name (before saying whether they exist).
	describable := func(name string) bool { return b.allowed(c, img, topicResource, opDescribe, name) }
	if all {
		for _, name := range slices.Sorted(maps.Keys(img.Topics)) {
			if describable(name) {
				resp.Topics = append(resp.Topics, b.topicMetadata(img, img.Topics[name], version))
			}
		}
		return resp
	}
	resp.Topics = make([]kmsg.MetadataResponseTopic, 0, len(r.Topics))
	for _, rt := range r.Topics {
		var t *controller.Topic
		var err error
		switch {
		case rt.Topic == nil && version >= 10:
			if t = img.TopicsByID[controller.TopicID(rt.TopicID)]; t == nil {
				err = errUnknownTopicID
			}
		case rt.Topic == nil:
			err = errInvalidTopicName
		default:
			if err = validTopicName(*rt.Topic); err == nil {
				if t = img.Topics[*rt.Topic]; t == nil {
					err = errUnknownTopic
					if ferr := failed[*rt.Topic]; ferr != nil {
						err = ferr
					}
				}
			}
		}
		switch {
		case t != nil && !describable(t.Name):
			err = errTopicAuthorization
		case t == nil && rt.Topic != nil && !describable(*rt.Topic):
			err = errTopicAuthorization
		}
		if err != nil {
			st := kmsg.NewMetadataResponseTopic()
			st.Topic, st.TopicID = rt.Topic, rt.TopicID
			st.ErrorCode = metadataError(err)
			resp.Topics = append(resp.Topics, st)
			continue
		}
		resp.Topics = append(resp.Topics, b.topicMetadata(img, t, version))
	}
	return resp
}

// topicMetadata describes one topic. A partition without a leader, or led
// by this node and not yet open here (or not yet led: partition.Manager.MayLead),
// answers LEADER_NOT_AVAILABLE: clients retry until it is ready.
func (b *Broker) topicMetadata(img *controller.Image, t *controller.Topic, version int16) kmsg.MetadataResponseTopic {
	st := kmsg.NewMetadataResponseTopic()
	name := t.Name
	st.Topic = &name
	st.TopicID = t.ID
	st.IsInternal = t.Internal
	st.Partitions = make([]kmsg.MetadataResponseTopicPartition, len(t.Partitions))
	self := b.cfg.Settings.NodeID
	lead := b.parts.MayLead(img)
	for i, p := range t.Partitions {
		sp := &st.Partitions[i]
		sp.Default()
		sp.Partition = p.ID
		sp.Leader = p.Leader
		sp.LeaderEpoch = p.LeaderEpoch
		sp.Replicas = p.Replicas
		sp.ISR = p.ISR
		sp.OfflineReplicas = []int32{}
		for _, r := range p.Replicas {
			if br, ok := img.Brokers[r]; !ok || br.Fenced {
				sp.OfflineReplicas = append(sp.OfflineReplicas, r)
			}
		}
		switch {
		case p.Leader < 0:
			sp.ErrorCode = kerr.LeaderNotAvailable.Code
		case p.Leader == self:
			if h := b.parts.Lookup(t.Name, p.ID); h == nil || h.TopicID() != t.ID || !lead {
				sp.ErrorCode = kerr.LeaderNotAvailable.Code
			}
		}
	}
	return st
}

// handleInitProducerID gives idempotent producers a new producer ID with
// epoch 0 (like Kafka, also when the request names its previous ID and
// epoch); a transactional producer's goes to the transaction coordinator
// (txn.go). The ID comes from a block held by this broker
// (controller.ProducerIDs): without a controller, producers start while a
// block lasts; once none is left, the answer is the retriable
// COORDINATOR_NOT_AVAILABLE (metadataCodes).
func (b *Broker) handleInitProducerID(ctx context.Context, c *server.ConnInfo, req *server.Request) server.Reply {
	r := req.Body.(*kmsg.InitProducerIDRequest)
	resp := r.ResponseKind().(*kmsg.InitProducerIDResponse)
	resp.ProducerID, resp.ProducerEpoch = -1, -1
	if r.TransactionalID != nil {
		return b.initTransactional(ctx, req, r, resp)
	}
	return func() server.Response {
		id, err := b.producerIDs.Take(ctx)
		if err != nil {
			b.log.Warn("allocate producer id", "err", err)
			resp.ErrorCode = metadataError(err)
			return server.Response{Msg: resp}
		}
		resp.ProducerID, resp.ProducerEpoch = id, 0
		return server.Response{Msg: resp}
	}
}

// requestedTopics names the topics r asks for; nil (every topic) when
// some are named by ID only.
func requestedTopics(r *kmsg.MetadataRequest) []string {
	names := make([]string, 0, len(r.Topics))
	for _, t := range r.Topics {
		if t.Topic == nil {
			return nil
		}
		names = append(names, *t.Topic)
	}
	return names
}
