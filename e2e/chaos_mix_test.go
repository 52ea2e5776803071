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
	// root: the fault needs the cluster's own network or loop disks,
	// which need root; without it the mixed row leaves it out.
	root   bool
	inject func(n *nemesis)
}

// chaosFaults are the faults of the matrix's rows, for the mixed row.
var chaosFaults = []chaosFault{
	{name: "kill-leader", restarts: true, inject: func(n *nemesis) {
		n.killLeader(n.between(300*time.Millisecond, 1500*time.Millisecond))
	}},
	{name: "pause-leader", inject: func(n *nemesis) {
		n.pauseLeader(n.between(2500*time.Millisecond, 4*time.Second)) // broker.session.timeout.ms=2000
	}},
	{name: "kill-controller", restarts: true, inject: func(n *nemesis) {
		n.killController(n.between(300*time.Millisecond, 1500*time.Millisecond))
	}},
	{name: "shut-down-broker", restarts: true, inject: func(n *nemesis) {
		n.shutDownBroker(n.between(300*time.Millisecond, time.Second))
	}},
	{name: "cut-leader", root: true, inject: func(n *nemesis) {
		n.cutLeader(bothWays, n.between(2500*time.Millisecond, 4*time.Second))
	}},
	{name: "cut-one-way", root: true, inject: func(n *nemesis) {
		way := leaderOut
		if n.rng.Intn(2) == 0 {
			way = leaderIn
		}
		n.cutLeader(way, n.between(2500*time.Millisecond, 4*time.Second))
	}},
	{name: "isolate-leader", root: true, inject: func(n *nemesis) {
		n.isolateLeader(n.between(2500*time.Millisecond, 4*time.Second))
	}},
	{name: "power-loss-leader", restarts: true, root: true, inject: func(n *nemesis) {
		n.powerLossLeader(n.between(300*time.Millisecond, 1500*time.Millisecond))
	}},
	{name: "disk-full", root: true, inject: func(n *nemesis) {
		n.fillDisk(n.c.nodes[n.rng.Intn(len(n.c.nodes))], n.between(time.Second, 3*time.Second))
	}},
}

// mixDiskSize is the mixed row's loop disks: room for a long run, and
// little enough that the disk-full fault's ballast is written quickly.
const mixDiskSize = 256 << 20

// TestChaosMix (row 11): the faults of the other rows, one at a time in a
// seeded random order with quiet periods of 0.5-3 s between them. As
// root the cluster runs on its own network and loop disks, with
// flush.policy=always (so that a leader's power loss may not lose what it
// acknowledged), and the network and disk faults are drawn too. With
// -chaos.soak only the faults that keep the processes are drawn, and the
// nodes' resident memory and open file descriptors must not grow.
func TestChaosMix(t *testing.T) {
	root := os.Geteuid() == 0
	faults := slices.DeleteFunc(slices.Clone(chaosFaults), func(f chaosFault) bool {
		return (*chaosSoak && f.restarts) || (f.root && !root)
	})
	name := "mix"
	if *chaosSoak {
		name = "soak"
	}
	opts := clusterOpts{props: fastFailover}
	if root {
		opts = clusterOpts{netns: true, disks: onDisks(3, max(mixDiskSize, rowDiskSize())), props: withProps("log.flush.policy=always")}
	} else {
		t.Log("not root: the mixed row draws no network or disk fault")
	}
	var pace time.Duration
	if *chaosSoak {
		// About 500 records a second: the checker keeps every record, some
		// 2 KB each with its reads, about 1 GB an hour.
		pace = 50 * time.Millisecond
	}
	runChaosRow(t, chaosRow{
		name:    name,
		cluster: opts,
		pace:    pace,
		side: func(t *testing.T, c *cluster) chaosSide {
			w := watchGrowth(c, *chaosSoak)
			t.Cleanup(w.stop) // when the row fails before its check
			return w
		},
		fault: func(n *nemesis) {
			f := faults[n.rng.Intn(len(faults))]
			n.logf("mix: %s", f.name)
			f.inject(n)
			n.hold(n.between(500*time.Millisecond, 3*time.Second))
		},
	})
}

// growthWatch samples every running node's resident memory and open file
// descriptors once a second, per process (a restarted node is a new one):
// the mixed row's chaosSide, whose check fails on growth when judge is set.
type growthWatch struct {
	c        *cluster
	judge    bool
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
func watchGrowth(c *cluster, judge bool) *growthWatch {
	w := &growthWatch{c: c, judge: judge, done: make(chan struct{}), samples: map[int][]procSample{}, nodeOf: map[int]int32{}}
	c.t.Cleanup(w.stop) // a test that fails early
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

// lifetime is the growth of one node's longest-lived process: the median
// of its first fifth of samples and of its last fifth.
type lifetime struct {
	node         int32
	pid, samples int
	rss0, rss1   int64
	fds0, fds1   int64
	span         time.Duration
}

// lifetimes returns every node's longest-lived process's growth, by node.
func (w *growthWatch) lifetimes() []lifetime {
	w.mu.Lock()
	defer w.mu.Unlock()
	longest := map[int32]int{} // node → pid with the most samples
	for pid, s := range w.samples {
		node := w.nodeOf[pid]
		if cur, ok := longest[node]; !ok || len(s) > len(w.samples[cur]) {
			longest[node] = pid
		}
	}
	var out []lifetime
	for _, node := range slices.Sorted(maps.Keys(longest)) {
		s := w.samples[longest[node]]
		fifth := max(1, len(s)/5)
		early, late := s[:fifth], s[len(s)-fifth:]
		rss := func(p procSample) int64 { return p.rssBytes }
		fds := func(p procSample) int64 { return int64(p.fds) }
		out = append(out, lifetime{node: node, pid: longest[node], samples: len(s),
			rss0: medianOf(early, rss), rss1: medianOf(late, rss), fds0: medianOf(early, fds), fds1: medianOf(late, fds),
			span: s[len(s)-1].at.Sub(s[0].at).Round(time.Second)})
	}
	return out
}

// notes are the figures for the row's line: "node 1 rss 40→42 MB fds
// 61→61 over 58s; …".
func (w *growthWatch) notes() string {
	var parts []string
	for _, l := range w.lifetimes() {
		parts = append(parts, fmt.Sprintf("node %d rss %d→%d MB fds %d→%d over %v", l.node, l.rss0>>20, l.rss1>>20, l.fds0, l.fds1, l.span))
	}
	return strings.Join(parts, "; ")
}

// check, when judging, reports growth beyond the soak bounds, or that no
// process lived long enough to be judged, and returns how many it found.
func (w *growthWatch) check(t *testing.T, _ []int64, _ [][][]batchInfo) int {
	if !w.judge {
		return 0
	}
	bad, judged := 0, 0
	for _, l := range w.lifetimes() {
		if l.samples < soakMinSamples {
			continue
		}
		judged++
		if l.fds1-l.fds0 > soakFDGrowth {
			bad++
			t.Errorf("soak: node %d (pid %d) went from %d to %d open file descriptors over %v", l.node, l.pid, l.fds0, l.fds1, l.span)
		}
		if l.rss1 > soakRSSFactor*l.rss0+soakRSSSlack {
			bad++
			t.Errorf("soak: node %d (pid %d) grew from %d MB to %d MB of RSS over %v", l.node, l.pid, l.rss0>>20, l.rss1>>20, l.span)
		}
	}
	if judged == 0 {
		bad++
		t.Errorf("soak: no node process lived for %d samples; run longer (-chaos.duration)", soakMinSamples)
	}
	return bad
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
