package e2e

import (
	"context"
	"encoding/json"
	"fmt"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/mqproject/mq/lib/mqtest"
)

// TestTopicAlterCountsTheKeysItMoves: mqctl topic alter --partitions
// --sample-keys --dry-run reports as moving exactly the keys that a kgo
// client with its default partitioner, producing the same keys again
// after the topic grew, writes to another partition; it changes nothing.
// Without a terminal and without --execute the command refuses (exit 2,
// one line) and the topic keeps its partitions; with --execute it grows.
// On a terminal it asks, and a no changes nothing.
func TestTopicAlterCountsTheKeysItMoves(t *testing.T) {
	b := startBroker(t, brokerOpts{})
	ctx := ctxFor(t, 2*time.Minute)
	const topic = "keyed"
	if _, err := b.admin().CreateTopic(ctx, 3, 1, nil, topic); err != nil {
		t.Fatal(err)
	}

	// 400 distinct keys, 200 of them written twice, and 50 records
	// without a key.
	const distinct = 400
	var recs []*kgo.Record
	for i := 0; i < distinct; i++ {
		recs = append(recs, &kgo.Record{Topic: topic, Key: fmt.Appendf(nil, "order-%d", i), Value: []byte("v")})
	}
	for i := 0; i < distinct; i += 2 {
		recs = append(recs, &kgo.Record{Topic: topic, Key: fmt.Appendf(nil, "order-%d", i), Value: []byte("again")})
	}
	for i := 0; i < 50; i++ {
		recs = append(recs, &kgo.Record{Topic: topic, Value: []byte("no key")})
	}
	before := produceKeys(ctx, t, b, recs)

	mqctl := func(stdin string, args ...string) toolResult {
		return runTool(t, time.Minute, stdin, "mqctl", append([]string{"-b", b.addr}, args...)...)
	}
	partitions := func() int {
		t.Helper()
		td, err := b.admin().ListTopics(ctx, topic)
		if err != nil || td[topic].Err != nil {
			t.Fatalf("describe %s: %v %v", topic, err, td[topic].Err)
		}
		return len(td[topic].Partitions)
	}

	dry := mqctl("", "topic", "alter", topic, "--partitions", "5", "--sample-keys", "--dry-run", "-o", "json")
	if dry.code != 0 {
		t.Fatalf("dry run: exit %d\n%s", dry.code, dry.stderr)
	}
	var results []struct {
		Topic     string `json:"topic"`
		Result    string `json:"result"`
		KeySample *struct {
			Records, Keyed, Keys, Moved, Elsewhere int
			From                                   int    `json:"from_partitions"`
			To                                     int    `json:"to_partitions"`
			Incomplete                             string `json:"incomplete"`
		} `json:"key_sample"`
	}
	if err := json.Unmarshal([]byte(dry.stdout), &results); err != nil || len(results) != 1 || results[0].KeySample == nil {
		t.Fatalf("dry run: %v: %s", err, dry.stdout)
	}
	s := results[0].KeySample
	if results[0].Result != "planned" || s.From != 3 || s.To != 5 || s.Records != len(recs) || s.Keyed != len(recs)-50 ||
		s.Keys != distinct || s.Elsewhere != 0 || s.Incomplete != "" {
		t.Fatalf("dry run: %s", dry.stdout)
	}
	summary := regexp.MustCompile(`(?m)^mqctl: topic keyed: (\d+) of 400 sampled keys \((\d+)%\) would map to a different partition$`)
	m := summary.FindStringSubmatch(dry.stderr)
	if m == nil || m[1] != fmt.Sprint(s.Moved) || !strings.Contains(dry.stderr, "mqctl: warning: topic keyed, 3 to 5 partitions: keyed records will map to different partitions") {
		t.Fatalf("dry run: stderr does not warn and say %d keys move:\n%s", s.Moved, dry.stderr)
	}
	if n := partitions(); n != 3 {
		t.Fatalf("the dry run left %d partitions, want 3", n)
	}

	// No terminal, no --execute: one line, exit 2, nothing changed.
	refused := mqctl("", "topic", "alter", topic, "-p", "5", "--sample-keys")
	if refused.code != 2 || refused.stdout != "" || strings.Count(refused.stderr, "\n") != 1 ||
		!strings.HasPrefix(refused.stderr, "mqctl: topic alter: adding partitions to keyed maps keyed records to other partitions: give --execute") {
		t.Fatalf("without a terminal or --execute: exit %d, stdout %q, stderr %q", refused.code, refused.stdout, refused.stderr)
	}
	if n := partitions(); n != 3 {
		t.Fatalf("the refused alter left %d partitions, want 3", n)
	}

	// As before, a count that does not grow the topic is the broker's
	// refusal.
	shrink := mqctl("", "topic", "alter", topic, "-p", "2")
	if shrink.code != 1 || !strings.Contains(shrink.stderr, "INVALID_PARTITIONS") {
		t.Fatalf("-p 2: exit %d, stderr %q", shrink.code, shrink.stderr)
	}

	grown := mqctl("", "topic", "alter", topic, "-p", "5", "--execute")
	if grown.code != 0 || !regexp.MustCompile(`(?m)^keyed +altered +partitions=5$`).MatchString(grown.stdout) {
		t.Fatalf("--execute: exit %d\n%s\n%s", grown.code, grown.stdout, grown.stderr)
	}
	if n := partitions(); n != 5 {
		t.Fatalf("--execute left %d partitions, want 5", n)
	}

	// The same keys again, from a new default kgo client that sees 5
	// partitions: the keys that land elsewhere are the ones counted.
	var again []*kgo.Record
	for i := 0; i < distinct; i++ {
		again = append(again, &kgo.Record{Topic: topic, Key: fmt.Appendf(nil, "order-%d", i), Value: []byte("after")})
	}
	after := produceKeys(ctx, t, b, again)
	moved := 0
	for k, p := range after {
		if before[k] != p {
			moved++
		}
	}
	if moved != s.Moved {
		t.Fatalf("the dry run said %d keys move; producing them again moved %d", s.Moved, moved)
	}
	if moved == 0 {
		t.Fatal("no key moved: the test proves nothing")
	}

	// On a terminal mqctl asks; "n" changes nothing.
	no := mqctlOnTerminal(ctx, t, b, "n\n", "topic", "alter", topic, "-p", "6")
	if no.code != 1 || !strings.Contains(no.stderr, "mqctl: grow keyed to 6 partitions? [y/N] ") || !strings.Contains(no.stderr, "not confirmed: nothing changed") {
		t.Fatalf("answered n: exit %d, stderr %q", no.code, no.stderr)
	}
	if n := partitions(); n != 5 {
		t.Fatalf("after a no, %d partitions, want 5", n)
	}
	yes := mqctlOnTerminal(ctx, t, b, "y\n", "topic", "alter", topic, "-p", "6")
	if yes.code != 0 {
		t.Fatalf("answered y: exit %d, stderr %q", yes.code, yes.stderr)
	}
	if n := partitions(); n != 6 {
		t.Fatalf("after a yes, %d partitions, want 6", n)
	}
}

// produceKeys produces recs with a new kgo client with default options
// (its partitioner is kgo's default) and returns the partition each key
// was last written to. The client is new so that it sees the topic's
// partitions as they are now.
func produceKeys(ctx context.Context, t *testing.T, b *broker, recs []*kgo.Record) map[string]int32 {
	t.Helper()
	cl := b.client()
	if err := cl.ProduceSync(ctx, recs...).FirstErr(); err != nil {
		t.Fatalf("produce: %v", err)
	}
	out := map[string]int32{}
	for _, r := range recs {
		if r.Key != nil {
			out[string(r.Key)] = r.Partition
		}
	}
	return out
}

// mqctlOnTerminal runs mqctl with a pseudo-terminal as its stdin, on
// which typed is waiting to be read.
func mqctlOnTerminal(ctx context.Context, t *testing.T, b *broker, typed string, args ...string) toolResult {
	t.Helper()
	ptmx, tty := mqtest.Terminal(t)
	if _, err := ptmx.WriteString(typed); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(ctx, time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, filepath.Join(binDir, "mqctl"), append([]string{"-b", b.addr}, args...)...)
	var out, errOut lockedBuffer
	cmd.Stdin, cmd.Stdout, cmd.Stderr = tty, &out, &errOut
	err := cmd.Run()
	if ctx.Err() != nil {
		t.Fatalf("mqctl %s did not finish (a hang)\nstderr: %s", strings.Join(args, " "), errOut.String())
	}
	res := toolResult{stdout: out.String(), stderr: errOut.String()}
	if exit, ok := err.(*exec.ExitError); ok {
		res.code = exit.ExitCode()
	} else if err != nil {
		t.Fatal(err)
	}
	return res
}
