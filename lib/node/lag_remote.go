package node

import (
	"context"
	"crypto/tls"
	"net"
	"strconv"
	"sync"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/mqproject/mq/lib/metrics"
	"github.com/mqproject/mq/lib/partition"
	"github.com/mqproject/mq/lib/peer"
)

// remoteLagTimeout bounds what a scrape waits for the leaders of the
// group partitions this node does not host.
const remoteLagTimeout = 2 * time.Second

// remoteLag is a group partition whose replicas are all on other nodes:
// its lag is asked of the leader. group indexes groupLag's output.
type remoteLag struct {
	group     int
	key       lagKey
	committed int64
	lag       metrics.GroupLag
}

// fetchRemoteLag asks each leader of the partitions in want, with one
// Fetch (as a consumer, ReplicaID -1, no wait) at their committed offsets,
// for the high-water mark and the first record's timestamp, and returns
// the partitions it got an answer for with their lag, defined as for a
// hosted partition. A committed offset below the log start is read at the
// log start (ListOffsets earliest, then a second Fetch), as mqctl does. A
// leader that cannot be reached within remoteLagTimeout leaves its
// partitions out of this scrape.
func (d *Daemon) fetchRemoteLag(want []remoteLag, now time.Time) []remoteLag {
	if len(want) == 0 {
		return nil
	}
	img := d.ctrl.Image()
	byLeader := map[string][]remoteLag{}
	for _, r := range want {
		p := img.Partition(r.key.topic, r.key.partition)
		if p == nil {
			continue
		}
		br, ok := img.Brokers[p.Leader]
		if !ok || br.Fenced || br.Port <= 0 {
			continue
		}
		addr := net.JoinHostPort(br.Host, strconv.Itoa(int(br.Port)))
		if d.peerTLS != nil {
			// As every connection to another broker: its ssl://
			// listener, as this node, or none.
			if addr = partition.SSLListener(br); addr == "" {
				continue
			}
		}
		byLeader[addr] = append(byLeader[addr], r)
	}
	ctx, cancel := context.WithTimeout(context.Background(), remoteLagTimeout)
	defer cancel()
	var mu sync.Mutex
	var out []remoteLag
	var wg sync.WaitGroup
	for addr, parts := range byLeader {
		wg.Add(1)
		go func() {
			defer wg.Done()
			got := d.askLeaderLag(ctx, addr, parts, now)
			mu.Lock()
			out = append(out, got...)
			mu.Unlock()
		}()
	}
	wg.Wait()
	return out
}

// askLeaderLag is fetchRemoteLag for the partitions one leader at addr
// leads.
func (d *Daemon) askLeaderLag(ctx context.Context, addr string, parts []remoteLag, now time.Time) []remoteLag {
	var cfg *tls.Config
	if d.peerTLS != nil {
		cfg = d.peerTLS()
	}
	conn, err := peer.DialTLS(ctx, addr, "mq-metrics-"+strconv.Itoa(int(d.settings.NodeID)), cfg)
	if err != nil {
		return nil
	}
	defer conn.Close()
	at := make([]int64, len(parts))
	for i, r := range parts {
		at[i] = r.committed
	}
	answers, err := lagFetch(ctx, conn, parts, at)
	if err != nil {
		return nil
	}
	// Committed offsets below the log start: read at the log start.
	var again []int
	for i, a := range answers {
		if a.err == kerr.OffsetOutOfRange.Code {
			again = append(again, i)
		}
	}
	if len(again) > 0 {
		if starts, err := logStarts(ctx, conn, parts, again); err == nil {
			for _, i := range again {
				if s, ok := starts[i]; ok && s > parts[i].committed {
					at[i] = s
				}
			}
			if second, err := lagFetch(ctx, conn, parts, at); err == nil {
				for _, i := range again {
					answers[i] = second[i]
				}
			}
		}
	}
	var out []remoteLag
	for i, r := range parts {
		a := answers[i]
		if a.err != 0 || a.hw < 0 {
			continue
		}
		r.lag = metrics.GroupLag{Topic: r.key.topic, Partition: r.key.partition, Messages: max(a.hw-r.committed, 0)}
		if r.lag.Messages > 0 {
			ts, ok := batchTimestamp(a.records, at[i])
			if !ok {
				continue // no record to date: no lag series, as mqctl shows none
			}
			r.lag.Seconds = float64(max(now.UnixMilli()-ts, 0)) / 1000
		}
		out = append(out, r)
	}
	return out
}

// lagAnswer is one partition of a lag Fetch.
type lagAnswer struct {
	err     int16
	hw      int64
	records []byte // a copy: the connection reuses its buffer
}

// lagFetch fetches, as a consumer and without waiting, one batch of each
// partition at its offset in at. A Fetch names a partition once, so where
// several groups committed offsets for one partition it sends one Fetch
// per offset asked of that partition.
func lagFetch(ctx context.Context, conn *peer.Conn, parts []remoteLag, at []int64) ([]lagAnswer, error) {
	out := make([]lagAnswer, len(parts))
	for i := range out {
		out[i] = lagAnswer{err: kerr.UnknownServerError.Code, hw: -1}
	}
	var rounds [][]int // indexes of parts, each partition at most once per round
	taken := []map[topicPartition]bool{}
	for i, r := range parts {
		tp := topicPartition{r.key.topic, r.key.partition}
		k := 0
		for k < len(rounds) && taken[k][tp] {
			k++
		}
		if k == len(rounds) {
			rounds, taken = append(rounds, nil), append(taken, map[topicPartition]bool{})
		}
		rounds[k], taken[k][tp] = append(rounds[k], i), true
	}
	for _, round := range rounds {
		req := kmsg.NewPtrFetchRequest()
		req.Version = 12 // topics by name
		req.ReplicaID = -1
		req.MaxWaitMillis, req.MinBytes, req.MaxBytes = 0, 0, 1<<20
		byTopic := map[string]int{}
		index := map[topicPartition]int{}
		for _, i := range round {
			r := parts[i]
			index[topicPartition{r.key.topic, r.key.partition}] = i
			t, ok := byTopic[r.key.topic]
			if !ok {
				t = len(req.Topics)
				byTopic[r.key.topic] = t
				rt := kmsg.NewFetchRequestTopic()
				rt.Topic = r.key.topic
				req.Topics = append(req.Topics, rt)
			}
			p := kmsg.NewFetchRequestTopicPartition()
			p.Partition, p.FetchOffset, p.CurrentLeaderEpoch, p.LogStartOffset = r.key.partition, at[i], -1, -1
			p.PartitionMaxBytes = 1 // the first batch comes whole (KIP-74)
			req.Topics[t].Partitions = append(req.Topics[t].Partitions, p)
		}
		resp, err := conn.Do(ctx, req, remoteLagTimeout)
		if err != nil {
			return nil, err
		}
		for _, t := range resp.(*kmsg.FetchResponse).Topics {
			for _, p := range t.Partitions {
				if i, ok := index[topicPartition{t.Topic, p.Partition}]; ok {
					out[i] = lagAnswer{err: p.ErrorCode, hw: p.HighWatermark, records: append([]byte(nil), p.RecordBatches...)}
				}
			}
		}
	}
	return out, nil
}

// logStarts asks for the log start offset of the partitions of parts at
// the indexes in which (ListOffsets, earliest).
func logStarts(ctx context.Context, conn *peer.Conn, parts []remoteLag, which []int) (map[int]int64, error) {
	req := kmsg.NewPtrListOffsetsRequest()
	req.Version = 4
	req.ReplicaID = -1
	byTopic := map[string]int{}
	asked := map[topicPartition]bool{}
	for _, i := range which {
		r := parts[i]
		tp := topicPartition{r.key.topic, r.key.partition}
		if asked[tp] {
			continue // a partition once per request
		}
		asked[tp] = true
		t, ok := byTopic[r.key.topic]
		if !ok {
			t = len(req.Topics)
			byTopic[r.key.topic] = t
			rt := kmsg.NewListOffsetsRequestTopic()
			rt.Topic = r.key.topic
			req.Topics = append(req.Topics, rt)
		}
		p := kmsg.NewListOffsetsRequestTopicPartition()
		p.Partition, p.Timestamp, p.CurrentLeaderEpoch = r.key.partition, -2, -1
		req.Topics[t].Partitions = append(req.Topics[t].Partitions, p)
	}
	resp, err := conn.Do(ctx, req, remoteLagTimeout)
	if err != nil {
		return nil, err
	}
	out := map[int]int64{}
	for _, t := range resp.(*kmsg.ListOffsetsResponse).Topics {
		for _, p := range t.Partitions {
			if p.ErrorCode != 0 {
				continue
			}
			for _, i := range which {
				if parts[i].key.topic == t.Topic && parts[i].key.partition == p.Partition {
					out[i] = p.Offset
				}
			}
		}
	}
	return out, nil
}

// topicPartition names one partition.
type topicPartition struct {
	topic     string
	partition int32
}
