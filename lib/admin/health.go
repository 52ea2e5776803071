package admin

import (
	"context"
	"fmt"
	"io"
	"slices"
	"strings"
	"time"

	"github.com/mqproject/mq/lib/client"
)

// Kinds of health problem (HealthProblem.Kind).
const (
	ProblemOfflinePartition = "offline_partition"         // no leader: nobody can produce or consume it
	ProblemUnderReplicated  = "under_replicated"          // fewer in-sync replicas than replicas
	ProblemFencedBroker     = "fenced_broker"             // the controller stopped hearing from it
	ProblemNoQuorum         = "controller_no_quorum"      // no active controller, or too few voters in contact
	ProblemFailingLogDir    = "failing_log_dir"           // writes to a broker's log directory fail
	ProblemLaggingGroup     = "lagging_group"             // a group further behind in time than --max-lag
	ProblemUnknownQuorum    = "controller_quorum_unknown" // the quorum could not be described
)

// HealthProblem is one thing wrong with the cluster. Fields that do not
// apply to its kind are "" or -1.
type HealthProblem struct {
	Kind      string `json:"kind"`
	Topic     string `json:"topic"`
	Partition int32  `json:"partition"`
	Broker    int32  `json:"broker"`
	Group     string `json:"group"`
	// LagTimeMillis is a lagging group's lag in time on the partition.
	LagTimeMillis int64 `json:"lag_time_ms"`
	// Detail says what is wrong in words, as the line printed for it.
	Detail string `json:"detail"`
}

// Health is the result of cluster health: healthy, or the problems found.
type Health struct {
	Healthy  bool            `json:"healthy"`
	Problems []HealthProblem `json:"problems"`

	brokers, partitions int // what was checked, for the healthy line
}

// Table implements Result: one row per problem.
func (h Health) Table() ([]string, [][]string) {
	rows := make([][]string, len(h.Problems))
	for i, p := range h.Problems {
		rows[i] = []string{p.Detail}
	}
	return nil, rows
}

// WriteTable writes one line per problem, or one line saying the cluster
// is healthy.
func (h Health) WriteTable(w io.Writer) error {
	if h.Healthy {
		_, err := fmt.Fprintf(w, "healthy: %d broker%s alive, %d partition%s fully replicated\n", h.brokers, plural(h.brokers), h.partitions, plural(h.partitions))
		return err
	}
	var b strings.Builder
	for _, p := range h.Problems {
		b.WriteString(p.Detail + "\n")
	}
	_, err := io.WriteString(w, b.String())
	return err
}

// healthFacts is what cluster health judges: the cluster as described,
// every partition, and (with a maximum lag) every group.
type healthFacts struct {
	cluster    ClusterDescription
	partitions []healthPartition
	groups     GroupDescriptions
}

// healthPartition is one partition as Metadata gives it.
type healthPartition struct {
	Topic     string
	Partition int32
	Leader    int32
	Replicas  []int32
	ISR       []int32
}

// ClusterHealth checks the cluster: offline partitions, under-replicated
// partitions, fenced brokers, failing log directories, a controller
// without quorum and, when maxLag is above zero, consumer groups whose lag
// in time on some partition exceeds it. The error is a failure (exit 1)
// when there is any problem; the Health is returned with it.
func (a *Admin) ClusterHealth(ctx context.Context, maxLag time.Duration) (*Health, error) {
	cd, err := a.DescribeCluster(ctx, false)
	if err != nil {
		return nil, err
	}
	md, err := a.adm.Metadata(ctx)
	if err != nil {
		return nil, requestError("cluster health", err)
	}
	f := healthFacts{cluster: *cd}
	for _, t := range md.Topics.Sorted() {
		if t.Err != nil {
			continue // deleted while we looked, or not ours to see
		}
		for _, p := range t.Partitions.Sorted() {
			f.partitions = append(f.partitions, healthPartition{Topic: t.Topic, Partition: p.Partition, Leader: p.Leader, Replicas: p.Replicas, ISR: p.ISR})
		}
	}
	if maxLag > 0 {
		groups, err := a.DescribeGroups(ctx, nil)
		if err != nil && groups == nil {
			return nil, err
		}
		f.groups = groups
	}
	h := assessHealth(f, maxLag)
	if !h.Healthy {
		return &h, client.Failf("cluster degraded: %d problem%s", len(h.Problems), plural(len(h.Problems)))
	}
	return &h, nil
}

// assessHealth judges facts: pure, for the tests.
func assessHealth(f healthFacts, maxLag time.Duration) Health {
	h := Health{Problems: []HealthProblem{}}
	add := func(p HealthProblem) { h.Problems = append(h.Problems, p) }
	problem := func(kind string) HealthProblem {
		return HealthProblem{Kind: kind, Partition: -1, Broker: -1, LagTimeMillis: -1}
	}

	c := f.cluster
	alive := map[int32]bool{}
	for _, b := range c.Brokers {
		if b.State == BrokerFenced {
			p := problem(ProblemFencedBroker)
			p.Broker = b.ID
			p.Detail = fmt.Sprintf("fenced broker %d (%s): the controller stopped hearing from it", b.ID, hostPort(b))
			add(p)
		} else {
			alive[b.ID] = true
			h.brokers++
		}
		for _, d := range b.LogDirs {
			if d.Failing {
				p := problem(ProblemFailingLogDir)
				p.Broker = b.ID
				p.Detail = fmt.Sprintf("failing log directory %s on broker %d: %s", d.Path, b.ID, orDash(d.Error))
				add(p)
			}
		}
	}
	if p, ok := quorumProblem(c, alive); ok {
		add(p)
	}

	for _, part := range f.partitions {
		switch {
		case part.Leader < 0:
			p := problem(ProblemOfflinePartition)
			p.Topic, p.Partition = part.Topic, part.Partition
			p.Detail = fmt.Sprintf("offline partition %s/%d: no leader (replicas %s, in sync %s)", part.Topic, part.Partition, joinIDs(part.Replicas), joinIDs(part.ISR))
			add(p)
		case len(part.ISR) < len(part.Replicas):
			p := problem(ProblemUnderReplicated)
			p.Topic, p.Partition, p.Broker = part.Topic, part.Partition, part.Leader
			p.Detail = fmt.Sprintf("under-replicated partition %s/%d: in sync %s of replicas %s (leader %d)", part.Topic, part.Partition, joinIDs(part.ISR), joinIDs(part.Replicas), part.Leader)
			add(p)
		default:
			h.partitions++
		}
	}

	if maxLag > 0 {
		for _, g := range f.groups {
			for _, gp := range g.Partitions {
				if gp.LagTimeMillis < 0 || time.Duration(gp.LagTimeMillis)*time.Millisecond <= maxLag {
					continue
				}
				p := problem(ProblemLaggingGroup)
				p.Group, p.Topic, p.Partition, p.LagTimeMillis = g.Group, gp.Topic, gp.Partition, gp.LagTimeMillis
				p.Detail = fmt.Sprintf("lagging group %s on %s/%d: %s behind (%d records), more than --max-lag %s",
					g.Group, gp.Topic, gp.Partition, FormatLagTime(time.Duration(gp.LagTimeMillis)*time.Millisecond), gp.Lag, maxLag)
				add(p)
			}
		}
	}
	h.Healthy = len(h.Problems) == 0
	return h
}

// quorumProblem judges the controller quorum from what DescribeQuorum and
// DescribeCluster tell: no leader is no quorum; with a leader, a majority
// of the voters must be in contact — the leader and the voters whose
// brokers are not fenced (each mq node is a broker and, when a voter, a
// controller: a fenced voter stopped heartbeating to the leader). A quorum
// the brokers do not describe at all (a broker without DescribeQuorum)
// is not judged; one they failed to describe is a problem.
func quorumProblem(c ClusterDescription, alive map[int32]bool) (HealthProblem, bool) {
	p := HealthProblem{Kind: ProblemNoQuorum, Partition: -1, Broker: -1, LagTimeMillis: -1}
	q := c.Quorum
	switch {
	case q == nil && c.QuorumError == quorumUnavailable:
		return p, false
	case q == nil:
		p.Kind = ProblemUnknownQuorum
		p.Detail = "controller quorum unknown: " + c.QuorumError
		return p, true
	case q.Leader < 0:
		p.Detail = fmt.Sprintf("controller without quorum: no active controller (epoch %d)", q.Epoch)
		return p, true
	}
	var voters, inContact []int32
	for _, m := range q.Members {
		if !m.Voter {
			continue
		}
		voters = append(voters, m.ID)
		if m.ID == q.Leader || alive[m.ID] {
			inContact = append(inContact, m.ID)
		}
	}
	if len(inContact)*2 > len(voters) {
		return p, false
	}
	p.Broker = q.Leader
	missing := slices.DeleteFunc(slices.Clone(voters), func(id int32) bool { return slices.Contains(inContact, id) })
	p.Detail = fmt.Sprintf("controller without quorum: leader %d is in contact with %d of %d voters (%s out of contact)",
		q.Leader, len(inContact), len(voters), joinIDs(missing))
	return p, true
}

// hostPort is a broker's address for messages.
func hostPort(b BrokerDescription) string {
	return fmt.Sprintf("%s:%d", b.Host, b.Port)
}
