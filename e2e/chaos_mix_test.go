package e2e

import (
	"flag"
	"fmt"
	"maps"
	"os"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"
)

// Row 11 of the matrix: the other rows' faults drawn at random, with
// quiet periods between them, and a soak mode that watches the nodes'
// memory and open files for growth.

var chaosSoak = flag.Bool("chaos.soak", false, "the mixed chaos row draws only faults that keep the processes, and fails on RSS or open-file growth")

// chaosFault is a fault the mixed row may draw: inject injects it, holds
// it and heals it before it returns.
type chaosFault struct {
	name string
	// restarts: the fault ends processes (SIGKILL, power loss), so the
	// soak mode, which watches one process's growth, leaves it out.
	restarts bool
	inject   func(n *nemesis)
}

// chaosFaults are the faults of the matrix's rows, for the mixed row.
var chaosFaults = []chaosFault{
	{name: "kill-leader", restarts: true, inject: func(n *nemesis) {
		n.killLeader(n.between(300*time.Millisecond, 1500*time.Millisecond))
	}},
	{name: "pause-leader", inject: func(n *nemesis) {
		n.pauseLeader(n.between(2500*time.Millisecond, 4*time.Second)) // broker.session.timeout.ms=2000
	}},
}

// TestChaosMix (row 11): the faults of the other rows, one at a time in a
// seeded random order with quiet periods of 0.5-3 s between them. With
// -chaos.soak only the faults that keep the processes are drawn, and the
// nodes' resident memory and open file descriptors must not grow.
func TestChaosMix(t *testing.T) {
	faults := slices.DeleteFunc(slices.Clone(chaosFaults), func(f chaosFault) bool { return *chaosSoak && f.restarts })
	name := "mix"
	if *chaosSoak {
		name = "soak"
	}
	var w *growthWatch
	var pace time.Duration
	if *chaosSoak {
		// About 500 records a second: the checker keeps every record, some
		// 2 KB each with its reads, about 1 GB an hour.
		pace = 50 * time.Millisecond
	}
	runChaosRow(t, chaosRow{
		name: name,
		pace: pace,
		started: func(c *cluster) {
			w = watchGrowth(c)
			t.Cleanup(w.stop) // when the row fails before its check
		},
		fault: func(n *nemesis) {
			f := faults[n.rng.Intn(len(faults))]
			n.logf("mix: %s", f.name)
			f.inject(n)
			n.hold(n.between(500*time.Millisecond, 3*time.Second))
		},
		checked: func(r *chaosResult) {
			w.stop()
			r.notes = w.report(t, *chaosSoak)
		},
	})
}

// growthWatch samples every running node's resident memory and open file
// descriptors once a second, per process (a restarted node is a new one).
type growthWatch struct {
	c        *cluster
	done     chan struct{}
	stopOnce sync.Once
	wg       sync.WaitGroup

	mu      sync.Mutex
	samples map[int][]procSample // pid → its samples, in time order
	nodeOf  map[int]int32        // pid → node id
}

// procSample is one look at a process.
type procSample struct {
	at       time.Time
	rssBytes int64
	fds      int
}

// watchGrowth starts sampling c's nodes until stop.
func watchGrowth(c *cluster) *growthWatch {
	w := &growthWatch{c: c, done: make(chan struct{}), samples: map[int][]procSample{}, nodeOf: map[int]int32{}}
	w.wg.Add(1)
	go func() {
		defer w.wg.Done()
		tick := time.NewTicker(time.Second)
		defer tick.Stop()
		for {
			w.sample()
			select {
			case <-w.done:
				return
			case <-tick.C:
			}
		}
	}()
	return w
}

// sample looks at every node process once.
func (w *growthWatch) sample() {
	for _, node := range w.c.nodes {
		pid := node.pid()
		if pid <= 0 {
			continue
		}
		rss, ok := procRSS(pid)
		if !ok {
			continue
		}
		ents, err := os.ReadDir("/proc/" + strconv.Itoa(pid) + "/fd")
		if err != nil {
			continue
		}
		w.mu.Lock()
		w.samples[pid] = append(w.samples[pid], procSample{at: time.Now(), rssBytes: rss, fds: len(ents)})
		w.nodeOf[pid] = node.id
		w.mu.Unlock()
	}
}

// stop ends the sampling; later calls do nothing.
func (w *growthWatch) stop() {
	w.stopOnce.Do(func() { close(w.done) })
	w.wg.Wait()
}

// Growth bounds of the soak mode, between the median of a process's first
// fifth of samples and that of its last fifth: a leak of one descriptor
// or a few KB per request or reconnection passes them within minutes,
// while the working set's warm-up (caches, buffers, the race runtime)
// stays inside.
const (
	soakMinSamples = 30
	soakFDGrowth   = 64
	soakRSSFactor  = 2
	soakRSSSlack   = 64 << 20
)

// report returns the figures of the longest-lived process of every node
// ("node 1 rss 40→42 MB fds 61→61 over 58 s"), and with judge fails the
// test on growth beyond the soak bounds, or when no process lived long
// enough to be judged.
func (w *growthWatch) report(t *testing.T, judge bool) string {
	w.mu.Lock()
	defer w.mu.Unlock()
	longest := map[int32]int{} // node → pid with the most samples
	for pid, s := range w.samples {
		node := w.nodeOf[pid]
		if cur, ok := longest[node]; !ok || len(s) > len(w.samples[cur]) {
			longest[node] = pid
		}
	}
	var parts []string
	judged := 0
	for _, node := range slices.Sorted(maps.Keys(longest)) {
		s := w.samples[longest[node]]
		if len(s) < 2 {
			continue
		}
		fifth := max(1, len(s)/5)
		early, late := s[:fifth], s[len(s)-fifth:]
		rss0, rss1 := medianOf(early, func(p procSample) int64 { return p.rssBytes }), medianOf(late, func(p procSample) int64 { return p.rssBytes })
		fd0, fd1 := medianOf(early, func(p procSample) int64 { return int64(p.fds) }), medianOf(late, func(p procSample) int64 { return int64(p.fds) })
		span := s[len(s)-1].at.Sub(s[0].at).Round(time.Second)
		parts = append(parts, fmt.Sprintf("node %d rss %d→%d MB fds %d→%d over %v", node, rss0>>20, rss1>>20, fd0, fd1, span))
		if !judge || len(s) < soakMinSamples {
			continue
		}
		judged++
		if fd1-fd0 > soakFDGrowth {
			t.Errorf("soak: node %d (pid %d) went from %d to %d open file descriptors over %v", node, longest[node], fd0, fd1, span)
		}
		if rss1 > soakRSSFactor*rss0+soakRSSSlack {
			t.Errorf("soak: node %d (pid %d) grew from %d MB to %d MB of RSS over %v", node, longest[node], rss0>>20, rss1>>20, span)
		}
	}
	if judge && judged == 0 {
		t.Errorf("soak: no node process lived for %d samples; run longer (-chaos.duration)", soakMinSamples)
	}
	return strings.Join(parts, "; ")
}

// medianOf is the median of f over samples.
func medianOf(samples []procSample, f func(procSample) int64) int64 {
	vs := make([]int64, len(samples))
	for i, s := range samples {
		vs[i] = f(s)
	}
	slices.Sort(vs)
	return vs[len(vs)/2]
}

// procRSS is a process's current resident set size.
func procRSS(pid int) (int64, bool) { return procStatusBytes(pid, "VmRSS") }
