package e2e

import (
	"bytes"
	"os/exec"
	"strings"
	"testing"
	"time"
)

// kcat runs the kcat binary against b and returns its stdout.
func kcat(t *testing.T, b *broker, stdin string, args ...string) string {
	t.Helper()
	return kcatAt(t, b.addr, stdin, args...)
}

// kcatAt runs kcat with the bootstrap list brokers (-b).
func kcatAt(t *testing.T, brokers string, stdin string, args ...string) string {
	t.Helper()
	path, err := exec.LookPath("kcat")
	if err != nil {
		t.Skip("kcat not installed (CI installs it: apt-get install kcat)")
	}
	cmd := exec.Command(path, append([]string{"-b", brokers}, args...)...)
	cmd.Stdin = strings.NewReader(stdin)
	var out, errOut bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errOut
	done := make(chan error, 1)
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	go func() { done <- cmd.Wait() }()
	select {
	case err := <-done:
		if err != nil {
			t.Fatalf("kcat %s: %v\n%s", strings.Join(args, " "), err, errOut.String())
		}
	case <-time.After(60 * time.Second):
		cmd.Process.Kill()
		t.Fatalf("kcat %s did not finish in 60s\n%s", strings.Join(args, " "), errOut.String())
	}
	return out.String()
}

func TestKcatMetadataProduceConsume(t *testing.T) {
	if _, err := exec.LookPath("kcat"); err != nil {
		t.Skip("kcat not installed (CI installs it: apt-get install kcat)")
	}
	b := startBroker(t, brokerOpts{})
	ctx := ctxFor(t, time.Minute)
	if _, err := b.admin().CreateTopic(ctx, 1, 1, nil, "kc"); err != nil {
		t.Fatal(err)
	}

	meta := kcat(t, b, "", "-L")
	for _, want := range []string{"1 brokers:", "broker 1 at " + b.addr, `topic "kc" with 1 partitions:`, "partition 0, leader 1, replicas: 1, isrs: 1"} {
		if !strings.Contains(meta, want) {
			t.Errorf("kcat -L output lacks %q:\n%s", want, meta)
		}
	}

	kcat(t, b, "alpha:one\nbeta:two\ngamma:three\n", "-P", "-t", "kc", "-K:")
	got := kcat(t, b, "", "-C", "-t", "kc", "-e", "-f", `%k %s %o %p\n`)
	want := "alpha one 0 0\nbeta two 1 0\ngamma three 2 0\n"
	if got != want {
		t.Fatalf("kcat consume:\n got %q\nwant %q", got, want)
	}

	// Snappy- and gzip-compressed batches from librdkafka read back too.
	kcat(t, b, "s1:x\n", "-P", "-t", "kc", "-K:", "-z", "snappy")
	kcat(t, b, "g1:y\n", "-P", "-t", "kc", "-K:", "-z", "gzip")
	kcat(t, b, "l1:z\n", "-P", "-t", "kc", "-K:", "-z", "lz4")
	kcat(t, b, "z1:w\n", "-P", "-t", "kc", "-K:", "-z", "zstd")
	got = kcat(t, b, "", "-C", "-t", "kc", "-o", "3", "-e", "-f", `%k %s %o\n`)
	want = "s1 x 3\ng1 y 4\nl1 z 5\nz1 w 6\n"
	if got != want {
		t.Fatalf("kcat consume of compressed batches:\n got %q\nwant %q", got, want)
	}
}
