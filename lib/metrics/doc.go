// Package metrics is mqd's Prometheus registry: the collectors behind
// the /metrics endpoint of mqd --metrics (docs/metrics.md lists every
// series).
//
// Two kinds of metric live here, so that the produce and fetch paths pay
// nothing for being watched:
//
//   - Counters and histograms that must see every event are fed through
//     hooks that lower packages own and this package implements:
//     Metrics.Answered is a lib/server Observer (requests, errors,
//     latency), and Metrics.ObserveFsync is given to lib/vfs's Timed
//     (fsync latency). Each costs an atomic add or a histogram
//     observation; with no Metrics (metrics off) the hooks are nil and
//     cost nothing.
//   - Everything else is read at scrape time from a Source (lib/node's
//     Daemon): partition offsets and sizes, leadership, the controller's
//     Raft state, groups and their lag, share groups and their
//     share-partitions' windows, connections, and per-topic traffic
//     counters that lib/partition keeps as plain atomics (the broker adds
//     to them). A scrape costs in
//     proportion to the partitions and group partitions the node hosts;
//     Config.PartitionSeries false keeps the output small (no series with
//     a partition label) when that is large.
//
// The names and labels are a public interface (dashboards, mqtail): the
// table in docs/metrics.md and the e2e test that scrapes a real mqd
// keep them, and a change to either is a change to both.
//
// A Metrics is safe for concurrent use. Its Source is called once per
// scrape, concurrently with everything else the node does, and may be
// called by concurrent scrapes at once.
package metrics
