// Package pipe is the logic of mqpipe: moving messages between Unix pipes
// and topics.
//
// Produce reads messages from files or stdin (LineReader: newline- or
// NUL-delimited, of any length up to the topic's max.message.bytes, an
// overlong one skipped and reported by line number; or with --whole-file
// each input whole, as kcat -P FILE), turns each into a
// record (text, -K/-k keys, or a JSON envelope with DecodeJSON; with -Z
// an empty key or value becomes null, and --tombstone sends null values
// for the keys it names without reading input), places it
// with Partitioner (explicit partition, else Kafka's murmur2 of the key,
// else sticky) and waits for every acknowledgement, in batches no larger
// than one request it writes (maxBatchBytes) whatever the topic allows. It
// succeeds only when every message was acknowledged; otherwise its error
// counts and lists the lines not sent (refused before sending: too long,
// not a JSON envelope) apart from those sent and not acknowledged.
//
// Consume reads the topics of -t: names, and regular expressions (values
// starting with ^, topicSpec), resolved once with -e and followed to
// topics created later without. It reads partitions directly from
// offsets computed by OffsetSpec (beginning, end, N, -N, @TIME; an end
// at a time with ParseOffsets' e@TIME), prints each record with a Format
// (kcat's %-tokens; null prints as nothing, or as NullText with -Z), as
// kcat -J does (AppendKcatJSON, with the broker each partition was fetched
// from, fetchBrokers) or as a JSON envelope (AppendJSON), keeps the order
// of each partition, and with -e stops at the high-water marks listed when
// it started. A closed stdout ends it successfully, noticed at once for a
// pipe or Unix socket whose reader went away (watchOutput), not only at
// the next write; so does a stop by SIGTERM (client.ErrTerminated).
//
// The JSON envelope is defined once, by AppendJSON and DecodeJSON: what
// consume --json prints, produce --format json reads back exactly (keys,
// values, headers, timestamps, partitions; null stays null, bytes that are
// not UTF-8 travel as base64). kcat's JSON (consume -J) is for scripts
// written for kcat: the lines kcat -J prints; nothing reads it back.
//
// Exec (mqpipe exec) runs a command once per message: RunExec takes
// messages from a Source and reports each one's outcome exactly once
// (Accept after exit 0, Release to retry after a backoff, Fail after the
// last attempt), with the record in MQ_ environment variables (Env*,
// HeaderEnvName), -j commands at once, each in its own process group,
// killed past --timeout or the grace period of a stop. Its sources are a
// share group (shareSource) and, with --ordered, a consumer group that
// keeps per-key order and commits contiguous prefixes (orderedSource);
// both dead-letter with DeadLetter, whose headers are kafkaext's DLQ*.
// Before a share group's worker joins, prepareShareGroup starts a new
// group at the earliest offset (client.StartShareGroup; --start) and
// makes --dlq the group's dead-letter topic when it has none.
//
// Every lookup a command makes before it reads or writes (topics,
// offsets, a group's committed offsets) asks again while the broker's
// answer is retriable (client.Retry), so a command run while mqd
// restarts or a cluster elects leaders waits instead of failing.
//
// Errors meant for the user are *client.Error values carrying the exit
// status (client.Usagef, client.Failf); a cancelled context is an
// interruption.
package pipe
