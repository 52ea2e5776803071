package tail

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"net/http"
	"slices"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/mqproject/mq/lib/admin"
)

// Collector reads samples from a cluster through one kgo client: the
// brokers, topics, consumer groups and share groups as lib/admin
// describes them (mqctl's cluster, topic, group and queue describe), the replicas' log sizes (DescribeLogDirs)
// and the metrics endpoints' counters. It is not safe for concurrent use.
type Collector struct {
	adm     *admin.Admin
	kadm    *kadm.Client
	metrics []MetricsSource
	http    *http.Client
	now     func() time.Time

	// The last topics, log sizes and groups read, shown again when they
	// cannot be read (Sample.TopicsStale, GroupsStale).
	lastTopics admin.TopicDescriptions
	lastSizes  map[int32]map[string]map[int32]int64
	lastGroups admin.GroupDescriptions
	lastQueues admin.QueueDescriptions
}

// NewCollector returns a Collector on cl, which the caller closes, also
// scraping the metrics endpoints.
func NewCollector(cl *kgo.Client, metrics []MetricsSource) *Collector {
	return &Collector{adm: admin.New(cl), kadm: kadm.NewClient(cl), metrics: metrics,
		http: &http.Client{Timeout: 5 * time.Second}, now: time.Now}
}

// Collect reads one sample. It fails when the cluster cannot be
// described at all (the error is unreachable, client.IsUnreachable, when
// no broker answers); parts that fail alone (a group's offsets, a
// broker's log directories, a metrics endpoint) are named in the
// sample's Errors.
func (c *Collector) Collect(ctx context.Context) (Sample, error) {
	s := Sample{Time: c.now(), LogSizes: map[int32]map[string]map[int32]int64{}}
	cluster, err := c.adm.DescribeCluster(ctx, false)
	if err != nil {
		return s, err
	}
	s.Cluster = *cluster
	// A broker that is down but not yet fenced fails the requests sent
	// to it: the topics or groups are then shown as last read, and the
	// failure named, until the cluster has moved on.
	topics, err := c.adm.DescribeTopics(ctx, nil, admin.PartitionFilter{})
	if err != nil {
		s.Errors = append(s.Errors, err.Error())
		s.Topics, s.LogSizes, s.TopicsStale = c.lastTopics, c.lastSizes, true
	} else {
		s.Topics = topics
	}
	groups, err := c.groups(ctx)
	if err != nil {
		s.Errors = append(s.Errors, err.Error())
	}
	if groups == nil {
		s.Groups, s.GroupsStale = c.lastGroups, true
	} else {
		s.Groups, c.lastGroups = groups, groups
	}
	queues, err := c.adm.DescribeQueues(ctx, nil)
	if err != nil {
		s.Errors = append(s.Errors, "queues: "+err.Error())
		s.Queues = c.lastQueues
	} else {
		s.Queues, c.lastQueues = queues, queues
	}
	if s.TopicsStale {
		c.finish(ctx, &s)
		return s, nil
	}
	dirs, err := c.kadm.DescribeAllLogDirs(ctx, nil)
	if err != nil {
		s.Errors = append(s.Errors, "log sizes: "+err.Error())
	}
	for broker, bd := range dirs {
		for _, d := range bd {
			for topic, parts := range d.Topics {
				for p, dp := range parts {
					if dp.IsFuture {
						continue
					}
					if s.LogSizes[broker] == nil {
						s.LogSizes[broker] = map[string]map[int32]int64{}
					}
					if s.LogSizes[broker][topic] == nil {
						s.LogSizes[broker][topic] = map[int32]int64{}
					}
					s.LogSizes[broker][topic][p] += dp.Size
				}
			}
		}
	}
	c.lastTopics, c.lastSizes = s.Topics, s.LogSizes
	c.finish(ctx, &s)
	return s, nil
}

// finish scrapes the metrics endpoints into s.
func (c *Collector) finish(ctx context.Context, s *Sample) {
	for _, src := range c.metrics {
		out, err := scrapeBytesOut(ctx, c.http, src.URL)
		if err != nil {
			s.Errors = append(s.Errors, "metrics: "+err.Error())
		}
		s.Metrics = append(s.Metrics, Scrape{Source: src, BytesOut: out})
	}
	slices.Sort(s.Errors)
}

// groups describes every group the brokers list; nil when none could
// be described. Groups are listed by
// each broker for the groups it coordinates; those of a broker that does
// not answer are missing, and the error says so, but the others are
// described.
func (c *Collector) groups(ctx context.Context) (admin.GroupDescriptions, error) {
	listed, listErr := c.kadm.ListGroups(ctx)
	// Share groups are the queues view's (DescribeQueues).
	maps.DeleteFunc(listed, func(_ string, g kadm.ListedGroup) bool { return g.GroupType == "share" })
	names := listed.Groups()
	slices.Sort(names)
	if len(names) == 0 {
		if listErr != nil {
			return nil, fmt.Errorf("group list: %w", listErr)
		}
		return admin.GroupDescriptions{}, nil
	}
	groups, err := c.adm.DescribeGroups(ctx, names)
	if err != nil && !admin.Partial(groups) {
		return nil, err
	}
	return groups, errors.Join(err, listErr)
}
