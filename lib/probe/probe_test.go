package probe

import (
	"bufio"
	"context"
	"fmt"
	"net"
	"os"
	"os/exec"
	"strings"
	"syscall"
	"testing"

	"golang.org/x/sys/unix"
)

// childEnv makes the test binary a listener to kill (TestMain).
const childEnv = "MQ_PROBE_CHILD"

// childConns is how many connections the child accepts and holds.
const childConns = 20

func TestMain(m *testing.M) {
	if os.Getenv(childEnv) != "" {
		listenAndHold()
		return
	}
	os.Exit(m.Run())
}

// listenAndHold is the child: it listens, prints its address, accepts
// connections, writes a byte on each and holds them until it is killed.
func listenAndHold() {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	fmt.Println(ln.Addr())
	var held []net.Conn
	for {
		c, err := ln.Accept()
		if err != nil {
			os.Exit(1)
		}
		held = append(held, c)
		if _, err := c.Write([]byte{1}); err != nil {
			os.Exit(1)
		}
	}
}

func TestGoneWhenNothingListens(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	ln.Close()
	if !Gone(context.Background(), addr) {
		t.Fatalf("a closed port %s is not gone", addr)
	}
}

// A live listener that does not answer (as Kafka's port does not before
// a request) is no proof: the probe waits out its Timeout.
func TestNotGoneWhileAListenerHoldsTheConnection(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	if Gone(context.Background(), ln.Addr().String()) {
		t.Fatal("a listening port is gone")
	}
}

// A listener closed while the probe's connection waits in its queue
// resets it: gone.
func TestGoneWhenTheListenerClosesDuringTheProbe(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	tcp := ln.(*net.TCPListener)
	raw, err := tcp.SyscallConn()
	if err != nil {
		t.Fatal(err)
	}
	done := make(chan bool)
	go func() { done <- Gone(context.Background(), ln.Addr().String()) }()
	// The probe's connection is queued once the listener would accept it;
	// closing the listener then resets it. Waiting for the queue needs no
	// accept: the socket reports readable.
	waitReadable(t, raw)
	ln.Close()
	if !<-done {
		t.Fatal("a listener closed with the probe's connection queued: not gone")
	}
}

// A process killed while the probe runs is gone however the kernel's
// teardown meets the dial: the probe starts when the process's last
// connection ends, so it dials a listener about to close, and is
// refused, reset while it connects, or reset once connected.
func TestGoneEveryTimeAKilledProcessIsProbed(t *testing.T) {
	runs := 150
	if testing.Short() {
		runs = 20
	}
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	for i := range runs {
		cmd := exec.Command(exe)
		cmd.Env = append(os.Environ(), childEnv+"=1")
		cmd.Stderr = os.Stderr
		out, err := cmd.StdoutPipe()
		if err != nil {
			t.Fatal(err)
		}
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		line, err := bufio.NewReader(out).ReadString('\n')
		if err != nil {
			cmd.Process.Kill()
			cmd.Wait()
			t.Fatalf("run %d: the child's address: %v", i, err)
		}
		addr := strings.TrimSpace(line)
		var held []net.Conn
		for range childConns {
			c, err := net.Dial("tcp", addr)
			if err != nil {
				t.Fatal(err)
			}
			held = append(held, c)
			// Its byte: the child accepted it, so the connection is one
			// of its descriptors, above the listener's.
			if _, err := c.Read(make([]byte, 1)); err != nil {
				t.Fatal(err)
			}
		}
		gone := make(chan bool)
		var why error
		go func() {
			// The last accepted connection has the highest descriptor:
			// the first to end when the process dies.
			held[len(held)-1].Read(make([]byte, 1))
			ok, err := probe(context.Background(), addr)
			why = err
			gone <- ok
		}()
		if err := cmd.Process.Kill(); err != nil {
			t.Fatal(err)
		}
		ok := <-gone
		cmd.Wait()
		for _, c := range held {
			c.Close()
		}
		if !ok {
			t.Fatalf("run %d of %d: the probe of the killed process's listener %s found it not gone: %v", i+1, runs, addr, why)
		}
	}
}

// waitReadable waits until the listener behind raw has a connection to
// accept.
func waitReadable(t *testing.T, raw syscall.RawConn) {
	t.Helper()
	var perr error
	err := raw.Control(func(fd uintptr) {
		fds := []unix.PollFd{{Fd: int32(fd), Events: unix.POLLIN}}
		for {
			if _, perr = unix.Poll(fds, -1); perr != unix.EINTR {
				return
			}
		}
	})
	if err == nil {
		err = perr
	}
	if err != nil {
		t.Fatal(err)
	}
}
