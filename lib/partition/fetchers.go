package partition

import (
	"errors"
	"fmt"
	"hash/fnv"
	"net"
	"strconv"
	"strings"
	"sync"

	"github.com/mqproject/mq/lib/controller"
	"github.com/mqproject/mq/lib/log"
	"github.com/mqproject/mq/lib/peer"
	"github.com/mqproject/mq/lib/replica"
)

// replicaFetchers runs this node's follower side of replication: for each
// leader broker, num.replica.fetchers fetchers, each one connection and one
// goroutine fetching every partition hashed to it from that leader, in one
// Fetch request per round. The follow loop calls sync after every image.
type replicaFetchers struct {
	m *Manager

	mu     sync.Mutex
	byKey  map[fetcherKey]fetcher
	closed bool
}

// fetcher is one replica.Fetcher with the leader connection it fetches
// through, at the leader's address when it started.
type fetcher struct {
	*replica.Fetcher
	addr string
}

// fetcherKey names one fetcher: the leader it fetches from and its index
// among that leader's fetchers.
type fetcherKey struct {
	leader int32
	index  int32
}

func newReplicaFetchers(m *Manager) *replicaFetchers {
	return &replicaFetchers{m: m, byKey: map[fetcherKey]fetcher{}}
}

// sync gives every hosted follower partition with a live leader to the
// fetcher of that leader, starts the fetchers needed and stops the others.
func (rf *replicaFetchers) sync(img *controller.Image) {
	n := max(rf.m.cfg.Settings.NumReplicaFetchers, 1)
	want := map[fetcherKey][]*replica.Partition{}
	addrs := map[int32]string{}
	for _, h := range rf.m.All() {
		pos, ok := h.FetchPosition()
		if !ok {
			continue
		}
		br, ok := img.Brokers[pos.Leader]
		if !ok || br.Fenced || br.Port <= 0 {
			continue // the controller is moving the leadership; wait for it
		}
		addr := net.JoinHostPort(br.Host, strconv.Itoa(int(br.Port)))
		if rf.m.cfg.PeerTLS != nil {
			if addr = SSLListener(br); addr == "" {
				continue // no ssl:// listener: nothing to fetch from safely
			}
		}
		addrs[pos.Leader] = addr
		tp := key{h.Topic(), h.Partition.Partition()}
		key := fetcherKey{leader: pos.Leader, index: int32(hashPartition(tp) % uint32(n))}
		want[key] = append(want[key], h.Partition)
	}
	rf.mu.Lock()
	defer rf.mu.Unlock()
	if rf.closed {
		return
	}
	for key, f := range rf.byKey {
		if parts, ok := want[key]; ok && f.addr == addrs[key.leader] {
			f.Set(parts)
			continue
		}
		f.Close()
		delete(rf.byKey, key)
	}
	for key, parts := range want {
		if _, ok := rf.byKey[key]; ok {
			continue
		}
		f := rf.start(key, addrs[key.leader])
		f.Set(parts)
		rf.byKey[key] = f
	}
}

// start runs a fetcher of key's partitions from the leader at addr.
func (rf *replicaFetchers) start(key fetcherKey, addr string) fetcher {
	s := rf.m.cfg.Settings
	leader := peer.NewLeader(peer.LeaderConfig{
		NodeID: s.NodeID, Addr: addr, MaxWait: s.ReplicaFetchWait,
		MaxBytes: s.ReplicaFetchResponseMaxBytes, PartitionMaxBytes: s.ReplicaFetchMaxBytes,
		Watch: rf.m.cfg.Watch, LeaderID: key.leader, TLS: rf.m.cfg.PeerTLS,
		BrokerEpoch: rf.m.regEpoch.Load,
	})
	f := replica.NewFetcher(replica.FetcherConfig{
		Leader: key.leader, Backoff: s.ReplicaFetchBackoff, Clock: rf.m.clock, Quota: rf.m.throttles.follower,
		Logger: rf.m.log.With("leader", key.leader, "fetcher", key.index, "addr", addr),
	}, leader)
	go func() {
		f.Run()
		leader.Close()
	}()
	return fetcher{Fetcher: f, addr: addr}
}

// SSLListener is the host:port of br's first ssl:// listener (an
// unspecified host is br's advertised one), or "" when it has none.
func SSLListener(br controller.Broker) string {
	for _, l := range br.Listeners {
		hostPort, ok := strings.CutPrefix(l, "ssl://")
		if !ok {
			continue
		}
		host, port, err := net.SplitHostPort(hostPort)
		if err != nil || port == "" || port == "0" {
			continue
		}
		if ip := net.ParseIP(host); host == "" || ip != nil && ip.IsUnspecified() {
			host = br.Host
		}
		return net.JoinHostPort(host, port)
	}
	return ""
}

// close stops every fetcher and waits for them.
func (rf *replicaFetchers) close() {
	rf.mu.Lock()
	rf.closed = true
	fs := rf.byKey
	rf.byKey = nil
	rf.mu.Unlock()
	for _, f := range fs {
		f.Close()
	}
}

func hashPartition(tp key) uint32 {
	h := fnv.New32a()
	h.Write([]byte(tp.topic))
	h.Write([]byte{byte(tp.partition >> 24), byte(tp.partition >> 16), byte(tp.partition >> 8), byte(tp.partition)})
	return h.Sum32()
}

// checkpointHighWatermarks writes every hosted partition's high-water mark
// to the data directory's log checkpoints
// (replica.high.watermark.checkpoint.interval.ms), so that a restarted
// replica does not start from its log start: each log records its mark in
// them, in memory, and they are one file, written once, with the recovery
// points and leader-epoch histories the logs recorded since the last
// time. A pass stops early when the broker closes, which
// checkpoints every one as it closes the logs (Manager.closeAll).
func (m *Manager) checkpointHighWatermarks() {
	for _, h := range m.All() {
		select {
		case <-m.stop:
			return
		default:
		}
		if err := h.Log().CheckpointHighWatermark(h.HighWatermarkToCheckpoint()); err != nil && !errors.Is(err, log.ErrClosed) {
			m.log.Warn("checkpoint high-water mark", "partition", h.String(), "err", err)
		}
	}
	if err := m.checkpoints.Write(); err != nil {
		m.log.Warn("write the log checkpoints", "err", err)
	}
}

// errNoAddress: a broker this node has no address for: not registered,
// or without an ssl:// listener when the brokers speak TLS.
var errNoAddress = errors.New("partition: no address for the broker")

// PeerAddr is broker node's address for this node's other connections to
// it (peer.Nodes): its ssl:// listener when the brokers speak TLS
// (Config.PeerTLS), else its advertised host and port.
func (m *Manager) PeerAddr(node int32) (string, error) {
	br, ok := m.cfg.Controller.Image().Brokers[node]
	if !ok {
		return "", fmt.Errorf("%w: node %d is not registered", errNoAddress, node)
	}
	if m.cfg.PeerTLS != nil {
		addr := SSLListener(br)
		if addr == "" {
			return "", fmt.Errorf("%w: node %d has no ssl:// listener for the other brokers", errNoAddress, node)
		}
		return addr, nil
	}
	return net.JoinHostPort(br.Host, strconv.Itoa(int(br.Port))), nil
}
