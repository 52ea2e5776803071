package log

// EpochEntry is one entry of the leader-epoch history: the first offset
// written by a leader in Epoch.
type EpochEntry struct {
	Epoch       int32
	StartOffset int64
}

// epochCache is the leader-epoch history, epochs and start offsets
// increasing. Guarded by Log.mu.
type epochCache struct {
	entries []EpochEntry
}

// assign records that epoch starts at offset, when epoch is newer than the
// latest entry. It reports whether the history changed.
func (c *epochCache) assign(epoch int32, offset int64) bool {
	if epoch < 0 {
		return false
	}
	if n := len(c.entries); n > 0 {
		last := c.entries[n-1]
		if epoch <= last.Epoch {
			return false
		}
		if offset < last.StartOffset {
			offset = last.StartOffset
		}
	}
	c.entries = append(c.entries, EpochEntry{Epoch: epoch, StartOffset: offset})
	return true
}

// truncateFrom removes the entries starting at or after end.
func (c *epochCache) truncateFrom(end int64) bool {
	n := len(c.entries)
	for n > 0 && c.entries[n-1].StartOffset >= end {
		n--
	}
	changed := n != len(c.entries)
	c.entries = c.entries[:n:n]
	return changed
}

// truncateBefore drops the history below start: entries wholly below it go,
// and the entry covering start is moved to begin there.
func (c *epochCache) truncateBefore(start int64) bool {
	i := 0
	for i+1 < len(c.entries) && c.entries[i+1].StartOffset <= start {
		i++
	}
	changed := false
	if i > 0 {
		c.entries = append([]EpochEntry(nil), c.entries[i:]...)
		changed = true
	}
	if len(c.entries) > 0 && c.entries[0].StartOffset < start {
		c.entries[0].StartOffset = start
		changed = true
	}
	return changed
}

func (c *epochCache) latest() int32 {
	if len(c.entries) == 0 {
		return -1
	}
	return c.entries[len(c.entries)-1].Epoch
}

// endOffsetFor answers OffsetForLeaderEpoch: the end offset of epoch (the
// start of the next larger epoch, or logEnd for the latest) and the largest
// epoch ≤ the requested one. An epoch above the latest, or no history,
// gives (-1, -1); one below the first gives (first start, requested).
func (c *epochCache) endOffsetFor(epoch int32, logEnd int64) (int64, int32) {
	n := len(c.entries)
	if n == 0 || epoch < 0 {
		return -1, -1
	}
	if epoch == c.entries[n-1].Epoch {
		return logEnd, epoch
	}
	// First entry with a larger epoch.
	i := 0
	for i < n && c.entries[i].Epoch <= epoch {
		i++
	}
	if i == n {
		return -1, -1
	}
	if i == 0 {
		return c.entries[0].StartOffset, epoch
	}
	return c.entries[i].StartOffset, c.entries[i-1].Epoch
}

// epochFor returns the epoch of the entry covering offset, -1 when none
// does (offset below the history).
func (c *epochCache) epochFor(offset int64) int32 {
	e := int32(-1)
	for _, entry := range c.entries {
		if entry.StartOffset > offset {
			break
		}
		e = entry.Epoch
	}
	return e
}

// impossible reports whether a batch at offset carrying epoch cannot have
// been written by this log: its epoch is negative, or newer than the entry
// covering offset (appending it would have started an entry there). The
// CRC does not cover the epoch: this is its only check. An older epoch is
// let through: the log accepts appends with one (a caller's choice), so it
// is no proof of damage.
func (c *epochCache) impossible(epoch int32, offset int64) bool {
	want := c.epochFor(offset)
	return want >= 0 && epoch != want && (epoch < 0 || epoch > want)
}

// BeginEpoch records that leader epoch begins at the log end offset, before
// anything is appended in it, and checkpoints the history. A new leader
// calls it so that OffsetForLeaderEpoch (EndOffsetForEpoch) answers for its
// epoch at once: a follower asking about an older epoch learns where that
// epoch ended even when this leader has written nothing since. An epoch not
// newer than the latest in the history changes nothing.
//
// Such an epoch, with nothing appended in it yet, does not survive a
// restart: recovery rebuilds the end of the history from the batches, and
// cannot tell it from an epoch whose first batch a crash lost. The leader
// begins it again when it takes up its leadership after the restart.
func (l *Log) BeginEpoch(epoch int32) error {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.closed {
		return ErrClosed
	}
	l.assignEpochLocked(epoch, l.end)
	return nil
}

// LatestEpoch returns the latest epoch of the leader-epoch history, -1 when
// it is empty: what a follower asks its leader about with
// OffsetForLeaderEpoch.
func (l *Log) LatestEpoch() int32 {
	l.mu.RLock()
	defer l.mu.RUnlock()
	return l.epochs.latest()
}
