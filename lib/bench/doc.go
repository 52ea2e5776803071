// Package bench is the load generator and latency probe behind mqbench: it
// produces, consumes and measures end-to-end latency against any
// Kafka-compatible broker through franz-go clients, and formats the
// results.
//
// A run (Produce, Consume, E2E) is configured by a plain struct, creates
// its own kgo clients through a Dialer (normally lib/client.NewClient for
// the resolved broker addresses) and returns a Result. Results print as one
// summary line for people (WriteResult with client.FormatTable) or as one
// JSON object per line for scripts (client.FormatJSON); Suite runs the
// standard set of runs of `make perf` and prints one table of medians.
//
// Latencies are kept in Hist, a log-bucketed histogram with a relative
// error below 1/64 (1.6 %) that is safe for concurrent Record calls, so
// that every produce acknowledgment can be timed without a lock. Target
// rates are kept by Pacer, which schedules message i at start + i/rate, so
// a producer that falls behind catches up in a burst instead of drifting.
//
// Nothing here decodes or builds batches by hand: mqbench is a Kafka client
// like any other, so what it measures is what an application would see.
// Throughput counts key and value bytes, in decimal megabytes (1 MB =
// 1,000,000 bytes).
package bench
