package pipe

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/mqproject/mq/lib/mqtest"
)

// memSource is an in-memory Source: a queue of messages that are
// delivered again when released, with every report recorded. A report
// on a message that is not out (twice, or never delivered) is recorded
// as a protocol error.
type memSource struct {
	mu        sync.Mutex
	queue     []*Message
	wake      chan struct{}
	out       map[*Message]bool
	accepted  []*Message
	failed    map[*Message]string
	released  int
	delivered int
	protocol  []string // reports that break Source's contract
	acceptErr error    // Accept returns this
	closed    bool
}

func newMemSource(values ...string) *memSource {
	s := &memSource{wake: make(chan struct{}, 1), out: map[*Message]bool{}, failed: map[*Message]string{}}
	for i, v := range values {
		s.push(&Message{Topic: "t", Partition: 0, Offset: int64(i), Value: []byte(v), Timestamp: time.UnixMilli(1700000000000 + int64(i))})
	}
	return s
}

func (s *memSource) push(m *Message) {
	s.mu.Lock()
	s.queue = append(s.queue, m)
	s.mu.Unlock()
	select {
	case s.wake <- struct{}{}:
	default:
	}
}

func (s *memSource) Next(ctx context.Context) (*Message, error) {
	for {
		s.mu.Lock()
		if len(s.queue) > 0 {
			m := s.queue[0]
			s.queue = s.queue[1:]
			m.DeliveryCount++
			s.out[m] = true
			s.delivered++
			s.mu.Unlock()
			return m, nil
		}
		s.mu.Unlock()
		select {
		case <-s.wake:
		case <-ctx.Done():
			return nil, ctx.Err()
		}
	}
}

func (s *memSource) take(m *Message, what string) {
	if !s.out[m] {
		s.protocol = append(s.protocol, fmt.Sprintf("%s of %s, which is not out", what, m.position()))
	}
	delete(s.out, m)
}

func (s *memSource) Accept(m *Message) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.take(m, "accept")
	s.accepted = append(s.accepted, m)
	return s.acceptErr
}

func (s *memSource) Release(m *Message) error {
	s.mu.Lock()
	s.take(m, "release")
	s.released++
	s.mu.Unlock()
	s.push(m)
	return nil
}

func (s *memSource) Fail(m *Message, reason string) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.take(m, "fail")
	s.failed[m] = reason
	return nil
}

func (s *memSource) Close(context.Context) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if len(s.out) > 0 {
		s.protocol = append(s.protocol, fmt.Sprintf("closed with %d messages out", len(s.out)))
	}
	s.closed = true
	return nil
}

// check fails t for a broken contract.
func (s *memSource) check(t *testing.T) {
	t.Helper()
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, p := range s.protocol {
		t.Error(p)
	}
	if !s.closed {
		t.Error("the source was not closed")
	}
}

// runUntil runs RunExec in the background; the returned function cancels
// its context and returns its result.
func runExecAsync(cfg ExecConfig, src Source) (stop func() (ExecStats, error)) {
	ctx, cancel := context.WithCancel(context.Background())
	type res struct {
		st  ExecStats
		err error
	}
	done := make(chan res, 1)
	go func() {
		st, err := RunExec(ctx, cfg, src)
		done <- res{st, err}
	}()
	return func() (ExecStats, error) {
		cancel()
		r := <-done
		return r.st, r.err
	}
}

func TestExecFailingCommandIsRetriedThenDeadLettered(t *testing.T) {
	src := newMemSource("ok1", "bad", "ok2")
	var stderr bytes.Buffer
	cfg := ExecConfig{
		Command:      []string{"sh", "-c", `read v; if [ "$v" = bad ]; then echo "first line" >&2; echo "boom $v" >&2; exit 3; fi`},
		Attempts:     3,
		RetryBackoff: 10 * time.Millisecond,
		ExitWhenIdle: 300 * time.Millisecond,
		Stderr:       &stderr,
	}
	st, err := RunExec(context.Background(), cfg, src)
	if err != nil {
		t.Fatal(err)
	}
	src.check(t)
	if len(src.accepted) != 2 || len(src.failed) != 1 || src.released != 2 {
		t.Fatalf("accepted %d, failed %d, released %d; want 2, 1, 2", len(src.accepted), len(src.failed), src.released)
	}
	for m, reason := range src.failed {
		if string(m.Value) != "bad" || m.DeliveryCount != 3 {
			t.Errorf("failed %q after %d deliveries; want bad after 3", m.Value, m.DeliveryCount)
		}
		if want := "exit status 3: first line\nboom bad"; reason != want {
			t.Errorf("reason %q; want %q", reason, want)
		}
	}
	if st != (ExecStats{Accepted: 2, Released: 2, Failed: 1}) {
		t.Errorf("stats %+v", st)
	}
	if !strings.Contains(stderr.String(), "mqpipe: t/0@1: exit status 3: first line boom bad (attempt 1 of 3, again in 10ms)") ||
		!strings.Contains(stderr.String(), "(attempt 2 of 3, again in 20ms)") ||
		!strings.Contains(stderr.String(), "(attempt 3 of 3, giving up)") {
		t.Errorf("stderr:\n%s", stderr.String())
	}
}

func TestExecTimeoutKillsTheProcessGroup(t *testing.T) {
	dir := t.TempDir()
	src := newMemSource("x")
	cfg := ExecConfig{
		// The background sleep is in the command's process group: it is
		// killed with it.
		Command:      []string{"sh", "-c", `sleep 60 & echo $! > ` + filepath.Join(dir, "pid") + `; echo started >&2; wait`},
		Attempts:     1,
		Timeout:      300 * time.Millisecond,
		ExitWhenIdle: 100 * time.Millisecond,
		KillDelay:    time.Second,
	}
	if _, err := RunExec(context.Background(), cfg, src); err != nil {
		t.Fatal(err)
	}
	src.check(t)
	if len(src.failed) != 1 {
		t.Fatalf("failed %d; want 1", len(src.failed))
	}
	for _, reason := range src.failed {
		if reason != "timed out after 300ms: started" {
			t.Errorf("reason %q", reason)
		}
	}
	data, err := os.ReadFile(filepath.Join(dir, "pid"))
	if err != nil {
		t.Fatal(err)
	}
	pid, _ := strconv.Atoi(strings.TrimSpace(string(data)))
	mqtest.WaitFor(t, "the background sleep to be gone", func() (bool, string) {
		p, err := os.FindProcess(pid)
		if err != nil {
			return false, fmt.Sprintf("find process %d: %v", pid, err)
		}
		if err := p.Signal(syscall.Signal(0)); err != nil {
			return true, ""
		}
		return false, fmt.Sprintf("process %d still there", pid)
	})
}

func TestExecStopLetsRunningCommandsFinishWithinGrace(t *testing.T) {
	dir := t.TempDir()
	src := newMemSource("quick", "quick", "slow", "quick", "pending", "pending")
	// A command marks that it ran before it exits 0; a slow one
	// outlives the grace period.
	script := `read v; touch ` + dir + `/started.$MQ_OFFSET; if [ "$v" = slow ]; then sleep 60; fi; ` +
		`while [ ! -e ` + dir + `/go ]; do sleep 0.01; done; touch ` + dir + `/ran.$MQ_OFFSET`
	stop := runExecAsync(ExecConfig{
		Command: []string{"sh", "-c", script}, Jobs: 4, Grace: 2 * time.Second, KillDelay: time.Second,
	}, src)
	mqtest.WaitFor(t, "four commands to start", func() (bool, string) {
		m, _ := filepath.Glob(filepath.Join(dir, "started.*"))
		return len(m) == 4, fmt.Sprintf("started: %v", m)
	})
	// Stop while four run; the quick ones may finish now.
	done := make(chan struct{})
	var st ExecStats
	var err error
	go func() { st, err = stop(); close(done) }()
	if err := os.WriteFile(filepath.Join(dir, "go"), nil, 0o644); err != nil {
		t.Fatal(err)
	}
	<-done
	if err != nil {
		t.Fatal(err)
	}
	src.check(t)
	if st.Accepted != 3 || st.Stopped != 1 {
		t.Errorf("stats %+v; want 3 accepted, 1 stopped", st)
	}
	if src.delivered != 4 {
		t.Errorf("%d delivered; want 4 (none after the stop)", src.delivered)
	}
	for _, m := range src.accepted {
		if _, err := os.Stat(filepath.Join(dir, fmt.Sprintf("ran.%d", m.Offset))); err != nil {
			t.Errorf("offset %d accepted without having run: %v", m.Offset, err)
		}
	}
}

func TestExecRunsJobsAtOnce(t *testing.T) {
	dir := t.TempDir()
	var values []string
	for i := 0; i < 16; i++ {
		values = append(values, strconv.Itoa(i))
	}
	src := newMemSource(values...)
	// Each command waits until 8 have started: with fewer at once, the
	// first ones time out.
	script := `touch ` + dir + `/$MQ_OFFSET; i=0; while [ $(ls ` + dir + ` | wc -l) -lt 8 ]; do i=$((i+1)); [ $i -gt 2000 ] && exit 1; sleep 0.01; done`
	st, err := RunExec(context.Background(), ExecConfig{
		Command: []string{"sh", "-c", script}, Jobs: 8, Attempts: 1, ExitWhenIdle: 300 * time.Millisecond,
	}, src)
	if err != nil {
		t.Fatal(err)
	}
	src.check(t)
	if st.Accepted != 16 {
		t.Fatalf("stats %+v; want 16 accepted", st)
	}
}

func TestExecWhenIdleWaitsForRunningCommands(t *testing.T) {
	src := newMemSource("a")
	start := time.Now()
	st, err := RunExec(context.Background(), ExecConfig{
		Command: []string{"sh", "-c", "sleep 1"}, ExitWhenIdle: 100 * time.Millisecond,
	}, src)
	if err != nil {
		t.Fatal(err)
	}
	src.check(t)
	if st.Accepted != 1 {
		t.Fatalf("stats %+v after %v; want the command to have finished", st, time.Since(start))
	}
	// A message that comes while the worker is idle but not yet for
	// long enough is taken.
	src = newMemSource()
	go func() {
		time.Sleep(50 * time.Millisecond)
		src.push(&Message{Topic: "t", Value: []byte("late")})
	}()
	st, err = RunExec(context.Background(), ExecConfig{Command: []string{"true"}, ExitWhenIdle: time.Second}, src)
	if err != nil || st.Accepted != 1 {
		t.Fatalf("stats %+v, %v; want the late message run", st, err)
	}
}

func TestExecEnvironment(t *testing.T) {
	t.Setenv("MQ_HEADER_STALE", "from the worker's environment")
	t.Setenv("MQ_KEY", "stale")
	src := newMemSource()
	src.push(&Message{
		Topic: "orders", Partition: 3, Offset: 42, Key: []byte("k-1"), Value: []byte("the value"),
		Timestamp: time.UnixMilli(1700000000123),
		Headers:   []Header{{Key: "trace-id", Value: []byte("abc")}, {Key: "Content.Type", Value: []byte("text/plain")}},
	})
	src.push(&Message{Topic: "orders", Offset: 43, Key: []byte("a\x00b"), Value: []byte("nul"), Timestamp: time.UnixMilli(1)})
	src.push(&Message{Topic: "orders", Offset: 44, Value: []byte("null key"), Timestamp: time.UnixMilli(1)})
	var out bytes.Buffer
	_, err := RunExec(context.Background(), ExecConfig{
		Command: []string{"sh", "-c", `echo "$MQ_TOPIC|$MQ_PARTITION|$MQ_OFFSET|${MQ_KEY-unset}|${MQ_KEY_B64-}|$MQ_TIMESTAMP|$MQ_DELIVERY_COUNT|$MQ_GROUP|$MQ_HEADER_TRACE_ID|$MQ_HEADER_CONTENT_TYPE|${MQ_HEADER_STALE-unset}|$(cat)"`},
		Group:   "g", ExitWhenIdle: 200 * time.Millisecond, Stdout: &out,
	}, src)
	if err != nil {
		t.Fatal(err)
	}
	src.check(t)
	want := "orders|3|42|k-1||1700000000123|1|g|abc|text/plain|unset|the value\n" +
		"orders|0|43|unset|YQBi|1|1|g|||unset|nul\n" +
		"orders|0|44|unset||1|1|g|||unset|null key\n"
	if out.String() != want {
		t.Errorf("stdout:\n%s\nwant:\n%s", out.String(), want)
	}
}

func TestHeaderEnvName(t *testing.T) {
	for name, want := range map[string]string{
		"trace-id": "MQ_HEADER_TRACE_ID", "X9": "MQ_HEADER_X9", "é": "MQ_HEADER___", "": "MQ_HEADER_", "a.b c": "MQ_HEADER_A_B_C",
	} {
		if got := HeaderEnvName(name); got != want {
			t.Errorf("HeaderEnvName(%q) = %q; want %q", name, got, want)
		}
	}
}

func TestExecSourceErrorEndsTheRun(t *testing.T) {
	src := newMemSource("a", "b")
	src.acceptErr = errors.New("commit failed")
	_, err := RunExec(context.Background(), ExecConfig{Command: []string{"true"}}, src)
	if err == nil || !strings.Contains(err.Error(), "commit failed") {
		t.Fatalf("err %v; want the source's error", err)
	}
	src.check(t)
}

func TestExecCommandThatCannotStartFails(t *testing.T) {
	src := newMemSource("a")
	_, err := RunExec(context.Background(), ExecConfig{Command: []string{"/nonexistent/cmd"}, Attempts: 1, ExitWhenIdle: 100 * time.Millisecond}, src)
	if err != nil {
		t.Fatal(err)
	}
	src.check(t)
	for _, reason := range src.failed {
		if !strings.Contains(reason, "no such file") {
			t.Errorf("reason %q", reason)
		}
	}
	if len(src.failed) != 1 {
		t.Errorf("failed %d; want 1", len(src.failed))
	}
}

// BenchmarkExecTrue is the runner's cost per message with `true` as the
// command (a fork and exec per message dominates it).
func BenchmarkExecTrue(b *testing.B) {
	for _, jobs := range []int{1, 8} {
		b.Run(fmt.Sprintf("j=%d", jobs), func(b *testing.B) {
			src := newMemSource()
			for i := 0; i < b.N; i++ {
				src.queue = append(src.queue, &Message{Topic: "t", Offset: int64(i), Value: []byte("v")})
			}
			b.ResetTimer()
			st, err := RunExec(context.Background(), ExecConfig{Command: []string{"true"}, Jobs: jobs, ExitWhenIdle: 20 * time.Millisecond}, src)
			b.StopTimer()
			if err != nil || st.Accepted != int64(b.N) {
				b.Fatalf("%+v %v", st, err)
			}
		})
	}
}

func TestExecBackgroundProcessHoldingStderrDoesNotFailTheMessage(t *testing.T) {
	src := newMemSource("a", "b")
	st, err := RunExec(context.Background(), ExecConfig{
		Command: []string{"sh", "-c", `read v; sleep 30 & [ "$v" = a ]`}, Attempts: 1, ExitWhenIdle: 200 * time.Millisecond,
	}, src)
	if err != nil {
		t.Fatal(err)
	}
	src.check(t)
	if st.Accepted != 1 || st.Failed != 1 {
		t.Fatalf("stats %+v; want a accepted, b failed", st)
	}
	for _, reason := range src.failed {
		if reason != "exit status 1" {
			t.Errorf("reason %q", reason)
		}
	}
}

func TestDeadLetterKeepsTheRecordAndSaysWhy(t *testing.T) {
	m := &Message{Topic: "jobs", Partition: 2, Offset: 77, Key: []byte("k"), Value: []byte("v"), DeliveryCount: 5,
		Timestamp: time.UnixMilli(1700000000000), Headers: []Header{{Key: "h", Value: []byte("x")}}}
	r := DeadLetter(m, "jobs.dead", "workers", "exit status 3: no")
	var got []string
	for _, h := range r.Headers {
		got = append(got, h.Key+"="+string(h.Value))
	}
	want := "h=x mq.dlq.source.topic=jobs mq.dlq.source.partition=2 mq.dlq.source.offset=77 mq.dlq.delivery.count=5 mq.dlq.group=workers mq.dlq.error=exit status 3: no"
	if strings.Join(got, " ") != want || r.Topic != "jobs.dead" || string(r.Key) != "k" || string(r.Value) != "v" || !r.Timestamp.Equal(m.Timestamp) {
		t.Errorf("dead letter %s %q=%q %v %s; want %s", r.Topic, r.Key, r.Value, r.Timestamp, strings.Join(got, " "), want)
	}
}

func TestExecStopReleasesRetriesWaitingAtOnce(t *testing.T) {
	src := newMemSource("x")
	stderr := &syncBuffer{}
	stop := runExecAsync(ExecConfig{
		Command:      []string{"sh", "-c", "exit 1"},
		RetryBackoff: time.Hour, // a stop that waited for it would time the test out
		Stderr:       stderr,
	}, src)
	mqtest.WaitFor(t, "the retry to wait", func() (bool, string) {
		out := stderr.String()
		return strings.Contains(out, "again in 1h0m0s"), fmt.Sprintf("stderr %q", out)
	})
	st, err := stop()
	if err != nil {
		t.Fatal(err)
	}
	src.check(t)
	if src.released != 1 || len(src.accepted) != 0 || len(src.failed) != 0 {
		t.Fatalf("released %d, accepted %d, failed %d; want the message released once", src.released, len(src.accepted), len(src.failed))
	}
	if st.Released != 1 {
		t.Errorf("stats %+v", st)
	}
}

// syncBuffer is a bytes.Buffer safe for a writer and a reader at once.
type syncBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (b *syncBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

func (b *syncBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}
