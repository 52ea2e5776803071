package e2e

import (
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/mqproject/mq/lib/mqtest"
)

// tmuxServer is a tmux server of one test's own (its own socket name and
// no user configuration), killed when the test ends.
type tmuxServer struct {
	t    *testing.T
	path string
	args []string
	dir  string // the sessions' files
}

func startTmux(t *testing.T) *tmuxServer {
	t.Helper()
	path, err := exec.LookPath("tmux")
	if err != nil {
		t.Skip("tmux not installed (apt-get install tmux; .ci/run installs it)")
	}
	// remain-on-exit keeps the pane after the program exits, so that its
	// exit status and the terminal it left can be read.
	conf := filepath.Join(t.TempDir(), "tmux.conf")
	if err := os.WriteFile(conf, []byte("set -g remain-on-exit on\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	socket := fmt.Sprintf("mq-e2e-%d-%d", os.Getpid(), time.Now().UnixNano())
	s := &tmuxServer{t: t, path: path, args: []string{"-L", socket, "-f", conf}, dir: filepath.Dir(conf)}
	t.Cleanup(func() { exec.Command(path, append(s.args, "kill-server")...).Run() })
	return s
}

func (s *tmuxServer) run(args ...string) string {
	s.t.Helper()
	out, err := exec.Command(s.path, append(s.args, args...)...).CombinedOutput()
	if err != nil {
		s.t.Fatalf("tmux %s: %v\n%s", strings.Join(args, " "), err, out)
	}
	return string(out)
}

// screen is what session's pane shows now, as text.
func (s *tmuxServer) screen(session string) string { return s.run("capture-pane", "-p", "-t", session) }

// pane is a format of session's pane (tmux display -p), e.g.
// "#{pane_dead}".
func (s *tmuxServer) pane(session, format string) string {
	return strings.TrimSpace(s.run("display", "-p", "-t", session, format))
}

// waitScreen waits until session's pane shows what ok wants, failing
// with the last screen.
func (s *tmuxServer) waitScreen(session, what string, ok func(screen string) bool) string {
	s.t.Helper()
	var last string
	mqtest.WaitFor(s.t, what, func() (bool, string) {
		last = s.screen(session)
		return ok(last), "the screen:\n" + last
	})
	return last
}

// waitExit waits until session's program (run by mqtailIn) has exited
// with status and checks that it left the terminal as it found it: out of
// the alternate screen, its view gone.
func (s *tmuxServer) waitExit(session string, status int) {
	s.t.Helper()
	// The shell around the program writes its status to a file: tmux's
	// own pane_dead_status was seen wrong (1, or empty) for a program
	// that exited 130.
	want := strconv.Itoa(status)
	mqtest.WaitFor(s.t, session+" to exit with status "+want, func() (bool, string) {
		b, _ := os.ReadFile(s.statusFile(session))
		got := strings.TrimSpace(string(b))
		return got == want && s.pane(session, "#{pane_dead}") == "1", "exit status " + strconv.Quote(got) + ", want " + want
	})
	if alt := s.pane(session, "#{alternate_on}"); alt != "0" {
		s.t.Errorf("%s: the terminal was left in the alternate screen (alternate_on %s)", session, alt)
	}
	if screen := s.screen(session); strings.Contains(screen, "HIGH-WATERMARK") || strings.Contains(screen, "laggards") {
		s.t.Errorf("%s: mqtail's view is still on the restored screen:\n%s", session, screen)
	}
}

// mqtailIn starts a session running mqtail with args in a shell that
// writes its exit status to the session's status file, and its stderr to
// the session's stderr file (logged when the test fails). It returns a
// function giving the program's pid.
func (s *tmuxServer) mqtailIn(session string, args ...string) func() int {
	s.t.Helper()
	dir := filepath.Join(s.dir, session)
	if err := os.MkdirAll(dir, 0o755); err != nil {
		s.t.Fatal(err)
	}
	s.t.Cleanup(func() {
		if s.t.Failed() {
			b, _ := os.ReadFile(filepath.Join(dir, "stderr"))
			s.t.Logf("mqtail's stderr in session %s: %q", session, b)
		}
	})
	cmd := filepath.Join(binDir, "mqtail") + " " + strings.Join(args, " ") + " 2>" + filepath.Join(dir, "stderr") +
		"; echo $? >" + s.statusFile(session)
	s.run("new-session", "-d", "-s", session, "-x", "160", "-y", "50", cmd)
	return func() int {
		s.t.Helper()
		shell := s.pane(session, "#{pane_pid}")
		b, err := os.ReadFile("/proc/" + shell + "/task/" + shell + "/children")
		if err != nil {
			s.t.Fatal(err)
		}
		f := strings.Fields(string(b))
		if len(f) != 1 {
			s.t.Fatalf("session %s: the shell %s has children %q, want mqtail alone", session, shell, f)
		}
		pid, err := strconv.Atoi(f[0])
		if err != nil {
			s.t.Fatal(err)
		}
		return pid
	}
}

func (s *tmuxServer) statusFile(session string) string {
	return filepath.Join(s.dir, session, "status")
}

// TestMqtailInATerminal runs mqtail in a real terminal (tmux) against a
// real mqd with a lagging group, and checks what a person would see: the
// topic, then, after the key for the groups view, the group and its lag;
// "DISCONNECTED" while the broker is stopped, and the view back when it
// is started again; and that q ends it with status 0, SIGTERM with 130,
// the terminal restored both times (the alternate screen left).
func TestMqtailInATerminal(t *testing.T) {
	tm := startTmux(t)
	b := startBroker(t, brokerOpts{})
	cl := b.client(kgo.DefaultProduceTopic("tailed"), kgo.AllowAutoTopicCreation())
	ctx := ctxFor(t, time.Minute)
	for i := range 20 {
		if err := cl.ProduceSync(ctx, &kgo.Record{Partition: 0, Value: []byte("r" + strconv.Itoa(i))}).FirstErr(); err != nil {
			t.Fatal(err)
		}
	}
	var offsets kadm.Offsets
	offsets.Add(kadm.Offset{Topic: "tailed", Partition: 0, At: 5, LeaderEpoch: -1})
	if err := kadm.NewClient(cl).CommitAllOffsets(ctx, "laggards", offsets); err != nil {
		t.Fatal(err)
	}

	// Through the Unix socket, whose path stays across the restart below
	// (the TCP port does not).
	tm.mqtailIn("keys", "-b", "unix://"+b.socket)
	topicsShown := func(s string) bool { return strings.Contains(s, "[topics]") && strings.Contains(s, "tailed") }
	tm.waitScreen("keys", "the topics view with topic tailed", topicsShown)
	if alt := tm.pane("keys", "#{alternate_on}"); alt != "1" {
		t.Errorf("mqtail runs outside the alternate screen (alternate_on %s)", alt)
	}
	tm.run("send-keys", "-t", "keys", "2")
	lagShown := func(s string) bool {
		for _, l := range strings.Split(s, "\n") {
			f := strings.Fields(l)
			if slices.Contains(f, "laggards") && slices.Contains(f, "tailed") && slices.Contains(f, "15") {
				return strings.Contains(s, "[groups]")
			}
		}
		return false
	}
	screen := tm.waitScreen("keys", "the groups view with laggards and its lag of 15", lagShown)
	if !strings.Contains(screen, "q quit") {
		t.Errorf("no help line naming the keys:\n%s", screen)
	}

	if err := b.stop(); err != nil {
		t.Fatal(err)
	}
	tm.waitScreen("keys", "DISCONNECTED with the last data kept", func(s string) bool {
		return strings.Contains(s, "DISCONNECTED since") && lagShown(s)
	})
	b.start()
	tm.waitScreen("keys", "connected again", func(s string) bool {
		return !strings.Contains(s, "DISCONNECTED") && !strings.Contains(s, "disconnected") && lagShown(s)
	})

	tm.run("send-keys", "-t", "keys", "q")
	tm.waitExit("keys", 0)

	// SIGTERM (kill, systemd, a closing terminal's shell) restores the
	// terminal too, and exits 130.
	pid := tm.mqtailIn("term", "-b", "unix://"+b.socket)
	tm.waitScreen("term", "the topics view", topicsShown)
	if err := syscall.Kill(pid(), syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	tm.waitExit("term", 130)
}

// TestMqtailInATerminalDuringAnIncident: on an 80-column terminal, the
// live view of a 3-node cluster says "broker 3 unreachable" when a node is
// killed (and not yet fenced: a long session timeout), keeps showing the
// other leaders' partitions, says "controller without quorum" when a
// second node goes, and is never DISCONNECTED: a node answers.
func TestMqtailInATerminalDuringAnIncident(t *testing.T) {
	tm := startTmux(t)
	c := startCluster(t, 3, clusterOpts{props: slowFencing})
	c.createTopicOn("spread", [][]int32{{1}, {2}, {3}}, nil)
	tm.mqtailIn("sick", "-b", c.node(1).addr+","+c.node(2).addr)
	tm.run("resize-window", "-t", "sick", "-x", "80", "-y", "24")
	tm.waitScreen("sick", "the topics view with spread and its MSG/S on 80 columns", func(s string) bool {
		return strings.Contains(s, "[topics]") && strings.Contains(s, "spread") && strings.Contains(s, "MSG/S")
	})
	healthy := func(s string) bool {
		return !strings.Contains(s, "DISCONNECTED") && !strings.Contains(s, "disconnected")
	}
	c.node(3).kill()
	tm.waitScreen("sick", "broker 3 unreachable, its partition too, not a disconnection", func(s string) bool {
		return strings.Contains(s, "! broker 3 unreachable (") && strings.Contains(s, "leader unreachable") && healthy(s)
	})
	c.node(2).kill()
	tm.waitScreen("sick", "the quorum lost, not a disconnection", func(s string) bool {
		return strings.Contains(s, "controller without quorum") && strings.Contains(s, "broker 2 unreachable") && healthy(s)
	})
	c.heal() // a node alone cannot stop: its controlled shutdown needs the quorum
	tm.waitScreen("sick", "the cluster back", func(s string) bool {
		return !strings.Contains(s, "unreachable") && !strings.Contains(s, "without quorum") && healthy(s)
	})
	tm.run("send-keys", "-t", "sick", "q")
	tm.waitExit("sick", 0)
}

// onceSnapshot is the part of mqtail --once -o json this package reads.
type onceSnapshot struct {
	Brokers []struct {
		ID    int32  `json:"id"`
		State string `json:"state"`
	} `json:"brokers"`
	Topics []struct {
		Topic           string `json:"topic"`
		UnderReplicated int    `json:"under_replicated"`
		Partitions      []struct {
			Partition       int32   `json:"partition"`
			Leader          int32   `json:"leader"`
			Replicas        []int32 `json:"replicas"`
			ISR             []int32 `json:"isr"`
			UnderReplicated bool    `json:"under_replicated"`
			Offline         bool    `json:"offline"`
			HighWatermark   int64   `json:"high_watermark"`
			Error           string  `json:"error"`
		} `json:"partitions"`
	} `json:"topics"`
	QuorumLost bool     `json:"quorum_lost"`
	Errors     []string `json:"errors"`
}

// TestMqtailOnceShowsAnUnderReplicatedPartition: on a 3-node cluster
// with one follower killed, gone from the ISR and fenced, mqtail --once
// -o json marks the partition it followed under-replicated, the one it
// alone held offline, and the one on the leader alone neither.
func TestMqtailOnceShowsAnUnderReplicatedPartition(t *testing.T) {
	c := startCluster(t, 3, clusterOpts{props: fastFailover})
	c.createRF3("urp", 1)
	ps := c.waitPartitions("urp", "in sync", fullISR)
	leader := ps[0].leader
	var follower int32
	for _, r := range ps[0].replicas {
		if r != leader {
			follower = r
			break
		}
	}
	c.createTopicOn("solo", [][]int32{{follower}}, nil)
	c.createTopicOn("whole", [][]int32{{leader}}, nil)
	c.node(follower).kill()
	c.waitPartitions("urp", "ISR without the killed follower", func(ps []partitionState) bool {
		return len(ps[0].isr) == 2 && !slices.Contains(ps[0].isr, follower)
	})
	c.waitPartitions("solo", "solo without a leader", func(ps []partitionState) bool { return ps[0].leader < 0 })
	var addrs []string
	for _, n := range c.serving() {
		addrs = append(addrs, n.addr)
	}
	res := runTool(t, 30*time.Second, "", "mqtail", "-b", strings.Join(addrs, ","), "--once", "-o", "json", "--interval", "200ms")
	if res.code != 0 || res.stderr != "" {
		t.Fatalf("mqtail --once: exit %d\nstdout: %s\nstderr: %s", res.code, res.stdout, res.stderr)
	}
	var snap onceSnapshot
	if err := json.Unmarshal([]byte(res.stdout), &snap); err != nil {
		t.Fatalf("mqtail --once -o json: %v\n%s", err, res.stdout)
	}
	seen := map[string]bool{}
	for _, tp := range snap.Topics {
		if len(tp.Partitions) != 1 {
			t.Errorf("%s: %d partitions, want 1", tp.Topic, len(tp.Partitions))
			continue
		}
		p := tp.Partitions[0]
		seen[tp.Topic] = true
		switch tp.Topic {
		case "urp":
			if !p.UnderReplicated || p.Offline || len(p.ISR) != 2 || slices.Contains(p.ISR, follower) || tp.UnderReplicated != 1 {
				t.Errorf("urp with follower %d killed: %+v (topic under-replicated %d), want under-replicated with an ISR of 2",
					follower, p, tp.UnderReplicated)
			}
		case "solo":
			if !p.Offline || p.Leader != -1 {
				t.Errorf("solo, its one replica %d killed: %+v, want offline", follower, p)
			}
		case "whole":
			if p.UnderReplicated || p.Offline || tp.UnderReplicated != 0 || p.HighWatermark != 0 {
				t.Errorf("whole (one replica, alive): %+v, want in sync, online, at 0", p)
			}
		}
	}
	if !seen["urp"] || !seen["solo"] || !seen["whole"] {
		t.Errorf("urp, solo and whole not all in the snapshot:\n%s", res.stdout)
	}
	for _, b := range snap.Brokers {
		if b.ID == follower && b.State != "fenced" {
			t.Errorf("killed broker %d: state %q, want fenced", b.ID, b.State)
		}
	}
}

// TestMqtailOnceDuringAnIncident: a broker killed and not fenced yet (a
// long session timeout keeps it so, as for the first seconds of an
// incident, or for good once the quorum is lost) is "unreachable", said
// in one line, and the partitions it leads are described without their
// offsets ("leader 3 unreachable") while the others are read as usual;
// with two of three voters gone the quorum is lost, and said so. Neither
// is a lost connection: a node answers.
func TestMqtailOnceDuringAnIncident(t *testing.T) {
	parallel(t)
	c := startCluster(t, 3, clusterOpts{props: slowFencing})
	c.createTopicOn("spread", [][]int32{{1}, {2}, {3}}, nil)
	ctx := ctxFor(t, time.Minute)
	prod := c.client(kgo.RecordPartitioner(kgo.ManualPartitioner()))
	for p := range int32(3) {
		if err := prod.ProduceSync(ctx, &kgo.Record{Topic: "spread", Partition: p, Value: []byte("x")}).FirstErr(); err != nil {
			t.Fatalf("produce to spread/%d: %v", p, err)
		}
	}
	once := func(addrs string) onceSnapshot {
		t.Helper()
		res := runTool(t, time.Minute, "", "mqtail", "-b", addrs, "--once", "-o", "json", "--interval", "200ms")
		if res.code != 0 || res.stderr != "" {
			t.Fatalf("mqtail --once -b %s: exit %d\nstdout: %s\nstderr: %s", addrs, res.code, res.stdout, res.stderr)
		}
		var snap onceSnapshot
		if err := json.Unmarshal([]byte(res.stdout), &snap); err != nil {
			t.Fatalf("mqtail --once -o json: %v\n%s", err, res.stdout)
		}
		for _, e := range snap.Errors {
			if strings.Contains(e, "shard errors") || strings.Contains(e, "unable to dial") {
				t.Errorf("an error in franz-go's words: %q", e)
			}
		}
		return snap
	}
	check := func(snap onceSnapshot, down []int32, quorumLost bool) {
		t.Helper()
		for _, b := range snap.Brokers {
			want := "alive"
			if slices.Contains(down, b.ID) {
				want = "unreachable"
			}
			if b.State != want {
				t.Errorf("broker %d: state %q, want %q", b.ID, b.State, want)
			}
		}
		var want []string
		for _, id := range down {
			want = append(want, fmt.Sprintf("broker %d unreachable (%s): connection refused", id, c.node(id).addr))
		}
		if quorumLost {
			want = append(want, "controller without quorum: ")
		}
		// ListGroups asks every broker: the groups a broker that is down
		// coordinates are unknown, and said so once.
		want = append(want, "groups: ")
		if len(snap.Errors) != len(want) {
			t.Errorf("errors %q, want one a cause: %q", snap.Errors, want)
		}
		for i := range min(len(want), len(snap.Errors)) {
			if !strings.HasPrefix(snap.Errors[i], want[i]) {
				t.Errorf("error %d: %q, want %q", i, snap.Errors[i], want[i])
			}
		}
		if snap.QuorumLost != quorumLost {
			t.Errorf("quorum_lost %v, want %v", snap.QuorumLost, quorumLost)
		}
		if len(snap.Topics) != 1 || len(snap.Topics[0].Partitions) != 3 {
			t.Fatalf("topics %+v, want spread and its 3 partitions", snap.Topics)
		}
		for _, p := range snap.Topics[0].Partitions {
			if slices.Contains(down, p.Leader) {
				if wantErr := fmt.Sprintf("leader %d unreachable", p.Leader); p.Error != wantErr || p.HighWatermark != -1 {
					t.Errorf("spread/%d, led by a broker that is down: %+v, want high-water mark -1 and %q", p.Partition, p, wantErr)
				}
			} else if p.Error != "" || p.HighWatermark != 1 {
				t.Errorf("spread/%d, led by broker %d that answers: %+v, want high-water mark 1 and no error", p.Partition, p.Leader, p)
			}
		}
	}

	c.node(3).kill()
	check(once(c.node(1).addr+","+c.node(2).addr), []int32{3}, false)
	c.node(2).kill()
	// The controller, if it is node 1, steps down once it misses its
	// followers for its lease; until then the quorum still answers.
	var snap onceSnapshot
	mqtest.Wait{Timeout: 30 * time.Second}.For(t, "mqtail to see the quorum lost", func() (bool, string) {
		snap = once(c.node(1).addr)
		return snap.QuorumLost, fmt.Sprintf("errors %q", snap.Errors)
	})
	check(snap, []int32{2, 3}, true)
	c.heal() // a node alone cannot stop: its controlled shutdown needs the quorum
}

// TestMqtailOnceUnreachable: no broker at the address is exit 3 and one
// line on stderr, nothing on stdout; a bad flag is exit 2 and one line.
func TestMqtailOnceUnreachable(t *testing.T) {
	addr, err := freeAddr()
	if err != nil {
		t.Fatal(err)
	}
	res := runTool(t, 20*time.Second, "", "mqtail", "-b", addr, "--once", "-o", "json")
	if res.code != 3 || res.stdout != "" || strings.Count(res.stderr, "\n") != 1 || !strings.Contains(res.stderr, "cannot reach mqd") {
		t.Errorf("mqtail --once against %s: exit %d, stdout %q, stderr %q; want 3 and one line", addr, res.code, res.stdout, res.stderr)
	}
	res = runTool(t, 20*time.Second, "", "mqtail", "-b", addr, "--interval", "0s", "--once")
	if res.code != 2 || res.stdout != "" || strings.Count(res.stderr, "\n") != 1 {
		t.Errorf("mqtail --interval 0s: exit %d, stdout %q, stderr %q; want 2 and one line", res.code, res.stdout, res.stderr)
	}
}
