package group

import (
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
}

func newScript(t *testing.T) *script {
	s := &script{t: t, initialDelay: 3 * time.Second, clock: clock.NewManual(time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)), store: &MemStore{},
		clients: map[string]*client{}, joins: map[string]<-chan JoinResult{}, syncs: map[string]<-chan SyncResult{}}
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
			s.t.Fatal(err)
		}
	}
}

func runScript(t *testing.T, file string) {
	content, err := os.ReadFile(file)
	if err != nil {
		t.Fatal(err)
	}
	s := newScript(t)
	defer s.c.Close()
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
			got.WriteString(s.run(line))
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
		errs, err := s.c.CommitOffsets(r)
		if err != nil {
			return fmt.Sprintf("commit: %s\n", errText(err))
		}
		var b strings.Builder
		for i, e := range errs {
			fmt.Fprintf(&b, "commit %s/%d: %s\n", r.Offsets[i].Topic, r.Offsets[i].Partition, errText(e))
		}
		return b.String()
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
		errs, err := s.c.DeleteOffsets(group, tps)
		if err != nil {
			return fmt.Sprintf("delete-offsets: %s\n", errText(err))
		}
		var b strings.Builder
		for i, e := range errs {
			fmt.Fprintf(&b, "delete-offsets %s/%d: %s\n", tps[i].Topic, tps[i].Partition, errText(e))
		}
		return b.String()
	case "delete-group":
		return fmt.Sprintf("delete-group: %s\n", errText(s.c.DeleteGroup(group)))
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
	s.t.Fatalf("unknown command %q", line)
	return ""
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
