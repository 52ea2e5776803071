package bench

import (
	"runtime/debug"
	"testing"
)

func TestQuietGCTurnsTheCollectorOffAndRestoresIt(t *testing.T) {
	percent, limit := debug.SetGCPercent(250), debug.SetMemoryLimit(3<<30)
	t.Cleanup(func() {
		debug.SetGCPercent(percent)
		debug.SetMemoryLimit(limit)
	})
	restore := quietGC(512 << 20)
	if p := debug.SetGCPercent(-1); p != -1 {
		t.Errorf("during the run: GC percent %d, want -1 (off)", p)
	}
	if l := debug.SetMemoryLimit(-1); l != 512<<20 {
		t.Errorf("during the run: memory limit %d, want %d", l, 512<<20)
	}
	restore()
	if p := debug.SetGCPercent(250); p != 250 {
		t.Errorf("after the run: GC percent %d, want 250 restored", p)
	}
	if l := debug.SetMemoryLimit(-1); l != 3<<30 {
		t.Errorf("after the run: memory limit %d, want %d restored", l, 3<<30)
	}
}
