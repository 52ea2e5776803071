package main

import (
	"context"
	"errors"
	"log/slog"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"sync"
	"syscall"
	"testing"
	"time"
)

func TestWatchdogIntervalReadsTheEnvironmentAsSystemdSetsIt(t *testing.T) {
	const pid = 4242
	for _, tc := range []struct {
		name, usec, wpid string
		want             time.Duration
		ok, err          bool
	}{
		{name: "unset"},
		{name: "ours without a pid", usec: "30000000", want: 30 * time.Second, ok: true},
		{name: "ours by pid", usec: "200000", wpid: strconv.Itoa(pid), want: 200 * time.Millisecond, ok: true},
		{name: "another process's", usec: "200000", wpid: "1"},
		{name: "pid not a number", usec: "200000", wpid: "me", err: true},
		{name: "zero", usec: "0", err: true},
		{name: "not a number", usec: "30s", err: true},
		{name: "beyond a time.Duration", usec: "18446744073709551", err: true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			env := map[string]string{"WATCHDOG_USEC": tc.usec, "WATCHDOG_PID": tc.wpid}
			got, ok, err := watchdogInterval(func(k string) string { return env[k] }, pid)
			if got != tc.want || ok != tc.ok || (err != nil) != tc.err {
				t.Errorf("got %v, %v, %v; want %v, %v, error %v", got, ok, err, tc.want, tc.ok, tc.err)
			}
		})
	}
}

// A keep-alive follows only a probe that succeeded: while the daemon
// does not answer itself, systemd hears nothing.
func TestWatchdogWithholdsKeepAlivesWhileTheProbeFails(t *testing.T) {
	var mu sync.Mutex
	answering := false
	probes := make(chan struct{}, 100)
	sent := make(chan string, 100)
	probe := func(context.Context) error {
		mu.Lock()
		defer mu.Unlock()
		probes <- struct{}{}
		if !answering {
			return errors.New("wedged")
		}
		return nil
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() {
		defer close(done)
		runWatchdog(ctx, 20*time.Millisecond, probe, func(s string) error { sent <- s; return nil }, slog.New(slog.DiscardHandler))
	}()
	for range 3 {
		<-probes
	}
	mu.Lock()
	if n := len(sent); n != 0 {
		t.Errorf("%d keep-alives while the probe failed", n)
	}
	answering = true
	mu.Unlock()
	select {
	case s := <-sent:
		if s != "WATCHDOG=1" {
			t.Errorf("sent %q", s)
		}
	case <-time.After(waitTimeout):
		t.Fatal("no keep-alive once the probe succeeds")
	}
	cancel()
	<-done
}

func TestWatchdogKeepAlivesFollowReady(t *testing.T) {
	name := filepath.Join(shortTempDir(t), "notify")
	conn, err := net.ListenUnixgram("unixgram", &net.UnixAddr{Name: name, Net: "unixgram"})
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	n := startMQD(t, testEnv(t, "NOTIFY_SOCKET="+name, "WATCHDOG_USEC=200000"))
	if got := readDatagram(t, conn); got != "READY=1" {
		t.Fatalf("first notification %q, want READY=1", got)
	}
	// Every 100ms: a few in a row show they repeat.
	for i := range 3 {
		if got := readDatagram(t, conn); got != "WATCHDOG=1" {
			t.Fatalf("notification %d after READY=1: %q, want WATCHDOG=1; stderr:\n%s", i+1, got, n.stderr())
		}
	}
	n.waitLine(t, "watchdog keep-alives")
	n.signal(t, syscall.SIGTERM)
	// Keep-alives in flight may come first; then STOPPING=1, and none after.
	for {
		got := readDatagram(t, conn)
		if got == "STOPPING=1" {
			break
		}
		if got != "WATCHDOG=1" {
			t.Fatalf("notification %q while stopping", got)
		}
	}
	if code := n.wait(t); code != 0 {
		t.Errorf("exit %d", code)
	}
	if got, ok := pendingDatagram(t, conn); ok {
		t.Errorf("notification %q after STOPPING=1", got)
	}
}

func TestWatchdogForAnotherPidSendsNoKeepAlives(t *testing.T) {
	name := filepath.Join(shortTempDir(t), "notify")
	conn, err := net.ListenUnixgram("unixgram", &net.UnixAddr{Name: name, Net: "unixgram"})
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	other := strconv.Itoa(os.Getpid()) // the test's pid: never mqd's
	n := startMQD(t, testEnv(t, "NOTIFY_SOCKET="+name, "WATCHDOG_USEC=200000", "WATCHDOG_PID="+other))
	if got := readDatagram(t, conn); got != "READY=1" {
		t.Fatalf("first notification %q, want READY=1", got)
	}
	// Five intervals of keep-alives that must not come.
	conn.SetReadDeadline(time.Now().Add(time.Second))
	buf := make([]byte, 512)
	if k, _, err := conn.ReadFromUnix(buf); err == nil {
		t.Fatalf("notification %q for a watchdog of pid %s", buf[:k], other)
	}
	n.signal(t, syscall.SIGTERM)
	if got := readDatagram(t, conn); got != "STOPPING=1" {
		t.Fatalf("notification %q, want STOPPING=1", got)
	}
	if code := n.wait(t); code != 0 {
		t.Errorf("exit %d", code)
	}
}

// pendingDatagram returns a datagram already queued on conn, if any.
func pendingDatagram(t *testing.T, conn *net.UnixConn) (string, bool) {
	t.Helper()
	conn.SetReadDeadline(time.Now().Add(10 * time.Millisecond))
	buf := make([]byte, 512)
	k, _, err := conn.ReadFromUnix(buf)
	if err != nil {
		return "", false
	}
	return string(buf[:k]), true
}

func TestProbeAddrPrefersTheSocketAndAsksTheLoopback(t *testing.T) {
	for _, tc := range []struct {
		addrs []string
		want  string
	}{
		{[]string{"tcp://127.0.0.1:9092", "unix:///run/mq/mqd.sock"}, "unix:///run/mq/mqd.sock"},
		{[]string{"tcp://0.0.0.0:9092"}, "tcp://127.0.0.1:9092"},
		{[]string{"tcp://[::]:9092"}, "tcp://[::1]:9092"},
		{[]string{"tcp://10.0.0.5:9092", "tcp://127.0.0.1:9093"}, "tcp://10.0.0.5:9092"},
		// Never the TLS listener.
		{[]string{"ssl://127.0.0.1:9093", "tcp://127.0.0.1:9092"}, "tcp://127.0.0.1:9092"},
	} {
		got, err := probeAddr(tc.addrs)
		if err != nil || got.String() != tc.want {
			t.Errorf("probeAddr(%v) = %v, %v; want %s", tc.addrs, got, err, tc.want)
		}
	}
	if _, err := probeAddr(nil); err == nil {
		t.Error("probeAddr(nil) found something to ask")
	}
	if a, err := probeAddr([]string{"ssl://127.0.0.1:9093"}); err == nil {
		t.Errorf("probeAddr found %v to ask among TLS listeners only", a)
	}
}

// A listener that accepts but never answers, or answers nonsense, fails
// the probe (so no keep-alive) within its deadline.
func TestProbeFailsWhenTheListenerDoesNotAnswerLikeABroker(t *testing.T) {
	for _, answer := range [][]byte{nil, {0, 0, 0, 8, 0, 0, 0, 9, 1, 2, 3, 4}} {
		l, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		defer l.Close()
		go func() {
			c, err := l.Accept()
			if err != nil {
				return
			}
			defer c.Close()
			buf := make([]byte, 512)
			c.Read(buf)
			if answer != nil {
				c.Write(answer)
			}
			c.Read(buf) // hold the connection until the probe gives up
		}()
		addr, err := probeAddr([]string{"tcp://" + l.Addr().String()})
		if err != nil {
			t.Fatal(err)
		}
		ctx, cancel := context.WithTimeout(context.Background(), 200*time.Millisecond)
		start := time.Now()
		err = probeBroker(ctx, addr)
		cancel()
		if err == nil {
			t.Errorf("answer %v: the probe succeeded", answer)
		}
		if d := time.Since(start); d > 5*time.Second {
			t.Errorf("answer %v: the probe took %v past its 200ms deadline", answer, d)
		}
	}
}
