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
#   clean    start after that shutdown, until every partition answers
#   kill     start after a SIGKILL, until every partition answers
# then the throughput of one topic of COUNT partitions on a fresh mqd, in
# millions of messages a second:
#   produce/s  RATE_MESSAGES messages without keys (mqbench produce)
#   fetch/s    reading them back once (mqbench consume --direct)
# RATE_RUNS times (default 3), the counts taking turns so that a slow spell
# of the machine falls on all of them, and reports each count's median. It
# prints one row per count, every run's rates, then each count's median
# throughput as a share of the first count's.
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

now() { date +%s.%N; }
since() { echo "$(now) $1" | awk '{printf "%.2f", $1 - $2}'; }

start_mqd() {
	rm -f "$sock"
	"$bin/mqd" --data-dir "$data" --listen "unix://$sock" 2>>"$dir/mqd.log" &
	pid=$!
	until [ -S "$sock" ]; do
		kill -0 "$pid" 2>/dev/null || { echo "partitions: mqd exited:" >&2; tail -20 "$dir/mqd.log" >&2; exit 1; }
		sleep 0.02
	done
}

# serving waits until every partition of every topic answers ListOffsets
# (mqctl topic describe shows each partition's offsets, or fails).
serving() {
	i=0
	while [ "$i" -lt "$topics" ]; do
		if ! out=$("$bin/mqctl" -b "unix://$sock" -o json topic describe "t$i" 2>/dev/null) ||
			printf '%s' "$out" | grep -q '"error"\|"leader":-1'; then
			sleep 0.05
			continue
		fi
		i=$((i + 1))
	done
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
	serving
	clean=$(since "$t0")
	stop_mqd KILL
	t0=$(now)
	start_mqd
	serving
	killed=$(since "$t0")
	stop_mqd TERM
	rm -rf "$data"
	eval "row_$n=\"$create $produce $fetch $sigterm $clean $killed\"" "produce_$n=" "fetch_$n="
done

run=1
while [ "$run" -le "$rate_runs" ]; do
	for n in $counts; do
		data="$dir/rate-$n"
		sock="$dir/mqd-$n.sock"
		start_mqd
		"$bin/mqctl" -b "unix://$sock" topic create -p "$n" rate >/dev/null
		p=$(rate produce -t rate -n "$rate_messages")
		f=$(rate consume -t rate --direct -n "$rate_messages")
		stop_mqd TERM
		rm -rf "$data"
		eval "produce_$n=\"\$produce_$n $p\"" "fetch_$n=\"\$fetch_$n $f\""
	done
	run=$((run + 1))
done

printf '%-10s %8s %8s %8s %8s %8s %8s %10s %10s\n' partitions create produce fetch sigterm clean kill produce/s fetch/s
for n in $counts; do
	eval "row=\$row_$n runs_produce=\$produce_$n runs_fetch=\$fetch_$n"
	# shellcheck disable=SC2086 # the runs are words
	eval "med_produce_$n=$(median $runs_produce) med_fetch_$n=$(median $runs_fetch)"
	eval "mp=\$med_produce_$n mf=\$med_fetch_$n"
	# shellcheck disable=SC2086
	printf '%-10s %8s %8s %8s %8s %8s %8s %10s %10s\n' "$n" $row "$mp" "$mf"
done
for n in $counts; do
	eval "echo \"runs at $n partitions: produce/s\$produce_$n; fetch/s\$fetch_$n\""
done
first=
for n in $counts; do
	eval "mp=\$med_produce_$n mf=\$med_fetch_$n"
	if [ -z "$first" ]; then
		first=$n first_produce=$mp first_fetch=$mf
		continue
	fi
	echo "$n $first $mp $first_produce $mf $first_fetch" |
		awk '{printf "median throughput at %s partitions vs %s: produce %.0f %%, fetch %.0f %%\n", $1, $2, 100 * $3 / $4, 100 * $5 / $6}'
done
