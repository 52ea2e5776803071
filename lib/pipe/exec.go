package pipe

import (
	"bytes"
	"context"
	"encoding/base64"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"
)

// Defaults of mqpipe exec.
const (
	DefaultAttempts     = 5                // --attempts: deliveries before a message is dead-lettered
	DefaultRetryBackoff = time.Second      // --retry-backoff: the wait before the first redelivery
	DefaultGrace        = 30 * time.Second // --grace: how long SIGTERM lets running commands finish
	// DefaultKillDelay is how long a command killed with SIGTERM (past
	// --timeout or --grace) has before its process group gets SIGKILL.
	DefaultKillDelay = 5 * time.Second
	// maxBackoffFactor caps the doubling backoff at this many times
	// --retry-backoff.
	maxBackoffFactor = 32
	// stderrTailBytes is how much of a command's stderr end its error
	// text keeps.
	stderrTailBytes = 1024
	// idlePoll is how often an --exit-when-idle worker whose idle time
	// has passed looks again while commands still run.
	idlePoll = 50 * time.Millisecond
)

// Message is one delivery of a record to an exec worker.
type Message struct {
	Topic         string
	Partition     int32
	Offset        int64
	Key           []byte // nil: no key
	Value         []byte
	Headers       []Header
	Timestamp     time.Time
	DeliveryCount int32 // 1 on the first delivery

	ref any // the source's own handle
}

// Header is a record header.
type Header struct {
	Key   string
	Value []byte
}

// Source is where an exec worker takes its messages from and reports what
// became of them. Next is called from one goroutine; Accept, Release and
// Fail from any, concurrently, once per delivered message, each exactly
// one of them; Close after all of them returned.
type Source interface {
	// Next blocks until a message is delivered or ctx is done (then it
	// returns ctx's error and delivers nothing). Called with a done ctx
	// it still delivers a message it has at hand.
	Next(ctx context.Context) (*Message, error)
	// Accept: the command succeeded; the message is done.
	Accept(m *Message) error
	// Release: the command failed (or was stopped) and the message
	// should be delivered again, its DeliveryCount one higher.
	Release(m *Message) error
	// Fail: the command failed on the last allowed attempt; reason is
	// why. The source dead-letters the message or reports an error.
	Fail(m *Message, reason string) error
	// Close ends the source after the last report.
	Close(ctx context.Context) error
}

// ExecConfig is one run of the exec runner.
type ExecConfig struct {
	Command      []string      // the program and its arguments
	Jobs         int           // -j: commands at once; 0: 1
	Timeout      time.Duration // --timeout: kill a command running longer; 0: no limit
	Attempts     int           // --attempts: deliveries before Fail; 0: DefaultAttempts
	RetryBackoff time.Duration // --retry-backoff: first redelivery wait, doubling; 0: none
	ExitWhenIdle time.Duration // --exit-when-idle: end after this long without a message; 0: never
	Grace        time.Duration // --grace: on ctx done, how long running commands may finish
	KillDelay    time.Duration // SIGTERM to SIGKILL of a killed command; 0: DefaultKillDelay
	Group        string        // for MQ_GROUP

	Stdout, Stderr io.Writer // the commands' stdout and stderr, and mqpipe's diagnostics (Stderr)
}

// ExecStats counts what a run did.
type ExecStats struct {
	Accepted, Released, Failed, Stopped int64
}

// RunExec runs cfg.Command once per message of src until ctx is done or,
// with ExitWhenIdle, until no message came for that long and every
// command finished. When ctx is done it takes no more messages, lets the
// running commands finish for up to Grace, reports those that finished
// as usual, kills the rest and releases them; messages waiting for a
// retry are released at once. Every delivered message is reported to src
// exactly once before src is closed. It returns nil after a stop by ctx
// or by idleness, and the first error of src otherwise.
func RunExec(ctx context.Context, cfg ExecConfig, src Source) (ExecStats, error) {
	r := newRunner(cfg, src)
	ctx, r.stop = context.WithCancel(ctx)
	defer r.stop()
	err := r.loop(ctx)
	r.drain()
	cctx, cancel := context.WithTimeout(context.Background(), commitTimeout)
	defer cancel()
	if cerr := src.Close(cctx); err == nil {
		err = cerr
	}
	if err == nil {
		err = r.firstErr()
	}
	return r.stats(), err
}

// runner is one RunExec. The loop goroutine owns slots; the fields under
// mu are shared with the command goroutines.
type runner struct {
	cfg   ExecConfig
	src   Source
	env   []string // the inherited environment, without the MQ_ names we set
	slots chan struct{}
	out   *lockedWriter
	errw  *lockedWriter

	stop     context.CancelFunc // ends loop: the first error of src stops the run
	stopping chan struct{}      // closed when the grace period begins
	killAll  chan struct{}      // closed when the grace period ends
	wg       sync.WaitGroup

	mu           sync.Mutex
	inflight     int       // delivered and not yet reported
	lastArrival  time.Time // when the last message came
	err          error     // the first error of src
	st           ExecStats
	waitingRetry map[*Message]*time.Timer
	changed      chan struct{} // closed and replaced when inflight drops
}

func newRunner(cfg ExecConfig, src Source) *runner {
	if cfg.Jobs <= 0 {
		cfg.Jobs = 1
	}
	if cfg.Attempts <= 0 {
		cfg.Attempts = DefaultAttempts
	}
	if cfg.KillDelay <= 0 {
		cfg.KillDelay = DefaultKillDelay
	}
	if cfg.Stdout == nil {
		cfg.Stdout = io.Discard
	}
	if cfg.Stderr == nil {
		cfg.Stderr = io.Discard
	}
	r := &runner{
		cfg:          cfg,
		src:          src,
		env:          inheritedEnv(os.Environ()),
		slots:        make(chan struct{}, cfg.Jobs),
		out:          &lockedWriter{w: cfg.Stdout},
		errw:         &lockedWriter{w: cfg.Stderr},
		stopping:     make(chan struct{}),
		killAll:      make(chan struct{}),
		lastArrival:  time.Now(),
		waitingRetry: map[*Message]*time.Timer{},
		changed:      make(chan struct{}),
	}
	return r
}

// loop takes messages and starts their commands until ctx is done, src
// fails or the worker has been idle for ExitWhenIdle.
func (r *runner) loop(ctx context.Context) error {
	for {
		select {
		case r.slots <- struct{}{}:
		case <-ctx.Done():
			return nil
		}
		m, err := r.next(ctx)
		if err != nil || m == nil {
			<-r.slots
			if ctx.Err() != nil {
				return nil
			}
			return err // nil: idle
		}
		r.mu.Lock()
		r.inflight++
		r.lastArrival = time.Now()
		r.mu.Unlock()
		r.wg.Add(1)
		go func() {
			defer r.wg.Done()
			r.handle(m)
		}()
	}
}

// next is src.Next, bounded with ExitWhenIdle by the idle deadline; it
// returns nil, nil when the worker has been idle long enough.
func (r *runner) next(ctx context.Context) (*Message, error) {
	if r.cfg.ExitWhenIdle <= 0 {
		return r.src.Next(ctx)
	}
	for {
		if err := r.firstErr(); err != nil {
			return nil, err
		}
		r.mu.Lock()
		deadline := r.lastArrival.Add(r.cfg.ExitWhenIdle)
		busy := r.inflight > 0
		changed := r.changed
		r.mu.Unlock()
		if !deadline.After(time.Now()) {
			if !busy {
				// Idle, unless a message is at hand already.
				done, cancel := context.WithCancel(ctx)
				cancel()
				if m, err := r.src.Next(done); err == nil {
					return m, nil
				}
				return nil, nil
			}
			deadline = time.Now().Add(idlePoll)
		}
		nctx, cancel := context.WithDeadline(ctx, deadline)
		go func() {
			select {
			case <-changed:
				cancel()
			case <-nctx.Done():
			}
		}()
		m, err := r.src.Next(nctx)
		cancel()
		if err == nil {
			return m, nil
		}
		if ctx.Err() != nil || nctx.Err() == nil {
			return nil, err
		}
	}
}

// handle runs m's command and reports the outcome to src.
func (r *runner) handle(m *Message) {
	res := r.run(m)
	<-r.slots
	switch {
	case res.stopped:
		r.count(func(st *ExecStats) { st.Stopped++ })
		r.report(m, r.src.Release(m))
	case res.err == nil:
		r.count(func(st *ExecStats) { st.Accepted++ })
		r.report(m, r.src.Accept(m))
	case int(m.DeliveryCount) >= r.cfg.Attempts:
		r.count(func(st *ExecStats) { st.Failed++ })
		reason := res.reason()
		r.errw.printf("mqpipe: %s: %s (attempt %d of %d, giving up)\n", m.position(), oneLine(reason), m.DeliveryCount, r.cfg.Attempts)
		r.report(m, r.src.Fail(m, reason))
	default:
		r.count(func(st *ExecStats) { st.Released++ })
		wait := r.backoff(m.DeliveryCount)
		r.errw.printf("mqpipe: %s: %s (attempt %d of %d, again in %v)\n", m.position(), oneLine(res.reason()), m.DeliveryCount, r.cfg.Attempts, wait)
		r.releaseAfter(m, wait)
	}
}

// releaseAfter releases m after wait, or at once when the worker stops.
func (r *runner) releaseAfter(m *Message, wait time.Duration) {
	r.mu.Lock()
	select {
	case <-r.stopping:
		wait = 0
	default:
	}
	if wait <= 0 {
		r.mu.Unlock()
		r.report(m, r.src.Release(m))
		return
	}
	r.waitingRetry[m] = time.AfterFunc(wait, func() {
		r.mu.Lock()
		_, mine := r.waitingRetry[m]
		delete(r.waitingRetry, m)
		r.mu.Unlock()
		if mine {
			r.report(m, r.src.Release(m))
		}
	})
	r.mu.Unlock()
}

// backoff is the wait before the redelivery that follows attempt n:
// RetryBackoff doubled for each attempt after the first, capped.
func (r *runner) backoff(n int32) time.Duration {
	d := r.cfg.RetryBackoff
	for i := int32(1); i < n && d < r.cfg.RetryBackoff*maxBackoffFactor; i++ {
		d *= 2
	}
	return min(d, r.cfg.RetryBackoff*maxBackoffFactor)
}

func (r *runner) count(f func(*ExecStats)) {
	r.mu.Lock()
	f(&r.st)
	r.mu.Unlock()
}

// report ends m's time in flight, keeping err if it is the first.
func (r *runner) report(m *Message, err error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if err != nil && r.err == nil {
		r.err = fmt.Errorf("%s: %w", m.position(), err)
		r.stop()
	}
	r.inflight--
	close(r.changed)
	r.changed = make(chan struct{})
}

func (r *runner) firstErr() error {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.err
}

func (r *runner) stats() ExecStats {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.st
}

// drain ends the run: retries waiting are released now, running commands
// get Grace to finish and are then killed.
func (r *runner) drain() {
	r.mu.Lock()
	close(r.stopping)
	var waiting []*Message
	for m, t := range r.waitingRetry {
		if t.Stop() { // else its func is about to release it
			waiting = append(waiting, m)
			delete(r.waitingRetry, m)
		}
	}
	r.mu.Unlock()
	for _, m := range waiting {
		r.report(m, r.src.Release(m))
	}
	done := make(chan struct{})
	go func() {
		r.wg.Wait()
		close(done)
	}()
	timer := time.NewTimer(r.cfg.Grace)
	defer timer.Stop()
	select {
	case <-done:
	case <-timer.C:
		close(r.killAll)
		<-done
	}
	// A retry timer that fired just before drain began may still be
	// releasing; wait until every message was reported.
	for {
		r.mu.Lock()
		n, changed := r.inflight, r.changed
		r.mu.Unlock()
		if n == 0 {
			return
		}
		<-changed
	}
}

// result is how one command ended.
type result struct {
	err     error  // nil: exit status 0
	timeout bool   // killed past --timeout
	stopped bool   // killed past --grace: not the command's failure
	stderr  []byte // the tail of its stderr
	timeLim time.Duration
}

// reason is a failed result's error text: how the command ended, then
// the tail of its stderr.
func (res result) reason() string {
	var how string
	switch {
	case res.timeout:
		how = fmt.Sprintf("timed out after %v", res.timeLim)
	default:
		how = res.err.Error()
		var ee *exec.ExitError
		if errors.As(res.err, &ee) {
			how = ee.ProcessState.String() // "exit status 3", "signal: killed"
		}
	}
	tail := strings.TrimSpace(string(res.stderr))
	if tail == "" {
		return how
	}
	return how + ": " + tail
}

// run runs m's command: the value on stdin, the record in MQ_ variables,
// in a process group of its own, which is killed (SIGTERM, then SIGKILL
// after KillDelay) past Timeout or past the grace period.
func (r *runner) run(m *Message) result {
	cmd := exec.Command(r.cfg.Command[0], r.cfg.Command[1:]...)
	cmd.Stdin = bytes.NewReader(m.Value)
	cmd.Stdout = r.out
	if f, ok := r.cfg.Stdout.(*os.File); ok {
		cmd.Stdout = f // the command writes it directly, no copying
	}
	tail := &tailBuffer{max: stderrTailBytes}
	cmd.Stderr = io.MultiWriter(r.errw, tail)
	cmd.Env = append(append([]string(nil), r.env...), messageEnv(m, r.cfg.Group)...)
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	// A background process left holding stderr does not keep the
	// message waiting.
	cmd.WaitDelay = time.Second
	if err := cmd.Start(); err != nil {
		return result{err: err}
	}
	waited := make(chan error, 1)
	go func() { waited <- cmd.Wait() }()
	var timeout <-chan time.Time
	if r.cfg.Timeout > 0 {
		t := time.NewTimer(r.cfg.Timeout)
		defer t.Stop()
		timeout = t.C
	}
	res := result{timeLim: r.cfg.Timeout}
	var err error
	select {
	case err = <-waited:
	case <-timeout:
		res.timeout = true
		err = r.kill(cmd, waited)
	case <-r.killAll:
		res.stopped = true
		err = r.kill(cmd, waited)
	}
	if errors.Is(err, exec.ErrWaitDelay) && cmd.ProcessState != nil {
		// Only its output outlived it: the exit status counts.
		err = nil
		if !cmd.ProcessState.Success() {
			err = &exec.ExitError{ProcessState: cmd.ProcessState}
		}
	}
	res.err = err
	res.stderr = tail.bytes()
	return res
}

// kill ends cmd's process group: SIGTERM, and SIGKILL if it has not
// exited after KillDelay. It returns cmd's Wait error.
func (r *runner) kill(cmd *exec.Cmd, waited <-chan error) error {
	pgid := cmd.Process.Pid
	_ = syscall.Kill(-pgid, syscall.SIGTERM)
	t := time.NewTimer(r.cfg.KillDelay)
	defer t.Stop()
	select {
	case err := <-waited:
		_ = syscall.Kill(-pgid, syscall.SIGKILL) // what it left behind
		return err
	case <-t.C:
		_ = syscall.Kill(-pgid, syscall.SIGKILL)
		return <-waited
	}
}

// Names of the environment variables a command gets.
const (
	EnvTopic         = "MQ_TOPIC"          // the record's topic
	EnvPartition     = "MQ_PARTITION"      // its partition
	EnvOffset        = "MQ_OFFSET"         // its offset
	EnvKey           = "MQ_KEY"            // its key; unset for a null key
	EnvKeyBase64     = "MQ_KEY_B64"        // instead of MQ_KEY for a key holding a NUL byte: standard base64
	EnvTimestamp     = "MQ_TIMESTAMP"      // its timestamp, ms since the Unix epoch
	EnvDeliveryCount = "MQ_DELIVERY_COUNT" // 1 on the first attempt
	EnvGroup         = "MQ_GROUP"          // the group
	EnvHeaderPrefix  = "MQ_HEADER_"        // + the header's name, upper-cased, other than A-Z 0-9 as _
)

// messageEnv is the MQ_ variables of m.
func messageEnv(m *Message, group string) []string {
	env := []string{
		EnvTopic + "=" + m.Topic,
		EnvPartition + "=" + strconv.FormatInt(int64(m.Partition), 10),
		EnvOffset + "=" + strconv.FormatInt(m.Offset, 10),
		EnvTimestamp + "=" + strconv.FormatInt(m.Timestamp.UnixMilli(), 10),
		EnvDeliveryCount + "=" + strconv.FormatInt(int64(m.DeliveryCount), 10),
		EnvGroup + "=" + group,
	}
	if m.Key != nil {
		env = append(env, envValue(EnvKey, EnvKeyBase64, m.Key))
	}
	for _, h := range m.Headers {
		name := HeaderEnvName(h.Key)
		env = append(env, envValue(name, name+"_B64", h.Value))
	}
	return env
}

// envValue is NAME=VALUE, or B64NAME=base64 when the value holds a NUL
// byte, which an environment cannot carry.
func envValue(name, b64name string, v []byte) string {
	if bytes.IndexByte(v, 0) >= 0 {
		return b64name + "=" + base64.StdEncoding.EncodeToString(v)
	}
	return name + "=" + string(v)
}

// HeaderEnvName is the variable that carries header name: MQ_HEADER_ and
// the name upper-cased, every byte but A-Z and 0-9 turned into _
// (trace-id: MQ_HEADER_TRACE_ID). Headers whose names map to the same
// variable, or a repeated header, give the last one's value.
func HeaderEnvName(name string) string {
	b := []byte(EnvHeaderPrefix)
	for i := 0; i < len(name); i++ {
		c := name[i]
		switch {
		case c >= 'a' && c <= 'z':
			c -= 'a' - 'A'
		case c >= 'A' && c <= 'Z', c >= '0' && c <= '9':
		default:
			c = '_'
		}
		b = append(b, c)
	}
	return string(b)
}

// inheritedEnv is env without the variables that describe a message, so
// a header of the worker's own environment never looks like the record's.
func inheritedEnv(env []string) []string {
	own := map[string]bool{EnvTopic: true, EnvPartition: true, EnvOffset: true, EnvKey: true, EnvKeyBase64: true,
		EnvTimestamp: true, EnvDeliveryCount: true, EnvGroup: true}
	var out []string
	for _, kv := range env {
		name, _, _ := strings.Cut(kv, "=")
		if own[name] || strings.HasPrefix(name, EnvHeaderPrefix) {
			continue
		}
		out = append(out, kv)
	}
	return out
}

func (m *Message) position() string {
	return fmt.Sprintf("%s/%d@%d", m.Topic, m.Partition, m.Offset)
}

func oneLine(s string) string {
	return strings.Join(strings.Fields(s), " ")
}

// tailBuffer keeps the last max bytes written to it.
type tailBuffer struct {
	mu  sync.Mutex
	max int
	buf []byte
}

func (t *tailBuffer) Write(p []byte) (int, error) {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.buf = append(t.buf, p...)
	if over := len(t.buf) - t.max; over > 0 {
		t.buf = append(t.buf[:0], t.buf[over:]...)
	}
	return len(p), nil
}

func (t *tailBuffer) bytes() []byte {
	t.mu.Lock()
	defer t.mu.Unlock()
	return append([]byte(nil), t.buf...)
}

// lockedWriter serializes the writes of concurrent commands (exec copies
// a command's output in a goroutine of its own unless it is an *os.File).
type lockedWriter struct {
	mu sync.Mutex
	w  io.Writer
}

func (l *lockedWriter) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.w.Write(p)
}

func (l *lockedWriter) printf(format string, a ...any) {
	l.mu.Lock()
	defer l.mu.Unlock()
	fmt.Fprintf(l.w, format, a...)
}
