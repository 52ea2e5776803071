package tail

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/charmbracelet/bubbles/key"
	"github.com/charmbracelet/bubbles/textinput"
	tea "github.com/charmbracelet/bubbletea"
	"github.com/charmbracelet/lipgloss"
	"github.com/charmbracelet/x/ansi"

	"github.com/mqproject/mq/lib/client"
)

// view is what the screen shows.
type view int

const (
	viewTopics view = iota
	viewGroups
	viewBrokers
	viewQueues
	viewDetail // one topic or group
)

var viewNames = []string{"topics", "groups", "brokers", "queues"}

// Options configure a Model.
type Options struct {
	// Interval is the time between the end of one refresh and the start
	// of the next (--interval).
	Interval time.Duration
	// Fetch takes a snapshot; the Model calls it from a command, one at a
	// time. nil: the Model never refreshes (tests send it snapshots).
	Fetch func() (Snapshot, error)
	// Renderer draws the styles: its colour profile decides whether
	// there is colour (lipgloss.DefaultRenderer detects the terminal's
	// and honours NO_COLOR). nil: lipgloss.DefaultRenderer.
	Renderer *lipgloss.Renderer
}

// Model is mqtail's bubbletea model: the last snapshot, the connection's
// state, and what the user is looking at. Update never blocks: refreshes
// run in commands, and a failed one only marks the model disconnected
// until a later one succeeds.
type Model struct {
	opts Options
	st   styles
	keys keyMap

	snap      Snapshot
	have      bool      // a snapshot arrived
	connected bool      // the last refresh succeeded
	lastErr   string    // why the last refresh failed
	downSince time.Time // when the refreshes started failing

	view   view
	back   view   // the list view a detail view returns to
	detail string // the topic or group the detail view shows
	// detailOf is the list view the detail came from: viewTopics or
	// viewGroups.
	detailOf  view
	detailTop int
	cursor    [4]int
	sortBy    [4]int

	filter    textinput.Model
	filtering bool

	width, height int
}

// Messages of the refresh loop.
type (
	snapshotMsg struct{ snap Snapshot }
	fetchErrMsg struct {
		err error
		at  time.Time
	}
	tickMsg struct{}
)

type keyMap struct {
	quit, topics, groups, brokers, queues, next, prev, up, down, pageUp, pageDown, enter, back, filter, sort key.Binding
}

func newKeyMap() keyMap {
	return keyMap{
		quit:     key.NewBinding(key.WithKeys("q", "ctrl+c"), key.WithHelp("q", "quit")),
		topics:   key.NewBinding(key.WithKeys("1", "t"), key.WithHelp("1/t", "topics")),
		groups:   key.NewBinding(key.WithKeys("2", "g"), key.WithHelp("2/g", "groups")),
		brokers:  key.NewBinding(key.WithKeys("3", "b"), key.WithHelp("3/b", "brokers")),
		queues:   key.NewBinding(key.WithKeys("4", "u"), key.WithHelp("4/u", "queues")),
		next:     key.NewBinding(key.WithKeys("tab", "right", "l"), key.WithHelp("tab", "next view")),
		prev:     key.NewBinding(key.WithKeys("shift+tab", "left", "h")),
		up:       key.NewBinding(key.WithKeys("up", "k"), key.WithHelp("↑/k", "up")),
		down:     key.NewBinding(key.WithKeys("down", "j"), key.WithHelp("↓/j", "down")),
		pageUp:   key.NewBinding(key.WithKeys("pgup", "ctrl+b")),
		pageDown: key.NewBinding(key.WithKeys("pgdown", "ctrl+f", " ")),
		enter:    key.NewBinding(key.WithKeys("enter"), key.WithHelp("enter", "detail")),
		back:     key.NewBinding(key.WithKeys("esc", "backspace"), key.WithHelp("esc", "back")),
		filter:   key.NewBinding(key.WithKeys("/"), key.WithHelp("/", "filter")),
		sort:     key.NewBinding(key.WithKeys("s"), key.WithHelp("s", "sort")),
	}
}

// helpLine is the bindings the bottom line shows, for each kind of view.
func (k keyMap) helpLine(detail bool) []key.Binding {
	if detail {
		return []key.Binding{k.back, k.up, k.down, k.topics, k.groups, k.brokers, k.queues, k.quit}
	}
	return []key.Binding{k.topics, k.groups, k.brokers, k.queues, k.up, k.down, k.enter, k.filter, k.sort, k.quit}
}

// NewModel returns a Model showing the topics view, connecting.
func NewModel(opts Options) Model {
	if opts.Renderer == nil {
		opts.Renderer = lipgloss.DefaultRenderer()
	}
	if opts.Interval <= 0 {
		opts.Interval = time.Second
	}
	f := textinput.New()
	f.Prompt = "/"
	f.Placeholder = "topic or group name"
	return Model{opts: opts, st: newStyles(opts.Renderer), keys: newKeyMap(), filter: f, width: 80, height: 24}
}

// Init starts the first refresh.
func (m Model) Init() tea.Cmd { return m.fetch() }

func (m Model) fetch() tea.Cmd {
	f := m.opts.Fetch
	if f == nil {
		return nil
	}
	return func() tea.Msg {
		s, err := f()
		if err != nil {
			return fetchErrMsg{err: err, at: time.Now()}
		}
		return snapshotMsg{snap: s}
	}
}

func (m Model) tick() tea.Cmd {
	if m.opts.Fetch == nil {
		return nil
	}
	return tea.Tick(m.opts.Interval, func(time.Time) tea.Msg { return tickMsg{} })
}

// Update handles keys, resizes and the refresh loop's messages.
func (m Model) Update(msg tea.Msg) (tea.Model, tea.Cmd) {
	switch msg := msg.(type) {
	case tea.WindowSizeMsg:
		m.width, m.height = msg.Width, msg.Height
		return m, nil
	case snapshotMsg:
		m.snap, m.have, m.connected, m.lastErr, m.downSince = msg.snap, true, true, "", time.Time{}
		m.clampCursors()
		return m, m.tick()
	case fetchErrMsg:
		if m.connected || m.downSince.IsZero() {
			m.downSince = msg.at
		}
		m.connected, m.lastErr = false, errorLine(msg.err)
		return m, m.tick()
	case tickMsg:
		return m, m.fetch()
	case tea.KeyMsg:
		return m.key(msg)
	}
	return m, nil
}

// errorLine is an error in one line, as the tools print it.
func errorLine(err error) string {
	s := err.Error()
	switch {
	case errors.Is(err, context.DeadlineExceeded):
		s = "no answer within the refresh timeout"
	case client.IsUnreachable(err) && !strings.Contains(s, "cannot reach"):
		s = "cannot reach mqd: " + s
	}
	return strings.Join(strings.Fields(s), " ")
}

func (m Model) key(msg tea.KeyMsg) (tea.Model, tea.Cmd) {
	if m.filtering {
		switch msg.Type {
		case tea.KeyEnter:
			m.filtering = false
			m.filter.Blur()
			return m, nil
		case tea.KeyEsc:
			m.filtering = false
			m.filter.Blur()
			m.filter.SetValue("")
			return m, nil
		case tea.KeyCtrlC:
			return m, tea.Quit
		}
		var cmd tea.Cmd
		m.filter, cmd = m.filter.Update(msg)
		m.cursor = [4]int{}
		return m, cmd
	}
	k := m.keys
	switch {
	case key.Matches(msg, k.quit):
		return m, tea.Quit
	case key.Matches(msg, k.topics):
		m.view = viewTopics
	case key.Matches(msg, k.groups):
		m.view = viewGroups
	case key.Matches(msg, k.brokers):
		m.view = viewBrokers
	case key.Matches(msg, k.queues):
		m.view = viewQueues
	case key.Matches(msg, k.next):
		m.view = (m.listView() + 1) % view(len(viewNames))
	case key.Matches(msg, k.prev):
		m.view = (m.listView() + view(len(viewNames)) - 1) % view(len(viewNames))
	case key.Matches(msg, k.up):
		m.move(-1)
	case key.Matches(msg, k.down):
		m.move(1)
	case key.Matches(msg, k.pageUp):
		m.move(-m.bodyHeight())
	case key.Matches(msg, k.pageDown):
		m.move(m.bodyHeight())
	case key.Matches(msg, k.enter):
		m.open()
	case key.Matches(msg, k.back):
		if m.view == viewDetail {
			m.view = m.back
		} else {
			m.filter.SetValue("")
		}
	case key.Matches(msg, k.filter):
		if m.view == viewDetail {
			m.view = m.back
		}
		m.filtering = true
		return m, m.filter.Focus()
	case key.Matches(msg, k.sort):
		if v := m.view; v != viewDetail {
			m.sortBy[v] = (m.sortBy[v] + 1) % len(sortOrders[v])
		}
	}
	return m, nil
}

// listView is the list view on screen, or the one the detail came from.
func (m Model) listView() view {
	if m.view == viewDetail {
		return m.back
	}
	return m.view
}

func (m *Model) move(d int) {
	if m.view == viewDetail {
		m.detailTop = max(0, m.detailTop+d)
		return
	}
	n := len(m.table(m.view).rows)
	m.cursor[m.view] = max(0, min(m.cursor[m.view]+d, n-1))
}

func (m *Model) clampCursors() {
	for v := viewTopics; v <= viewQueues; v++ {
		n := len(m.table(v).rows)
		m.cursor[v] = max(0, min(m.cursor[v], n-1))
	}
}

// open shows the detail of the selected topic or group.
func (m *Model) open() {
	if m.view != viewTopics && m.view != viewGroups {
		return
	}
	rows := m.table(m.view).rows
	if len(rows) == 0 {
		return
	}
	m.detail = rows[m.cursor[m.view]].key
	m.back, m.detailOf, m.view, m.detailTop = m.view, m.view, viewDetail, 0
}

// table is list view v's table as filtered and sorted now.
func (m Model) table(v view) table {
	f := m.filter.Value()
	switch v {
	case viewTopics:
		return topicTable(m.snap, f, m.sortBy[v], "")
	case viewGroups:
		return groupTable(m.snap, f, m.sortBy[v], sparkWidth)
	case viewBrokers:
		brokers := m.snap
		if f != "" {
			brokers.Brokers = nil
			for _, b := range m.snap.Brokers {
				if matches(f, strconv.Itoa(int(b.ID)), b.Host) {
					brokers.Brokers = append(brokers.Brokers, b)
				}
			}
		}
		return brokerTable(brokers, m.sortBy[v])
	case viewQueues:
		return queueTable(m.snap, f, m.sortBy[v])
	}
	return table{}
}

// The screen: two header lines, the body, the help (or filter) line.
const chromeLines = 4

func (m Model) bodyHeight() int { return max(1, m.height-chromeLines) }

// View draws the screen, every line cut to the terminal's width.
func (m Model) View() string {
	lines := []string{m.statusLine(), m.tabLine()}
	switch {
	case !m.connected && m.lastErr != "":
		lines = append(lines, m.st.bad.Render(fmt.Sprintf("DISCONNECTED since %s: %s (retrying every %s)",
			m.downSince.Format(time.TimeOnly), m.lastErr, m.opts.Interval)))
	case len(m.snap.Errors) > 0 || len(m.snap.HungTransactions) > 0:
		// One cause a line in the JSON; here all of them on one line,
		// the brokers that do not answer and a lost quorum first, then
		// the hung transactions.
		warn := slices.Clone(m.snap.Errors)
		for _, h := range m.snap.HungTransactions {
			warn = append(warn, h.Detail)
		}
		lines = append(lines, m.st.bad.Render("! "+strings.Join(warn, " · ")))
	default:
		lines = append(lines, "")
	}
	body := m.body()
	h := m.bodyHeight()
	if len(body) > h {
		body = body[:h]
	}
	lines = append(lines, body...)
	for len(lines) < m.height-1 {
		lines = append(lines, "")
	}
	lines = append(lines, m.bottomLine())
	if m.height > 0 && len(lines) > m.height {
		// A screen shorter than the header keeps the help line.
		lines = append(lines[:m.height-1], lines[len(lines)-1])
	}
	for i, l := range lines {
		lines[i] = ansi.Truncate(l, m.width, "…")
	}
	return strings.Join(lines, "\n")
}

func (m Model) statusLine() string {
	title := m.st.title.Render("mqtail")
	if !m.have && !m.connected && m.lastErr == "" {
		return title + "  connecting…"
	}
	var b strings.Builder
	b.WriteString(title)
	if m.have {
		alive := 0
		for _, br := range m.snap.Brokers {
			if br.State == "alive" {
				alive++
			}
		}
		ctrl := "none"
		switch {
		case m.snap.QuorumLost:
			ctrl = m.st.bad.Render("without quorum")
		case m.snap.Controller >= 0:
			ctrl = strconv.Itoa(int(m.snap.Controller))
		}
		fmt.Fprintf(&b, "  cluster %s  controller %s  brokers %d/%d alive  at %s",
			orDash(m.snap.ClusterID), ctrl, alive, len(m.snap.Brokers), m.snap.timeOf().Format(time.TimeOnly))
	}
	if !m.connected {
		b.WriteString("  ")
		b.WriteString(m.st.bad.Render("disconnected"))
	}
	return b.String()
}

func (m Model) tabLine() string {
	var parts []string
	cur := m.listView()
	// The tabs are names only: a number beside a name reads as a count
	// ("2 groups"); the keys that select them are on the bottom line.
	for i, name := range viewNames {
		label := " " + name + " "
		if view(i) == cur {
			label = m.st.tabOn.Render("[" + name + "]")
		}
		parts = append(parts, label)
	}
	s := strings.Join(parts, " ")
	if m.view != viewDetail {
		s += "   sort: " + sortOrders[m.view][m.sortBy[m.view]]
	}
	if f := m.filter.Value(); f != "" && !m.filtering {
		s += "   filter: " + f
	}
	return s
}

func (m Model) bottomLine() string {
	if m.filtering {
		return m.filter.View() + m.st.dim.Render("   enter keep · esc clear")
	}
	bindings := m.keys.helpLine(m.view == viewDetail)
	line := func() string {
		var parts []string
		for _, b := range bindings {
			h := b.Help()
			parts = append(parts, h.Key+" "+h.Desc)
		}
		return strings.Join(parts, " · ")
	}
	// A narrow terminal loses the hints a user finds without them
	// first: moving, then enter, sort and filter; the views and q stay.
	for _, k := range []key.Binding{m.keys.up, m.keys.down, m.keys.enter, m.keys.sort, m.keys.filter} {
		if m.width <= 0 || ansi.StringWidth(line()) <= m.width {
			break
		}
		bindings = slices.DeleteFunc(bindings, func(b key.Binding) bool { return b.Help() == k.Help() })
	}
	return m.st.dim.Render(line())
}

func (m Model) body() []string {
	if !m.have {
		if m.lastErr != "" {
			return []string{"no data yet"}
		}
		return []string{"waiting for the first snapshot…"}
	}
	if m.view == viewDetail {
		lines := m.detailLines()
		top := min(m.detailTop, max(0, len(lines)-1))
		return lines[top:]
	}
	t := m.table(m.view)
	if len(t.rows) == 0 {
		empty := "no " + viewNames[m.view]
		if m.filter.Value() != "" {
			empty += " match the filter"
		}
		return append(t.fit(m.width).render(m.st, 0, 0, -1), m.st.dim.Render(empty))
	}
	n := m.bodyHeight() - 1 // the header
	cur := m.cursor[m.view]
	start := 0
	if cur >= n {
		start = cur - n + 1
	}
	return t.fit(m.width).render(m.st, start, n, cur)
}

func (m Model) detailLines() []string {
	if m.detailOf == viewTopics {
		var t *Topic
		for i := range m.snap.Topics {
			if m.snap.Topics[i].Topic == m.detail {
				t = &m.snap.Topics[i]
			}
		}
		if t == nil {
			return []string{fmt.Sprintf("topic %s: not in the last snapshot", m.detail)}
		}
		// Trouble comes first, where a narrow terminal does not cut it.
		head := "topic " + t.Topic
		if t.UnderReplicated > 0 {
			head += "  " + m.st.bad.Render(fmt.Sprintf("%d under-replicated", t.UnderReplicated))
		}
		if t.Offline > 0 {
			head += "  " + m.st.bad.Render(fmt.Sprintf("%d offline", t.Offline))
		}
		head += fmt.Sprintf("  partitions %d  in %s msg/s  %s  out %s", len(t.Partitions),
			rateCell(t.MessagesInPerSec).text, bytesRateCell(t.BytesInPerSec).text, bytesRateCell(t.BytesOutPerSec).text)
		lines := []string{m.st.title.Render(head), ""}
		lines = append(lines, topicTable(m.snap, "", 0, t.Topic).fit(m.width).render(m.st, 0, len(t.Partitions), -1)...)
		readers := topicReaders(m.snap, t.Topic, 2*sparkWidth)
		lines = append(lines, "", m.st.title.Render("groups reading "+t.Topic))
		if len(readers.rows) == 0 {
			return append(lines, m.st.dim.Render("none"))
		}
		return append(lines, readers.fit(m.width).render(m.st, 0, len(readers.rows), -1)...)
	}
	var g *Group
	for i := range m.snap.Groups {
		if m.snap.Groups[i].Group == m.detail {
			g = &m.snap.Groups[i]
		}
	}
	if g == nil {
		return []string{fmt.Sprintf("group %s: not in the last snapshot", m.detail)}
	}
	head := "group " + g.Group
	if g.Stalled {
		head += "  " + m.st.bad.Render("STALLED")
	}
	head += fmt.Sprintf("  lag %d  lag time %s  state %s  members %d  protocol %s", g.Lag, lagTimeCell(g.LagTimeMillis).text,
		orDash(g.State), len(g.Members), orDash(g.Protocol))
	lines := []string{m.st.title.Render(head), ""}
	if len(g.Members) > 0 {
		mt := groupMembers(*g)
		lines = append(append(lines, mt.render(m.st, 0, len(mt.rows), -1)...), "")
	}
	pt := groupPartitions(*g, 2*sparkWidth)
	return append(lines, pt.fit(m.width).render(m.st, 0, len(pt.rows), -1)...)
}

// timeOf is the snapshot's time.
func (s Snapshot) timeOf() time.Time {
	if !s.time.IsZero() {
		return s.time
	}
	return time.UnixMilli(s.TimeMillis)
}
