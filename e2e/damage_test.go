package e2e

import (
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/mqproject/mq/lib/mqtest"
)

// damageFixture is a one-partition topic of small segments holding the
// values v-00000, v-00001, … at offsets 0, 1, …, on an mqd stopped
// cleanly so that its files can be damaged.
type damageFixture struct {
	b      *broker
	topic  string
	dir    string   // the partition's directory
	values []string // by offset
}

func newDamageFixture(t *testing.T, props ...string) *damageFixture {
	t.Helper()
	b := startBroker(t, brokerOpts{props: props})
	ctx := ctxFor(t, time.Minute)
	f := &damageFixture{b: b, topic: "dmg", dir: filepath.Join(b.dataDir, "dmg-0")}
	segBytes := "8192"
	if _, err := b.admin().CreateTopic(ctx, 1, 1, map[string]*string{"segment.bytes": &segBytes}, f.topic); err != nil {
		t.Fatal(err)
	}
	cl := b.client(kgo.DefaultProduceTopic(f.topic))
	for i := 0; i < 3000; i += 20 {
		var recs []*kgo.Record
		for j := i; j < i+20; j++ {
			v := fmt.Sprintf("v-%05d", j)
			f.values = append(f.values, v)
			recs = append(recs, &kgo.Record{Value: []byte(v)})
		}
		if err := cl.ProduceSync(ctx, recs...).FirstErr(); err != nil {
			t.Fatal(err)
		}
	}
	cl.Close()
	if err := b.stop(); err != nil {
		t.Fatal(err)
	}
	return f
}

// segments returns the partition's segment files, oldest first.
func (f *damageFixture) segments(t *testing.T) []string {
	t.Helper()
	m, err := filepath.Glob(filepath.Join(f.dir, "*.log"))
	if err != nil || len(m) < 4 {
		t.Fatalf("segments %v (%v); want at least 4", m, err)
	}
	slices.Sort(m)
	return m
}

// consumeWithKgo reads the partition from the start with a plain kgo
// consumer until it reports an error for the partition, and returns the
// values it got and that error.
func (f *damageFixture) consumeWithKgo(t *testing.T) ([]string, error) {
	t.Helper()
	cl := f.b.client(kgo.ConsumePartitions(map[string]map[int32]kgo.Offset{f.topic: {0: kgo.NewOffset().AtStart()}}))
	ctx := ctxFor(t, 30*time.Second)
	var got []string
	for {
		fs := cl.PollFetches(ctx)
		if ctx.Err() != nil {
			t.Fatalf("kgo consumer saw no error within 30s after %d records (a hang)", len(got))
		}
		fs.EachRecord(func(r *kgo.Record) { got = append(got, string(r.Value)) })
		var ferr error
		fs.EachError(func(topic string, p int32, err error) {
			if topic == f.topic && p == 0 {
				ferr = err
			}
		})
		if ferr != nil {
			return got, ferr
		}
	}
}

// checkStopsAtDamage checks that a consumer of the damaged partition gets
// every record before the damage, in order, and then an error naming the
// partition — with mqpipe, kgo and kcat — and returns the first damaged
// offset.
func (f *damageFixture) checkStopsAtDamage(t *testing.T) int {
	t.Helper()
	b := f.b
	// mqpipe: the good records on stdout, then one line on stderr, exit 1.
	res := runTool(t, 30*time.Second, "", "mqpipe", "consume", "-b", b.addr, "-t", f.topic, "-e")
	got := lines(strings.NewReader(res.stdout))
	n := len(got)
	if res.code != 1 || n == 0 || n >= len(f.values) || !slices.Equal(got, f.values[:n]) {
		t.Fatalf("mqpipe consume: exit %d, %d of %d records (a prefix: %v); want exit 1 after the records before the damage\nstderr: %s",
			res.code, n, len(f.values), slices.Equal(got, f.values[:min(n, len(f.values))]), res.stderr)
	}
	t.Logf("mqpipe consume: %d records, exit %d, stderr: %s", n, res.code, res.stderr)
	want := fmt.Sprintf("%s partition 0 at offset %d", f.topic, n)
	if !strings.Contains(res.stderr, want) || !strings.Contains(res.stderr, "damaged") || strings.Count(strings.TrimSpace(res.stderr), "\n") != 0 {
		t.Fatalf("mqpipe stderr %q; want one line naming %q and the damage", res.stderr, want)
	}

	// kgo, as any Go program would use it: the same records, then an
	// error for the partition; no hang.
	kgot, err := f.consumeWithKgo(t)
	if !errors.Is(err, kerr.InvalidRecord) || !slices.Equal(kgot, f.values[:n]) {
		t.Fatalf("kgo: %d records, error %v; want the %d before the damage, then INVALID_RECORD", len(kgot), err, n)
	}

	// kcat (librdkafka): the same records, then it reports the error and
	// exits, as it does for any consumer error without -E.
	if path, err := exec.LookPath("kcat"); err == nil {
		res := runTool(t, 30*time.Second, "", path, "-b", b.addr, "-C", "-t", f.topic, "-e", "-f", `%s\n`)
		kc := lines(strings.NewReader(res.stdout))
		t.Logf("kcat: %d records, exit %d, stderr: %s", len(kc), res.code, res.stderr)
		if res.code == 0 || !slices.Equal(kc, f.values[:n]) || !strings.Contains(res.stderr, "[0]") {
			t.Fatalf("kcat: exit %d, %d records; want an error exit after the %d before the damage\nstderr: %s", res.code, len(kc), n, res.stderr)
		}
	} else {
		t.Log("kcat not installed: its part skipped (CI installs it)")
	}

	// The partition takes new records, and mqd said what it found, once.
	cl := b.client(kgo.DefaultProduceTopic(f.topic))
	if err := cl.ProduceSync(ctxFor(t, 30*time.Second), &kgo.Record{Value: []byte("after")}).FirstErr(); err != nil {
		t.Fatalf("produce after the damage: %v", err)
	}
	logs := b.stderr.String()
	if c := strings.Count(logs, "damaged range found"); c != 1 || !strings.Contains(logs, "topic="+f.topic) || !strings.Contains(logs, "partition=0") {
		t.Fatalf("mqd logged %d damage lines (want 1, with topic and partition):\n%s", c, logs)
	}
	return n
}

// TestCorruptSealedSegmentIsNeverServed flips bytes in the middle of a
// closed segment after a clean shutdown: the first read after the restart
// checks the batches it serves, stops at the damage, and every client
// gets the good records before it and then an error, not a hang.
func TestCorruptSealedSegmentIsNeverServed(t *testing.T) {
	f := newDamageFixture(t, "log.scrub.bytes.per.sec=0")
	seg := f.segments(t)[1]
	b, err := os.ReadFile(seg)
	if err != nil {
		t.Fatal(err)
	}
	mid := len(b) / 2
	for i := range 16 {
		b[mid+i] ^= 0x5a
	}
	if err := os.WriteFile(seg, b, 0o644); err != nil {
		t.Fatal(err)
	}
	f.b.start()
	n := f.checkStopsAtDamage(t)
	if first := firstOffsetOf(t, f.segments(t)[1]); n <= int(first) {
		t.Fatalf("consumers stopped at %d, before the damaged segment (base %d)", n, first)
	}
	if d := f.describedDamage(t); len(d) != 1 || d[0].FromOffset != int64(n) || d[0].Skipped {
		t.Fatalf("mqctl topic describe shows damage %+v; want one range from %d", d, n)
	}
	f.checkSkip(t, n)
	if d := f.describedDamage(t); len(d) != 1 || !d[0].Skipped {
		t.Fatalf("after the skip, mqctl topic describe shows damage %+v; want the range skipped", d)
	}
}

// describedDamage is what mqctl topic describe -o json says of the
// partition's damaged ranges; it also checks the table names them.
func (f *damageFixture) describedDamage(t *testing.T) []describedRange {
	t.Helper()
	res := runTool(t, 30*time.Second, "", "mqctl", "topic", "describe", "-b", f.b.addr, f.topic, "-o", "json")
	var topics []struct {
		Partitions []struct {
			Damaged []describedRange `json:"damaged"`
		} `json:"partitions"`
	}
	if res.code != 0 || json.Unmarshal([]byte(res.stdout), &topics) != nil || len(topics) != 1 || len(topics[0].Partitions) != 1 {
		t.Fatalf("mqctl topic describe -o json: exit %d: %s%s", res.code, res.stdout, res.stderr)
	}
	d := topics[0].Partitions[0].Damaged
	table := runTool(t, 30*time.Second, "", "mqctl", "topic", "describe", "-b", f.b.addr, f.topic)
	if len(d) > 0 && (!strings.Contains(table.stdout, "DAMAGED") || !strings.Contains(table.stdout, fmt.Sprintf("%d-%d on 1", d[0].FromOffset, d[0].ToOffset-1))) {
		t.Fatalf("mqctl topic describe table does not show the damage %+v:\n%s", d[0], table.stdout)
	}
	return d
}

// describedRange is one damaged range in mqctl's JSON.
type describedRange struct {
	FromOffset int64 `json:"from_offset"`
	ToOffset   int64 `json:"to_offset"`
	Skipped    bool  `json:"skipped"`
}

// TestScrubberFindsDamageNobodyRead: after a restart, the scrubber reads
// the closed segments on its own, and mqctl shows the damage it found
// before any consumer came near it.
func TestScrubberFindsDamageNobodyRead(t *testing.T) {
	f := newDamageFixture(t)
	seg := f.segments(t)[2]
	b, err := os.ReadFile(seg)
	if err != nil {
		t.Fatal(err)
	}
	b[len(b)/3] ^= 0x01
	if err := os.WriteFile(seg, b, 0o644); err != nil {
		t.Fatal(err)
	}
	f.b.start()
	mqtest.Wait{Timeout: 30 * time.Second}.For(t, "the damaged range described", func() (bool, string) {
		d := f.describedDamage(t)
		return len(d) == 1, fmt.Sprintf("damage %+v; mqd log:\n%s", d, f.b.stderr.String())
	})
	res := runTool(t, 30*time.Second, "", "mqctl", "cluster", "describe", "-b", f.b.addr, "-o", "json")
	if !strings.Contains(res.stdout, `"damaged_ranges":1`) {
		t.Fatalf("mqctl cluster describe does not count the damaged range:\n%s", res.stdout)
	}
	if !strings.Contains(f.b.stderr.String(), "damaged range found") {
		t.Fatalf("mqd did not log the damage:\n%s", f.b.stderr.String())
	}
}

// checkSkip gives the damage found at offset n up with mqctl, and checks
// that consumers then read every other record, and that mqd logged it.
func (f *damageFixture) checkSkip(t *testing.T, n int) {
	t.Helper()
	res := runTool(t, 30*time.Second, "", "mqctl", "records", "skip-damaged", "-b", f.b.addr, "-t", f.topic, "-o", "json")
	var skipped []struct {
		Partition  int32 `json:"partition"`
		FromOffset int64 `json:"from_offset"`
		ToOffset   int64 `json:"to_offset"`
	}
	if res.code != 0 || json.Unmarshal([]byte(res.stdout), &skipped) != nil || len(skipped) != 1 || skipped[0].FromOffset != int64(n) {
		t.Fatalf("mqctl records skip-damaged: exit %d, %s%s; want one range from %d", res.code, res.stdout, res.stderr, n)
	}
	to := int(skipped[0].ToOffset)
	if !strings.Contains(f.b.stderr.String(), "damaged range skipped on request") {
		t.Fatalf("mqd did not log the skip:\n%s", f.b.stderr.String())
	}
	res = runTool(t, 30*time.Second, "", "mqpipe", "consume", "-b", f.b.addr, "-t", f.topic, "-e")
	want := append(append(slices.Clone(f.values[:n]), f.values[to:]...), "after")
	if got := lines(strings.NewReader(res.stdout)); res.code != 0 || !slices.Equal(got, want) {
		t.Fatalf("consume after the skip: exit %d, %d records, want %d (all but offsets %d-%d)\n%s", res.code, len(got), len(want), n, to-1, res.stderr)
	}
	// Nothing left to skip: a second call skips nothing and succeeds.
	res = runTool(t, 30*time.Second, "", "mqctl", "records", "skip-damaged", "-b", f.b.addr, "-t", f.topic, "-o", "json")
	if res.code != 0 || strings.TrimSpace(res.stdout) != "[]" {
		t.Fatalf("second skip-damaged: exit %d, %q %s", res.code, res.stdout, res.stderr)
	}
}

// TestTruncatedSealedSegmentIsFoundAtStart cuts a closed segment short
// after a clean shutdown: mqd notices at start-up (the segment is shorter
// than it was sealed), and consumers stop at the lost tail with an error.
func TestTruncatedSealedSegmentIsFoundAtStart(t *testing.T) {
	f := newDamageFixture(t, "log.scrub.bytes.per.sec=0")
	segs := f.segments(t)
	seg := segs[1]
	fi, err := os.Stat(seg)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.Truncate(seg, fi.Size()/2); err != nil {
		t.Fatal(err)
	}
	f.b.start()
	if !strings.Contains(f.b.stderr.String(), "it was sealed at") {
		t.Fatalf("mqd did not report the short segment at start-up:\n%s", f.b.stderr.String())
	}
	n := f.checkStopsAtDamage(t)
	if next := firstOffsetOf(t, segs[2]); n >= int(next) || n <= int(firstOffsetOf(t, seg)) {
		t.Fatalf("consumers stopped at %d; want inside the truncated segment, before %d", n, next)
	}
}

// firstOffsetOf is the base offset a segment file is named for.
func firstOffsetOf(t *testing.T, path string) int64 {
	t.Helper()
	var base int64
	if _, err := fmt.Sscanf(filepath.Base(path), "%020d.log", &base); err != nil {
		t.Fatal(err)
	}
	return base
}
