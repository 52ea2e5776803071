// Package admin is the logic of mqctl: each command (topics, configs,
// records, cluster, groups) is a method of Admin
// that talks to the broker through kadm and returns a result value, and
// each result knows how to print itself as an aligned table (for people)
// or as JSON (for scripts). cmd/mqctl only wires flags to these methods.
//
// The JSON shapes are a stable contract (documented in mqctl's man page):
// fields are only ever added, never renamed or removed. Lists are sorted
// (topics by name, partitions by number, configs by name) so output is
// deterministic.
//
// Errors follow lib/client: a usage mistake is client.Usagef (exit 2), a
// refusal by the broker client.Failf (exit 1). When a command acts on
// several topics and only some fail, the result holds every outcome and
// the error names the failures, so stdout shows what happened and the exit
// status is still 1. ClusterHealth works the same way: a degraded cluster
// is its Health (printed) with a client.Failf error (exit 1); the judgement
// itself is assessHealth, a pure function of what the broker said.
package admin
