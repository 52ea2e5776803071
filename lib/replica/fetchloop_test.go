package replica

import (
	"errors"
	"fmt"
	"io"
	"strings"

	"github.com/mqproject/mq/lib/log"
)

// fetchOptions shape one round of a follower's fetcher (script command
// fetch).
type fetchOptions struct {
	maxBytes     int  // the fetch's max bytes
	cut          int  // bytes cut off the end of the leader's answer, as if it were cut short
	truncateOnly bool // stop after truncation, before the fetch
}

// fetch runs one round of follower n's fetcher against the cluster's
// leader and returns what it did, a line per step, each prefixed with n's
// id. Scripts drive a follower's fetcher through this function alone: the
// round behind it, fetchRoundLikeTheBroker, re-implements the broker's
// follower loop for these tests, and running the real loop instead is a
// change to this function's body.
func (c *cluster) fetch(n *node, o fetchOptions) string {
	var b strings.Builder
	c.fetchRoundLikeTheBroker(&b, n, o)
	return b.String()
}

// fetchRoundLikeTheBroker runs follower n's fetcher once, as the broker's
// does: while the replica needs it, truncation with the leader's
// OffsetForLeaderEpoch answer, then one fetch, appended with
// AppendFromLeader, or ResetFetchOffset on OFFSET_OUT_OF_RANGE.
func (c *cluster) fetchRoundLikeTheBroker(b *strings.Builder, n *node, o fetchOptions) {
	out := func(format string, v ...any) { fmt.Fprintf(b, "%d: "+format+"\n", append([]any{n.id}, v...)...) }
	pos, ok := n.p.FetchPosition()
	if !ok {
		out("no leader to fetch from")
		return
	}
	leader := c.nodes[pos.Leader]
	// What the leader's handlers check first: that it leads in the
	// follower's epoch.
	leaderCheck := func() error {
		if leader == nil || !leader.p.IsLeader() {
			return ErrNotLeader
		}
		return leader.p.CheckLeaderEpoch(pos.LeaderEpoch)
	}
	for round := 0; pos.NeedsTruncation; round++ {
		if round == 10 {
			c.t.Fatalf("node %d: truncation does not end", n.id)
		}
		if err := leaderCheck(); err != nil {
			out("offset-for-leader-epoch: %v", err)
			return
		}
		end, found := leader.p.Log().EndOffsetForEpoch(pos.LastFetchedEpoch)
		before := pos
		err := n.p.TruncateFromLeader(pos.LeaderEpoch, end, found)
		pos, _ = n.p.FetchPosition()
		out("truncate: asked about epoch %d, leader has epoch %d ending at %d: leo %d -> %d%s",
			before.LastFetchedEpoch, found, end, before.FetchOffset, pos.FetchOffset, strings.TrimSuffix(" "+errSuffix(err), " "))
		if err != nil {
			return
		}
	}
	if o.truncateOnly {
		return
	}
	if err := leaderCheck(); err != nil {
		out("fetch: %v", err)
		return
	}
	r, info, err := leader.p.Read(pos.FetchOffset, o.maxBytes, n.id)
	if errors.Is(err, log.ErrOffsetOutOfRange) {
		err := n.p.ResetFetchOffset(pos.LeaderEpoch, info.LogStartOffset, info.LogEndOffset)
		after, _ := n.p.FetchPosition()
		out("fetch at %d: offset out of range (leader has %d..%d): leo %d -> %d%s", pos.FetchOffset,
			info.LogStartOffset, info.LogEndOffset, pos.FetchOffset, after.FetchOffset, strings.TrimSuffix(" "+errSuffix(err), " "))
		return
	}
	if err != nil {
		out("fetch: %v", err)
		return
	}
	var data []byte
	if r.Len > 0 {
		data, err = io.ReadAll(io.NewSectionReader(&r, 0, r.Len))
		r.Release()
		if err != nil {
			c.t.Fatal(err)
		}
		data = data[:len(data)-min(len(data), o.cut)] // a response cut short
	}
	if _, err := n.p.AppendFromLeader(pos.LeaderEpoch, data, info.HighWatermark, info.LogStartOffset); err != nil {
		out("append: %v", err)
		return
	}
	after, _ := n.p.FetchPosition()
	if after.FetchOffset == pos.FetchOffset {
		out("fetched nothing, hw %d", n.p.HighWatermark())
		return
	}
	out("fetched %d..%d, hw %d", pos.FetchOffset, after.FetchOffset-1, n.p.HighWatermark())
}
