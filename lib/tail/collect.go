package tail

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"net/http"
	"slices"
	"sync"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/mqproject/mq/lib/admin"
	"github.com/mqproject/mq/lib/client"
)

// Collector reads samples from a cluster through one kgo client: the
// brokers, topics, consumer groups and share groups as lib/admin
// describes them (mqctl's cluster, topic, group and queue describe), the
// brokers' log directories (DescribeAllLogDirs: the replicas' log sizes,
// the upload lag) and the metrics endpoints' counters. It is not safe for concurrent use.
type Collector struct {
	cl *kgo.Client
	// quorumCl is quorumLost's client, nil until needed; quorumMu
	// guards it, as Close may run while a last refresh does.
	quorumMu sync.Mutex
	quorumCl *kgo.Client
	adm      *admin.Admin
	kadm     *kadm.Client
	metrics  []MetricsSource
	http     *http.Client
	now      func() time.Time

	// The last topics, log sizes and groups read, shown again when they
	// cannot be read (Sample.TopicsStale, GroupsStale).
	lastTopics admin.TopicDescriptions
	lastSizes  map[int32]map[string]map[int32]int64
	lastGroups admin.GroupDescriptions
	lastQueues admin.QueueDescriptions
	lastHung   []admin.HealthProblem
}

// ClientOptions are the kgo options of the client a Collector reads
// through: a request that fails is retried for at most RetryTimeout, so
// that the shard of a request sent to a broker that is gone (kgo retries
// a refused connection) fails within a refresh and the others are shown;
// the next refresh asks again. Metadata, which any broker answers, is
// retried longer (MetadataRetryTimeout): each try goes to the next
// broker, past those that are gone.
func ClientOptions() []kgo.Opt {
	return []kgo.Opt{kgo.RetryTimeoutFn(func(key int16) time.Duration {
		if key == kmsg.Metadata.Int16() {
			return MetadataRetryTimeout
		}
		return RetryTimeout
	})}
}

// RetryTimeout and MetadataRetryTimeout bound kgo's retries of one
// request of a refresh (ClientOptions).
const (
	RetryTimeout         = 500 * time.Millisecond
	MetadataRetryTimeout = 3 * time.Second
)

// NewCollector returns a Collector on cl, which the caller closes, also
// scraping the metrics endpoints. cl should be made with ClientOptions.
func NewCollector(cl *kgo.Client, metrics []MetricsSource) *Collector {
	return &Collector{cl: cl, adm: admin.New(cl), kadm: kadm.NewClient(cl), metrics: metrics,
		http: &http.Client{Timeout: 5 * time.Second}, now: time.Now}
}

// Collect reads one sample. It fails when the cluster cannot be
// described at all (the error is unreachable, client.IsUnreachable, when
// no broker answers); parts that fail alone (a group's offsets, a
// broker's log directories, a metrics endpoint) are named in the
// sample's Errors.
//
// Every broker the cluster counts as alive is asked first, and the
// controller quorum (probeTimeout each): one that does not answer is
// Unreachable, and a quorum without controller QuorumLost, each one line
// of Errors, and the requests that failed for that reason say nothing
// more. The partitions such a broker leads are described without their
// offsets ("leader N unreachable").
func (c *Collector) Collect(ctx context.Context) (Sample, error) {
	s := Sample{Time: c.now(), LogSizes: map[int32]map[string]map[int32]int64{}}
	cluster, err := c.adm.DescribeBrokers(ctx)
	if err != nil {
		return s, err
	}
	s.Cluster = *cluster
	s.Unreachable = c.probeBrokers(ctx, cluster.Brokers)
	s.QuorumLost = c.quorumLost(ctx, *cluster, s.Unreachable)
	s.Errors = downLines(*cluster, s.Unreachable, s.QuorumLost)
	note := func(prefix string, err error) {
		if len(s.Unreachable) > 0 && client.IsUnreachable(err) {
			return // the broker's own line says it
		}
		s.Errors = append(s.Errors, prefix+err.Error())
	}
	// A broker that is down but not yet fenced fails the requests sent
	// to it: the topics are then described around it, the groups shown
	// as last read, until the cluster has moved on.
	var topics admin.TopicDescriptions
	if len(s.Unreachable) > 0 {
		topics, err = c.topicsAround(ctx, s.Unreachable)
	} else {
		topics, err = c.adm.DescribeTopics(ctx, nil, admin.PartitionFilter{})
	}
	if err != nil {
		note("", err)
		s.Topics, s.LogSizes, s.TopicsStale = c.lastTopics, c.lastSizes, true
	} else {
		markUnreachable(topics, s.Unreachable)
		s.Topics = topics
	}
	listed, listErr := c.kadm.ListGroups(ctx)
	groups, err := c.groups(ctx, listed, listErr)
	switch {
	case err == nil:
	case len(s.Unreachable) > 0 && client.IsUnreachable(err) && groups == nil:
		s.Errors = append(s.Errors, "groups: shown as last read, a coordinator does not answer")
	case len(s.Unreachable) > 0 && client.IsUnreachable(err):
		s.Errors = append(s.Errors, "groups: those coordinated by a broker that does not answer are missing")
	default:
		note("", err)
	}
	if groups == nil {
		s.Groups, s.GroupsStale = c.lastGroups, true
	} else {
		s.Groups, c.lastGroups = groups, groups
	}
	queues, err := c.queues(ctx, listed)
	switch {
	case err == nil:
		s.Queues, c.lastQueues = queues, queues
	case len(s.Unreachable) > 0 && client.IsUnreachable(err):
		s.Errors = append(s.Errors, "queues: shown as last read, a coordinator does not answer")
		s.Queues = c.lastQueues
	default:
		note("queues: ", err)
		s.Queues = c.lastQueues
	}
	// Open transactions are listed on every broker: while one does not
	// answer, the last ones read are shown again.
	s.HungTransactions = c.lastHung
	if len(s.Unreachable) == 0 {
		hctx, cancel := context.WithTimeout(ctx, hungTimeout)
		hung, err := c.adm.HungTransactions(hctx)
		cancel()
		if err != nil {
			note("transactions not checked: ", err)
		} else {
			s.HungTransactions, c.lastHung = hung, hung
		}
	}
	if s.TopicsStale {
		c.finish(ctx, &s)
		return s, nil
	}
	var ask []int32
	for _, b := range s.Cluster.Brokers {
		if _, gone := s.Unreachable[b.ID]; !gone && b.State != admin.BrokerFenced {
			ask = append(ask, b.ID)
		}
	}
	dirs := c.adm.DescribeAllLogDirs(ctx, ask)
	for _, id := range slices.Sorted(maps.Keys(dirs.Errors)) {
		s.Errors = append(s.Errors, fmt.Sprintf("log sizes: broker %d: %s", id, dirs.Errors[id]))
	}
	s.LogSizes, s.LogDirs = dirs.Sizes, dirs.Dirs
	c.lastTopics, c.lastSizes = s.Topics, s.LogSizes
	c.finish(ctx, &s)
	return s, nil
}

// queues describes the share groups of listed, the brokers' group
// listing. A broker that did not answer the listing is said once, by
// groups; the share groups the others listed are still described.
func (c *Collector) queues(ctx context.Context, listed kadm.ListedGroups) (admin.QueueDescriptions, error) {
	var names []string
	for name, g := range listed {
		if g.GroupType == "share" {
			names = append(names, name)
		}
	}
	if len(names) == 0 {
		return admin.QueueDescriptions{}, nil
	}
	slices.Sort(names)
	return c.adm.DescribeQueues(ctx, names)
}

// Close closes the client the Collector made for itself; the one it was
// given is the caller's.
func (c *Collector) Close() {
	c.quorumMu.Lock()
	defer c.quorumMu.Unlock()
	if c.quorumCl != nil {
		c.quorumCl.Close()
		c.quorumCl = nil
	}
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

// groups describes the consumer groups of listed, the brokers' group
// listing (listErr its error); nil when none could be described. Each
// broker lists the groups it coordinates: those of a broker that does not
// answer are missing, and the error says so, but the others are
// described.
func (c *Collector) groups(ctx context.Context, listed kadm.ListedGroups, listErr error) (admin.GroupDescriptions, error) {
	// Share groups are the queues view's (queues).
	var names []string
	for name, g := range listed {
		if g.GroupType != "share" {
			names = append(names, name)
		}
	}
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
