package tail

import (
	"context"
	"net/http"
	"slices"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/mqproject/mq/lib/admin"
	"github.com/mqproject/mq/lib/client"
)

// Collector reads samples from a cluster through one kgo client: the
// brokers, topics and groups as lib/admin describes them (mqctl's cluster,
// topic and group describe), the replicas' log sizes (DescribeLogDirs)
// and the metrics endpoints' counters. It is not safe for concurrent use.
type Collector struct {
	adm     *admin.Admin
	kadm    *kadm.Client
	metrics []MetricsSource
	http    *http.Client
	now     func() time.Time
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
	topics, err := c.adm.DescribeTopics(ctx, nil, admin.PartitionFilter{})
	if err != nil {
		return s, err
	}
	s.Topics = topics
	// Groups fail one by one (an unknown or dead group, offsets that
	// cannot be read): the others are still shown, the failure named.
	groups, err := c.adm.DescribeGroups(ctx, nil)
	if err != nil {
		if client.IsUnreachable(err) {
			return s, err
		}
		s.Errors = append(s.Errors, err.Error())
	}
	s.Groups = groups
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
	for _, src := range c.metrics {
		out, err := scrapeBytesOut(ctx, c.http, src.URL)
		if err != nil {
			s.Errors = append(s.Errors, "metrics: "+err.Error())
		}
		s.Metrics = append(s.Metrics, Scrape{Source: src, BytesOut: out})
	}
	slices.Sort(s.Errors)
	return s, nil
}
