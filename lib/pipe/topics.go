package pipe

import (
	"context"
	"errors"
	"regexp"
	"slices"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/mqproject/mq/lib/client"
)

// topicRefresh is how often consume without -e looks for new topics that
// a regex of -t matches (kgo's own default is 5 minutes, too slow for a
// tool watched by a person).
const topicRefresh = 5 * time.Second

// topicSpec is what -t names: topics by name, and patterns, the values
// that start with ^ (kcat's convention), Go regular expressions matched
// against the names of topics that are not internal.
type topicSpec struct {
	names    []string
	patterns []*regexp.Regexp
}

// parseTopics reads the -t values.
func parseTopics(values []string) (topicSpec, error) {
	var s topicSpec
	for _, v := range values {
		switch {
		case v == "":
			return topicSpec{}, client.Usagef("consume: empty topic name in -t")
		case v[0] == '^':
			re, err := regexp.Compile(v)
			if err != nil {
				return topicSpec{}, client.Usagef("consume: -t %s: %v", v, err)
			}
			s.patterns = append(s.patterns, re)
		case !slices.Contains(s.names, v):
			s.names = append(s.names, v)
		}
	}
	return s, nil
}

// matches reports whether a pattern matches topic.
func (s topicSpec) matches(topic string) bool {
	return slices.ContainsFunc(s.patterns, func(re *regexp.Regexp) bool { return re.MatchString(topic) })
}

// regexes are the -t values as kgo's ConsumeRegex wants them: the
// patterns, and each name as a pattern matching only itself.
func (s topicSpec) regexes() []string {
	var out []string
	for _, n := range s.names {
		out = append(out, "^"+regexp.QuoteMeta(n)+"$")
	}
	for _, re := range s.patterns {
		out = append(out, re.String())
	}
	return out
}

// topicPartitions returns the partitions to read now: for each topic
// named (each must exist) all of them or those of -p (each must exist),
// and for each topic a pattern matches all of them or those of -p it has.
func topicPartitions(ctx context.Context, adm *kadm.Client, spec topicSpec, only []int32) (partitionSet, error) {
	parts := partitionSet{}
	if len(spec.names) > 0 {
		details, err := listTopics(ctx, adm, spec.names...)
		if err != nil {
			return nil, client.Failf("describe topics: %v", err)
		}
		for _, t := range spec.names {
			td, ok := details[t]
			if !ok || errors.Is(td.Err, kerr.UnknownTopicOrPartition) {
				return nil, client.Failf("topic %s does not exist", t)
			}
			if td.Err != nil {
				return nil, client.Failf("topic %s: %v", t, td.Err)
			}
			all := td.Partitions.Numbers()
			slices.Sort(all)
			if len(only) == 0 {
				parts[t] = all
				continue
			}
			for _, p := range only {
				if !slices.Contains(all, p) {
					return nil, client.Failf("topic %s has %d partition%s; there is no partition %d", t, len(all), plural(len(all)), p)
				}
				if !slices.Contains(parts[t], p) {
					parts[t] = append(parts[t], p)
				}
			}
		}
	}
	if len(spec.patterns) > 0 {
		matched, err := matchingTopics(ctx, adm, spec, only)
		if err != nil {
			return nil, err
		}
		for t, ps := range matched {
			if _, named := parts[t]; !named {
				parts[t] = ps
			}
		}
	}
	return parts, nil
}

// listTopics describes the topics, asking again (client.Retry) while one
// of them answers a retriable error (LEADER_NOT_AVAILABLE right after it
// was created, or while mqd restarts).
func listTopics(ctx context.Context, adm *kadm.Client, topics ...string) (kadm.TopicDetails, error) {
	var details kadm.TopicDetails
	var listErr error
	client.Retry(ctx, 0, func(ctx context.Context) error {
		if details, listErr = adm.ListTopics(ctx, topics...); listErr != nil {
			return listErr
		}
		for _, t := range topics {
			if td, ok := details[t]; ok && client.Retriable(td.Err) {
				return td.Err // the caller sees it in details when it stays
			}
		}
		return nil
	}, nil)
	if listErr != nil {
		return nil, listErr
	}
	return details, nil
}

// matchingTopics returns the partitions (all, or those of -p) of the
// topics that are not internal and that a pattern matches now.
func matchingTopics(ctx context.Context, adm *kadm.Client, spec topicSpec, only []int32) (partitionSet, error) {
	details, err := adm.ListTopics(ctx) // all topics but the internal ones
	if err != nil {
		return nil, client.Failf("list topics: %v", err)
	}
	parts := partitionSet{}
	for t, td := range details {
		if td.Err != nil || td.IsInternal || !spec.matches(t) {
			continue
		}
		all := td.Partitions.Numbers()
		slices.Sort(all)
		if len(only) > 0 {
			all = slices.DeleteFunc(all, func(p int32) bool { return !slices.Contains(only, p) })
		}
		if len(all) > 0 {
			parts[t] = all
		}
	}
	return parts, nil
}

// names are the topics of a partition set, sorted.
func (ps partitionSet) names() []string {
	var out []string
	for t := range ps {
		out = append(out, t)
	}
	slices.Sort(out)
	return out
}

// followTopics adds to cl, every topicRefresh until ctx is done, the
// topics that a pattern comes to match after consume started (known are
// those read already). A topic created since then holds only records
// written since: it is read from its beginning, or with -o @TIME from
// that time. A failed look is tried again at the next refresh; consuming
// reports a broker that is gone.
func followTopics(ctx context.Context, cl *kgo.Client, cfg *ConsumeConfig, spec topicSpec, known partitionSet) {
	adm := kadm.NewClient(cl)
	from := OffsetSpec{Kind: OffsetBeginning}
	if cfg.Offset.Kind == OffsetTime {
		from = cfg.Offset
	}
	tick := time.NewTicker(topicRefresh)
	defer tick.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-tick.C:
		}
		matched, err := matchingTopics(ctx, adm, spec, cfg.Partitions)
		if err != nil {
			continue
		}
		for t := range matched {
			if _, ok := known[t]; ok {
				delete(matched, t)
			}
		}
		if len(matched) == 0 {
			continue
		}
		starts, _, err := startOffsets(ctx, adm, matched, from, nil)
		if err != nil {
			continue
		}
		add := map[string]map[int32]kgo.Offset{}
		for t, ps := range matched {
			add[t] = map[int32]kgo.Offset{}
			for _, p := range ps {
				add[t][p] = kgo.NewOffset().At(starts[t][p])
			}
			known[t] = ps
		}
		cl.AddConsumePartitions(add)
	}
}
