package e2e

import (
	"context"
	"fmt"
	"os"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
)

// TestManyPartitionsUnderLowOpenFilesLimit runs mqd with RLIMIT_NOFILE
// 256 (soft and hard, so that neither the Go runtime nor anything else can
// raise it) and hosts 2,000 partitions: every one takes produce and fetch,
// before and after a restart. The segment files share log.max.open.files
// (half the limit by default); a descriptor per partition would need 2,000.
func TestManyPartitionsUnderLowOpenFilesLimit(t *testing.T) {
	parallel(t)
	const (
		partitions = 2000
		nofile     = 256
		topic      = "fds"
	)
	start := time.Now()
	b := startBroker(t, brokerOpts{nofile: nofile})
	checkLimit := func() {
		t.Helper()
		pid := b.pid()
		comm, err := os.ReadFile(fmt.Sprintf("/proc/%d/comm", pid))
		if err != nil || strings.TrimSpace(string(comm)) != "mqd" {
			t.Fatalf("pid %d is %q (%v), not mqd", pid, comm, err)
		}
		soft, hard := openFilesLimit(t, pid)
		if soft != nofile || hard != nofile {
			t.Fatalf("mqd runs with open files %d:%d, want %d:%d", soft, hard, nofile, nofile)
		}
	}
	checkLimit()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	resp, err := b.admin().CreateTopic(ctx, partitions, 1, nil, topic)
	if err != nil || resp.Err != nil {
		t.Fatalf("create: %v %v", err, resp.Err)
	}
	t.Logf("%v: created %d partitions; mqd has %d descriptors", time.Since(start), partitions, countFDs(t, b.pid()))

	want := map[int32][]string{}
	produceRound := func(round int) {
		t.Helper()
		prod := b.client(kgo.RecordPartitioner(kgo.ManualPartitioner()), kgo.ProducerLinger(5*time.Millisecond))
		defer prod.Close()
		recs := make([]*kgo.Record, 0, partitions)
		for p := range int32(partitions) {
			v := fmt.Sprintf("r%d-p%d", round, p)
			recs = append(recs, &kgo.Record{Topic: topic, Partition: p, Value: []byte(v)})
			want[p] = append(want[p], v)
		}
		if err := prod.ProduceSync(ctx, recs...).FirstErr(); err != nil {
			t.Fatalf("produce round %d: %v\n%s", round, err, tail(b.stderr.String(), 20))
		}
	}
	produceRound(0)
	produceRound(1)
	t.Logf("%v: produced to every partition; mqd has %d descriptors", time.Since(start), countFDs(t, b.pid()))
	checkAllPresentIn(t, b, topic, partitions, want)
	t.Logf("%v: fetched from every partition; mqd has %d descriptors", time.Since(start), countFDs(t, b.pid()))

	b.restart(false)
	checkLimit()
	t.Logf("%v: restarted; mqd has %d descriptors", time.Since(start), countFDs(t, b.pid()))
	checkAllPresentIn(t, b, topic, partitions, want)
	produceRound(2)
	checkAllPresentIn(t, b, topic, partitions, want)
	t.Logf("%v: fetched and produced again; mqd has %d descriptors", time.Since(start), countFDs(t, b.pid()))

	if n := strings.Count(strings.ToLower(b.stderr.String()), "too many open files"); n > 0 {
		t.Fatalf("mqd ran out of descriptors %d times:\n%s", n, tail(b.stderr.String(), 20))
	}
}

// openFilesLimit reads the soft and hard RLIMIT_NOFILE of pid.
func openFilesLimit(t *testing.T, pid int) (soft, hard int) {
	t.Helper()
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/limits", pid))
	if err != nil {
		t.Fatal(err)
	}
	for _, line := range strings.Split(string(b), "\n") {
		if rest, ok := strings.CutPrefix(line, "Max open files"); ok {
			f := strings.Fields(rest)
			if len(f) >= 2 {
				soft, _ = strconv.Atoi(f[0])
				hard, _ = strconv.Atoi(f[1])
				return soft, hard
			}
		}
	}
	t.Fatalf("no open files limit in /proc/%d/limits:\n%s", pid, b)
	return 0, 0
}

// countFDs is the number of descriptors pid has open.
func countFDs(t *testing.T, pid int) int {
	t.Helper()
	ents, err := os.ReadDir(fmt.Sprintf("/proc/%d/fd", pid))
	if err != nil {
		t.Fatal(err)
	}
	return len(ents)
}
