package config

// The bounds on partitions a request may add (max.partitions.per.request)
// and the cluster may hold (max.partitions). Refusals match
// ErrPartitionLimit; Kafka answers them with POLICY_VIOLATION.

// CheckRequestPartitions refuses a request that would add n partitions,
// more than max.partitions.per.request (with Kafka's wording for its
// fixed bound of 10,000).
func (b Broker) CheckRequestPartitions(n int64) error {
	if limit := int64(b.MaxPartitionsPerRequest); limit > 0 && n > limit {
		return refused(ErrPartitionLimit, "excessively large number of partitions per request: %d, max.partitions.per.request is %d", n, limit)
	}
	return nil
}

// CheckClusterPartitions refuses adding n partitions to a cluster of
// have, over max.partitions.
func (b Broker) CheckClusterPartitions(have, n int64) error {
	if limit := int64(b.MaxPartitions); limit > 0 && have+n > limit {
		return refused(ErrPartitionLimit, "the cluster holds %d partitions: %d more would go over max.partitions (%d)", have, n, limit)
	}
	return nil
}

// TopicOverrides checks the configs a new topic is given (as OpSet) and
// returns them as its overrides: none named twice (ErrInvalidRequest),
// none null, each valid, and together resolvable over the topic defaults
// of effective (ErrInvalidValue, ErrUnknownConfig).
func TopicOverrides(effective Broker, given []Op) (map[string]string, error) {
	configs := make(map[string]string, len(given))
	for _, c := range given {
		if _, ok := configs[c.Name]; ok {
			return nil, refused(ErrInvalidRequest, "config %q is given more than once", c.Name)
		}
		if c.Value == nil {
			return nil, refused(ErrInvalidValue, "config %q has a null value", c.Name)
		}
		if err := ValidateTopicConfig(c.Name, *c.Value); err != nil {
			return nil, err
		}
		configs[c.Name] = *c.Value
	}
	if _, err := ResolveTopic(effective, configs); err != nil {
		return nil, err
	}
	return configs, nil
}
