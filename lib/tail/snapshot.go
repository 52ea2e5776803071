package tail

import (
	"cmp"
	"slices"
	"strings"
	"time"

	"github.com/mqproject/mq/lib/admin"
)

// Snapshot is what mqtail shows at one refresh: the cluster's brokers,
// topics and groups, with the rates and lag history the Tracker derived
// from the samples before it. It is also the JSON document of mqtail
// --once -o json (docs/mqtail.md): fields are only ever added.
type Snapshot struct {
	TimeMillis int64 `json:"time_ms"` // when the sample was taken, Unix ms
	// IntervalMillis is the time since the previous sample, over which
	// the rates are measured; 0 for the first sample (rates are null).
	IntervalMillis int64    `json:"interval_ms"`
	ClusterID      string   `json:"cluster_id"`
	Controller     int32    `json:"controller"` // -1: none known
	Brokers        []Broker `json:"brokers"`
	Topics         []Topic  `json:"topics"`
	Groups         []Group  `json:"groups"`
	Queues         []Queue  `json:"queues"`
	// QuorumLost: the controller quorum has no controller (too few
	// voters answer), so no broker is fenced and no leader elected.
	QuorumLost bool `json:"quorum_lost"`
	// HungTransactions are the transactions open longer than their
	// timeout and a minute (their coordinator should have aborted them),
	// as mqctl cluster health reports them.
	HungTransactions []HungTransaction `json:"hung_transactions"`
	Errors           []string          `json:"errors"` // parts that could not be read this time, and why
	time             time.Time         // TimeMillis as a time, for the views
}

// HungTransaction is one transaction open past its timeout.
type HungTransaction struct {
	TransactionalID string `json:"transactional_id"`
	Coordinator     int32  `json:"coordinator"` // its coordinator's broker
	Detail          string `json:"detail"`      // cluster health's line
}

// Broker is one broker of the cluster.
type Broker struct {
	ID         int32  `json:"id"`
	Host       string `json:"host"`
	Port       int32  `json:"port"`
	State      string `json:"state"` // alive, fenced, shutting down, unreachable
	Controller bool   `json:"controller"`
	// PartitionsLed counts the partitions it leads, internal ones too.
	PartitionsLed int `json:"partitions_led"`
	// BytesInPerSec is the growth of the logs of the partitions it leads
	// (DescribeLogDirs sizes), per second; null when unknown.
	BytesInPerSec *float64 `json:"bytes_in_per_sec"`
	// BytesOutPerSec is the growth of mq_topic_bytes_out_total summed
	// over the topics, from the broker's metrics endpoint (--metrics);
	// null without one.
	BytesOutPerSec *float64 `json:"bytes_out_per_sec"`
	// UploadLagBytes is what waits on the broker to be uploaded to the
	// remote store (tiered storage); null when it tiers nothing or did
	// not say. UploadFailing: its last upload failed, UploadError why.
	UploadLagBytes *int64 `json:"upload_lag_bytes"`
	UploadFailing  bool   `json:"upload_failing"`
	UploadError    string `json:"upload_error,omitempty"`
}

// Topic is one topic and its partitions.
type Topic struct {
	Topic      string      `json:"topic"`
	Partitions []Partition `json:"partitions"`
	// UnderReplicated and Offline count its partitions in those states.
	UnderReplicated int `json:"under_replicated"`
	Offline         int `json:"offline"`
	// MessagesInPerSec and BytesInPerSec sum its partitions' rates (null
	// when none is known); BytesOutPerSec sums mq_topic_bytes_out_total
	// over the metrics endpoints (null without --metrics).
	MessagesInPerSec *float64 `json:"messages_in_per_sec"`
	BytesInPerSec    *float64 `json:"bytes_in_per_sec"`
	BytesOutPerSec   *float64 `json:"bytes_out_per_sec"`
}

// Partition is one partition of a topic.
type Partition struct {
	Partition       int32   `json:"partition"`
	Leader          int32   `json:"leader"` // -1: none
	Replicas        []int32 `json:"replicas"`
	ISR             []int32 `json:"isr"`
	OfflineReplicas []int32 `json:"offline_replicas"`
	// UnderReplicated: fewer in-sync replicas than replicas, those a
	// running move adds not counted (KIP-352). Offline:
	// no leader, so nothing can be produced or consumed.
	UnderReplicated bool  `json:"under_replicated"`
	Offline         bool  `json:"offline"`
	LogStartOffset  int64 `json:"log_start_offset"` // -1: unknown
	HighWatermark   int64 `json:"high_watermark"`   // -1: unknown
	// SizeBytes is the leader replica's log size; -1: unknown.
	SizeBytes int64 `json:"size_bytes"`
	// MessagesInPerSec is the high-water mark's growth per second,
	// BytesInPerSec the leader's log size growth per second; null when
	// unknown (the first sample, a leader change, retention deleting).
	MessagesInPerSec *float64 `json:"messages_in_per_sec"`
	BytesInPerSec    *float64 `json:"bytes_in_per_sec"`
	Error            string   `json:"error,omitempty"`
}

// Group is one consumer group.
type Group struct {
	Group    string   `json:"group"`
	State    string   `json:"state"`
	Protocol string   `json:"protocol"`
	Members  []Member `json:"members"`
	// Lag sums the partitions' lags in records; LagTimeMillis is the
	// largest partition lag in time; Stalled is set when a partition is.
	Lag           int64            `json:"lag"`
	LagTimeMillis int64            `json:"lag_time_ms"`
	Stalled       bool             `json:"stalled"`
	Partitions    []GroupPartition `json:"partitions"`
}

// Member is one member of a group.
type Member struct {
	MemberID string `json:"member_id"`
	ClientID string `json:"client_id"`
	Host     string `json:"host"`
}

// GroupPartition is a partition a group consumes or has committed for.
type GroupPartition struct {
	Topic     string `json:"topic"`
	Partition int32  `json:"partition"`
	MemberID  string `json:"member_id"` // "": no member owns it
	Committed int64  `json:"committed"` // -1: none
	// HighWatermark is the partition's; Lag is HighWatermark - Committed
	// in records, LagTimeMillis the age of the first record not consumed
	// (lib/admin computes both, as mqctl group describe shows them); -1:
	// unknown.
	HighWatermark int64 `json:"high_watermark"`
	Lag           int64 `json:"lag"`
	LagTimeMillis int64 `json:"lag_time_ms"`
	// Stalled: over the whole window the committed offset has not moved
	// while the lag stayed above zero.
	Stalled bool `json:"stalled"`
	// LagHistory is the lag of each sample in the window, oldest first.
	LagHistory []int64 `json:"lag_history"`
	Error      string  `json:"error,omitempty"`
}

// Queue is one share group (a queue), as mqctl queue describe shows it:
// its members, its dead letters and each share-partition's window.
// Available, Acquired, Archived and InFlight sum its partitions';
// OldestUnackedMillis is the largest of their oldest unacknowledged ages.
type Queue struct {
	Group               string                 `json:"group"`
	State               string                 `json:"state"`
	Members             int                    `json:"members"`
	DeadLetterTopic     string                 `json:"dead_letter_topic"`
	DeadLetters         int64                  `json:"dead_letters"`
	InFlight            int64                  `json:"in_flight"`
	Available           int64                  `json:"available"`
	Acquired            int64                  `json:"acquired"`
	Archived            int64                  `json:"archived"`
	OldestUnackedMillis int64                  `json:"oldest_unacked_ms"`
	Partitions          []admin.QueuePartition `json:"partitions"`
	Error               string                 `json:"error,omitempty"`
}

// queues turns queue describe's result into the snapshot's queues.
func queues(ds admin.QueueDescriptions) []Queue {
	out := []Queue{}
	for _, d := range ds {
		q := Queue{Group: d.Group, State: d.State, Members: len(d.Members), DeadLetterTopic: d.DeadLetterTopic,
			DeadLetters: d.DeadLetters, Partitions: d.Partitions, Error: d.Error}
		if q.Partitions == nil {
			q.Partitions = []admin.QueuePartition{}
		}
		for _, p := range d.Partitions {
			q.InFlight += p.InFlight
			q.Available += p.Available
			q.Acquired += p.Acquired
			q.Archived += p.Archived
			q.OldestUnackedMillis = max(q.OldestUnackedMillis, p.OldestUnackedMillis)
		}
		out = append(out, q)
	}
	slices.SortFunc(out, func(a, b Queue) int { return strings.Compare(a.Group, b.Group) })
	return out
}

// Sample is what one collection read from the cluster, before the
// Tracker derives rates and history from it.
type Sample struct {
	Time    time.Time
	Cluster admin.ClusterDescription
	Topics  admin.TopicDescriptions
	Groups  admin.GroupDescriptions
	Queues  admin.QueueDescriptions
	// LogSizes are the replicas' log sizes: broker → topic → partition.
	LogSizes map[int32]map[string]map[int32]int64
	// LogDirs are the brokers' log directories, as they described them
	// (their upload lag among them).
	LogDirs map[int32][]admin.LogDirDescription
	// Metrics are the scraped counters of each --metrics endpoint, in
	// the order given.
	Metrics []Scrape
	// TopicsStale and GroupsStale say that the part could not be read
	// this time (Errors says why): Topics (and LogSizes) or Groups are
	// the last ones read, shown again, with no rates or history taken
	// from them.
	TopicsStale, GroupsStale bool
	// Unreachable are the brokers the cluster counts as alive that did
	// not answer: broker → why. QuorumLost: the controller quorum has no
	// controller.
	Unreachable map[int32]string
	QuorumLost  bool
	// HungTransactions are the hung transactions cluster health reports.
	HungTransactions []admin.HealthProblem
	Errors           []string
}

// Scrape is one metrics endpoint's counters at a sample.
type Scrape struct {
	Source MetricsSource
	// BytesOut is mq_topic_bytes_out_total by topic; nil when the
	// scrape failed.
	BytesOut map[string]float64
}

// Tracker turns samples into snapshots: rates from the differences
// between a sample and the one before it, and each group partition's
// lag history over the window, which the stalled mark is read from. It
// is not safe for concurrent use.
type Tracker struct {
	window time.Duration
	prevAt time.Time // the previous sample's time; zero before the first
	// topics is the last sample whose topics were read: the high-water
	// marks and log sizes the next rates are measured from.
	topics *Sample
	// scrapes are each metrics endpoint's last good scrape, and when.
	scrapes   map[int]Scrape
	scrapedAt map[int]time.Time
	lag       map[groupPartitionKey][]lagSample
}

type groupPartitionKey struct {
	group, topic string
	partition    int32
}

type lagSample struct {
	at        time.Time
	committed int64
	lag       int64
}

// NewTracker returns a Tracker keeping window of lag history (at least
// one sample more: the last one before the window, so that a history
// that spans the window can be told from one that is still filling).
func NewTracker(window time.Duration) *Tracker {
	return &Tracker{window: window, lag: map[groupPartitionKey][]lagSample{}, scrapes: map[int]Scrape{}, scrapedAt: map[int]time.Time{}}
}

// Observe adds s and returns its snapshot.
func (tr *Tracker) Observe(s Sample) Snapshot {
	snap := Snapshot{
		TimeMillis: s.Time.UnixMilli(), ClusterID: s.Cluster.ClusterID, Controller: s.Cluster.Controller, QuorumLost: s.QuorumLost,
		Brokers: []Broker{}, Topics: []Topic{}, Groups: []Group{}, Queues: queues(s.Queues), Errors: append([]string{}, s.Errors...), time: s.Time,
		HungTransactions: []HungTransaction{},
	}
	if s.QuorumLost {
		snap.Controller = -1
	}
	if !tr.prevAt.IsZero() {
		snap.IntervalMillis = s.Time.Sub(tr.prevAt).Milliseconds()
	}
	tr.prevAt = s.Time
	// Rates are measured against the last sample whose topics were read.
	var elapsed float64
	prev := tr.topics
	if prev != nil && !s.TopicsStale {
		elapsed = s.Time.Sub(prev.Time).Seconds()
	}
	rate := func(cur, prev int64, okPrev bool) *float64 {
		if elapsed <= 0 || !okPrev || cur < 0 || prev < 0 || cur < prev {
			return nil
		}
		r := float64(cur-prev) / elapsed
		return &r
	}
	prevHW := map[string]map[int32]int64{}
	if prev != nil {
		for _, t := range prev.Topics {
			prevHW[t.Topic] = map[int32]int64{}
			for _, p := range t.Partitions {
				prevHW[t.Topic][p.Partition] = p.HighWatermark
			}
		}
	}
	bytesIn := map[int32]*float64{}
	for _, td := range s.Topics {
		t := Topic{Topic: td.Topic, Partitions: []Partition{}}
		for _, pd := range td.Partitions {
			p := Partition{
				Partition: pd.Partition, Leader: pd.Leader,
				Replicas: pd.Replicas, ISR: pd.ISR, OfflineReplicas: pd.OfflineReplicas,
				UnderReplicated: pd.UnderReplicated(), Offline: pd.Leader < 0,
				LogStartOffset: pd.LogStartOffset, HighWatermark: pd.HighWatermark, SizeBytes: -1, Error: pd.Error,
			}
			hw, ok := prevHW[td.Topic][pd.Partition]
			p.MessagesInPerSec = rate(pd.HighWatermark, hw, ok)
			if size, ok := lookupSize(s.LogSizes, pd.Leader, td.Topic, pd.Partition); ok {
				p.SizeBytes = size
				if prev != nil {
					prevSize, ok := lookupSize(prev.LogSizes, pd.Leader, td.Topic, pd.Partition)
					p.BytesInPerSec = rate(size, prevSize, ok)
				}
			}
			if p.UnderReplicated {
				t.UnderReplicated++
			}
			if p.Offline {
				t.Offline++
			}
			t.MessagesInPerSec = addRate(t.MessagesInPerSec, p.MessagesInPerSec)
			t.BytesInPerSec = addRate(t.BytesInPerSec, p.BytesInPerSec)
			if p.Leader >= 0 {
				bytesIn[p.Leader] = addRate(bytesIn[p.Leader], p.BytesInPerSec)
			}
			t.Partitions = append(t.Partitions, p)
		}
		snap.Topics = append(snap.Topics, t)
	}
	topicOut, brokerOut, clusterOut := tr.bytesOut(s)
	for i := range snap.Topics {
		snap.Topics[i].BytesOutPerSec = topicOut[snap.Topics[i].Topic]
	}
	for _, bd := range s.Cluster.Brokers {
		b := Broker{ID: bd.ID, Host: bd.Host, Port: bd.Port, State: bd.State, Controller: bd.Controller,
			PartitionsLed: bd.PartitionsLed, BytesInPerSec: bytesIn[bd.ID], BytesOutPerSec: brokerOut[bd.ID]}
		if _, gone := s.Unreachable[bd.ID]; gone {
			b.State = BrokerUnreachable
		}
		if s.QuorumLost {
			b.Controller = false // what Metadata last named: no longer
		}
		if b.BytesInPerSec == nil && elapsed > 0 && !leadsAny(snap.Topics, bd.ID) && len(s.LogSizes) > 0 {
			zero := 0.0
			b.BytesInPerSec = &zero
		}
		if b.BytesOutPerSec == nil && clusterOut != nil && len(s.Cluster.Brokers) == 1 {
			b.BytesOutPerSec = clusterOut
		}
		for _, d := range s.LogDirs[bd.ID] {
			if d.Tiered {
				lag := d.TierUploadLagBytes
				if b.UploadLagBytes != nil {
					lag += *b.UploadLagBytes
				}
				b.UploadLagBytes = &lag
				b.UploadFailing = b.UploadFailing || d.TierUploadFailing
				b.UploadError = cmp.Or(b.UploadError, d.TierError)
			}
		}
		snap.Brokers = append(snap.Brokers, b)
	}
	snap.Groups = tr.groups(s)
	for _, p := range s.HungTransactions {
		snap.HungTransactions = append(snap.HungTransactions, HungTransaction{TransactionalID: p.TransactionalID, Coordinator: p.Broker, Detail: p.Detail})
	}
	if !s.TopicsStale {
		tr.topics = &s
	}
	return snap
}

// bytesOut is mq_topic_bytes_out_total's growth per second: by topic
// over every endpoint, by broker for the endpoints named for one, and
// over the endpoints named for none (a single node's). A counter that went
// down was reset (the broker restarted): its growth is its value.
func (tr *Tracker) bytesOut(s Sample) (byTopic map[string]*float64, byBroker map[int32]*float64, unassigned *float64) {
	byTopic, byBroker = map[string]*float64{}, map[int32]*float64{}
	for i, sc := range s.Metrics {
		if sc.BytesOut == nil {
			continue
		}
		prev, ok := tr.scrapes[i]
		elapsed := s.Time.Sub(tr.scrapedAt[i]).Seconds()
		tr.scrapes[i], tr.scrapedAt[i] = sc, s.Time
		if !ok || elapsed <= 0 {
			continue
		}
		var total float64
		for topic, v := range sc.BytesOut {
			d := v - prev.BytesOut[topic]
			if d < 0 {
				d = v
			}
			r := d / elapsed
			byTopic[topic] = addRate(byTopic[topic], &r)
			total += r
		}
		if sc.Source.Broker >= 0 {
			byBroker[sc.Source.Broker] = addRate(byBroker[sc.Source.Broker], &total)
		} else {
			unassigned = addRate(unassigned, &total)
		}
	}
	return
}

// groups converts the described groups and extends their lag history;
// the history of partitions no longer described is dropped.
func (tr *Tracker) groups(s Sample) []Group {
	out := []Group{}
	seen := map[groupPartitionKey]bool{}
	cutoff := s.Time.Add(-tr.window)
	for _, gd := range s.Groups {
		g := Group{Group: gd.Group, State: gd.State, Protocol: gd.Protocol, Members: []Member{}, Partitions: []GroupPartition{}, LagTimeMillis: -1}
		for _, m := range gd.Members {
			g.Members = append(g.Members, Member{MemberID: m.MemberID, ClientID: m.ClientID, Host: m.Host})
		}
		for _, pd := range gd.Partitions {
			k := groupPartitionKey{gd.Group, pd.Topic, pd.Partition}
			seen[k] = true
			p := GroupPartition{Topic: pd.Topic, Partition: pd.Partition, MemberID: pd.MemberID, Committed: pd.Committed,
				HighWatermark: pd.LogEndOffset, Lag: pd.Lag, LagTimeMillis: pd.LagTimeMillis, Error: pd.Error, LagHistory: []int64{}}
			hist := tr.lag[k]
			if !s.GroupsStale && pd.Committed >= 0 && pd.Lag >= 0 {
				hist = append(hist, lagSample{at: s.Time, committed: pd.Committed, lag: pd.Lag})
			}
			hist = trimHistory(hist, cutoff)
			tr.lag[k] = hist
			for _, h := range hist {
				p.LagHistory = append(p.LagHistory, h.lag)
			}
			p.Stalled = stalled(hist, cutoff)
			if p.Lag > 0 {
				g.Lag += p.Lag
			}
			g.LagTimeMillis = max(g.LagTimeMillis, p.LagTimeMillis)
			g.Stalled = g.Stalled || p.Stalled
			g.Partitions = append(g.Partitions, p)
		}
		out = append(out, g)
	}
	for k := range tr.lag {
		if !seen[k] && !s.GroupsStale {
			delete(tr.lag, k)
		}
	}
	slices.SortFunc(out, func(a, b Group) int { return strings.Compare(a.Group, b.Group) })
	return out
}

// trimHistory drops the samples before cutoff but the last of them.
func trimHistory(hist []lagSample, cutoff time.Time) []lagSample {
	i := 0
	for i+1 < len(hist) && !hist[i+1].at.After(cutoff) {
		i++
	}
	return slices.Clone(hist[i:])
}

// stalled reports whether hist spans the whole window (its first sample
// is at or before cutoff) with the committed offset unchanged and the lag
// above zero in every sample: a consumer that has stopped, told without a
// threshold to tune. A group that is caught up is never stalled, and one
// that commits, however slowly, is not either.
func stalled(hist []lagSample, cutoff time.Time) bool {
	if len(hist) < 2 || hist[0].at.After(cutoff) {
		return false
	}
	for _, h := range hist {
		if h.lag <= 0 || h.committed != hist[0].committed {
			return false
		}
	}
	return true
}

func lookupSize(sizes map[int32]map[string]map[int32]int64, broker int32, topic string, partition int32) (int64, bool) {
	s, ok := sizes[broker][topic][partition]
	return s, ok
}

func leadsAny(topics []Topic, broker int32) bool {
	for _, t := range topics {
		for _, p := range t.Partitions {
			if p.Leader == broker {
				return true
			}
		}
	}
	return false
}

// addRate adds r to sum, where nil is unknown: the sum of known rates,
// nil only when none is known.
func addRate(sum, r *float64) *float64 {
	if r == nil {
		return sum
	}
	if sum == nil {
		v := *r
		return &v
	}
	v := *sum + *r
	return &v
}
