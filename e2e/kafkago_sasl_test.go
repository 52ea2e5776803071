package e2e

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// kafka-go's own SASL tests (package github.com/segmentio/kafka-go/sasl,
// the version in go.mod) dial localhost:9093 and expect what its CI's
// broker has there: a SASL_PLAINTEXT listener with PLAIN, SCRAM-SHA-256
// and SCRAM-SHA-512, the user adminplain (PLAIN, password admin-secret),
// adminscram (SCRAM-SHA-256 admin-secret-256, SCRAM-SHA-512
// admin-secret-512; for KAFKA_VERSION 4 and later adminscram256 and
// adminscram512), and the topic test-writer-0. The ports are fixed, so
// mqd and the compiled test run in a network namespace of their own,
// where nothing else can hold them; the Unix socket, a file, reaches
// mqd from here to create the users and the topic, as an operator would.
func TestKafkaGoSASLSuitePasses(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("the fixed ports need a network namespace, which needs root")
	}
	sweepStaleNets()
	ns := fmt.Sprintf("mq%d-%d-kafkago", os.Getpid(), netRuns.Add(1))
	if err := runCmd("", "ip", "netns", "add", ns); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := runCmd("", "ip", "netns", "delete", ns); err != nil {
			t.Errorf("removing the test's namespace: %v", err)
		}
	})
	if err := runCmd("", "ip", "-n", ns, "link", "set", "lo", "up"); err != nil {
		t.Fatal(err)
	}

	// The suite's binary, built from the module cache while mqd starts.
	dir := t.TempDir()
	suite := filepath.Join(dir, "sasl.test")
	built := make(chan error, 1)
	go func() {
		out, err := exec.Command("go", "test", "-c", "-o", suite, "github.com/segmentio/kafka-go/sasl").CombinedOutput()
		if err != nil {
			err = fmt.Errorf("building kafka-go's sasl tests: %v\n%s", err, out)
		}
		built <- err
	}()

	p := &mqdProc{dataDir: t.TempDir(), netns: ns, addr: "127.0.0.1:9092", keepAddr: true,
		args: []string{"--listen", "sasl_plaintext://localhost:9093"},
		props: []string{openACLs, "sasl.enabled.mechanisms=PLAIN,SCRAM-SHA-256,SCRAM-SHA-512",
			"sasl.plain.allow.plaintext=true"}}
	if err := p.start(); err != nil {
		<-built
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := p.cleanup(); err != nil {
			t.Error(err)
		}
	})

	sock := "unix://" + p.socket
	for _, u := range []struct{ user, mechanism, password string }{
		{"adminplain", "SCRAM-SHA-256", "admin-secret"},
		{"adminscram", "SCRAM-SHA-256", "admin-secret-256"},
		{"adminscram", "SCRAM-SHA-512", "admin-secret-512"},
		{"adminscram256", "SCRAM-SHA-256", "admin-secret-256"},
		{"adminscram512", "SCRAM-SHA-512", "admin-secret-512"},
	} {
		pw := filepath.Join(dir, u.user+"-"+u.mechanism)
		if err := os.WriteFile(pw, []byte(u.password+"\n"), 0o600); err != nil {
			t.Fatal(err)
		}
		if r := runTool(t, time.Minute, "", "mqctl", "-b", sock, "user", "create", u.user, "--mechanism", u.mechanism, "--password-file", pw); r.code != 0 {
			t.Fatalf("mqctl user create %s %s: exit %d\n%s", u.user, u.mechanism, r.code, r.stderr)
		}
	}
	if r := runTool(t, time.Minute, "", "mqctl", "-b", sock, "topic", "create", "test-writer-0"); r.code != 0 {
		t.Fatalf("mqctl topic create: exit %d\n%s", r.code, r.stderr)
	}
	if err := <-built; err != nil {
		t.Fatal(err)
	}

	// KAFKA_VERSION as kafka-go's CI sets it (the user adminscram), and
	// 4.0.0 (the users adminscram256 and adminscram512). Unset, the suite
	// would skip its SCRAM cases.
	for _, version := range []string{"3.7.0", "4.0.0"} {
		cmd := exec.Command("ip", "netns", "exec", ns, suite, "-test.run", "TestSASL", "-test.count=1", "-test.v", "-test.timeout=60s")
		cmd.Env = append(os.Environ(), "KAFKA_VERSION="+version)
		out, err := cmd.CombinedOutput()
		if err != nil {
			t.Fatalf("kafka-go's SASL tests with KAFKA_VERSION=%q against mqd: %v\n%s\nmqd's log:\n%s", version, err, out, tail(p.stderr.String(), 30))
		}
		// Every case ran: nine subtests, none skipped.
		if n := strings.Count(string(out), "--- PASS: TestSASL/"); n != 9 || strings.Contains(string(out), "SKIP") {
			t.Fatalf("kafka-go's SASL tests with KAFKA_VERSION=%q: %d subtests passed, want 9\n%s", version, n, out)
		}
		t.Logf("kafka-go's SASL tests with KAFKA_VERSION=%q: 9 of 9 passed", version)
	}
}
