// Package e2e runs real mqd processes on temporary directories and free
// ports and drives them with real Kafka clients (kgo, kadm, kcat).
package e2e

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/mqproject/mq/lib/loopback"
	"github.com/mqproject/mq/lib/mqtest"
)

// binDir holds every program of cmd/, built once for the whole package;
// mqdPath is the daemon among them.
var binDir, mqdPath string

// keepLogs, when set, is a directory that gets the whole log of every mqd
// start, one file per data directory, appended across restarts: a failed
// run's test output only shows the end of each node's last start.
var keepLogs = flag.String("e2e.logs", "", "a directory to append every mqd's whole log to, one file per data directory")

// The tests keep every process under 3 GB of resident memory, what a CI
// runner or a laptop with 8 GB can spare; the peaks (VmHWM) are checked
// against these bounds, and `make test-mem` prints each package's.
const (
	// testMaxRSS bounds this test process, which runs under -race in
	// `make test`: the race runtime keeps memory for every goroutine
	// ever started, so a leaked loop shows here first. It peaks near
	// 0.8-0.9 GB, in the million-message tests (kgo's fetch buffers).
	testMaxRSS = 2 << 30
	// mqdMaxRSS bounds each mqd the tests start, checked when it is
	// stopped or killed; the largest peaks near 35 MB (mqpipe_large's
	// 5-7 MB messages). mqd built with -race (MQ_E2E_RACE) peaks near
	// 110 MB and is allowed raceRSSFactor times as much.
	mqdMaxRSS     = 256 << 20
	raceRSSFactor = 4
)

// mqdBound is mqdMaxRSS for the mqd this package built.
func mqdBound() int64 {
	if os.Getenv("MQ_E2E_RACE") != "" {
		return mqdMaxRSS * raceRSSFactor
	}
	return mqdMaxRSS
}

// largestMQD is the highest peak RSS of any mqd of this run, for the
// summary TestMain prints.
var largestMQD struct {
	sync.Mutex
	bytes int64
}

func TestMain(m *testing.M) {
	// Every test here starts real processes (and the programs are built
	// first): -short, the edit-compile loop of make test-short, skips
	// the package; make test runs it whole.
	if spec := os.Getenv(shareHolderEnv); spec != "" {
		os.Exit(shareHolderMain(spec))
	}
	flag.Parse()
	if testing.Short() {
		fmt.Println("e2e: skipped under -short (make test runs it)")
		os.Exit(0)
	}
	// The keys of the tiered tests' SeaweedFS servers, for the tests'
	// own clients and every mqd: set once, as parallel tests cannot.
	if err := mqtest.SetSeaweedEnv(); err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	dir, err := os.MkdirTemp("", "mq-e2e-bin-")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	binDir = dir
	mqdPath = filepath.Join(dir, "mqd")
	args := []string{"build", "-o", dir + string(filepath.Separator)}
	if os.Getenv("MQ_E2E_RACE") != "" {
		args = append(args, "-race")
	}
	build := exec.Command("go", append(args, "../cmd/...")...)
	build.Stdout, build.Stderr = os.Stderr, os.Stderr
	if err := build.Run(); err != nil {
		fmt.Fprintln(os.Stderr, "building the programs:", err)
		os.Exit(1)
	}
	runtime.MemProfileRate = 512 << 10 // coarse: watchMemory names only the large sites
	go watchMemory(os.Stderr, 500*time.Millisecond)
	code := m.Run()
	printChaosSummary()
	os.RemoveAll(dir)
	if peak, ok := vmHWM(os.Getpid()); ok {
		largestMQD.Lock()
		mqd := largestMQD.bytes
		largestMQD.Unlock()
		fmt.Fprintf(os.Stderr, "e2e: peak RSS %d MB for this test process (bound %d MB), %d MB for the largest mqd (bound %d MB)\n",
			peak>>20, testMaxRSS>>20, mqd>>20, mqdBound()>>20)
		if peak > testMaxRSS {
			fmt.Fprintf(os.Stderr, "FAIL: this test process peaked at %d MB of RSS, over the %d MB bound (testMaxRSS)\n", peak>>20, testMaxRSS>>20)
			code = 1
		}
	}
	os.Exit(code)
}

// mqdProc is one running mqd process.
type mqdProc struct {
	dataDir string
	addr    string // host:port of the TCP listener
	socket  string // path of the Unix socket
	sockDir string
	props   []string
	args    []string // more flags (a cluster node's --node-id, --voters…)
	// keepAddr keeps the TCP address across restarts (a cluster node's
	// registration and its peers' view of it); otherwise every start
	// takes a free port anew.
	keepAddr bool
	paused   bool // SIGSTOPped, not continued yet
	cmd      *exec.Cmd
	stderr   *lockedBuffer
	exited   chan struct{}
	waitErr  error
	peakRSS  int64 // highest VmHWM of its starts so far, in bytes
	// logOverflow: an earlier start's log went over captureLimit.
	logOverflow error
	// netns is the network namespace mqd runs in (ip netns exec, which
	// execs mqd in place: the pid is mqd's); empty: the test's own.
	netns string
	// livePid is the running process's pid, 0 once it has exited (pid).
	livePid atomic.Int32
	// nofile, when set, is the open-files limit (soft and hard) mqd runs
	// under: prlimit execs it in place, so the pid is mqd's.
	nofile int
}

// launchMQD starts mqd on dataDir with the given key=value properties and
// waits until it reports READY=1 on its NOTIFY_SOCKET.
func launchMQD(dataDir string, props []string) (*mqdProc, error) {
	p := &mqdProc{dataDir: dataDir, props: props}
	return p, p.start()
}

func (p *mqdProc) start() error {
	if p.sockDir == "" {
		dir, err := os.MkdirTemp("", "mq-e2e-sock-")
		if err != nil {
			return err
		}
		p.sockDir = dir
	}
	p.socket = filepath.Join(p.sockDir, "mqd.sock")
	if p.addr == "" || !p.keepAddr {
		addr, err := freeAddr()
		if err != nil {
			return err
		}
		p.addr = addr
	}

	notifyPath := filepath.Join(p.sockDir, "notify")
	os.Remove(notifyPath)
	notify, err := net.ListenUnixgram("unixgram", &net.UnixAddr{Name: notifyPath, Net: "unixgram"})
	if err != nil {
		return err
	}
	defer notify.Close()

	args := []string{"--data-dir", p.dataDir, "--listen", "tcp://" + p.addr, "--listen", "unix://" + p.socket}
	args = append(args, p.args...)
	for _, prop := range p.props {
		args = append(args, "--set", prop)
	}
	switch {
	case p.netns != "":
		p.cmd = exec.Command("ip", append([]string{"netns", "exec", p.netns, mqdPath}, args...)...)
	case p.nofile > 0:
		lim := fmt.Sprintf("--nofile=%d:%d", p.nofile, p.nofile)
		p.cmd = exec.Command("prlimit", append([]string{lim, mqdPath}, args...)...)
	default:
		p.cmd = exec.Command(mqdPath, args...)
	}
	if p.stderr != nil {
		p.logOverflow = errors.Join(p.logOverflow, p.stderr.overflow("mqd on "+p.dataDir+" (its log)"))
	}
	p.stderr = &lockedBuffer{}
	p.cmd.Stderr = p.stderr
	var logFile *os.File
	if *keepLogs != "" {
		name := strings.ReplaceAll(strings.Trim(p.dataDir, string(filepath.Separator)), string(filepath.Separator), "_") + ".log"
		if logFile, err = os.OpenFile(filepath.Join(*keepLogs, name), os.O_WRONLY|os.O_CREATE|os.O_APPEND, 0o644); err != nil {
			return err
		}
		fmt.Fprintf(logFile, "=== mqd %s, started %s\n", strings.Join(args, " "), time.Now().Format(time.RFC3339Nano))
		p.cmd.Stderr = io.MultiWriter(p.stderr, logFile)
	}
	p.cmd.Env = append(os.Environ(), "NOTIFY_SOCKET="+notifyPath)
	if err := p.cmd.Start(); err != nil {
		return err
	}
	p.livePid.Store(int32(p.cmd.Process.Pid))
	p.exited = make(chan struct{})
	go func() {
		p.waitErr = p.cmd.Wait()
		if logFile != nil {
			logFile.Close()
		}
		p.livePid.Store(0)
		close(p.exited)
	}()

	ready := make(chan error, 1)
	go func() {
		buf := make([]byte, 256)
		for {
			n, err := notify.Read(buf)
			if err != nil {
				ready <- err
				return
			}
			if bytes.Contains(buf[:n], []byte("READY=1")) {
				ready <- nil
				return
			}
		}
	}()
	select {
	case err := <-ready:
		if err != nil {
			p.kill()
			return fmt.Errorf("mqd notify socket: %v", err)
		}
		return nil
	case <-p.exited:
		return fmt.Errorf("mqd exited before it was ready: %v\n%s", p.waitErr, p.stderr.String())
	case <-time.After(30 * time.Second):
		p.kill()
		return fmt.Errorf("mqd not ready after 30s:\n%s", p.stderr.String())
	}
}

// running reports whether the process has not exited.
func (p *mqdProc) running() bool {
	if p.cmd == nil || p.exited == nil {
		return false
	}
	select {
	case <-p.exited:
		return false
	default:
		return true
	}
}

// stop sends SIGTERM and waits for a clean exit.
func (p *mqdProc) stop() error {
	if !p.running() {
		return nil
	}
	p.notePeak()
	p.cont() // a stopped process would not see SIGTERM
	p.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-p.exited:
		if p.waitErr != nil {
			return fmt.Errorf("mqd did not exit cleanly: %v\n%s", p.waitErr, p.stderr.String())
		}
		return nil
	case <-time.After(30 * time.Second):
		// SIGQUIT makes the Go runtime print every goroutine's stack: what
		// the shutdown waits for.
		p.cmd.Process.Signal(syscall.SIGQUIT)
		select {
		case <-p.exited:
		case <-time.After(5 * time.Second):
			p.kill()
		}
		return fmt.Errorf("mqd did not stop within 30s of SIGTERM:\n%s", p.stderr.String())
	}
}

// kill sends SIGKILL and waits for the process to be gone.
func (p *mqdProc) kill() {
	if p.running() {
		p.notePeak()
		p.cmd.Process.Kill()
		<-p.exited
		p.paused = false
	}
}

// pause sends SIGSTOP: the process keeps its sockets and answers nothing
// (a hung node, or one the network cut off) until cont. It returns once
// the kernel shows the process stopped: the signal is delivered
// asynchronously, and a process still running for a moment after kill(2)
// returned can act once more (CI saw a paused follower fetch a record the
// test wrote after pausing it, and the leader acknowledge it).
func (p *mqdProc) pause() error {
	if !p.running() || p.paused {
		return nil
	}
	p.notePeak()
	pid := p.cmd.Process.Pid
	if err := p.cmd.Process.Signal(syscall.SIGSTOP); err != nil {
		return err
	}
	p.paused = true
	for deadline := time.Now().Add(10 * time.Second); !processStopped(pid); <-time.After(time.Millisecond) {
		if time.Now().After(deadline) {
			return fmt.Errorf("mqd pid %d not stopped 10 s after SIGSTOP", pid)
		}
	}
	return nil
}

// processStopped reports whether /proc shows pid stopped by a signal
// (state T), or gone.
func processStopped(pid int) bool {
	data, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return true
	}
	// "pid (comm) S …": the state follows the last ')'.
	i := bytes.LastIndexByte(data, ')')
	return i < 0 || i+2 >= len(data) || data[i+2] == 'T' || data[i+2] == 't'
}

// cont sends SIGCONT to a paused process.
func (p *mqdProc) cont() error {
	if !p.paused {
		return nil
	}
	p.paused = false
	return p.cmd.Process.Signal(syscall.SIGCONT)
}

// notePeak records the running process's peak RSS so far. It is called
// just before the process is signalled: /proc forgets a process's memory
// once it has exited.
func (p *mqdProc) notePeak() {
	hwm, ok := vmHWM(p.cmd.Process.Pid)
	if !ok {
		return
	}
	p.peakRSS = max(p.peakRSS, hwm)
	largestMQD.Lock()
	largestMQD.bytes = max(largestMQD.bytes, hwm)
	largestMQD.Unlock()
}

// checkPeak fails when the process's peak RSS went over mqdBound, or
// when one of its starts logged more than captureLimit.
func (p *mqdProc) checkPeak() error {
	err := p.logOverflow
	if p.stderr != nil {
		err = p.stderr.overflow("mqd on " + p.dataDir + " (its log)")
	}
	if bound := mqdBound(); p.peakRSS > bound {
		err = errors.Join(err, fmt.Errorf("mqd on %s peaked at %d MB of RSS, over the %d MB bound (mqdMaxRSS)", p.dataDir, p.peakRSS>>20, bound>>20))
	}
	return err
}

// vmHWM returns the peak resident set size of process pid from
// /proc/PID/status, or false where that cannot be read (no /proc, or the
// process is gone). Only /proc tells one process's own peak: a child's
// rusage (ProcessState.SysUsage, /usr/bin/time) also counts the memory
// its parent had when it forked, here the whole test process.
func vmHWM(pid int) (int64, bool) { return procStatusBytes(pid, "VmHWM") }

// procStatusBytes reads one "Field: N kB" line of /proc/PID/status.
func procStatusBytes(pid int, field string) (int64, bool) {
	data, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/status")
	if err != nil {
		return 0, false
	}
	for _, l := range strings.Split(string(data), "\n") {
		if v, ok := strings.CutPrefix(l, field+":"); ok {
			kb, err := strconv.ParseInt(strings.TrimSpace(strings.TrimSuffix(v, "kB")), 10, 64)
			return kb << 10, err == nil
		}
	}
	return 0, false
}

// pid is the running process's id, 0 when it is not running. Unlike the
// other methods it may be called from any goroutine (the chaos rows'
// growth watch samples the nodes while the nemesis restarts them).
func (p *mqdProc) pid() int { return int(p.livePid.Load()) }

// cleanup stops the process and removes its socket directory.
func (p *mqdProc) cleanup() error {
	err := p.stop()
	os.RemoveAll(p.sockDir)
	return err
}

// broker is an mqd process owned by one test.
type broker struct {
	*mqdProc
	t testing.TB
}

// brokerOpts configures startBroker.
type brokerOpts struct {
	dataDir string   // reuse a data directory (restart); empty = fresh temp dir
	props   []string // key=value properties passed with --set
	args    []string // more flags (another --listen)
	nofile  int      // open-files limit for mqd (prlimit), 0: the test's
}

// startBroker starts mqd for t; it is stopped when the test ends.
func startBroker(t testing.TB, o brokerOpts) *broker {
	t.Helper()
	if o.dataDir == "" {
		o.dataDir = t.TempDir()
	}
	p := &mqdProc{dataDir: o.dataDir, props: o.props, args: o.args, nofile: o.nofile}
	if err := p.start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := p.cleanup(); err != nil {
			t.Error(err)
		}
		if err := p.checkPeak(); err != nil {
			t.Error(err)
		}
	})
	return &broker{mqdProc: p, t: t}
}

// start starts the stopped or killed process again on the same data directory.
func (b *broker) start() {
	b.t.Helper()
	if err := b.mqdProc.start(); err != nil {
		b.t.Fatal(err)
	}
}

// restart stops (or, with crash, kills) mqd and starts it again on the same
// data directory.
func (b *broker) restart(crash bool) {
	b.t.Helper()
	if crash {
		b.kill()
	} else if err := b.stop(); err != nil {
		b.t.Fatal(err)
	}
	b.start()
}

// client returns a kgo client connected over TCP, closed at test end.
func (b *broker) client(opts ...kgo.Opt) *kgo.Client {
	b.t.Helper()
	cl, err := kgo.NewClient(append([]kgo.Opt{kgo.SeedBrokers(b.addr)}, opts...)...)
	if err != nil {
		b.t.Fatal(err)
	}
	b.t.Cleanup(cl.Close)
	return cl
}

// unixClient returns a kgo client that reaches the broker only through its
// Unix socket, whatever address the metadata advertises.
func (b *broker) unixClient(opts ...kgo.Opt) *kgo.Client {
	b.t.Helper()
	var d net.Dialer
	dial := func(ctx context.Context, _, _ string) (net.Conn, error) {
		return d.DialContext(ctx, "unix", b.socket)
	}
	cl, err := kgo.NewClient(append([]kgo.Opt{kgo.SeedBrokers("mqd.sock:9092"), kgo.Dialer(dial)}, opts...)...)
	if err != nil {
		b.t.Fatal(err)
	}
	b.t.Cleanup(cl.Close)
	return cl
}

func (b *broker) admin() *kadm.Client { return kadm.NewClient(b.client()) }

// freeAddr returns a loopback address with a port nobody listens on, below
// the ephemeral range (lib/loopback): while a node is stopped no outgoing
// connection takes its port, and its restart on the same address works.
func freeAddr() (string, error) { return loopback.FreeAddr() }

// freeAddrs returns n free loopback addresses (freeAddr), for the
// listeners of n nodes (metrics, say).
func freeAddrs(t testing.TB, n int) []string {
	t.Helper()
	out := make([]string, n)
	for i := range out {
		addr, err := freeAddr()
		if err != nil {
			t.Fatal(err)
		}
		out[i] = addr
	}
	return out
}

// captureLimit bounds what a lockedBuffer keeps of a process's output:
// a tool or an mqd writing more than this is in a loop, and the test
// process, which holds every buffer, must not grow with it (a runaway
// once took a CI run's test process to 8 GB before the RSS check said so).
const captureLimit = 64 << 20

// lockedBuffer collects a process's stderr (or stdout) for the test and
// its failure messages, up to captureLimit bytes; it drops the rest,
// counts it, and calls full once, when it first drops.
type lockedBuffer struct {
	mu      sync.Mutex
	buf     bytes.Buffer
	dropped int64
	full    func()
}

func (l *lockedBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	keep := min(len(p), max(captureLimit-l.buf.Len(), 0))
	l.buf.Write(p[:keep])
	if keep < len(p) {
		if l.dropped == 0 && l.full != nil {
			l.full()
		}
		l.dropped += int64(len(p) - keep)
	}
	return len(p), nil
}

func (l *lockedBuffer) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.dropped > 0 {
		return l.buf.String() + fmt.Sprintf("\n[%d more bytes not kept]", l.dropped)
	}
	return l.buf.String()
}

// overflow is an error when the process wrote more than captureLimit.
func (l *lockedBuffer) overflow(what string) error {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.dropped == 0 {
		return nil
	}
	return fmt.Errorf("%s wrote %d MB, over the %d MB a test keeps (captureLimit): a loop?", what, (int64(l.buf.Len())+l.dropped)>>20, captureLimit>>20)
}

// lines splits text into non-empty lines.
func lines(r io.Reader) []string {
	var out []string
	sc := bufio.NewScanner(r)
	for sc.Scan() {
		if s := strings.TrimRight(sc.Text(), "\r"); s != "" {
			out = append(out, s)
		}
	}
	return out
}

// ctxFor returns a context that ends with the test or after d.
func ctxFor(t testing.TB, d time.Duration) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), d)
	t.Cleanup(cancel)
	return ctx
}

// parallel lets t run beside the package's other parallel tests once the
// serial ones are done (go test's -parallel: two at a time on two cores).
// Most of a test here waits on processes, so the package's time falls by
// what runs beside. A test may do so when its checks hold whatever else
// runs: it asserts no duration, rate or latency, sets no variable of the
// process's environment (t.Setenv), uses no network namespace, loop
// device or terminal, holds little memory in this process (the
// million-message tests run alone: testMaxRSS), and needs no side
// workload to make progress within a short window (the chaos rows with
// one run alone: their short form gives it seconds).
func parallel(t *testing.T) { t.Parallel() }

// toolResult is what a run of one of our programs (or kcat) did.
type toolResult struct {
	stdout, stderr string
	code           int
}

// runTool runs program name (one of ours, or an absolute path) with args
// and stdin, and fails the test when it does not exit within timeout.
func runTool(t *testing.T, timeout time.Duration, stdin, name string, args ...string) toolResult {
	t.Helper()
	path := name
	if !filepath.IsAbs(name) {
		path = filepath.Join(binDir, name)
	}
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	cmd := exec.CommandContext(ctx, path, args...)
	cmd.Stdin = strings.NewReader(stdin)
	out, errOut := &lockedBuffer{full: cancel}, &lockedBuffer{full: cancel}
	cmd.Stdout, cmd.Stderr = out, errOut
	err := cmd.Run()
	if err := errors.Join(out.overflow(name+"'s stdout"), errOut.overflow(name+"'s stderr")); err != nil {
		t.Fatalf("%s %s: %v\nstdout: %.2000s\nstderr: %.2000s", name, strings.Join(args, " "), err, out.String(), errOut.String())
	}
	if ctx.Err() != nil {
		t.Fatalf("%s %s did not finish within %v (a hang)\nstdout: %.2000s\nstderr: %.20000s", name, strings.Join(args, " "), timeout, out.String(), errOut.String())
	}
	res := toolResult{stdout: out.String(), stderr: errOut.String()}
	var exit *exec.ExitError
	switch {
	case errors.As(err, &exit):
		res.code = exit.ExitCode()
	case err != nil:
		t.Fatalf("%s: %v", name, err)
	}
	return res
}
