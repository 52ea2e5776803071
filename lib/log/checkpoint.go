package log

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strconv"
	"strings"
)

// Checkpoint file names.
const (
	recoveryPointFile = "recovery-point-offset-checkpoint"
	logStartFile      = "log-start-offset-checkpoint"
	leaderEpochFile   = "leader-epoch-checkpoint"
	producerStateFile = "producer-state"
	highWatermarkFile = "high-water-mark-checkpoint"
	tmpSuffix         = ".tmp"
)

// Text checkpoints start with the line "mq <kind> <version>". An offset
// checkpoint then holds one line with the offset. The leader-epoch
// checkpoint holds a line with the number of entries and one
// "<epoch> <start offset>" line per entry.
const checkpointVersion = 1

// writeFileAtomic replaces dir/name with data: it writes a temporary file,
// fsyncs it, renames it over name and fsyncs the directory, so a crash
// leaves either the old or the new contents.
func writeFileAtomic(fsys FS, dir, name string, data []byte) error {
	path := filepath.Join(dir, name)
	tmp := path + tmpSuffix
	f, err := fsys.OpenFile(tmp, os.O_RDWR|os.O_CREATE|os.O_TRUNC, 0o644)
	if err != nil {
		return fmt.Errorf("write %s: %w", name, err)
	}
	n, err := f.WriteAt(data, 0)
	if err == nil && n != len(data) {
		err = io.ErrShortWrite
	}
	if err == nil {
		err = f.Sync()
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		err = fsys.Rename(tmp, path)
	}
	if err == nil {
		err = syncDir(fsys, dir)
	}
	if err != nil {
		_ = fsys.Remove(tmp)
		return fmt.Errorf("write %s: %w", name, err)
	}
	return nil
}

// mkdirAllDurable is MkdirAll whose new directories survive a crash: it
// fsyncs the parent of each directory it creates, and the parent of dir
// always, since an earlier process may have created dir and died before
// that fsync.
func mkdirAllDurable(fsys FS, dir string) error {
	var created []string
	for d := filepath.Clean(dir); ; d = filepath.Dir(d) {
		if _, err := fsys.Stat(d); err == nil {
			break
		} else if !errors.Is(err, os.ErrNotExist) {
			return err
		}
		created = append(created, d)
		if filepath.Dir(d) == d {
			break
		}
	}
	if err := fsys.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	if len(created) == 0 {
		created = []string{filepath.Clean(dir)}
	}
	for _, d := range created {
		if err := syncDir(fsys, filepath.Dir(d)); err != nil {
			return err
		}
	}
	return nil
}

func syncDir(fsys FS, dir string) error {
	d, err := fsys.OpenFile(dir, os.O_RDONLY, 0)
	if err != nil {
		return err
	}
	err = d.Sync()
	if cerr := d.Close(); err == nil {
		err = cerr
	}
	return err
}

// readFile returns the contents of path; a missing file is an error
// satisfying errors.Is(err, os.ErrNotExist).
func readFile(fsys FS, path string) ([]byte, error) {
	f, err := fsys.OpenFile(path, os.O_RDONLY, 0)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	fi, err := f.Stat()
	if err != nil {
		return nil, err
	}
	b := make([]byte, fi.Size())
	n, err := f.ReadAt(b, 0)
	if err != nil && !(errors.Is(err, io.EOF) && n == len(b)) {
		return nil, err
	}
	return b[:n], nil
}

func checkpointHeader(kind string) string {
	return fmt.Sprintf("mq %s %d\n", kind, checkpointVersion)
}

func encodeOffsetCheckpoint(kind string, offset int64) []byte {
	return []byte(checkpointHeader(kind) + strconv.FormatInt(offset, 10) + "\n")
}

// checkpointLines checks the header of a text checkpoint and returns its
// other lines.
func checkpointLines(kind string, b []byte) ([]string, error) {
	s := string(b)
	head := checkpointHeader(kind)
	if !strings.HasPrefix(s, head) {
		first, _, _ := strings.Cut(s, "\n")
		return nil, fmt.Errorf("bad %s checkpoint header %q", kind, first)
	}
	s = strings.TrimPrefix(s, head)
	if !strings.HasSuffix(s, "\n") {
		return nil, fmt.Errorf("%s checkpoint: missing final newline", kind)
	}
	return strings.Split(strings.TrimSuffix(s, "\n"), "\n"), nil
}

func decodeOffsetCheckpoint(kind string, b []byte) (int64, error) {
	lines, err := checkpointLines(kind, b)
	if err != nil {
		return 0, err
	}
	if len(lines) != 1 {
		return 0, fmt.Errorf("%s checkpoint: %d lines, want 1", kind, len(lines))
	}
	off, err := strconv.ParseInt(lines[0], 10, 64)
	if err != nil || off < 0 {
		return 0, fmt.Errorf("%s checkpoint: bad offset %q", kind, lines[0])
	}
	return off, nil
}

func encodeEpochCheckpoint(entries []EpochEntry) []byte {
	var b bytes.Buffer
	b.WriteString(checkpointHeader("leader-epoch"))
	fmt.Fprintf(&b, "%d\n", len(entries))
	for _, e := range entries {
		fmt.Fprintf(&b, "%d %d\n", e.Epoch, e.StartOffset)
	}
	return b.Bytes()
}

func decodeEpochCheckpoint(b []byte) ([]EpochEntry, error) {
	lines, err := checkpointLines("leader-epoch", b)
	if err != nil {
		return nil, err
	}
	n, err := strconv.Atoi(lines[0])
	if err != nil || n != len(lines)-1 {
		return nil, fmt.Errorf("leader-epoch checkpoint: bad count %q for %d entries", lines[0], len(lines)-1)
	}
	entries := make([]EpochEntry, 0, n)
	for _, line := range lines[1:] {
		es, os, ok := strings.Cut(line, " ")
		epoch, err1 := strconv.ParseInt(es, 10, 32)
		start, err2 := strconv.ParseInt(os, 10, 64)
		if !ok || err1 != nil || err2 != nil || epoch < 0 || start < 0 {
			return nil, fmt.Errorf("leader-epoch checkpoint: bad entry %q", line)
		}
		if k := len(entries); k > 0 && (int32(epoch) <= entries[k-1].Epoch || start < entries[k-1].StartOffset) {
			return nil, fmt.Errorf("leader-epoch checkpoint: entry %q out of order", line)
		}
		entries = append(entries, EpochEntry{Epoch: int32(epoch), StartOffset: start})
	}
	return entries, nil
}
