package crashfs

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"maps"
	"os"
	"path"
	"slices"
	"strings"
	"sync"
	"syscall"
	"testing"

	"github.com/mqproject/mq/lib/vfs"
)

// fsContents lists every file and directory of fsys under the root: path
// → contents, "/" for a directory.
func fsContents(t testing.TB, fsys vfs.FS) map[string]string {
	t.Helper()
	out := map[string]string{}
	var walk func(dir string)
	walk = func(dir string) {
		entries, err := fsys.ReadDir(dir)
		if err != nil {
			t.Fatalf("readdir %s: %v", dir, err)
		}
		for _, e := range entries {
			p := path.Join(dir, e.Name())
			if e.IsDir() {
				out[p] = "/"
				walk(p)
				continue
			}
			b, err := vfs.ReadFile(fsys, p)
			if err != nil {
				t.Fatalf("read %s: %v", p, err)
			}
			out[p] = string(b)
		}
	}
	walk("/")
	return out
}

// fsStep is one operation of a test script.
type fsStep func(t testing.TB, fsys *FS)

func write(name string, off int64, data string) fsStep {
	return func(t testing.TB, fsys *FS) {
		t.Helper()
		f, err := fsys.OpenFile(name, os.O_RDWR|os.O_CREATE, 0o644)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := f.WriteAt([]byte(data), off); err != nil {
			t.Fatal(err)
		}
		if err := f.Close(); err != nil {
			t.Fatal(err)
		}
	}
}

func truncate(name string, size int64) fsStep {
	return func(t testing.TB, fsys *FS) {
		t.Helper()
		f, err := fsys.OpenFile(name, os.O_RDWR, 0)
		if err != nil {
			t.Fatal(err)
		}
		if err := f.Truncate(size); err != nil {
			t.Fatal(err)
		}
		f.Close()
	}
}

func fsync(name string) fsStep {
	return func(t testing.TB, fsys *FS) {
		t.Helper()
		if err := vfs.SyncDir(fsys, name); err != nil { // any file: SyncDir only opens and syncs
			t.Fatal(err)
		}
	}
}

func rename(from, to string) fsStep {
	return func(t testing.TB, fsys *FS) {
		t.Helper()
		if err := fsys.Rename(from, to); err != nil {
			t.Fatal(err)
		}
	}
}

func remove(name string) fsStep {
	return func(t testing.TB, fsys *FS) {
		t.Helper()
		if err := fsys.Remove(name); err != nil {
			t.Fatal(err)
		}
	}
}

func mkdirAll(name string) fsStep {
	return func(t testing.TB, fsys *FS) {
		t.Helper()
		if err := fsys.MkdirAll(name, 0o755); err != nil {
			t.Fatal(err)
		}
	}
}

// durableFile is the steps that make a file at a new name durable.
func durableFile(name, data string) []fsStep {
	return []fsStep{write(name, 0, data), fsync(name), fsync(path.Dir(name))}
}

func TestCrashKeepsOnlyWhatWasSynced(t *testing.T) {
	for _, tc := range []struct {
		name  string
		steps []fsStep
		want  map[string]string // after a strict crash
	}{
		{"unsynced write to a new file is lost with the file", []fsStep{write("/a", 0, "x")}, map[string]string{}},
		{"synced file without a directory fsync is lost", []fsStep{write("/a", 0, "x"), fsync("/a")}, map[string]string{}},
		{"directory fsync without a file fsync keeps the file empty", []fsStep{write("/a", 0, "x"), fsync("/")}, map[string]string{"/a": ""}},
		{"file and directory synced", durableFile("/a", "hello"), map[string]string{"/a": "hello"}},
		{"unsynced write after a sync is lost", append(durableFile("/a", "hello"), write("/a", 5, " world"), write("/a", 0, "J")),
			map[string]string{"/a": "hello"}},
		{"write synced after the directory", append(durableFile("/a", "hello"), write("/a", 5, " world"), fsync("/a")),
			map[string]string{"/a": "hello world"}},
		{"write past the end leaves a hole of zeros", append(durableFile("/a", "ab"), write("/a", 4, "c"), fsync("/a")),
			map[string]string{"/a": "ab\x00\x00c"}},
		{"unsynced truncation reverts", append(durableFile("/a", "hello"), truncate("/a", 2)), map[string]string{"/a": "hello"}},
		{"synced truncation stays", append(durableFile("/a", "hello"), truncate("/a", 2), fsync("/a")), map[string]string{"/a": "he"}},
		{"truncation then rewrite synced", append(durableFile("/a", "hello"), truncate("/a", 1), write("/a", 1, "ELP"), fsync("/a")),
			map[string]string{"/a": "hELP"}},
		{"rename without a directory fsync reverts", append(append(durableFile("/a", "old"), durableFile("/a.tmp", "new")...), rename("/a.tmp", "/a")),
			map[string]string{"/a": "old", "/a.tmp": "new"}},
		{"rename with a directory fsync stays", append(append(durableFile("/a", "old"), durableFile("/a.tmp", "new")...), rename("/a.tmp", "/a"), fsync("/")),
			map[string]string{"/a": "new"}},
		{"rename of an unsynced file leaves an empty one", append(durableFile("/a", "old"), write("/a.tmp", 0, "new"), rename("/a.tmp", "/a"), fsync("/")),
			map[string]string{"/a": ""}},
		{"remove without a directory fsync reappears", append(durableFile("/a", "x"), remove("/a")), map[string]string{"/a": "x"}},
		{"remove with a directory fsync stays", append(durableFile("/a", "x"), remove("/a"), fsync("/")), map[string]string{}},
		{"new directory without the parent's fsync is lost", []fsStep{mkdirAll("/d/e"), write("/d/e/f", 0, "x"), fsync("/d/e/f"), fsync("/d/e"), fsync("/d")},
			map[string]string{}},
		{"new directory with every parent synced", []fsStep{mkdirAll("/d/e"), write("/d/e/f", 0, "x"), fsync("/d/e/f"), fsync("/d/e"), fsync("/d"), fsync("/")},
			map[string]string{"/d": "/", "/d/e": "/", "/d/e/f": "x"}},
		{"new directory synced only in its parent is empty", []fsStep{mkdirAll("/d"), write("/d/f", 0, "x"), fsync("/d/f"), fsync("/")},
			map[string]string{"/d": "/"}},
		{"directory entries durable one directory at a time", []fsStep{mkdirAll("/d"), fsync("/"), write("/d/f", 0, "x"), write("/g", 0, "y"),
			fsync("/d/f"), fsync("/g"), fsync("/")}, map[string]string{"/d": "/", "/g": "y"}},
		{"rename across directories needs both fsyncs", []fsStep{mkdirAll("/d"), mkdirAll("/e"), fsync("/"), write("/d/f", 0, "x"), fsync("/d/f"), fsync("/d"),
			rename("/d/f", "/e/f"), fsync("/e")}, map[string]string{"/d": "/", "/e": "/", "/d/f": "x", "/e/f": "x"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			fsys := New(Strict, 1)
			for _, step := range tc.steps {
				step(t, fsys)
			}
			before := fsContents(t, fsys)
			got := fsContents(t, fsys.Crash())
			if !maps.Equal(got, tc.want) {
				t.Fatalf("after the crash %q, want %q", got, tc.want)
			}
			if after := fsContents(t, fsys); !maps.Equal(after, before) {
				t.Fatalf("the crash changed the crashed file system: %q, was %q", after, before)
			}
		})
	}
}

// TestTornCrashKeepsPrefixes crashes the same history under many seeds
// and checks that every outcome is the synced state plus a prefix of the
// unsynced writes, the last maybe torn, and that each kind of outcome
// occurs.
func TestTornCrashKeepsPrefixes(t *testing.T) {
	writes := []string{"aaaa", "bbbb", "cccc"}
	// Every file state a crash may leave: "base" plus k whole writes,
	// then maybe part of the next one and maybe zeros after that part.
	legal := map[string]string{}
	cur := "base"
	for k, w := range writes {
		legal[cur] = fmt.Sprintf("%d writes", k)
		for cut := range len(w) {
			legal[cur+w[:cut]+strings.Repeat("\x00", len(w)-cut)] = fmt.Sprintf("write %d torn, zeros", k)
			if cut > 0 {
				legal[cur+w[:cut]] = fmt.Sprintf("write %d torn", k)
			}
		}
		cur += w
	}
	legal[cur] = "all writes"
	seen := map[string]bool{}
	for seed := range uint64(400) {
		fsys := New(Torn, seed)
		for _, step := range durableFile("/f", "base") {
			step(t, fsys)
		}
		off := int64(4)
		for _, w := range writes {
			write("/f", off, w)(t, fsys)
			off += int64(len(w))
		}
		write("/new", 0, "n")(t, fsys)
		got := fsContents(t, fsys.Crash())
		kind, ok := legal[got["/f"]]
		if !ok {
			t.Fatalf("seed %d: /f is %q, not the synced state plus a prefix of the writes", seed, got["/f"])
		}
		seen[kind] = true
		if n, ok := got["/new"]; ok {
			seen["new file kept"] = true
			if n != "" && n != "n" && n != "\x00" {
				t.Fatalf("seed %d: /new is %q", seed, n)
			}
		}
	}
	for _, kind := range []string{"0 writes", "1 writes", "all writes", "write 1 torn", "write 2 torn, zeros", "new file kept"} {
		if !seen[kind] {
			t.Errorf("no crash gave %q (saw %v)", kind, slices.Sorted(maps.Keys(seen)))
		}
	}
}

func TestCrashAfterOperations(t *testing.T) {
	steps := []fsStep{write("/a", 0, "1"), fsync("/a"), fsync("/"), write("/a", 1, "2"), fsync("/a")}
	want := []string{"", "", "", "", "1", "1", "12"} // /a after a crash after k operations
	for k := range len(want) {
		fsys := New(Strict, 1)
		fsys.CrashAfter(int64(k))
		for _, step := range steps {
			step(t, fsys)
		}
		crashed := fsys.Crashed()
		if k == len(want)-1 {
			if crashed != nil {
				t.Fatalf("crash after %d of %d operations happened", k, k)
			}
			crashed = fsys.Crash()
		}
		if crashed == nil {
			t.Fatalf("no crash after %d operations", k)
		}
		if got := fsContents(t, crashed)["/a"]; got != want[k] {
			t.Errorf("crash after %d operations: /a is %q, want %q", k, got, want[k])
		}
	}
}

func TestBehavesLikeAFileSystem(t *testing.T) {
	fsys := New(Strict, 1)
	notExist := func(err error) {
		t.Helper()
		if !errors.Is(err, os.ErrNotExist) {
			t.Fatalf("error %v, want not exist", err)
		}
	}
	_, err := fsys.OpenFile("/d/a", os.O_RDWR|os.O_CREATE, 0o644)
	notExist(err)
	_, err = fsys.Stat("/nope")
	notExist(err)
	notExist(fsys.Remove("/nope"))
	notExist(fsys.Rename("/nope", "/b"))
	if err := fsys.MkdirAll("/d", 0o755); err != nil {
		t.Fatal(err)
	}
	f, err := fsys.OpenFile("/d/a", os.O_RDWR|os.O_CREATE|os.O_EXCL, 0o644)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := fsys.OpenFile("/d/a", os.O_RDWR|os.O_CREATE|os.O_EXCL, 0o644); !errors.Is(err, os.ErrExist) {
		t.Fatalf("O_EXCL on an existing file: %v", err)
	}
	if _, err := f.WriteAt([]byte("hello"), 0); err != nil {
		t.Fatal(err)
	}
	buf := make([]byte, 10)
	if n, err := f.ReadAt(buf, 3); n != 2 || err != io.EOF || string(buf[:2]) != "lo" {
		t.Fatalf("short read: %d %v %q", n, err, buf[:n])
	}
	if fi, err := fsys.Stat("/d/a"); err != nil || fi.Size() != 5 || fi.IsDir() || fi.Name() != "a" {
		t.Fatalf("stat: %v %v", fi, err)
	}
	if fi, err := fsys.Stat("/d"); err != nil || !fi.IsDir() {
		t.Fatalf("stat of a directory: %v %v", fi, err)
	}
	if err := fsys.Remove("/d"); !errors.Is(err, syscall.ENOTEMPTY) {
		t.Fatalf("remove of a non-empty directory: %v", err)
	}
	if _, err := fsys.OpenFile("/d", os.O_RDWR, 0); !errors.Is(err, syscall.EISDIR) {
		t.Fatalf("directory opened for writing: %v", err)
	}
	// An open file outlives its name.
	if err := fsys.Remove("/d/a"); err != nil {
		t.Fatal(err)
	}
	if n, err := f.ReadAt(buf[:5], 0); n != 5 || err != nil || string(buf[:5]) != "hello" {
		t.Fatalf("read after remove: %d %v", n, err)
	}
	if err := f.Close(); err != nil {
		t.Fatal(err)
	}
	if _, err := f.ReadAt(buf, 0); !errors.Is(err, os.ErrClosed) {
		t.Fatalf("read after close: %v", err)
	}
	ro, err := fsys.OpenFile("/d", os.O_RDONLY, 0)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := ro.WriteAt([]byte("x"), 0); err == nil {
		t.Fatal("wrote to a directory")
	}
	ro.Close()
	for _, name := range []string{"/d/c", "/d/b", "/d/a"} {
		write(name, 0, name)(t, fsys)
	}
	rename("/d/c", "/d/b")(t, fsys)
	entries, err := fsys.ReadDir("/d")
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, e := range entries {
		names = append(names, e.Name())
	}
	if !slices.Equal(names, []string{"a", "b"}) {
		t.Fatalf("readdir %v", names)
	}
	if got := fsContents(t, fsys)["/d/b"]; got != "/d/c" {
		t.Fatalf("renamed over: %q", got)
	}
	if _, err := fsys.OpenFile("/d/a", os.O_RDWR|os.O_APPEND, 0); err == nil {
		t.Fatal("O_APPEND accepted")
	}
}

func TestSizeLimit(t *testing.T) {
	fsys := New(Strict, 1)
	fsys.SetSizeLimit(10)
	f, err := fsys.OpenFile("/a", os.O_RDWR|os.O_CREATE, 0o644)
	if err != nil {
		t.Fatal(err)
	}
	if n, err := f.WriteAt([]byte("12345678"), 0); n != 8 || err != nil {
		t.Fatalf("write: %d %v", n, err)
	}
	if n, err := f.WriteAt([]byte("abcd"), 8); n != 2 || !errors.Is(err, syscall.ENOSPC) {
		t.Fatalf("write past the limit: %d %v, want 2, ENOSPC", n, err)
	}
	if n, err := f.WriteAt([]byte("xy"), 0); n != 2 || err != nil {
		t.Fatalf("overwrite on a full disk: %d %v", n, err)
	}
	if err := f.Truncate(11); !errors.Is(err, syscall.ENOSPC) {
		t.Fatalf("truncate past the limit: %v", err)
	}
	// Space comes back with truncation and removal.
	if err := f.Truncate(4); err != nil {
		t.Fatal(err)
	}
	write("/b", 0, "123456")(t, fsys)
	if err := fsys.Remove("/a"); err != nil {
		t.Fatal(err)
	}
	write("/c", 0, "abcd")(t, fsys)
	f.Close()
}

// TestCrashDuringWrites crashes while goroutines write, sync and
// rename: every crash must see whole operations, and the crashed file
// system goes on working.
func TestCrashDuringWrites(t *testing.T) {
	fsys := New(Torn, 7)
	if err := fsys.MkdirAll("/d", 0o755); err != nil {
		t.Fatal(err)
	}
	fsync("/")(t, fsys)
	var wg sync.WaitGroup
	stop := make(chan struct{})
	for g := range 4 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			name := fmt.Sprintf("/d/f%d", g)
			for i := 0; ; i++ {
				select {
				case <-stop:
					return
				default:
				}
				if err := vfs.WriteFileAtomic(fsys, name, bytes.Repeat([]byte{byte('a' + i%26)}, 100), 0o644); err != nil {
					t.Error(err)
					return
				}
			}
		}()
	}
	for range 20 {
		crashed := fsys.Crash()
		for p, b := range fsContents(t, crashed) {
			// A checkpoint is old or new, never a mix; a temporary file
			// may be anything the writes made.
			if strings.HasSuffix(p, ".tmp") || b == "/" {
				continue
			}
			if len(b) != 100 || strings.Count(b, b[:1]) != 100 {
				t.Fatalf("%s after a crash: %q", p, b)
			}
		}
		write("/after", 0, "x")(t, crashed)
	}
	close(stop)
	wg.Wait()
}
