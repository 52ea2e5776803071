package broker

import (
	"context"
	"encoding/binary"
	"reflect"
	"slices"
	"sync"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/mqproject/mq/lib/clock"
	"github.com/mqproject/mq/lib/controller"
	"github.com/mqproject/mq/lib/log"
	"github.com/mqproject/mq/lib/partition"
	"github.com/mqproject/mq/lib/replica"
	"github.com/mqproject/mq/lib/server"
)

// fetchPartition is one partition of a fetch: what was asked and what was
// read.
type fetchPartition struct {
	partition          int32
	fetchOffset        int64
	maxBytes           int32
	currentLeaderEpoch int32
	partitionLookup    // p: nil when err is set at resolution
	quietRead          // a consumer's session's last read with nothing new

	err            error
	highWatermark  int64
	logStartOffset int64
	region         log.Region // Len 0: no records
	// remote holds the batches read from the remote store (tiered.go)
	// instead of region, for a consumer's offset below the local log
	// start; remoteWant is the bytes such a read is to ask for, set by
	// read and done in the Reply (readRemote), 0 for none.
	remote        []byte
	remoteWant    int
	currentLeader leaderHint // KIP-951, for NOT_LEADER_OR_FOLLOWER and FENCED_LEADER_EPOCH (hints.go)
	omit          bool       // an incremental response leaves it out: nothing new
	// throttled: the last read was for a follower the replication
	// throttle holds to the leader's quota (fetch.quota); the bytes it
	// read were counted against the quota by that read.
	throttled bool
	// lastStableOffset is read with highWatermark; aborted are the
	// aborted transactions a read_committed consumer needs for the
	// region (read_uncommitted: none).
	lastStableOffset int64
	aborted          []log.AbortedTxn
}

// partitionLookup is lookup's answer for a partition: its hosted replica
// p, or the error to answer (lookupErr), found at image version
// lookupImage and data plane gen lookupGen (0: never looked up). A
// session keeps it, and while both are the same the next lookup is this
// one.
type partitionLookup struct {
	p                      *partition.Hosted
	lookupErr              error
	lookupImage, lookupGen uint64
}

// quietRead is what a read that found nothing past seenOffset in
// seenEpoch left: the partition's Changed channel taken before it, and
// the high-water mark and log start it found. A consumer's session keeps
// it (fetchsession.go, unchanged): while that channel is open and the
// fetch asks the same, a read would find the same again, so read skips it.
type quietRead struct {
	seen               <-chan struct{}
	seenOffset         int64
	seenEpoch          int32
	seenHWM, seenStart int64
	seenLSO            int64
}

type fetchTopic struct {
	name  string
	id    [16]byte
	parts []fetchPartition
}

// fetch is one Fetch request being answered. Fetches are pooled: one is
// taken per request and goes back once the server is done with its
// response (the Response's Done), so a fetch at the log end allocates
// nothing of its own once the pool is warm.
type fetch struct {
	version   int16
	replicaID int32
	maxBytes  int32
	minBytes  int32
	// committed: a read_committed consumer's fetch (isolation level 1),
	// which reads below the last stable offset.
	committed bool
	topics    []fetchTopic
	// waitOn are the change channels of the partitions read, taken before
	// reading so that an append between the read and the wait is not missed:
	// only by a read for a fetch that is to wait (read(true)). A taken
	// channel is remade by the partition's next append, so a fetch answered
	// at once (the rule under load) takes none: on a fetch of 10,000
	// partitions that was 10,000 channels allocated by the next produce.
	waitOn []<-chan struct{}

	// For a fetch that waits: its connection's context and deadline.
	ctx      context.Context
	deadline time.Time

	// quota is the leader side of the replication throttle, for a
	// follower's fetch (nil for a consumer's). hold is set by a read that
	// held a throttled partition back for want of quota: how long until
	// the quota gives again, which bounds the wait before the next read.
	quota *replica.Quota
	hold  time.Duration

	// The image the KIP-951 leader hints come from, and the endpoints of
	// the leaders they name (hints.go), as seen from conn's listener; nil
	// ctrl: no hints.
	ctrl      *controller.Controller
	conn      *server.ConnInfo
	endpoints []controller.Broker

	// A fetch in a session (fetchsession.go): the session, whose
	// partitions are sessionParts in the order of topics' parts; sessionID
	// is the id answered (0: none), and an incremental fetch answers only
	// the partitions with news.
	session      *fetchSession
	sessionParts []*sessionPartition
	sessionID    int32
	incremental  bool
	counts       *sessionCounts // the session's kind's counts

	// flat is every partition of topics, in their order; read starts at
	// flat[start] and wraps round, so that in a session the partitions
	// after the last one answered with records have the response's bytes
	// first next time. lastRead is the index in flat of the last partition
	// read into the response (-1: none).
	flat     []*fetchPartition
	start    int
	lastRead int

	// Kept across uses: the encoded response (buf, parts), the regions it
	// sends, the wait's timer and select cases, and the Reply and Done
	// funcs bound to this fetch.
	buf   []byte
	parts []server.Part
	// remotePending: a partition waits for a remote read (remoteWant);
	// tiers is the node's partitions, whose Tier reads it.
	remotePending bool
	tiers         *partition.Manager
	regions       []log.Region
	// errCodes are the nonzero partition error codes encoded, for the
	// server's Observer (server.Response.ErrorCodes).
	errCodes []int16
	clock    clock.Clock // the broker's, which timer belongs to
	timer    clock.Timer
	cases    []reflect.SelectCase
	reply    server.Reply
	// remoteReply reads what read left to the remote store, then answers.
	remoteReply server.Reply
	done        func()
}

var fetchPool sync.Pool

// getFetch returns a fetch from the pool, or a new one.
func getFetch() *fetch {
	if f, ok := fetchPool.Get().(*fetch); ok {
		return f
	}
	f := new(fetch)
	f.reply = f.waitAndRespond
	f.remoteReply = f.readRemoteAndRespond
	f.done = f.release
	return f
}

// release is the Done of a fetch's response: the regions sent are
// released (a segment deleted meanwhile closes its file now) and the fetch
// goes back to the pool, holding no partition, file or context.
func (f *fetch) release() {
	for i := range f.regions {
		f.regions[i].Release()
	}
	clear(f.regions)
	f.regions = f.regions[:0]
	f.errCodes = f.errCodes[:0]
	for i := range f.topics {
		clear(f.topics[i].parts)
	}
	clear(f.waitOn)
	clear(f.parts)
	clear(f.endpoints)
	f.endpoints = f.endpoints[:0]
	f.conn = nil
	clear(f.sessionParts)
	f.sessionParts = f.sessionParts[:0]
	clear(f.flat)
	f.flat, f.start = f.flat[:0], 0
	f.session, f.sessionID, f.incremental, f.counts = nil, 0, false, nil
	f.ctx, f.quota, f.hold = nil, nil, 0
	f.remotePending, f.tiers = false, nil
	fetchPool.Put(f)
}

// handleFetch reads on the reader goroutine; when less than MinBytes is
// available it returns a Reply that waits (on the partitions' change
// channels, up to MaxWaitMillis) and reads again.
//
// Fetch sessions (KIP-227, fetchsession.go), for followers and consumers
// alike: a full fetch with session id 0 and epoch 0 creates one, answered
// with its id; later requests carry the id and the next epoch and name
// only the partitions whose fetch state changed, and their answers hold
// only the partitions with records, an error, or a new high-water mark or
// log start. A full fetch the session cache has no room for is answered
// with session id 0, which tells the client no session was created, so
// it keeps sending full fetches. A request naming a session that does not
// exist (or is another replica's) gets FETCH_SESSION_ID_NOT_FOUND, after
// which clients reset to a full fetch.
func (b *Broker) handleFetch(ctx context.Context, c *server.ConnInfo, req *server.Request) server.Reply {
	req.Recycle() // resolve and the session copy what they need of the request
	r := req.Body.(*kmsg.FetchRequest)
	replicaID := r.ReplicaID
	if req.Version >= 15 {
		replicaID = r.ReplicaState.ID
	}
	if replicaID >= 0 && !b.speaksAsReplica(c, replicaID) {
		return req.Ready(fetchErrorResponse(r, kerr.ClusterAuthorizationFailed))
	}
	if req.Version >= 15 && replicaID >= 0 && staleReplicaEpoch(b.ctrl.Image(), replicaID, r.ReplicaState.Epoch) {
		return req.Ready(fetchErrorResponse(r, kerr.StaleBrokerEpoch))
	}
	f := getFetch()
	f.version, f.replicaID, f.maxBytes, f.minBytes = req.Version, replicaID, r.MaxBytes, r.MinBytes
	f.committed = replicaID < 0 && req.Version >= 4 && r.IsolationLevel == 1
	f.ctrl, f.conn, f.tiers = b.ctrl, c, b.parts
	if replicaID >= 0 {
		f.quota, _ = b.parts.ReplicationQuotas()
	}
	if f.maxBytes <= 0 {
		f.maxBytes = 1 // still returns the first batch whole (KIP-74)
	}
	if req.Version >= 7 && (r.SessionID != 0 || r.SessionEpoch != sessionEpochFinal) {
		if err := f.openSession(ctx, b, r); err != nil {
			f.release()
			return req.Ready(fetchErrorResponse(r, err))
		}
	}
	if f.session != nil {
		f.fromSession(b.clock.Now())
		f.lookup(b, b.ctrl.Image())
	} else {
		f.resolve(b, b.ctrl.Image(), r)
	}
	// Read without taking the partitions' change channels; only a fetch
	// that is to wait reads again, taking them, so that an append since
	// the first read is seen, not waited for.
	if f.read(false) || r.MaxWaitMillis <= 0 || f.read(true) {
		if f.remotePending {
			// Remote reads wait for the store: in the Reply.
			f.ctx = ctx
			return f.remoteReply
		}
		return req.Ready(f.response())
	}
	f.ctx = ctx
	if f.clock != b.clock { // pooled: the last use may have been another broker's
		f.clock, f.timer = b.clock, nil
	}
	f.deadline = b.clock.Now().Add(time.Duration(r.MaxWaitMillis) * time.Millisecond)
	return f.reply
}

// staleReplicaEpoch reports whether a follower's fetch carries a broker
// epoch (KIP-903; -1: none) older than the one img holds for it: a
// process of the broker from before its latest registration (which may
// have lost what it had) must not count as a follower of any
// partition. An epoch newer than img's is this node's image being
// behind, and is served.
func staleReplicaEpoch(img *controller.Image, replica int32, epoch int64) bool {
	if epoch < 0 {
		return false
	}
	br, ok := img.Brokers[replica]
	return ok && epoch < br.Epoch
}

// waitAndRespond is the Reply of a fetch that found less than MinBytes: it
// waits for appends until there is enough, the deadline passes or the
// connection ends, and answers with what there is then.
func (f *fetch) waitAndRespond() server.Response {
	for f.wait() {
		if f.read(true) {
			break
		}
	}
	f.readRemote()
	return f.response()
}

// resolve looks up every requested partition.
func (f *fetch) resolve(b *Broker, img *controller.Image, r *kmsg.FetchRequest) {
	f.topics = reuse(f.topics, len(r.Topics))
	for i := range r.Topics {
		rt := &r.Topics[i]
		ft := &f.topics[i]
		*ft = fetchTopic{parts: ft.parts}
		if f.version >= 13 {
			ft.id = rt.TopicID
		} else {
			ft.name = rt.Topic
		}
		ft.parts = resize(ft.parts, len(rt.Partitions))
		for j := range rt.Partitions {
			rp := &rt.Partitions[j]
			fp := &ft.parts[j]
			*fp = fetchPartition{
				partition:          rp.Partition,
				fetchOffset:        rp.FetchOffset,
				maxBytes:           rp.PartitionMaxBytes,
				currentLeaderEpoch: rp.CurrentLeaderEpoch,
			}
			if f.version < 9 {
				fp.currentLeaderEpoch = -1
			}
		}
	}
	f.lookup(b, img)
}

// lookup finds the hosted replica of every partition of f.topics, or the
// error to answer for it, and lists them in flat. A partition whose last
// lookup (kept by its session) was made at the same image version and
// data plane gen keeps its answer: over 10,000 partitions, looking each
// up again was a quarter of a live consumer's fetch.
func (f *fetch) lookup(b *Broker, img *controller.Image) {
	gen := b.parts.Gen()
	version := img.Version
	f.flat = f.flat[:0]
	for i := range f.topics {
		ft := &f.topics[i]
		var t *controller.Topic
		var terr error
		if f.version >= 13 {
			t = img.TopicsByID[controller.TopicID(ft.id)]
			if t == nil {
				terr = errUnknownTopicID
			}
		} else {
			t = img.Topics[ft.name]
			if t == nil {
				terr = partition.ErrUnknownPartition
			}
		}
		// A consumer needs READ on each topic (authorize.go; a follower's
		// CLUSTER_ACTION was checked in Handle), and is served the others
		// beside a refused one, as Kafka does. Checked at every lookup, not
		// kept: a session may outlive an ACL.
		denied := false
		if f.replicaID < 0 {
			name := ft.name
			if t != nil {
				name = t.Name
			}
			denied = (t != nil || name != "") && !b.allowed(f.conn, img, topicResource, opRead, name)
		}
		for j := range ft.parts {
			fp := &ft.parts[j]
			f.flat = append(f.flat, fp)
			// gen 0: no partition registered yet, when a lookup never made
			// (lookupGen 0) must not pass for one.
			if fp.lookupGen != gen || fp.lookupImage != version || gen == 0 {
				if t != nil {
					// The client may know of an election this node's
					// controller has not applied yet.
					if t = b.parts.TopicAt(t.Name, t, fp.partition, fp.currentLeaderEpoch); t == nil {
						terr = partition.ErrUnknownPartition
					}
				}
				fp.p, fp.lookupErr = f.lookupPartition(b, t, terr, fp.partition)
				fp.lookupImage, fp.lookupGen = version, gen
			}
			fp.highWatermark, fp.logStartOffset, fp.err = -1, -1, fp.lookupErr
			if denied {
				// Looked up again next time, whoever asks.
				fp.p, fp.err, fp.lookupImage = nil, errTopicAuthorization, 0
			}
		}
	}
}

// lookupPartition finds partition of topic t (nil: unknown, terr), or the
// error to answer for it.
func (f *fetch) lookupPartition(b *Broker, t *controller.Topic, terr error, index int32) (*partition.Hosted, error) {
	switch {
	case terr != nil:
		return nil, terr
	case index < 0 || int(index) >= len(t.Partitions):
		return nil, partition.ErrUnknownPartition
	}
	if h := b.parts.Replica(t, index); h != nil {
		return h, nil
	}
	return nil, partition.ErrNotHosted
}

// read reads every partition once, from flat[start] round, releasing
// what an earlier read held, and reports whether the response should go
// out now: enough bytes, an error to report, or no partition to wait on.
// With take, it takes each partition's change channel (waitOn) before
// reading it.
func (f *fetch) read(take bool) bool {
	f.waitOn = f.waitOn[:0]
	f.lastRead = -1
	f.hold = 0
	f.remotePending = false
	waitable := 0
	remaining := int64(f.maxBytes)
	var total int64
	failed := false
	skipped := 0
	// The throttled partitions of this read share what the leader's
	// quota allows it (nothing to share for a consumer).
	var share replica.Share
	if f.quota != nil && f.quota.Limited() {
		share = f.quota.Share()
	}
	for k := range f.flat {
		at := (f.start + k) % len(f.flat)
		fp := f.flat[at]
		if fp.throttled && fp.region.Len > 0 { // an earlier read's, not sent after all
			f.quota.Return(fp.region.Len)
		}
		fp.region.Release()
		fp.region = log.Region{}
		fp.aborted = fp.aborted[:0]
		fp.throttled = false
		fp.remoteWant = 0
		if fp.p == nil {
			failed = true
			continue
		}
		waitable++
		if fp.unchanged() {
			skipped++
			if take {
				f.waitOn = append(f.waitOn, fp.seen)
			}
			fp.highWatermark, fp.logStartOffset, fp.err = fp.seenHWM, fp.seenStart, nil
			fp.lastStableOffset = fp.seenLSO
			continue
		}
		// A consumer's session takes the channel of every partition it
		// reads, so that one found with nothing new is skipped by the
		// next fetches (unchanged) even when this one returns at once.
		fp.seen = nil
		var seen <-chan struct{}
		if take || f.tracksChanges() {
			seen = fp.p.Changed()
		}
		if take {
			f.waitOn = append(f.waitOn, seen)
		}
		if err := fp.p.CheckLeaderEpoch(fp.currentLeaderEpoch); err != nil {
			fp.highWatermark, fp.logStartOffset, fp.err = -1, -1, err
			failed = true
			continue
		}
		limit := min(int64(fp.maxBytes), remaining)
		if limit <= 0 && total > 0 {
			// The response is full: report offsets, read nothing.
			info := fp.p.Offsets()
			if info.HighWatermarkBehind && f.replicaID < 0 {
				fp.highWatermark, fp.logStartOffset, fp.err = -1, -1, replica.ErrHighWatermarkBehind
				failed = true
				continue
			}
			fp.highWatermark, fp.logStartOffset, fp.err = info.HighWatermark, f.logStart(fp, info.LogStartOffset), nil
			fp.lastStableOffset = info.LastStableOffset
			continue
		}
		readBytes := int(max(limit, 1))
		if f.quota != nil && f.quota.Limited() && fp.p.LeaderThrottled(f.replicaID) {
			// Over quota (0): the fetch is recorded, nothing is read,
			// and a fetch that waits reads again once the quota gives.
			fp.throttled = true
			readBytes = int(share.Limit(int64(readBytes)))
		}
		region, info, err := f.readPartition(fp, readBytes)
		if err != nil && f.replicaID >= 0 && f.movedToTiered(fp, err) {
			// A follower below the leader's local log start: it
			// restarts its log at that start (lib/replica Fetcher).
			err = errMovedToTieredStorage
		}
		if err != nil && f.remoteCovers(fp, err) {
			// Below the local log start, in the remote log: read in
			// the Reply.
			info = fp.p.Offsets()
			fp.highWatermark, fp.logStartOffset, fp.err = info.HighWatermark, f.logStart(fp, info.LogStartOffset), nil
			fp.lastStableOffset = info.LastStableOffset
			fp.remoteWant = readBytes
			f.remotePending = true
			continue
		}
		if err != nil {
			// Like Kafka: offsets are unknown (-1) in an error answer.
			fp.highWatermark, fp.logStartOffset, fp.err = -1, -1, err
			failed = true
			continue
		}
		fp.highWatermark, fp.logStartOffset, fp.err = info.HighWatermark, f.logStart(fp, info.LogStartOffset), nil
		fp.lastStableOffset = info.LastStableOffset
		if region.Len == 0 {
			if seen != nil && readBytes > 0 { // not when held back: there may be news
				fp.quietRead = quietRead{seen: seen, seenOffset: fp.fetchOffset, seenEpoch: fp.currentLeaderEpoch,
					seenHWM: info.HighWatermark, seenStart: fp.logStartOffset, seenLSO: info.LastStableOffset}
			}
			continue
		}
		// Only the first batch of the first non-empty partition may go
		// over the limits (KIP-74); a later partition whose first batch
		// does not fit returns nothing this time.
		if total > 0 && region.Len > limit {
			region.Release()
			continue
		}
		fp.region = region
		if f.committed {
			fp.aborted = fp.p.Log().AbortedTxns(fp.aborted[:0], fp.fetchOffset, region.LastOffset+1)
		}
		f.lastRead = at
		total += region.Len
		remaining -= region.Len
		if fp.throttled {
			share.Moved(region.Len)
		}
	}
	share.Settle()
	f.hold = share.Held()
	if skipped > 0 && f.counts != nil { // a sessionless fetch skips in its wait loop
		f.counts.skipped.Add(int64(skipped))
	}
	return failed || f.remotePending || total >= int64(f.minBytes) || waitable == 0
}

// tracksChanges reports whether f keeps the partitions' Changed channels
// for its session's next fetches: a consumer's session does
// (fetchsession.go).
func (f *fetch) tracksChanges() bool {
	return f.session != nil && f.replicaID < 0
}

// readPartition reads one partition for the fetch. A consumer's Fetch of
// version 11 or later (KIP-392, which added the client's rack) is served by
// a follower too, below the follower's high-water mark, as Kafka does: a
// client sends it there when told to (a leader's PreferredReadReplica, not
// sent by mq yet) or, as the chaos checker does, to read every replica back
// through the protocol. Older consumers and followers need the leader.
func (f *fetch) readPartition(fp *fetchPartition, maxBytes int) (log.Region, replica.ReadInfo, error) {
	if f.committed {
		return fp.p.ReadCommitted(fp.fetchOffset, maxBytes, fp.currentLeaderEpoch, f.version >= 11)
	}
	if f.replicaID < 0 && f.version >= 11 {
		return fp.p.ReadAnyReplica(fp.fetchOffset, maxBytes)
	}
	return fp.p.ReadInEpoch(fp.fetchOffset, maxBytes, f.replicaID, fp.currentLeaderEpoch)
}

// wait blocks until a partition read changes, the deadline passes or the
// connection ends. It reports whether reading again is worthwhile.
func (f *fetch) wait() bool {
	d := f.deadline.Sub(f.clock.Now())
	if d <= 0 {
		return false
	}
	// A partition held back by the replication throttle is read again
	// when the quota gives, if that comes before the deadline.
	rereadAtTimeout := false
	if f.hold > 0 && f.hold < d {
		d, rereadAtTimeout = f.hold, true
	}
	if f.timer == nil {
		f.timer = f.clock.NewTimer(d)
	} else {
		f.timer.Reset(d)
	}
	defer f.timer.Stop()
	if len(f.waitOn) == 1 {
		select {
		case <-f.waitOn[0]:
			return true
		case <-f.timer.C():
			return rereadAtTimeout
		case <-f.ctx.Done():
		}
		return false
	}
	cases := append(f.cases[:0],
		reflect.SelectCase{Dir: reflect.SelectRecv, Chan: reflect.ValueOf(f.timer.C())},
		reflect.SelectCase{Dir: reflect.SelectRecv, Chan: reflect.ValueOf(f.ctx.Done())})
	for _, ch := range f.waitOn {
		cases = append(cases, reflect.SelectCase{Dir: reflect.SelectRecv, Chan: reflect.ValueOf(ch)})
	}
	chosen, _, _ := reflect.Select(cases)
	clear(cases)
	f.cases = cases[:0]
	return chosen >= 2 || (chosen == 0 && rereadAtTimeout)
}

// response encodes the fetch response around the file regions read and
// hands the regions over to it.
//
// The regions stay referenced until the server is done with the response
// (written, or dropped on a broken connection) and are released by its Done
// hook (release), so a segment deleted meanwhile closes its file right
// after.
func (f *fetch) response() server.Response {
	f.leaderHints()
	if f.session != nil {
		f.markSent()
	}
	parts := f.encode()
	for i := range f.topics {
		for j := range f.topics[i].parts {
			fp := &f.topics[i].parts[j]
			if fp.region.Len > 0 {
				f.regions = append(f.regions, fp.region)
				if f.replicaID < 0 && fp.p != nil {
					// Client traffic: the bytes sent, and the offsets
					// in them from the one asked for on (the first
					// batch may start before it).
					fp.p.Traffic.BytesOut.Add(uint64(fp.region.Len))
					fp.p.Traffic.MessagesOut.Add(uint64(max(fp.region.LastOffset+1-max(fp.fetchOffset, fp.region.BaseOffset), 0)))
				}
			}
			if len(fp.remote) > 0 && f.replicaID < 0 && fp.p != nil {
				fp.p.Traffic.BytesOut.Add(uint64(len(fp.remote)))
			}
			fp.region, fp.remote = log.Region{}, nil
		}
	}
	return server.Response{Parts: parts, Flexible: f.version >= 12, Done: f.done, ErrorCodes: f.errCodes}
}

// encode writes the Fetch response body: every field with its version's
// encoding, and each partition's records as a file part, so record bytes go
// from the segment file to the socket untouched.
func (f *fetch) encode() []server.Part {
	flexible := f.version >= 12
	n := 1
	size := 64
	for i := range f.topics {
		size += 40 + len(f.topics[i].name) + 60*len(f.topics[i].parts)
		for j := range f.topics[i].parts {
			if f.topics[i].parts[j].region.Len > 0 || len(f.topics[i].parts[j].remote) > 0 {
				n += 2
			}
		}
	}
	parts := slices.Grow(f.parts[:0], n)
	// One buffer for every byte part, sized for the whole body up front.
	// Each part is a capped slice of it, so an append that outgrows it
	// anyway leaves the parts taken intact.
	buf := slices.Grow(f.buf[:0], size)
	mark := 0
	buf = appendInt32(buf, 0) // ThrottleMillis
	if f.version >= 7 {
		buf = appendInt16(buf, 0)           // ErrorCode
		buf = appendInt32(buf, f.sessionID) // SessionID; 0: none
	}
	buf = appendArrayLen(buf, f.answeredTopics(), flexible)
	for i := range f.topics {
		ft := &f.topics[i]
		answered := f.answeredParts(ft)
		if answered == 0 && f.incremental {
			continue
		}
		if f.version >= 13 {
			buf = append(buf, ft.id[:]...)
		} else {
			buf = appendString(buf, ft.name, flexible)
		}
		buf = appendArrayLen(buf, answered, flexible)
		for j := range ft.parts {
			fp := &ft.parts[j]
			if fp.omit {
				continue
			}
			code := fetchError(fp.err)
			if code != 0 {
				f.errCodes = append(f.errCodes, code)
			}
			buf = appendInt32(buf, fp.partition)
			buf = appendInt16(buf, code)
			buf = appendInt64(buf, fp.highWatermark)
			lso := fp.lastStableOffset
			if fp.err != nil {
				lso = -1
			}
			buf = appendInt64(buf, lso)
			if f.version >= 5 {
				buf = appendInt64(buf, fp.logStartOffset)
			}
			if f.committed && fp.err == nil {
				buf = appendArrayLen(buf, len(fp.aborted), flexible)
				for _, a := range fp.aborted {
					buf = appendInt64(buf, a.ProducerID)
					buf = appendInt64(buf, a.FirstOffset)
					if flexible {
						buf = append(buf, 0) // no tagged fields
					}
				}
			} else {
				buf = appendNullArrayLen(buf, flexible) // AbortedTransactions: null
			}
			if f.version >= 11 {
				buf = appendInt32(buf, -1) // PreferredReadReplica
			}
			n := fp.region.Len
			if fp.remote != nil {
				n = int64(len(fp.remote))
			}
			if flexible {
				buf = binary.AppendUvarint(buf, uint64(n)+1)
			} else {
				buf = appendInt32(buf, int32(n))
			}
			switch {
			case n > 0 && fp.remote != nil:
				parts = append(parts, server.Part{Bytes: buf[mark:len(buf):len(buf)]}, server.Part{Bytes: fp.remote})
				mark = len(buf)
			case n > 0:
				parts = append(parts, server.Part{Bytes: buf[mark:len(buf):len(buf)]},
					server.Part{Source: fp.region.File(), Offset: fp.region.Pos, Len: n})
				mark = len(buf)
			}
			if flexible {
				if fp.currentLeader.set {
					buf = appendLeaderHint(buf, 1, fp.currentLeader) // tag 1: CurrentLeader
				} else {
					buf = append(buf, 0) // no partition tagged fields
				}
			}
		}
		if flexible {
			buf = append(buf, 0) // topic tagged fields
		}
	}
	if flexible {
		if f.version >= 16 && len(f.endpoints) > 0 {
			buf = appendNodeEndpoints(buf, f.endpoints) // tag 0: NodeEndpoints
		} else {
			buf = append(buf, 0) // no response tagged fields
		}
	}
	if cap(buf) <= maxPooledFetchBuffer {
		f.buf = buf[:0]
	}
	parts = append(parts, server.Part{Bytes: buf[mark:]})
	f.parts = parts[:0]
	return parts
}

// answeredTopics is the number of topics the response holds: all of them,
// but for an incremental response only those with a partition answered.
func (f *fetch) answeredTopics() int {
	if !f.incremental {
		return len(f.topics)
	}
	n := 0
	for i := range f.topics {
		if f.answeredParts(&f.topics[i]) > 0 {
			n++
		}
	}
	return n
}

// answeredParts is the number of partitions of ft the response holds.
func (f *fetch) answeredParts(ft *fetchTopic) int {
	if !f.incremental {
		return len(ft.parts)
	}
	n := 0
	for j := range ft.parts {
		if !ft.parts[j].omit {
			n++
		}
	}
	return n
}

// fetchErrorResponse answers a fetch with a top-level error only.
func fetchErrorResponse(r *kmsg.FetchRequest, err *kerr.Error) server.Response {
	resp := r.ResponseKind().(*kmsg.FetchResponse)
	resp.ErrorCode = err.Code
	return server.Response{Msg: resp}
}

// leaderHints sets the KIP-951 hints of the partitions answered
// NOT_LEADER_OR_FOLLOWER or FENCED_LEADER_EPOCH: their current leader and
// epoch (v12+, where the field exists), and from v16 the endpoints of
// those leaders. A fetch without such errors does nothing here.
func (f *fetch) leaderHints() {
	if f.ctrl == nil || f.version < 12 {
		return
	}
	var img *controller.Image
	for i := range f.topics {
		ft := &f.topics[i]
		for j := range ft.parts {
			fp := &ft.parts[j]
			if fp.err == nil || !wantsLeaderHint(fetchError(fp.err)) {
				continue
			}
			if img == nil {
				img = f.ctrl.Image()
			}
			t := img.Topics[ft.name]
			if f.version >= 13 {
				t = img.TopicsByID[controller.TopicID(ft.id)]
			}
			fp.currentLeader = currentLeader(t, fp.partition)
			if f.version >= 16 {
				f.endpoints = appendEndpoint(f.endpoints, img, fp.currentLeader.leader, f.conn)
			}
		}
	}
}

// maxPooledFetchBuffer keeps a fetch of thousands of partitions from
// pinning its encoding buffer in the pool.
const maxPooledFetchBuffer = 64 << 10

// resize returns s with length n, reusing its array when it is large
// enough; the elements are zero.
func resize[T any](s []T, n int) []T {
	s = reuse(s, n)
	clear(s)
	return s
}

// reuse returns s with length n, reusing its array when it is large
// enough. Elements reused keep their old values, for the caller to reset
// while keeping what it wants (the arrays of nested slices).
func reuse[T any](s []T, n int) []T {
	if cap(s) < n {
		return make([]T, n)
	}
	return s[:n]
}

func appendInt16(b []byte, v int16) []byte { return binary.BigEndian.AppendUint16(b, uint16(v)) }
func appendInt32(b []byte, v int32) []byte { return binary.BigEndian.AppendUint32(b, uint32(v)) }
func appendInt64(b []byte, v int64) []byte { return binary.BigEndian.AppendUint64(b, uint64(v)) }

// appendArrayLen writes an array length: int32, or uvarint(n+1) when flexible.
func appendArrayLen(b []byte, n int, flexible bool) []byte {
	if flexible {
		return binary.AppendUvarint(b, uint64(n)+1)
	}
	return appendInt32(b, int32(n))
}

// appendNullArrayLen writes the length of a null array.
func appendNullArrayLen(b []byte, flexible bool) []byte {
	if flexible {
		return append(b, 0)
	}
	return appendInt32(b, -1)
}

// appendString writes a non-null string: int16 length, or uvarint(n+1) when
// flexible.
func appendString(b []byte, s string, flexible bool) []byte {
	if flexible {
		b = binary.AppendUvarint(b, uint64(len(s))+1)
	} else {
		b = appendInt16(b, int16(len(s)))
	}
	return append(b, s...)
}
