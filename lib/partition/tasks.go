package partition

import (
	"context"
	"sync"
	"time"
)

// StartLogTasks starts the background work on the hosted logs, each on
// the Manager's clock, until Close:
//
//   - retention every log.retention.check.interval.ms (EnforceRetention);
//   - tiered storage every remote.log.manager.task.interval.ms (SyncTiers);
//   - the scrubber at log.scrub.bytes.per.sec (scrub.go);
//   - log.cleaner.threads compaction loops (clean.go).
//
// mqd starts them once the node has registered. Calling it twice starts
// nothing more.
func (m *Manager) StartLogTasks() {
	m.syncMu.Lock()
	defer m.syncMu.Unlock()
	if m.tasks != nil {
		return
	}
	s := m.cfg.Settings
	ctx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	m.runEvery(ctx, &wg, s.LogRetentionCheckInterval, 5*time.Minute, m.EnforceRetention)
	m.runEvery(ctx, &wg, s.RemoteLogManagerTaskInterval, 30*time.Second, func() { m.SyncTiers(ctx) })
	m.runScrubber(ctx, &wg, s.LogScrubBytesPerSec, s.LogScrubInterval)
	m.runCleaner(ctx, &wg, s.LogCleanerThreads, s.LogCleanerDedupeBufferSize, s.LogCleanerBackoff)
	done := make(chan struct{})
	go func() { wg.Wait(); close(done) }()
	m.tasks, m.tasksDone = cancel, done
}

// runEvery runs f every interval (fallback when it is not positive) in
// wg until ctx ends: retention (default 5 minutes) and tiering (30 s).
func (m *Manager) runEvery(ctx context.Context, wg *sync.WaitGroup, every, fallback time.Duration, f func()) {
	if every <= 0 {
		every = fallback
	}
	wg.Add(1)
	go func() {
		defer wg.Done()
		t := m.clock.NewTicker(every)
		defer t.Stop()
		for {
			select {
			case <-ctx.Done():
				return
			case <-t.C():
				f()
			}
		}
	}()
}
