package log

import "fmt"

// CheckpointHighWatermark writes hw, the partition's high-water mark, to
// the high-water-mark-checkpoint file (atomically, fsynced) when it differs
// from the value the file holds. The log does not know the high-water mark:
// the replica owns it, and a broker loop checkpoints it periodically
// (replica.high.watermark.checkpoint.interval.ms) and on close. It may be
// called concurrently with every other method; after Close it fails with
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
