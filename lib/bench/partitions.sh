#!/bin/sh
# partitions.sh — `make perf-partitions`: how mqd's lifecycle grows with the
# number of partitions it hosts (issue 19). For each count in COUNTS (default
# "10 10000") it starts a fresh mqd on a temporary directory and times, in
# seconds:
#   create   TOPICS topics of COUNT/TOPICS partitions, one mqctl topic create
#            each, until every partition answers ListOffsets
#   produce  MESSAGES messages spread over all of them (mqbench produce,
#            keys drawn from 100,000, so every partition gets some)
#   fetch    reading them all back (mqbench consume)
#   sigterm  from SIGTERM to exit (the clean shutdown)
#   clean    start after that shutdown, until mqd is ready: it logs "mqd
#            serving" (and tells systemd READY=1) once every partition is
#            open and led; one mqctl topic describe then checks that every
#            partition answers ListOffsets, and the run fails if one does not
#   kill     the same after a SIGKILL
# A client polling during the start is not what is timed: on two cores its
# retries (a describe of 10,000 partitions is 0.3 s of CPU) slowed the
# opening it waited for by half.
# then the throughput of one topic of COUNT partitions on a fresh mqd, in
# millions of messages a second:
#   produce/s    RATE_MESSAGES messages without keys (mqbench produce)
#   fetch/s      reading them back once (mqbench consume --direct)
#   64k-prod/s, 64k-fetch/s
#                the same with batches of at most 64 KiB (--batch-bytes)
# RATE_RUNS times (default 3), the counts taking turns so that a slow spell
# of the machine falls on all of them, and reports each count's median. It
# prints one row per count, every run's rates, then each count's median
# throughput as a share of the first count's.
#
# Why 64 KiB batches too: spread over 10,000 partitions, 10M messages of
# 100 bytes are about 110 KB a partition, so the producer's batches are
# about 64 KiB (its partitioner moves on after 64 KiB), while over 10
# partitions they grow to 300 KB. The consumer pays per batch, so fetch/s
# compares batch sizes as much as partition counts; the 64k columns
# compare the counts alone.
#
#   usage: [COUNTS="10 10000"] [TOPICS=10] [MESSAGES=200000] [RATE_MESSAGES=10000000] [RATE_RUNS=3] lib/bench/partitions.sh BINDIR
set -eu
bin=${1:?usage: partitions.sh BINDIR}
counts=${COUNTS:-10 10000}
topics=${TOPICS:-10}
messages=${MESSAGES:-200000}
rate_messages=${RATE_MESSAGES:-10000000}
rate_runs=${RATE_RUNS:-3}
dir=$(mktemp -d "${TMPDIR:-/tmp}/mq-partitions.XXXXXX")
pid=
cleanup() {
	if [ -n "$pid" ] && kill -0 "$pid" 2>/dev/null; then
		kill -KILL "$pid" 2>/dev/null || true
		wait "$pid" 2>/dev/null || true
	fi
	rm -rf "$dir"
}
trap cleanup EXIT
trap 'exit 130' INT TERM

# shellcheck source=lib/bench/common.sh
. "$(dirname "$0")/common.sh"

start_mqd() {
	rm -f "$sock"
	started=$(servings "$dir/mqd.log")
	"$bin/mqd" --data-dir "$data" --listen "unix://$sock" 2>>"$dir/mqd.log" &
	pid=$!
	until [ -S "$sock" ]; do
		kill -0 "$pid" 2>/dev/null || { echo "partitions: mqd exited:" >&2; tail -20 "$dir/mqd.log" >&2; exit 1; }
		sleep 0.02
	done
}

# names prints the topics' names.
names() {
	i=0
	while [ "$i" -lt "$topics" ]; do
		printf 't%d ' "$i"
		i=$((i + 1))
	done
}

# serving waits until every partition of every topic answers ListOffsets
# (mqctl topic describe shows each partition's offsets, or fails). One
# mqctl asks for all the topics: one process per topic would add ten
# starts of mqctl (about 0.1 s each) to every figure.
serving() {
	# shellcheck disable=SC2086 # the names are words
	until out=$("$bin/mqctl" -b "unix://$sock" -o json topic describe $(names) 2>/dev/null) &&
		! printf '%s' "$out" | grep -q '"error"\|"leader":-1'; do
		sleep 0.05
	done
}

# ready waits until the mqd start_mqd started logs that it is serving,
# sets ready_at to that time, then checks that every partition answers.
ready() {
	await_serving "$dir/mqd.log" "$started" "$pid" partitions
	ready_at=$(now)
	# shellcheck disable=SC2086 # the names are words
	if ! out=$("$bin/mqctl" -b "unix://$sock" -o json topic describe $(names) 2>&1) ||
		printf '%s' "$out" | grep -q '"error"\|"leader":-1'; then
		echo "partitions: mqd is serving, but not every partition answers:" >&2
		printf '%s\n' "$out" | grep -m 5 '"error"\|"leader":-1\|mqctl' >&2
		exit 1
	fi
}

stop_mqd() { # signal
	kill "-$1" "$pid"
	wait "$pid" 2>/dev/null || true
	pid=
}

# rate runs mqbench -o json ARGS... and prints its msgs_per_sec in millions.
rate() {
	"$bin/mqbench" -b "unix://$sock" -o json "$@" | sed -n 's/.*"msgs_per_sec":\([0-9.e+]*\).*/\1/p' | awk '{printf "%.2f", $1 / 1e6}'
}

# median prints the median of its arguments.
median() {
	printf '%s\n' "$@" | sort -n | awk '{v[NR] = $1} END {printf "%.2f", NR % 2 ? v[(NR + 1) / 2] : (v[NR / 2] + v[NR / 2 + 1]) / 2}'
}

echo "partitions: $(nproc) CPUs; load average $(cut -d' ' -f1-3 /proc/loadavg); $topics topics; $messages messages; $rate_messages for throughput, $rate_runs runs" >&2
for n in $counts; do
	data="$dir/data-$n"
	sock="$dir/mqd-$n.sock"
	per=$(((n + topics - 1) / topics))
	start_mqd
	t0=$(now)
	i=0
	while [ "$i" -lt "$topics" ]; do
		"$bin/mqctl" -b "unix://$sock" topic create -p "$per" "t$i" >/dev/null
		i=$((i + 1))
	done
	serving
	create=$(since "$t0")
	t0=$(now)
	i=0
	while [ "$i" -lt "$topics" ]; do
		"$bin/mqbench" -b "unix://$sock" produce -t "t$i" --keys 100000 -n $((messages / topics)) >/dev/null 2>&1
		i=$((i + 1))
	done
	produce=$(since "$t0")
	t0=$(now)
	i=0
	while [ "$i" -lt "$topics" ]; do
		"$bin/mqbench" -b "unix://$sock" consume -t "t$i" -n $((messages / topics)) >/dev/null 2>&1
		i=$((i + 1))
	done
	fetch=$(since "$t0")
	t0=$(now)
	stop_mqd TERM
	sigterm=$(since "$t0")
	t0=$(now)
	start_mqd
	ready
	clean=$(since "$t0" "$ready_at")
	stop_mqd KILL
	t0=$(now)
	start_mqd
	ready
	killed=$(since "$t0" "$ready_at")
	stop_mqd TERM
	rm -rf "$data"
	eval "row_$n=\"$create $produce $fetch $sigterm $clean $killed\"" "produce_$n=" "fetch_$n=" "b64k_produce_$n=" "b64k_fetch_$n="
done

# rates PREFIX [PRODUCE FLAGS...] produces RATE_MESSAGES to a new topic of
# $n partitions on a fresh mqd, reads them back, and appends the two rates
# to ${PREFIX}produce_$n and ${PREFIX}fetch_$n.
rates() {
	prefix=$1
	shift
	data="$dir/rate-$n"
	sock="$dir/mqd-$n.sock"
	start_mqd
	"$bin/mqctl" -b "unix://$sock" topic create -p "$n" rate >/dev/null
	p=$(rate produce -t rate -n "$rate_messages" "$@")
	f=$(rate consume -t rate --direct -n "$rate_messages")
	stop_mqd TERM
	rm -rf "$data"
	eval "${prefix}produce_$n=\"\$${prefix}produce_$n $p\"" "${prefix}fetch_$n=\"\$${prefix}fetch_$n $f\""
}

run=1
while [ "$run" -le "$rate_runs" ]; do
	for n in $counts; do
		rates ""
		rates b64k_ --batch-bytes 65536
	done
	run=$((run + 1))
done

# The medians of each count: mp, mf with the default batches; bp, bf with
# 64 KiB ones.
medians() {
	for series in produce fetch b64k_produce b64k_fetch; do
		eval "runs=\$${series}_$1"
		# shellcheck disable=SC2086 # the runs are words
		eval "med_$series=$(median $runs)"
	done
	# shellcheck disable=SC2154 # set by the eval above
	mp=$med_produce mf=$med_fetch bp=$med_b64k_produce bf=$med_b64k_fetch
}

printf '%-10s %8s %8s %8s %8s %8s %8s %10s %10s %11s %11s\n' partitions create produce fetch sigterm clean kill produce/s fetch/s 64k-prod/s 64k-fetch/s
for n in $counts; do
	eval "row=\$row_$n"
	medians "$n"
	# shellcheck disable=SC2086 # the row is words
	printf '%-10s %8s %8s %8s %8s %8s %8s %10s %10s %11s %11s\n' "$n" $row "$mp" "$mf" "$bp" "$bf"
done
for n in $counts; do
	eval "echo \"runs at $n partitions: produce/s\$produce_$n; fetch/s\$fetch_$n; with 64 KiB batches, produce/s\$b64k_produce_$n; fetch/s\$b64k_fetch_$n\""
done
first=
for n in $counts; do
	medians "$n"
	if [ -z "$first" ]; then
		first=$n f_mp=$mp f_mf=$mf f_bp=$bp f_bf=$bf
		continue
	fi
	echo "$n $first $mp $f_mp $mf $f_mf $bp $f_bp $bf $f_bf" |
		awk '{printf "median throughput at %s partitions vs %s: produce %.0f %%, fetch %.0f %%; with 64 KiB batches at both, produce %.0f %%, fetch %.0f %%\n", $1, $2, 100 * $3 / $4, 100 * $5 / $6, 100 * $7 / $8, 100 * $9 / $10}'
done
