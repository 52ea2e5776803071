package log

import (
	"context"
	"fmt"
	"math/rand/v2"
	"testing"
	"time"

	"github.com/mqproject/mq/lib/vfs/crashfs"
)

// cleanCrashLog builds, on a fresh crashfs.FS, a closed log whose cleaning
// merges several groups of segments and removes superseded records and
// expired tombstones, and returns the file system (everything synced)
// with the model of what was appended.
func cleanCrashLog(t *testing.T, mode crashfs.Mode, seed uint64) (*crashfs.FS, *cleanModel, Config) {
	t.Helper()
	cfg := cleanConfig()
	fsys := crashfs.New(mode, seed)
	clk := testStart
	l, err := Open(powerLossDir, cfg, Options{FS: fsys})
	if err != nil {
		t.Fatal(err)
	}
	m := newCleanModel()
	rng := rand.New(rand.NewPCG(seed, 3))
	appends := 50
	if *cleanSteps > 0 || testing.Short() {
		appends = max(*cleanSteps/10, 20)
	}
	for i := range appends {
		kvs := randomKVs(rng, 12)
		if i%17 == 0 {
			kvs = append(kvs, kv{key: []byte(fmt.Sprintf("key-%d", rng.IntN(12)))})
		}
		ts := clk.Add(time.Duration(i) * time.Second).UnixMilli()
		res, err := l.Append(randomBatch(t, rng, ts, kvs), 0)
		if err != nil {
			t.Fatal(err)
		}
		m.appended(res.BaseOffset, ts, kvs)
	}
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}
	return fsys.Crash(), m, cfg
}

// cleanCrashOptions cleans everything and removes tombstones at once,
// merging pairs of segments.
var cleanCrashOptions = CleanOptions{Now: testStart.Add(time.Hour), SegmentBytes: 2500}

// TestCleanCrashAtEveryStep cuts the power at every file system operation
// of a cleaning pass, and at every operation of the Open that recovers
// from one, and checks that the log recovers to the latest value of every
// key, records at their offsets, no damage; and that cleaning it again
// and reopening keeps it so.
func TestCleanCrashAtEveryStep(t *testing.T) {
	for _, mode := range []crashfs.Mode{crashfs.Strict, crashfs.Torn} {
		t.Run(mode.String(), func(t *testing.T) {
			t.Parallel()
			seed := testSeed(t)
			base, m, cfg := cleanCrashLog(t, mode, seed)
			// How many operations a whole pass takes.
			fsys := base.Crash()
			l, err := Open(powerLossDir, cfg, Options{FS: fsys})
			if err != nil {
				t.Fatal(err)
			}
			before := fsys.Ops()
			res, err := l.Clean(context.Background(), cleanCrashOptions)
			if err != nil {
				t.Fatal(err)
			}
			total := fsys.Ops() - before
			if res.SegmentsAfter < 2 || res.SegmentsBefore <= res.SegmentsAfter || res.TombstonesRemoved == 0 {
				t.Fatalf("the pass does not merge groups and remove tombstones: %+v", res)
			}
			m.check(t, l, "uninterrupted pass")
			_ = l.Close()
			t.Logf("a pass takes %d file system operations: %+v", total, res)

			for n := range total + 1 {
				label := fmt.Sprintf("crash after %d of %d operations", n, total)
				fsys := base.Crash()
				l, err := Open(powerLossDir, cfg, Options{FS: fsys})
				if err != nil {
					t.Fatal(err)
				}
				fsys.CrashAfter(n)
				_, cleanErr := l.Clean(context.Background(), cleanCrashOptions)
				crashed := fsys.Crashed()
				abandon(l)
				if crashed == nil {
					if cleanErr != nil {
						t.Fatalf("%s: %v", label, cleanErr)
					}
					crashed = fsys.Crash()
				}
				// Recover, now and then crashing the recovery too.
				var recovered *Log
				for try := 0; ; try++ {
					openFS := crashed.Crash()
					if try < 2 {
						openFS.CrashAfter((n + int64(try)*7) % 23)
					}
					recovered, err = Open(powerLossDir, cfg, Options{FS: openFS})
					if err != nil {
						t.Fatalf("%s, open %d: %v", label, try, err)
					}
					m.check(t, recovered, fmt.Sprintf("%s, open %d", label, try))
					if again := openFS.Crashed(); again != nil {
						abandon(recovered)
						crashed = again
						continue
					}
					break
				}
				if d := recovered.Damaged(); len(d) > 0 {
					t.Fatalf("%s: damage after recovery: %v", label, d)
				}
				if st, err := recovered.Scrub(context.Background(), nil); err != nil || st.Damaged > 0 {
					t.Fatalf("%s: scrub: %+v %v", label, st, err)
				}
				if _, err := recovered.Clean(context.Background(), cleanCrashOptions); err != nil {
					t.Fatalf("%s: clean after recovery: %v", label, err)
				}
				m.check(t, recovered, label+", cleaned again")
				dir, _ := recovered.fs.ReadDir(powerLossDir)
				for _, e := range dir {
					if n := e.Name(); len(n) > 5 && (n[len(n)-5:] == swapSuffix || len(n) > 8 && n[len(n)-8:] == cleanedSuffix) {
						t.Fatalf("%s: %s left behind", label, n)
					}
				}
				_ = recovered.Close()
			}
		})
	}
}
