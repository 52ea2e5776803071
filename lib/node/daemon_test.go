package node

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/mqproject/mq/lib/clock"
	"github.com/mqproject/mq/lib/config"
	"github.com/mqproject/mq/lib/mqtest"
)

// testSettings are settings for a daemon on a fresh data directory, a
// Unix socket in a short temporary directory and a free TCP port.
func testSettings(t *testing.T) config.Broker {
	t.Helper()
	sockDir, err := os.MkdirTemp("", "mqd")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(sockDir) })
	s := config.Defaults()
	s.DataDir = filepath.Join(t.TempDir(), "data")
	s.Listeners = []string{"unix://" + filepath.Join(sockDir, "mqd.sock"), "tcp://127.0.0.1:0"}
	return s
}

func startDaemon(t *testing.T, s config.Broker) *Daemon {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	d, err := Start(ctx, Config{Settings: s})
	if err != nil {
		t.Fatalf("Start: %v", err)
	}
	t.Cleanup(func() { d.Shutdown(context.Background()) })
	return d
}

func TestDaemonRegistersItsActualAddress(t *testing.T) {
	s := testSettings(t)
	d := startDaemon(t, s)
	addrs := d.Addrs()
	if len(addrs) != 2 || addrs[0] != s.Listeners[0] || !strings.HasPrefix(addrs[1], "tcp://127.0.0.1:") || addrs[1] == "tcp://127.0.0.1:0" {
		t.Fatalf("Addrs() = %q", addrs)
	}
	port, _ := strconv.Atoi(strings.TrimPrefix(addrs[1], "tcp://127.0.0.1:"))
	b, ok := d.ctrl.Image().Brokers[s.NodeID]
	if !ok || b.Host != "127.0.0.1" || b.Port != int32(port) {
		t.Errorf("registered broker %+v (found %v), want 127.0.0.1:%d", b, ok, port)
	}
	if fi, err := os.Stat(s.DataDir); err != nil {
		t.Error(err)
	} else if fi.Mode().Perm() != 0o750 {
		t.Errorf("data directory mode %v, want 0750", fi.Mode().Perm())
	}
}

func TestDaemonAnswersApiVersions(t *testing.T) {
	d := startDaemon(t, testSettings(t))
	cl, err := kgo.NewClient(kgo.SeedBrokers(strings.TrimPrefix(d.Addrs()[1], "tcp://")))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	resp, err := kmsg.NewPtrApiVersionsRequest().RequestWith(ctx, cl)
	if err != nil {
		t.Fatal(err)
	}
	if resp.ErrorCode != 0 || len(resp.ApiKeys) == 0 {
		t.Errorf("ApiVersions: error %d, %d keys", resp.ErrorCode, len(resp.ApiKeys))
	}
}

func TestSecondDaemonOnDataDirFails(t *testing.T) {
	s := testSettings(t)
	startDaemon(t, s)
	s2 := testSettings(t)
	s2.DataDir = s.DataDir
	_, err := Start(context.Background(), Config{Settings: s2})
	var inUse *DataDirInUseError
	if !errors.As(err, &inUse) {
		t.Fatalf("second Start: %v, want a DataDirInUseError", err)
	}
	want := "data directory " + s.DataDir + " is in use by another mqd (pid " + strconv.Itoa(os.Getpid()) + ")"
	if err.Error() != want {
		t.Errorf("error %q, want %q", err, want)
	}
}

func TestShutdownReleasesDataDir(t *testing.T) {
	s := testSettings(t)
	d := startDaemon(t, s)
	if err := d.Shutdown(context.Background()); err != nil {
		t.Fatalf("Shutdown: %v", err)
	}
	if err := d.Shutdown(context.Background()); err != nil {
		t.Errorf("second Shutdown: %v", err)
	}
	// Same directory, same socket: both were released.
	d2 := startDaemon(t, s)
	if len(d2.Addrs()) != 2 {
		t.Errorf("restart: Addrs() = %q", d2.Addrs())
	}
}

func TestFailedStartReleasesDataDir(t *testing.T) {
	s := testSettings(t)
	s.Listeners = []string{"unix://relative.sock"}
	if _, err := Start(context.Background(), Config{Settings: s}); err == nil {
		t.Fatal("Start with a bad listener succeeded")
	}
	startDaemon(t, testSettingsIn(t, s.DataDir))
}

func testSettingsIn(t *testing.T, dir string) config.Broker {
	s := testSettings(t)
	s.DataDir = dir
	return s
}

func TestAdvertisedAddress(t *testing.T) {
	hostname, _ := os.Hostname()
	for _, tc := range []struct {
		advertise string
		listeners []string
		host      string
		port      int32
	}{
		{"", []string{"unix:///s", "tcp://127.0.0.1:4000", "tcp://10.0.0.1:5000"}, "127.0.0.1", 4000},
		{"mq.example:9092", []string{"tcp://127.0.0.1:4000"}, "mq.example", 9092},
		{"tcp://mq.example:9092", nil, "mq.example", 9092},
		{"", []string{"tcp://0.0.0.0:4000"}, hostname, 4000},
		{"", []string{"tcp://[::]:4000"}, hostname, 4000},
		{"", []string{"tcp://[::1]:4000"}, "::1", 4000},
		{"", []string{"unix:///s"}, "localhost", 0},
		// TLS only: the ssl:// listener; beside a TCP one, the TCP one.
		{"", []string{"unix:///s", "ssl://127.0.0.1:4443"}, "127.0.0.1", 4443},
		{"", []string{"ssl://127.0.0.1:4443", "tcp://127.0.0.1:4000"}, "127.0.0.1", 4000},
	} {
		host, port, err := advertisedAddress(tc.advertise, tc.listeners)
		if err != nil || host != tc.host || port != tc.port {
			t.Errorf("advertisedAddress(%q, %q) = %s, %d, %v; want %s, %d", tc.advertise, tc.listeners, host, port, err, tc.host, tc.port)
		}
	}
}

// TestHeartbeatsGoOnTheNodesClock: a node started on a manual clock
// heartbeats when its clock passes broker.heartbeat.interval.ms, and not
// before, so that tests can step liveness instead of waiting for it. The
// interval is an hour: on the wall clock no heartbeat would come while
// the test waits.
func TestHeartbeatsGoOnTheNodesClock(t *testing.T) {
	s := testSettings(t)
	s.BrokerHeartbeatInterval = time.Hour
	s.BrokerSessionTimeout = 3 * time.Hour
	clk := clock.NewManual(time.Unix(1_700_000_000, 0))
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	d, err := Start(ctx, Config{Settings: s, Clock: clk})
	if err != nil {
		t.Fatalf("Start: %v", err)
	}
	t.Cleanup(func() { d.Shutdown(context.Background()) })
	lastHeartbeat := func() time.Time {
		q, err := d.ctrl.Quorum(ctx)
		if err != nil {
			t.Fatal(err)
		}
		for _, m := range q.Members {
			if m.ID == s.NodeID {
				return m.LastHeartbeat
			}
		}
		return time.Time{}
	}
	if got := lastHeartbeat(); !got.IsZero() {
		t.Fatalf("a heartbeat at %v before the clock moved", got)
	}
	clk.Advance(30 * time.Minute)
	if got := lastHeartbeat(); !got.IsZero() {
		t.Fatalf("a heartbeat at %v, half an interval in", got)
	}
	clk.Advance(30 * time.Minute)
	want := clk.Now()
	mqtest.WaitFor(t, "a heartbeat at the interval", func() (bool, string) {
		got := lastHeartbeat()
		return got.Equal(want), fmt.Sprintf("last heartbeat %v, want %v", got, want)
	})
}
