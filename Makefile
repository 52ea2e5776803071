# mq — build, test and run. `make test` is the one test command (CI runs it).
GO       ?= go
BIN      := bin
PROGRAMS := $(notdir $(wildcard cmd/*))
PKGS     := ./...
FUZZTIME ?= 20s
PREFIX   ?= /usr/local
# The release the programs report (--version, mqctl cluster describe): the
# latest tag and the commits since (lib/version); in a checkout without a
# tag, the commit's abbreviated hash. Outside a checkout the Go toolchain's
# version of the module is reported instead.
VERSION  ?= $(shell git describe --tags --dirty --always 2>/dev/null)
LDFLAGS  := $(if $(VERSION),-X github.com/mqproject/mq/lib/version.stamp=$(VERSION))

.PHONY: all build test test-short test-mem fuzz bench perf perf-partitions perf-restart perf-move chaos sarama soak lint install uninstall run man clean cluster cluster-stop static image

all: build

build:
	@mkdir -p $(BIN)
	$(GO) build -ldflags '$(LDFLAGS)' -o $(BIN)/ ./cmd/...

# The whole suite, race detector on. Long-running end-to-end tests are part of it.
# The e2e package is the longest: its tests that time nothing run two at
# a time (e2e's parallel()), the others one after another. Its timeout
# leaves room for a slow run; the whole CI run is to stay within 25
# minutes on a 2-core machine with cold caches.
test:
	$(GO) vet $(PKGS)
	$(GO) test -race -count=1 -timeout 24m $(PKGS)

# A quick pass without -race, for the edit-compile loop: -short skips the
# end-to-end package (real processes) and the slow randomized runs.
test-short:
	$(GO) test -short -count=1 $(PKGS)

# Each package's tests as `make test` runs them (-race), one package at a
# time under /usr/bin/time (apt-get install time): the peak RSS of the
# largest process of the package's run, the test binary or a program it
# started, and a failure over MEM_MB. The e2e package's own line names
# its test process's and its largest mqd's peaks (e2e/harness_test.go).
MEM_MB ?= 3072
test-mem:
	@test -x /usr/bin/time || { echo "test-mem needs /usr/bin/time: apt-get install time"; exit 1; }
	@tmp=$$(mktemp -d); trap 'rm -rf "$$tmp"' EXIT; bad=0; \
	for pkg in $$($(GO) list $(PKGS)); do \
		rm -f "$$tmp/pkg.test"; \
		$(GO) test -race -c -o "$$tmp/pkg.test" $$pkg || { bad=1; continue; }; \
		[ -f "$$tmp/pkg.test" ] || continue; \
		status=ok; \
		(cd "$$($(GO) list -f '{{.Dir}}' $$pkg)" && /usr/bin/time -f %M -o "$$tmp/rss" \
			"$$tmp/pkg.test" -test.count=1 -test.timeout=22m >"$$tmp/out" 2>&1) || { status=FAIL; bad=1; cat "$$tmp/out"; }; \
		mb=$$(( $$(tail -n 1 "$$tmp/rss") / 1024 )); \
		[ $$mb -le $(MEM_MB) ] || { status="over $(MEM_MB) MB"; bad=1; }; \
		printf '%6d MB  %-36s %s\n' $$mb $$pkg "$$status"; \
		grep -h '^e2e: peak RSS' "$$tmp/out" | sed 's/^/          /' || true; \
	done; exit $$bad

# Each fuzz target for FUZZTIME (go test runs one fuzz target per invocation).
fuzz:
	@set -e; for pkg in $$($(GO) list $(PKGS)); do \
		for f in $$($(GO) test -list '^Fuzz' $$pkg | grep '^Fuzz' || true); do \
			echo "fuzz $$pkg $$f"; \
			$(GO) test -run '^$$' -fuzz "^$$f\$$" -fuzztime $(FUZZTIME) $$pkg; \
		done; \
	done

bench:
	$(GO) test -run '^$$' -bench . -benchmem $(PKGS)

# The standard mqbench suite against a fresh mqd on a temp dir: one table of
# medians with the targets, broker CPU and peak memory. PERFFLAGS go to
# `mqbench suite` (e.g. PERFFLAGS=--runs=1); MQD_FLAGS go to mqd (e.g.
# MQD_FLAGS='--metrics tcp://127.0.0.1:9308' to measure with metrics on).
# PERF_LISTENERS picks the listeners measured over, a fresh mqd each, and
# sets their figures side by side (e.g. PERF_LISTENERS="tcp ssl sasl_ssl";
# default unix; see lib/bench/perf.sh).
perf:
	@mkdir -p $(BIN)
	$(GO) build -ldflags '$(LDFLAGS)' -o $(BIN)/ ./cmd/mqd ./cmd/mqbench ./cmd/mqctl
	./lib/bench/perf.sh $(BIN) $(PERFFLAGS)

# How mqd's lifecycle grows with the partitions it hosts (issue 19): for
# each of COUNTS (default "10 10000") partitions over TOPICS topics, a
# fresh mqd's create, produce, SIGTERM, start after it and start after a
# SIGKILL, in seconds, and the produce and fetch throughput of one topic of
# that many partitions, with the producer's own batches and with batches of
# at most 64 KiB at both counts (the median of RATE_RUNS runs, default 3,
# the counts taking turns), one row per count, then the throughput of each
# count as a share of the first's (lib/bench/partitions.sh).
perf-partitions:
	@mkdir -p $(BIN)
	$(GO) build -ldflags '$(LDFLAGS)' -o $(BIN)/ ./cmd/mqd ./cmd/mqbench ./cmd/mqctl
	./lib/bench/partitions.sh $(BIN)

# One step of a rolling restart (issue 19): a 3-node cluster with TOPICS
# (default 10) topics of PARTITIONS (default 1000) partitions, RF 3; node
# 2's SIGTERM, its start again, and the time until every ISR is full, RUNS
# times (lib/bench/restart.sh).
perf-restart:
	@mkdir -p $(BIN)
	$(GO) build -ldflags '$(LDFLAGS)' -o $(BIN)/ ./cmd/mqd ./cmd/mqbench ./cmd/mqctl
	./lib/bench/restart.sh $(BIN)

# What moving a 1 GB partition onto a 4th node costs acks=all producers
# (issue 33): the move's time and the produce p99 while it runs, with no
# throttle, a fixed one and the auto throttle, against no move at all
# (lib/bench/move.sh; SIZE_MB, RATE, FIXED, TARGET, MODES).
perf-move:
	@mkdir -p $(BIN)
	$(GO) build -ldflags '$(LDFLAGS)' -o $(BIN)/ ./cmd/mqd ./cmd/mqbench ./cmd/mqctl
	./lib/bench/move.sh $(BIN)

# IBM/sarama's own functional tests of transactions against a 3-node mq
# cluster behind toxiproxy (e2e/sarama-functional.sh: both built from the
# Go module proxy). Not in make test: about two minutes, on the fixed
# ports sarama's tests expect.
sarama: build
	./e2e/sarama-functional.sh $(BIN)

# The fault-injection rows (e2e/chaos*_test.go) long: each injects its
# faults for DURATION on its own cluster, in a test process of its own
# (the checker keeps every record: one process for all rows would hold
# the memory of the largest), prints one line as it ends (fault,
# operations, acknowledged, lost, duplicates, reordered, inconsistent,
# divergent, HW regressions, below min.insync.replicas, the row's own
# checks), and a summary at the end. A failing row's whole output is
# printed. Replay a run with CHAOSFLAGS=-chaos.seed=N; CHAOS=regexp picks
# rows. The failover row (TestChaosFailover) times instead: it kills
# brokers CHAOSFLAGS=-chaos.failover.runs=N times per series (default 10,
# not DURATION) and prints per scenario the median and worst time clients
# stalled; a scenario past its bound counts under row-checks.
# CHAOSFLAGS=-cluster.secured runs the rows on loopback on secured
# clusters (node certificates: controller port mutual TLS, followers
# fetching over ssl://); the rows on a network of their own stay plain.
DURATION ?= 60s
CHAOS    ?= ^TestChaos
chaos:
	@tmp=$$(mktemp -d); trap 'rm -rf "$$tmp"' EXIT; cd e2e && \
	$(GO) test -c -o "$$tmp/e2e.test" . || exit 1; bad=0; touch "$$tmp/rows"; \
	for t in $$("$$tmp/e2e.test" -test.list '$(CHAOS)' 2>/dev/null); do \
		"$$tmp/e2e.test" -test.count=1 -test.timeout=30m -test.run "^$$t\$$" -chaos.duration=$(DURATION) $(CHAOSFLAGS) >"$$tmp/out" 2>&1 \
			|| { bad=1; cat "$$tmp/out"; echo "chaos: $$t FAILED" >>"$$tmp/rows"; }; \
		grep '^chaos: ' "$$tmp/out" | grep -v ' rows, .* operations' | tee -a "$$tmp/rows"; \
	done; \
	echo "chaos summary:"; cat "$$tmp/rows"; \
	awk '{ for (i = 2; i < NF; i++) { v = $$(i+1); \
		if ($$i == "ops") ops += v; else if ($$i == "acked") acked += v; \
		else if ($$i ~ /^(lost|dup|reordered|inconsistent|divergent|hw-regressions|below-min-isr|row-checks)$$/) bad += v } \
		if ($$0 ~ /FAILED$$/) failed++; rows++ } \
		END { printf "chaos: %d rows, %d operations, %d acknowledged, %d violations, %d failed\n", rows, ops, acked, bad, failed }' "$$tmp/rows"; \
	exit $$bad

# The mixed row (11) as a soak: faults that keep the processes (SIGSTOP,
# network cuts, a full disk) for SOAK, failing when a node's RSS or open
# file descriptors grow (e2e/chaos_mix_test.go has the bounds).
SOAK ?= 10m
soak:
	cd e2e && $(GO) test -count=1 -timeout 0 -run '^TestChaosMix$$' -chaos.soak -chaos.duration=$(SOAK) $(CHAOSFLAGS)

lint:
	$(GO) vet $(PKGS)
	@out=$$(gofmt -l $$(git ls-files '*.go') 2>/dev/null); if [ -n "$$out" ]; then echo "gofmt needed:"; echo "$$out"; exit 1; fi
	$(GO) test -count=1 -run TestDependencyDirection .

install:
	./install.sh

uninstall:
	./install.sh --uninstall

# Build and start mqd on its embedded defaults.
run: build
	./$(BIN)/mqd

# A 3-node cluster on this machine (deploy/cluster.sh: data, logs and pid
# files in $MQ_CLUSTER_DIR, default /tmp/mq-cluster); prints the bootstrap
# list. cluster-stop stops it, keeping the data (deploy/cluster.sh clean
# removes it).
cluster: build
	MQ_BIN=$(BIN) ./deploy/cluster.sh start

cluster-stop:
	MQ_BIN=$(BIN) ./deploy/cluster.sh stop

# Static mqd and mqctl (no cgo) for the container image, in $(BIN)/static.
static:
	@mkdir -p $(BIN)/static/data
	CGO_ENABLED=0 $(GO) build -trimpath -ldflags '$(LDFLAGS)' -o $(BIN)/static/ ./cmd/mqd ./cmd/mqctl

# The container image (deploy/Dockerfile, FROM scratch): IMAGE=name:tag.
IMAGE ?= mq:latest
image: static
	docker build -f deploy/Dockerfile -t $(IMAGE) $(BIN)/static

# Regenerate the man pages from the command definitions.
man:
	@set -e; for p in $(PROGRAMS); do $(GO) test ./cmd/$$p -count=1 -run TestManPageCurrent -update-man; done

clean:
	rm -rf $(BIN)
