package group

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/cockroachdb/datadriven"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/mqproject/mq/lib/clock"
	"github.com/mqproject/mq/lib/mqtest/dd"
	"github.com/mqproject/mq/lib/record"
)

// TestDataDriven runs the scripts testdata/*.txt (lib/mqtest/dd: the
// format, go test -rewrite) against a coordinator on a fake clock and an
// in-memory store.
//
// Clients are named by labels; the script remembers each label's member id
// and generation from the answers it got, and uses them unless a command
// says otherwise. Every answer that arrives while a command runs (joins
// and syncs that were waiting, say, when "tick" expires a session) is
// printed. Commands (a list of one value needs no parentheses):
//
//	join LABEL [group=G] [member=ID|none] [instance=I] [session=D] [rebalance=D]
//	           [protocols=(NAME[:META|:@TOPIC+TOPIC],...)] [type=T] [v=N]
//	sync LABEL [gen=N] [member=ID] [assign=(LABEL:DATA,...)]
//	heartbeat LABEL [gen=N] [member=ID]
//	leave LABEL|@INSTANCE|LABEL@INSTANCE ...  (one LeaveGroup for all)
//	commit LABEL|- [gen=N] T/P@OFFSET ...   ("-": a simple commit)
//	fetch [group=G]
//	delete-offsets [group=G] T/P ...
//	delete-group [group=G]
//	tick D                         (advance the fake clock)
//	state [group=G]
//	list
//	restart                        (a new coordinator replays the store)
//	config [delay=D] [alone=D]     (restart with InitialRebalanceDelay and
//	                                InitialRebalanceAlone; 3s and 0 unless set)
//	expire                         (run offset expiry now)
//	delete-topics T ...            (the topics were deleted: DeleteTopicOffsets)
//	hold on|off                    (the store holds the waits of later appends)
//	release #N [err=timeout|lost]  (end held wait N: durable, timed out (the
//	                                batch stays), or lost to a new leader's
//	                                truncation)
//	unload [group=G] / load [group=G] (the group's partition)
//	append-group [group=G] v=N gen=N [protocol=P] [leader=LABEL]
//	             [members=(LABEL[:ASSIGNMENT],...)]
//	                               (append a group record of value version N
//	                                as another writer would; each LABEL is
//	                                its member id, session 10s, and the
//	                                script's client LABEL takes it and gen)
//
// A held append is printed as "held #N" with its records when it appears.
// A commit, delete-offsets or delete-group that waits on one prints
// "waiting for #N" and its answer once the wait ends. Every command must
// return within commandDeadline: a command stuck behind a held wait (a
// wait under the coordinator's mutex) fails the test.
func TestDataDriven(t *testing.T) {
	dd.Run(t, "testdata", func(t *testing.T) dd.Runner {
		s := newScript()
		t.Cleanup(func() {
			if !s.stalled {
				s.c.Close()
			}
		})
		return func(t *testing.T, d *datadriven.TestData) string {
			return s.runWithDeadline(t, d) + s.collect()
		}
	})
}

type client struct {
	member     string
	generation int32
	instance   string
}

type script struct {
	initialDelay time.Duration // Config.InitialRebalanceDelay
	alone        time.Duration // Config.InitialRebalanceAlone
	clock        *clock.Manual
	store        *MemStore
	c            *Coordinator
	ids          int
	clients      map[string]*client
	joins        map[string]<-chan JoinResult
	syncs        map[string]<-chan SyncResult
	heldIDs      map[*HeldWait]int
	lastHeld     int     // the number of the last held append seen
	calls        []*call // commands waiting on a held append
	stalled      bool    // a command did not return: the coordinator may be locked up
}

// call is a command waiting on a held append.
type call struct {
	wait   *HeldWait
	answer chan string
}

// commandDeadline bounds every command of a script: none may block on
// another group's wait.
const commandDeadline = 10 * time.Second

func newScript() *script {
	s := &script{initialDelay: 3 * time.Second, clock: clock.NewManual(time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)), store: &MemStore{},
		clients: map[string]*client{}, joins: map[string]<-chan JoinResult{}, syncs: map[string]<-chan SyncResult{},
		heldIDs: map[*HeldWait]int{}}
	s.open()
	return s
}

func (s *script) open() {
	s.c = New(Config{
		Partitions:             4,
		Store:                  s.store,
		Clock:                  s.clock,
		InitialRebalanceDelay:  s.initialDelay,
		InitialRebalanceAlone:  s.alone,
		OffsetsRetention:       time.Hour,
		RetentionCheckInterval: 10 * time.Minute,
		MinSessionTimeout:      time.Second,
		NewMemberID: func(clientID string) string {
			s.ids++
			return fmt.Sprintf("%s-%d", clientID, s.ids)
		},
	})
	for p := int32(0); p < 4; p++ {
		if err := s.c.Load(p); err != nil {
			panic(fmt.Sprintf("load partition %d: %v", p, err)) // runWithDeadline fails the test
		}
	}
}

func (s *script) client(label string) *client {
	cl := s.clients[label]
	if cl == nil {
		cl = &client{generation: -1}
		s.clients[label] = cl
	}
	return cl
}

func errText(err error) string {
	if err == nil {
		return "ok"
	}
	return strings.TrimPrefix(err.Error(), "group: ")
}

// run runs one command. It runs on a goroutine of runWithDeadline's, so t
// must be one whose Fatal panics (offTestGoroutine).
func (s *script) run(t testing.TB, d *datadriven.TestData) string {
	group := "g"
	d.MaybeScanArgs(t, "group", &group)
	memberOf := func(cl *client) string {
		m := cl.member
		d.MaybeScanArgs(t, "member", &m)
		return m
	}
	gen := func(cl *client) int32 {
		g := cl.generation
		d.MaybeScanArgs(t, "gen", &g)
		return g
	}
	switch d.Cmd {
	case "join":
		label := dd.FirstWord(t, d)
		cl := s.client(label)
		d.MaybeScanArgs(t, "instance", &cl.instance)
		member := cl.member
		if d.MaybeScanArgs(t, "member", &member) && member == "none" {
			member = ""
		}
		names := []string{"range"}
		d.MaybeScanArgs(t, "protocols", &names)
		var protocols []Protocol
		for _, p := range names {
			name, meta, _ := strings.Cut(p, ":")
			md := []byte(cmpOr(meta, "m"))
			if topics, ok := strings.CutPrefix(meta, "@"); ok {
				// Consumer protocol metadata subscribing to topics.
				cm := kmsg.NewConsumerMemberMetadata()
				cm.Topics = strings.Split(topics, "+")
				md = cm.AppendTo(nil)
			}
			protocols = append(protocols, Protocol{Name: name, Metadata: md})
		}
		session, rebalance, protocolType, v := 10*time.Second, 30*time.Second, "consumer", 9
		d.MaybeScanArgs(t, "session", &session)
		d.MaybeScanArgs(t, "rebalance", &rebalance)
		d.MaybeScanArgs(t, "type", &protocolType)
		d.MaybeScanArgs(t, "v", &v)
		ch := s.c.Join(JoinRequest{
			Group: group, MemberID: member, InstanceID: cl.instance, ClientID: label, ClientHost: "/127.0.0.1",
			SessionTimeout: session, RebalanceTimeout: rebalance,
			ProtocolType: protocolType, Protocols: protocols,
			RequireKnownMemberID: v >= 4, SkipAssignmentOK: v >= 9,
		})
		s.joins[label] = ch
		if len(ch) == 0 {
			return fmt.Sprintf("join %s: waiting\n", label)
		}
		return ""
	case "sync":
		label := dd.FirstWord(t, d)
		cl := s.client(label)
		var assign map[string][]byte
		var assignments []string
		if d.MaybeScanArgs(t, "assign", &assignments) {
			assign = map[string][]byte{}
			for _, p := range assignments {
				l, data, _ := strings.Cut(p, ":")
				assign[s.client(l).member] = []byte(data)
			}
		}
		ch := s.c.Sync(SyncRequest{Group: group, MemberID: memberOf(cl), InstanceID: cl.instance, Generation: gen(cl), Assignments: assign})
		s.syncs[label] = ch
		if len(ch) == 0 {
			return fmt.Sprintf("sync %s: waiting\n", label)
		}
		return ""
	case "heartbeat":
		label := dd.FirstWord(t, d)
		cl := s.client(label)
		return fmt.Sprintf("heartbeat %s: %s\n", label, errText(s.c.Heartbeat(group, memberOf(cl), cl.instance, gen(cl))))
	case "leave":
		var members []LeaveMember
		names := dd.Words(d)
		for _, w := range names {
			// LABEL, @INSTANCE, or LABEL@INSTANCE for both ids.
			label, inst, _ := strings.Cut(w, "@")
			lm := LeaveMember{InstanceID: inst}
			if label != "" {
				lm.MemberID = s.client(label).member
			}
			members = append(members, lm)
		}
		errs, err := s.c.Leave(group, members)
		if err != nil {
			return fmt.Sprintf("leave: %s\n", errText(err))
		}
		var b strings.Builder
		for i, e := range errs {
			fmt.Fprintf(&b, "leave %s: %s\n", names[i], errText(e))
		}
		return b.String()
	case "commit":
		pos := dd.Words(d)
		if len(pos) == 0 {
			d.Fatalf(t, "commit needs a label or -")
		}
		r := CommitRequest{Group: group, Generation: -1}
		if pos[0] != "-" {
			cl := s.client(pos[0])
			r.MemberID, r.InstanceID, r.Generation = memberOf(cl), cl.instance, gen(cl)
		}
		for _, w := range pos[1:] {
			tp, off, _ := strings.Cut(w, "@")
			o, err := strconv.ParseInt(off, 10, 64)
			if err != nil {
				d.Fatalf(t, "%s: %v", w, err)
			}
			r.Offsets = append(r.Offsets, CommitOffset{TopicPartition: parseTP(t, d, tp), Offset: Offset{Offset: o, LeaderEpoch: -1}})
		}
		return s.block("commit", func() string {
			errs, err := s.c.CommitOffsets(context.Background(), r)
			if err != nil {
				return fmt.Sprintf("commit: %s\n", errText(err))
			}
			var b strings.Builder
			for i, e := range errs {
				fmt.Fprintf(&b, "commit %s/%d: %s\n", r.Offsets[i].Topic, r.Offsets[i].Partition, errText(e))
			}
			return b.String()
		})
	case "fetch":
		offs, err := s.c.FetchOffsets(group, nil)
		if err != nil {
			return fmt.Sprintf("fetch: %s\n", errText(err))
		}
		if len(offs) == 0 {
			return "fetch: none\n"
		}
		var b strings.Builder
		for _, o := range offs {
			fmt.Fprintf(&b, "fetch %s/%d: %d committed %s\n", o.Topic, o.Partition, o.Offset.Offset, o.CommitTime.Format("15:04:05"))
		}
		return b.String()
	case "delete-offsets":
		var tps []TopicPartition
		for _, w := range dd.Words(d) {
			tps = append(tps, parseTP(t, d, w))
		}
		return s.block("delete-offsets", func() string {
			errs, err := s.c.DeleteOffsets(context.Background(), group, tps)
			if err != nil {
				return fmt.Sprintf("delete-offsets: %s\n", errText(err))
			}
			var b strings.Builder
			for i, e := range errs {
				fmt.Fprintf(&b, "delete-offsets %s/%d: %s\n", tps[i].Topic, tps[i].Partition, errText(e))
			}
			return b.String()
		})
	case "delete-group":
		return s.block("delete-group", func() string {
			return fmt.Sprintf("delete-group: %s\n", errText(s.c.DeleteGroup(context.Background(), group)))
		})
	case "hold":
		s.store.Hold(dd.FirstWord(t, d) == "on")
		return ""
	case "release":
		n, ok := strings.CutPrefix(dd.FirstWord(t, d), "#")
		id, err := strconv.Atoi(n)
		if !ok || err != nil {
			d.Fatalf(t, "release takes #N")
		}
		release := func(h *HeldWait) { h.Release(nil) }
		var how string
		d.MaybeScanArgs(t, "err", &how)
		switch how {
		case "timeout":
			release = func(h *HeldWait) {
				h.Release(fmt.Errorf("wait for the in-sync replicas: %w", context.DeadlineExceeded))
			}
		case "lost":
			release = func(h *HeldWait) { h.Lose(errLostLeadership) }
		}
		for h, n := range s.heldIDs {
			if n == id {
				release(h)
				delete(s.heldIDs, h)
				return ""
			}
		}
		d.Fatalf(t, "no held wait #%d", id)
		return ""
	case "unload":
		s.c.Unload(s.c.Partition(group))
		return ""
	case "load":
		if err := s.c.Load(s.c.Partition(group)); err != nil {
			return fmt.Sprintf("load: %s\n", errText(err))
		}
		return ""
	case "append-group":
		var version int16
		var generation int32
		d.ScanArgs(t, "v", &version)
		d.ScanArgs(t, "gen", &generation)
		v := groupValue{protocolType: "consumer", generation: generation}
		d.MaybeScanArgs(t, "protocol", &v.protocol)
		d.MaybeScanArgs(t, "leader", &v.leader)
		var members []string
		d.MaybeScanArgs(t, "members", &members)
		for _, w := range members {
			label, assignment, _ := strings.Cut(w, ":")
			v.members = append(v.members, storedMember{id: label, clientID: label, clientHost: "/127.0.0.1",
				rebalanceMS: 30000, sessionMS: 10000, subscription: []byte("m"), assignment: []byte(assignment)})
			cl := s.client(label)
			cl.member, cl.generation = label, generation
		}
		batch, err := record.Build(record.BuildOptions{}, []record.Record{{Key: groupKey(group), Value: encodeGroupValueAs(&v, version)}})
		if err != nil {
			panic(err)
		}
		if _, err := s.store.Append(s.c.Partition(group), batch); err != nil {
			panic(err)
		}
		return ""
	case "tick":
		s.clock.Advance(dd.Duration(t, d))
		return ""
	case "state":
		return s.state(group)
	case "list":
		var b strings.Builder
		for _, l := range s.c.ListGroups(nil) {
			fmt.Fprintf(&b, "%s %s %q\n", l.Group, l.State, l.ProtocolType)
		}
		if b.Len() == 0 {
			return "no groups\n"
		}
		return b.String()
	case "restart":
		s.c.Close()
		s.collect()
		s.open()
		return fmt.Sprintf("restarted: %d records replayed\n", s.store.Records(s.c.Partition(group)))
	case "config":
		s.initialDelay, s.alone = 3*time.Second, 0
		d.MaybeScanArgs(t, "delay", &s.initialDelay)
		d.MaybeScanArgs(t, "alone", &s.alone)
		s.c.Close()
		s.collect()
		s.open()
		return fmt.Sprintf("config: delay=%s alone=%s\n", s.initialDelay, s.alone)
	case "expire":
		s.c.ExpireOffsets()
		return ""
	case "delete-topics":
		s.c.DeleteTopicOffsets(dd.Words(d))
		return ""
	}
	d.Fatalf(t, "unknown command %q", d.Cmd)
	return ""
}

var errLostLeadership = errors.New("not leader any more")

// runWithDeadline runs a command and settles its writes, failing the test
// if that does not end within commandDeadline.
// run's failures are panics, which reach the test goroutine as failures.
func (s *script) runWithDeadline(t *testing.T, d *datadriven.TestData) string {
	answers := make(chan string, 1)
	failed := make(chan any, 1)
	go func() {
		defer func() {
			if r := recover(); r != nil {
				failed <- r
			}
		}()
		out := s.run(offTestGoroutine{t}, d)
		answers <- out + s.settle()
	}()
	select {
	case o := <-answers:
		return o
	case r := <-failed:
		t.Fatal(r)
		return ""
	case <-time.After(commandDeadline):
		s.stalled = true
		d.Fatalf(t, "%s did not return within %s: blocked behind a held wait?", d.Cmd, commandDeadline)
		return ""
	}
}

// offTestGoroutine is the testing.TB of run, which runs on a goroutine of
// its own where FailNow may not be called: its fatal failures panic, and
// runWithDeadline fails the test with what they said.
type offTestGoroutine struct{ testing.TB }

func (o offTestGoroutine) Fatal(args ...any) { panic(fmt.Sprint(args...)) }

func (o offTestGoroutine) Fatalf(format string, args ...any) { panic(fmt.Sprintf(format, args...)) }

func (o offTestGoroutine) FailNow() { panic("FailNow") }

// block runs f, a command that may wait for a held append. It returns f's
// answer, or, once f waits on a held append, a line saying so: settle
// prints the answer when that wait ends.
func (s *script) block(name string, f func() string) string {
	waiting := s.store.Waiting() // settled: every other write waits already
	answer := make(chan string, 1)
	go func() { answer <- f() }()
	for {
		changed := s.store.Changed()
		if s.store.Waiting() > waiting {
			held := s.store.Held()
			h := held[len(held)-1] // f's: the last append
			out := s.numberHeld()
			s.calls = append(s.calls, &call{wait: h, answer: answer})
			return out + fmt.Sprintf("%s: waiting for #%d\n", name, s.heldIDs[h])
		}
		select {
		case out := <-answer:
			return out
		case <-changed:
		}
	}
}

// numberHeld numbers the held appends not seen yet, in append order, and
// prints them.
func (s *script) numberHeld() string {
	var b strings.Builder
	for _, h := range s.store.Held() {
		if _, ok := s.heldIDs[h]; ok {
			continue
		}
		s.lastHeld++
		s.heldIDs[h] = s.lastHeld
		fmt.Fprintf(&b, "held #%d: %s\n", s.heldIDs[h], describeBatch(h.Batch))
	}
	return b.String()
}

// settle waits until every write of the coordinator is either finished or
// blocked on a held append with nothing to wake it (not released, its
// partition not unloaded), then prints the answers of the commands whose
// wait ended and the held appends that appeared.
func (s *script) settle() string {
	deadline := time.After(commandDeadline)
	for {
		storeChanged, writesChanged := s.store.Changed(), s.c.writesChanged()
		unsettled := 0
		s.c.mu.Lock()
		for w := range s.c.inflight {
			h := w.pending.(*HeldWait)
			if !slices.Contains(s.store.Held(), h) || w.op.Gone().Err() != nil || !h.Waiting() {
				unsettled++
			}
		}
		s.c.mu.Unlock()
		if unsettled == 0 {
			break
		}
		select {
		case <-storeChanged:
		case <-writesChanged:
		case <-deadline:
			panic(fmt.Sprintf("writes did not settle: %d of them", unsettled))
		}
	}
	var b strings.Builder
	b.WriteString(s.numberHeld())
	calls := s.calls[:0]
	for _, cl := range s.calls {
		if cl.wait.Waiting() {
			calls = append(calls, cl)
			continue
		}
		select {
		case out := <-cl.answer:
			b.WriteString(out)
		case <-time.After(commandDeadline):
			panic("a command whose wait ended did not return")
		}
	}
	s.calls = calls
	return b.String()
}

// describeBatch prints the records of a batch of the coordinator.
func describeBatch(batch []byte) string {
	var parts []string
	record.Iterate(batch, 0, func(r *record.Record) error {
		k, err := decodeKey(r.Key)
		switch {
		case err != nil:
			parts = append(parts, "unreadable")
		case k.isOffset && r.Value == nil:
			parts = append(parts, fmt.Sprintf("%s %s/%d deleted", k.group, k.topic, k.partition))
		case k.isOffset:
			v, _ := decodeOffsetValue(r.Value)
			parts = append(parts, fmt.Sprintf("%s %s/%d@%d", k.group, k.topic, k.partition, v.offset))
		case r.Value == nil:
			parts = append(parts, fmt.Sprintf("%s deleted", k.group))
		default:
			v, _ := decodeGroupValue(r.Value)
			parts = append(parts, fmt.Sprintf("%s gen=%d members=%d", k.group, v.generation, len(v.members)))
		}
		return nil
	})
	return strings.Join(parts, ", ")
}

// showMetadata prints consumer protocol metadata as @TOPIC+TOPIC, other
// metadata as is.
func showMetadata(b []byte) string {
	var cm kmsg.ConsumerMemberMetadata
	if len(b) > 2 && cm.ReadFrom(b) == nil {
		return "@" + strings.Join(cm.Topics, "+")
	}
	return string(b)
}

func cmpOr(a, b string) string {
	if a != "" {
		return a
	}
	return b
}

// parseTP parses TOPIC/PARTITION.
func parseTP(t testing.TB, d *datadriven.TestData, s string) TopicPartition {
	topic, p := dd.TopicPartition(t, d, s, "/")
	return TopicPartition{Topic: topic, Partition: p}
}

func (s *script) labelOf(member string) string {
	for l, cl := range s.clients {
		if cl.member == member {
			return l
		}
	}
	return member
}

// collect prints the answers that have arrived, in label order.
func (s *script) collect() string {
	var b strings.Builder
	labels := slices.Sorted(func(yield func(string) bool) {
		for l := range s.joins {
			if !yield(l) {
				return
			}
		}
	})
	for _, l := range labels {
		ch := s.joins[l]
		select {
		case r := <-ch:
			delete(s.joins, l)
			cl := s.client(l)
			if r.MemberID != "" && (r.Err == nil || errors.Is(r.Err, ErrMemberIDRequired)) {
				cl.member = r.MemberID
			}
			if r.Err != nil {
				fmt.Fprintf(&b, "join %s: %s member=%s\n", l, errText(r.Err), r.MemberID)
				continue
			}
			cl.generation = r.Generation
			fmt.Fprintf(&b, "join %s: ok gen=%d member=%s leader=%s protocol=%s", l, r.Generation, r.MemberID, r.Leader, r.Protocol)
			if r.Members != nil {
				var ms []string
				for _, m := range r.Members {
					ms = append(ms, m.MemberID+":"+showMetadata(m.Metadata))
				}
				fmt.Fprintf(&b, " members=[%s]", strings.Join(ms, " "))
			}
			if r.SkipAssignment {
				b.WriteString(" skip-assignment")
			}
			b.WriteString("\n")
		default:
		}
	}
	labels = labels[:0]
	for l := range s.syncs {
		labels = append(labels, l)
	}
	slices.Sort(labels)
	for _, l := range labels {
		select {
		case r := <-s.syncs[l]:
			delete(s.syncs, l)
			if r.Err != nil {
				fmt.Fprintf(&b, "sync %s: %s\n", l, errText(r.Err))
				continue
			}
			fmt.Fprintf(&b, "sync %s: ok assignment=%q\n", l, r.Assignment)
		default:
		}
	}
	return b.String()
}

func (s *script) state(group string) string {
	d, err := s.c.DescribeGroup(group)
	if err != nil {
		return fmt.Sprintf("state: %s\n", errText(err))
	}
	var ms []string
	for _, m := range d.Members {
		e := m.MemberID
		if m.InstanceID != "" {
			e += "(" + m.InstanceID + ")"
		}
		if m.Assignment != nil {
			e += "=" + string(m.Assignment)
		}
		ms = append(ms, e)
	}
	return fmt.Sprintf("%s: %s gen=%d protocol=%s leader=%s members=[%s]\n", d.Group, d.State, d.Generation, d.Protocol, d.Leader, strings.Join(ms, " "))
}

// encodeGroupValueAs encodes v in value version 0 to 3 of the group record
// (records.go; the coordinator writes version 3).
func encodeGroupValueAs(v *groupValue, version int16) []byte {
	e := encoder{}
	e.i16(version)
	e.str(v.protocolType)
	e.i32(v.generation)
	e.nstr(v.protocol)
	e.nstr(v.leader)
	if version >= 2 {
		e.i64(v.stateMS)
	}
	e.i32(int32(len(v.members)))
	for _, m := range v.members {
		e.str(m.id)
		if version >= 3 {
			e.nstr(m.instanceID)
		}
		e.str(m.clientID)
		e.str(m.clientHost)
		if version >= 1 {
			e.i32(m.rebalanceMS)
		}
		e.i32(m.sessionMS)
		e.bytes(m.subscription)
		e.bytes(m.assignment)
	}
	return e.b
}
