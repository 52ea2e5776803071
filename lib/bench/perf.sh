#!/bin/sh
# perf.sh — `make perf`: start a fresh mqd on a temporary directory, run the
# standard mqbench suite against it over its Unix socket and print one
# table. Arguments are passed to `mqbench suite` (e.g. --runs 1); the
# environment variable MQD_FLAGS, split at spaces, to mqd (e.g.
# MQD_FLAGS='--metrics tcp://127.0.0.1:9308').
#
#   usage: [MQD_FLAGS=...] lib/bench/perf.sh BINDIR [mqbench suite flags...]
set -eu
bin=${1:?usage: perf.sh BINDIR [flags...]}
shift
dir=$(mktemp -d "${TMPDIR:-/tmp}/mq-perf.XXXXXX")
pid=
cleanup() {
	if [ -n "$pid" ] && kill -0 "$pid" 2>/dev/null; then
		kill -TERM "$pid" 2>/dev/null || true
		wait "$pid" 2>/dev/null || true
	fi
	rm -rf "$dir"
}
trap cleanup EXIT
trap 'exit 130' INT TERM

sock="$dir/mqd.sock"
# shellcheck disable=SC2086 # MQD_FLAGS is split on purpose
"$bin/mqd" --data-dir "$dir/data" --listen "unix://$sock" ${MQD_FLAGS:-} 2>"$dir/mqd.log" &
pid=$!
i=0
until [ -S "$sock" ]; do
	i=$((i + 1))
	if [ "$i" -gt 300 ] || ! kill -0 "$pid" 2>/dev/null; then
		echo "perf: mqd did not start:" >&2
		cat "$dir/mqd.log" >&2
		exit 1
	fi
	sleep 0.1
done

echo "perf: mqd pid $pid on $sock; $(nproc) CPUs; load average $(cut -d' ' -f1-3 /proc/loadavg) (other work on this machine skews the figures)" >&2
"$bin/mqbench" -b "unix://$sock" suite --broker-pid "$pid" "$@"
