package e2e

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/mqproject/mq/lib/mqtest"
)

// mountTmpfs mounts a tmpfs of size (mount's notation: "20m") on a new
// directory and unmounts it when the test ends, after the brokers started
// later are stopped. It skips the test when that is not possible.
func mountTmpfs(t *testing.T, size string) string {
	t.Helper()
	if os.Geteuid() != 0 {
		t.Skip("mounting a tmpfs needs root")
	}
	dir := filepath.Join(t.TempDir(), "tmpfs")
	if err := os.Mkdir(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	if out, err := exec.Command("mount", "-t", "tmpfs", "-o", "size="+size, "tmpfs", dir).CombinedOutput(); err != nil {
		t.Skipf("cannot mount a tmpfs: %v: %s", err, bytes.TrimSpace(out))
	}
	t.Cleanup(func() {
		if out, err := exec.Command("umount", dir).CombinedOutput(); err != nil {
			t.Errorf("umount %s: %v: %s", dir, err, out)
		}
	})
	return dir
}

// tool runs one of our programs against b and returns its stdout, stderr
// and exit code.
func tool(t *testing.T, ctx context.Context, b *broker, name string, args ...string) (stdout, stderr string, code int) {
	t.Helper()
	timeout := 2 * time.Minute
	if deadline, ok := ctx.Deadline(); ok {
		timeout = time.Until(deadline)
	}
	r := runTool(t, timeout, "", name, append([]string{"-b", "tcp://" + b.addr}, args...)...)
	return r.stdout, r.stderr, r.code
}

// fullDiskLine is the value of input line i (from 0) of the disk filler.
func fullDiskLine(i int) string {
	return fmt.Sprintf("m%07d-%s", i, strings.Repeat("x", 90))
}

// TestFullDiskRefusesLosesNothingAndRecovers fills mqd's data directory (a
// 20 MB tmpfs) with mqpipe produce, then checks what each party sees: the
// producer one storage-error line and exit 1 after --ack-timeout, mqd one
// Error line, kgo KAFKA_STORAGE_ERROR with the errno in ErrorMessage,
// DescribeLogDirs and mqctl the failing directory. Every acknowledged
// message is readable and nothing else is served; once the tmpfs grows,
// producing works again without restarting mqd.
func TestFullDiskRefusesLosesNothingAndRecovers(t *testing.T) {
	parallel(t)
	dir := mountTmpfs(t, "20m")
	b := startBroker(t, brokerOpts{dataDir: dir})
	ctx := ctxFor(t, 4*time.Minute)

	// 40 MB of input: twice what fits.
	const n = 400_000
	var in bytes.Buffer
	want := make([]string, n) // the input lines
	for i := range n {
		want[i] = fullDiskLine(i)
		in.WriteString(want[i])
		in.WriteByte('\n')
	}
	input := filepath.Join(t.TempDir(), "input")
	if err := os.WriteFile(input, in.Bytes(), 0o644); err != nil {
		t.Fatal(err)
	}
	report, stderr, code := tool(t, ctx, b, "mqpipe", "produce", "-t", "full", "--ack-timeout", "5s", "--report", input)
	if code != 1 {
		t.Fatalf("mqpipe produce exit %d on a full disk, want 1; stderr:\n%s", code, stderr)
	}
	errLines := lines(strings.NewReader(stderr))
	if len(errLines) != 2 || errLines[0] != "mqpipe: storage error on full-0 (no space left on device); retrying" ||
		!regexp.MustCompile(`^mqpipe: messages waited 5s for an acknowledgment \(--ack-timeout\); mqd answers but refuses them: storage error on full-0 \(no space left on device\); [0-9]+ of [0-9]+ messages not acknowledged: lines [0-9]+-`).MatchString(errLines[1]) {
		t.Fatalf("mqpipe stderr, want the storage line then the line giving up:\n%s", stderr)
	}
	// One partition: the acknowledged messages are the first lines, in order.
	acked := lines(strings.NewReader(report))
	if len(acked) == 0 || len(acked) == n {
		t.Fatalf("%d of %d messages acknowledged on a 20 MB disk", len(acked), n)
	}
	for i, l := range acked {
		if l != "0 "+strconv.Itoa(i) {
			t.Fatalf("report line %d is %q, want \"0 %d\"", i, l, i)
		}
	}
	if got := strings.Count(b.stderr.String(), "level=ERROR"); got != 1 || !regexp.MustCompile(
		`level=ERROR msg="appends failing; producers get KAFKA_STORAGE_ERROR until a write succeeds" .*topic=full partition=0 .*no space left on device`).MatchString(b.stderr.String()) {
		t.Fatalf("mqd logged %d Error lines, want one naming full-0 and ENOSPC:\n%s", got, b.stderr.String())
	}

	// The producer's batches no longer fit, but smaller writes might: take
	// the last bytes too.
	fillDisk(t, dir)

	// kgo: KAFKA_STORAGE_ERROR once its retries are spent, and the
	// broker's message in the raw response. The records are larger than
	// a page, which the segment file's last page could otherwise hold.
	big := make([]byte, 64<<10)
	rand.NewChaCha8([32]byte{}).Read(big) // incompressible: kgo compresses

	cl := b.client(kgo.DefaultProduceTopic("full"), kgo.RecordRetries(2), kgo.RetryBackoffFn(func(int) time.Duration { return 10 * time.Millisecond }))
	if err := cl.ProduceSync(ctx, &kgo.Record{Value: big}).FirstErr(); !errors.Is(err, kerr.KafkaStorageError) {
		t.Fatalf("kgo produce on a full disk: %v, want KAFKA_STORAGE_ERROR", err)
	}
	dcl := b.client(kgo.DefaultProduceTopic("full"), kgo.RecordDeliveryTimeout(time.Second))
	if err := dcl.ProduceSync(ctx, &kgo.Record{Value: big}).FirstErr(); !errors.Is(err, kgo.ErrRecordTimeout) {
		t.Fatalf("kgo produce with a delivery timeout on a full disk: %v, want it to time out", err)
	}
	if msg := rawProduceError(t, ctx, cl, "full", big); !strings.Contains(msg, "KAFKA_STORAGE_ERROR") || !strings.Contains(msg, "no space left on device") {
		t.Fatalf("raw produce answer %q, want KAFKA_STORAGE_ERROR saying the disk is full", msg)
	}

	// The failing directory, through kadm and mqctl.
	dirs, err := kadm.NewClient(cl).DescribeAllLogDirs(ctx, nil)
	if err != nil {
		t.Fatal(err)
	}
	for _, d := range dirs[1] {
		if d.Dir != dir || d.Err != kerr.KafkaStorageError || d.UsableBytes >= 1<<20 || d.Topics["full"][0].Size < 10<<20 {
			t.Fatalf("log dir of a full disk: %+v", d)
		}
	}
	out, _, code := tool(t, ctx, b, "mqctl", "cluster", "describe")
	if code != 0 || !regexp.MustCompile(`(?m)^1 +`+regexp.QuoteMeta(dir)+` +\S+ +20\.0MiB +failing since \S+: log: append at offset [0-9]+: write \S+: no space left on device$`).MatchString(out) {
		t.Fatalf("mqctl cluster describe (exit %d):\n%s", code, out)
	}
	out, _, code = tool(t, ctx, b, "mqctl", "topic", "describe", "full")
	if code != 0 || !regexp.MustCompile(`(?m)^full +0 +1 +1 +1 +- +0 +[0-9]+ +failing on 1 \(no space left on device\)$`).MatchString(out) {
		t.Fatalf("mqctl topic describe (exit %d):\n%s", code, out)
	}

	// Everything acknowledged is there, and nothing but whole produced
	// messages in order.
	hw := checkFullDiskContents(t, ctx, b, want, len(acked), -1)

	// More room: producing resumes, mqd untouched.
	if out, err := exec.Command("mount", "-o", "remount,size=128m", dir).CombinedOutput(); err != nil {
		t.Fatalf("remount: %v: %s", err, out)
	}
	report, stderr, code = tool(t, ctx, b, "mqpipe", "produce", "-t", "full", "--ack-timeout", "5s", "--report", input)
	if code != 0 || stderr != "" {
		t.Fatalf("mqpipe produce after the disk grew: exit %d\n%s", code, stderr)
	}
	if first := lines(strings.NewReader(report))[0]; first != fmt.Sprintf("0 %d", hw) {
		t.Fatalf("first offset after recovery %q, want 0 %d", first, hw)
	}
	if !regexp.MustCompile(`level=INFO msg="appends recovered" .*topic=full partition=0 .*failed_appends=[1-9]`).MatchString(b.stderr.String()) {
		t.Fatalf("mqd did not log the recovery:\n%s", b.stderr.String())
	}
	out, _, _ = tool(t, ctx, b, "mqctl", "cluster", "describe")
	if !regexp.MustCompile(`(?m)^1 +` + regexp.QuoteMeta(dir) + ` +\S+ +128\.0MiB +ok$`).MatchString(out) {
		t.Fatalf("mqctl cluster describe after recovery:\n%s", out)
	}

	// After a crash, recovery serves the same: both runs, whole.
	b.restart(true)
	checkFullDiskContents(t, ctx, b, want, int(hw)+n, hw)
}

// fillDisk writes a file in dir until the file system holding it has no
// byte left.
func fillDisk(t *testing.T, dir string) {
	t.Helper()
	f, err := os.Create(filepath.Join(dir, "filler"))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	for chunk := 1 << 20; chunk > 0; chunk /= 4 {
		buf := make([]byte, chunk)
		for {
			if _, err := f.Write(buf); err != nil {
				if !errors.Is(err, syscall.ENOSPC) {
					t.Fatal(err)
				}
				break
			}
		}
	}
}

// rawProduceError sends one record to partition 0 of topic as a Produce v9
// request and returns the partition's answer: "CODE: message".
func rawProduceError(t *testing.T, ctx context.Context, cl *kgo.Client, topic string, value []byte) string {
	t.Helper()
	p := produceBatch(t, ctx, cl, 9, topic, 0, encodeBatch(-1, -1, -1, value))
	msg := ""
	if p.ErrorMessage != nil {
		msg = *p.ErrorMessage
	}
	return fmt.Sprintf("%v: %s", kerr.ErrorForCode(p.ErrorCode), msg)
}

// checkFullDiskContents consumes the topic full to its high-water mark
// and checks that it holds at least the acknowledged messages and only
// input lines in order: from line 0 at offset 0, and again from line 0 at
// offset second when second ≥ 0. It returns the high-water mark.
func checkFullDiskContents(t *testing.T, ctx context.Context, b *broker, input []string, acked int, second int64) int64 {
	t.Helper()
	ends, err := b.admin().ListEndOffsets(ctx, "full")
	if err != nil {
		t.Fatal(err)
	}
	end, _ := ends.Lookup("full", 0)
	if end.Err != nil || end.Offset < int64(acked) {
		t.Fatalf("high-water mark %d (%v) below the %d acknowledged messages", end.Offset, end.Err, acked)
	}
	out, stderr, code := tool(t, ctx, b, "mqpipe", "consume", "-t", "full", "-e")
	if code != 0 {
		t.Fatalf("mqpipe consume: exit %d: %s", code, stderr)
	}
	got := strings.Split(strings.TrimSuffix(out, "\n"), "\n")
	if int64(len(got)) != end.Offset {
		t.Fatalf("consumed %d messages, high-water mark %d", len(got), end.Offset)
	}
	for i, v := range got {
		j := i
		if second >= 0 && int64(i) >= second {
			j = i - int(second)
		}
		if j >= len(input) || v != input[j] {
			want := "past the input"
			if j < len(input) {
				want = input[j]
			}
			t.Fatalf("message at offset %d is %q, want %q", i, v, want)
		}
	}
	return end.Offset
}

// TestConsumeReportsStorageReadError removes a segment file under a
// running mqd: the read fails, and mqpipe consume says where.
func TestConsumeReportsStorageReadError(t *testing.T) {
	// No scrubber: it would open the closed segment before the test
	// removes it, and reads would go on through its open file.
	b := startBroker(t, brokerOpts{props: []string{"log.scrub.bytes.per.sec=0"}})
	ctx := ctxFor(t, 2*time.Minute)
	if _, err := b.admin().CreateTopic(ctx, 1, 1, map[string]*string{"segment.bytes": kadm.StringPtr("100")}, "rd"); err != nil {
		t.Fatal(err)
	}
	cl := b.client(kgo.DefaultProduceTopic("rd"))
	for i := range 5 {
		if err := cl.ProduceSync(ctx, &kgo.Record{Value: fmt.Appendf(nil, "%03d-%s", i, strings.Repeat("v", 80))}).FirstErr(); err != nil {
			t.Fatal(err)
		}
	}
	// After a restart closed segments are opened on their first read.
	b.restart(false)
	if err := os.Remove(filepath.Join(b.dataDir, "rd-0", "00000000000000000000.log")); err != nil {
		t.Fatal(err)
	}
	_, stderr, code := tool(t, ctx, b, "mqpipe", "consume", "-t", "rd", "-e")
	if code != 1 || stderr != "mqpipe: consume rd partition 0 at offset 0: KAFKA_STORAGE_ERROR: Disk error when trying to access log file on the disk.\n" {
		t.Fatalf("mqpipe consume of an unreadable segment: exit %d\n%s", code, stderr)
	}
}

// TestCompactTopicKeepsItsHeadDespiteRetention checks that retention,
// running every 100ms, deletes old segments of a delete topic and none of
// a compact topic with the same retention.ms.
func TestCompactTopicKeepsItsHeadDespiteRetention(t *testing.T) {
	b := startBroker(t, brokerOpts{props: []string{"log.retention.check.interval.ms=100"}})
	ctx := ctxFor(t, 2*time.Minute)
	adm := b.admin()
	short := func(policy string) map[string]*string {
		return map[string]*string{"cleanup.policy": kadm.StringPtr(policy), "retention.ms": kadm.StringPtr("3000"), "segment.bytes": kadm.StringPtr("100")}
	}
	if _, err := adm.CreateTopic(ctx, 1, 1, short("compact"), "kept"); err != nil {
		t.Fatal(err)
	}
	if _, err := adm.CreateTopic(ctx, 1, 1, short("delete"), "expiring"); err != nil {
		t.Fatal(err)
	}
	cl := b.client()
	old := time.Now().Add(-time.Hour) // past retention.ms as soon as a segment closes
	produce := func(topic string, from, n int) {
		t.Helper()
		for i := from; i < from+n; i++ {
			r := &kgo.Record{Topic: topic, Key: []byte("k"), Value: fmt.Appendf(nil, "%s-%d-%s", topic, i, strings.Repeat("v", 80)), Timestamp: old}
			if err := cl.ProduceSync(ctx, r).FirstErr(); err != nil {
				t.Fatal(err)
			}
		}
	}
	startOf := func(topic string) int64 {
		t.Helper()
		starts, err := adm.ListStartOffsets(ctx, topic)
		if err != nil {
			t.Fatal(err)
		}
		o, _ := starts.Lookup(topic, 0)
		return o.Offset
	}
	waitStartPast := func(topic string, past int64) int64 {
		t.Helper()
		var s int64
		mqtest.Wait{Timeout: time.Minute}.For(t, fmt.Sprintf("the log start of %s past %d", topic, past), func() (bool, string) {
			s = startOf(topic)
			return s > past, fmt.Sprintf("%s: log start %d", topic, s)
		})
		return s
	}
	produce("kept", 0, 5)
	produce("expiring", 0, 5)
	s := waitStartPast("expiring", 0)
	// A second deletion comes from a retention pass that began after both
	// topics were written.
	produce("expiring", 5, 5)
	waitStartPast("expiring", s)

	if s := startOf("kept"); s != 0 {
		t.Fatalf("compact topic's log start is %d after retention, want 0", s)
	}
	fcl := b.client(kgo.ConsumePartitions(map[string]map[int32]kgo.Offset{"kept": {0: kgo.NewOffset().AtStart()}}))
	fs := fcl.PollFetches(ctx)
	if err := fs.Err(); err != nil {
		t.Fatal(err)
	}
	recs := fs.Records()
	if len(recs) == 0 || recs[0].Offset != 0 || !strings.HasPrefix(string(recs[0].Value), "kept-0-") {
		t.Fatalf("head of the compact topic: %v", recs)
	}
	if strings.Contains(b.stderr.String(), "partition=kept-0") {
		t.Fatalf("retention touched the compact topic:\n%s", b.stderr.String())
	}
}
