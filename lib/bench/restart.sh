#!/bin/sh
# restart.sh — `make perf-restart`: one step of a rolling restart of a
# 3-node cluster with many partitions (issue 19). It starts a cluster
# (deploy/cluster.sh, in a temporary directory, on the ports it is given),
# creates TOPICS topics of PARTITIONS partitions each with replication
# factor 3, waits until every ISR is full, produces MESSAGES keyed messages
# over the first topic, then times, in seconds:
#   sigterm   node 2's controlled shutdown, from SIGTERM to exit
#   ready     its start again, until it logs "mqd serving"
#   isr-full  from that start until no partition is under-replicated
#             (mqctl topic describe --under-replicated prints none): every
#             leader has seen node 2 catch up and the controller has
#             committed it back into every ISR
# RUNS times (default 1), each on a fresh cluster, one row each.
#
#   usage: [TOPICS=10] [PARTITIONS=1000] [MESSAGES=200000] [RUNS=1]
#          [MQ_CLUSTER_PORT=29092] [MQ_CLUSTER_RAFT=29192] lib/bench/restart.sh BINDIR
set -eu
bin=${1:?usage: restart.sh BINDIR}
topics=${TOPICS:-10}
partitions=${PARTITIONS:-1000}
messages=${MESSAGES:-200000}
runs=${RUNS:-1}
MQ_CLUSTER_PORT=${MQ_CLUSTER_PORT:-29092}
MQ_CLUSTER_RAFT=${MQ_CLUSTER_RAFT:-29192}
MQ_CLUSTER_DIR=$(mktemp -d "${TMPDIR:-/tmp}/mq-restart.XXXXXX")
MQ_BIN=$bin
export MQ_CLUSTER_PORT MQ_CLUSTER_RAFT MQ_CLUSTER_DIR MQ_BIN
here=$(dirname "$0")
cluster="$here/../../deploy/cluster.sh"
bootstrap=127.0.0.1:$MQ_CLUSTER_PORT
pid=
cleanup() {
	if [ -n "$pid" ] && kill -0 "$pid" 2>/dev/null; then
		kill -KILL "$pid" 2>/dev/null || true
	fi
	"$cluster" stop >/dev/null 2>&1 || true
	rm -rf "$MQ_CLUSTER_DIR"
}
trap cleanup EXIT
trap 'exit 130' INT TERM

# shellcheck source=lib/bench/common.sh
. "$here/common.sh"

# under_replicated prints how many partitions are, or nothing when the
# cluster cannot say.
under_replicated() {
	out=$("$bin/mqctl" -b "$bootstrap" topic describe --under-replicated 2>/dev/null) || return 0
	printf '%s\n' "$out" | tail -n +2 | grep -c . || true
}

# full waits until no partition is under-replicated.
full() {
	until [ "$(under_replicated)" = 0 ]; do
		sleep 0.2
	done
}

log=$MQ_CLUSTER_DIR/node2/mqd.log
echo "restart: $(nproc) CPUs; load average $(cut -d' ' -f1-3 /proc/loadavg); 3 nodes; $topics topics of $partitions partitions, replication factor 3; $messages messages" >&2
printf '%-4s %8s %8s %9s\n' run sigterm ready isr-full
run=1
while [ "$run" -le "$runs" ]; do
	"$cluster" stop >/dev/null 2>&1 || true
	rm -rf "${MQ_CLUSTER_DIR:?}"/node*
	"$cluster" start >/dev/null
	i=0
	while [ "$i" -lt "$topics" ]; do
		"$bin/mqctl" -b "$bootstrap" topic create -p "$partitions" -r 3 "t$i" >/dev/null
		i=$((i + 1))
	done
	full
	"$bin/mqbench" -b "$bootstrap" produce -t t0 --keys 100000 -n "$messages" >/dev/null 2>&1

	pid=$(cat "$MQ_CLUSTER_DIR/node2/mqd.pid")
	t0=$(now)
	kill -TERM "$pid"
	while kill -0 "$pid" 2>/dev/null; do
		sleep 0.02
	done
	sigterm=$(since "$t0")

	served=$(servings "$log")
	t0=$(now)
	"$cluster" start-node 2 >/dev/null
	pid=$(cat "$MQ_CLUSTER_DIR/node2/mqd.pid")
	await_serving "$log" "$served" "$pid" "restart: node 2"
	ready=$(since "$t0")
	full
	isr_full=$(since "$t0")
	printf '%-4s %8s %8s %9s\n' "$run" "$sigterm" "$ready" "$isr_full"
	run=$((run + 1))
done
