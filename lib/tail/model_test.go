package tail

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"strings"
	"syscall"
	"testing"
	"time"

	tea "github.com/charmbracelet/bubbletea"
	"github.com/charmbracelet/lipgloss"
	"github.com/charmbracelet/x/ansi"
	"github.com/muesli/termenv"

	"github.com/mqproject/mq/lib/admin"
)

func rate(v float64) *float64 { return &v }

// fixture is a snapshot of a two-broker cluster: topics "orders" (two
// partitions, the second under-replicated) and "audit", groups "billing"
// (lagging, stalled) and "search" (caught up).
func fixture() Snapshot {
	return Snapshot{
		TimeMillis: t0.UnixMilli(), ClusterID: "cid", Controller: 1, Errors: []string{},
		Brokers: []Broker{
			{ID: 1, Host: "n1", Port: 9092, State: admin.BrokerAlive, Controller: true, PartitionsLed: 2, BytesInPerSec: rate(2048)},
			{ID: 2, Host: "n2", Port: 9092, State: admin.BrokerFenced, PartitionsLed: 1, BytesInPerSec: rate(0)},
		},
		Topics: []Topic{
			{Topic: "orders", UnderReplicated: 1, Partitions: []Partition{
				{Partition: 0, Leader: 1, Replicas: []int32{1, 2}, ISR: []int32{1, 2}, HighWatermark: 500, SizeBytes: 9000, MessagesInPerSec: rate(10), BytesInPerSec: rate(100)},
				{Partition: 1, Leader: 1, Replicas: []int32{1, 2}, ISR: []int32{1}, UnderReplicated: true, HighWatermark: 700, SizeBytes: 12000, MessagesInPerSec: rate(50), BytesInPerSec: rate(900)},
			}},
			{Topic: "audit", Partitions: []Partition{
				{Partition: 0, Leader: 2, Replicas: []int32{2}, ISR: []int32{2}, HighWatermark: 30, SizeBytes: 300, MessagesInPerSec: rate(1), BytesInPerSec: rate(5)},
			}},
		},
		Groups: []Group{
			{Group: "billing", State: "Stable", Members: []Member{{MemberID: "m-1", ClientID: "biller", Host: "/10.0.0.1"}}, Lag: 250, LagTimeMillis: 90_000, Stalled: true,
				Partitions: []GroupPartition{
					{Topic: "orders", Partition: 0, MemberID: "m-1", Committed: 250, HighWatermark: 500, Lag: 250, LagTimeMillis: 90_000, Stalled: true, LagHistory: []int64{100, 150, 200, 250}},
				}},
			{Group: "search", State: "Empty", Members: []Member{}, LagTimeMillis: 0,
				Partitions: []GroupPartition{
					{Topic: "audit", Partition: 0, Committed: 30, HighWatermark: 30, Lag: 0, LagTimeMillis: 0, LagHistory: []int64{0, 0}},
				}},
		},
	}
}

// newTestModel is a Model with a renderer of the given colour profile,
// no refresh loop, a 120x30 screen and the fixture loaded.
func newTestModel(t *testing.T, profile termenv.Profile) Model {
	t.Helper()
	r := lipgloss.NewRenderer(io.Discard)
	r.SetColorProfile(profile)
	m := NewModel(Options{Interval: time.Second, Renderer: r})
	m = update(t, m, tea.WindowSizeMsg{Width: 120, Height: 30})
	return update(t, m, snapshotMsg{snap: fixture()})
}

func update(t *testing.T, m Model, msg tea.Msg) Model {
	t.Helper()
	next, _ := m.Update(msg)
	return next.(Model)
}

func keys(t *testing.T, m Model, ks ...string) Model {
	t.Helper()
	for _, k := range ks {
		var msg tea.KeyMsg
		switch k {
		case "enter":
			msg = tea.KeyMsg{Type: tea.KeyEnter}
		case "esc":
			msg = tea.KeyMsg{Type: tea.KeyEsc}
		case "tab":
			msg = tea.KeyMsg{Type: tea.KeyTab}
		case "down":
			msg = tea.KeyMsg{Type: tea.KeyDown}
		case "up":
			msg = tea.KeyMsg{Type: tea.KeyUp}
		default:
			msg = tea.KeyMsg{Type: tea.KeyRunes, Runes: []rune(k)}
		}
		m = update(t, m, msg)
	}
	return m
}

// screen is the model's view without styles.
func screen(m Model) string { return ansi.Strip(m.View()) }

// selected is the line of the screen with the cursor.
func selected(t *testing.T, m Model) string {
	t.Helper()
	for _, l := range strings.Split(screen(m), "\n") {
		if strings.HasPrefix(l, "> ") {
			return l
		}
	}
	t.Fatalf("no selected row on screen:\n%s", screen(m))
	return ""
}

func TestViewsSwitchWithTheirKeysAndTheHelpLineNamesThem(t *testing.T) {
	m := newTestModel(t, termenv.Ascii)
	s := screen(m)
	for _, want := range []string{"[topics]", "HIGH-WATERMARK", "orders", "under-replicated", "q quit", "/ filter", "s sort", "enter detail"} {
		if !strings.Contains(s, want) {
			t.Errorf("topics view lacks %q:\n%s", want, s)
		}
	}
	for _, c := range []struct {
		keys []string
		want []string
	}{
		{[]string{"2"}, []string{"[groups]", "billing", "STALLED", "LAG-TIME", "1m30s", "▄▆▇█"}},
		{[]string{"g"}, []string{"[groups]"}},
		{[]string{"3"}, []string{"[brokers]", "fenced", "leader", "2.0KiB/s"}},
		{[]string{"b"}, []string{"[brokers]"}},
		{[]string{"1"}, []string{"[topics]"}},
		{[]string{"tab"}, []string{"[groups]"}},
		{[]string{"tab", "tab"}, []string{"[brokers]"}},
		{[]string{"4"}, []string{"[queues]"}},
		{[]string{"u"}, []string{"[queues]"}},
		{[]string{"tab", "tab", "tab"}, []string{"[queues]"}},
		{[]string{"tab", "tab", "tab", "tab"}, []string{"[topics]"}},
	} {
		got := screen(keys(t, m, c.keys...))
		for _, want := range c.want {
			if !strings.Contains(got, want) {
				t.Errorf("after %v the screen lacks %q:\n%s", c.keys, want, got)
			}
		}
	}
}

// TestQueuesViewShowsShareGroups: the queues view has a row per
// share-partition with its window, oldest unacknowledged age and dead
// letters, sorted as asked.
func TestQueuesViewShowsShareGroups(t *testing.T) {
	snap := fixture()
	snap.Queues = queues(admin.QueueDescriptions{
		{Group: "mail", State: "Stable", Members: []admin.QueueMember{{MemberID: "w-1"}}, DeadLetterTopic: "mail.dead", DeadLetters: 3,
			Partitions: []admin.QueuePartition{
				{Topic: "outbox", Partition: 0, StartOffset: 40, LogEndOffset: 90, InFlight: 10, Available: 45, Acquired: 5, OldestUnackedMillis: 125_000},
				{Topic: "outbox", Partition: 1, StartOffset: 7, LogEndOffset: 7},
			}},
		{Group: "cron", State: "Empty", Members: []admin.QueueMember{}, Partitions: []admin.QueuePartition{
			{Topic: "jobs", Partition: 0, StartOffset: 0, LogEndOffset: 3, Available: 3, Archived: 1, OldestUnackedMillis: 9_000},
		}},
	})
	m := update(t, newTestModel(t, termenv.Ascii), snapshotMsg{snap: snap})
	m = keys(t, m, "4")
	s := screen(m)
	for _, want := range []string{"[queues]", "QUEUE", "OLDEST-UNACKED", "DEAD-LETTERS", "3 in mail.dead", "2m5s", "outbox"} {
		if !strings.Contains(s, want) {
			t.Errorf("queues view lacks %q:\n%s", want, s)
		}
	}
	if l := selected(t, m); !strings.Contains(l, "cron") {
		t.Errorf("by name, first row %q, want cron", l)
	}
	m = keys(t, m, "s") // available
	if l := selected(t, m); !strings.Contains(l, "mail") || !strings.Contains(l, "45") {
		t.Errorf("by available, first row %q, want mail/outbox-0", l)
	}
	m = keys(t, m, "s") // oldest
	if l := selected(t, m); !strings.Contains(l, "2m5s") {
		t.Errorf("by oldest, first row %q, want the one 2m5s old", l)
	}
	if q := snap.Queues[1]; q.Group != "mail" || q.Available != 45 || q.Acquired != 5 || q.OldestUnackedMillis != 125_000 {
		t.Errorf("queue totals: %+v", q)
	}
	m = keys(t, m, "/", "z", "z", "z", "enter")
	if s := screen(m); !strings.Contains(s, "no queues match the filter") {
		t.Errorf("filtered out:\n%s", s)
	}

	// At 80 columns the columns that say whether work waits stay.
	m = update(t, keys(t, m, "/", "esc"), tea.WindowSizeMsg{Width: 80, Height: 30})
	s = screen(m)
	for _, l := range strings.Split(s, "\n") {
		if ansi.StringWidth(l) > 80 {
			t.Errorf("a line cut at 80 columns: %q", l)
		}
	}
	for _, want := range []string{"QUEUE", "TOPIC", "AVAILABLE", "OLDEST-UNACKED", "DEAD-LETTERS", "3 in mail.dead"} {
		if !strings.Contains(s, want) {
			t.Errorf("%q not on an 80-column screen:\n%s", want, s)
		}
	}
	if strings.Contains(s, "ARCHIVED") {
		t.Errorf("ARCHIVED still on an 80-column screen, before more useful columns:\n%s", s)
	}
}

func TestCursorMovesWithArrowsAndJKAndEnterOpensTheDetail(t *testing.T) {
	m := newTestModel(t, termenv.Ascii)
	// Topics by name: audit/0, orders/0, orders/1.
	if l := selected(t, m); !strings.Contains(l, "audit") {
		t.Fatalf("first row selected: %q", l)
	}
	m = keys(t, m, "j", "down")
	if l := selected(t, m); !strings.Contains(l, "orders") || !strings.Contains(l, "under-replicated") {
		t.Errorf("after j, down: %q, want orders/1", l)
	}
	m = keys(t, m, "j", "j") // stays on the last row
	m = keys(t, m, "k", "up")
	if l := selected(t, m); !strings.Contains(l, "audit") {
		t.Errorf("after k, up: %q, want audit", l)
	}
	m = keys(t, m, "j", "enter")
	s := screen(m)
	if !strings.Contains(s, "topic orders  1 under-replicated  partitions 2") || !strings.Contains(s, "1 under-replicated") ||
		!strings.Contains(s, "groups reading orders") || !strings.Contains(s, "billing") || !strings.Contains(s, "esc back") {
		t.Errorf("topic detail:\n%s", s)
	}
	m = keys(t, m, "esc")
	if !strings.Contains(screen(m), "[topics]") || !strings.Contains(selected(t, m), "orders") {
		t.Errorf("esc did not go back to the topics list at the same row:\n%s", screen(m))
	}
	m = keys(t, m, "2", "enter")
	s = screen(m)
	for _, want := range []string{"group billing  STALLED  lag 250", "state Stable", "members 1", "lag 250", "STALLED", "biller", "m-1"} {
		if !strings.Contains(s, want) {
			t.Errorf("group detail lacks %q:\n%s", want, s)
		}
	}
}

func TestFilterKeepsMatchingRowsAndEscClearsIt(t *testing.T) {
	m := newTestModel(t, termenv.Ascii)
	m = keys(t, m, "/", "a", "u", "d")
	if s := screen(m); !strings.Contains(s, "/aud") {
		t.Errorf("the filter input is not shown while typing:\n%s", s)
	}
	m = keys(t, m, "enter")
	s := screen(m)
	if !strings.Contains(s, "audit") || strings.Contains(s, "orders") || !strings.Contains(s, "filter: aud") {
		t.Errorf("filter aud:\n%s", s)
	}
	// Groups match by group or topic name.
	g := screen(keys(t, m, "2"))
	if !strings.Contains(g, "search") || strings.Contains(g, "billing") {
		t.Errorf("groups filtered by topic aud:\n%s", g)
	}
	m = keys(t, m, "/", "z", "z", "enter")
	if s := screen(m); !strings.Contains(s, "no topics match the filter") {
		t.Errorf("nothing matches:\n%s", s)
	}
	m = keys(t, m, "esc")
	if s := screen(m); !strings.Contains(s, "orders") || !strings.Contains(s, "audit") {
		t.Errorf("esc did not clear the filter:\n%s", s)
	}
	// Keys typed into the filter are text, not commands.
	m = keys(t, m, "/", "q", "2", "esc")
	if s := screen(m); !strings.Contains(s, "[topics]") || !strings.Contains(s, "orders") {
		t.Errorf("q and 2 typed in the filter acted:\n%s", s)
	}
}

func TestSortCyclesTheOrdersOfTheView(t *testing.T) {
	m := newTestModel(t, termenv.Ascii)
	m = keys(t, m, "s") // msg/s: orders/1 (50) first
	if s := screen(m); !strings.Contains(s, "sort: msg/s") || !strings.Contains(selected(t, m), "orders") {
		t.Errorf("sort msg/s:\n%s", s)
	}
	m = keys(t, m, "s", "s") // state: the under-replicated one first
	if l := selected(t, m); !strings.Contains(screen(m), "sort: state") || !strings.Contains(l, "under-replicated") {
		t.Errorf("sort state: %q", l)
	}
	m = keys(t, m, "s")
	if !strings.Contains(screen(m), "sort: name") {
		t.Errorf("sort did not cycle back to name:\n%s", screen(m))
	}
	m = keys(t, m, "3", "s")
	if s := screen(m); !strings.Contains(s, "sort: leads") {
		t.Errorf("brokers sort:\n%s", s)
	}
}

func TestQuitKeysEndTheProgram(t *testing.T) {
	for _, msg := range []tea.KeyMsg{{Type: tea.KeyRunes, Runes: []rune("q")}, {Type: tea.KeyCtrlC}} {
		m := newTestModel(t, termenv.Ascii)
		_, cmd := m.Update(msg)
		if cmd == nil {
			t.Fatalf("%v: no command", msg)
		}
		if _, ok := cmd().(tea.QuitMsg); !ok {
			t.Errorf("%v: command is not tea.Quit", msg)
		}
	}
}

func TestViewFitsTheTerminalAfterAResize(t *testing.T) {
	m := newTestModel(t, termenv.ANSI256)
	for _, size := range [][2]int{{40, 8}, {200, 60}, {20, 5}, {30, 2}, {10, 1}} {
		m = update(t, m, tea.WindowSizeMsg{Width: size[0], Height: size[1]})
		lines := strings.Split(m.View(), "\n")
		if len(lines) != size[1] {
			t.Errorf("%dx%d: %d lines", size[0], size[1], len(lines))
		}
		for _, l := range lines {
			if w := ansi.StringWidth(l); w > size[0] {
				t.Errorf("%dx%d: line of width %d: %q", size[0], size[1], w, ansi.Strip(l))
			}
		}
		if !strings.Contains(lines[len(lines)-1], "1/t") {
			t.Errorf("%dx%d: the last line is not the help line: %q", size[0], size[1], ansi.Strip(lines[len(lines)-1]))
		}
	}
	// A short screen scrolls to keep the cursor on it.
	m = update(t, m, tea.WindowSizeMsg{Width: 120, Height: 6})
	m = keys(t, m, "j", "j")
	if l := selected(t, m); !strings.Contains(l, "orders") {
		t.Errorf("cursor on the last row scrolled off a 6-line screen:\n%s", screen(m))
	}
}

func TestDisconnectedKeepsTheDataAndRecovers(t *testing.T) {
	m := newTestModel(t, termenv.Ascii)
	lost := fmt.Errorf("cluster describe: %w", &net0{})
	m = update(t, m, fetchErrMsg{err: lost, at: t0.Add(time.Minute)})
	s := screen(m)
	if !strings.Contains(s, "DISCONNECTED since 03:05:05") || !strings.Contains(s, "retrying every 1s") || !strings.Contains(s, "orders") {
		t.Errorf("disconnected:\n%s", s)
	}
	if !strings.Contains(s, "cannot reach mqd") {
		t.Errorf("a connection error is not called one:\n%s", s)
	}
	// A second failure keeps the time it started.
	m = update(t, m, fetchErrMsg{err: errors.New("still gone"), at: t0.Add(2 * time.Minute)})
	if s := screen(m); !strings.Contains(s, "since 03:05:05") || !strings.Contains(s, "still gone") {
		t.Errorf("second failure:\n%s", s)
	}
	m = update(t, m, snapshotMsg{snap: fixture()})
	if s := screen(m); strings.Contains(s, "DISCONNECTED") || strings.Contains(s, "disconnected") {
		t.Errorf("recovered, still disconnected:\n%s", s)
	}
}

// net0 is a connection error (client.IsUnreachable).
type net0 struct{}

func (*net0) Error() string   { return "connection refused" }
func (*net0) Unwrap() error   { return syscall.ECONNREFUSED }
func (*net0) Timeout() bool   { return false }
func (*net0) Temporary() bool { return false }

func TestRefreshLoopFetchesAgainAfterEachAnswer(t *testing.T) {
	calls := 0
	m := NewModel(Options{Interval: time.Millisecond, Fetch: func() (Snapshot, error) {
		calls++
		if calls == 2 {
			return Snapshot{}, errors.New("gone")
		}
		return fixture(), nil
	}})
	cmd := m.Init()
	var msgs []string
	for range 6 {
		msg := cmd()
		msgs = append(msgs, fmt.Sprintf("%T", msg))
		var next tea.Model
		next, cmd = m.Update(msg)
		m = next.(Model)
		if cmd == nil {
			t.Fatalf("no next command after %T", msg)
		}
	}
	want := "tail.snapshotMsg tail.tickMsg tail.fetchErrMsg tail.tickMsg tail.snapshotMsg tail.tickMsg"
	if got := strings.Join(msgs, " "); got != want {
		t.Errorf("messages %s, want %s", got, want)
	}
	if !m.connected {
		t.Error("not connected after a good refresh")
	}
}

func TestNoColourRendersPlainTextAndColourMarksTrouble(t *testing.T) {
	plain := newTestModel(t, termenv.Ascii)
	for _, k := range []string{"1", "2", "3"} {
		if v := keys(t, plain, k).View(); strings.Contains(v, "\x1b[") {
			t.Errorf("view %s with the Ascii profile (NO_COLOR) has escape sequences: %q", k, v)
		}
	}
	// The words carry the state without colour.
	if s := plain.View(); !strings.Contains(s, "under-replicated") {
		t.Errorf("no-colour view does not say under-replicated:\n%s", s)
	}
	for _, profile := range []termenv.Profile{termenv.ANSI256, termenv.ANSI} {
		coloured := newTestModel(t, profile)
		red, _, _ := strings.Cut(coloured.st.bad.Render("X"), "X")
		if red == "" {
			t.Fatalf("profile %v renders no colour", profile)
		}
		// Red (ANSI red, the same in 16 and 256 colours) on the ISR and
		// the state of the under-replicated partition.
		if v := coloured.View(); !strings.Contains(v, red+"under-replicated") || !strings.Contains(v, red+"1 ") {
			t.Errorf("profile %v: under-replicated is not red:\n%q", profile, v)
		}
	}
}

func TestWriteTableOnce(t *testing.T) {
	var b strings.Builder
	if err := WriteTable(&b, fixture()); err != nil {
		t.Fatal(err)
	}
	s := b.String()
	for _, want := range []string{"CLUSTER cid  CONTROLLER 1", "BROKER", "fenced", "orders  1     1       1,2       1    under-replicated", "billing", "STALLED"} {
		if !strings.Contains(s, want) {
			t.Errorf("--once table lacks %q:\n%s", want, s)
		}
	}
	if strings.Contains(s, "\x1b[") || strings.Contains(s, "> ") {
		t.Errorf("--once table has escapes or a cursor:\n%s", s)
	}
}

func TestTabsAreNamesNotCounts(t *testing.T) {
	m := newTestModel(t, termenv.Ascii)
	tabs := strings.Split(screen(m), "\n")[1]
	if !strings.HasPrefix(tabs, "[topics]  groups   brokers ") {
		t.Errorf("tab line %q, want the views' names alone, the current one in brackets", tabs)
	}
	if m = keys(t, m, "2"); !strings.HasPrefix(strings.Split(screen(m), "\n")[1], " topics  [groups]  brokers ") {
		t.Errorf("tab line after 2: %q", strings.Split(screen(m), "\n")[1])
	}
}

func TestANarrowTerminalDropsTheLeastUsefulColumnsFirst(t *testing.T) {
	m := newTestModel(t, termenv.Ascii)
	m = update(t, m, tea.WindowSizeMsg{Width: 80, Height: 30})
	for _, tc := range []struct {
		keys       []string
		want, gone []string
	}{
		{[]string{"1"}, []string{"TOPIC", "PART", "STATE", "MSG/S", "under-replicated", "50/s"}, []string{"LOG-START"}},
		{[]string{"2"}, []string{"GROUP", "TOPIC", "LAG ", "LAG-TIME", "LAG-TREND", "STALLED", "1m30s", "▄▆▇█"}, []string{"HIGH-WATERMARK", "COMMITTED"}},
		{[]string{"3"}, []string{"BROKER", "STATE", "fenced", "CONTROLLER"}, nil},
		{[]string{"2", "enter"}, []string{"LAG-TIME", "LAG-TREND", "STALLED"}, nil},
	} {
		s := screen(keys(t, m, tc.keys...))
		for _, l := range strings.Split(s, "\n") {
			// A detail view's first line may lose its end (the least
			// useful facts); no table line and no help line is cut.
			if ansi.StringWidth(l) > 80 || strings.HasSuffix(l, "…") && !strings.HasPrefix(l, "group ") {
				t.Errorf("keys %v: a line cut at 80 columns: %q", tc.keys, l)
			}
		}
		for _, w := range tc.want {
			if !strings.Contains(s, w) {
				t.Errorf("keys %v: %q not on an 80-column screen:\n%s", tc.keys, w, s)
			}
		}
		for _, g := range tc.gone {
			if strings.Contains(s, g) {
				t.Errorf("keys %v: %q still on an 80-column screen, before more useful columns:\n%s", tc.keys, g, s)
			}
		}
	}
}

func TestAnIncidentIsSaidOnceACauseAndIsNotADisconnection(t *testing.T) {
	m := newTestModel(t, termenv.Ascii)
	snap := fixture()
	snap.QuorumLost = true
	snap.Brokers[1].State = BrokerUnreachable
	snap.Topics[1].Partitions[0].Error = "leader 2 unreachable"
	snap.Errors = []string{"broker 2 unreachable (n2:9092): connection refused", "controller without quorum: no controller is elected"}
	m = update(t, m, snapshotMsg{snap: snap})
	lines := strings.Split(screen(m), "\n")
	if !strings.Contains(lines[0], "controller without quorum") || strings.Contains(lines[0], "disconnected") {
		t.Errorf("status line %q, want the quorum lost and no disconnection", lines[0])
	}
	if want := "! broker 2 unreachable (n2:9092): connection refused · controller without quorum: no controller is elected"; lines[2] != want {
		t.Errorf("third line %q, want %q", lines[2], want)
	}
	if s := screen(m); !strings.Contains(s, "leader unreachable") {
		t.Errorf("audit/0, led by broker 2, not shown as leader unreachable:\n%s", s)
	}
	if s := screen(keys(t, m, "3")); !strings.Contains(s, "unreachable") {
		t.Errorf("brokers view without broker 2 unreachable:\n%s", s)
	}
}

func TestHungTransactionsAreWarnedOnScreenInTheTableAndInTheJSON(t *testing.T) {
	detail := "hung transaction etl-1: Ongoing for 5m0s (timeout 1m0s), producer 7 epoch 2, coordinator 2"
	s := sampleAt(t0, 100, 1000, 100, []int32{1, 2})
	s.HungTransactions = []admin.HealthProblem{{Kind: admin.ProblemHungTransaction, TransactionalID: "etl-1", Broker: 2, Detail: detail}}
	snap := NewTracker(time.Minute).Observe(s)
	if len(snap.HungTransactions) != 1 || snap.HungTransactions[0] != (HungTransaction{TransactionalID: "etl-1", Coordinator: 2, Detail: detail}) {
		t.Fatalf("snapshot's hung transactions %+v", snap.HungTransactions)
	}
	m := newTestModel(t, termenv.Ascii)
	m = update(t, m, snapshotMsg{snap: snap})
	if !strings.Contains(screen(m), "! "+detail) {
		t.Errorf("the screen does not warn of the hung transaction:\n%s", screen(m))
	}
	var out strings.Builder
	if err := WriteTable(&out, snap); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(out.String(), "warning: "+detail) {
		t.Errorf("mqtail --once does not warn of it:\n%s", out.String())
	}
	quiet := NewTracker(time.Minute).Observe(sampleAt(t0, 100, 1000, 100, []int32{1, 2}))
	if b, err := json.Marshal(quiet); err != nil || !strings.Contains(string(b), `"hung_transactions":[]`) {
		t.Errorf("JSON without hung transactions: %s (%v), want an empty list", b, err)
	}
}
