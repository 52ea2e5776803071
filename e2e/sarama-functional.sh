#!/bin/sh
# Runs IBM/sarama's own functional tests (build tag functional) against a
# 3-node mq cluster on this machine: by default its transaction tests.
#
#   e2e/sarama-functional.sh [BIN]      BIN: where mqd and mqctl are (bin)
#
#   SARAMA_VERSION     sarama's module version (v1.62.0)
#   TOXIPROXY_VERSION  toxiproxy's module version (v2.5.0)
#   RUN                the tests' -test.run pattern
#                      (Txn|InitProducerId|Transactions|DescribeProducers)
#   KAFKA_VERSION      what the tests take the brokers for (3.7.0, the
#                      protocol mq reports); tests needing more skip
#   WORK               a directory to keep the cluster's logs in (a
#                      temporary one, removed unless the tests fail)
#
# Everything comes from the Go module proxy: sarama's module is copied
# from the module cache and its tests compiled; toxiproxy's server is
# built with go install. The tests need what sarama's CI has: toxiproxy
# (TOXIPROXY_ADDR) with proxies kafka1..kafka5 listening on
# 127.0.0.1:29091..29095, brokers that advertise those addresses, and
# `docker compose stop|start kafka-N` (TestFuncTxnProduceWithBrokerFailure
# stops the transaction coordinator). Here mqd N listens on 3909N and
# advertises 2909N, kafka4 and kafka5 forward to nodes 1 and 2 (sarama
# only bootstraps through them), and a `docker` on PATH stops (SIGTERM)
# and starts mqd node N. The ports are fixed, as sarama's are: nothing
# else may listen on 29091-29095, 39091-39093, 39191-39193 or 18474.
# The tests delete and create their topics (test.1, test.4, test.64, ...)
# themselves. Takes about 80 s, most of it TestFuncTxnProduceAndCommitOffset.
set -eu

bin=$(cd "${1:-bin}" && pwd)
sarama_version=${SARAMA_VERSION:-v1.62.0}
toxiproxy_version=${TOXIPROXY_VERSION:-v2.5.0}
run=${RUN:-'Txn|InitProducerId|Transactions|DescribeProducers'}
kafka_version=${KAFKA_VERSION:-3.7.0}
api=127.0.0.1:18474
voters=1@127.0.0.1:39191,2@127.0.0.1:39192,3@127.0.0.1:39193

die() { echo "sarama-functional.sh: $*" >&2; exit 1; }
[ -x "$bin/mqd" ] && [ -x "$bin/mqctl" ] || die "no $bin/mqd or $bin/mqctl: run make build first"
command -v curl >/dev/null || die "needs curl (apt-get install curl)"

keep=${WORK:+yes}
work=${WORK:-$(mktemp -d /tmp/mq-sarama-XXXXXX)}
mkdir -p "$work"
work=$(cd "$work" && pwd)

# cleanup stops what this script started, by the pids it wrote.
cleanup() {
	for f in "$work"/*.pid; do
		[ -f "$f" ] || continue
		pid=$(cat "$f")
		kill -TERM "$pid" 2>/dev/null || true
		n=0
		while kill -0 "$pid" 2>/dev/null && [ "$n" -lt 300 ]; do sleep 0.1; n=$((n + 1)); done
		kill -KILL "$pid" 2>/dev/null || true
		rm -f "$f"
	done
}
trap 'cleanup' EXIT
trap 'exit 130' INT TERM

echo "building toxiproxy $toxiproxy_version and sarama $sarama_version's functional tests"
GOBIN=$work go install "github.com/Shopify/toxiproxy/v2/cmd/server@$toxiproxy_version"
dir=$(go mod download -json "github.com/IBM/sarama@$sarama_version" | sed -n 's/^[[:space:]]*"Dir": "\(.*\)",$/\1/p')
[ -d "$dir" ] || die "sarama $sarama_version is not in the module cache"
rm -rf "$work/sarama"
cp -r "$dir" "$work/sarama"
chmod -R u+w "$work/sarama"
(cd "$work/sarama" && go test -tags functional -c -o "$work/sarama.test" .)

# node N: the mqd of the cluster, its pid in nodeN.pid.
node() {
	"$bin/mqd" --node-id "$1" --voters "$voters" --data-dir "$work/node$1" \
		--listen "tcp://127.0.0.1:3909$1" --advertise "127.0.0.1:2909$1" >>"$work/node$1.log" 2>&1 &
	echo $! >"$work/node$1.pid"
}

"$work/server" -host 127.0.0.1 -port "${api#*:}" >"$work/toxiproxy.log" 2>&1 &
echo $! >"$work/toxiproxy.pid"
for i in 1 2 3; do node "$i"; done

# Ready when each node lists the three brokers; given up on after 60 s,
# or when a node exits (a port taken, say).
deadline=$(($(date +%s) + 60))
for i in 1 2 3; do
	until [ "$("$bin/mqctl" -b "127.0.0.1:3909$i" cluster describe -o json 2>/dev/null | grep -o '"id":[0-9]*,"host"' | wc -l)" -eq 3 ]; do
		for j in 1 2 3; do
			kill -0 "$(cat "$work/node$j.pid")" 2>/dev/null || die "node $j exited: $(tail -n 3 "$work/node$j.log")"
		done
		[ "$(date +%s)" -lt "$deadline" ] || die "the cluster is not ready after 60 s; logs in $work"
		sleep 0.2
	done
done
for i in 1 2 3 4 5; do
	upstream=$(((i - 1) % 3 + 1))
	curl -fsS -o /dev/null -X POST "http://$api/proxies" \
		-d "{\"name\":\"kafka$i\",\"listen\":\"127.0.0.1:2909$i\",\"upstream\":\"127.0.0.1:3909$upstream\"}" ||
		die "creating toxiproxy's proxy kafka$i (is port 2909$i free?)"
done

# The docker that sarama's tests call: compose stop|start kafka-N.
mkdir -p "$work/shim"
cat >"$work/shim/docker" <<EOF
#!/bin/sh
set -eu
[ "\$1" = compose ] || { echo "docker shim: unknown \$*" >&2; exit 1; }
i=\${3#kafka-}
case \$2 in
stop)
	pid=\$(cat "$work/node\$i.pid")
	kill -TERM "\$pid"
	while kill -0 "\$pid" 2>/dev/null; do sleep 0.1; done ;;
start)
	"$bin/mqd" --node-id "\$i" --voters "$voters" --data-dir "$work/node\$i" \\
		--listen "tcp://127.0.0.1:3909\$i" --advertise "127.0.0.1:2909\$i" >>"$work/node\$i.log" 2>&1 &
	echo \$! >"$work/node\$i.pid" ;;
*) echo "docker shim: unknown \$*" >&2; exit 1 ;;
esac
EOF
chmod +x "$work/shim/docker"

echo "running sarama's tests matching '$run' against mqd (logs in $work)"
status=0
(cd "$work/sarama" && PATH="$work/shim:$PATH" TOXIPROXY_ADDR="http://$api" KAFKA_VERSION="$kafka_version" \
	"$work/sarama.test" -test.run "$run" -test.v -test.count=1 -test.timeout=14m) >"$work/test.log" 2>&1 || status=$?
grep -E '^ *--- (PASS|FAIL|SKIP)' "$work/test.log" || true
cleanup
if [ "$status" -ne 0 ]; then
	echo "sarama's functional tests failed (exit $status); their output: $work/test.log" >&2
	exit "$status"
fi
[ -n "$keep" ] || rm -rf "$work"
echo "sarama $sarama_version's functional tests ($run) passed against mqd"
