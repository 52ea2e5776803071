package client

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/urfave/cli/v2"

	"github.com/mqproject/mq/lib/config"
)

func TestParseAddrs(t *testing.T) {
	for _, tc := range []struct {
		in      string
		want    []Addr
		wantErr string
	}{
		{in: "unix:///run/mq/mqd.sock", want: []Addr{{Network: "unix", Address: "/run/mq/mqd.sock"}}},
		{in: "/tmp/mq-5/mqd.sock", want: []Addr{{Network: "unix", Address: "/tmp/mq-5/mqd.sock"}}},
		{in: "unix://rel.sock", want: []Addr{{Network: "unix", Address: "rel.sock"}}},
		{in: "tcp://127.0.0.1:9092", want: []Addr{{Network: "tcp", Address: "127.0.0.1:9092"}}},
		{in: "localhost:19092", want: []Addr{{Network: "tcp", Address: "localhost:19092"}}},
		{in: "localhost", want: []Addr{{Network: "tcp", Address: "localhost:9092"}}},
		{in: "tcp://kafka1", want: []Addr{{Network: "tcp", Address: "kafka1:9092"}}},
		{in: "[::1]:9093", want: []Addr{{Network: "tcp", Address: "[::1]:9093"}}},
		{in: "[::1]", want: []Addr{{Network: "tcp", Address: "[::1]:9092"}}},
		{in: "::1", want: []Addr{{Network: "tcp", Address: "[::1]:9092"}}},
		{in: "a:1, tcp://b:2,unix:///c.sock,", want: []Addr{{Network: "tcp", Address: "a:1"}, {Network: "tcp", Address: "b:2"}, {Network: "unix", Address: "/c.sock"}}},
		{in: "", wantErr: "no broker address"},
		{in: " , ", wantErr: "no broker address"},
		{in: "http://x:1", wantErr: `unknown scheme "http"`},
		{in: "unix://", wantErr: "missing socket path"},
		{in: "host:", wantErr: `bad port ""`},
		{in: "host:http", wantErr: `bad port "http"`},
		{in: "host:70000", wantErr: `bad port "70000"`},
		{in: "host:0", wantErr: `bad port "0"`},
		{in: ":9092", wantErr: "missing host"},
		{in: "tcp://a/b:1", wantErr: "bad host"},
	} {
		got, err := ParseAddrs(tc.in)
		if tc.wantErr != "" {
			if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
				t.Errorf("ParseAddrs(%q) = %v, %v; want error containing %q", tc.in, got, err, tc.wantErr)
			}
			continue
		}
		if err != nil || fmt.Sprint(got) != fmt.Sprint(tc.want) {
			t.Errorf("ParseAddrs(%q) = %v, %v; want %v", tc.in, got, err, tc.want)
		}
	}
}

func TestAddrStringParsesBack(t *testing.T) {
	for _, a := range []Addr{{Network: "unix", Address: "/run/mq/mqd.sock"}, {Network: "tcp", Address: "127.0.0.1:9092"}, {Network: "tcp", Address: "[::1]:1"}} {
		got, err := ParseAddrs(a.String())
		if err != nil || len(got) != 1 || got[0] != a {
			t.Errorf("ParseAddrs(%q) = %v, %v", a.String(), got, err)
		}
	}
	if s := (Addr{Network: "unix", Address: "/run/mq/mqd.sock"}).String(); s != "unix:///run/mq/mqd.sock" {
		t.Errorf("String = %q", s)
	}
}

func TestResolveOrder(t *testing.T) {
	env := func(m map[string]string) func(string) string {
		return func(k string) string { return m[k] }
	}
	for _, tc := range []struct {
		name     string
		flag     string
		env      map[string]string
		uid      int
		sockets  []string // paths that exist
		want     string
		wantCode int
	}{
		{name: "flag wins", flag: "tcp://a:1", env: map[string]string{"MQ_BROKER": "b:2"}, sockets: []string{"/tmp/mq-7/mqd.sock"}, uid: 7, want: "[tcp://a:1]"},
		{name: "env next", env: map[string]string{"MQ_BROKER": "b:2"}, sockets: []string{"/tmp/mq-7/mqd.sock"}, uid: 7, want: "[tcp://b:2]"},
		{name: "socket when it exists", uid: 7, sockets: []string{"/tmp/mq-7/mqd.sock"}, want: "[unix:///tmp/mq-7/mqd.sock]"},
		{name: "MQ_SOCKET socket", env: map[string]string{"MQ_SOCKET": "/s.sock"}, sockets: []string{"/s.sock"}, want: "[unix:///s.sock]"},
		{name: "XDG socket", env: map[string]string{"XDG_RUNTIME_DIR": "/run/user/7"}, uid: 7, sockets: []string{"/run/user/7/mq/mqd.sock"}, want: "[unix:///run/user/7/mq/mqd.sock]"},
		{name: "root socket", uid: 0, sockets: []string{"/run/mq/mqd.sock"}, want: "[unix:///run/mq/mqd.sock]"},
		{name: "tcp when no socket", uid: 7, want: "[tcp://127.0.0.1:9092]"},
		{name: "bad flag", flag: "ftp://x", wantCode: ExitUsage},
		{name: "bad env", env: map[string]string{"MQ_BROKER": "x:y"}, wantCode: ExitUsage},
	} {
		t.Run(tc.name, func(t *testing.T) {
			exists := func(p string) bool {
				for _, s := range tc.sockets {
					if s == p {
						return true
					}
				}
				return false
			}
			got, _, _, err := resolve(tc.flag, env(tc.env), tc.uid, exists)
			if tc.wantCode != 0 {
				if ExitCode(err) != tc.wantCode {
					t.Fatalf("resolve = %v, %v; want exit code %d", got, err, tc.wantCode)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if s := fmt.Sprint(got); s != tc.want {
				t.Errorf("resolve = %s, want %s", s, tc.want)
			}
		})
	}
}

func TestExitCode(t *testing.T) {
	refused := &net.OpError{Op: "dial", Net: "tcp", Err: &osSyscall{syscall.ECONNREFUSED}}
	for _, tc := range []struct {
		name string
		err  error
		code int
		msg  string
	}{
		{"nil", nil, ExitOK, ""},
		{"usage", Usagef("bad %s", "x"), ExitUsage, "bad x"},
		{"failure", Failf("no"), ExitFailure, "no"},
		{"wrapped usage", fmt.Errorf("topic: %w", Usagef("bad")), ExitUsage, "topic: bad"},
		{"plain", errors.New("boom"), ExitFailure, "boom"},
		{"kafka error", fmt.Errorf("create: %w", kerr.TopicAlreadyExists), ExitFailure, "create: TOPIC_ALREADY_EXISTS: Topic with this name already exists."},
		{"refused", fmt.Errorf("unable to dial: %w", refused), ExitUnreachable, "cannot reach mqd: connection refused — is mqd running?"},
		{"errno", syscall.ECONNRESET, ExitUnreachable, "cannot reach mqd: connection reset by peer — is mqd running?"},
		{"unreachable", Unreachable([]Addr{{Network: "unix", Address: "/run/mq/mqd.sock"}}, refused), ExitUnreachable,
			"cannot reach mqd at unix:///run/mq/mqd.sock: connection refused — is mqd running?"},
		{"cancelled", fmt.Errorf("list: %w", context.Canceled), ExitInterrupted, "interrupted"},
		{"required flag", errors.New(`Required flag "topic" not set`), ExitUsage, `Required flag "topic" not set`},
		{"no help topic", cli.Exit("No help topic for 'frob'", 3), ExitUsage, "No help topic for 'frob'"},
		{"cli exit", cli.Exit("custom", 4), 4, "custom"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			code, msg := classify(tc.err)
			if code != tc.code || msg != tc.msg {
				t.Errorf("classify = %d %q, want %d %q", code, msg, tc.code, tc.msg)
			}
		})
	}
}

// osSyscall stands in for *os.SyscallError without its "connect: " prefix
// mattering to the test.
type osSyscall struct{ errno syscall.Errno }

func (e *osSyscall) Error() string { return e.errno.Error() }
func (e *osSyscall) Unwrap() error { return e.errno }

func testApp(stdout, stderr io.Writer) *cli.App {
	return &cli.App{
		Name:      "tool",
		Writer:    stdout,
		ErrWriter: stderr,
		Commands: []*cli.Command{
			{
				Name: "topic",
				Subcommands: []*cli.Command{
					{
						Name:  "create",
						Flags: []cli.Flag{&cli.IntFlag{Name: "partitions", Aliases: []string{"p"}}},
						Action: func(c *cli.Context) error {
							switch c.Args().First() {
							case "":
								return Usagef("topic create: missing TOPIC")
							case "exists":
								return fmt.Errorf("create: %w", kerr.TopicAlreadyExists)
							case "multi":
								return errors.New("line one\nline two")
							}
							fmt.Fprintln(c.App.Writer, "created", c.Args().First())
							return nil
						},
					},
					{Name: "req", Flags: []cli.Flag{&cli.StringFlag{Name: "x", Required: true}}, Action: func(*cli.Context) error { return nil }},
				},
			},
			CompletionCommand("tool"),
		},
	}
}

func TestRunExitCodesAndOneLine(t *testing.T) {
	for _, tc := range []struct {
		args       []string
		code       int
		stdout     string
		stderr     string // whole stderr
		stdoutPart string // when stdout is help text
	}{
		{args: []string{"topic", "create", "t1"}, code: 0, stdout: "created t1\n"},
		{args: []string{"topic", "create"}, code: 2, stderr: "tool: topic create: missing TOPIC (see tool topic create --help)\n"},
		{args: []string{"topic", "create", "--bogus", "t"}, code: 2, stderr: "tool: topic create: flag provided but not defined: -bogus (see tool topic create --help)\n"},
		{args: []string{"topic", "create", "-p", "x", "t"}, code: 2, stderr: "tool: topic create: invalid value \"x\" for flag -p: parse error (see tool topic create --help)\n"},
		{args: []string{"--bogus"}, code: 2, stderr: "tool: flag provided but not defined: -bogus (see tool --help)\n"},
		{args: []string{"topic", "create", "exists"}, code: 1, stderr: "tool: create: TOPIC_ALREADY_EXISTS: Topic with this name already exists.\n"},
		{args: []string{"topic", "create", "multi"}, code: 1, stderr: "tool: line one; line two\n"},
		{args: []string{"topic", "frob"}, code: 2, stderr: "tool: topic: unknown command \"frob\" (see tool topic --help)\n"},
		{args: []string{"frob"}, code: 2, stderr: "tool: unknown command \"frob\" (see tool --help)\n"},
		{args: []string{"topic"}, code: 0, stdoutPart: "create"},
		{args: []string{"completion", "tcsh"}, code: 2, stderr: "tool: unknown shell \"tcsh\": want bash, zsh or fish (see tool completion --help)\n"},
		{args: []string{"completion"}, code: 2, stderr: "tool: completion: want one shell: bash, zsh or fish (see tool completion --help)\n"},
	} {
		t.Run(strings.Join(tc.args, " "), func(t *testing.T) {
			var stdout, stderr bytes.Buffer
			app := testApp(&stdout, &stderr)
			code := Run(app, append([]string{"tool"}, tc.args...))
			if code != tc.code {
				t.Errorf("exit %d, want %d (stderr %q)", code, tc.code, stderr.String())
			}
			if tc.stdoutPart != "" {
				if !strings.Contains(stdout.String(), tc.stdoutPart) {
					t.Errorf("stdout %q does not contain %q", stdout.String(), tc.stdoutPart)
				}
			} else if stdout.String() != tc.stdout {
				t.Errorf("stdout %q, want %q", stdout.String(), tc.stdout)
			}
			if stderr.String() != tc.stderr {
				t.Errorf("stderr %q, want %q", stderr.String(), tc.stderr)
			}
		})
	}
}

// TestRequiredFlagIsOneLineOfUsageError: a missing required flag is one
// line on stderr that names it and points to the command's help, exit 2,
// and nothing on stdout (urfave/cli would print the whole help there).
func TestRequiredFlagIsOneLineOfUsageError(t *testing.T) {
	var stdout, stderr bytes.Buffer
	if code := Run(testApp(&stdout, &stderr), []string{"tool", "topic", "req"}); code != ExitUsage {
		t.Errorf("exit %d, want %d", code, ExitUsage)
	}
	if want := "tool: topic req: missing -x VALUE (see tool topic req --help)\n"; stderr.String() != want {
		t.Errorf("stderr %q, want %q", stderr.String(), want)
	}
	if stdout.Len() != 0 {
		t.Errorf("stdout %q, want nothing", stdout.String())
	}
	var out bytes.Buffer
	if code := Run(testApp(&out, io.Discard), []string{"tool", "topic", "req", "--x", "1"}); code != ExitOK {
		t.Errorf("with the flag: exit %d", code)
	}
}

func TestParseFormat(t *testing.T) {
	for _, tc := range []struct {
		in   string
		want Format
		code int
	}{
		{"table", FormatTable, 0}, {"", FormatTable, 0}, {"json", FormatJSON, 0},
		{"yaml", 0, ExitUsage}, {"JSON", 0, ExitUsage},
	} {
		got, err := ParseFormat(tc.in)
		if got != tc.want || ExitCode(err) != tc.code {
			t.Errorf("ParseFormat(%q) = %v, %v", tc.in, got, err)
		}
	}
}

func TestWriteTableAligns(t *testing.T) {
	for _, tc := range []struct {
		name   string
		header []string
		rows   [][]string
		want   string
	}{
		{"header only", []string{"TOPIC", "PARTITIONS"}, nil, "TOPIC  PARTITIONS\n"},
		{"aligned", []string{"TOPIC", "PARTITIONS", "RF"}, [][]string{{"a", "1", "1"}, {"longer-name", "12", "3"}},
			"TOPIC        PARTITIONS  RF\n" +
				"a            1           1\n" +
				"longer-name  12          3\n"},
		{"no header", nil, [][]string{{"k", "v"}, {"key", "value"}}, "k    v\nkey  value\n"},
		{"tabs in cells", []string{"A", "B"}, [][]string{{"x\ty", "z\nw"}}, "A    B\nx y  z w\n"},
		{"empty cells", []string{"A", "B", "C"}, [][]string{{"", "b", ""}}, "A  B  C\n   b  \n"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var b bytes.Buffer
			if err := WriteTable(&b, tc.header, tc.rows); err != nil {
				t.Fatal(err)
			}
			if b.String() != tc.want {
				t.Errorf("got\n%q\nwant\n%q", b.String(), tc.want)
			}
		})
	}
}

func TestWriteJSONIsOneStableLine(t *testing.T) {
	type row struct {
		Name string            `json:"name"`
		N    int               `json:"n"`
		M    map[string]string `json:"m"`
	}
	var b bytes.Buffer
	if err := WriteJSON(&b, []row{{"a<b>", 1, map[string]string{"z": "1", "a": "2"}}}); err != nil {
		t.Fatal(err)
	}
	if want := `[{"name":"a<b>","n":1,"m":{"a":"2","z":"1"}}]` + "\n"; b.String() != want {
		t.Errorf("got %q, want %q", b.String(), want)
	}
}

func TestCompletionScripts(t *testing.T) {
	for _, shell := range Shells {
		s, err := Completion(testApp(io.Discard, io.Discard), shell)
		if err != nil {
			t.Fatalf("%s: %v", shell, err)
		}
		if !strings.Contains(s, "tool") {
			t.Errorf("%s script does not name the program:\n%s", shell, s)
		}
	}
	if _, err := Completion(testApp(io.Discard, io.Discard), "tcsh"); ExitCode(err) != ExitUsage {
		t.Errorf("tcsh: %v", err)
	}
}

func TestUnixDialerMapsEveryBrokerToTheSocket(t *testing.T) {
	dir := t.TempDir()
	sock := filepath.Join(dir, "mqd.sock")
	ln, err := net.Listen("unix", sock)
	if err != nil {
		t.Skipf("unix sockets: %v", err)
	}
	defer ln.Close()
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			c.Close()
		}
	}()
	seeds, dial := dialPlan([]Addr{{Network: "unix", Address: sock}})
	if len(seeds) != 1 || dial == nil {
		t.Fatalf("seeds %v, dialer %v", seeds, dial != nil)
	}
	for _, host := range []string{seeds[0], "127.0.0.1:9092", "advertised.example:19092"} {
		c, err := dial(context.Background(), "tcp", host)
		if err != nil {
			t.Fatalf("dial %s: %v", host, err)
		}
		if c.RemoteAddr().Network() != "unix" {
			t.Errorf("dial %s went to %s", host, c.RemoteAddr().Network())
		}
		c.Close()
	}
	// TCP seeds only: kgo's own dialer.
	if seeds, dial := dialPlan([]Addr{{Network: "tcp", Address: "h:1"}}); dial != nil || seeds[0] != "h:1" {
		t.Errorf("tcp plan: %v %v", seeds, dial != nil)
	}
}

func TestPingUnreachable(t *testing.T) {
	// A listener closed at once leaves a port nobody listens on.
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	ln.Close()
	sock := filepath.Join(t.TempDir(), "missing.sock")
	for _, tc := range []struct {
		addrs []Addr
		want  string
	}{
		{[]Addr{{Network: "tcp", Address: addr}}, "cannot reach mqd at tcp://" + addr + ": connection refused — is mqd running?"},
		{[]Addr{{Network: "unix", Address: sock}}, "cannot reach mqd at unix://" + sock + ": no such file or directory — is mqd running?"},
	} {
		cl, err := NewClient(tc.addrs)
		if err != nil {
			t.Fatal(err)
		}
		err = Ping(context.Background(), cl, tc.addrs)
		cl.Close()
		if ExitCode(err) != ExitUnreachable || err.Error() != tc.want {
			t.Errorf("Ping = %v (exit %d), want %q", err, ExitCode(err), tc.want)
		}
	}
}

func TestProducersGiveUpAFrozenBrokerSoonerThanKgo(t *testing.T) {
	addrs := []Addr{{Network: NetworkTCP, Address: "127.0.0.1:1"}}
	cl, err := NewClient(addrs, ProducerTimeouts()...)
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	overhead := cl.OptValue(kgo.RequestTimeoutOverhead).(time.Duration)
	produce := cl.OptValue(kgo.ProduceRequestTimeout).(time.Duration)
	if overhead != requestTimeoutOverhead || produce != produceRequestTimeout {
		t.Fatalf("RequestTimeoutOverhead, ProduceRequestTimeout = %v, %v; want %v, %v",
			overhead, produce, requestTimeoutOverhead, produceRequestTimeout)
	}
	// kgo gives a produce up at its timeout plus the overhead: 20 s by
	// default. A producer's must come sooner, but only once a frozen
	// leader has been fenced (a session timeout, then the controller's
	// check, at most a second later), so that the retry finds the new
	// leader rather than the frozen one again.
	bound := overhead + produce
	session := config.Defaults().BrokerSessionTimeout
	if bound >= 20*time.Second || bound <= session+time.Second {
		t.Fatalf("a produce is given up %v after it was sent; want under kgo's 20 s and past the %v session timeout and its check", bound, session)
	}
	// A Metadata answer a broker holds for a gone leader (4 s at most)
	// must not be given up.
	if overhead <= 4*time.Second {
		t.Fatalf("RequestTimeoutOverhead %v: a held Metadata answer would time out", overhead)
	}
	// A tool's own options still win.
	cl2, err := NewClient(addrs, append(ProducerTimeouts(), kgo.RequestTimeoutOverhead(time.Minute), kgo.ProduceRequestTimeout(time.Minute))...)
	if err != nil {
		t.Fatal(err)
	}
	defer cl2.Close()
	if got := cl2.OptValue(kgo.RequestTimeoutOverhead); got != time.Minute {
		t.Fatalf("RequestTimeoutOverhead with an override = %v, want 1m", got)
	}
	if got := cl2.OptValue(kgo.ProduceRequestTimeout); got != time.Minute {
		t.Fatalf("ProduceRequestTimeout with an override = %v, want 1m", got)
	}
}

func TestAdministrationKeepsKgosRequestTimeout(t *testing.T) {
	// A broker holds a DescribeQuorum answer while there is no
	// controller (mqctl cluster health waits up to 5 s for it): a tool
	// that is not producing must not give it up sooner.
	cl, err := NewClient([]Addr{{Network: NetworkTCP, Address: "127.0.0.1:1"}})
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	if got := cl.OptValue(kgo.RequestTimeoutOverhead).(time.Duration); got < 10*time.Second {
		t.Fatalf("RequestTimeoutOverhead = %v, want kgo's 10 s", got)
	}
}

func TestToolsLookUpALostLeaderSoonerThanKgo(t *testing.T) {
	cl, err := NewClient([]Addr{{Network: NetworkTCP, Address: "127.0.0.1:1"}})
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	if got := cl.OptValue(kgo.MetadataMinAge); got != metadataMinAge {
		t.Fatalf("MetadataMinAge = %v, want %v", got, metadataMinAge)
	}
	// A tool's own option still wins.
	cl2, err := NewClient([]Addr{{Network: NetworkTCP, Address: "127.0.0.1:1"}}, kgo.MetadataMinAge(time.Second))
	if err != nil {
		t.Fatal(err)
	}
	defer cl2.Close()
	if got := cl2.OptValue(kgo.MetadataMinAge); got != time.Second {
		t.Fatalf("MetadataMinAge with an override = %v, want 1s", got)
	}
}
