package admin

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/mqproject/mq/lib/client"
)

// PartitionSpec is one -t argument of partition elect-leaders: a topic,
// and one of its partitions or -1 for all of them.
type PartitionSpec struct {
	Topic     string
	Partition int32 // -1: every partition of the topic
}

// ParsePartitionSpecs reads TOPIC and TOPIC:PARTITION arguments. A spec
// without a topic, a partition that is not a number >= 0, or one given
// twice is a usage error.
func ParsePartitionSpecs(what string, args []string) ([]PartitionSpec, error) {
	var out []PartitionSpec
	for _, arg := range args {
		spec := PartitionSpec{Topic: arg, Partition: -1}
		if i := strings.LastIndexByte(arg, ':'); i >= 0 {
			n, err := strconv.ParseInt(arg[i+1:], 10, 32)
			if err != nil || n < 0 {
				return nil, usagef("%s: want TOPIC or TOPIC:PARTITION, got %q", what, arg)
			}
			spec = PartitionSpec{Topic: arg[:i], Partition: int32(n)}
		}
		if spec.Topic == "" {
			return nil, usagef("%s: want TOPIC or TOPIC:PARTITION, got %q", what, arg)
		}
		if slices.Contains(out, spec) {
			return nil, usagef("%s: %s given twice", what, arg)
		}
		out = append(out, spec)
	}
	return out, nil
}

// ElectLeaders is what partition elect-leaders asks for.
type ElectLeaders struct {
	// Unclean elects the first live replica of a partition that has no
	// live in-sync replica, which may lose acknowledged records; without
	// it the preferred replica (the first) is elected where it is in sync.
	Unclean bool
	// All elects for every partition of the cluster; otherwise for
	// Partitions.
	All        bool
	Partitions []PartitionSpec
}

// Check refuses a request that cannot be right (a usage error).
func (req ElectLeaders) Check() error {
	switch {
	case req.All && len(req.Partitions) > 0:
		return usagef("partition elect-leaders: --all and --topic exclude each other")
	case !req.All && len(req.Partitions) == 0:
		return usagef("partition elect-leaders: missing --topic TOPIC[:PARTITION] (or --all)")
	}
	return nil
}

// Result values of partition elect-leaders.
const (
	ResultElected   = "elected"
	ResultUnchanged = "unchanged" // the replica to elect leads already
)

// ElectionResult is the outcome for one partition of partition
// elect-leaders.
type ElectionResult struct {
	Topic     string `json:"topic"`
	Partition int32  `json:"partition"` // -1: the whole topic (an unknown topic)
	Result    string `json:"result"`    // elected, unchanged, failed
	Error     string `json:"error,omitempty"`
}

// ElectionResults is the result of partition elect-leaders, sorted by
// topic and partition.
type ElectionResults []ElectionResult

// Table implements Result.
func (rs ElectionResults) Table() ([]string, [][]string) {
	rows := make([][]string, len(rs))
	for i, r := range rs {
		p := itoa(r.Partition)
		if r.Partition < 0 {
			p = "-"
		}
		rows[i] = []string{r.Topic, p, r.Result, orDash(r.Error)}
	}
	return []string{"TOPIC", "PARTITION", "RESULT", "DETAIL"}, rows
}

func (rs ElectionResults) allFailed() bool {
	return !slices.ContainsFunc(rs, func(r ElectionResult) bool { return r.Result != ResultFailed })
}

// ElectLeaders asks the controller to elect leaders (ElectLeaders, KIP-183
// and KIP-460): the preferred replica, or with Unclean a live replica of
// partitions that have no live in-sync one. A partition whose leader is
// already the one to elect is "unchanged", not a failure.
func (a *Admin) ElectLeaders(ctx context.Context, req ElectLeaders) (ElectionResults, error) {
	if err := req.Check(); err != nil {
		return nil, err
	}
	if err := a.require(ctx, "partition elect-leaders", kmsg.ElectLeaders); err != nil {
		return nil, err
	}
	how := kadm.ElectPreferredReplica
	if req.Unclean {
		how = kadm.ElectLiveReplica
	}
	var out ElectionResults
	var set kadm.TopicsSet // nil: every partition
	if !req.All {
		set = kadm.TopicsSet{}
		var whole []string
		for _, s := range req.Partitions {
			if s.Partition < 0 {
				whole = append(whole, s.Topic)
			} else {
				set.Add(s.Topic, s.Partition)
			}
		}
		if len(whole) > 0 {
			// A topic named alone means each of its partitions.
			details, err := a.adm.ListTopics(ctx, whole...)
			if err != nil {
				return nil, requestError("partition elect-leaders", err)
			}
			for _, t := range whole {
				d, ok := details[t]
				if !ok || d.Err != nil {
					msg := "unknown topic"
					if ok && !errors.Is(d.Err, kerr.UnknownTopicOrPartition) {
						msg = errText(d.Err, "")
					}
					out = append(out, ElectionResult{Topic: t, Partition: -1, Result: ResultFailed, Error: msg})
					continue
				}
				for p := range d.Partitions {
					set.Add(t, p)
				}
			}
		}
	}
	if set == nil || len(set) > 0 {
		resps, err := a.adm.ElectLeaders(ctx, how, set)
		if err != nil {
			return nil, requestError("partition elect-leaders", err)
		}
		for _, ps := range resps {
			for _, r := range ps {
				out = append(out, electionResult(r))
			}
		}
		for t, ps := range set {
			for p := range ps {
				if _, ok := resps[t][p]; !ok {
					out = append(out, ElectionResult{Topic: t, Partition: p, Result: ResultFailed, Error: "no answer for this partition"})
				}
			}
		}
	}
	slices.SortFunc(out, func(x, y ElectionResult) int {
		return cmp.Or(strings.Compare(x.Topic, y.Topic), cmp.Compare(x.Partition, y.Partition))
	})
	var failed []string
	for _, r := range out {
		if r.Result == ResultFailed {
			name := r.Topic
			if r.Partition >= 0 {
				name = fmt.Sprintf("%s:%d", r.Topic, r.Partition)
			}
			failed = append(failed, name+": "+r.Error)
		}
	}
	return out, failures("partition elect-leaders", failed)
}

// electionResult turns one partition's answer into its row.
func electionResult(r kadm.ElectLeadersResult) ElectionResult {
	res := ElectionResult{Topic: r.Topic, Partition: r.Partition, Result: ResultElected}
	switch {
	case r.Err == nil:
	case errors.Is(r.Err, kerr.ElectionNotNeeded):
		res.Result = ResultUnchanged
	case errors.Is(r.Err, kerr.UnknownTopicOrPartition):
		res.Result, res.Error = ResultFailed, "unknown topic or partition"
	default:
		res.Result, res.Error = ResultFailed, errText(r.Err, r.ErrMessage)
	}
	return res
}

// supports reports whether the broker answers API key, from one broker's
// ApiVersions (the brokers of a cluster run one release, or roll to it).
func (a *Admin) supports(ctx context.Context, key kmsg.Key) (bool, error) {
	resp, err := kmsg.NewPtrApiVersionsRequest().RequestWith(ctx, a.cl)
	if err != nil {
		return false, err
	}
	for _, k := range resp.ApiKeys {
		if k.ApiKey == key.Int16() {
			return true, nil
		}
	}
	return false, nil
}

// require fails a command whose API the broker does not answer, in words
// (kgo's own error for it speaks of a broker "too old").
func (a *Admin) require(ctx context.Context, what string, key kmsg.Key) error {
	ok, err := a.supports(ctx, key)
	if err != nil {
		return requestError(what, err)
	}
	if !ok {
		return client.Failf("%s: the broker does not answer %s (Kafka API %d)", what, kmsg.NameForKey(key.Int16()), key.Int16())
	}
	return nil
}
