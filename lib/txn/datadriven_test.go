package txn

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/cockroachdb/datadriven"

	"github.com/mqproject/mq/lib/clock"
	"github.com/mqproject/mq/lib/mqtest/dd"
)

// TestDataDriven runs the scripts testdata/*.txt against a coordinator on
// a fake clock and an in-memory store, with every partition of
// __transaction_state owned (lib/mqtest/dd: the format, go test
// -rewrite). The script remembers the producer id and epoch each
// transactional id was last given and uses them unless a command says
// otherwise. After each command the background work (markers,
// completions, aborts) runs until it is done or waits for held markers,
// and every marker written meanwhile is printed. Commands:
//
//	init ID [timeout=D] [pid=N epoch=N]        InitProducerId
//	add ID T-P ... [pid=N] [epoch=N]           AddPartitionsToTxn
//	verify ID T-P ... [pid=N] [epoch=N]        AddPartitionsToTxn VerifyOnly
//	end ID commit|abort [v2] [pid=N] [epoch=N] EndTxn (v2: version 5)
//	hold on|off                                markers wait for release
//	release                                    write the held markers
//	tick D                                     advance the clock
//	describe ID / list [states=(S,...)]
//	restart                                    a new coordinator replays the store
//	unload                                     lose every partition
//	expire                                     expire transactional ids now
func TestDataDriven(t *testing.T) {
	dd.Run(t, "testdata", func(t *testing.T) dd.Runner {
		s := newScript()
		t.Cleanup(s.c.Close)
		return func(t *testing.T, d *datadriven.TestData) string {
			out := s.run(t, d)
			s.settle(t)
			return out + s.markers.collect()
		}
	})
}

type producer struct {
	id    int64
	epoch int16
}

type script struct {
	clock     *clock.Manual
	store     *MemStore
	markers   *testMarkers
	c         *Coordinator
	nextID    int64
	producers map[string]producer
}

func newScript() *script {
	s := &script{clock: clock.NewManual(time.Unix(1_700_000_000, 0)), store: &MemStore{}, markers: newTestMarkers(),
		nextID: 1000, producers: map[string]producer{}}
	s.start()
	return s
}

func (s *script) start() {
	s.c = New(Config{Partitions: 4, Store: s.store, Markers: s.markers, Clock: s.clock,
		MaxTimeout: time.Minute, IDExpiration: time.Hour,
		ProducerIDs: func(context.Context) (int64, error) {
			s.nextID++
			return s.nextID, nil
		}})
	for p := int32(0); p < 4; p++ {
		if err := s.c.Load(p); err != nil {
			panic(err)
		}
	}
}

// settle waits until every background goroutine of the coordinator is
// done or blocked on a held marker.
func (s *script) settle(t *testing.T) {
	deadline := time.After(10 * time.Second)
	for {
		ch, mch := s.c.Changed(), s.markers.changes()
		if s.c.Background() == s.markers.blocked() {
			return
		}
		select {
		case <-ch:
		case <-mch:
		case <-deadline:
			t.Fatalf("background work did not settle: %d running, %d markers held", s.c.Background(), s.markers.blocked())
		}
	}
}

func (s *script) run(t *testing.T, d *datadriven.TestData) string {
	ctx := context.Background()
	id := ""
	if len(d.CmdArgs) > 0 && d.CmdArgs[0].Vals == nil {
		id = d.CmdArgs[0].Key
	}
	p := s.producers[id]
	pid, epoch := p.id, p.epoch
	d.MaybeScanArgs(t, "pid", &pid)
	d.MaybeScanArgs(t, "epoch", &epoch)
	timeout := 30 * time.Second
	d.MaybeScanArgs(t, "timeout", &timeout)
	commit, v2 := d.HasArg("commit"), d.HasArg("v2")
	var tps []TopicPartition
	for _, w := range dd.Words(d) {
		if strings.Contains(w, "-") {
			topic, p := dd.TopicPartition(t, d, w, "-")
			tps = append(tps, TopicPartition{topic, p})
		}
	}
	switch d.Cmd {
	case "init":
		r := InitRequest{ID: id, Timeout: timeout, ProducerID: -1, ProducerEpoch: -1}
		if d.HasArg("pid") {
			r.ProducerID, r.ProducerEpoch = pid, epoch
		}
		gotID, gotEpoch, err := s.c.InitProducerID(ctx, r)
		if err != nil {
			return errName(err) + "\n"
		}
		s.producers[id] = producer{gotID, gotEpoch}
		return fmt.Sprintf("pid=%d epoch=%d\n", gotID, gotEpoch)
	case "add":
		return result(s.c.AddPartitions(ctx, id, pid, epoch, tps))
	case "verify":
		errs, err := s.c.Verify(id, pid, epoch, tps)
		if err != nil {
			return errName(err) + "\n"
		}
		var b strings.Builder
		for i, tp := range tps {
			fmt.Fprintf(&b, "%s-%d: %s\n", tp.Topic, tp.Partition, errName(errs[i]))
		}
		return b.String()
	case "end":
		gotID, gotEpoch, err := s.c.EndTxn(ctx, EndRequest{ID: id, ProducerID: pid, ProducerEpoch: epoch, Commit: commit, Version2: v2})
		if err != nil {
			return errName(err) + "\n"
		}
		s.producers[id] = producer{gotID, gotEpoch}
		return fmt.Sprintf("ok pid=%d epoch=%d\n", gotID, gotEpoch)
	case "hold":
		s.markers.hold(d.CmdArgs[0].Key == "on")
		return "ok\n"
	case "release":
		s.markers.release()
		return "ok\n"
	case "tick":
		s.clock.Advance(dd.Duration(t, d))
		return "ok\n"
	case "describe":
		desc, err := s.c.Describe(id)
		if err != nil {
			return errName(err) + "\n"
		}
		return describe(desc, s.clock.Now())
	case "list":
		var f Filter
		for _, a := range d.CmdArgs {
			if a.Key == "states" {
				for _, v := range a.Vals {
					st, _ := ParseState(v)
					f.States = append(f.States, st)
				}
			}
		}
		var b strings.Builder
		for _, l := range s.c.List(f) {
			fmt.Fprintf(&b, "%s pid=%d %s\n", l.ID, l.ProducerID, l.State)
		}
		if b.Len() == 0 {
			return "none\n"
		}
		return b.String()
	case "restart":
		s.settle(t)
		s.c.Close()
		s.settle(t)
		s.start()
		return "ok\n"
	case "unload":
		for p := int32(0); p < 4; p++ {
			s.c.Unload(p)
		}
		return "ok\n"
	case "expire":
		s.c.ExpireIDs()
		return "ok\n"
	}
	t.Fatalf("unknown command %q", d.Cmd)
	return ""
}

func describe(d Description, now time.Time) string {
	var b strings.Builder
	fmt.Fprintf(&b, "%s pid=%d epoch=%d timeout=%s", d.State, d.ProducerID, d.ProducerEpoch, d.Timeout)
	if !d.Start.IsZero() {
		fmt.Fprintf(&b, " running=%s", now.Sub(d.Start))
	}
	for _, tp := range d.Partitions {
		fmt.Fprintf(&b, " %s-%d", tp.Topic, tp.Partition)
	}
	return b.String() + "\n"
}

func result(err error) string {
	if err != nil {
		return errName(err) + "\n"
	}
	return "ok\n"
}

// errName is the Kafka error an error stands for, as the broker maps it.
func errName(err error) string {
	for _, e := range []struct {
		err  error
		name string
	}{
		{ErrNotCoordinator, "NOT_COORDINATOR"}, {ErrLoadInProgress, "COORDINATOR_LOAD_IN_PROGRESS"},
		{ErrConcurrent, "CONCURRENT_TRANSACTIONS"}, {ErrProducerIDMapping, "INVALID_PRODUCER_ID_MAPPING"},
		{ErrProducerFenced, "PRODUCER_FENCED"}, {ErrInvalidState, "INVALID_TXN_STATE"},
		{ErrInvalidTimeout, "INVALID_TRANSACTION_TIMEOUT"}, {ErrNotFound, "TRANSACTIONAL_ID_NOT_FOUND"},
	} {
		if errors.Is(err, e.err) {
			return e.name
		}
	}
	if err == nil {
		return "ok"
	}
	return err.Error()
}

// testMarkers records the markers written; while held, writes wait for
// release, except that the first of several partitions gets its marker
// at once.
type testMarkers struct {
	mu      sync.Mutex
	held    bool
	gate    chan struct{} // closed by release
	waiting int
	written []string
	changed chan struct{}
}

func newTestMarkers() *testMarkers {
	return &testMarkers{gate: make(chan struct{}), changed: make(chan struct{})}
}

func (m *testMarkers) Write(ctx context.Context, mk Marker, written func([]TopicPartition)) error {
	m.mu.Lock()
	held := m.held
	m.mu.Unlock()
	if held && len(mk.Partitions) > 1 {
		written(mk.Partitions[:1]) // the first at once, the others wait
	}
	m.mu.Lock()
	gate := m.gate
	if held {
		m.waiting++
		m.notifyLocked()
	}
	m.mu.Unlock()
	if held {
		select {
		case <-gate: // release counted it out
		case <-ctx.Done():
			m.mu.Lock()
			if m.gate == gate {
				m.waiting--
				m.notifyLocked()
			}
			m.mu.Unlock()
			return ctx.Err()
		}
	}
	kind := "abort"
	if mk.Commit {
		kind = "commit"
	}
	var parts []string
	for _, tp := range mk.Partitions {
		parts = append(parts, fmt.Sprintf("%s-%d", tp.Topic, tp.Partition))
	}
	written(mk.Partitions)
	m.mu.Lock()
	m.written = append(m.written, fmt.Sprintf("marker %s %s pid=%d epoch=%d v%d %s", mk.TransactionalID, kind,
		mk.ProducerID, mk.ProducerEpoch, mk.TransactionVersion, strings.Join(parts, " ")))
	m.mu.Unlock()
	return nil
}

func (m *testMarkers) notifyLocked() {
	close(m.changed)
	m.changed = make(chan struct{})
}

func (m *testMarkers) changes() <-chan struct{} {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.changed
}

func (m *testMarkers) blocked() int {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.waiting
}

func (m *testMarkers) hold(on bool) {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.held = on
}

func (m *testMarkers) release() {
	m.mu.Lock()
	defer m.mu.Unlock()
	close(m.gate)
	m.gate = make(chan struct{})
	m.waiting = 0
	m.notifyLocked()
}

func (m *testMarkers) collect() string {
	m.mu.Lock()
	defer m.mu.Unlock()
	w := m.written
	m.written = nil
	slices.Sort(w)
	if len(w) == 0 {
		return ""
	}
	return strings.Join(w, "\n") + "\n"
}
