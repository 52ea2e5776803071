#!/bin/sh
# perf.sh — `make perf`: start a fresh mqd on a temporary directory, run the
# standard mqbench suite against it and print one table. Arguments are
# passed to `mqbench suite` (e.g. --runs 1); the environment variable
# MQD_FLAGS, split at spaces, to mqd (e.g. MQD_FLAGS='--metrics
# tcp://127.0.0.1:9308').
#
# PERF_LISTENERS (default "unix") lists the listeners to measure over, each
# on a fresh mqd, in turn: unix (the Unix socket), tcp, ssl (TLS 1.3, a
# throwaway self-signed ECDSA P-256 certificate made with openssl),
# sasl_plaintext and sasl_ssl (a user "bench" logging in with
# PERF_SASL_MECHANISM, default SCRAM-SHA-256; PLAIN needs sasl_ssl). Each
# mqd runs with allow.everyone.if.no.acl.found=true, so that every run
# goes through the same authorizer. With more than one listener (and jq
# installed) a last table sets each figure's medians side by side, each
# as a share of the first listener's:
#
#   PERF_LISTENERS="tcp ssl sasl_ssl" make perf
#
#   usage: [PERF_LISTENERS=...] [MQD_FLAGS=...] lib/bench/perf.sh BINDIR [mqbench suite flags...]
set -eu
bin=${1:?usage: perf.sh BINDIR [flags...]}
shift
listeners=${PERF_LISTENERS:-unix}
mechanism=${PERF_SASL_MECHANISM:-SCRAM-SHA-256}
dir=$(mktemp -d "${TMPDIR:-/tmp}/mq-perf.XXXXXX")
pid=
stop_mqd() {
	if [ -n "$pid" ] && kill -0 "$pid" 2>/dev/null; then
		kill -TERM "$pid" 2>/dev/null || true
		wait "$pid" 2>/dev/null || true
	fi
	pid=
}
cleanup() {
	stop_mqd
	rm -rf "$dir"
}
trap cleanup EXIT
trap 'exit 130' INT TERM

for l in $listeners; do
	case $l in
	unix | tcp | ssl | sasl_plaintext | sasl_ssl) ;;
	*)
		echo "perf: PERF_LISTENERS: unknown listener $l (want unix, tcp, ssl, sasl_plaintext or sasl_ssl)" >&2
		exit 2
		;;
	esac
done
case " $listeners " in
*" ssl "* | *" sasl_ssl "*)
	if ! openssl req -x509 -newkey ec -pkeyopt ec_paramgen_curve:P-256 -nodes -days 2 \
		-subj /CN=127.0.0.1 -addext subjectAltName=IP:127.0.0.1 \
		-keyout "$dir/key.pem" -out "$dir/cert.pem" 2>"$dir/openssl.log"; then
		echo "perf: openssl could not make the test certificate:" >&2
		cat "$dir/openssl.log" >&2
		exit 1
	fi
	;;
esac
printf '%s\n' "bench-$(od -An -N12 -tx1 /dev/urandom | tr -d ' \n')" >"$dir/bench.pw"
chmod 600 "$dir/bench.pw"

# free_port prints a loopback TCP port nobody listens on.
free_port() {
	while :; do
		p=$(shuf -i 20000-39999 -n 1)
		if ! ss -Htln "sport = :$p" | grep -q .; then
			echo "$p"
			return
		fi
	done
}

# run_suite LISTENER FORMAT [mqbench suite flags...]: a fresh mqd, the
# suite over LISTENER, its output (table or json) on stdout.
run_suite() {
	l=$1
	format=$2
	shift 2
	rm -rf "$dir/data"
	sock="$dir/mqd.sock"
	extra= addr= client=
	case $l in
	unix) addr="unix://$sock" ;;
	*)
		port=$(free_port)
		extra="--listen $l://127.0.0.1:$port"
		addr="$l://127.0.0.1:$port"
		;;
	esac
	case $l in
	ssl | sasl_ssl) client="--tls-ca $dir/cert.pem" ;;
	esac
	case $l in
	sasl_*) client="$client --sasl-mechanism $mechanism --sasl-user bench --sasl-password-file $dir/bench.pw" ;;
	esac
	case $l in
	ssl | sasl_ssl) extra="$extra --set ssl.certificate.location=$dir/cert.pem --set ssl.key.location=$dir/key.pem" ;;
	esac
	case $l in
	sasl_*) extra="$extra --set sasl.enabled.mechanisms=$mechanism" ;;
	esac
	# shellcheck disable=SC2086 # extra and MQD_FLAGS are split on purpose
	"$bin/mqd" --data-dir "$dir/data" --listen "unix://$sock" $extra \
		--set allow.everyone.if.no.acl.found=true ${MQD_FLAGS:-} 2>"$dir/mqd.log" &
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
	case $l in
	sasl_*)
		if ! "$bin/mqctl" -b "unix://$sock" user create bench --mechanism "$mechanism" --password-file "$dir/bench.pw" >/dev/null; then
			echo "perf: could not create the SASL user" >&2
			exit 1
		fi
		;;
	esac
	echo "perf: mqd pid $pid over $addr; $(nproc) CPUs; load average $(cut -d' ' -f1-3 /proc/loadavg) (other work on this machine skews the figures)" >&2
	# shellcheck disable=SC2086 # client is split on purpose
	"$bin/mqbench" -b "$addr" -o "$format" $client suite --broker-pid "$pid" "$@"
	stop_mqd
}

n=0
for l in $listeners; do
	n=$((n + 1))
done
if [ "$n" -eq 1 ]; then
	run_suite "$listeners" table "$@"
	exit 0
fi
# jq_fmt: a median as the table shows it, whole above 100, else to 0.001.
jq_fmt='def fmt: if . >= 100 then round | tostring else . * 1000 | round / 1000 | tostring end;'
if ! command -v jq >/dev/null; then
	echo "perf: jq is not installed: one table per listener, no comparison" >&2
fi
for l in $listeners; do
	echo "== over $l"
	if command -v jq >/dev/null; then
		run_suite "$l" json "$@" >"$dir/$l.json"
		jq -r "$jq_fmt"' .rows[] | [.name, .target, (.median | fmt), .unit] | @tsv' "$dir/$l.json" | column -t -s "$(printf '\t')"
	else
		run_suite "$l" table "$@"
	fi
done
if command -v jq >/dev/null; then
	echo "== medians side by side, each as a share of the first listener's"
	first=
	files=
	for l in $listeners; do
		first=${first:-$l}
		files="$files $dir/$l.json"
	done
	# shellcheck disable=SC2086 # files is split on purpose
	jq -rs --arg names "$listeners" "$jq_fmt"'
		($names | split(" ") | map(select(. != ""))) as $ls
		| (["FIGURE", "UNIT"] + $ls) as $head
		| [.[0].rows[] | .name] as $figures
		| . as $runs
		| ($head | @tsv),
		  ($figures[] as $f
		   | ($runs | map(.rows[] | select(.name == $f) | .median)) as $m
		   | ($runs[0].rows[] | select(.name == $f) | .unit) as $unit
		   | [$f, $unit] + [range(0; $m | length) as $i
		       | if $i == 0 or $m[0] == 0 then ($m[$i] | fmt)
		         else "\($m[$i] | fmt) (\(($m[$i] / $m[0] * 100 | round))%)" end]
		   | @tsv)' $files | column -t -s "$(printf '\t')"
fi
