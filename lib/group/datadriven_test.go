package group

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/mqproject/mq/lib/clock"
	"github.com/mqproject/mq/lib/record"
)

var rewrite = flag.Bool("rewrite", false, "rewrite the expected output in testdata/*.txt with what the code produces")

// TestDataDriven runs the scripts testdata/*.txt against a coordinator on a
// fake clock and an in-memory store. A script is a sequence of cases
// separated by blank lines:
//
//	<commands>
//	----
//	<expected output>
//
// Clients are named by labels; the script remembers each label's member id
// and generation from the answers it got, and uses them unless a command
// says otherwise. Every answer that arrives while a command runs (joins
// and syncs that were waiting, say, when "tick" expires a session) is
// printed. Commands:
//
//	join LABEL [group=G] [member=ID|none] [instance=I] [session=D] [rebalance=D]
//	           [protocols=NAME[:META|:@TOPIC+TOPIC],...] [type=T] [v=N]
//	sync LABEL [gen=N] [member=ID] [assign=LABEL:DATA,...]
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
//	hold on|off                    (the store holds the waits of later appends)
//	release #N [err=timeout|lost]  (end held wait N: durable, timed out (the
//	                                batch stays), or lost to a new leader's
//	                                truncation)
//	unload [group=G] / load [group=G] (the group's partition)
//	append-group [group=G] v=N gen=N [protocol=P] [leader=LABEL]
//	             [members=LABEL[:ASSIGNMENT],...]
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
	files, err := filepath.Glob(filepath.Join("testdata", "*.txt"))
	if err != nil || len(files) == 0 {
		t.Fatalf("no scripts: %v", err)
	}
	for _, file := range files {
		t.Run(filepath.Base(file), func(t *testing.T) { runScript(t, file) })
	}
}

type client struct {
	member     string
	generation int32
	instance   string
}

type script struct {
	t            *testing.T
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

func newScript(t *testing.T) *script {
	s := &script{t: t, initialDelay: 3 * time.Second, clock: clock.NewManual(time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)), store: &MemStore{},
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

func runScript(t *testing.T, file string) {
	content, err := os.ReadFile(file)
	if err != nil {
		t.Fatal(err)
	}
	s := newScript(t)
	defer func() {
		if !s.stalled {
			s.c.Close()
		}
	}()
	var out strings.Builder
	blocks := strings.Split(strings.TrimSpace(string(content)), "\n\n")
	for i, block := range blocks {
		input, want, found := strings.Cut(block, "----\n")
		if !found {
			input, want, found = strings.Cut(block, "----")
		}
		if !found {
			t.Fatalf("%s: case %d has no ---- line", file, i+1)
		}
		var got strings.Builder
		for line := range strings.SplitSeq(strings.TrimSpace(input), "\n") {
			if line = strings.TrimSpace(line); line == "" || strings.HasPrefix(line, "#") {
				continue
			}
			got.WriteString(s.runWithDeadline(line))
			got.WriteString(s.collect())
		}
		if *rewrite {
			fmt.Fprintf(&out, "%s\n----\n%s\n", strings.TrimRight(input, "\n"), strings.TrimRight(got.String(), "\n"))
			if i < len(blocks)-1 {
				out.WriteString("\n")
			}
			continue
		}
		if strings.TrimSpace(got.String()) != strings.TrimSpace(want) {
			t.Errorf("%s: case %d:\n%s\ngot:\n%s\nwant:\n%s", file, i+1, strings.TrimSpace(input), got.String(), want)
		}
	}
	if *rewrite {
		if err := os.WriteFile(file, []byte(out.String()), 0o644); err != nil {
			t.Fatal(err)
		}
	}
}

// args splits "k=v" words from positional ones.
func args(words []string) (map[string]string, []string) {
	kv := map[string]string{}
	var pos []string
	for _, w := range words {
		if k, v, ok := strings.Cut(w, "="); ok {
			kv[k] = v
		} else {
			pos = append(pos, w)
		}
	}
	return kv, pos
}

func dur(s, def string) time.Duration {
	if s == "" {
		s = def
	}
	d, err := time.ParseDuration(s)
	if err != nil {
		panic(err)
	}
	return d
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

func (s *script) run(line string) string {
	words := strings.Fields(line)
	kv, pos := args(words[1:])
	group := kv["group"]
	if group == "" {
		group = "g"
	}
	memberOf := func(cl *client) string {
		if v, ok := kv["member"]; ok {
			return v
		}
		return cl.member
	}
	gen := func(cl *client) int32 {
		if v, ok := kv["gen"]; ok {
			n, _ := strconv.Atoi(v)
			return int32(n)
		}
		return cl.generation
	}
	switch words[0] {
	case "join":
		label := pos[0]
		cl := s.client(label)
		if v, ok := kv["instance"]; ok {
			cl.instance = v
		}
		member := cl.member
		if v, ok := kv["member"]; ok {
			member = v
			if v == "none" {
				member = ""
			}
		}
		var protocols []Protocol
		for _, p := range strings.Split(cmpOr(kv["protocols"], "range"), ",") {
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
		v, _ := strconv.Atoi(cmpOr(kv["v"], "9"))
		ch := s.c.Join(JoinRequest{
			Group: group, MemberID: member, InstanceID: cl.instance, ClientID: label, ClientHost: "/127.0.0.1",
			SessionTimeout: dur(kv["session"], "10s"), RebalanceTimeout: dur(kv["rebalance"], "30s"),
			ProtocolType: cmpOr(kv["type"], "consumer"), Protocols: protocols,
			RequireKnownMemberID: v >= 4, SkipAssignmentOK: v >= 9,
		})
		s.joins[label] = ch
		if len(ch) == 0 {
			return fmt.Sprintf("join %s: waiting\n", label)
		}
		return ""
	case "sync":
		label := pos[0]
		cl := s.client(label)
		assign := map[string][]byte{}
		if a := kv["assign"]; a != "" {
			for _, p := range strings.Split(a, ",") {
				l, data, _ := strings.Cut(p, ":")
				assign[s.client(l).member] = []byte(data)
			}
		}
		if kv["assign"] == "" {
			assign = nil
		}
		ch := s.c.Sync(SyncRequest{Group: group, MemberID: memberOf(cl), InstanceID: cl.instance, Generation: gen(cl), Assignments: assign})
		s.syncs[label] = ch
		if len(ch) == 0 {
			return fmt.Sprintf("sync %s: waiting\n", label)
		}
		return ""
	case "heartbeat":
		label := pos[0]
		cl := s.client(label)
		return fmt.Sprintf("heartbeat %s: %s\n", label, errText(s.c.Heartbeat(group, memberOf(cl), cl.instance, gen(cl))))
	case "leave":
		var members []LeaveMember
		var names []string
		for _, w := range pos {
			// LABEL, @INSTANCE, or LABEL@INSTANCE for both ids.
			label, inst, _ := strings.Cut(w, "@")
			lm := LeaveMember{InstanceID: inst}
			if label != "" {
				lm.MemberID = s.client(label).member
			}
			members = append(members, lm)
			names = append(names, w)
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
		r := CommitRequest{Group: group, Generation: -1}
		if pos[0] != "-" {
			cl := s.client(pos[0])
			r.MemberID, r.InstanceID, r.Generation = memberOf(cl), cl.instance, gen(cl)
		}
		for _, w := range pos[1:] {
			tp, off, _ := strings.Cut(w, "@")
			o, _ := strconv.ParseInt(off, 10, 64)
			r.Offsets = append(r.Offsets, CommitOffset{TopicPartition: parseTP(tp), Offset: Offset{Offset: o, LeaderEpoch: -1}})
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
		for _, w := range pos {
			tps = append(tps, parseTP(w))
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
		s.store.Hold(pos[0] == "on")
		return ""
	case "release":
		id, _ := strconv.Atoi(strings.TrimPrefix(pos[0], "#"))
		release := func(h *HeldWait) { h.Release(nil) }
		switch kv["err"] {
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
		panic(fmt.Sprintf("%s: no held wait #%d", line, id))
	case "unload":
		s.c.Unload(s.c.Partition(group))
		return ""
	case "load":
		if err := s.c.Load(s.c.Partition(group)); err != nil {
			return fmt.Sprintf("load: %s\n", errText(err))
		}
		return ""
	case "append-group":
		version, _ := strconv.Atoi(kv["v"])
		generation, _ := strconv.Atoi(kv["gen"])
		v := groupValue{protocolType: "consumer", generation: int32(generation), protocol: kv["protocol"], leader: kv["leader"]}
		if m := kv["members"]; m != "" {
			for _, w := range strings.Split(m, ",") {
				label, assignment, _ := strings.Cut(w, ":")
				v.members = append(v.members, storedMember{id: label, clientID: label, clientHost: "/127.0.0.1",
					rebalanceMS: 30000, sessionMS: 10000, subscription: []byte("m"), assignment: []byte(assignment)})
				cl := s.client(label)
				cl.member, cl.generation = label, int32(generation)
			}
		}
		batch, err := record.Build(record.BuildOptions{}, []record.Record{{Key: groupKey(group), Value: encodeGroupValueAs(&v, int16(version))}})
		if err != nil {
			panic(err)
		}
		if _, err := s.store.Append(s.c.Partition(group), batch); err != nil {
			panic(err)
		}
		return ""
	case "tick":
		s.clock.Advance(dur(pos[0], ""))
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
		s.initialDelay, s.alone = dur(kv["delay"], "3s"), dur(kv["alone"], "0s")
		s.c.Close()
		s.collect()
		s.open()
		return fmt.Sprintf("config: delay=%s alone=%s\n", s.initialDelay, s.alone)
	case "expire":
		s.c.ExpireOffsets()
		return ""
	}
	panic(fmt.Sprintf("unknown command %q", line))
}

var errLostLeadership = errors.New("not leader any more")

// runWithDeadline runs a command and settles its writes, failing the test
// if that does not end within commandDeadline.
// run's failures are panics, which reach the test goroutine as failures.
func (s *script) runWithDeadline(line string) string {
	answers := make(chan string, 1)
	failed := make(chan any, 1)
	go func() {
		defer func() {
			if r := recover(); r != nil {
				failed <- r
			}
		}()
		out := s.run(line)
		answers <- out + s.settle()
	}()
	select {
	case o := <-answers:
		return o
	case r := <-failed:
		s.t.Fatal(r)
		return ""
	case <-time.After(commandDeadline):
		s.stalled = true
		s.t.Fatalf("%q did not return within %s: blocked behind a held wait?", line, commandDeadline)
		return ""
	}
}

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
			if !slices.Contains(s.store.Held(), h) || w.op.gone.Err() != nil || !h.Waiting() {
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

func parseTP(s string) TopicPartition {
	topic, p, _ := strings.Cut(s, "/")
	n, _ := strconv.Atoi(p)
	return TopicPartition{Topic: topic, Partition: int32(n)}
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
