package e2e

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
)

// franzGoSuite is franz-go's own kgo test binary (the version in go.mod),
// built once for the tests that run its cases against mqd.
var franzGoSuite = sync.OnceValues(func() (string, error) {
	dir, err := os.MkdirTemp("", "mq-kgo-suite-")
	if err != nil {
		return "", err
	}
	bin := filepath.Join(dir, "kgo.test")
	out, err := exec.Command("go", "test", "-c", "-o", bin, "github.com/twmb/franz-go/pkg/kgo").CombinedOutput()
	if err != nil {
		return "", fmt.Errorf("building franz-go's kgo tests: %v\n%s", err, out)
	}
	return bin, nil
})

// runFranzGoCase runs franz-go's test name against seeds with the
// replication factor rf and records records, and fails t unless it
// passed without a skip.
func runFranzGoCase(t *testing.T, name, seeds string, rf, records int) {
	t.Helper()
	suite, err := franzGoSuite()
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(suite, "-test.run", "^"+name+"$", "-test.count=1", "-test.v", "-test.timeout=5m")
	cmd.Dir = t.TempDir()
	cmd.Env = append(os.Environ(), "KGO_SEEDS="+seeds, fmt.Sprintf("KGO_TEST_RF=%d", rf),
		fmt.Sprintf("KGO_TEST_RECORDS=%d", records))
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("franz-go's %s against mqd (%s): %v\n%s", name, seeds, err, tail(string(out), 60))
	}
	passed, skipped := 0, 0
	for _, line := range strings.Split(string(out), "\n") {
		line = strings.TrimSpace(line)
		switch {
		case strings.HasPrefix(line, "--- PASS: "+name+"/"):
			passed++
		case strings.HasPrefix(line, "--- SKIP: "):
			// KIP-848's consumer group protocol (ConsumerGroupHeartbeat)
			// is not served: its cases skip, every other must run.
			if !strings.Contains(line, "/848") {
				t.Fatalf("franz-go's %s against mqd skipped a case: %s\n%s", name, line, tail(string(out), 60))
			}
			skipped++
		}
	}
	if !strings.Contains(string(out), "--- PASS: "+name+" ") || passed == 0 {
		t.Fatalf("franz-go's %s against mqd did not pass:\n%s", name, tail(string(out), 60))
	}
	t.Logf("franz-go's %s (%d records, replication factor %d) passed against mqd: %d cases, %d of KIP-848 skipped",
		name, records, rf, passed, skipped)
}

// TestFranzGoTxnEtlPasses runs franz-go's TestTxnEtl — transactional
// producers, and a group of read_committed consumers that produce what
// they read in transactions (GroupTransactSession), checked for every
// record exactly once — against one node and a 3-node cluster, where kgo
// speaks transaction.version 2 (KIP-890 part 2, mqd's default), and one
// node at transaction.version 1: its cases for the classic group
// protocol (range, cooperative-sticky, with static members); those of
// KIP-848's protocol skip, mq does not serve it.
func TestFranzGoTxnEtlPasses(t *testing.T) {
	parallel(t)
	t.Run("one node", func(t *testing.T) {
		b := startBroker(t, brokerOpts{})
		runFranzGoCase(t, "TestTxnEtl", b.addr, 1, 30000)
	})
	t.Run("three nodes", func(t *testing.T) {
		c := startCluster(t, 3, clusterOpts{})
		runFranzGoCase(t, "TestTxnEtl", c.bootstrapList(), 3, 30000)
	})
	// mqd finalizes transaction.version 2 by default, which kgo speaks
	// (KIP-890 part 2); the earlier protocol stays tested here.
	t.Run("one node at transaction.version 1", func(t *testing.T) {
		b := startBroker(t, brokerOpts{props: []string{"transaction.version=1"}})
		runFranzGoCase(t, "TestTxnEtl", b.addr, 1, 30000)
	})
}
