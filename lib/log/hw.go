package log

import (
	"fmt"
	"path/filepath"
)

// CheckpointHighWatermark records hw, the partition's high-water mark, for
// the next Open (HighWatermarkCheckpoint). The log does not know the
// high-water mark: the replica owns it, and a broker loop checkpoints it
// periodically (replica.high.watermark.checkpoint.interval.ms) and on
// close.
//
// With Options.Checkpoints the value goes there, in memory; their owner
// writes them (Checkpoints.Write), except that a value below the one
// their file holds is written at once. Without them it
// is written to the log's high-water-mark-checkpoint file (atomically,
// fsynced) when it differs from the value the file holds. It may be called
// concurrently with every other method; after Close it fails with
// ErrClosed.
func (l *Log) CheckpointHighWatermark(hw int64) error {
	if hw < 0 {
		return fmt.Errorf("log: checkpoint high-water mark %d: negative", hw)
	}
	l.hwMu.Lock()
	defer l.hwMu.Unlock()
	if hw == l.hwCheckpointed {
		return nil
	}
	l.mu.RLock()
	closed := l.closed
	l.mu.RUnlock()
	if closed {
		return ErrClosed
	}
	if c := l.ckpts; c != nil {
		if c.update(filepath.Base(l.dir), func(e *logCheckpoint) { e.highWatermark, e.owner = hw, l.owner }) {
			if err := c.Write(); err != nil {
				return err
			}
		}
		l.hwCheckpointed = hw
		return nil
	}
	if err := l.writeAtomic(highWatermarkFile, encodeOffsetCheckpoint("high-water-mark", hw)); err != nil {
		return fmt.Errorf("log: %w", err)
	}
	l.hwCheckpointed = hw
	return nil
}

// HighWatermarkCheckpoint returns the high-water mark the checkpoint held
// when the log was opened, -1 when there was none (or it could not be
// parsed). It is not clamped to the log: after a crash the log may end
// below it, and the caller clamps.
func (l *Log) HighWatermarkCheckpoint() int64 { return l.hwAtOpen }
