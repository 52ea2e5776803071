package admin

import (
	"context"
	"encoding/base64"
	"errors"
	"fmt"
	"io"
	"maps"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/mqproject/mq/lib/client"
)

// TopicSummary is one row of topic list.
type TopicSummary struct {
	Topic             string `json:"topic"`
	Partitions        int    `json:"partitions"`
	ReplicationFactor int    `json:"replication_factor"`
	Internal          bool   `json:"internal"`
}

// TopicList is the result of topic list, sorted by topic.
type TopicList []TopicSummary

// Table implements Result.
func (l TopicList) Table() ([]string, [][]string) {
	rows := make([][]string, len(l))
	for i, t := range l {
		rows[i] = []string{t.Topic, itoa(t.Partitions), itoa(t.ReplicationFactor)}
	}
	return []string{"TOPIC", "PARTITIONS", "REPLICATION-FACTOR"}, rows
}

// ListTopics lists the topics of the cluster; internal topics
// (__consumer_offsets) only when internal is true.
func (a *Admin) ListTopics(ctx context.Context, internal bool) (TopicList, error) {
	details, err := a.adm.ListTopicsWithInternal(ctx)
	if err != nil {
		return nil, requestError("topic list", err)
	}
	list := TopicList{}
	for _, d := range details.Sorted() {
		if d.IsInternal && !internal {
			continue
		}
		list = append(list, TopicSummary{
			Topic:             d.Topic,
			Partitions:        len(d.Partitions),
			ReplicationFactor: replicationFactor(d),
			Internal:          d.IsInternal,
		})
	}
	return list, nil
}

// replicationFactor is the replica count of a topic's first partition.
func replicationFactor(d kadm.TopicDetail) int {
	if p, ok := d.Partitions[0]; ok {
		return len(p.Replicas)
	}
	for _, p := range d.Partitions {
		return len(p.Replicas)
	}
	return 0
}

// PartitionDescription is one partition in topic describe.
type PartitionDescription struct {
	Partition       int32   `json:"partition"`
	Leader          int32   `json:"leader"` // -1: no leader
	LeaderEpoch     int32   `json:"leader_epoch"`
	Replicas        []int32 `json:"replicas"`
	ISR             []int32 `json:"isr"`
	OfflineReplicas []int32 `json:"offline_replicas"`
	// Adding and Removing are a running move's replicas (partition
	// reassign): those it adds, not in sync yet by design, and those
	// that leave when it completes.
	Adding         []int32 `json:"adding,omitempty"`
	Removing       []int32 `json:"removing,omitempty"`
	LogStartOffset int64   `json:"log_start_offset"` // -1: unknown (see error)
	HighWatermark  int64   `json:"high_watermark"`   // -1: unknown (see error)
	Error          string  `json:"error,omitempty"`
	// StorageErrors are the replicas whose writes fail (a full disk, an
	// I/O error), as their brokers' log directories report them.
	StorageErrors []ReplicaStorageError `json:"storage_errors,omitempty"`
	// Damaged are the damaged ranges of the partition's replicas: offsets
	// those brokers do not serve (see records skip-damaged).
	Damaged []ReplicaDamage `json:"damaged,omitempty"`
	// Cleaner is what the log cleaner has done to each replica, for a
	// compacted topic (cleanup.policy compact).
	Cleaner []ReplicaCleaner `json:"cleaner,omitempty"`
	// Tiered is where a tiered topic's partition is (remote.storage.enable),
	// as its leader reports it: local and remote offsets and bytes.
	Tiered *TieredExtent `json:"tiered,omitempty"`
	// leaderSilent: the leader did not answer (see Error), which for a
	// client is a partition without a leader.
	leaderSilent bool
}

// TopicDescription is one topic in topic describe.
type TopicDescription struct {
	Topic      string                 `json:"topic"`
	ID         string                 `json:"id"`
	Internal   bool                   `json:"internal"`
	Partitions []PartitionDescription `json:"partitions"`
}

// TopicIDString is how every mq tool and mqd's logs write a topic ID, as
// Kafka's own tools do and as mqd writes its cluster id: URL-safe base64
// without padding (22 characters). kadm's TopicID.String is standard base64
// with padding, which is not used.
func TopicIDString(id [16]byte) string { return base64.RawURLEncoding.EncodeToString(id[:]) }

// TopicDescriptions is the result of topic describe, sorted by topic.
type TopicDescriptions []TopicDescription

// Table implements Result: one row per partition. When some partition's
// writes fail, a WRITES column says which replicas fail and why; when some
// partition has damaged ranges, a DAMAGED column lists them; for a
// compacted topic a CLEANER column says what the cleaner did on the
// leader's replica; when some partition could not be fully described (no
// leader, a leader that does not answer), an ERROR column says why.
func (ds TopicDescriptions) Table() ([]string, [][]string) {
	failing, damaged, cleaned, errs, moving, tiered := false, false, false, false, false, false
	for _, d := range ds {
		for _, p := range d.Partitions {
			tiered = tiered || p.Tiered != nil
			moving = moving || len(p.Adding)+len(p.Removing) > 0
			errs = errs || p.Error != ""
			failing = failing || len(p.StorageErrors) > 0
			damaged = damaged || len(p.Damaged) > 0
			cleaned = cleaned || len(p.Cleaner) > 0
		}
	}
	var rows [][]string
	for _, d := range ds {
		for _, p := range d.Partitions {
			row := []string{
				d.Topic, itoa(p.Partition), leader(p.Leader), joinIDs(p.Replicas), joinIDs(p.ISR),
				joinIDs(p.OfflineReplicas), offset(p.LogStartOffset), offset(p.HighWatermark),
			}
			if moving {
				row = append(row, moveState(p))
			}
			if tiered {
				row = append(row, localExtent(p.Tiered), remoteExtent(p.Tiered))
			}
			if failing {
				row = append(row, writesState(p.StorageErrors))
			}
			if damaged {
				row = append(row, damageState(p.Damaged))
			}
			if cleaned {
				row = append(row, cleanerState(p))
			}
			if errs {
				row = append(row, orDash(p.Error))
			}
			rows = append(rows, row)
		}
	}
	header := []string{"TOPIC", "PARTITION", "LEADER", "REPLICAS", "ISR", "OFFLINE", "LOG-START", "HIGH-WATERMARK"}
	if moving {
		header = append(header, "MOVING")
	}
	if tiered {
		header = append(header, "LOCAL", "REMOTE")
	}
	if failing {
		header = append(header, "WRITES")
	}
	if damaged {
		header = append(header, "DAMAGED")
	}
	if cleaned {
		header = append(header, "CLEANER")
	}
	if errs {
		header = append(header, "ERROR")
	}
	return header, rows
}

// UnderReplicated reports whether the partition's ISR is smaller than
// its replica set, the replicas a running move adds not counted
// (KIP-352).
func (p PartitionDescription) UnderReplicated() bool {
	return underReplicated(p.Replicas, p.ISR, p.Adding)
}

// moveState is a partition's MOVING cell: "-", or "+4 -1" for a move
// adding broker 4 and removing broker 1.
func moveState(p PartitionDescription) string {
	if len(p.Adding)+len(p.Removing) == 0 {
		return "-"
	}
	var parts []string
	for _, r := range p.Adding {
		parts = append(parts, "+"+itoa(r))
	}
	for _, r := range p.Removing {
		parts = append(parts, "-"+itoa(r))
	}
	return strings.Join(parts, " ")
}

// cleanerState is a partition's CLEANER cell, of its leader's replica (else
// the first that reported): "-" for a topic not compacted, else "dirty
// 12%, 3 passes, 1.2MiB freed, last 2026-12-01T18:20:00Z".
func cleanerState(p PartitionDescription) string {
	if len(p.Cleaner) == 0 {
		return "-"
	}
	c := p.Cleaner[0]
	for _, r := range p.Cleaner {
		if r.Broker == p.Leader {
			c = r
		}
	}
	s := fmt.Sprintf("dirty %.0f%%, %d passes, %s freed", c.DirtyRatio*100, c.Passes, sizeText(c.BytesReclaimed))
	if c.LastCleanedMillis > 0 {
		s += ", last " + time.UnixMilli(c.LastCleanedMillis).UTC().Format(time.RFC3339)
	}
	return s
}

// damageState is a partition's DAMAGED cell: "-", or "offsets 1020-1039
// on 1, skipped 7-9 on 1".
func damageState(ds []ReplicaDamage) string {
	if len(ds) == 0 {
		return "-"
	}
	parts := make([]string, len(ds))
	for i, d := range ds {
		what := "offsets"
		if d.Skipped {
			what = "skipped"
		}
		parts[i] = fmt.Sprintf("%s %d-%d on %d", what, d.FromOffset, d.ToOffset-1, d.Broker)
	}
	return strings.Join(parts, ", ")
}

// writesState is a partition's WRITES cell: "ok", or "failing on 1 (no
// space left on device), on 3 (...)".
func writesState(errs []ReplicaStorageError) string {
	if len(errs) == 0 {
		return "ok"
	}
	parts := make([]string, len(errs))
	for i, e := range errs {
		parts[i] = "on " + itoa(e.Broker) + " (" + errorCause(e.Error) + ")"
	}
	return "failing " + strings.Join(parts, ", ")
}

// errorCause is the last part of a wrapped error's text, which names the
// cause: "log: append at offset 7: write /d/t-0/0.log: no space left on
// device" gives "no space left on device".
func errorCause(s string) string {
	if i := strings.LastIndex(s, ": "); i >= 0 && i+2 < len(s) {
		return s[i+2:]
	}
	return s
}

func leader(id int32) string {
	if id < 0 {
		return "none"
	}
	return itoa(id)
}

func offset(o int64) string {
	if o < 0 {
		return "?"
	}
	return itoa(o)
}

// PartitionFilter selects the partitions topic describe shows; the zero
// value selects every partition.
type PartitionFilter struct {
	// UnderReplicated: partitions whose ISR is smaller than their
	// replica set, the replicas a running move adds not counted
	// (--under-replicated).
	UnderReplicated bool
	// Unavailable: partitions without a leader, or whose leader does not
	// answer (--unavailable).
	Unavailable bool
}

// keeps reports whether the filter selects p: with both set, a
// partition either one selects.
func (f PartitionFilter) keeps(p PartitionDescription) bool {
	if !f.UnderReplicated && !f.Unavailable {
		return true
	}
	return f.UnderReplicated && p.UnderReplicated() || f.Unavailable && (p.Leader < 0 || p.leaderSilent)
}

// filter keeps the partitions f selects, and the topics left with one.
func (ds TopicDescriptions) filter(f PartitionFilter) TopicDescriptions {
	out := TopicDescriptions{}
	for _, d := range ds {
		d.Partitions = slices.DeleteFunc(d.Partitions, func(p PartitionDescription) bool { return !f.keeps(p) })
		if len(d.Partitions) > 0 {
			out = append(out, d)
		}
	}
	return out
}

// DescribeTopics describes the named topics, or every topic but the
// internal ones when none is named: each partition with its leader,
// replicas, in-sync replicas, offline replicas, log start offset and
// high-water mark, keeping only the partitions f selects. Unknown topics
// are failures; the others are still described.
func (a *Admin) DescribeTopics(ctx context.Context, topics []string, f PartitionFilter) (TopicDescriptions, error) {
	details, offsets, err := a.describeOffsets(ctx, topics, false)
	if err != nil {
		return nil, requestError("topic describe", err)
	}
	var failed []string
	var known []string
	for _, t := range topics {
		d, ok := details[t]
		switch {
		case !ok:
			failed = append(failed, fmt.Sprintf("unknown topic %q", t))
		case errors.Is(d.Err, kerr.UnknownTopicOrPartition):
			failed = append(failed, fmt.Sprintf("unknown topic %q", t))
		case d.Err != nil:
			failed = append(failed, fmt.Sprintf("%s: %s", t, errText(d.Err, "")))
		}
	}
	for name, d := range details {
		if d.Err == nil {
			known = append(known, name)
		}
	}
	out := TopicDescriptions{}
	if len(known) > 0 {
		parts := map[string][]int32{}
		var replicas []int32
		for _, name := range known {
			for _, p := range details[name].Partitions.Sorted() {
				parts[name] = append(parts[name], p.Partition)
				for _, r := range p.Replicas {
					if !slices.Contains(replicas, r) {
						replicas = append(replicas, r)
					}
				}
			}
		}
		slices.Sort(replicas)
		dirs := a.describeLogDirs(ctx, replicas, parts)
		set := kadm.TopicsSet{}
		for name, ps := range parts {
			set.Add(name, ps...)
		}
		moving := a.moving(ctx, set)
		slices.Sort(known)
		for _, name := range known {
			td := describe(details[name], offsets, dirs.failing[name])
			for i := range td.Partitions {
				pd := &td.Partitions[i]
				pd.Damaged = dirs.damaged[name][pd.Partition]
				pd.Cleaner = dirs.cleaner[name][pd.Partition]
				if e, ok := dirs.tiered[name][pd.Partition][pd.Leader]; ok {
					pd.Tiered = &e
				}
				m := moving[tp{name, pd.Partition}]
				pd.Adding, pd.Removing = m.AddingReplicas, m.RemovingReplicas
			}
			out = append(out, td)
		}
	}
	return out.filter(f), failures("topic describe", failed)
}

func describe(d kadm.TopicDetail, offsets map[tp]leaderOffsets, failing map[int32][]ReplicaStorageError) TopicDescription {
	td := TopicDescription{Topic: d.Topic, Internal: d.IsInternal, Partitions: []PartitionDescription{}}
	if d.ID != (kadm.TopicID{}) {
		td.ID = TopicIDString(d.ID)
	}
	for _, p := range d.Partitions.Sorted() {
		pd := PartitionDescription{
			Partition:       p.Partition,
			Leader:          p.Leader,
			LeaderEpoch:     p.LeaderEpoch,
			Replicas:        nonNil(p.Replicas),
			ISR:             nonNil(p.ISR),
			OfflineReplicas: nonNil(p.OfflineReplicas),
			LogStartOffset:  -1,
			HighWatermark:   -1,
		}
		var errs []string
		if p.Err != nil {
			errs = append(errs, errText(p.Err, ""))
		}
		if o, ok := offsets[tp{d.Topic, p.Partition}]; ok {
			pd.LogStartOffset, pd.HighWatermark, pd.leaderSilent = o.start, o.end, o.silent
			if o.err != "" {
				errs = append(errs, o.err)
			}
		}
		pd.Error = strings.Join(errs, "; ")
		pd.StorageErrors = failing[p.Partition]
		td.Partitions = append(td.Partitions, pd)
	}
	return td
}

// leaderOffsets are one partition's log start offset and high-water mark
// as its leader gave them (-1: unknown), and why one is unknown.
type leaderOffsets struct {
	start, end int64
	err        string
	silent     bool // the leader did not answer
	// retriable is the first retriable error code the leader answered
	// for this partition (LEADER_NOT_AVAILABLE while it opens the
	// partition, NOT_LEADER_OR_FOLLOWER after a move): worth asking again.
	retriable error
}

// offsetsWait bounds how long topic describe waits for a leader's
// offsets: a leader that is stopped or cut off accepts the connection and
// never answers.
const offsetsWait = 5 * time.Second

// describeOffsets describes topics (every topic but the internal ones
// when none is named) and asks their partitions' leaders for offsets
// (leaderOffsets), and with Retrying does both again while a live broker
// gives a partition a retriable answer: a leader that is opening the
// partition (a restarted mqd) or that no longer leads it. A partition
// with no leader at all is asked about again only when needLeader: a
// describe shows that state at once, as it is, while a command that needs
// the partition's offsets (reset-offsets) waits for a leader. A leader
// that does not answer is not asked again: its partitions say it was
// unreachable. What is still unsettled when the wait ends is described
// with its last error; the error returned is only that of a request that
// failed as a whole.
func (a *Admin) describeOffsets(ctx context.Context, topics []string, needLeader bool) (kadm.TopicDetails, map[tp]leaderOffsets, error) {
	var details kadm.TopicDetails
	var offsets map[tp]leaderOffsets
	var listErr error
	silent := map[int32]string{}
	a.retry(ctx, func(ctx context.Context) error {
		if details, listErr = a.adm.ListTopics(ctx, topics...); listErr != nil {
			return listErr
		}
		var known []string
		for name, d := range details {
			if d.Err == nil {
				known = append(known, name)
			}
		}
		offsets = a.leaderOffsets(ctx, details, known, silent)
		return unsettled(details, offsets, needLeader)
	})
	return details, offsets, listErr
}

// unsettled is the retriable answer of the first partition, by topic and
// number, worth asking about again (describeOffsets), or nil.
func unsettled(details kadm.TopicDetails, offsets map[tp]leaderOffsets, needLeader bool) error {
	for _, name := range slices.Sorted(maps.Keys(details)) {
		d := details[name]
		if d.Err != nil {
			if client.Retriable(d.Err) {
				return fmt.Errorf("topic %s: %w", name, d.Err)
			}
			continue
		}
		for _, p := range d.Partitions.Sorted() {
			if p.Err != nil && client.Retriable(p.Err) && (p.Leader >= 0 || needLeader) {
				return fmt.Errorf("topic %s partition %d: %w", name, p.Partition, p.Err)
			}
			if o := offsets[tp{name, p.Partition}]; o.retriable != nil {
				return fmt.Errorf("topic %s partition %d: leader %d: %w", name, p.Partition, p.Leader, o.retriable)
			}
		}
	}
	return nil
}

// leaderOffsets asks each leader of the topics' partitions for their log
// start offsets and high-water marks, one ListOffsets request per leader
// and kind, sent to that broker and not retried. A leader that does not
// answer leaves its partitions' offsets unknown ("leader 3 unreachable:
// connection refused") and fails nothing else: during an incident (a node
// killed and not yet fenced, or a quorum lost so that leaders cannot
// move) the partitions of the live leaders are still described. It is
// noted in silent, and a leader already there is not asked again.
// Partitions without a leader are not asked about.
func (a *Admin) leaderOffsets(ctx context.Context, details kadm.TopicDetails, topics []string, silent map[int32]string) map[tp]leaderOffsets {
	ctx, wait, cancel := boundedWait(ctx, offsetsWait)
	defer cancel()
	out := map[tp]leaderOffsets{}
	byLeader := map[int32][]tp{}
	for _, name := range topics {
		for _, p := range details[name].Partitions.Sorted() {
			if p.Leader < 0 || p.Err != nil {
				continue
			}
			t := tp{name, p.Partition}
			if why, ok := silent[p.Leader]; ok {
				out[t] = leaderOffsets{start: -1, end: -1, err: why, silent: true}
				continue
			}
			byLeader[p.Leader] = append(byLeader[p.Leader], t)
			out[t] = leaderOffsets{start: -1, end: -1}
		}
	}
	var mu sync.Mutex
	var wg sync.WaitGroup
	for leader, parts := range byLeader {
		for _, kind := range []int64{-2, -1} { // earliest: the log start offset; latest: the high-water mark
			wg.Add(1)
			go func() {
				defer wg.Done()
				req := kmsg.NewPtrListOffsetsRequest()
				for _, t := range parts {
					if len(req.Topics) == 0 || req.Topics[len(req.Topics)-1].Topic != t.topic {
						rt := kmsg.NewListOffsetsRequestTopic()
						rt.Topic = t.topic
						req.Topics = append(req.Topics, rt)
					}
					rp := kmsg.NewListOffsetsRequestTopicPartition()
					rp.Partition, rp.Timestamp = t.partition, kind
					rt := &req.Topics[len(req.Topics)-1]
					rt.Partitions = append(rt.Partitions, rp)
				}
				kresp, err := a.cl.Broker(int(leader)).Request(ctx, req)
				mu.Lock()
				defer mu.Unlock()
				set := func(t tp, offset int64, why string) {
					o := out[t]
					if why != "" {
						if o.err == "" {
							o.err = why
						} else if o.err != why {
							o.err += "; " + why
						}
					} else if kind == -2 {
						o.start = offset
					} else {
						o.end = offset
					}
					out[t] = o
				}
				if err != nil {
					why := fmt.Sprintf("leader %d: %s", leader, brokerErrText(err, wait))
					if client.IsUnreachable(err) {
						why = fmt.Sprintf("leader %d %s", leader, brokerErrText(err, wait))
					}
					silent[leader] = why
					for _, t := range parts {
						set(t, -1, why)
						o := out[t]
						o.silent = true
						out[t] = o
					}
					return
				}
				what := map[int64]string{-2: "log start offset", -1: "high-water mark"}[kind]
				answered := map[tp]bool{}
				for _, rt := range kresp.(*kmsg.ListOffsetsResponse).Topics {
					for _, rp := range rt.Partitions {
						t := tp{rt.Topic, rp.Partition}
						if _, asked := out[t]; !asked {
							continue
						}
						answered[t] = true
						if err := kerr.ErrorForCode(rp.ErrorCode); err != nil {
							set(t, -1, what+": "+errText(err, ""))
							if o := out[t]; o.retriable == nil && client.Retriable(err) {
								o.retriable = err
								out[t] = o
							}
							continue
						}
						set(t, rp.Offset, "")
					}
				}
				for _, t := range parts {
					if !answered[t] {
						set(t, -1, fmt.Sprintf("%s: no answer for this partition from leader %d", what, leader))
					}
				}
			}()
		}
	}
	wg.Wait()
	return out
}

// TopicResult is the outcome for one topic of topic create, alter or
// delete.
type TopicResult struct {
	Topic  string `json:"topic"`
	Result string `json:"result"` // created, exists, altered, planned (alter --dry-run), deleted, missing, failed
	// Partitions and ReplicationFactor: what topic create made, and the
	// partition count topic alter set; absent otherwise.
	Partitions        int32             `json:"partitions,omitempty"`
	ReplicationFactor int16             `json:"replication_factor,omitempty"`
	Set               map[string]string `json:"set,omitempty"`     // configs set (create, alter)
	Deleted           []string          `json:"deleted,omitempty"` // configs deleted (alter)
	// KeySample: what topic alter --sample-keys found about the keys
	// that adding partitions moves.
	KeySample *KeySample `json:"key_sample,omitempty"`
	Error     string     `json:"error,omitempty"`
}

// TopicResults is the result of topic create, alter and delete, in the
// order the topics were given.
type TopicResults []TopicResult

// Table implements Result.
func (rs TopicResults) Table() ([]string, [][]string) {
	rows := make([][]string, len(rs))
	for i, r := range rs {
		var detail []string
		if r.Partitions > 0 {
			detail = append(detail, fmt.Sprintf("partitions=%d", r.Partitions))
		}
		if r.ReplicationFactor > 0 {
			detail = append(detail, fmt.Sprintf("replication-factor=%d", r.ReplicationFactor))
		}
		for _, k := range sortedKeys(r.Set) {
			detail = append(detail, k+"="+r.Set[k])
		}
		for _, k := range r.Deleted {
			detail = append(detail, "-"+k)
		}
		rows[i] = []string{r.Topic, r.Result, orDash(strings.Join(detail, " "))}
	}
	return []string{"TOPIC", "RESULT", "DETAIL"}, rows
}

// CreateTopics is what topic create asks for.
type CreateTopics struct {
	Topics            []string
	Partitions        int32 // -1: the broker's num.partitions
	ReplicationFactor int16 // -1: the broker's default.replication.factor
	Configs           map[string]string
	IfNotExists       bool // a topic that exists already is not a failure
}

// CreateTopics creates topics.
func (a *Admin) CreateTopics(ctx context.Context, req CreateTopics) (TopicResults, error) {
	if err := CheckTopicNames("topic create", req.Topics); err != nil {
		return nil, err
	}
	var configs map[string]*string
	if len(req.Configs) > 0 {
		configs = make(map[string]*string, len(req.Configs))
		for k, v := range req.Configs {
			configs[k] = &v
		}
	}
	resps, err := a.adm.CreateTopics(ctx, req.Partitions, req.ReplicationFactor, configs, req.Topics...)
	if err != nil {
		return nil, requestError("topic create", err)
	}
	var out TopicResults
	var failed []string
	for _, t := range req.Topics {
		r, ok := resps[t]
		res := TopicResult{Topic: t}
		switch {
		case !ok:
			res.Result, res.Error = ResultFailed, "no answer for this topic"
		case r.Err == nil:
			res.Result = ResultCreated
			res.Partitions, res.ReplicationFactor = r.NumPartitions, r.ReplicationFactor
			if len(req.Configs) > 0 {
				res.Set = req.Configs
			}
		case req.IfNotExists && errors.Is(r.Err, kerr.TopicAlreadyExists):
			res.Result = ResultExists
		default:
			res.Result, res.Error = ResultFailed, errText(r.Err, r.ErrMessage)
		}
		if res.Result == ResultFailed {
			failed = append(failed, t+": "+res.Error)
		}
		out = append(out, res)
	}
	return out, failures("topic create", failed)
}

// DeleteTopics deletes topics and their data. With ifExists a topic that
// does not exist is reported as missing, not as a failure.
func (a *Admin) DeleteTopics(ctx context.Context, topics []string, ifExists bool) (TopicResults, error) {
	if err := CheckTopicNames("topic delete", topics); err != nil {
		return nil, err
	}
	resps, err := a.adm.DeleteTopics(ctx, topics...)
	if err != nil {
		return nil, requestError("topic delete", err)
	}
	var out TopicResults
	var failed []string
	for _, t := range topics {
		r, ok := resps[t]
		res := TopicResult{Topic: t}
		switch {
		case !ok:
			res.Result, res.Error = ResultFailed, "no answer for this topic"
		case r.Err == nil:
			res.Result = ResultDeleted
		case ifExists && errors.Is(r.Err, kerr.UnknownTopicOrPartition):
			res.Result = ResultMissing
		case errors.Is(r.Err, kerr.UnknownTopicOrPartition):
			res.Result, res.Error = ResultFailed, "unknown topic"
		default:
			res.Result, res.Error = ResultFailed, errText(r.Err, r.ErrMessage)
		}
		if res.Result == ResultFailed {
			failed = append(failed, t+": "+res.Error)
		}
		out = append(out, res)
	}
	return out, failures("topic delete", failed)
}

// AlterTopics is what topic alter asks for.
type AlterTopics struct {
	Topics     []string
	Partitions int               // new total partition count; 0: unchanged
	Set        map[string]string // configs to set
	Delete     []string          // configs to delete (back to the default)
	IfExists   bool              // a topic that does not exist is not a failure

	// Adding partitions is a one-way door: keyed records map to other
	// partitions afterwards. When some topic would grow, AlterTopics
	// warns on Warn first, and goes on only with Execute, or when Ask
	// (which puts the question to a person) says yes; with neither it
	// refuses (a usage error) before reading anything. DryRun has the
	// broker validate every change and makes none. A topic that would
	// not grow is sent to the broker as it is, which refuses it.
	Execute bool
	DryRun  bool
	Ask     func(ctx context.Context, question string) (bool, error)
	Warn    io.Writer
	// SampleKeys, when > 0, reads up to that many distinct keys from the
	// recent records of each topic that grows and says how many would
	// map to a different partition (KeySample).
	SampleKeys int
}

// Check refuses an alteration that cannot be right (a usage error).
func (req AlterTopics) Check() error {
	if err := CheckTopicNames("topic alter", req.Topics); err != nil {
		return err
	}
	if req.Partitions < 0 {
		return usagef("topic alter: --partitions must be positive")
	}
	if req.Partitions == 0 && len(req.Set) == 0 && len(req.Delete) == 0 {
		return usagef("topic alter: nothing to change (give --partitions, --config or --delete-config)")
	}
	for _, k := range req.Delete {
		if _, both := req.Set[k]; both {
			return usagef("topic alter: config %s both set and deleted", k)
		}
	}
	if req.Execute && req.DryRun {
		return usagef("topic alter: --execute and --dry-run exclude each other")
	}
	if req.SampleKeys < 0 {
		return usagef("topic alter: --sample-keys must be positive")
	}
	if req.SampleKeys > 0 && req.Partitions == 0 {
		return usagef("topic alter: --sample-keys goes with --partitions")
	}
	return nil
}

// AlterTopics adds partitions to topics and changes their configs
// (incrementally: configs not named keep their values). Partitions are
// added first; a topic whose partitions cannot be added keeps its configs.
// Before adding partitions it warns, samples keys and asks, as
// AlterTopics (the request) says; with DryRun each topic's result is
// "planned" when the broker found the changes valid.
func (a *Admin) AlterTopics(ctx context.Context, req AlterTopics) (TopicResults, error) {
	if err := req.Check(); err != nil {
		return nil, err
	}
	results := make(map[string]*TopicResult, len(req.Topics))
	pending := slices.Clone(req.Topics) // topics still to alter
	fail := func(t, msg string) {
		results[t].Result, results[t].Error = ResultFailed, msg
		pending = slices.DeleteFunc(pending, func(p string) bool { return p == t })
	}
	for _, t := range req.Topics {
		results[t] = &TopicResult{Topic: t, Result: ResultAltered}
	}
	// Unknown topics are found first, so that --if-exists can skip them
	// and the others get one clear message.
	details, err := a.adm.ListTopics(ctx, req.Topics...)
	if err != nil {
		return nil, requestError("topic alter", err)
	}
	for _, t := range req.Topics {
		if d, ok := details[t]; !ok || errors.Is(d.Err, kerr.UnknownTopicOrPartition) {
			if req.IfExists {
				results[t].Result = ResultMissing
				pending = slices.DeleteFunc(pending, func(p string) bool { return p == t })
			} else {
				fail(t, "unknown topic")
			}
		}
	}
	grows, err := a.confirmGrowth(ctx, req, details, pending)
	if err != nil {
		return nil, err
	}
	for _, g := range grows {
		results[g.topic].KeySample = g.sample
	}
	updatePartitions, alterConfigs := a.adm.UpdatePartitions, a.adm.AlterTopicConfigs
	if req.DryRun {
		updatePartitions, alterConfigs = a.adm.ValidateUpdatePartitions, a.adm.ValidateAlterTopicConfigs
		for _, t := range pending {
			results[t].Result = ResultPlanned
		}
	}
	if req.Partitions > 0 && len(pending) > 0 {
		resps, err := updatePartitions(ctx, req.Partitions, pending...)
		if err != nil {
			return nil, requestError("topic alter", err)
		}
		for _, t := range slices.Clone(pending) {
			r, ok := resps[t]
			switch {
			case !ok:
				fail(t, "no answer for this topic")
			case r.Err != nil:
				fail(t, errText(r.Err, r.ErrMessage))
			default:
				results[t].Partitions = int32(req.Partitions)
			}
		}
	}
	if (len(req.Set) > 0 || len(req.Delete) > 0) && len(pending) > 0 {
		resps, err := alterConfigs(ctx, alterOps(req.Set, req.Delete), pending...)
		if err != nil {
			return nil, requestError("topic alter", err)
		}
		answered := map[string]bool{}
		for _, r := range resps {
			answered[r.Name] = true
			if r.Err != nil {
				fail(r.Name, errText(r.Err, r.ErrMessage))
				continue
			}
			if len(req.Set) > 0 {
				results[r.Name].Set = req.Set
			}
			if len(req.Delete) > 0 {
				results[r.Name].Deleted = slices.Sorted(slices.Values(req.Delete))
			}
		}
		for _, t := range slices.Clone(pending) {
			if !answered[t] {
				fail(t, "no answer for this topic")
			}
		}
	}
	var out TopicResults
	var failed []string
	for _, t := range req.Topics {
		r := results[t]
		if r.Result == ResultFailed {
			failed = append(failed, t+": "+r.Error)
		}
		out = append(out, *r)
	}
	return out, failures("topic alter", failed)
}

// confirmGrowth finds the topics of pending that req.Partitions grows
// (details holds their descriptions) and, when there are any, warns,
// samples their keys and asks as req says. It returns the topics that
// grow, or the refusal: a usage error when there is nobody to ask and no
// Execute or DryRun, a failure when the person asked says no.
func (a *Admin) confirmGrowth(ctx context.Context, req AlterTopics, details kadm.TopicDetails, pending []string) ([]growth, error) {
	if req.Partitions <= 0 {
		return nil, nil
	}
	var grows []growth
	for _, t := range pending {
		d := details[t]
		if d.Err != nil || len(d.Partitions) == 0 || len(d.Partitions) >= req.Partitions {
			continue // the broker says why
		}
		grows = append(grows, growth{topic: t, from: len(d.Partitions), to: req.Partitions})
	}
	if len(grows) == 0 {
		return nil, nil
	}
	names := make([]string, len(grows))
	for i, g := range grows {
		names[i] = g.topic
	}
	if !req.Execute && !req.DryRun && req.Ask == nil {
		return nil, usagef("topic alter: adding partitions to %s maps keyed records to other partitions: give --execute to add them, or --dry-run to see the warning (and --sample-keys how many keys move)", strings.Join(names, ", "))
	}
	if req.SampleKeys > 0 {
		for i, g := range grows {
			s, err := a.sampleKeys(ctx, g.topic, g.from, g.to, req.SampleKeys)
			if err != nil {
				return nil, err
			}
			grows[i].sample = &s
		}
	}
	warnGrowth(req.Warn, grows)
	if req.Execute || req.DryRun {
		return grows, nil
	}
	ok, err := req.Ask(ctx, fmt.Sprintf("grow %s to %d partitions?", strings.Join(names, ", "), req.Partitions))
	if err != nil {
		return nil, err
	}
	if !ok {
		return nil, client.Failf("topic alter: not confirmed: nothing changed")
	}
	return grows, nil
}

// alterOps are the incremental config changes: SET for set, DELETE for
// deleted, in name order.
func alterOps(set map[string]string, deleted []string) []kadm.AlterConfig {
	var ops []kadm.AlterConfig
	for _, k := range sortedKeys(set) {
		v := set[k]
		ops = append(ops, kadm.AlterConfig{Op: kadm.SetConfig, Name: k, Value: &v})
	}
	for _, k := range slices.Sorted(slices.Values(deleted)) {
		ops = append(ops, kadm.AlterConfig{Op: kadm.DeleteConfig, Name: k})
	}
	return ops
}

func sortedKeys(m map[string]string) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	return keys
}

// localExtent and remoteExtent show a tiered partition's parts:
// "START-END BYTES" (END exclusive), "-" for an empty part or a
// partition that is not tiered.
func localExtent(e *TieredExtent) string {
	if e == nil || e.LocalStartOffset < 0 || e.LocalEndOffset <= e.LocalStartOffset {
		return "-"
	}
	return fmt.Sprintf("%d-%d %dB", e.LocalStartOffset, e.LocalEndOffset, e.LocalBytes)
}

func remoteExtent(e *TieredExtent) string {
	if e == nil || e.RemoteStartOffset < 0 {
		return "-"
	}
	return fmt.Sprintf("%d-%d %dB", e.RemoteStartOffset, e.RemoteEndOffset, e.RemoteBytes)
}
