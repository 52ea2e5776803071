package node

import (
	"errors"
	"maps"
	"math"
	"sync"

	"github.com/mqproject/mq/lib/controller"
	"github.com/mqproject/mq/lib/metrics"
	"github.com/mqproject/mq/lib/partition"
	"github.com/mqproject/mq/lib/record"
	"github.com/mqproject/mq/lib/replica"
)

// This file is what a scrape of lib/metrics reads of the node: the
// partitions' counters (lib/partition counts the traffic and ISR changes
// as they happen), and the lag of the groups this node coordinates.

// MetricsSnapshot implements metrics.Source for the Daemon: the hosted
// partitions with their traffic and ISR counters, the groups this node
// coordinates with their lag, the controller's Raft state and fencings,
// and the server's connections.
func (d *Daemon) MetricsSnapshot(partitionSeries bool) metrics.Snapshot {
	isr := d.parts.ISRCounts()
	s := metrics.Snapshot{ISRShrinks: isr.Shrinks, ISRExpands: isr.Expands, ISRUnconfirmed: isr.Unconfirmed}
	leader, follower := d.parts.ThrottleCounts()
	leaderQuota, followerQuota := d.parts.ReplicationQuotas()
	s.LeaderThrottle = metrics.Throttle{Bytes: leader.Bytes, Holds: leader.Holds, Rate: throttleRate(leaderQuota)}
	s.FollowerThrottle = metrics.Throttle{Bytes: follower.Bytes, Holds: follower.Holds, Rate: throttleRate(followerQuota)}
	for _, t := range d.parts.Traffic() {
		s.Topics = append(s.Topics, metrics.TopicTraffic{Topic: t.Topic,
			BytesIn: t.BytesIn, MessagesIn: t.MessagesIn, BytesOut: t.BytesOut, MessagesOut: t.MessagesOut})
	}
	img := d.ctrl.Image()
	for _, h := range d.parts.All() {
		st := h.State()
		leader := st.Role == replica.Leader
		if leader {
			// The image says which replicas a move adds (KIP-352).
			if p := img.Partition(h.Topic(), h.Partition.Partition()); p != nil && p.LeaderEpoch == st.LeaderEpoch {
				if p.UnderReplicated() {
					s.UnderReplicated++
				}
				if p.Reassigning() {
					s.Reassigning++
				}
			} else if len(st.ISR) < len(st.Replicas) {
				s.UnderReplicated++
			}
		}
		if partitionSeries {
			s.Partitions = append(s.Partitions, metrics.Partition{
				Topic: h.Topic(), Partition: h.Partition.Partition(),
				HighWatermark: st.HighWatermark, LogEndOffset: st.LogEndOffset, LogStartOffset: st.LogStartOffset,
				SizeBytes: h.Log().Size(), Leader: leader,
			})
		}
	}
	seen := map[lagKey]bool{}
	s.Groups = d.groupLag(seen)
	s.ShareGroups, s.ShareGroupPartitions = d.shareGroups(seen)
	d.lagTimes.retain(seen)
	fs := d.parts.Files().Stats()
	s.SegmentFilesOpen, s.SegmentFilesOpened, s.SegmentFilesEvicted = fs.Open, fs.Opens, fs.Evictions
	if t := d.parts.TierIfOpen(); t != nil {
		ts := t.Stats()
		s.Tier = metrics.Tier{
			UploadLagBytes: ts.LagBytes.Load(), UploadFailing: ts.Failing.Load() != 0,
			SegmentsUploaded: uint64(ts.SegmentsUploaded.Load()), BytesUploaded: uint64(ts.BytesUploaded.Load()),
			UploadFailures: uint64(ts.UploadFailures.Load()), SegmentsDeleted: uint64(ts.SegmentsDeleted.Load()),
			RemoteReadBytes: uint64(ts.RemoteReadBytes.Load()), RemoteReadErrors: uint64(ts.RemoteReadErrors.Load()),
			StoreGETs: uint64(t.CacheStats().GETs),
		}
	}
	s.ControllerLeaderID = d.ctrl.LeaderID()
	s.RaftState = d.ctrl.RaftState()
	s.BrokerFencings = d.ctrl.BrokerFencings()
	if s.RaftState == "leader" {
		s.Offline = d.ctrl.Image().OfflinePartitions()
	}
	s.Connections = d.server.Connections()
	s.ConnectionsAccepted = d.server.ConnectionsAccepted()
	s.AuthenticationFailures = d.server.AuthenticationFailures()
	s.RequestBytesReserved, s.RequestBytesWaiting = d.server.RequestBytes()
	total, perIP := d.server.ConnectionsRefused()
	s.ConnectionsRefused = map[string]uint64{"max_connections": total, "max_connections_per_ip": perIP}
	return s
}

// groupLag lists the groups this node coordinates with their lag on the
// partitions they committed offsets for: from its own replica where it
// hosts one (the leader's, or a follower's a fetch behind), else asked of
// the partition's leader (fetchRemoteLag).
//
// The definition is mqctl group describe's (lib/admin): lag in messages is
// the high-water mark minus the committed offset, at least 0; lag in time
// is now minus the timestamp of the first record at or after the committed
// offset (the log start when that is later), in whole milliseconds, and 0
// without lag. Timestamps are cached per group partition and committed
// offset, so a scrape reads one batch only for a commit that moved since
// the last one.
func (d *Daemon) groupLag(seen map[lagKey]bool) []metrics.Group {
	now := d.clock.Now()
	listed := d.coords.Groups.ListGroups(nil)
	out := make([]metrics.Group, 0, len(listed))
	var remote []remoteLag // group partitions hosted on other nodes
	for _, g := range listed {
		mg := metrics.Group{Group: g.Group, State: g.State.String()}
		offsets, err := d.coords.Groups.FetchOffsets(g.Group, nil)
		if err != nil {
			out = append(out, mg)
			continue
		}
		for _, o := range offsets {
			if o.Offset.Offset < 0 {
				continue
			}
			h := d.parts.Lookup(o.Topic, o.Partition)
			if h == nil {
				remote = append(remote, remoteLag{group: len(out), key: lagKey{group: g.Group, topic: o.Topic, partition: o.Partition}, committed: o.Offset.Offset})
				continue
			}
			committed := o.Offset.Offset
			hw := h.HighWatermark()
			lag := metrics.GroupLag{Topic: o.Topic, Partition: o.Partition, Messages: max(hw-committed, 0)}
			if lag.Messages > 0 {
				key := lagKey{group: g.Group, topic: o.Topic, partition: o.Partition}
				seen[key] = true
				at := max(committed, h.Log().StartOffset())
				ts, ok := d.lagTimes.timestamp(key, h, at, hw)
				if !ok {
					continue // no record to date: no lag series, as mqctl shows none
				}
				lag.Seconds = float64(max(now.UnixMilli()-ts, 0)) / 1000
			}
			mg.Lag = append(mg.Lag, lag)
		}
		out = append(out, mg)
	}
	for _, r := range d.fetchRemoteLag(remote, now) {
		out[r.group].Lag = append(out[r.group].Lag, r.lag)
		seen[r.key] = true
	}
	return out
}

// shareGroups lists the share groups this node coordinates and the
// share-partitions of the partitions it leads, with their windows, as
// mqctl queue describe counts them, the age of the record at each start
// offset (cached as the groups' lag times are) and their dead letters.
func (d *Daemon) shareGroups(seen map[lagKey]bool) ([]metrics.ShareGroup, []metrics.SharePartition) {
	var groups []metrics.ShareGroup
	for _, g := range d.coords.ListShareGroups() {
		groups = append(groups, metrics.ShareGroup{Group: g.ID, State: g.State})
	}
	now := d.clock.Now()
	img := d.ctrl.Image()
	var parts []metrics.SharePartition
	for _, st := range d.coords.Shares.Stats() {
		t := img.TopicsByID[controller.TopicID(st.TopicID)]
		if t == nil {
			continue
		}
		h := d.parts.Lookup(t.Name, st.Partition)
		if h == nil || h.State().Role != replica.Leader {
			continue // led elsewhere now: its leader reports it
		}
		p := metrics.SharePartition{Group: st.Group, Topic: t.Name, Partition: st.Partition, DeadLetters: st.DeadLetters}
		if st.Loaded {
			hw := h.HighWatermark()
			p.InFlight = st.End - st.Start
			p.Available = int64(st.Available) + max(hw-st.End, 0)
			p.Acquired, p.Archived = int64(st.Acquired), int64(st.Archived)
			if hw > st.Start {
				key := lagKey{group: st.Group, topic: t.Name, partition: st.Partition, share: true}
				seen[key] = true
				if ts, ok := d.lagTimes.timestamp(key, h, max(st.Start, h.Log().StartOffset()), hw); ok {
					p.OldestUnackedSeconds = float64(max(now.UnixMilli()-ts, 0)) / 1000
				}
			}
		}
		parts = append(parts, p)
	}
	return groups, parts
}

// lagKey is one group partition; share, of a share group.
type lagKey struct {
	group, topic string
	partition    int32
	share        bool
}

// lagTimeCache remembers, per group partition, the timestamp of the
// record at the offset last asked for.
type lagTimeCache struct {
	mu      sync.Mutex
	entries map[lagKey]lagTime
}

type lagTime struct {
	offset    int64
	timestamp int64 // milliseconds
}

// timestamp returns the timestamp (ms) of the first record at or after
// offset at in h, below maxOffset, from the cache when it was read for
// the same offset.
func (c *lagTimeCache) timestamp(key lagKey, h *partition.Hosted, at, maxOffset int64) (int64, bool) {
	c.mu.Lock()
	e, ok := c.entries[key]
	c.mu.Unlock()
	if ok && e.offset == at {
		return e.timestamp, true
	}
	ts, ok := recordTimestamp(h, at, maxOffset)
	if !ok {
		return 0, false
	}
	c.mu.Lock()
	if c.entries == nil {
		c.entries = map[lagKey]lagTime{}
	}
	c.entries[key] = lagTime{at, ts}
	c.mu.Unlock()
	return ts, true
}

// retain drops the entries not in keep.
func (c *lagTimeCache) retain(keep map[lagKey]bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	maps.DeleteFunc(c.entries, func(k lagKey, _ lagTime) bool { return !keep[k] })
}

// errRecordFound stops the iteration of recordTimestamp.
var errRecordFound = errors.New("broker: record found")

// recordTimestamp reads the batch holding offset at (one batch, below
// maxOffset) and returns the timestamp of its first record at or after
// at, as a consumer would see it.
func recordTimestamp(h *partition.Hosted, at, maxOffset int64) (int64, bool) {
	b, err := h.Log().ReadBytes(at, maxOffset, 1)
	if err != nil {
		return 0, false
	}
	return batchTimestamp(b, at)
}

// batchTimestamp is the timestamp of the first record at or after offset
// at in the first batch of b, as a consumer would see it.
func batchTimestamp(b []byte, at int64) (int64, bool) {
	if len(b) == 0 {
		return 0, false
	}
	batch, _, hdr, err := record.Next(b)
	if err != nil || batch == nil {
		return 0, false
	}
	var ts int64
	found := false
	err = record.Iterate(batch, 0, func(r *record.Record) error {
		if r.Offset(&hdr) < at {
			return nil
		}
		ts, found = r.Timestamp(&hdr), true
		return errRecordFound
	})
	if !found || err != nil && !errors.Is(err, errRecordFound) {
		return 0, false
	}
	return ts, true
}

// throttleRate is q's rate for mq_replication_throttle_rate_bytes: +Inf
// when unlimited.
func throttleRate(q *replica.Quota) float64 {
	if !q.Limited() {
		return math.Inf(1)
	}
	return float64(q.Rate())
}
