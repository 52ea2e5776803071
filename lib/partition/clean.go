package partition

import (
	"context"
	"errors"
	"math"
	"sync"
	"time"

	"github.com/mqproject/mq/lib/config"
	"github.com/mqproject/mq/lib/kafkaext"
	"github.com/mqproject/mq/lib/log"
)

// cleanOptions are a pass's options for h under its topic config, with
// dedupe bytes of key map, no further than its high-water mark: what
// consumers may not read yet stays as it is, and so does what an in-sync
// follower may still fetch.
func (m *Manager) cleanOptions(h *Hosted, cfg *config.Topic, dedupe int64) log.CleanOptions {
	millis := func(ms int64) time.Duration {
		if ms >= math.MaxInt64/int64(time.Millisecond) {
			return 0 // Kafka's "forever" (Long.MAX_VALUE): no bound
		}
		return time.Duration(ms) * time.Millisecond
	}
	return log.CleanOptions{
		Now:               m.clock.Now(),
		DeleteRetention:   millis(cfg.DeleteRetentionMS),
		MinCompactionLag:  millis(cfg.MinCompactionLagMS),
		MaxCompactionLag:  millis(cfg.MaxCompactionLagMS),
		DedupeBufferBytes: int(min(dedupe, math.MaxInt32)),
		SegmentBytes:      cfg.SegmentBytes,
		MaxOffset:         h.HighWatermark(),
	}
}

// cleaning is the set of logs a cleaner thread is compacting now.
type cleaning struct {
	mu   sync.Mutex
	busy map[*Hosted]bool
}

// pickCleanable returns the hosted compacted partition that most needs a
// pass and is not being cleaned (marked busy now), or nil: one whose
// oldest dirty records passed max.compaction.lag.ms, or whose tombstones
// passed delete.retention.ms (written to or not), first, else the highest
// dirty ratio at or above its min.cleanable.dirty.ratio.
func (m *Manager) pickCleanable(c *cleaning, dedupe int64) (*Hosted, log.CleanOptions) {
	c.mu.Lock()
	defer c.mu.Unlock()
	var best *Hosted
	var bestOpts log.CleanOptions
	var bestState log.Cleanable
	for _, h := range m.All() {
		cfg := h.Config()
		if c.busy[h] || !cleanupCompacts(cfg.CleanupPolicy) || h.HighWatermark() <= 0 {
			continue
		}
		o := m.cleanOptions(h, cfg, dedupe)
		st, err := h.Log().CleanableState(o)
		if err != nil || !st.TombstonesDue && (st.DirtyBytes <= 0 || !st.MustClean && st.DirtyRatio < cfg.MinCleanableDirtyRatio) {
			continue
		}
		urgent, bestUrgent := st.MustClean || st.TombstonesDue, bestState.MustClean || bestState.TombstonesDue
		if best == nil || urgent && !bestUrgent || urgent == bestUrgent && st.DirtyRatio > bestState.DirtyRatio {
			best, bestOpts, bestState = h, o, st
		}
	}
	if best != nil {
		c.busy[best] = true
	}
	return best, bestOpts
}

// cleanOne runs one pass over h and logs what it did.
func (m *Manager) cleanOne(ctx context.Context, h *Hosted, o log.CleanOptions) {
	res, err := h.Log().Clean(ctx, o)
	switch {
	case err == nil:
		h.cleanerPasses.Add(1)
		h.cleanerReclaimed.Add(max(res.BytesBefore-res.BytesAfter, 0))
		if res.BytesBefore != res.BytesAfter || res.RecordsRemoved > 0 {
			m.log.Info("compacted", "partition", h.String(), "to_offset", res.CleanedTo,
				"bytes_before", res.BytesBefore, "bytes_after", res.BytesAfter,
				"records_removed", res.RecordsRemoved, "tombstones_removed", res.TombstonesRemoved,
				"segments_before", res.SegmentsBefore, "segments_after", res.SegmentsAfter)
		}
	case ctx.Err() != nil, errors.Is(err, log.ErrClosed):
	default:
		m.log.Error("compaction", "partition", h.String(), "err", err)
	}
}

// runCleaner runs threads cleaner loops (log.cleaner.threads; 0: none)
// in wg until ctx ends, sharing dedupe bytes of key maps: each picks the
// compacted log that most needs a pass, cleans it, and waits backoff
// when none does.
func (m *Manager) runCleaner(ctx context.Context, wg *sync.WaitGroup, threads int32, dedupe int64, backoff time.Duration) {
	if threads <= 0 {
		return
	}
	if backoff <= 0 {
		backoff = 15 * time.Second
	}
	c := &cleaning{busy: map[*Hosted]bool{}}
	share := max(dedupe/int64(threads), 1<<20)
	for range threads {
		wg.Add(1)
		go func() {
			defer wg.Done()
			idle := m.clock.NewTicker(backoff)
			defer idle.Stop()
			for ctx.Err() == nil {
				h, o := m.pickCleanable(c, share)
				if h == nil {
					select {
					case <-ctx.Done():
					case <-idle.C():
					}
					continue
				}
				m.cleanOne(ctx, h, o)
				c.mu.Lock()
				delete(c.busy, h)
				c.mu.Unlock()
			}
		}()
	}
}

// CleanerState is what the cleaner has done to h, a compacted topic's
// log, for mqctl topic describe (kafkaext.CleanerState); nil for a topic
// that is not compacted.
func (m *Manager) CleanerState(h *Hosted) *kafkaext.CleanerState {
	cfg := h.Config()
	if !cleanupCompacts(cfg.CleanupPolicy) {
		return nil
	}
	st, err := h.Log().CleanableState(m.cleanOptions(h, cfg, 0))
	if err != nil {
		return nil
	}
	cs := &kafkaext.CleanerState{DirtyRatio: st.DirtyRatio, FirstDirtyOffset: st.FirstDirtyOffset,
		Passes: h.cleanerPasses.Load(), BytesReclaimed: h.cleanerReclaimed.Load()}
	if !st.LastCleaned.IsZero() {
		cs.LastCleanedMillis = st.LastCleaned.UnixMilli()
	}
	return cs
}
