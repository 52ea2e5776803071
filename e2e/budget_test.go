package e2e

import (
	"bufio"
	"bytes"
	"encoding/binary"
	"fmt"
	"io"
	"net"
	"os"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// Many connections send produce frames of the largest size at once while
// a kgo client produces small records: mqd reads the large frames only as
// queued.max.request.bytes allows, keeps answering the small client, and
// its peak resident memory stays within what the budget allows.
//
// The bound, three times the budget plus 64 MiB (256 MiB), is generous
// on purpose. Request bytes in memory are at most the budget, but a frame
// given back is garbage until Go's collector runs, and under the default
// GOGC the heap grows to twice what the last collection found live, which
// includes the frames given back while it marked: measured peaks are 140
// to 180 MB, with the heap at 97 to 145 MB and 48 to 64 MB live. The 64 MiB
// are for the rest of mqd (runtime, controller, logs, the small client),
// about 16 MB at rest. Without the budget this load takes mqd to 700 MB.
func TestLargeFramesFromManyConnectionsStayWithinRequestBudget(t *testing.T) {
	if os.Getenv("MQ_E2E_RACE") != "" {
		t.Skip("the race detector's shadow memory would count as mqd's")
	}
	const (
		MiB       = 1 << 20
		budget    = 64 * MiB
		maxFrame  = 16 * MiB
		conns     = 16
		minFrames = 2 // per connection, and more until the small client is done
		records   = 200
	)
	b := startBroker(t, brokerOpts{props: []string{
		"queued.max.request.bytes=" + strconv.Itoa(budget),
		"socket.request.max.bytes=" + strconv.Itoa(maxFrame),
	}})
	ctx := ctxFor(t, 3*time.Minute)
	if _, err := b.admin().CreateTopic(ctx, 1, 1, nil, "small"); err != nil {
		t.Fatal(err)
	}
	baseline := procStatusKB(t, b.cmd.Process.Pid, "VmRSS")

	var smallDone atomic.Bool
	var wg sync.WaitGroup
	errs := make(chan error, conns)
	answered := make([]int, conns)
	for i := range conns {
		wg.Add(1)
		go func() {
			defer wg.Done()
			n, err := sendLargeFrames(b.addr, maxFrame, minFrames, &smallDone)
			answered[i] = n
			if err != nil {
				errs <- fmt.Errorf("connection %d, after %d large frames: %w", i, n, err)
			}
		}()
	}

	cl := b.client(kgo.DefaultProduceTopic("small"))
	for i := range records {
		r := &kgo.Record{Value: []byte("small " + strconv.Itoa(i))}
		if err := cl.ProduceSync(ctx, r).FirstErr(); err != nil {
			t.Errorf("small record %d: %v", i, err)
			break
		}
	}
	smallDone.Store(true)
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
	total := 0
	for _, n := range answered {
		total += n
	}

	peak := procStatusKB(t, b.cmd.Process.Pid, "VmHWM")
	const limitKB = (3*budget + 64*MiB) / 1024
	t.Logf("%d large frames of %d MiB answered on %d connections; mqd's RSS %d kB before, peak %d kB (bound %d kB)",
		total, maxFrame/MiB, conns, baseline, peak, limitKB)
	if peak > limitKB {
		t.Fatalf("mqd's peak RSS %d kB is over %d kB: three times queued.max.request.bytes (%d MiB) plus 64 MiB", peak, limitKB, budget/MiB)
	}
}

// sendLargeFrames sends produce frames of frameSize bytes on one
// connection, one at a time, each answered before the next, until it has
// sent at least atLeast of them and stop is set. The records are zeros (mqd
// refuses them as corrupt, having read them whole), written from one small
// buffer so that the test's own memory stays small.
func sendLargeFrames(addr string, frameSize, atLeast int, stop *atomic.Bool) (int, error) {
	c, err := net.DialTimeout("tcp", addr, 10*time.Second)
	if err != nil {
		return 0, err
	}
	defer c.Close()
	req := kmsg.NewPtrProduceRequest()
	req.SetVersion(7)
	req.Acks = 1
	req.TimeoutMillis = 30000
	req.Topics = []kmsg.ProduceRequestTopic{{Topic: "small", Partitions: []kmsg.ProduceRequestTopicPartition{{Records: []byte{}}}}}
	// Size, header v1 (key, version, correlation id, client id), and the
	// body up to the records' length, its last field.
	head := binary.BigEndian.AppendUint32(nil, 0)
	head = binary.BigEndian.AppendUint16(head, uint16(req.Key()))
	head = binary.BigEndian.AppendUint16(head, uint16(req.GetVersion()))
	head = binary.BigEndian.AppendUint32(head, 0)
	head = binary.BigEndian.AppendUint16(head, uint16(len("big")))
	head = append(head, "big"...)
	head = req.AppendTo(head)
	recordsLen := frameSize - (len(head) - 4)
	binary.BigEndian.PutUint32(head, uint32(frameSize))
	binary.BigEndian.PutUint32(head[len(head)-4:], uint32(recordsLen))
	zeros := make([]byte, 1<<20)
	w := bufio.NewWriterSize(c, 64<<10)

	sent := 0
	for ; sent < atLeast || !stop.Load(); sent++ {
		c.SetDeadline(time.Now().Add(time.Minute))
		corr := uint32(sent)
		binary.BigEndian.PutUint32(head[8:], corr)
		w.Write(head)
		for left := recordsLen; left > 0; left -= len(zeros) {
			w.Write(zeros[:min(left, len(zeros))])
		}
		if err := w.Flush(); err != nil {
			return sent, err
		}
		var size [4]byte
		if _, err := io.ReadFull(c, size[:]); err != nil {
			return sent, fmt.Errorf("read response: %w", err)
		}
		resp := make([]byte, binary.BigEndian.Uint32(size[:]))
		if _, err := io.ReadFull(c, resp); err != nil {
			return sent, fmt.Errorf("read response: %w", err)
		}
		if got := binary.BigEndian.Uint32(resp); got != corr {
			return sent, fmt.Errorf("response correlation id %d, want %d", got, corr)
		}
	}
	return sent, nil
}

// procStatusKB reads a "kB" field (VmRSS, VmHWM) of /proc/PID/status.
func procStatusKB(t *testing.T, pid int, field string) int {
	t.Helper()
	status, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		t.Skipf("no /proc to read mqd's memory from: %v", err)
	}
	for line := range bytes.Lines(status) {
		name, value, ok := strings.Cut(string(line), ":")
		if ok && name == field {
			kb, err := strconv.Atoi(strings.TrimSuffix(strings.TrimSpace(value), " kB"))
			if err != nil {
				t.Fatalf("%s in /proc/%d/status: %q", field, pid, value)
			}
			return kb
		}
	}
	t.Fatalf("no %s in /proc/%d/status", field, pid)
	return 0
}
