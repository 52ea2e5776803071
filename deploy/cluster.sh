#!/bin/sh
# A cluster of mqd nodes on this machine, for trying mq out and for
# development: deploy/cluster.sh start|stop|status|clean|start-node N|
# add-node (make cluster, make cluster-stop).
#
#   MQ_CLUSTER_DIR    where the nodes keep data, logs and pid files
#                     (default /tmp/mq-cluster): node1/, node2/, ...
#   MQ_CLUSTER_NODES  how many nodes start (default 3), all voters
#   MQ_CLUSTER_PORT   node 1's Kafka port (default 19092); node N's is +N-1
#   MQ_CLUSTER_RAFT   node 1's Raft port (default 19192); node N's is +N-1
#   MQ_BIN            where mqd and mqctl are (default bin, as make builds)
#
# start prints the bootstrap list once every node serves Metadata listing
# every broker; stop sends SIGTERM to every node at once (a controlled
# shutdown each) and waits for them; clean removes MQ_CLUSTER_DIR of a
# stopped cluster; start-node N starts node N again (after a SIGTERM to
# the pid in nodeN/mqd.pid, say: one step of a rolling restart) and
# returns at once, its log saying "mqd serving" when it is ready.
# add-node starts one more node, a broker and a non-voter of the quorum
# (--raft-address), and returns once every node lists it: it joins
# empty, and mqctl cluster rebalance moves partitions onto it. Nodes
# added are part of the cluster from then on (stop, status, start-node).
set -eu

dir=${MQ_CLUSTER_DIR:-/tmp/mq-cluster}
nodes=${MQ_CLUSTER_NODES:-3}
port=${MQ_CLUSTER_PORT:-19092}
raft=${MQ_CLUSTER_RAFT:-19192}
bin=${MQ_BIN:-bin}

die() { echo "cluster.sh: $*" >&2; exit 1; }

# ids lists the voters and the nodes add-node started after them.
ids() {
	n=$nodes
	while [ -d "$dir/node$((n + 1))" ]; do n=$((n + 1)); done
	seq 1 "$n"
}
kafka_addr() { echo "127.0.0.1:$((port + $1 - 1))"; }
raft_addr() { echo "127.0.0.1:$((raft + $1 - 1))"; }

bootstrap() {
	list=
	for i in $(ids); do list="${list:+$list,}$(kafka_addr "$i")"; done
	echo "$list"
}

voters() {
	list=
	for i in $(seq 1 "$nodes"); do list="${list:+$list,}$i@$(raft_addr "$i")"; done
	echo "$list"
}

# pid_of N prints node N's pid when it runs.
pid_of() {
	f="$dir/node$1/mqd.pid"
	[ -f "$f" ] || return 1
	pid=$(cat "$f")
	kill -0 "$pid" 2>/dev/null || return 1
	echo "$pid"
}

# failed stops the nodes a start left running, then fails with $1.
# failed stops the nodes a start left running (or, for add-node, the node
# it added), then fails with $1.
failed() {
	if [ -n "${adding:-}" ]; then
		pid=$(pid_of "$adding") && kill -TERM "$pid"
		rm -rf "$dir/node$adding"
	else
		stop >/dev/null
	fi
	die "$1"
}

# launch N starts node N in the background, its pid in nodeN/mqd.pid.
# A node beyond the voters joins the quorum as a non-voter.
launch() {
	mkdir -p "$dir/node$1"
	nonvoter=
	[ "$1" -le "$nodes" ] || nonvoter="--raft-address $(raft_addr "$1")"
	# shellcheck disable=SC2086 # nonvoter is two words or none
	"$bin/mqd" --node-id "$1" --voters "$(voters)" --data-dir "$dir/node$1/data" \
		--listen "tcp://$(kafka_addr "$1")" --advertise "$(kafka_addr "$1")" $nonvoter \
		>>"$dir/node$1/mqd.log" 2>&1 &
	echo $! >"$dir/node$1/mqd.pid"
}

# await_brokers waits until every node in ids lists as many brokers.
await_brokers() {
	want=$(ids | wc -l)
	tries=0
	while :; do
		ready=yes
		for i in $(ids); do
			pid_of "$i" >/dev/null || failed "node $i exited; the end of $dir/node$i/mqd.log:
$(tail -n 5 "$dir/node$i/mqd.log")"
			n=$("$bin/mqctl" -b "$(kafka_addr "$i")" cluster describe -o json 2>/dev/null | grep -o '"id":[0-9]*,"host"' | wc -l) || n=0
			[ "$n" -eq "$want" ] || ready=no
		done
		[ "$ready" = yes ] && break
		tries=$((tries + 1))
		[ "$tries" -lt 300 ] || failed "the cluster is not ready after 60s; logs in $dir/node*/mqd.log"
		sleep 0.2
	done
}

start() {
	[ -x "$bin/mqd" ] && [ -x "$bin/mqctl" ] || die "no $bin/mqd or $bin/mqctl: run make build first (or set MQ_BIN)"
	for i in $(ids); do
		if pid=$(pid_of "$i"); then die "node $i is running already (pid $pid): deploy/cluster.sh stop first"; fi
	done
	for i in $(ids); do
		launch "$i"
	done
	# Ready when every node lists every broker; give up after 60 s.
	b=$(bootstrap)
	await_brokers
	echo "mq cluster of $(ids | wc -l) nodes in $dir"
	echo "bootstrap: $b"
	echo "try: $bin/mqctl -b $b cluster describe"
}

stop() {
	pids=
	for i in $(ids); do
		if pid=$(pid_of "$i"); then
			kill -TERM "$pid"
			pids="$pids $i:$pid"
		fi
	done
	[ -n "$pids" ] || { echo "no node of $dir is running"; return 0; }
	for entry in $pids; do
		i=${entry%%:*} pid=${entry#*:}
		tries=0
		while kill -0 "$pid" 2>/dev/null; do
			tries=$((tries + 1))
			if [ "$tries" -ge 300 ]; then
				echo "cluster.sh: node $i (pid $pid) did not stop within 60s of SIGTERM; killing it" >&2
				kill -KILL "$pid" 2>/dev/null || true
				break
			fi
			sleep 0.2
		done
		rm -f "$dir/node$i/mqd.pid"
		echo "node $i stopped"
	done
}

status() {
	running=0
	for i in $(ids); do
		if pid=$(pid_of "$i"); then
			echo "node $i  $(kafka_addr "$i")  running (pid $pid)"
			running=$((running + 1))
		else
			echo "node $i  $(kafka_addr "$i")  stopped"
		fi
	done
	if [ "$running" -gt 0 ]; then
		echo "bootstrap: $(bootstrap)"
		[ -x "$bin/mqctl" ] && "$bin/mqctl" -b "$(bootstrap)" cluster describe || true
	fi
}

start_node() {
	case "$1" in
	'' | *[!0-9]*) usage ;;
	esac
	[ "$1" -ge 1 ] && [ "$1" -le "$(ids | tail -n 1)" ] || usage
	if pid=$(pid_of "$1"); then die "node $1 is running already (pid $pid)"; fi
	launch "$1"
	echo "node $1 started (pid $(cat "$dir/node$1/mqd.pid")); its log: $dir/node$1/mqd.log"
}

add_node() {
	[ -x "$bin/mqd" ] && [ -x "$bin/mqctl" ] || die "no $bin/mqd or $bin/mqctl: run make build first (or set MQ_BIN)"
	for i in $(ids); do
		pid_of "$i" >/dev/null || die "node $i is not running: deploy/cluster.sh start (or start-node $i) first"
	done
	id=$(($(ids | tail -n 1) + 1))
	adding=$id
	launch "$id"
	await_brokers
	echo "node $id joined (pid $(cat "$dir/node$id/mqd.pid")) at $(kafka_addr "$id"), a non-voter holding no partition yet"
	echo "fill it: $bin/mqctl -b $(bootstrap) cluster rebalance"
}

clean() {
	for i in $(ids); do
		if pid=$(pid_of "$i"); then die "node $i is running (pid $pid): deploy/cluster.sh stop first"; fi
	done
	rm -rf "$dir"
	echo "removed $dir"
}

usage() {
	echo "usage: deploy/cluster.sh start|stop|status|clean|start-node N (1..$(ids | tail -n 1))|add-node" >&2
	exit 2
}

case "${1:-}" in
start) start ;;
stop) stop ;;
status) status ;;
clean) clean ;;
start-node) start_node "${2:-}" ;;
add-node) add_node ;;
*) usage ;;
esac
