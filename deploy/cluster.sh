#!/bin/sh
# A cluster of mqd nodes on this machine, for trying mq out and for
# development: deploy/cluster.sh start|stop|status|clean|start-node N
# (make cluster, make cluster-stop).
#
#   MQ_CLUSTER_DIR    where the nodes keep data, logs and pid files
#                     (default /tmp/mq-cluster): node1/, node2/, ...
#   MQ_CLUSTER_NODES  how many nodes (default 3), all voters
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
set -eu

dir=${MQ_CLUSTER_DIR:-/tmp/mq-cluster}
nodes=${MQ_CLUSTER_NODES:-3}
port=${MQ_CLUSTER_PORT:-19092}
raft=${MQ_CLUSTER_RAFT:-19192}
bin=${MQ_BIN:-bin}

die() { echo "cluster.sh: $*" >&2; exit 1; }

ids() { seq 1 "$nodes"; }
kafka_addr() { echo "127.0.0.1:$((port + $1 - 1))"; }
raft_addr() { echo "127.0.0.1:$((raft + $1 - 1))"; }

bootstrap() {
	list=
	for i in $(ids); do list="${list:+$list,}$(kafka_addr "$i")"; done
	echo "$list"
}

voters() {
	list=
	for i in $(ids); do list="${list:+$list,}$i@$(raft_addr "$i")"; done
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
failed() {
	stop >/dev/null
	die "$1"
}

# launch N starts node N in the background, its pid in nodeN/mqd.pid.
launch() {
	mkdir -p "$dir/node$1"
	"$bin/mqd" --node-id "$1" --voters "$(voters)" --data-dir "$dir/node$1/data" \
		--listen "tcp://$(kafka_addr "$1")" --advertise "$(kafka_addr "$1")" \
		>>"$dir/node$1/mqd.log" 2>&1 &
	echo $! >"$dir/node$1/mqd.pid"
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
	tries=0
	while :; do
		ready=yes
		for i in $(ids); do
			pid_of "$i" >/dev/null || failed "node $i exited; the end of $dir/node$i/mqd.log:
$(tail -n 5 "$dir/node$i/mqd.log")"
			n=$("$bin/mqctl" -b "$(kafka_addr "$i")" cluster describe -o json 2>/dev/null | grep -o '"id":[0-9]*,"host"' | wc -l) || n=0
			[ "$n" -eq "$nodes" ] || ready=no
		done
		[ "$ready" = yes ] && break
		tries=$((tries + 1))
		[ "$tries" -lt 300 ] || failed "the cluster is not ready after 60s; logs in $dir/node*/mqd.log"
		sleep 0.2
	done
	echo "mq cluster of $nodes nodes in $dir"
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
	[ "$1" -ge 1 ] && [ "$1" -le "$nodes" ] || usage
	if pid=$(pid_of "$1"); then die "node $1 is running already (pid $pid)"; fi
	launch "$1"
	echo "node $1 started (pid $(cat "$dir/node$1/mqd.pid")); its log: $dir/node$1/mqd.log"
}

clean() {
	for i in $(ids); do
		if pid=$(pid_of "$i"); then die "node $i is running (pid $pid): deploy/cluster.sh stop first"; fi
	done
	rm -rf "$dir"
	echo "removed $dir"
}

usage() {
	echo "usage: deploy/cluster.sh start|stop|status|clean|start-node N (1..$nodes)" >&2
	exit 2
}

case "${1:-}" in
start) start ;;
stop) stop ;;
status) status ;;
clean) clean ;;
start-node) start_node "${2:-}" ;;
*) usage ;;
esac
