package broker

import (
	"context"
	"errors"
	"regexp"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/mqproject/mq/lib/coordinator"
	"github.com/mqproject/mq/lib/group"
	"github.com/mqproject/mq/lib/server"
	"github.com/mqproject/mq/lib/txn"
)

// This file maps the transaction APIs onto lib/txn's coordinator (state in
// __transaction_state) and TxnOffsetCommit onto lib/group's; the markers
// are sent by lib/txn's MarkerWriter over Config.TxnPeers.

// transactionStateTopic is the internal topic of the transaction
// coordinator.
const transactionStateTopic = coordinator.TransactionStateTopic

// txnCoordinator is the transaction coordinator on this node,
// Config.Coordinators' Txns: the ids of the partitions of
// __transaction_state this node leads.
type txnCoordinator struct {
	c     *txn.Coordinator
	state *coordinator.Topic
}

func (tc *txnCoordinator) syncOwnership() { tc.state.SyncOwnership(tc.c) }

// Transactions returns the transaction coordinator, whose timeout check
// tests run at once.
func (b *Broker) Transactions() *txn.Coordinator { return b.txns.c }

// transactionVersionFeature is the feature of ApiVersions (KIP-1022)
// that tells clients which transaction protocol to speak: at level 2
// KIP-890 part 2's, where a client sends no AddPartitionsToTxn nor
// AddOffsetsToTxn (Produce v12 and TxnOffsetCommit v5 have the
// partition added) and every EndTxn (v5) bumps the producer epoch.
const transactionVersionFeature = "transaction.version"

// maxTransactionVersion is the highest transaction.version served.
const maxTransactionVersion = 2

// transactionVersion is the level of transaction.version this broker
// finalizes: the setting's (lib/config), 2 when unset.
func (b *Broker) transactionVersion() int16 {
	if v := b.cfg.Settings.TransactionVersion; v > 0 && v < maxTransactionVersion {
		return v
	}
	return maxTransactionVersion
}

// txnVersionMax is an API's highest version: v2 under transaction.version
// 2, else v1, the highest that keeps the earlier protocol. Clients pick
// the protocol by the feature, but one that went by the versions alone
// would find none of part 2's.
func (b *Broker) txnVersionMax(v1, v2 int16) int16 {
	if b.transactionVersion() >= 2 {
		return v2
	}
	return v1
}

// txnAPIs lists the transaction APIs.
func (b *Broker) txnAPIs() map[int16]api {
	return map[int16]api{
		kmsg.AddPartitionsToTxn.Int16():   {0, 5, b.handleAddPartitionsToTxn},
		kmsg.AddOffsetsToTxn.Int16():      {0, 4, b.handleAddOffsetsToTxn},
		kmsg.EndTxn.Int16():               {0, b.txnVersionMax(4, 5), b.handleEndTxn},
		kmsg.TxnOffsetCommit.Int16():      {0, b.txnVersionMax(4, 5), b.handleTxnOffsetCommit},
		kmsg.DescribeTransactions.Int16(): {0, 0, b.handleDescribeTransactions},
		kmsg.ListTransactions.Int16():     {0, 2, b.handleListTransactions},
	}
}

// fencedSince is the first version of each API that knows
// PRODUCER_FENCED (KIP-588); older ones get INVALID_PRODUCER_EPOCH.
var fencedSince = map[int16]int16{
	kmsg.InitProducerID.Int16():     4,
	kmsg.AddPartitionsToTxn.Int16(): 2,
	kmsg.AddOffsetsToTxn.Int16():    2,
	kmsg.EndTxn.Int16():             2,
	kmsg.TxnOffsetCommit.Int16():    3,
}

// txnCode is txnError for a request's key and version.
func txnCode(err error, req *server.Request) int16 {
	code := txnError(err)
	if code == kerr.ProducerFenced.Code && req.Version < fencedSince[req.Key] {
		code = kerr.InvalidProducerEpoch.Code
	}
	return code
}

// initTransactional answers an InitProducerId with a transactional id.
func (b *Broker) initTransactional(ctx context.Context, req *server.Request, r *kmsg.InitProducerIDRequest, resp *kmsg.InitProducerIDResponse) server.Reply {
	if *r.TransactionalID == "" {
		resp.ErrorCode = kerr.InvalidRequest.Code
		return reply(resp)
	}
	ir := txn.InitRequest{ID: *r.TransactionalID, Timeout: time.Duration(r.TransactionTimeoutMillis) * time.Millisecond,
		ProducerID: -1, ProducerEpoch: -1}
	if req.Version >= 3 {
		ir.ProducerID, ir.ProducerEpoch = r.ProducerID, r.ProducerEpoch
	}
	return func() server.Response {
		id, epoch, err := b.txns.c.InitProducerID(ctx, ir)
		if err != nil {
			resp.ErrorCode = txnCode(err, req)
			return server.Response{Msg: resp}
		}
		resp.ProducerID, resp.ProducerEpoch = id, epoch
		return server.Response{Msg: resp}
	}
}

// handleAddPartitionsToTxn adds a client's partitions to its transaction
// (v0–v3), or answers partition leaders (v4+): with VerifyOnly whether
// partitions are in a producer's ongoing transaction (KIP-890), else adds
// them for the producer. Partitions of unknown topics fail with
// UNKNOWN_TOPIC_OR_PARTITION, the others of the transaction then with
// OPERATION_NOT_ATTEMPTED, as in Kafka.
func (b *Broker) handleAddPartitionsToTxn(ctx context.Context, c *server.ConnInfo, req *server.Request) server.Reply {
	r := req.Body.(*kmsg.AddPartitionsToTxnRequest)
	resp := r.ResponseKind().(*kmsg.AddPartitionsToTxnResponse)
	if req.Version < 4 {
		return func() server.Response {
			codes := b.addPartitions(ctx, c, req, r.TransactionalID, r.ProducerID, r.ProducerEpoch, false, requestTopics(r.Topics))
			for _, t := range r.Topics {
				rt := kmsg.NewAddPartitionsToTxnResponseTopic()
				rt.Topic = t.Topic
				for _, p := range t.Partitions {
					rp := kmsg.NewAddPartitionsToTxnResponseTopicPartition()
					rp.Partition, rp.ErrorCode = p, codes[txn.TopicPartition{Topic: t.Topic, Partition: p}]
					rt.Partitions = append(rt.Partitions, rp)
				}
				resp.Topics = append(resp.Topics, rt)
			}
			return server.Response{Msg: resp}
		}
	}
	return func() server.Response {
		for _, tr := range r.Transactions {
			var topics []kmsg.AddPartitionsToTxnRequestTopic
			for _, t := range tr.Topics {
				topics = append(topics, kmsg.AddPartitionsToTxnRequestTopic{Topic: t.Topic, Partitions: t.Partitions})
			}
			codes := b.addPartitions(ctx, c, req, tr.TransactionalID, tr.ProducerID, tr.ProducerEpoch, tr.VerifyOnly, requestTopics(topics))
			rtx := kmsg.NewAddPartitionsToTxnResponseTransaction()
			rtx.TransactionalID = tr.TransactionalID
			for _, t := range tr.Topics {
				rt := kmsg.NewAddPartitionsToTxnResponseTransactionTopic()
				rt.Topic = t.Topic
				for _, p := range t.Partitions {
					rp := kmsg.NewAddPartitionsToTxnResponseTransactionTopicPartition()
					rp.Partition, rp.ErrorCode = p, codes[txn.TopicPartition{Topic: t.Topic, Partition: p}]
					rt.Partitions = append(rt.Partitions, rp)
				}
				rtx.Topics = append(rtx.Topics, rt)
			}
			resp.Transactions = append(resp.Transactions, rtx)
		}
		return server.Response{Msg: resp}
	}
}

func requestTopics(topics []kmsg.AddPartitionsToTxnRequestTopic) []txn.TopicPartition {
	var tps []txn.TopicPartition
	for _, t := range topics {
		for _, p := range t.Partitions {
			tps = append(tps, txn.TopicPartition{Topic: t.Topic, Partition: p})
		}
	}
	return tps
}

// addPartitions adds (or verifies) tps in id's transaction and returns
// each partition's code. A client's partitions (v0-v3) must exist and be
// its to write; a broker's (v4+) are its own, which this node's image may
// not hold yet.
func (b *Broker) addPartitions(ctx context.Context, c *server.ConnInfo, req *server.Request, id string, producerID int64, epoch int16, verify bool, tps []txn.TopicPartition) map[txn.TopicPartition]int16 {
	codes := make(map[txn.TopicPartition]int16, len(tps))
	img := b.ctrl.Image()
	failed := false
	for _, tp := range tps {
		if req.Version >= 4 {
			break
		}
		switch {
		case !b.allowed(c, img, topicResource, opWrite, tp.Topic):
			codes[tp], failed = kerr.TopicAuthorizationFailed.Code, true
		case !knownPartition(img, tp.Topic, tp.Partition):
			codes[tp], failed = kerr.UnknownTopicOrPartition.Code, true
		}
	}
	if failed {
		for _, tp := range tps {
			if codes[tp] == 0 {
				codes[tp] = kerr.OperationNotAttempted.Code
			}
		}
		return codes
	}
	if verify {
		errs, err := b.txns.c.Verify(id, producerID, epoch, tps)
		for i, tp := range tps {
			if err == nil {
				err := errs[i]
				codes[tp] = txnCode(err, req)
				continue
			}
			codes[tp] = txnCode(err, req)
		}
		return codes
	}
	code := txnCode(b.txns.c.AddPartitions(ctx, id, producerID, epoch, tps), req)
	for _, tp := range tps {
		codes[tp] = code
	}
	return codes
}

// handleAddOffsetsToTxn adds the group's partition of __consumer_offsets
// to the transaction: its TxnOffsetCommit goes there, and the marker too.
func (b *Broker) handleAddOffsetsToTxn(ctx context.Context, _ *server.ConnInfo, req *server.Request) server.Reply {
	r := req.Body.(*kmsg.AddOffsetsToTxnRequest)
	resp := r.ResponseKind().(*kmsg.AddOffsetsToTxnResponse)
	return func() server.Response {
		if r.Group == "" {
			resp.ErrorCode = kerr.InvalidGroupID.Code
			return server.Response{Msg: resp}
		}
		t, err := b.groups.ensureTopic(ctx)
		if err != nil {
			resp.ErrorCode = txnCode(err, req)
			return server.Response{Msg: resp}
		}
		tp := txn.TopicPartition{Topic: offsetsTopic, Partition: group.PartitionFor(r.Group, int32(len(t.Partitions)))}
		resp.ErrorCode = txnCode(b.txns.c.AddPartitions(ctx, r.TransactionalID, r.ProducerID, r.ProducerEpoch, []txn.TopicPartition{tp}), req)
		return server.Response{Msg: resp}
	}
}

// handleEndTxn ends a transaction: answered once its PrepareCommit or
// PrepareAbort is durable; the markers follow. v5 is transaction.version
// 2: the epoch is bumped and the answer carries it.
func (b *Broker) handleEndTxn(ctx context.Context, _ *server.ConnInfo, req *server.Request) server.Reply {
	r := req.Body.(*kmsg.EndTxnRequest)
	resp := r.ResponseKind().(*kmsg.EndTxnResponse)
	resp.ProducerID, resp.ProducerEpoch = -1, -1
	return func() server.Response {
		id, epoch, err := b.txns.c.EndTxn(ctx, txn.EndRequest{ID: r.TransactionalID, ProducerID: r.ProducerID,
			ProducerEpoch: r.ProducerEpoch, Commit: r.Commit, Version2: req.Version >= 5})
		resp.ErrorCode = txnCode(err, req)
		if err == nil {
			resp.ProducerID, resp.ProducerEpoch = id, epoch
		}
		return server.Response{Msg: resp}
	}
}

// handleTxnOffsetCommit commits offsets in a transaction (lib/group holds
// them until the transaction's marker), once the transaction coordinator
// confirmed that the group's partition of __consumer_offsets is in the
// producer's ongoing transaction, or (v5, transaction.version 2) added it
// (KIP-890; askTxnCoordinator): otherwise every
// partition gets the coordinator's answer (INVALID_TXN_STATE,
// PRODUCER_FENCED…), or COORDINATOR_NOT_AVAILABLE when it could not be
// asked (clients retry). Like OffsetCommit it runs on the reader
// goroutine.
func (b *Broker) handleTxnOffsetCommit(ctx context.Context, _ *server.ConnInfo, req *server.Request) server.Reply {
	r := req.Body.(*kmsg.TxnOffsetCommitRequest)
	resp := r.ResponseKind().(*kmsg.TxnOffsetCommitResponse)
	img := b.ctrl.Image()
	verified := int16(0)
	if offsets := img.Topics[offsetsTopic]; offsets == nil {
		verified = kerr.InvalidTxnState.Code // AddOffsetsToTxn creates it: none came
	} else {
		tp := txn.TopicPartition{Topic: offsetsTopic, Partition: group.PartitionFor(r.Group, int32(len(offsets.Partitions)))}
		// v5 is transaction.version 2: the partition is added here, the
		// client sends no AddOffsetsToTxn.
		codes, err := b.askTxnCoordinator(ctx, r.TransactionalID, r.ProducerID, r.ProducerEpoch, []txn.TopicPartition{tp}, req.Version >= 5)
		switch {
		case err != nil:
			b.log.Debug("verify transaction", "transactional_id", r.TransactionalID, "err", err)
			verified = kerr.CoordinatorNotAvailable.Code
		case codes[tp] == kerr.NotCoordinator.Code || codes[tp] == kerr.CoordinatorLoadInProgress.Code:
			verified = kerr.CoordinatorNotAvailable.Code
		default:
			verified = codes[tp]
		}
		if verified == kerr.ProducerFenced.Code && req.Version < fencedSince[req.Key] {
			verified = kerr.InvalidProducerEpoch.Code
		}
	}
	tr := group.TxnCommitRequest{Group: r.Group, ProducerID: r.ProducerID, ProducerEpoch: r.ProducerEpoch, Generation: -1}
	if req.Version >= 3 {
		tr.MemberID, tr.InstanceID, tr.Generation = r.MemberID, optString(r.InstanceID), r.Generation
	}
	var slots [][]int
	tr.Offsets, slots = commitOffsets(img, r.Topics,
		func(t *kmsg.TxnOffsetCommitRequestTopic) (string, []kmsg.TxnOffsetCommitRequestTopicPartition) {
			return t.Topic, t.Partitions
		},
		func(p *kmsg.TxnOffsetCommitRequestTopicPartition) (int32, int64, int32, *string) {
			return p.Partition, p.Offset, p.LeaderEpoch, p.Metadata
		}, req.Version >= 2)
	var errs []error
	var err error
	if len(tr.Offsets) > 0 && verified == 0 {
		errs, err = b.groups.c.TxnCommitOffsets(ctx, tr)
	}
	for _, t := range r.Topics {
		rt := kmsg.NewTxnOffsetCommitResponseTopic()
		rt.Topic = t.Topic
		for _, p := range t.Partitions {
			rp := kmsg.NewTxnOffsetCommitResponseTopicPartition()
			rp.Partition = p.Partition
			rt.Partitions = append(rt.Partitions, rp)
		}
		resp.Topics = append(resp.Topics, rt)
	}
	for i, t := range slots {
		for j, index := range t {
			rp := &resp.Topics[i].Partitions[j]
			if index >= 0 && verified != 0 {
				rp.ErrorCode = verified
			} else {
				rp.ErrorCode = commitCode(index, errs, err)
			}
		}
	}
	return reply(resp)
}

// handleDescribeTransactions describes the transactions of the ids this
// node coordinates; the others answer NOT_COORDINATOR, and an id the
// principal may not DESCRIBE TRANSACTIONAL_ID_AUTHORIZATION_FAILED, beside
// the others, as Kafka answers.
func (b *Broker) handleDescribeTransactions(_ context.Context, c *server.ConnInfo, req *server.Request) server.Reply {
	r := req.Body.(*kmsg.DescribeTransactionsRequest)
	resp := r.ResponseKind().(*kmsg.DescribeTransactionsResponse)
	img := b.ctrl.Image()
	for _, id := range r.TransactionalIDs {
		st := kmsg.NewDescribeTransactionsResponseTransactionState()
		st.TransactionalID, st.ProducerID, st.ProducerEpoch, st.StartTimestamp = id, -1, -1, -1
		if !b.allowed(c, img, txnResource, opDescribe, id) {
			st.ErrorCode = kerr.TransactionalIDAuthorizationFailed.Code
			resp.TransactionStates = append(resp.TransactionStates, st)
			continue
		}
		d, err := b.txns.c.Describe(id)
		if err != nil {
			st.ErrorCode = txnCode(err, req)
			resp.TransactionStates = append(resp.TransactionStates, st)
			continue
		}
		st.State, st.TimeoutMillis = d.State.String(), int32(d.Timeout.Milliseconds())
		st.ProducerID, st.ProducerEpoch = d.ProducerID, d.ProducerEpoch
		if !d.Start.IsZero() {
			st.StartTimestamp = d.Start.UnixMilli()
		}
		for _, tp := range d.Partitions {
			if n := len(st.Topics); n > 0 && st.Topics[n-1].Topic == tp.Topic {
				st.Topics[n-1].Partitions = append(st.Topics[n-1].Partitions, tp.Partition)
				continue
			}
			t := kmsg.NewDescribeTransactionsResponseTransactionStateTopic()
			t.Topic, t.Partitions = tp.Topic, []int32{tp.Partition}
			st.Topics = append(st.Topics, t)
		}
		resp.TransactionStates = append(resp.TransactionStates, st)
	}
	return reply(resp)
}

// handleListTransactions lists the transactions this node coordinates
// that the principal may describe, with the request's filters.
func (b *Broker) handleListTransactions(_ context.Context, c *server.ConnInfo, req *server.Request) server.Reply {
	r := req.Body.(*kmsg.ListTransactionsRequest)
	resp := r.ResponseKind().(*kmsg.ListTransactionsResponse)
	f := txn.Filter{ProducerIDs: r.ProducerIDFilters}
	for _, s := range r.StateFilters {
		st, ok := txn.ParseState(s)
		if !ok {
			resp.UnknownStateFilters = append(resp.UnknownStateFilters, s)
			continue
		}
		f.States = append(f.States, st)
	}
	if len(r.StateFilters) > 0 && len(f.States) == 0 {
		return reply(resp) // only unknown states: nothing matches
	}
	if req.Version >= 1 && r.DurationFilterMillis > 0 {
		f.MinDuration = time.Duration(r.DurationFilterMillis) * time.Millisecond
	}
	if req.Version >= 2 && r.TransactionalIDPattern != nil && *r.TransactionalIDPattern != "" {
		re, err := regexp.Compile(*r.TransactionalIDPattern)
		if err != nil {
			resp.ErrorCode = kerr.InvalidRegularExpression.Code
			return reply(resp)
		}
		f.Match = re.MatchString
	}
	img := b.ctrl.Image()
	for _, l := range b.txns.c.List(f) {
		if !b.allowed(c, img, txnResource, opDescribe, l.ID) {
			continue
		}
		st := kmsg.NewListTransactionsResponseTransactionState()
		st.TransactionalID, st.ProducerID, st.TransactionState = l.ID, l.ProducerID, l.State.String()
		resp.TransactionStates = append(resp.TransactionStates, st)
	}
	return reply(resp)
}

// txnCoordinatorFor is FindCoordinator's view of the transaction
// coordinator: a transactional id's is the leader of its partition of
// __transaction_state.
func (b *Broker) txnCoordinatorFor() coordinatorKind {
	return coordinatorKind{
		what:      "transactional id",
		topic:     b.txns.state,
		partition: txn.PartitionFor,
		check:     b.txns.c.Check,
		waitLoad:  b.txns.c.WaitLoaded,
		sync:      b.txns.syncOwnership,
		loading:   func(err error) bool { return errors.Is(err, txn.ErrLoadInProgress) },
	}
}

// groupCoordinatorFor is txnCoordinatorFor for groups.
func (b *Broker) groupCoordinatorFor() coordinatorKind {
	return coordinatorKind{
		what:      "group",
		topic:     b.groups.offsets,
		partition: group.PartitionFor,
		check:     b.groups.c.Check,
		waitLoad:  b.groups.c.WaitLoaded,
		sync:      b.groups.syncOwnership,
		loading:   func(err error) bool { return errors.Is(err, group.ErrLoadInProgress) },
	}
}

// coordinatorKind is what FindCoordinator needs of a coordinator on an
// internal topic.
type coordinatorKind struct {
	what      string
	topic     *coordinator.Topic
	partition func(key string, n int32) int32
	check     func(key string) error
	waitLoad  func(key string, done <-chan struct{})
	sync      func()
	loading   func(error) bool
}
