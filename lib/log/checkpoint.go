package log

import (
	"bytes"
	"fmt"
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
)

// Text checkpoints start with the line "mq <kind> <version>". An offset
// checkpoint then holds one line with the offset. The leader-epoch
// checkpoint holds a line with the number of entries and one
// "<epoch> <start offset>" line per entry.
const checkpointVersion = 1

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
