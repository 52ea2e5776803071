package e2e

import (
	"fmt"
	"io"
	"os"
	"runtime"
	"runtime/pprof"
	"slices"
	"strings"
	"testing"
	"time"
)

// watchMemory samples this test process's resident memory and, the first
// time it goes over testMaxRSS, writes to w what holds the memory and what
// runs: the largest in-use heap allocation sites and every goroutine's
// stack (the running tests are among them). The bound is checked again
// when the run ends (TestMain); this says, while it happens, which test
// did it — the end of a run only knows that some test did.
// TestMain sets runtime.MemProfileRate first.
func watchMemory(w io.Writer, every time.Duration) {
	for range time.Tick(every) {
		rss, ok := procStatusBytes(os.Getpid(), "VmRSS")
		if !ok || rss <= testMaxRSS {
			continue
		}
		fmt.Fprintf(w, "e2e: this test process holds %d MB of RSS, over the %d MB bound (testMaxRSS); the largest heap sites and the goroutines follow\n", rss>>20, testMaxRSS>>20)
		writeHeapSites(w, 8)
		pprof.Lookup("goroutine").WriteTo(w, 1)
		return
	}
}

// writeHeapSites writes the n allocation sites that hold the most of the
// sampled in-use heap, each with its bytes and its stack.
func writeHeapSites(w io.Writer, n int) {
	var recs []runtime.MemProfileRecord
	for {
		size, _ := runtime.MemProfile(nil, false)
		recs = make([]runtime.MemProfileRecord, size+16)
		if got, ok := runtime.MemProfile(recs, false); ok {
			recs = recs[:got]
			break
		}
	}
	slices.SortFunc(recs, func(a, b runtime.MemProfileRecord) int { return int(b.InUseBytes() - a.InUseBytes()) })
	for _, r := range recs[:min(n, len(recs))] {
		fmt.Fprintf(w, "heap: %d MB in use (sampled) at\n", r.InUseBytes()>>20)
		frames := runtime.CallersFrames(r.Stack())
		for {
			f, more := frames.Next()
			fmt.Fprintf(w, "\t%s %s:%d\n", f.Function, f.File, f.Line)
			if !more {
				break
			}
		}
	}
}

// TestHeapSitesNameTheLargestHolder: the report watchMemory writes names
// the function that allocated what the heap holds most of.
func TestHeapSitesNameTheLargestHolder(t *testing.T) {
	held := make([]byte, 96<<20)
	for i := range held {
		held[i] = byte(i)
	}
	runtime.GC() // the profile reports heaps as of the last GC
	var out strings.Builder
	writeHeapSites(&out, 1)
	if !strings.Contains(out.String(), "TestHeapSitesNameTheLargestHolder") || !strings.Contains(out.String(), "heap: 96 MB") {
		t.Fatalf("heap report does not name the 96 MB this test holds:\n%s", out.String())
	}
	runtime.KeepAlive(held)
}
