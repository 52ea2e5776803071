package pipe

import (
	"context"
	"errors"
	"os"
	"syscall"
	"testing"
	"time"
)

// waitCause waits (up to a deadline) for ctx to be cancelled and returns
// its cause, or nil at the deadline.
func waitCause(t *testing.T, ctx context.Context, deadline time.Duration) error {
	t.Helper()
	select {
	case <-ctx.Done():
		return context.Cause(ctx)
	case <-time.After(deadline):
		return nil
	}
}

func TestWatchOutputCancelsWhenThePipeReaderCloses(t *testing.T) {
	r, w, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	defer w.Close()
	ctx, cancel := context.WithCancelCause(context.Background())
	defer cancel(nil)
	stop := watchOutput(w, cancel)
	defer stop()
	if _, err := w.Write([]byte("a line\n")); err != nil {
		t.Fatal(err)
	}
	r.Close()
	if err := waitCause(t, ctx, 10*time.Second); !errors.Is(err, errOutputClosed) {
		t.Fatalf("closing the pipe's read end: cause %v, want errOutputClosed", err)
	}
}

func TestWatchOutputCancelsWhenTheSocketPeerCloses(t *testing.T) {
	fds, err := syscall.Socketpair(syscall.AF_UNIX, syscall.SOCK_STREAM, 0)
	if err != nil {
		t.Fatal(err)
	}
	out, peer := os.NewFile(uintptr(fds[0]), "out"), os.NewFile(uintptr(fds[1]), "peer")
	defer out.Close()
	ctx, cancel := context.WithCancelCause(context.Background())
	defer cancel(nil)
	stop := watchOutput(out, cancel)
	defer stop()
	peer.Close()
	if err := waitCause(t, ctx, 10*time.Second); !errors.Is(err, errOutputClosed) {
		t.Fatalf("closing the socket's peer: cause %v, want errOutputClosed", err)
	}
}

// An output that is still read, a file and /dev/null are not taken for
// closed: the watch ends only when stopped.
func TestWatchOutputLeavesOpenOutputsAlone(t *testing.T) {
	r, w, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	defer w.Close()
	f, err := os.Create(t.TempDir() + "/out")
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	null, err := os.OpenFile(os.DevNull, os.O_WRONLY, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer null.Close()
	for name, out := range map[string]*os.File{"pipe": w, "file": f, "/dev/null": null} {
		ctx, cancel := context.WithCancelCause(context.Background())
		stop := watchOutput(out, cancel)
		if _, err := out.Write([]byte("x\n")); err != nil {
			t.Fatal(err)
		}
		stop() // returns: the watch ends when stopped
		if ctx.Err() != nil {
			t.Errorf("%s: taken for closed: %v", name, context.Cause(ctx))
		}
		cancel(nil)
	}
}
