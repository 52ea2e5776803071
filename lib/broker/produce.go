package broker

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/mqproject/mq/lib/auth"
	"github.com/mqproject/mq/lib/clock"
	"github.com/mqproject/mq/lib/config"
	"github.com/mqproject/mq/lib/controller"
	"github.com/mqproject/mq/lib/kafkaext"
	"github.com/mqproject/mq/lib/log"
	"github.com/mqproject/mq/lib/partition"
	"github.com/mqproject/mq/lib/record"
	"github.com/mqproject/mq/lib/replica"
	"github.com/mqproject/mq/lib/server"
)

// produceWait is one partition of an acks=all request waiting for its
// high-water mark.
type produceWait struct {
	p          *partition.Hosted
	lastOffset int64
	epoch      int32 // the leader epoch the batches were appended in
	resp       *kmsg.ProduceResponseTopicPartition
}

// producing is one Produce request being answered. Like fetches they are
// pooled: taken per request, back once the server is done with the
// response, so the produce path's response costs no allocation once the
// pool is warm.
type producing struct {
	resp  kmsg.ProduceResponse
	waits []produceWait

	// For acks=all when the high-water mark is behind.
	ctx     context.Context
	timeout int32
	version int16
	ctrl    *controller.Controller // the image of KIP-951 leader hints
	conn    *server.ConnInfo       // whose listener the hints' endpoints are for
	// began is when the appends began, clock the broker's and latency
	// where the wait from then to the high-water mark passing the last
	// batch is counted (partition.Manager.CommitLatency).
	began   time.Time
	clock   clock.Clock
	latency *replica.LatencyWindow

	reply server.Reply // waitAndRespond, bound once
	done  func()       // release, bound once
}

var producePool sync.Pool

func getProduce() *producing {
	if pr, ok := producePool.Get().(*producing); ok {
		return pr
	}
	pr := new(producing)
	pr.reply = pr.waitAndRespond
	pr.done = pr.release
	return pr
}

// release puts pr back in the pool, holding no partition or context, nor
// the request's frame: its topic names point into the frame (the server
// decodes recycled requests in place), which the server reuses or drops
// now, and a 100 MiB frame kept alive by a pooled name would be memory
// outside queued.max.request.bytes.
func (pr *producing) release() {
	clear(pr.waits)
	pr.waits = pr.waits[:0]
	pr.ctx, pr.ctrl, pr.conn, pr.clock, pr.latency = nil, nil, nil, nil, nil
	topics := pr.resp.Topics[:cap(pr.resp.Topics)]
	for i := range topics {
		topics[i].Topic = ""
	}
	producePool.Put(pr)
}

// waitAndRespond waits until the high-water mark has passed every batch
// (or the request's timeout) and answers.
func (pr *producing) waitAndRespond() server.Response {
	wctx, cancel := waitContext(pr.ctx, pr.timeout)
	defer cancel()
	for _, w := range pr.waits {
		if err := w.p.WaitHighWatermark(wctx, w.lastOffset, w.epoch); err != nil {
			w.resp.ErrorCode = produceError(err, pr.version)
			if pr.version >= 10 && wantsLeaderHint(w.resp.ErrorCode) {
				img := pr.ctrl.Image()
				pr.leaderHint(img, img.Topics[w.p.Topic()], w.resp)
			}
		}
	}
	// A failed wait counts too: a timeout is the slowest answer of all.
	pr.latency.Observe(pr.clock.Now().Sub(pr.began))
	return server.Response{Msg: &pr.resp, Done: pr.done}
}

// leaderHint sets the KIP-951 hint of a partition answered
// NOT_LEADER_OR_FOLLOWER (Produce v10+): its current leader and epoch in
// img, and that leader's endpoint in the response's Brokers.
func (pr *producing) leaderHint(img *controller.Image, t *controller.Topic, sp *kmsg.ProduceResponseTopicPartition) {
	h := currentLeader(t, sp.Partition)
	sp.CurrentLeader.LeaderID, sp.CurrentLeader.LeaderEpoch = h.leader, h.epoch
	if h.leader < 0 || slices.ContainsFunc(pr.resp.Brokers, func(b kmsg.ProduceResponseBroker) bool { return b.NodeID == h.leader }) {
		return
	}
	if br, ok := img.Brokers[h.leader]; ok {
		br = forListener(pr.conn, br)
		pr.resp.Brokers = append(pr.resp.Brokers, kmsg.ProduceResponseBroker{NodeID: br.ID, Host: br.Host, Port: br.Port, Rack: br.Rack})
	}
}

// handleProduce validates and appends on the reader goroutine (so appends
// keep the connection's request order) and, for acks=all, waits for the
// high-water mark in the Reply.
func (b *Broker) handleProduce(ctx context.Context, c *server.ConnInfo, req *server.Request) server.Reply {
	// The batches are written to the log (copied) before Handle returns,
	// and nothing below keeps a byte field of the request.
	req.Recycle()
	r := req.Body.(*kmsg.ProduceRequest)
	pr := getProduce()
	if r.Acks == -1 {
		pr.began = b.clock.Now()
	}
	pr.resp = kmsg.ProduceResponse{Topics: reuse(pr.resp.Topics, len(r.Topics))}
	resp := &pr.resp
	img := b.ctrl.Image()
	failed := false
	for i := range r.Topics {
		rt := &r.Topics[i]
		st := &resp.Topics[i]
		*st = kmsg.ProduceResponseTopic{Topic: rt.Topic, Partitions: resize(st.Partitions, len(rt.Partitions))}
		t := img.Topics[rt.Topic]
		// Each topic needs WRITE (authorize.go), and the others of the
		// request are served beside a refused one, as Kafka does.
		// Internal topics are the coordinators' alone, whatever the ACLs:
		// their writes need CLUSTER_ACTION instead.
		var refused error
		internal := t != nil && t.IsInternal()
		switch {
		case internal && b.coordinatorWrite(c, img, r):
		case !b.allowed(c, img, topicResource, opWrite, rt.Topic):
			refused = errTopicAuthorization
		case internal:
			refused = errInternalTopic
		}
		for j := range rt.Partitions {
			rp := &rt.Partitions[j]
			sp := &st.Partitions[j]
			sp.Default()
			sp.Partition = rp.Partition
			var p *partition.Hosted
			var res log.AppendResult
			var err error
			if refused != nil {
				err = refused
			} else {
				var txn *txnProduce
				if r.TransactionID != nil {
					txn = &txnProduce{ctx: ctx, id: *r.TransactionID, topic: rt.Topic, add: req.Version >= 12}
				}
				p, res, err = b.produceTo(img, t, rp.Partition, rp.Records, r.Acks, txn)
			}
			if err != nil {
				sp.ErrorCode = produceError(err, req.Version)
				sp.BaseOffset = -1
				if req.Version >= 8 {
					msg := err.Error()
					sp.ErrorMessage = &msg
					sp.ErrorRecords = recordErrors(err)
				}
				if req.Version >= 10 && wantsLeaderHint(sp.ErrorCode) {
					pr.leaderHint(img, t, sp)
				}
				failed = true
				b.log.Debug("produce refused", "topic", rt.Topic, "partition", rp.Partition, "err", err)
				continue
			}
			sp.BaseOffset = res.BaseOffset
			sp.LogStartOffset = res.LogStartOffset
			if p.Config().MessageTimestampType == "LogAppendTime" {
				sp.LogAppendTime = res.LogAppendTime
			}
			if r.Acks == -1 {
				pr.waits = append(pr.waits, produceWait{p: p, lastOffset: res.LastOffset, epoch: res.LeaderEpoch, resp: sp})
			}
		}
	}
	if r.Acks == 0 {
		pr.release()
		// No response. On a failure Kafka closes the connection: the only
		// way to tell an acks=0 producer that something went wrong.
		if failed {
			return func() server.Response { return server.Response{CloseAfter: true} }
		}
		return nil
	}
	// On a single node (ISR = {self}) the high-water mark has passed the
	// batches by now: the response is ready, and needs no timeout.
	waiting := false
	for _, w := range pr.waits {
		waiting = waiting || !w.p.Acknowledged(w.lastOffset, w.epoch)
	}
	if !waiting {
		return req.Ready(server.Response{Msg: resp, Done: pr.done})
	}
	pr.ctx, pr.timeout, pr.version, pr.ctrl, pr.conn = ctx, r.TimeoutMillis, req.Version, b.ctrl, c
	pr.clock, pr.latency = b.clock, b.parts.CommitLatency()
	return pr.reply
}

// produceTo validates every batch of one partition's records and, when all
// pass, appends them, recompressed to the topic's codec when it names one
// (compression.type) that a batch does not have. It returns the result of
// the first batch with the last offset of the last one.
// coordinatorWrite reports whether r is a coordinator's write to an
// internal topic whose partition this node leads (lib/coordinator's
// remote write, marked kafkaext.CoordinatorWrite), from a principal
// allowed CLUSTER_ACTION: the one Produce to an internal topic accepted.
func (b *Broker) coordinatorWrite(c *server.ConnInfo, img *controller.Image, r *kmsg.ProduceRequest) bool {
	var w kafkaext.CoordinatorWriter
	if ok, err := kafkaext.Get(&r.UnknownTags, kafkaext.CoordinatorWrite, &w); !ok || err != nil {
		return false
	}
	return b.allowed(c, img, clusterResource, opClusterAction, auth.ClusterName)
}

func (b *Broker) produceTo(img *controller.Image, t *controller.Topic, index int32, records []byte, acks int16, txn *txnProduce) (*partition.Hosted, log.AppendResult, error) {
	var res log.AppendResult
	if acks != 0 && acks != 1 && acks != -1 {
		return nil, res, errInvalidAcks
	}
	if t == nil || index < 0 || int(index) >= len(t.Partitions) {
		return nil, res, partition.ErrUnknownPartition
	}
	p := b.parts.Replica(t, index)
	if p == nil {
		return nil, res, partition.ErrNotHosted
	}
	if len(records) == 0 {
		return nil, res, errEmptyRecords
	}
	cfg := p.Config()
	maxBytes := int(cfg.MaxMessageBytes)
	codec, fixedCodec := storedCodec(cfg)
	recompress := false
	// Validate everything before appending anything: a request is applied
	// to a index whole or not at all.
	for rest := records; len(rest) > 0; {
		batch, next, h, err := record.Next(rest)
		if err != nil {
			return nil, res, err
		}
		if maxBytes > 0 && len(batch) > maxBytes {
			return nil, res, tooLarge(len(batch), maxBytes)
		}
		if _, err := record.Validate(batch); err != nil {
			return nil, res, err
		}
		if h.Control() {
			return nil, res, errControlBatch
		}
		if h.Transactional() {
			if err := b.verifyTxn(p, index, &h, txn); err != nil {
				return nil, res, err
			}
		}
		if compacts(cfg) {
			if err := checkKeys(batch, p); err != nil {
				return nil, res, err
			}
		}
		recompress = recompress || fixedCodec && h.Codec() != codec
		rest = next
	}
	stored := records
	if recompress {
		buf := getStoreBuffer()
		defer putStoreBuffer(buf)
		var err error
		*buf, err = recompressBatches((*buf)[:0], records, codec, maxBytes)
		if err != nil {
			return nil, res, err
		}
		stored = *buf
	}
	res, err := appendBatches(p, stored, acks)
	if err != nil {
		return nil, res, err
	}
	return p, res, nil
}

// txnProduce is what a transactional Produce tells about its
// transaction: the transactional id, and whether the producer speaks
// transaction.version 2 (Produce v12+, KIP-890 part 2), whose partitions
// the leaders add to the transaction themselves.
type txnProduce struct {
	ctx   context.Context
	id    string
	topic string
	add   bool
}

// verifyTxn checks a transactional batch before its append: it needs a
// transactional id, and, with a TxnVerifier, the first batch of a
// producer's transaction on the partition needs the coordinator's word
// that the transaction is ongoing and includes the partition (KIP-890),
// which the log remembers until the producer's next marker. A
// transaction.version 2 producer's first batch has the coordinator add
// the partition, verification enabled or not: nobody else adds it. Later
// batches of the transaction (an open transaction here in the batch's
// epoch) append without asking; a batch in a newer epoch than the open
// transaction's begins the producer's next one, whose coordinator
// answers CONCURRENT_TRANSACTIONS until the open one's marker is here. A
// coordinator that cannot be asked, or is moving, is NOT_ENOUGH_REPLICAS
// (retriable); its refusal INVALID_TXN_STATE, or INVALID_PRODUCER_EPOCH
// for a fenced producer.
func (b *Broker) verifyTxn(p *partition.Hosted, index int32, h *record.Header, txn *txnProduce) error {
	if txn == nil {
		return fmt.Errorf("%w: a transactional batch without a transactional id", errTxnWithoutID)
	}
	verifier := b.txnVerifier
	if verifier == nil && txn.add {
		verifier = coordinatorVerifier{b}
	}
	if verifier == nil || p.Log().OngoingTxn(h.ProducerID, h.ProducerEpoch) {
		return nil
	}
	err := verifier.VerifyTxn(txn.ctx, txn.id, h.ProducerID, h.ProducerEpoch, txn.topic, index, txn.add)
	if err != nil {
		return verifyError(err)
	}
	p.Log().MarkTxnVerified(h.ProducerID, h.ProducerEpoch)
	return nil
}

// verifyError is the error a produce answers for a failed verification.
func verifyError(err error) error {
	var ke *kerr.Error
	if errors.Is(err, errTxnVerification) || !errors.As(err, &ke) {
		return fmt.Errorf("%w: %w", replica.ErrNotEnoughReplicas, err)
	}
	switch ke {
	case kerr.NotCoordinator, kerr.CoordinatorNotAvailable, kerr.CoordinatorLoadInProgress, kerr.ConcurrentTransactions:
		return fmt.Errorf("%w: %w", replica.ErrNotEnoughReplicas, err)
	case kerr.InvalidProducerEpoch, kerr.ProducerFenced:
		return fmt.Errorf("%w: %w", log.ErrInvalidProducerEpoch, err)
	}
	return fmt.Errorf("%w: %w", log.ErrInvalidTxnState, err)
}

// appendBatches appends validated batches to p and returns the result of
// the first with the last offset of the last. Its leader epoch stays the
// first's: should the leadership change between two batches, waiting in
// the first's epoch fails, as it must.
func appendBatches(p *partition.Hosted, batches []byte, acks int16) (log.AppendResult, error) {
	var res log.AppendResult
	first := true
	var bytesIn, messagesIn uint64
	defer func() {
		p.Traffic.BytesIn.Add(bytesIn)
		p.Traffic.MessagesIn.Add(messagesIn)
	}()
	for rest := batches; len(rest) > 0; {
		batch, next, _, _ := record.Next(rest)
		r, err := p.Append(batch, acks)
		if err != nil {
			return res, err
		}
		if !r.Duplicate {
			bytesIn += uint64(len(batch))
			messagesIn += uint64(r.LastOffset - r.BaseOffset + 1)
		}
		if first {
			res = r
			first = false
		}
		res.LastOffset = r.LastOffset
		res.LogStartOffset = r.LogStartOffset
		rest = next
	}
	return res, nil
}

// compacts reports whether a topic's cleanup.policy (compact, delete or
// compact,delete) compacts its log.
func compacts(cfg *config.Topic) bool {
	return cfg.CleanupPolicy != "" && cfg.CleanupPolicy != "delete"
}

// keylessError refuses records without a key in a compacted topic, as
// Kafka does (INVALID_RECORD): the cleaner keeps the latest record per key,
// and a record without one replaces nothing and can never be removed.
// Records are the indexes, within their batch, of the records refused:
// the per-record errors of KIP-467 (Produce v8+).
type keylessError struct {
	partition string
	records   []int32
}

func (e *keylessError) Error() string {
	return fmt.Sprintf("broker: compacted topic partition %s cannot accept a record without a key (%d in the batch)", e.partition, len(e.records))
}

func (e *keylessError) Is(target error) bool { return target == errKeyless }

// recordErrors are the per-record errors of a produce refused with err, nil
// when it refuses no record in particular.
func recordErrors(err error) []kmsg.ProduceResponseTopicPartitionErrorRecord {
	var ke *keylessError
	if !errors.As(err, &ke) {
		return nil
	}
	out := make([]kmsg.ProduceResponseTopicPartitionErrorRecord, len(ke.records))
	for i, r := range ke.records {
		msg := "a compacted topic cannot accept a record without a key"
		out[i] = kmsg.ProduceResponseTopicPartitionErrorRecord{RelativeOffset: r, ErrorMessage: &msg}
	}
	return out
}

// checkKeys refuses a batch for a compacted topic holding a record
// without a key. It decodes the records, decompressing them, which only
// compacted topics pay for; the iterator comes from a pool.
func checkKeys(batch []byte, p *partition.Hosted) error {
	it := iters.Get().(*record.Iter)
	defer iters.Put(it)
	defer it.Close()
	if err := it.Reset(batch, 0); err != nil {
		return err
	}
	var keyless []int32
	for i := int32(0); it.Next(); i++ {
		if it.Record().Key == nil {
			keyless = append(keyless, i)
		}
	}
	if err := it.Err(); err != nil {
		return err
	}
	if keyless != nil {
		return &keylessError{partition: p.String(), records: keyless}
	}
	return nil
}

var iters = sync.Pool{New: func() any { return new(record.Iter) }}

// storedCodec is the codec a topic stores its batches in, and false when
// its compression.type is producer (each batch keeps the producer's).
func storedCodec(cfg *config.Topic) (record.Codec, bool) {
	if cfg.CompressionType == "producer" || cfg.CompressionType == "" {
		return 0, false
	}
	c, err := record.ParseCodec(cfg.CompressionType)
	return c, err == nil // lib/config accepts only codec names and producer
}

// recompressBatches appends to dst each of the validated batches in
// codec, recompressed when it has another (Kafka does the same for a
// topic whose compression.type is a codec), and checks the size limit on
// what is stored, as Kafka does after recompressing.
func recompressBatches(dst, batches []byte, codec record.Codec, maxBytes int) ([]byte, error) {
	for rest := batches; len(rest) > 0; {
		batch, next, h, _ := record.Next(rest)
		rest = next
		if h.Codec() == codec {
			dst = append(dst, batch...)
			continue
		}
		start := len(dst)
		var err error
		if dst, err = record.Recompress(dst, batch, codec, 0); err != nil {
			return dst, fmt.Errorf("recompress %s batch to %s: %w", h.Codec(), codec, err)
		}
		if n := len(dst) - start; maxBytes > 0 && n > maxBytes {
			return dst, fmt.Errorf("%w once recompressed to %s (compression.type)", tooLarge(n, maxBytes), codec)
		}
	}
	return dst, nil
}

// tooLarge is the refusal of a batch of size bytes over max.message.bytes.
func tooLarge(size, maxBytes int) error {
	return fmt.Errorf("%w: a batch of %d bytes (records and the batch's overhead) over max.message.bytes %d",
		errMessageTooLarge, size, maxBytes)
}

// Buffers of recompressed batches, one per produce to a partition that
// recompresses, returned once the batches are appended (the log copies
// them). One grown past maxStoreBuffer by a large batch is left to the
// garbage collector.
var storeBuffers = sync.Pool{New: func() any { return new([]byte) }}

const maxStoreBuffer = 8 << 20

func getStoreBuffer() *[]byte { return storeBuffers.Get().(*[]byte) }

func putStoreBuffer(b *[]byte) {
	if cap(*b) <= maxStoreBuffer {
		storeBuffers.Put(b)
	}
}
