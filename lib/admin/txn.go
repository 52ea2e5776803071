package admin

import (
	"context"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"

	"github.com/mqproject/mq/lib/client"
)

// TxnStates are the states of a transaction, Kafka's names, as txn list
// --state takes them.
var TxnStates = []string{"Empty", "Ongoing", "PrepareCommit", "PrepareAbort", "CompleteCommit", "CompleteAbort", "Dead", "PrepareEpochFence"}

// ParseTxnStates checks --state values (any case, comma-separated or
// repeated) and returns them in the broker's spelling.
func ParseTxnStates(what string, values []string) ([]string, error) {
	var out []string
	for _, v := range values {
		for _, s := range strings.Split(v, ",") {
			s = strings.TrimSpace(s)
			i := slices.IndexFunc(TxnStates, func(n string) bool { return strings.EqualFold(n, s) })
			if i < 0 {
				return nil, usagef("%s: unknown state %q (want one of %s)", what, s, strings.Join(TxnStates, ", "))
			}
			out = append(out, TxnStates[i])
		}
	}
	return out, nil
}

// TxnSummary is one row of txn list.
type TxnSummary struct {
	TransactionalID string `json:"transactional_id"`
	State           string `json:"state"`
	ProducerID      int64  `json:"producer_id"`
	Coordinator     int32  `json:"coordinator"`
}

// TxnList is the result of txn list, sorted by transactional id.
type TxnList []TxnSummary

// Table implements Result.
func (l TxnList) Table() ([]string, [][]string) {
	rows := make([][]string, len(l))
	for i, s := range l {
		rows[i] = []string{s.TransactionalID, s.State, strconv.FormatInt(s.ProducerID, 10), strconv.Itoa(int(s.Coordinator))}
	}
	return []string{"TRANSACTIONAL-ID", "STATE", "PRODUCER-ID", "COORDINATOR"}, rows
}

// ListTransactions lists the transactional ids every broker coordinates;
// only those in one of states when states is not empty, and of one of
// producerIDs when that is not empty.
func (a *Admin) ListTransactions(ctx context.Context, states []string, producerIDs []int64) (TxnList, error) {
	var listed kadm.ListedTransactions
	err := a.retry(ctx, func(ctx context.Context) error {
		var err error
		listed, err = a.adm.ListTransactions(ctx, producerIDs, states)
		return err
	})
	if err != nil && len(listed) == 0 {
		return nil, requestError("txn list", err)
	}
	out := TxnList{}
	for _, l := range listed.Sorted() {
		out = append(out, TxnSummary{TransactionalID: l.TxnID, State: l.State, ProducerID: l.ProducerID, Coordinator: l.Coordinator})
	}
	if err != nil {
		return out, requestError("txn list", err)
	}
	return out, nil
}

// TxnDescription is one transaction of txn describe.
type TxnDescription struct {
	TransactionalID string `json:"transactional_id"`
	State           string `json:"state"`
	ProducerID      int64  `json:"producer_id"`
	ProducerEpoch   int16  `json:"producer_epoch"`
	TimeoutMillis   int32  `json:"timeout_ms"`
	// StartMillis is when the ongoing transaction began (ms since the
	// epoch), -1 when none is.
	StartMillis int64             `json:"start_ms"`
	Coordinator int32             `json:"coordinator"`
	Partitions  []TopicAssignment `json:"partitions"`
	Error       string            `json:"error,omitempty"`
}

// TxnDescriptions is the result of txn describe, sorted by id.
type TxnDescriptions []TxnDescription

// Table implements Result.
func (ds TxnDescriptions) Table() ([]string, [][]string) {
	rows := make([][]string, len(ds))
	now := time.Now()
	for i, d := range ds {
		running := "-"
		if d.StartMillis >= 0 && d.Error == "" {
			running = FormatLagTime(now.Sub(time.UnixMilli(d.StartMillis)))
		}
		var parts []string
		for _, t := range d.Partitions {
			parts = append(parts, t.Topic+":"+joinIDs(t.Partitions))
		}
		state := d.State
		if d.Error != "" {
			state = "error: " + d.Error
		}
		rows[i] = []string{d.TransactionalID, state, strconv.FormatInt(d.ProducerID, 10), strconv.Itoa(int(d.ProducerEpoch)),
			strconv.Itoa(int(d.TimeoutMillis)), running, orDash(strings.Join(parts, " "))}
	}
	return []string{"TRANSACTIONAL-ID", "STATE", "PRODUCER-ID", "EPOCH", "TIMEOUT-MS", "RUNNING", "PARTITIONS"}, rows
}

// DescribeTransactions describes the transactions of ids (every listed
// one when ids is empty), each at its coordinator. An id no coordinator
// knows is a failure; the others are still described.
func (a *Admin) DescribeTransactions(ctx context.Context, ids []string) (TxnDescriptions, error) {
	var described kadm.DescribedTransactions
	err := a.retry(ctx, func(ctx context.Context) error {
		var err error
		described, err = a.adm.DescribeTransactions(ctx, ids...)
		return err
	})
	if err != nil && len(described) == 0 {
		return nil, requestError("txn describe", err)
	}
	out := TxnDescriptions{}
	var failed []string
	for _, d := range described.Sorted() {
		td := TxnDescription{TransactionalID: d.TxnID, State: d.State, ProducerID: d.ProducerID, ProducerEpoch: d.ProducerEpoch,
			TimeoutMillis: d.TimeoutMillis, StartMillis: d.StartTimestamp, Coordinator: d.Coordinator, Partitions: []TopicAssignment{}}
		if d.Err != nil {
			td.Error = errText(d.Err, "")
			failed = append(failed, d.TxnID+": "+td.Error)
		}
		for _, t := range d.Topics.Sorted() {
			td.Partitions = append(td.Partitions, TopicAssignment{Topic: t.Topic, Partitions: t.Partitions})
		}
		out = append(out, td)
	}
	switch {
	case len(failed) > 0:
		return out, client.Failf("txn describe: %d failed: %s", len(failed), strings.Join(failed, "; "))
	case err != nil:
		return out, requestError("txn describe", err)
	}
	return out, nil
}

// TxnAbort is a hung transaction to abort on one partition: the producer
// and epoch of its open transaction there, and the coordinator epoch its
// marker carries.
type TxnAbort struct {
	Topic            string
	Partition        int32
	ProducerID       int64
	ProducerEpoch    int16
	CoordinatorEpoch int32
}

// TxnAborted is the result of txn abort.
type TxnAborted struct {
	Topic         string `json:"topic"`
	Partition     int32  `json:"partition"`
	ProducerID    int64  `json:"producer_id"`
	ProducerEpoch int16  `json:"producer_epoch"`
	Leader        int32  `json:"leader"`
}

// Table implements Result.
func (r TxnAborted) Table() ([]string, [][]string) {
	return []string{"TOPIC", "PARTITION", "PRODUCER-ID", "EPOCH", "LEADER", "RESULT"},
		[][]string{{r.Topic, strconv.Itoa(int(r.Partition)), strconv.FormatInt(r.ProducerID, 10), strconv.Itoa(int(r.ProducerEpoch)),
			strconv.Itoa(int(r.Leader)), "aborted"}}
}

// AbortTransaction ends a hung transaction on one partition as Kafka's
// kafka-transactions.sh abort does: an abort marker written by the
// partition's leader (WriteTxnMarkers from this client), for a
// transaction whose coordinator no longer knows it. The producer's
// other partitions are not touched.
func (a *Admin) AbortTransaction(ctx context.Context, ab TxnAbort) (*TxnAborted, error) {
	var resp kadm.TxnMarkersResponses
	err := a.retry(ctx, func(ctx context.Context) error {
		var err error
		resp, err = a.adm.WriteTxnMarkers(ctx, kadm.TxnMarkers{ProducerID: ab.ProducerID, ProducerEpoch: ab.ProducerEpoch,
			CoordinatorEpoch: ab.CoordinatorEpoch, Topics: kadm.TopicsSet{ab.Topic: {ab.Partition: struct{}{}}}})
		if err != nil {
			return err
		}
		for _, r := range resp {
			for _, t := range r.Topics {
				for _, p := range t.Partitions {
					if p.Err != nil {
						return p.Err
					}
				}
			}
		}
		return nil
	})
	if err != nil {
		return nil, requestError("txn abort", err)
	}
	out := &TxnAborted{Topic: ab.Topic, Partition: ab.Partition, ProducerID: ab.ProducerID, ProducerEpoch: ab.ProducerEpoch, Leader: -1}
	for _, r := range resp {
		for _, t := range r.Topics {
			for _, p := range t.Partitions {
				out.Leader = p.NodeID
			}
		}
	}
	return out, nil
}

// hungTxnGrace is how long past its timeout a transaction may stay open
// before cluster health calls it hung: the coordinator aborts it within
// transaction.abort.timed.out.transaction.cleanup.interval.ms (10 s by
// default) of its timeout.
const hungTxnGrace = time.Minute

// openTransactions describes the transactions not ended: for cluster
// health.
func (a *Admin) openTransactions(ctx context.Context) (TxnDescriptions, error) {
	listed, err := a.adm.ListTransactions(ctx, nil, []string{"Ongoing", "PrepareCommit", "PrepareAbort", "PrepareEpochFence"})
	if err != nil {
		return nil, err
	}
	if len(listed) == 0 {
		return nil, nil
	}
	ids := make([]string, 0, len(listed))
	for id := range listed {
		ids = append(ids, id)
	}
	slices.Sort(ids)
	described, err := a.adm.DescribeTransactions(ctx, ids...)
	if err != nil && len(described) == 0 {
		return nil, err
	}
	var out TxnDescriptions
	for _, d := range described.Sorted() {
		if d.Err != nil {
			continue // ended and gone meanwhile, or moved
		}
		out = append(out, TxnDescription{TransactionalID: d.TxnID, State: d.State, ProducerID: d.ProducerID, ProducerEpoch: d.ProducerEpoch,
			TimeoutMillis: d.TimeoutMillis, StartMillis: d.StartTimestamp, Coordinator: d.Coordinator})
	}
	return out, nil
}

// HungTransactions are the transactions open longer than their timeout
// and a minute, each as cluster health reports it (hung_transaction, its
// Detail the line): for mqtail, which asks at every refresh.
func (a *Admin) HungTransactions(ctx context.Context) ([]HealthProblem, error) {
	txns, err := a.openTransactions(ctx)
	if err != nil {
		return nil, err
	}
	return hungTransactions(txns, a.now(), newProblem), nil
}

// hungTransactions are the problems of open transactions older than their
// timeout and hungTxnGrace at now.
func hungTransactions(txns TxnDescriptions, now time.Time, problem func(string) HealthProblem) []HealthProblem {
	var out []HealthProblem
	for _, d := range txns {
		if d.StartMillis < 0 {
			continue
		}
		running := now.Sub(time.UnixMilli(d.StartMillis))
		timeout := time.Duration(d.TimeoutMillis) * time.Millisecond
		if running <= timeout+hungTxnGrace {
			continue
		}
		p := problem(ProblemHungTransaction)
		p.TransactionalID, p.Broker = d.TransactionalID, d.Coordinator
		p.Detail = fmt.Sprintf("hung transaction %s: %s for %s (timeout %s), producer %d epoch %d, coordinator %d",
			d.TransactionalID, d.State, FormatLagTime(running), timeout, d.ProducerID, d.ProducerEpoch, d.Coordinator)
		out = append(out, p)
	}
	return out
}
