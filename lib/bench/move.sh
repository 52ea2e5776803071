#!/bin/sh
# move.sh — `make perf-move`: what moving a big partition costs the
# clients (issue 33). It starts a 3-node cluster (deploy/cluster.sh, in a
# temporary directory, on the ports it is given) and adds a fourth node,
# fills one partition of topic "big" (replication factor 3) with SIZE_MB
# megabytes, and then, for each MODE, moves that partition's replica from
# node 1 to node 4 (or back, every other row) while mqbench produces to
# topic "live" (3 partitions, replication factor 3, acks=all) at RATE
# messages/s. One row per mode:
#   none   no throttle
#   fixed  --throttle FIXED (bytes/s)
#   auto   replication.throttle.auto.target.ms=TARGET on every broker, with
#          --throttle 1GB as the ceiling
# and a first row "idle", the same produce for DURATION seconds with no
# move running. The produce runs in slices of SLICE seconds, each its own
# mqbench run; a row counts the slices that ended during the move (the
# last one ends just after it). Columns: the move's seconds (--execute to
# --verify saying complete), the number of slices, the median and the
# worst of their produce p99 and the worst p99.9, in ms.
#
#   usage: [SIZE_MB=1000] [RATE=2000] [FIXED=50MB] [TARGET=10]
#          [DURATION=30] [SLICE=3] [MODES="none fixed auto"]
#          [MQ_CLUSTER_PORT=39092] [MQ_CLUSTER_RAFT=39192]
#          lib/bench/move.sh BINDIR
set -eu
bin=${1:?usage: move.sh BINDIR}
size_mb=${SIZE_MB:-1000}
rate=${RATE:-2000}
fixed=${FIXED:-50MB}
target=${TARGET:-10}
duration=${DURATION:-30}
slice=${SLICE:-3}
modes=${MODES:-none fixed auto}
MQ_CLUSTER_PORT=${MQ_CLUSTER_PORT:-39092}
MQ_CLUSTER_RAFT=${MQ_CLUSTER_RAFT:-39192}
MQ_CLUSTER_DIR=$(mktemp -d "${TMPDIR:-/tmp}/mq-move.XXXXXX")
MQ_BIN=$bin
export MQ_CLUSTER_PORT MQ_CLUSTER_RAFT MQ_CLUSTER_DIR MQ_BIN
here=$(dirname "$0")
cluster="$here/../../deploy/cluster.sh"
bootstrap=127.0.0.1:$MQ_CLUSTER_PORT
producer=
cleanup() {
	if [ -n "$producer" ] && kill -0 "$producer" 2>/dev/null; then
		kill -KILL "$producer" 2>/dev/null || true
	fi
	"$cluster" stop >/dev/null 2>&1 || true
	rm -rf "$MQ_CLUSTER_DIR"
}
trap cleanup EXIT
trap 'exit 130' INT TERM

# shellcheck source=lib/bench/common.sh
. "$here/common.sh"

mqctl() { "$bin/mqctl" -b "$bootstrap" "$@"; }

# The produce runs as back-to-back slices of SLICE seconds (each an
# mqbench run of RATE*SLICE messages, its JSON line appended to $slices)
# so that the latency of the time a move ran is told apart from the rest.
slices=$MQ_CLUSTER_DIR/slices.json
stopfile=$MQ_CLUSTER_DIR/stop

# produce starts the slices in the background until $stopfile exists;
# $producer is the loop's pid.
produce() {
	rm -f "$slices" "$stopfile"
	(
		until [ -e "$stopfile" ]; do
			"$bin/mqbench" -b "$bootstrap" -o json produce -t live -p 3 -r 3 -s 100 \
				--rate "$rate" -n $((rate * slice)) >>"$slices" 2>>"$slices.err" ||
				{ echo "move: mqbench failed:" >&2; cat "$slices.err" >&2; exit 1; }
		done
	) &
	producer=$!
}

# finish stops the slices (the running one ends first) and sets $result
# to how many there were, the median and the worst of their p99 and the
# worst p99.9, in ms.
finish() {
	touch "$stopfile"
	wait "$producer" || exit 1
	producer=
	result=$(sed -n 's/.*"latency_ms":{"p50":[0-9.e+-]*,"p99":\([0-9.e+-]*\),"p99.9":\([0-9.e+-]*\).*/\1 \2/p' "$slices" |
		sort -g | awk '{p99[NR] = $1; if ($2 > p999) p999 = $2}
			END {printf "%d %.2f %.2f %.2f", NR, p99[int((NR + 1) / 2)], p99[NR], p999}')
}

echo "move: $(nproc) CPUs; load average $(cut -d' ' -f1-3 /proc/loadavg); 3 nodes and a 4th added; a ${size_mb} MB partition, replication factor 3; produce $rate msgs/s of 100 bytes, acks=all, 3 partitions" >&2
"$cluster" start >/dev/null
# big before the 4th node: its replicas are on nodes 1, 2 and 3
mqctl topic create -p 1 -r 3 big >/dev/null
"$bin/mqbench" -b "$bootstrap" produce -t big -s 1000 --acks 1 -n $((size_mb * 1000)) >/dev/null
"$cluster" add-node >/dev/null
mqctl topic create -p 3 -r 3 live >/dev/null

# the followers of big have copied it all before anything is timed
until [ "$(mqctl topic describe --under-replicated 2>/dev/null | tail -n +2 | grep -c .)" = 0 ]; do
	sleep 0.5
done
row='%-6s %8s %7s %12s %11s %12s\n'
printf "$row" mode move-s slices median-p99 worst-p99 worst-p99.9
produce
sleep "$duration"
finish
printf "$row" idle - $result

from=1 to=4
for mode in $modes; do
	replicas=$(mqctl -o json topic describe big | sed -n 's/.*"replicas":\[\([0-9,]*\)\].*/\1/p' | head -1)
	plan="{\"version\":1,\"partitions\":[{\"topic\":\"big\",\"partition\":0,\"replicas\":[$(echo "$replicas" | sed "s/\b$from\b/$to/")]}]}"
	echo "$plan" >"$MQ_CLUSTER_DIR/plan.json"
	case $mode in
	none) throttle= ;;
	fixed) throttle="--throttle $fixed" ;;
	auto)
		throttle="--throttle 1GB"
		mqctl config set broker "replication.throttle.auto.target.ms=$target" >/dev/null
		;;
	*) echo "move: unknown mode $mode" >&2; exit 2 ;;
	esac
	produce
	# one slice before the move starts, so that it starts on a running producer
	until [ -s "$slices" ]; do sleep 0.1; done
	: >"$slices"
	t0=$(now)
	# shellcheck disable=SC2086 # $throttle is two words or none
	mqctl partition reassign --execute "$MQ_CLUSTER_DIR/plan.json" $throttle >/dev/null 2>&1
	until mqctl partition reassign --verify "$MQ_CLUSTER_DIR/plan.json" >/dev/null 2>&1; do
		sleep 0.2
	done
	took=$(since "$t0")
	finish
	printf "$row" "$mode" "$took" $result
	if [ "$mode" = auto ]; then
		mqctl config set broker -d replication.throttle.auto.target.ms >/dev/null
	fi
	t=$from from=$to to=$t
done
