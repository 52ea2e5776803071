// Package tail is the logic of mqtail, the live terminal view of an mq
// cluster: collecting samples, deriving rates and lag history, and
// drawing them with bubbletea and lipgloss.
//
// A refresh goes Collector.Collect → Tracker.Observe → Model. The
// Collector reads one Sample through a kgo client made with ClientOptions
// (a request is retried for at most RetryTimeout; the next refresh asks
// again): lib/admin's brokers (DescribeBrokers), topic and group
// descriptions (the same ones mqctl prints, so lag in records and in time
// is computed in one place), the share groups as mqctl queue describe
// describes them (the queues view), the replicas' log sizes and each
// broker's upload lag to the remote store (lib/admin's
// DescribeAllLogDirs), the hung transactions cluster health reports
// (HungTransactions, skipped while a broker does not answer), and mq_topic_bytes_out_total from the brokers'
// Prometheus endpoints (--metrics; ParseText reads the text format). Before the topics it asks
// every broker the cluster counts as alive, and the controller quorum,
// each within a short timeout: those that do not answer are Unreachable, a
// quorum without controller is QuorumLost, one line of Errors each, and
// while a broker is down the topics are described around it (topicsAround:
// its partitions without offsets), so that one broker gone never hides the
// others. The Tracker keeps the previous sample and each group partition's
// lag history over a window; from them it derives a Snapshot: messages/s
// from high-water mark deltas, bytes/s in from the leader's log size
// deltas, bytes/s out from counter deltas, the lag sparkline's values, and
// the stalled mark (committed offset unchanged, lag above zero, over the
// whole window). Sample and Tracker take time from the sample, never a
// clock of their own, so tests feed them fixed data.
//
// Model is a bubbletea model that holds the last Snapshot and what the
// user looks at (view, cursor, filter, sort). A refresh runs as a command
// that calls Options.Fetch; its failure only marks the model disconnected
// (the last data stays on screen) and the next tick tries again, so a
// lost broker never ends the program, and every exit goes through
// bubbletea's terminal restore. Styles come from a lipgloss renderer: its
// colour profile (termenv's detection: NO_COLOR, TERM, not a terminal)
// decides whether there is colour, and every state is written in words
// as well, so that nothing is said by colour alone.
//
// Snapshot is also mqtail --once -o json's document (docs/mqtail.md):
// fields are only ever added; lists are sorted (brokers by id, topics and
// groups by name, partitions by number); unknown numbers are -1 and
// unknown rates null.
package tail
