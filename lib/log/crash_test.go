package log

import (
	"bufio"
	"bytes"
	"flag"
	"fmt"
	"math/rand/v2"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/mqproject/mq/lib/record"
)

var seedFlag = flag.Uint64("seed", 0, "seed for randomized tests (0: pick one and print it)")

func testSeed(t *testing.T) uint64 {
	seed := *seedFlag
	if seed == 0 {
		seed = uint64(time.Now().UnixNano())
	}
	t.Logf("seed %d (replay with -seed %d)", seed, seed)
	return seed
}

const crashChildEnv = "MQ_LOG_CRASH_CHILD_DIR"

// crashBatch is the batch writer g sends as its i-th append.
func crashBatch(g, i int) []byte {
	recs := make([]record.Record, 1+i%3)
	for r := range recs {
		v := bytes.Repeat([]byte{byte(g*31 + i + r)}, 50+(g*37+i*11)%700)
		recs[r] = record.Record{Key: []byte(fmt.Sprintf("%d-%d-%d", g, i, r)), Value: v}
	}
	b, err := record.Build(record.BuildOptions{BaseTimestamp: 1700000000000 + int64(i)}, recs)
	if err != nil {
		panic(err)
	}
	return b
}

// runCrashChild appends forever with FlushAlways from 4 goroutines and
// prints "ack <offset> <writer> <n>" after each acknowledged append.
func runCrashChild(dir string) {
	cfg := DefaultConfig()
	cfg.FlushPolicy = FlushAlways
	cfg.SegmentBytes = 64 << 10
	cfg.IndexIntervalBytes = 1024
	l, err := Open(dir, cfg, Options{})
	if err != nil {
		fmt.Fprintln(os.Stderr, "child open:", err)
		os.Exit(3)
	}
	var mu sync.Mutex
	out := bufio.NewWriter(os.Stdout)
	deadline := time.Now().Add(time.Minute)
	var wg sync.WaitGroup
	for g := range 4 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := 0; time.Now().Before(deadline); i++ {
				res, err := l.Append(crashBatch(g, i), 0)
				if err != nil {
					fmt.Fprintln(os.Stderr, "child append:", err)
					os.Exit(4)
				}
				mu.Lock()
				fmt.Fprintf(out, "ack %d %d %d\n", res.BaseOffset, g, i)
				out.Flush()
				mu.Unlock()
			}
		}()
	}
	wg.Wait()
	os.Exit(0)
}

type ack struct {
	offset int64
	g, i   int
}

func TestCrashKeepsEveryAcknowledgedAppend(t *testing.T) {
	if dir := os.Getenv(crashChildEnv); dir != "" {
		runCrashChild(dir)
		return
	}
	if testing.Short() {
		t.Skip("starts child processes")
	}
	rng := rand.New(rand.NewPCG(testSeed(t), 1))
	dir := t.TempDir() + "/crash-0"
	var acked []ack
	for iter := range 4 {
		want := 20 + rng.IntN(400)
		cmd := exec.Command(os.Args[0], "-test.run=^TestCrashKeepsEveryAcknowledgedAppend$")
		cmd.Env = append(os.Environ(), crashChildEnv+"="+dir)
		var stderr bytes.Buffer
		cmd.Stderr = &stderr
		stdout, err := cmd.StdoutPipe()
		if err != nil {
			t.Fatal(err)
		}
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		sc := bufio.NewScanner(stdout)
		got := 0
		for got < want && sc.Scan() {
			f := strings.Fields(sc.Text())
			if len(f) != 4 || f[0] != "ack" {
				continue
			}
			off, _ := strconv.ParseInt(f[1], 10, 64)
			g, _ := strconv.Atoi(f[2])
			i, _ := strconv.Atoi(f[3])
			acked = append(acked, ack{off, g, i})
			got++
		}
		_ = cmd.Process.Signal(syscall.SIGKILL)
		_ = cmd.Wait()
		if got < want {
			t.Fatalf("iteration %d: child stopped after %d acks: %s", iter, got, stderr.String())
		}
		verifyCrashLog(t, dir, acked, iter)
	}
}

// verifyCrashLog opens the log after a kill and checks that every
// acknowledged batch is there byte for byte and offsets are dense from 0.
func verifyCrashLog(t *testing.T, dir string, acked []ack, iter int) {
	t.Helper()
	l, err := Open(dir, DefaultConfig(), Options{})
	if err != nil {
		t.Fatalf("iteration %d: open: %v", iter, err)
	}
	defer l.Close()
	end := l.EndOffset()
	next := int64(0)
	for next < end {
		b, err := l.ReadBytes(next, end, 1<<20)
		if err != nil {
			t.Fatalf("iteration %d: read %d: %v", iter, next, err)
		}
		for len(b) > 0 {
			batch, rest, h, err := record.Next(b)
			if err != nil {
				t.Fatalf("iteration %d: bad batch at %d: %v", iter, next, err)
			}
			if h.BaseOffset != next {
				t.Fatalf("iteration %d: batch at %d, want %d (offsets not dense)", iter, h.BaseOffset, next)
			}
			if err := record.CheckCRC(batch); err != nil {
				t.Fatalf("iteration %d: batch %d: %v", iter, next, err)
			}
			next = h.LastOffset() + 1
			b = rest
		}
	}
	for _, a := range acked {
		got, err := l.ReadBytes(a.offset, end, 1)
		if err != nil {
			t.Fatalf("iteration %d: acknowledged batch %d: %v", iter, a.offset, err)
		}
		want := crashBatch(a.g, a.i)
		record.SetBaseOffset(want, a.offset)
		record.SetPartitionLeaderEpoch(want, 0)
		if !bytes.Equal(got, want) {
			t.Fatalf("iteration %d: acknowledged batch %d (writer %d, #%d) differs", iter, a.offset, a.g, a.i)
		}
	}
	t.Logf("iteration %d: %d acknowledged batches intact, log end %d", iter, len(acked), end)
}
