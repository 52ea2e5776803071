package server

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"syscall"
	"testing"
)

// dialEnv names the socket the re-executed test binary connects to in
// TestUnixPeerDialsAsAnotherUser.
const dialEnv = "MQ_TEST_UNIX_DIAL"

func TestUnixSocketPrincipalIsThePeersUID(t *testing.T) {
	if runtime.GOOS != "linux" {
		t.Skip("SO_PEERCRED is Linux's")
	}
	var seen principals
	s := startServer(t, Config{}, seen.handler())
	tcp, unix := s.Addrs()[0], s.Addrs()[1]

	c := dial(t, unix)
	send(t, c, metadataRequest(9), 1)
	if _, _, err := readFrame(c); err != nil {
		t.Fatal(err)
	}
	if got, want := seen.last(), fmt.Sprintf(`unix tls=false principal="User:uid:%d"`, os.Getuid()); got != want {
		t.Fatalf("handler saw %s, want %s", got, want)
	}
	// TCP carries no credentials: anonymous.
	c = dial(t, tcp)
	send(t, c, metadataRequest(9), 1)
	if _, _, err := readFrame(c); err != nil {
		t.Fatal(err)
	}
	if got, want := seen.last(), `tcp tls=false principal=""`; got != want {
		t.Fatalf("handler saw %s, want %s", got, want)
	}
}

// TestUnixSocketPrincipalOfAnotherUser connects from a child process
// running as another uid (the test binary itself, re-executed), so the
// principal is shown to be the peer's and not the server's own.
func TestUnixSocketPrincipalOfAnotherUser(t *testing.T) {
	if runtime.GOOS != "linux" || os.Getuid() != 0 {
		t.Skip("needs root on Linux to run a child as another uid")
	}
	var seen principals
	s := startServer(t, Config{}, seen.handler())
	unix := s.Addrs()[1]
	// The child must reach the binary and the socket: the test binary's
	// and shortSocketPath's directories are private to root.
	sock := strings.TrimPrefix(unix, "unix://")
	if err := os.Chmod(filepath.Dir(filepath.Dir(sock)), 0o755); err != nil {
		t.Fatal(err)
	}
	// listenUnix made the socket's own directory 0700; 0750 lets group 0
	// in, as an operator would to share the socket with a group.
	if err := os.Chmod(filepath.Dir(sock), 0o750); err != nil {
		t.Fatal(err)
	}
	dir, err := os.MkdirTemp("", "mqpeer")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	if err := os.Chmod(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	bin := filepath.Join(dir, "server.test")
	self, err := os.ReadFile(os.Args[0])
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(bin, self, 0o755); err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(bin, "-test.run=^TestUnixPeerDialsAsAnotherUser$", "-test.count=1")
	cmd.Dir = dir
	cmd.Env = append(os.Environ(), dialEnv+"="+unix)
	// Group 0 may enter the 0750 socket directory and use the 0660 socket.
	cmd.SysProcAttr = &syscall.SysProcAttr{Credential: &syscall.Credential{Uid: 65534, Gid: 0}}
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("child: %v\n%s", err, out)
	}
	if got, want := seen.last(), `unix tls=false principal="User:uid:65534"`; got != want {
		t.Fatalf("handler saw %s, want %s", got, want)
	}
}

// TestUnixPeerDialsAsAnotherUser is the child of
// TestUnixSocketPrincipalOfAnotherUser: one request on the socket it is
// given, then exit.
func TestUnixPeerDialsAsAnotherUser(t *testing.T) {
	addr := os.Getenv(dialEnv)
	if addr == "" {
		t.Skip("run by TestUnixSocketPrincipalOfAnotherUser")
	}
	if !strings.HasPrefix(addr, "unix://") {
		t.Fatalf("%s=%q", dialEnv, addr)
	}
	c := dial(t, addr)
	send(t, c, metadataRequest(9), 1)
	if _, _, err := readFrame(c); err != nil {
		t.Fatal(err)
	}
}
