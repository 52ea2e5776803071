package admin

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"io"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"

	"github.com/mqproject/mq/lib/client"
)

// Kinds of health problem (HealthProblem.Kind).
const (
	ProblemOfflinePartition = "offline_partition"         // no leader: nobody can produce or consume it
	ProblemUnderReplicated  = "under_replicated"          // fewer in-sync replicas than replicas
	ProblemFencedBroker     = "fenced_broker"             // the controller stopped hearing from it
	ProblemUnreachable      = "unreachable_broker"        // it does not answer, though the controller has not fenced it (yet)
	ProblemNoQuorum         = "controller_no_quorum"      // no active controller, or too few voters in contact
	ProblemFailingLogDir    = "failing_log_dir"           // writes to a broker's log directory fail
	ProblemTierUploads      = "tier_uploads_failing"      // a broker's uploads to the remote store fail
	ProblemLaggingGroup     = "lagging_group"             // a group further behind in time than --max-lag
	ProblemUnknownQuorum    = "controller_quorum_unknown" // the quorum could not be described
	ProblemUnknownLag       = "group_lag_unknown"         // --max-lag asked, but the groups' lag could not be read
	ProblemHungTransaction  = "hung_transaction"          // a transaction open well past its timeout
	ProblemUnknownTxns      = "transactions_unknown"      // the open transactions could not be read
)

// HealthTimeout is cluster health's default --timeout: how long the whole
// check may take. A broker that does not answer within it is reported as
// such; a quorum without an active controller is found within it.
const HealthTimeout = 5 * time.Second

// HealthCheck is what cluster health is asked to check.
type HealthCheck struct {
	// MaxLag, above zero, reports groups whose lag in time on some
	// partition exceeds it (--max-lag).
	MaxLag time.Duration
	// Groups are the groups whose lag is checked (--group); none: every
	// group with members. A group without members (Empty: its consumers
	// are gone) is checked only when named here.
	Groups []string
	// Timeout bounds the whole check (--timeout); 0: HealthTimeout.
	Timeout time.Duration
}

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
	// TransactionalID is a hung transaction's (only for that kind).
	TransactionalID string `json:"transactional_id,omitempty"`
	// Detail says what is wrong in words, as the line printed for it.
	Detail string `json:"detail"`
	// Partitions are the partitions a fenced or unreachable broker leaves
	// under-replicated or without a live leader, each once under every
	// such broker among its replicas; empty for the other kinds.
	Partitions []HealthPartition `json:"partitions"`
}

// HealthPartition is one partition a broker's problem affects.
type HealthPartition struct {
	Topic     string  `json:"topic"`
	Partition int32   `json:"partition"`
	Internal  bool    `json:"internal"`
	Leader    int32   `json:"leader"` // -1: none
	Replicas  []int32 `json:"replicas"`
	ISR       []int32 `json:"isr"`
	// Offline: no live leader (none, or the broker at fault), so nobody
	// can produce to or consume it until another replica leads it.
	Offline bool `json:"offline"`
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
	// namedGroups: the groups were named (--group), so Empty ones count.
	namedGroups bool
	// groupsErr says why the groups could not be read; "" when they were.
	groupsErr string
	// transactions are the transactions not ended, txnErr why they could
	// not be read ("" when they were), now the time they are judged at.
	transactions TxnDescriptions
	txnErr       string
	now          time.Time
}

// healthPartition is one partition as Metadata gives it.
type healthPartition struct {
	Topic     string
	Partition int32
	Internal  bool
	Leader    int32
	Replicas  []int32
	ISR       []int32
	// Adding are the replicas a running move adds (not yet in sync by
	// design, not a problem).
	Adding []int32
}

// newProblem is a problem of kind naming no partition, broker or lag.
func newProblem(kind string) HealthProblem {
	return HealthProblem{Kind: kind, Partition: -1, Broker: -1, LagTimeMillis: -1, Partitions: []HealthPartition{}}
}

// ClusterHealth checks the cluster: brokers that do not answer, fenced
// brokers, offline partitions, under-replicated partitions, failing log
// directories, a controller without quorum, transactions open longer
// than their timeout and a minute (hung: their coordinator should have
// aborted them) and, with a maximum lag,
// consumer groups whose lag in time on some partition exceeds it. The
// whole check is bounded by the check's Timeout. The error is a failure
// (exit 1) when there is any problem; the Health is returned with it.
func (a *Admin) ClusterHealth(ctx context.Context, check HealthCheck) (*Health, error) {
	ctx, cancel := context.WithTimeout(ctx, cmp.Or(check.Timeout, HealthTimeout))
	defer cancel()
	// The groups are read alongside the cluster, so that a quorum that
	// takes the whole timeout to be found lost leaves them time too.
	var groups GroupDescriptions
	var groupsErr error
	var wg sync.WaitGroup
	if check.MaxLag > 0 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			groups, groupsErr = a.DescribeGroups(ctx, check.Groups)
		}()
	}
	cd, md, err := a.describeCluster(ctx, false)
	wg.Wait()
	if err != nil {
		return nil, err
	}
	// After the cluster's description, not beside it: asking every
	// broker for its transactions loads the metadata of brokers just
	// lost, and the description's request could then go to one of them.
	txns, txnErr := a.openTransactions(ctx)
	f := healthFacts{cluster: *cd, groups: groups, namedGroups: len(check.Groups) > 0, transactions: txns, now: a.now()}
	if txnErr != nil {
		f.txnErr = errorLine(txnErr)
	}
	if groupsErr != nil && !Partial(groups) {
		f.groupsErr = errorLine(groupsErr)
	}
	set := kadm.TopicsSet{}
	for _, t := range md.Topics.Sorted() {
		for _, p := range t.Partitions.Sorted() {
			if t.Err == nil && len(p.ISR) < len(p.Replicas) {
				set.Add(t.Topic, p.Partition)
			}
		}
	}
	moving := a.moving(ctx, set)
	for _, t := range md.Topics.Sorted() {
		if t.Err != nil {
			continue // deleted while we looked, or not ours to see
		}
		for _, p := range t.Partitions.Sorted() {
			f.partitions = append(f.partitions, healthPartition{Topic: t.Topic, Partition: p.Partition, Internal: t.IsInternal,
				Leader: p.Leader, Replicas: p.Replicas, ISR: p.ISR, Adding: moving[tp{t.Topic, p.Partition}].AddingReplicas})
		}
	}
	h := assessHealth(f, check.MaxLag)
	if !h.Healthy {
		return &h, client.Failf("cluster degraded: %d problem%s", len(h.Problems), plural(len(h.Problems)))
	}
	return &h, nil
}

// errorLine is an error's text without the "cannot reach" advice a
// command-ending error gets.
func errorLine(err error) string {
	if errors.Is(err, context.DeadlineExceeded) {
		return "no answer within the timeout"
	}
	return err.Error()
}

// assessHealth judges facts: pure, for the tests. A broker that does not
// answer, or that the controller fenced, is one problem that carries the
// partitions it affects (one line for many partitions); a partition with
// no replica on such a broker is a problem of its own.
func assessHealth(f healthFacts, maxLag time.Duration) Health {
	h := Health{Problems: []HealthProblem{}}
	add := func(p HealthProblem) { h.Problems = append(h.Problems, p) }
	problem := newProblem

	c := f.cluster
	alive := map[int32]bool{}
	down := map[int32]bool{} // fenced or unreachable
	for _, b := range c.Brokers {
		switch b.State {
		case BrokerFenced, BrokerUnreachable:
			down[b.ID] = true
		default:
			alive[b.ID] = true
			h.brokers++
		}
	}
	affected := map[int32][]HealthPartition{}
	var partProblems []HealthProblem
	for _, part := range f.partitions {
		hp := HealthPartition{Topic: part.Topic, Partition: part.Partition, Internal: part.Internal, Leader: part.Leader,
			Replicas: nonNil(part.Replicas), ISR: nonNil(part.ISR), Offline: part.Leader < 0 || down[part.Leader]}
		blamed := false
		for _, r := range part.Replicas {
			if down[r] {
				affected[r] = append(affected[r], hp)
				blamed = true
			}
		}
		switch {
		case blamed:
		case part.Leader < 0:
			p := problem(ProblemOfflinePartition)
			p.Topic, p.Partition = part.Topic, part.Partition
			p.Detail = fmt.Sprintf("offline partition %s/%d: no leader (replicas %s, in sync %s)", part.Topic, part.Partition, joinIDs(part.Replicas), joinIDs(part.ISR))
			partProblems = append(partProblems, p)
		case underReplicated(part.Replicas, part.ISR, part.Adding):
			p := problem(ProblemUnderReplicated)
			p.Topic, p.Partition, p.Broker = part.Topic, part.Partition, part.Leader
			p.Detail = fmt.Sprintf("under-replicated partition %s/%d: in sync %s of replicas %s (leader %d)", part.Topic, part.Partition, joinIDs(part.ISR), joinIDs(part.Replicas), part.Leader)
			partProblems = append(partProblems, p)
		default:
			h.partitions++
		}
	}

	var brokerProblems []HealthProblem
	for _, b := range c.Brokers {
		if down[b.ID] {
			var p HealthProblem
			if b.State == BrokerUnreachable {
				p = problem(ProblemUnreachable)
				p.Detail = fmt.Sprintf("broker %d unreachable (%s, %s)", b.ID, hostPort(b), strings.TrimPrefix(orDash(b.Error), "unreachable: "))
			} else {
				p = problem(ProblemFencedBroker)
				p.Detail = fmt.Sprintf("fenced broker %d (%s): the controller stopped hearing from it", b.ID, hostPort(b))
			}
			p.Broker = b.ID
			if parts := affected[b.ID]; len(parts) > 0 {
				p.Partitions = parts
				p.Detail += ": " + affectedText(parts)
			}
			brokerProblems = append(brokerProblems, p)
		}
		for _, d := range b.LogDirs {
			if d.Failing {
				p := problem(ProblemFailingLogDir)
				p.Broker = b.ID
				p.Detail = fmt.Sprintf("failing log directory %s on broker %d: %s", d.Path, b.ID, orDash(d.Error))
				brokerProblems = append(brokerProblems, p)
			}
			if d.TierUploadFailing {
				p := problem(ProblemTierUploads)
				p.Broker = b.ID
				p.Detail = fmt.Sprintf("uploads to the remote store failing on broker %d (%d bytes waiting; local retention waits for them): %s", b.ID, d.TierUploadLagBytes, orDash(d.TierError))
				brokerProblems = append(brokerProblems, p)
			}
		}
	}
	h.Problems = append(h.Problems, brokerProblems...)
	if p, ok := quorumProblem(c, alive); ok {
		add(p)
	}
	h.Problems = append(h.Problems, partProblems...)

	if maxLag > 0 && f.groupsErr != "" {
		p := problem(ProblemUnknownLag)
		p.Detail = "consumer group lag not checked: " + f.groupsErr
		add(p)
	}
	if maxLag > 0 {
		for _, g := range f.groups {
			if g.State == "Empty" && !f.namedGroups {
				continue // its consumers are gone: its lag is nobody's delay
			}
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
	h.Problems = append(h.Problems, hungTransactions(f.transactions, f.now, problem)...)
	if f.txnErr != "" && len(down) == 0 {
		// With a broker down, its line says why already.
		p := problem(ProblemUnknownTxns)
		p.Detail = "transactions not checked: " + f.txnErr
		add(p)
	}
	h.Healthy = len(h.Problems) == 0
	return h
}

// affectedText counts the partitions a broker's problem affects: "56
// partitions under-replicated, 6 user, 50 internal; 2 without a live
// leader, 2 user, 0 internal".
func affectedText(parts []HealthPartition) string {
	var under, offline [2]int // user, internal
	for _, p := range parts {
		i := 0
		if p.Internal {
			i = 1
		}
		if p.Offline {
			offline[i]++
		} else {
			under[i]++
		}
	}
	var out []string
	if n := under[0] + under[1]; n > 0 {
		out = append(out, fmt.Sprintf("%d partition%s under-replicated, %d user, %d internal", n, plural(n), under[0], under[1]))
	}
	if n := offline[0] + offline[1]; n > 0 {
		out = append(out, fmt.Sprintf("%d partition%s without a live leader, %d user, %d internal", n, plural(n), offline[0], offline[1]))
	}
	return strings.Join(out, "; ")
}

// quorumProblem judges the controller quorum from what DescribeQuorum and
// DescribeCluster tell: no leader (no answer, NOT_CONTROLLER, or no
// leader named) is no quorum; with a leader, a majority of the voters
// must be in contact — the leader and the voters whose brokers are
// neither fenced nor unreachable (each mq node is a broker and, when a
// voter, a controller: a fenced voter stopped heartbeating to the leader,
// one we cannot reach is most likely down). A quorum the brokers do not
// describe at all (a broker without DescribeQuorum) is not judged; one
// they failed to describe otherwise is a problem.
func quorumProblem(c ClusterDescription, alive map[int32]bool) (HealthProblem, bool) {
	p := HealthProblem{Kind: ProblemNoQuorum, Partition: -1, Broker: -1, LagTimeMillis: -1, Partitions: []HealthPartition{}}
	q := c.Quorum
	switch {
	case q == nil && c.noQuorum:
		p.Detail = "controller without quorum: " + c.QuorumError
		return p, true
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

// NoQuorum reports whether the description shows a controller without
// quorum, as cluster health judges it (controller_no_quorum): no active
// controller answered, or the leader is in contact with no majority of
// the voters. mqtail shows it the same way.
func (d ClusterDescription) NoQuorum() bool {
	alive := map[int32]bool{}
	for _, b := range d.Brokers {
		alive[b.ID] = b.State != BrokerFenced && b.State != BrokerUnreachable
	}
	p, ok := quorumProblem(d, alive)
	return ok && p.Kind == ProblemNoQuorum
}

// hostPort is a broker's address for messages.
func hostPort(b BrokerDescription) string {
	return fmt.Sprintf("%s:%d", b.Host, b.Port)
}
