package partition

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/mqproject/mq/lib/controller"
	"github.com/mqproject/mq/lib/log"
	"github.com/mqproject/mq/lib/tier"
)

// tiering is the node's tiered storage: the Tier, made on first need
// (a tiered topic hosted here, a remote read, a deleted topic's remote
// data to purge), and the backoff of each partition whose last upload
// failed.
type tiering struct {
	mu      sync.Mutex
	t       *tier.Tier
	backoff map[controller.RemotePartition]retryState // under mu
	lastErr string                                    // the last failure's error, under mu
}

// retryState is when a partition is tried next after failures, and the
// wait after the next failure.
type retryState struct {
	next time.Time
	wait time.Duration
}

const (
	tierBackoffMin = time.Second
	tierBackoffMax = time.Minute
)

// Tier returns the node's tiered storage, opening its store
// (remote.log.storage.url) on the first call.
func (m *Manager) Tier() (*tier.Tier, error) {
	m.tiering.mu.Lock()
	defer m.tiering.mu.Unlock()
	if m.tiering.t != nil {
		return m.tiering.t, nil
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	store, err := tier.OpenStore(ctx, m.cfg.Settings.RemoteStorageURL())
	if err != nil {
		return nil, err
	}
	m.tiering.t = tier.New(tier.Config{
		Store: store, Metadata: m.ctrl, CacheBytes: m.cfg.Settings.RemoteLogReaderCacheBytes,
		ReadTimeout: m.cfg.Settings.RemoteLogReaderTimeout,
		Logger:      m.log.With("component", "tier"), Clock: m.clock,
	})
	m.log.Info("remote log store opened", "remote.log.storage.url", store.String())
	return m.tiering.t, nil
}

// TierIfOpen returns the node's tiered storage, nil when nothing needed
// it yet.
func (m *Manager) TierIfOpen() *tier.Tier {
	m.tiering.mu.Lock()
	defer m.tiering.mu.Unlock()
	return m.tiering.t
}

// SyncTiers runs one round of tiered storage: each tiered partition led
// here uploads its closed segments and applies retention to its remote
// part (tier.Sync; after a failure, again only once its backoff passed);
// every other tiered partition hosted here learns where the remote copy
// ends, which its local retention waits for; and on the active
// controller's node the remote data of deleted topics is deleted. The
// tiering task (StartLogTasks) calls it every
// remote.log.manager.task.interval.ms.
func (m *Manager) SyncTiers(ctx context.Context) {
	img := m.ctrl.Image()
	var t *tier.Tier
	led := map[controller.RemotePartition]bool{}
	defer m.pruneBackoff(led)
	for _, h := range m.All() {
		id := controller.RemotePartition{Topic: h.topicID, Partition: h.Partition.Partition()}
		if h.IsLeader() {
			led[id] = true
		}
		cfg := h.Config()
		if cfg == nil || !cfg.RemoteStorageEnable {
			// Tiering turned off: what is remote still ages out.
			if rl := img.RemoteLog(id.Topic, id.Partition); rl != nil && cfg != nil && h.IsLeader() && m.tierDue(id) {
				if t == nil {
					var err error
					if t, err = m.Tier(); err != nil {
						m.log.Error("remote log store", "err", err)
						return
					}
				}
				info := h.Offsets()
				err := t.ApplyRetention(ctx, tier.Partition{ID: id, Name: h.String(), LeaderEpoch: info.LeaderEpoch, Log: h.Log(),
					HighWatermark: info.HighWatermark, RetentionMS: cfg.RetentionMS, RetentionBytes: cfg.RetentionBytes})
				m.tierResult(id, err)
			}
			continue
		}
		if !h.IsLeader() {
			h.Log().SetRemoteEnd(img.RemoteLog(id.Topic, id.Partition).EndOffset())
			if t := m.TierIfOpen(); t != nil {
				t.Forget(id)
			}
			continue
		}
		if !m.tierDue(id) {
			continue
		}
		if t == nil {
			var err error
			if t, err = m.Tier(); err != nil {
				m.log.Error("remote log store", "err", err)
				return
			}
		}
		info := h.Offsets()
		err := t.Sync(ctx, tier.Partition{
			ID: id, Name: h.String(), LeaderEpoch: info.LeaderEpoch, Log: h.Log(),
			// Below the last stable offset: a remote read is not cut
			// there, so no open transaction's records go remote.
			HighWatermark: min(info.HighWatermark, info.LastStableOffset),
			RetentionMS:   cfg.RetentionMS, RetentionBytes: cfg.RetentionBytes,
		})
		m.tierResult(id, err)
		if err != nil && !errors.Is(err, log.ErrClosed) && ctx.Err() == nil {
			m.log.Warn("tiered storage", "partition", h.String(), "err", err)
		}
	}
	if len(img.RemotePurges) > 0 && m.ctrl.IsLeader() {
		if t == nil {
			var err error
			if t, err = m.Tier(); err != nil {
				m.log.Error("remote log store", "err", err)
				return
			}
		}
		if err := t.Purge(ctx); err != nil {
			m.log.Warn("delete the remote data of deleted topics", "err", err)
		}
	}
}

// pruneBackoff forgets the failures of partitions no longer led here
// (moved, deleted): they say nothing of this node's uploads now.
func (m *Manager) pruneBackoff(led map[controller.RemotePartition]bool) {
	m.tiering.mu.Lock()
	defer m.tiering.mu.Unlock()
	for id := range m.tiering.backoff {
		if !led[id] {
			delete(m.tiering.backoff, id)
		}
	}
	if t := m.tiering.t; t != nil && len(m.tiering.backoff) == 0 {
		t.Stats().Failing.Store(0)
	}
}

// tierDue reports whether a partition's backoff, if any, has passed.
func (m *Manager) tierDue(id controller.RemotePartition) bool {
	m.tiering.mu.Lock()
	defer m.tiering.mu.Unlock()
	r, ok := m.tiering.backoff[id]
	return !ok || !m.clock.Now().Before(r.next)
}

// tierResult records how a partition's Sync went: a failure doubles its
// backoff (from tierBackoffMin to tierBackoffMax), a success clears it.
func (m *Manager) tierResult(id controller.RemotePartition, err error) {
	m.tiering.mu.Lock()
	defer m.tiering.mu.Unlock()
	t := m.tiering.t
	if err == nil {
		delete(m.tiering.backoff, id)
	} else {
		if m.tiering.backoff == nil {
			m.tiering.backoff = map[controller.RemotePartition]retryState{}
		}
		m.tiering.lastErr = err.Error()
		r := m.tiering.backoff[id]
		r.wait = min(max(2*r.wait, tierBackoffMin), tierBackoffMax)
		r.next = m.clock.Now().Add(r.wait)
		m.tiering.backoff[id] = r
		if t != nil {
			t.Stats().UploadFailures.Add(1)
		}
	}
	if t != nil {
		failing := int64(0)
		if len(m.tiering.backoff) > 0 {
			failing = 1
		}
		t.Stats().Failing.Store(failing)
	}
}

// TierError is the error of the last failed upload round, "" when none
// failed.
func (m *Manager) TierError() string {
	m.tiering.mu.Lock()
	defer m.tiering.mu.Unlock()
	if len(m.tiering.backoff) == 0 {
		return ""
	}
	return m.tiering.lastErr
}

// closeTier closes the store, once the tasks ended.
func (m *Manager) closeTier() error {
	m.tiering.mu.Lock()
	defer m.tiering.mu.Unlock()
	if m.tiering.t == nil {
		return nil
	}
	if err := m.tiering.t.Close(); err != nil {
		return fmt.Errorf("close the remote log store: %w", err)
	}
	return nil
}
