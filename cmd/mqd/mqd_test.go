package main

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/urfave/cli/v2"
)

// mqdBinary is built once by TestMain.
var mqdBinary string

func TestMain(m *testing.M) {
	flag.Parse()
	dir, err := os.MkdirTemp("", "mqd-test")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	mqdBinary = filepath.Join(dir, "mqd")
	build := exec.Command("go", "build", "-o", mqdBinary, ".")
	build.Stdout, build.Stderr = os.Stderr, os.Stderr
	if err := build.Run(); err != nil {
		fmt.Fprintln(os.Stderr, "build mqd:", err)
		os.RemoveAll(dir)
		os.Exit(1)
	}
	code := m.Run()
	os.RemoveAll(dir)
	os.Exit(code)
}

const waitTimeout = 60 * time.Second

// testEnv is a clean environment for mqd: no MQ_* or systemd variables
// from the caller, HOME and XDG_RUNTIME_DIR inside the test's directories.
func testEnv(t *testing.T, extra ...string) []string {
	var env []string
	for _, kv := range os.Environ() {
		if strings.HasPrefix(kv, "MQ_") || strings.HasPrefix(kv, "XDG_") || strings.HasPrefix(kv, "NOTIFY_SOCKET=") || strings.HasPrefix(kv, "HOME=") {
			continue
		}
		env = append(env, kv)
	}
	return append(env, append([]string{"HOME=" + t.TempDir(), "XDG_RUNTIME_DIR=" + shortTempDir(t)}, extra...)...)
}

// shortTempDir is a temporary directory with a path short enough for Unix
// socket names.
func shortTempDir(t *testing.T) string {
	t.Helper()
	dir, err := os.MkdirTemp("", "mq")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	return dir
}

// mqdProc is one mqd process.
type mqdProc struct {
	cmd     *exec.Cmd
	dataDir string
	mu      sync.Mutex
	lines   []string
	newLine chan struct{} // closed and replaced when a line arrives
	exited  chan struct{}
	err     error // from Wait, once exited is closed
}

// runMQD starts mqd with args in env and collects its stderr lines.
func runMQD(t *testing.T, env []string, args ...string) *mqdProc {
	t.Helper()
	cmd := exec.Command(mqdBinary, args...)
	cmd.Env = env
	stderr, err := cmd.StderrPipe()
	if err != nil {
		t.Fatal(err)
	}
	n := &mqdProc{cmd: cmd, newLine: make(chan struct{}), exited: make(chan struct{})}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	go func() {
		sc := bufio.NewScanner(stderr)
		for sc.Scan() {
			n.mu.Lock()
			n.lines = append(n.lines, sc.Text())
			close(n.newLine)
			n.newLine = make(chan struct{})
			n.mu.Unlock()
		}
		n.err = cmd.Wait()
		close(n.exited)
	}()
	t.Cleanup(func() {
		select {
		case <-n.exited:
		default:
			cmd.Process.Kill()
			<-n.exited
		}
	})
	return n
}

// startMQD starts mqd on a fresh data directory (unless args name one), a
// Unix socket and a free TCP port, and waits until it is serving.
func startMQD(t *testing.T, env []string, args ...string) *mqdProc {
	t.Helper()
	dataDir := filepath.Join(t.TempDir(), "data")
	args = append([]string{"--data-dir", dataDir,
		"--listen", "unix://" + filepath.Join(shortTempDir(t), "mqd.sock"), "--listen", "tcp://127.0.0.1:0"}, args...)
	n := runMQD(t, env, args...)
	n.dataDir = dataDir
	n.waitLine(t, "mqd serving")
	return n
}

// waitLine waits for a stderr line containing s and returns it.
func (n *mqdProc) waitLine(t *testing.T, s string) string {
	t.Helper()
	deadline := time.After(waitTimeout)
	for seen := 0; ; {
		n.mu.Lock()
		lines, ch := n.lines, n.newLine
		n.mu.Unlock()
		for ; seen < len(lines); seen++ {
			if strings.Contains(lines[seen], s) {
				return lines[seen]
			}
		}
		select {
		case <-ch:
		case <-n.exited:
			n.mu.Lock()
			done := len(n.lines) == seen
			n.mu.Unlock()
			if done {
				t.Fatalf("mqd exited (%v) without printing %q; stderr:\n%s", n.err, s, n.stderr())
			}
		case <-deadline:
			t.Fatalf("no %q from mqd after %v; stderr:\n%s", s, waitTimeout, n.stderr())
		}
	}
}

func (n *mqdProc) stderr() string {
	n.mu.Lock()
	defer n.mu.Unlock()
	return strings.Join(n.lines, "\n")
}

// wait waits for mqd to exit and returns its exit code.
func (n *mqdProc) wait(t *testing.T) int {
	t.Helper()
	select {
	case <-n.exited:
	case <-time.After(waitTimeout):
		t.Fatalf("mqd did not exit after %v; stderr:\n%s", waitTimeout, n.stderr())
	}
	var exit *exec.ExitError
	if errors.As(n.err, &exit) {
		return exit.ExitCode()
	}
	if n.err != nil {
		t.Fatal(n.err)
	}
	return 0
}

func (n *mqdProc) signal(t *testing.T, sig os.Signal) {
	t.Helper()
	if err := n.cmd.Process.Signal(sig); err != nil {
		t.Fatal(err)
	}
}

func TestHelpListsEveryFlagWithItsDefault(t *testing.T) {
	out, err := exec.Command(mqdBinary, "--help").Output()
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range newApp().VisibleFlags() {
		name := f.Names()[0]
		line := ""
		for _, l := range strings.Split(string(out), "\n") {
			if l = strings.TrimSpace(l); strings.HasPrefix(l, "--"+name+" ") || strings.HasPrefix(l, "--"+name+",") {
				line = l
				break
			}
		}
		if line == "" {
			t.Errorf("--help does not list --%s:\n%s", name, out)
			continue
		}
		if name != "help" && !strings.Contains(line, "(default: ") {
			t.Errorf("--%s has no default in --help: %s", name, line)
		}
		if df, ok := f.(cli.DocGenerationFlag); ok && name != "set" && name != "help" && name != "help-config" {
			if env := df.GetEnvVars(); len(env) != 1 || !strings.Contains(line, "[$"+env[0]+"]") {
				t.Errorf("--%s: environment variable not shown: %s", name, line)
			}
		}
	}
}

func TestUsageErrorsExit2WithOneLine(t *testing.T) {
	badConfig := filepath.Join(t.TempDir(), "mqd.conf")
	if err := os.WriteFile(badConfig, []byte("# ok\nnum.partitions = 0\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		args []string
		env  []string
		want string
	}{
		{[]string{"--node-id", "x"}, nil, `mqd: --node-id: invalid value "x" for node.id: want an integer ≥ 0`},
		{[]string{"--log-format", "xml"}, nil, `mqd: --log-format: invalid value "xml" for log.format: want one of text, json`},
		{[]string{"--log-level", "loud"}, nil, "mqd: --log-level: invalid value"},
		{[]string{"--listen", "http://x"}, nil, "mqd: --listen: invalid value"},
		{[]string{"--advertise", "nohost"}, nil, "mqd: --advertise: invalid value"},
		{[]string{"--voters", "1@"}, nil, "mqd: --voters: invalid value"},
		{[]string{"--voters", "1@127.0.0.1:1,1@127.0.0.1:2"}, nil, "mqd: --voters: invalid value"},
		{[]string{"--node-id", "3", "--voters", "1@127.0.0.1:1,2@127.0.0.1:2"}, nil, "mqd: node 3 is not one of the voters 1@127.0.0.1:1,2@127.0.0.1:2: add it to --voters, or give it --raft-address"},
		{[]string{"--node-id", "3", "--voters", "1@127.0.0.1:1,2@127.0.0.1:2", "--raft-address", "127.0.0.1:2"}, nil, "is voter 2's address"},
		{[]string{"-c", "num.partitions"}, nil, `mqd: --set "num.partitions": want key=value`},
		{[]string{"-cnum.partitions"}, nil, `mqd: --set "num.partitions": want key=value`},
		{[]string{"--listen", "localhost"}, nil, `mqd: --listen: invalid value "localhost" for listeners`},
		{[]string{"-c", "no.such=1"}, nil, `mqd: --set no.such=1: unknown property "no.such"`},
		{[]string{"--set", "log.retention.hourz=1"}, nil, `mqd: --set log.retention.hourz=1: unknown property "log.retention.hourz" (did you mean log.retention.hours?)`},
		{[]string{"--set", "log.segment.bytes=1"}, nil, `invalid value "1" for log.segment.bytes: want an integer ≥ 14`},
		{[]string{"--no-such-flag"}, nil, "mqd: flag provided but not defined: -no-such-flag"},
		{[]string{"serve"}, nil, `mqd: unexpected argument "serve"`},
		{nil, []string{"MQ_NODE_ID=-1"}, `mqd: $MQ_NODE_ID: invalid value "-1" for node.id`},
		{nil, []string{"MQ_NUM_PARTITIONS=zero"}, `mqd: $MQ_NUM_PARTITIONS: invalid value "zero" for num.partitions`},
		{[]string{"--config", badConfig}, nil, "mqd: " + badConfig + `:2: invalid value "0" for num.partitions`},
		{nil, []string{"MQ_CONFIG=" + badConfig}, badConfig + ":2:"},
		{[]string{"--config", filepath.Join(t.TempDir(), "missing.conf")}, nil, "missing.conf: no such file"},
	} {
		t.Run(strings.Join(append(tc.args, tc.env...), " "), func(t *testing.T) {
			cmd := exec.Command(mqdBinary, tc.args...)
			cmd.Env = testEnv(t, tc.env...)
			var stderr bytes.Buffer
			cmd.Stderr = &stderr
			err := cmd.Run()
			var exit *exec.ExitError
			if !errors.As(err, &exit) || exit.ExitCode() != 2 {
				t.Fatalf("exit: %v, want status 2; stderr:\n%s", err, stderr.String())
			}
			text := stderr.String()
			if strings.Count(text, "\n") != 1 || !strings.HasPrefix(text, "mqd: ") || !strings.Contains(text, tc.want) {
				t.Errorf("stderr %q, want one line containing %q", text, tc.want)
			}
			if !strings.HasSuffix(text, " (see mqd --help)\n") {
				t.Errorf("stderr %q does not end with a pointer to --help", text)
			}
		})
	}
}

func TestStartupPrintsOneServingLine(t *testing.T) {
	n := startMQD(t, testEnv(t))
	line := n.waitLine(t, "mqd serving")
	for _, want := range []string{"level=INFO", "version=", "listen=unix://", ",tcp://127.0.0.1:", "data_dir=" + n.dataDir} {
		if !strings.Contains(line, want) {
			t.Errorf("startup line %q lacks %q", line, want)
		}
	}
	if strings.Contains(line, "tcp://127.0.0.1:0 ") || strings.HasSuffix(line, "tcp://127.0.0.1:0") {
		t.Errorf("startup line shows port 0, not the port chosen: %s", line)
	}
	n.signal(t, syscall.SIGTERM)
	if code := n.wait(t); code != 0 {
		t.Errorf("exit %d after SIGTERM; stderr:\n%s", code, n.stderr())
	}
}

func TestEnvironmentSetsFlags(t *testing.T) {
	dataDir := filepath.Join(t.TempDir(), "d")
	sock := filepath.Join(shortTempDir(t), "e.sock")
	n := runMQD(t, testEnv(t, "MQ_DATA_DIR="+dataDir, "MQ_LISTEN=unix://"+sock+",tcp://127.0.0.1:0", "MQ_LOG_FORMAT=json"))
	line := n.waitLine(t, "mqd serving")
	var rec struct {
		Level, Msg, Listen string
		DataDir            string `json:"data_dir"`
	}
	if err := json.Unmarshal([]byte(line), &rec); err != nil {
		t.Fatalf("MQ_LOG_FORMAT=json: startup line %q: %v", line, err)
	}
	if rec.DataDir != dataDir || !strings.HasPrefix(rec.Listen, "unix://"+sock+",tcp://127.0.0.1:") {
		t.Errorf("startup line %+v, want data dir %s and listeners from MQ_LISTEN", rec, dataDir)
	}
	n.signal(t, syscall.SIGINT)
	if code := n.wait(t); code != 0 {
		t.Errorf("exit %d after SIGINT", code)
	}
}

// TestShortOptionsAndBareListenersAsTheToolsTakeThem: mqd takes a value
// attached to a short option (-cKEY=VALUE) and a bare host:port listener,
// as mqpipe, mqctl and mqbench take -bHOST:PORT.
func TestShortOptionsAndBareListenersAsTheToolsTakeThem(t *testing.T) {
	dataDir := filepath.Join(t.TempDir(), "d")
	n := runMQD(t, testEnv(t), "--data-dir", dataDir, "--listen", "127.0.0.1:0", "-cnum.partitions=3")
	line := n.waitLine(t, "mqd serving")
	if !strings.Contains(line, "listen=tcp://127.0.0.1:") {
		t.Errorf("startup line %q: want the bare listener served as tcp://127.0.0.1:PORT", line)
	}
	n.signal(t, syscall.SIGTERM)
	if code := n.wait(t); code != 0 {
		t.Errorf("exit %d after SIGTERM; stderr:\n%s", code, n.stderr())
	}
}

func TestSecondMQDOnDataDirExits1(t *testing.T) {
	first := startMQD(t, testEnv(t))
	second := runMQD(t, testEnv(t), "--data-dir", first.dataDir,
		"--listen", "unix://"+filepath.Join(shortTempDir(t), "mqd.sock"), "--listen", "tcp://127.0.0.1:0")
	if code := second.wait(t); code != 1 {
		t.Fatalf("second mqd: exit %d, want 1; stderr:\n%s", code, second.stderr())
	}
	want := fmt.Sprintf("mqd: data directory %s is in use by another mqd (pid %d)", first.dataDir, first.cmd.Process.Pid)
	if got := second.stderr(); got != want {
		t.Errorf("second mqd stderr:\n%s\nwant the one line:\n%s", got, want)
	}
	// The first one is unharmed and stops cleanly.
	first.signal(t, syscall.SIGTERM)
	if code := first.wait(t); code != 0 {
		t.Errorf("first mqd: exit %d after SIGTERM", code)
	}
}

func TestSIGTERMShutsDownCleanly(t *testing.T) {
	n := startMQD(t, testEnv(t))
	n.signal(t, syscall.SIGTERM)
	if code := n.wait(t); code != 0 {
		t.Fatalf("exit %d, want 0; stderr:\n%s", code, n.stderr())
	}
	n.waitLine(t, "stopped")
	// The data directory is free again: a new mqd starts on it.
	again := startMQD(t, testEnv(t), "--data-dir", n.dataDir)
	again.signal(t, syscall.SIGTERM)
	if code := again.wait(t); code != 0 {
		t.Errorf("restart: exit %d", code)
	}
}

func TestNotifySocketGetsReadyThenStopping(t *testing.T) {
	for _, abstract := range []bool{false, true} {
		t.Run("abstract="+strconv.FormatBool(abstract), func(t *testing.T) {
			name := filepath.Join(shortTempDir(t), "notify")
			if abstract {
				name = fmt.Sprintf("@mq-test-notify-%d-%d", os.Getpid(), time.Now().UnixNano())
			}
			conn, err := net.ListenUnixgram("unixgram", &net.UnixAddr{Name: name, Net: "unixgram"})
			if err != nil {
				t.Fatal(err)
			}
			defer conn.Close()
			n := startMQD(t, testEnv(t, "NOTIFY_SOCKET="+name))
			if got := readDatagram(t, conn); got != "READY=1" {
				t.Fatalf("first notification %q, want READY=1", got)
			}
			n.signal(t, syscall.SIGTERM)
			if got := readDatagram(t, conn); got != "STOPPING=1" {
				t.Fatalf("second notification %q, want STOPPING=1", got)
			}
			if code := n.wait(t); code != 0 {
				t.Errorf("exit %d", code)
			}
		})
	}
}

func readDatagram(t *testing.T, conn *net.UnixConn) string {
	t.Helper()
	conn.SetReadDeadline(time.Now().Add(waitTimeout))
	buf := make([]byte, 512)
	n, _, err := conn.ReadFromUnix(buf)
	if err != nil && !errors.Is(err, io.EOF) {
		t.Fatal(err)
	}
	return string(buf[:n])
}

func TestPprofServesProfilesWhenAsked(t *testing.T) {
	n := startMQD(t, testEnv(t), "--pprof", "127.0.0.1:0")
	line := n.waitLine(t, "mqd serving")
	_, url, ok := strings.Cut(line, "pprof=")
	if !ok {
		t.Fatalf("startup line %q does not say where pprof is", line)
	}
	url = strings.Fields(url)[0]
	resp, err := http.Get(url + "goroutine?debug=1")
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != 200 || !strings.Contains(string(body), "goroutine profile") {
		t.Fatalf("GET %sgoroutine: %d %.200s", url, resp.StatusCode, body)
	}
	n.signal(t, syscall.SIGTERM)
	if code := n.wait(t); code != 0 {
		t.Errorf("exit %d after SIGTERM; stderr:\n%s", code, n.stderr())
	}
}

// TestClosedStderrDoesNotKillMQD is mqd | tee log, then Ctrl-C: tee exits
// first and mqd, shutting down on the same SIGINT, writes its log lines to
// a pipe nobody reads. It must still finish its shutdown and exit 0.
func TestClosedStderrDoesNotKillMQD(t *testing.T) {
	r, w, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(mqdBinary, "--data-dir", filepath.Join(t.TempDir(), "data"),
		"--listen", "unix://"+filepath.Join(shortTempDir(t), "mqd.sock"), "--listen", "tcp://127.0.0.1:0")
	cmd.Env = testEnv(t)
	cmd.Stderr = w
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	w.Close()
	exited := make(chan struct{})
	var waitErr error
	go func() { waitErr = cmd.Wait(); close(exited) }()
	t.Cleanup(func() {
		cmd.Process.Kill()
		<-exited
	})
	sc := bufio.NewScanner(r)
	for sc.Scan() && !strings.Contains(sc.Text(), "mqd serving") {
	}
	if sc.Err() != nil {
		t.Fatal(sc.Err())
	}
	r.Close()
	if err := cmd.Process.Signal(syscall.SIGINT); err != nil {
		t.Fatal(err)
	}
	select {
	case <-exited:
		if waitErr != nil {
			t.Fatalf("mqd with its stderr reader gone: %v, want exit 0 after SIGINT", waitErr)
		}
	case <-time.After(waitTimeout):
		t.Fatalf("mqd did not exit after %v", waitTimeout)
	}
}

// stockKafkaConfig is a KRaft server.properties as Apache Kafka ships it,
// with its log directory replaced: properties mq uses, properties that
// mean nothing to mq, and listeners in Kafka's NAME://host:port form.
const stockKafkaConfig = `process.roles=broker,controller
node.id=1
controller.quorum.voters=1@localhost:9093
listeners=PLAINTEXT://:9092,CONTROLLER://:9093
inter.broker.listener.name=PLAINTEXT
advertised.listeners=PLAINTEXT://localhost:9092
controller.listener.names=CONTROLLER
listener.security.protocol.map=CONTROLLER:PLAINTEXT,PLAINTEXT:PLAINTEXT
num.network.threads=3
num.io.threads=8
socket.send.buffer.bytes=102400
socket.receive.buffer.bytes=102400
socket.request.max.bytes=104857600
num.partitions=1
num.recovery.threads.per.data.dir=1
offsets.topic.replication.factor=1
transaction.state.log.replication.factor=1
transaction.state.log.min.isr=1
log.retention.hours=168
log.segment.bytes=1073741824
log.retention.check.interval.ms=300000
`

// TestKafkaServerPropertiesReportsEveryBadLineAtOnce: a stock Kafka
// server.properties fails on its two listener lines, both reported in one
// run, and on nothing else: the Kafka properties mq has no use for are
// accepted, and logged as ignored once mqd starts.
func TestKafkaServerPropertiesReportsEveryBadLineAtOnce(t *testing.T) {
	dir := t.TempDir()
	file := filepath.Join(dir, "server.properties")
	if err := os.WriteFile(file, []byte(stockKafkaConfig), 0o644); err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(mqdBinary, "--config", file, "--data-dir", filepath.Join(dir, "data"))
	cmd.Env = testEnv(t)
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	err := cmd.Run()
	var exit *exec.ExitError
	if !errors.As(err, &exit) || exit.ExitCode() != 2 {
		t.Fatalf("exit: %v, want status 2; stderr:\n%s", err, stderr.String())
	}
	lines := strings.Split(strings.TrimSuffix(stderr.String(), "\n"), "\n")
	if len(lines) != 2 || !strings.HasPrefix(lines[0], "mqd: "+file+":4: invalid value") ||
		!strings.HasPrefix(lines[1], "mqd: "+file+":6: invalid value") || !strings.HasSuffix(lines[1], "(see mqd --help)") {
		t.Fatalf("stderr:\n%s\nwant the listeners (line 4) and advertised.listeners (line 6) errors, one line each", stderr.String())
	}

	// With mq's listeners the same file starts mqd.
	fixed := strings.NewReplacer("listeners=PLAINTEXT://:9092,CONTROLLER://:9093\n", "",
		"advertised.listeners=PLAINTEXT://localhost:9092\n", "", "controller.quorum.voters=1@localhost:9093\n", "").Replace(stockKafkaConfig)
	if err := os.WriteFile(file, []byte(fixed), 0o644); err != nil {
		t.Fatal(err)
	}
	n := startMQD(t, testEnv(t, "MQ_LOG_RETENTION_HOURZ=1"), "--config", file)
	for _, ignored := range []string{"process.roles is ignored", "num.io.threads is ignored", "transaction.state.log.min.isr is ignored"} {
		n.waitLine(t, ignored)
	}
	n.waitLine(t, "$MQ_LOG_RETENTION_HOURZ is not an mq setting; ignored (did you mean $MQ_LOG_RETENTION_HOURS?)")
	n.signal(t, syscall.SIGTERM)
	if code := n.wait(t); code != 0 {
		t.Fatalf("exit %d; stderr:\n%s", code, n.stderr())
	}
}
