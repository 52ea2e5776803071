package group

import (
	"context"
	"maps"
	"slices"

	"github.com/twmb/franz-go/pkg/kmsg"
)

// CommitRequest is an OffsetCommit. Generation -1 with no member id is a
// "simple" commit from a client that does not use group membership; it is
// accepted while the group has no members.
type CommitRequest struct {
	Group      string
	MemberID   string
	InstanceID string
	Generation int32
	Offsets    []CommitOffset
}

// CommitOffset is one partition of a CommitRequest. CommitTime is set by
// the coordinator.
type CommitOffset struct {
	TopicPartition
	Offset
}

// CommitOffsets handles an OffsetCommit. It returns one error per offset
// (ErrMetadataTooLarge), or a request-level error that applies to all.
// The offsets are appended to the group's partition as one batch and
// become visible to OffsetFetch once it is durable; CommitOffsets waits
// for that (at most until ctx ends) without holding up other requests.
// If the batch does not become durable nothing changes and the error says
// why: ErrNotCoordinator when the partition was unloaded meanwhile, else a
// *StoreError.
func (c *Coordinator) CommitOffsets(ctx context.Context, r CommitRequest) ([]error, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	simple := r.Generation < 0 && r.MemberID == ""
	g, err := c.committingGroupLocked(r.Group, simple)
	if err != nil {
		return nil, err
	}
	switch {
	case simple && g.state == Empty:
	case g.state == CompletingRebalance:
		if _, err := g.validate(r.MemberID, r.InstanceID, r.Generation); err != nil {
			return nil, err
		}
		return nil, ErrRebalanceInProgress
	default:
		// Stable, and PreparingRebalance: members commit what they
		// processed before they join again.
		m, err := g.validate(r.MemberID, r.InstanceID, r.Generation)
		if err != nil {
			return nil, err
		}
		g.touch(m)
	}
	errs, kept, keys, values := c.offsetRecords(r.Group, r.Offsets)
	if len(keys) == 0 {
		g.dropIfVacant()
		return errs, nil
	}
	w, err := c.appendLocked(g.partition, keys, values)
	if err != nil {
		g.dropIfVacant()
		return nil, err
	}
	tps := make([]TopicPartition, len(kept))
	offsets := make([]*Offset, len(kept))
	for i := range kept {
		tps[i], offsets[i] = kept[i].TopicPartition, &kept[i].Offset
	}
	g.beginOffsets(tps)
	err = c.awaitLocked(ctx, w)
	g.finishOffsets(w, tps, offsets, err == nil)
	if err != nil {
		g.dropIfVacant()
		return nil, err
	}
	return errs, nil
}

// committingGroupLocked returns the group an offset commit (OffsetCommit
// or TxnOffsetCommit) is for, after checking ownership. A group that does
// not exist is made for a commit without membership (simple); one with
// membership that this coordinator does not know of (from a previous life
// of the group) gets ErrIllegalGeneration. Called with mu held.
func (c *Coordinator) committingGroupLocked(id string, simple bool) (*group, error) {
	if id == "" {
		return nil, ErrInvalidGroupID
	}
	g, err := c.lookup(id)
	if err != nil {
		return nil, err
	}
	if g == nil {
		if !simple {
			return nil, ErrIllegalGeneration
		}
		g = c.newGroup(id, c.Partition(id))
		c.groups[id] = g
	}
	return g, nil
}

// offsetRecords are the records of a commit of offsets to a group, and
// the offsets kept, committed now; an offset whose metadata is too large
// is left out, with ErrMetadataTooLarge at its place in errs.
func (c *Coordinator) offsetRecords(group string, offsets []CommitOffset) (errs []error, kept []CommitOffset, keys, values [][]byte) {
	now := c.clock.Now()
	errs = make([]error, len(offsets))
	for i, o := range offsets {
		if len(o.Metadata) > c.cfg.MaxMetadataBytes {
			errs[i] = ErrMetadataTooLarge
			continue
		}
		o.CommitTime = now
		keys = append(keys, offsetKey(group, o.Topic, o.Partition))
		values = append(values, offsetValue{offset: o.Offset.Offset, leaderEpoch: o.LeaderEpoch, metadata: o.Metadata, commitMS: now.UnixMilli()}.encode())
		kept = append(kept, o)
	}
	return errs, kept, keys, values
}

// FetchedOffset is one partition of FetchOffsets; Offset -1 means none
// is committed.
type FetchedOffset struct {
	TopicPartition
	Offset
}

// FetchOffsets returns the committed offsets of a group: of the partitions
// asked, or all of them when tps is nil. Partitions without a commit, and
// every partition of a group that does not exist, come back with offset -1.
func (c *Coordinator) FetchOffsets(group string, tps []TopicPartition) ([]FetchedOffset, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	g, err := c.lookup(group)
	if err != nil {
		return nil, err
	}
	if tps == nil {
		if g == nil {
			return nil, nil
		}
		for tp := range g.offsets {
			tps = append(tps, tp)
		}
		slices.SortFunc(tps, compareTopicPartitions)
	}
	out := make([]FetchedOffset, len(tps))
	for i, tp := range tps {
		out[i] = FetchedOffset{TopicPartition: tp, Offset: Offset{Offset: -1, LeaderEpoch: -1}}
		if g == nil {
			continue
		}
		if o, ok := g.offsets[tp]; ok {
			out[i].Offset = o
		}
	}
	return out, nil
}

// DeleteOffsets handles an OffsetDelete: ErrGroupNotFound for a group
// that does not exist; per partition, ErrSubscribedToTopic when members
// of the group consume the topic. Like CommitOffsets it waits until the
// tombstones are durable before the offsets go.
func (c *Coordinator) DeleteOffsets(ctx context.Context, group string, tps []TopicPartition) ([]error, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	g, err := c.lookup(group)
	if err != nil {
		return nil, err
	}
	if g == nil {
		return nil, ErrGroupNotFound
	}
	subscribed := g.subscribedTopics()
	errs := make([]error, len(tps))
	var keys, values [][]byte
	var del []TopicPartition
	for i, tp := range tps {
		if subscribed[tp.Topic] {
			errs[i] = ErrSubscribedToTopic
			continue
		}
		if _, ok := g.offsets[tp]; !ok && g.writes[tp] == nil {
			continue
		}
		keys = append(keys, offsetKey(group, tp.Topic, tp.Partition))
		values = append(values, nil)
		del = append(del, tp)
	}
	if len(keys) == 0 {
		return errs, nil
	}
	w, err := c.appendLocked(g.partition, keys, values)
	if err != nil {
		return nil, err
	}
	g.beginOffsets(del)
	err = c.awaitLocked(ctx, w)
	g.finishOffsets(w, del, make([]*Offset, len(del)), err == nil)
	if err != nil {
		return nil, err
	}
	// A group that only ever committed offsets (no group record) is
	// gone with its last one, as a coordinator loading the partition
	// would find it.
	g.dropIfVacant()
	return errs, nil
}

// DeleteTopicOffsets drops the offsets of topics, topics deleted from the
// cluster, from every group of the partitions this coordinator has
// loaded, as Kafka's coordinator does: a topic created again under the
// same name starts without the old topic's committed positions, where a
// group's consumers would otherwise resume past its end. It appends the
// tombstones and returns at once; each offset goes when its tombstone is
// durable, and a commit still on its way when the tombstone was appended
// is overridden by it, in memory as on replay. Groups of a partition
// still loading are not reached.
func (c *Coordinator) DeleteTopicOffsets(topics []string) {
	if len(topics) == 0 {
		return
	}
	deleted := make(map[string]bool, len(topics))
	for _, t := range topics {
		deleted[t] = true
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	for _, id := range slices.Sorted(maps.Keys(c.groups)) {
		g := c.groups[id]
		if g.deleting || c.checkLocked(id) != nil {
			continue
		}
		var tps []TopicPartition
		for _, tp := range g.offsetKeys() {
			if deleted[tp.Topic] {
				tps = append(tps, tp)
			}
		}
		if len(tps) == 0 {
			continue
		}
		c.tombstoneOffsetsLocked(g, id, tps, false, false, "offsets of deleted topics", func(ok bool) {
			if ok {
				c.log.Info("offsets of deleted topics removed", "group", id, "partitions", len(tps))
				g.dropIfVacant()
			}
		})
	}
}

// subscribedTopics are the topics the members of a consumer group
// subscribe to, read from their "consumer" protocol metadata. Groups of
// another protocol type are treated as subscribed to nothing, as Kafka
// does.
func (g *group) subscribedTopics() map[string]bool {
	topics := map[string]bool{}
	if g.protocolType != "consumer" || g.state == Empty {
		return topics
	}
	for _, m := range g.members {
		var meta kmsg.ConsumerMemberMetadata
		if err := meta.ReadFrom(m.metadata(g.protocol)); err != nil {
			// No metadata for the group's protocol (it has not been chosen
			// yet): take the topics of any protocol that reads.
			for _, p := range m.protocols {
				if meta.ReadFrom(p.Metadata) == nil {
					for _, t := range meta.Topics {
						topics[t] = true
					}
				}
			}
			continue
		}
		for _, t := range meta.Topics {
			topics[t] = true
		}
	}
	return topics
}
