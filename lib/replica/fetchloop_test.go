package replica

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/mqproject/mq/lib/log"
	"github.com/mqproject/mq/lib/record"
)

// damage flips a record byte of the batch holding offset in node n's
// first segment, as a bad disk would, restarts n (killed: no final
// checkpoint) and runs its scrubber, which records the damaged range.
func (c *cluster) damage(n *node, offset int64) {
	if err := n.p.log.Close(); err != nil {
		c.t.Fatal(err)
	}
	seg := filepath.Join(n.dir, "00000000000000000000.log")
	file, err := os.ReadFile(seg)
	if err != nil {
		c.t.Fatal(err)
	}
	pos := 0
	for rest := file; ; {
		_, next, h, err := record.Next(rest)
		if err != nil || len(rest) == 0 {
			c.t.Fatalf("node %d: no batch holds offset %d: %v", n.id, offset, err)
		}
		if h.BaseOffset <= offset && offset <= h.LastOffset() {
			break
		}
		pos += len(rest) - len(next)
		rest = next
	}
	file[pos+record.HeaderSize] ^= 0xff
	if err := os.WriteFile(seg, file, 0o644); err != nil {
		c.t.Fatal(err)
	}
	c.open(n)
	if _, err := n.p.Log().Scrub(context.Background(), nil); err != nil {
		c.t.Fatal(err)
	}
}

// fetchOptions shape a follower's fetch (script command fetch).
type fetchOptions struct {
	maxBytes     int  // the leader's answer's byte limit per partition
	cut          int  // bytes cut off the end of the leader's answer, as if it were cut short
	truncateOnly bool // stop before a round that would fetch
}

// fetcherOf returns node n's Fetcher of its partition from leader, made on
// first use and kept with its refusal state, as the broker keeps one per
// leader.
func (c *cluster) fetcherOf(n *node, leader int32) (*Fetcher, *memUpstream) {
	if n.fetchers == nil {
		n.fetchers = map[int32]*nodeFetcher{}
	}
	nf := n.fetchers[leader]
	if nf == nil {
		up := &memUpstream{c: c, leader: leader, follower: n.id}
		logs := &scriptLog{id: n.id, dir: n.dir}
		nf = &nodeFetcher{up: up, logs: logs,
			f: NewFetcher(FetcherConfig{Leader: leader, Backoff: 100 * time.Millisecond, Clock: c.clock, Logger: slog.New(logs)}, up)}
		n.fetchers[leader] = nf
	}
	nf.f.Set([]*Partition{n.p})
	return nf.f, nf.up
}

// nodeFetcher is one of a node's Fetchers, with its upstream and log.
type nodeFetcher struct {
	f    *Fetcher
	up   *memUpstream
	logs *scriptLog
}

// fetch runs rounds of follower n's Fetcher, the loop the broker runs,
// against its leader in memory, and returns what each did, a line per
// step, each prefixed with n's id: until a round fetched (or moved the
// fetch position into the leader's log), the leader refused, or no
// partition was ready (a refused one waits for its retry time on the
// cluster's clock). With truncateOnly it stops before a round that would
// fetch.
func (c *cluster) fetch(n *node, o fetchOptions) string {
	var b strings.Builder
	out := func(format string, v ...any) { fmt.Fprintf(&b, "%d: "+format+"\n", append([]any{n.id}, v...)...) }
	for range 10 {
		pos, ok := n.p.FetchPosition()
		if !ok {
			out("no leader to fetch from")
			return b.String()
		}
		if _, damaged := n.p.Damage(); o.truncateOnly && !pos.NeedsTruncation && !damaged {
			return b.String()
		}
		f, up := c.fetcherOf(n, pos.Leader)
		up.opts, up.exchanges = o, nil
		nf := n.fetchers[pos.Leader]
		nf.logs.lines = nil
		did, next, err := f.round(context.Background())
		after, _ := n.p.FetchPosition()
		for _, l := range nf.logs.lines {
			out("%s", l)
		}
		switch {
		case err != nil:
			out("leader unreachable: %v", err)
			return b.String()
		case !did:
			out("nothing to fetch: next try in %v", next.Sub(c.clock.Now()))
			return b.String()
		}
		fetched := false
		for _, e := range up.exchanges {
			if e.kind == "fetch" && errors.Is(e.err, ErrOutOfLeaderRange) {
				continue // the ranges exchange that follows says it
			}
			out("%s", e.describe(pos, after, n.p.HighWatermark()))
			fetched = fetched || e.kind == "fetch" && !errors.Is(e.err, ErrOutOfLeaderRange)
			fetched = fetched || e.kind == "ranges"
		}
		if fp := f.parts[KeyOf(n.p)]; fp != nil && fp.refusedEpoch == pos.LeaderEpoch && fp.retryAt.After(c.clock.Now()) && fp.refusals > 0 {
			out("refused %d in a row: next try in %v", fp.refusals, fp.retryAt.Sub(c.clock.Now()))
			return b.String()
		}
		if fetched {
			return b.String()
		}
	}
	c.t.Fatalf("node %d: the fetcher does not come to a fetch in 10 rounds", n.id)
	return ""
}

// exchange is one request of a Fetcher to its memUpstream, as the script
// prints it.
type exchange struct {
	kind     string // epochs, fetch, ranges, refetch
	asked    int64  // the epoch asked about, the offset fetched or to cut at
	err      error
	offset   int64 // the end offset found, the leader's log start
	epoch    int32 // the epoch found
	end      int64 // the leader's log end
	granted  bool
	fetchedN int // bytes fetched
}

// describe says what an exchange did to a follower whose position went
// from before to after, its high-water mark now hw.
func (e exchange) describe(before, after FetchPosition, hw int64) string {
	switch e.kind {
	case "epochs":
		if e.err != nil {
			return fmt.Sprintf("offset-for-leader-epoch: %v", e.err)
		}
		return fmt.Sprintf("truncate: asked about epoch %d, leader has epoch %d ending at %d: leo %d -> %d",
			e.asked, e.epoch, e.offset, before.FetchOffset, after.FetchOffset)
	case "fetch":
		switch {
		case e.err != nil:
			return fmt.Sprintf("fetch: %v", e.err)
		case after.FetchOffset == before.FetchOffset:
			return fmt.Sprintf("fetched nothing, hw %d", hw)
		}
		return fmt.Sprintf("fetched %d..%d, hw %d", before.FetchOffset, after.FetchOffset-1, hw)
	case "ranges": // after a fetch out of the leader's range
		if e.err != nil {
			return fmt.Sprintf("fetch at %d: offset out of range; list-offsets: %v", before.FetchOffset, e.err)
		}
		return fmt.Sprintf("fetch at %d: offset out of range (leader has %d..%d): leo %d -> %d",
			before.FetchOffset, e.offset, e.end, before.FetchOffset, after.FetchOffset)
	case "refetch":
		if e.err != nil {
			return fmt.Sprintf("refetch: %v", e.err)
		}
		return fmt.Sprintf("refetch at %d: granted %v: leo %d -> %d", e.asked, e.granted, before.FetchOffset, after.FetchOffset)
	}
	return "?"
}

// memUpstream is a follower's leader in memory: the Upstream a node's
// Fetcher asks, answered by the leader node's Partition as the broker's
// handlers answer them (OffsetForLeaderEpoch, Fetch with a replica id,
// ListOffsets as a follower, Refetch), recording each exchange. The
// leader node is looked up at each call, so a restarted leader answers
// with its new Partition; a node that does not exist is unreachable.
type memUpstream struct {
	c                *cluster
	leader, follower int32
	opts             fetchOptions
	exchanges        []exchange
}

func (u *memUpstream) leaderPartition() (*Partition, error) {
	n := u.c.nodes[u.leader]
	if n == nil {
		return nil, fmt.Errorf("no node %d", u.leader)
	}
	return n.p, nil
}

func (u *memUpstream) EndOffsets(_ context.Context, qs []EpochQuery) ([]EpochEnd, error) {
	p, err := u.leaderPartition()
	if err != nil {
		return nil, err
	}
	out := make([]EpochEnd, len(qs))
	for i, q := range qs {
		end, found, err := p.EndOffsetForEpoch(q.LeaderEpoch, q.Epoch)
		out[i] = EpochEnd{Key: q.Key, Err: err, EndOffset: end, Epoch: found}
		u.exchanges = append(u.exchanges, exchange{kind: "epochs", asked: int64(q.Epoch), err: err, offset: end, epoch: found})
	}
	return out, nil
}

func (u *memUpstream) Fetch(_ context.Context, qs []FetchQuery, _ time.Duration) ([]Fetched, error) {
	p, err := u.leaderPartition()
	if err != nil {
		return nil, err
	}
	out := make([]Fetched, len(qs))
	for i, q := range qs {
		r, info, err := p.ReadInEpoch(q.FetchOffset, u.opts.maxBytes, u.follower, q.LeaderEpoch)
		if errors.Is(err, log.ErrOffsetOutOfRange) {
			err = ErrOutOfLeaderRange
		}
		var data []byte
		if err == nil && r.Len > 0 {
			data, err = io.ReadAll(io.NewSectionReader(&r, 0, r.Len))
			r.Release()
			if err != nil {
				u.c.t.Fatal(err)
			}
			data = data[:len(data)-min(len(data), u.opts.cut)] // an answer cut short
		}
		out[i] = Fetched{Key: q.Key, Err: err, Records: data, HighWatermark: info.HighWatermark, LogStartOffset: info.LogStartOffset}
		u.exchanges = append(u.exchanges, exchange{kind: "fetch", asked: q.FetchOffset, err: err, fetchedN: len(data)})
	}
	return out, nil
}

func (u *memUpstream) LogRanges(_ context.Context, qs []RangeQuery) ([]LogRange, error) {
	p, err := u.leaderPartition()
	if err != nil {
		return nil, err
	}
	out := make([]LogRange, len(qs))
	for i, q := range qs {
		err := p.CheckLeaderEpoch(q.LeaderEpoch)
		if err == nil && !p.IsLeader() {
			err = ErrNotLeader
		}
		info := p.Offsets()
		out[i] = LogRange{Key: q.Key, Err: err, LogStartOffset: info.LogStartOffset, LogEndOffset: info.LogEndOffset}
		u.exchanges = append(u.exchanges, exchange{kind: "ranges", err: err, offset: info.LogStartOffset, end: info.LogEndOffset})
	}
	return out, nil
}

func (u *memUpstream) Refetch(_ context.Context, qs []RefetchQuery) ([]RefetchGrant, error) {
	p, err := u.leaderPartition()
	if err != nil {
		return nil, err
	}
	out := make([]RefetchGrant, len(qs))
	for i, q := range qs {
		granted, err := p.GrantRefetch(u.follower, q.LeaderEpoch, q.Offset)
		out[i] = RefetchGrant{Key: q.Key, Err: err, Granted: granted}
		u.exchanges = append(u.exchanges, exchange{kind: "refetch", asked: q.Offset, err: err, granted: granted})
	}
	return out, nil
}

// scriptLog keeps a Fetcher's warnings as script lines: "log: MESSAGE:
// ERR", the node's directory in ERR written as DIR. Lower levels are
// left out: they say what the exchanges show.
type scriptLog struct {
	id    int32
	dir   string
	lines []string
}

func (l *scriptLog) Enabled(_ context.Context, level slog.Level) bool { return level >= slog.LevelWarn }

func (l *scriptLog) Handle(_ context.Context, r slog.Record) error {
	line := "log: " + r.Message
	r.Attrs(func(a slog.Attr) bool {
		if a.Key == "err" {
			line += ": " + strings.ReplaceAll(a.Value.String(), l.dir, "DIR")
		}
		return true
	})
	l.lines = append(l.lines, line)
	return nil
}

func (l *scriptLog) WithAttrs([]slog.Attr) slog.Handler { return l }
func (l *scriptLog) WithGroup(string) slog.Handler      { return l }
