package e2e

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/mqproject/mq/lib/mqtest"
)

// runAs prepares mqd to run as uid with args, killed when ctx ends: a
// copy of the binary that uid may execute, and a data directory it owns.
func runAs(t *testing.T, ctx context.Context, uid int, args ...string) *exec.Cmd {
	t.Helper()
	if os.Geteuid() != 0 {
		t.Skip("running mqd as another user needs root")
	}
	// Directories right under /tmp: t.TempDir's parent is root's alone.
	tempDir := func() string {
		d, err := os.MkdirTemp("", "mq-e2e-as-")
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { os.RemoveAll(d) })
		return d
	}
	bin := tempDir()
	if err := os.Chmod(bin, 0o755); err != nil {
		t.Fatal(err)
	}
	data, err := os.ReadFile(mqdPath)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(bin, "mqd"), data, 0o755); err != nil {
		t.Fatal(err)
	}
	dataDir := tempDir()
	if err := os.Chown(dataDir, uid, uid); err != nil {
		t.Fatal(err)
	}
	cmd := exec.CommandContext(ctx, filepath.Join(bin, "mqd"), append([]string{"--data-dir", dataDir}, args...)...)
	// No XDG_RUNTIME_DIR nor MQ_SOCKET: the socket goes to /tmp/mq-$UID.
	cmd.Env = []string{"PATH=/usr/bin:/bin", "HOME=" + dataDir}
	cmd.SysProcAttr = &syscall.SysProcAttr{Credential: &syscall.Credential{Uid: uint32(uid), Gid: uint32(uid)}}
	return cmd
}

// Finding: a non-root mqd without XDG_RUNTIME_DIR used /tmp/mq-$UID even
// when another user had created it, and that user swapped in their own
// socket. Now mqd refuses such a directory (and one writable by group or
// others) with one line on stderr and exit status 2; a missing one it
// creates 0700 and serves in.
func TestSocketDirectoryOfAnotherUserIsRefused(t *testing.T) {
	uid := 40000 + os.Getpid()%10000
	dir := "/tmp/mq-" + strconv.Itoa(uid)
	os.RemoveAll(dir)
	t.Cleanup(func() { os.RemoveAll(dir) })

	// Another user got there first, and left the directory open so that
	// our mqd could make its socket there, for them to swap.
	if err := os.Mkdir(dir, 0o777); err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(dir, 0o777); err != nil {
		t.Fatal(err)
	}
	if err := os.Chown(dir, uid+1, uid+1); err != nil {
		t.Fatal(err)
	}
	refused := func(what string) {
		t.Helper()
		// The default listeners: the socket in dir first. An mqd that
		// serves instead is killed at the deadline.
		cmd := runAs(t, ctxFor(t, time.Minute), uid)
		var stderr strings.Builder
		cmd.Stderr = &stderr
		err := cmd.Run()
		var exit *exec.ExitError
		if !errors.As(err, &exit) || exit.ExitCode() != 2 {
			t.Fatalf("%s: mqd exited %v, want status 2\n%s", what, err, stderr.String())
		}
		lines := strings.Split(strings.TrimSpace(stderr.String()), "\n")
		last := lines[len(lines)-1]
		if !strings.HasPrefix(last, "mqd: ") || !strings.Contains(last, "socket directory "+dir) {
			t.Fatalf("%s: last line of stderr %q, want mqd: ... socket directory %s ...", what, last, dir)
		}
		if _, err := os.Lstat(filepath.Join(dir, "mqd.sock")); err == nil {
			t.Fatalf("%s: mqd made its socket in %s", what, dir)
		}
	}
	refused("owned by another user")
	// Ours, but writable by others.
	if err := os.Chown(dir, uid, uid); err != nil {
		t.Fatal(err)
	}
	refused("writable by others")

	// Missing: mqd creates it 0700 and serves.
	if err := os.RemoveAll(dir); err != nil {
		t.Fatal(err)
	}
	cmd := runAs(t, context.Background(), uid, "--listen", "unix://"+dir+"/mqd.sock", "--listen", "tcp://127.0.0.1:0")
	var stderr lockedBuffer
	cmd.Stderr = &stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	exited := make(chan error, 1)
	go func() { exited <- cmd.Wait() }()
	t.Cleanup(func() {
		cmd.Process.Signal(syscall.SIGTERM)
		select {
		case <-exited:
		case <-time.After(30 * time.Second):
			cmd.Process.Kill()
			<-exited
		}
	})
	mqtest.WaitFor(t, "mqd to serve on its socket", func() (bool, string) {
		select {
		case err := <-exited:
			exited <- err
			t.Fatalf("mqd exited: %v\n%s", err, stderr.String())
		default:
		}
		_, err := os.Lstat(filepath.Join(dir, "mqd.sock"))
		return err == nil && strings.Contains(stderr.String(), "mqd serving"), fmt.Sprint(err)
	})
	fi, err := os.Stat(dir)
	if err != nil {
		t.Fatal(err)
	}
	st := fi.Sys().(*syscall.Stat_t)
	if fi.Mode().Perm() != 0o700 || int(st.Uid) != uid {
		t.Fatalf("socket directory mode %04o owner %d, want 0700 and %d", fi.Mode().Perm(), st.Uid, uid)
	}
}

// Finding: an existing data directory kept mode 0755, leaving the message
// files readable by every user. mqd warns at start about one others may
// read or enter, and creates a missing one 0750.
func TestDataDirectoryOpenToOthersIsWarnedAbout(t *testing.T) {
	open := t.TempDir()
	if err := os.Chmod(open, 0o755); err != nil {
		t.Fatal(err)
	}
	b := startBroker(t, brokerOpts{dataDir: open})
	if log := b.stderr.String(); !strings.Contains(log, "data directory is open to other users") || !strings.Contains(log, "mode=0755") {
		t.Fatalf("no warning about the data directory of mode 0755:\n%s", tail(log, 20))
	}

	fresh := filepath.Join(t.TempDir(), "new", "data")
	c := startBroker(t, brokerOpts{dataDir: fresh})
	if strings.Contains(c.stderr.String(), "open to other users") {
		t.Errorf("warned about a data directory mqd created:\n%s", tail(c.stderr.String(), 20))
	}
	fi, err := os.Stat(fresh)
	if err != nil {
		t.Fatal(err)
	}
	if fi.Mode().Perm() != 0o750 {
		t.Fatalf("created data directory mode %04o, want 0750", fi.Mode().Perm())
	}
}
