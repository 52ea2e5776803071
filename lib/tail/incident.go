package tail

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/mqproject/mq/lib/admin"
	"github.com/mqproject/mq/lib/client"
)

// BrokerUnreachable is the state of a broker the cluster still counts
// as alive (it has not been fenced yet, or the controller has no quorum
// to fence it) but that does not answer mqtail.
const BrokerUnreachable = "unreachable"

// probeTimeout and quorumTimeout bound each refresh's question to every
// broker and to the controller quorum: a broker that is gone, or a quorum
// that cannot elect a controller, is told within them instead of using
// up the refresh.
const (
	probeTimeout  = 2 * time.Second
	quorumTimeout = time.Second
	// hungTimeout bounds the listing and description of the open
	// transactions.
	hungTimeout = 2 * time.Second
)

// probeBrokers asks every broker that is not fenced for its API
// versions, all at once, each on its own connection, and returns those
// that do not answer within probeTimeout: broker → why ("connection
// refused", "no answer within 2s").
func (c *Collector) probeBrokers(ctx context.Context, brokers []admin.BrokerDescription) map[int32]string {
	ctx, cancel := context.WithTimeout(ctx, probeTimeout)
	defer cancel()
	var mu sync.Mutex
	var wg sync.WaitGroup
	down := map[int32]string{}
	for _, b := range brokers {
		if b.State == admin.BrokerFenced {
			continue
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			_, err := c.cl.Broker(int(b.ID)).Request(ctx, kmsg.NewPtrApiVersionsRequest())
			if err == nil || !client.IsUnreachable(err) && !errors.Is(err, context.DeadlineExceeded) {
				return // an answer, even an error, is a broker that is there
			}
			why := client.Reason(err)
			if errors.Is(err, context.DeadlineExceeded) {
				why = "no answer within " + probeTimeout.String()
			}
			mu.Lock()
			down[b.ID] = why
			mu.Unlock()
		}()
	}
	wg.Wait()
	return down
}

// quorumLost reports whether the controller quorum has no controller: a
// broker that answers (the controller Metadata names, else the first)
// says NOT_CONTROLLER to DescribeQuorum, or does not answer it within
// quorumTimeout (a broker passes it to the controller, and waits for one
// to be elected).
//
// It asks through a client of its own (quorumCl): a broker answers a
// connection's requests in order, and one that waits for a controller
// would hold up every request of the refresh sent after it. That client
// is closed, and made anew at the next refresh, after a question that
// got no answer, which may still hold its connection.
func (c *Collector) quorumLost(ctx context.Context, cluster admin.ClusterDescription, down map[int32]string) bool {
	ask := int32(-1)
	for _, b := range cluster.Brokers {
		if _, gone := down[b.ID]; gone || b.State == admin.BrokerFenced {
			continue
		}
		if ask < 0 || b.ID == cluster.Controller {
			ask = b.ID
		}
	}
	if ask < 0 {
		return false // nobody to ask: the brokers' lines say why
	}
	c.quorumMu.Lock()
	defer c.quorumMu.Unlock()
	if c.quorumCl == nil {
		qc, err := kgo.NewClient(c.cl.Opts()...)
		if err != nil {
			return false
		}
		c.quorumCl = qc
	}
	ctx, cancel := context.WithTimeout(ctx, quorumTimeout)
	defer cancel()
	req := kmsg.NewPtrDescribeQuorumRequest()
	rt := kmsg.NewDescribeQuorumRequestTopic()
	rt.Topic = "__cluster_metadata"
	rt.Partitions = append(rt.Partitions, kmsg.NewDescribeQuorumRequestTopicPartition())
	req.Topics = append(req.Topics, rt)
	resp, err := req.RequestWith(ctx, c.quorumCl.Broker(int(ask)))
	if err != nil {
		c.quorumCl.Close()
		c.quorumCl = nil
	}
	switch {
	case errors.Is(err, context.DeadlineExceeded):
		return ctx.Err() != nil
	case err != nil:
		return false
	case resp.ErrorCode == kerr.NotController.Code:
		return true
	}
	for _, t := range resp.Topics {
		for _, p := range t.Partitions {
			if p.ErrorCode == kerr.NotController.Code {
				return true
			}
		}
	}
	return false
}

// topicsAround describes every topic but the internal ones from the
// metadata and the offsets that the leaders that answer list, while some
// broker does not answer (lib/admin's description asks every broker more
// and would fail as a whole): a partition whose leader is down keeps its
// leader, replicas and in-sync replicas, with unknown offsets and
// "leader N unreachable".
func (c *Collector) topicsAround(ctx context.Context, down map[int32]string) (admin.TopicDescriptions, error) {
	details, err := c.kadm.ListTopics(ctx)
	if err != nil {
		return nil, err
	}
	names := details.Names()
	out := admin.TopicDescriptions{}
	if len(names) == 0 {
		return out, nil
	}
	// Each shard that fails leaves its partitions out of the answer; the
	// others are there.
	starts, _ := c.kadm.ListStartOffsets(ctx, names...)
	ends, _ := c.kadm.ListEndOffsets(ctx, names...)
	slices.Sort(names)
	for _, name := range names {
		d := details[name]
		if d.Err != nil {
			continue
		}
		td := admin.TopicDescription{Topic: name, Internal: d.IsInternal, Partitions: []admin.PartitionDescription{}}
		if d.ID != (kadm.TopicID{}) {
			td.ID = admin.TopicIDString(d.ID)
		}
		for _, p := range d.Partitions.Sorted() {
			pd := admin.PartitionDescription{Partition: p.Partition, Leader: p.Leader, LeaderEpoch: p.LeaderEpoch,
				Replicas: nonNil(p.Replicas), ISR: nonNil(p.ISR), OfflineReplicas: nonNil(p.OfflineReplicas),
				LogStartOffset: -1, HighWatermark: -1}
			var errs []string
			if o, ok := starts.Lookup(name, p.Partition); ok && o.Err == nil {
				pd.LogStartOffset = o.Offset
			} else if ok {
				errs = append(errs, "log start offset: "+o.Err.Error())
			}
			if o, ok := ends.Lookup(name, p.Partition); ok && o.Err == nil {
				pd.HighWatermark = o.Offset
			} else if ok {
				errs = append(errs, "high-water mark: "+o.Err.Error())
			}
			if _, gone := down[p.Leader]; gone {
				errs = []string{fmt.Sprintf("leader %d unreachable", p.Leader)}
			}
			pd.Error = strings.Join(errs, "; ")
			td.Partitions = append(td.Partitions, pd)
		}
		out = append(out, td)
	}
	return out, nil
}

func nonNil(s []int32) []int32 {
	if s == nil {
		return []int32{}
	}
	return s
}

// markUnreachable says, on each partition led by a broker that does not
// answer, that its offsets are unknown for that reason.
func markUnreachable(topics admin.TopicDescriptions, down map[int32]string) {
	for i := range topics {
		for j := range topics[i].Partitions {
			p := &topics[i].Partitions[j]
			if _, gone := down[p.Leader]; gone {
				p.Error = fmt.Sprintf("leader %d unreachable", p.Leader)
			}
		}
	}
}

// downLines are the Errors lines of the brokers that do not answer and of
// a quorum without controller, one per cause.
func downLines(cluster admin.ClusterDescription, down map[int32]string, quorumLost bool) []string {
	var lines []string
	for _, b := range cluster.Brokers {
		if why, ok := down[b.ID]; ok {
			lines = append(lines, fmt.Sprintf("broker %d unreachable (%s:%d): %s", b.ID, b.Host, b.Port, why))
		}
	}
	if quorumLost {
		lines = append(lines, "controller without quorum: no controller is elected, so nothing can be fenced, elected or created")
	}
	return lines
}
