package tail

import (
	"fmt"
	"io"
	"strconv"
	"strings"
	"time"

	"github.com/charmbracelet/lipgloss"
	"github.com/charmbracelet/x/ansi"

	"github.com/mqproject/mq/lib/admin"
	"github.com/mqproject/mq/lib/client"
)

// cellKind is what a cell says, which its style shows: trouble is red
// (and says so in words too, for a terminal without colour).
type cellKind int

const (
	plain cellKind = iota
	bad            // under-replicated, offline, fenced, stalled
	dim            // unknown values, idle things
)

type cell struct {
	text string
	kind cellKind
}

// row is one line of a table; key names what Enter opens (a topic or a
// group).
type row struct {
	key   string
	cells []cell
}

type table struct {
	header []string
	right  []bool // right-aligned columns (numbers)
	// drop is each column's rank when the terminal is too narrow for the
	// whole table: the column with the highest rank goes first (the
	// rightmost of equals), 0 never; nil keeps every column.
	drop []int
	rows []row
}

// fit returns t without the columns it has to drop, by rank, for its
// lines (the two-column marker, the columns, two spaces between them)
// to fit in width; a width of 0 or less keeps every column. What is
// still too wide is cut at the edge by the view.
func (t table) fit(width int) table {
	if width <= 0 || t.drop == nil {
		return t
	}
	w := t.widths()
	keep := make([]bool, len(t.header))
	total := 0
	for i := range keep {
		keep[i] = true
		total += w[i] + 2 // the marker, or the gap before the column
	}
	for total > width {
		victim := -1
		for i, k := range keep {
			if k && t.drop[i] > 0 && (victim < 0 || t.drop[i] >= t.drop[victim]) {
				victim = i
			}
		}
		if victim < 0 {
			break
		}
		keep[victim] = false
		total -= w[victim] + 2
	}
	out := table{drop: t.drop}
	for i, k := range keep {
		if k {
			out.header = append(out.header, t.header[i])
			out.right = append(out.right, t.right[i])
		}
	}
	for _, r := range t.rows {
		nr := row{key: r.key}
		for i, c := range r.cells {
			if i < len(keep) && keep[i] {
				nr.cells = append(nr.cells, c)
			}
		}
		out.rows = append(out.rows, nr)
	}
	return out
}

// styles are the looks of a renderer's colour profile; with the Ascii
// profile (NO_COLOR, a dumb terminal, not a terminal) every style renders
// the text alone.
type styles struct {
	bad, dim, head, title, tabOn, sel lipgloss.Style
}

func newStyles(r *lipgloss.Renderer) styles {
	red := lipgloss.Color("1") // ANSI red: the same in 16, 256 and true colour
	return styles{
		bad:   r.NewStyle().Foreground(red).Bold(true),
		dim:   r.NewStyle().Faint(true),
		head:  r.NewStyle().Bold(true),
		title: r.NewStyle().Bold(true),
		tabOn: r.NewStyle().Reverse(true).Bold(true),
		sel:   r.NewStyle().Reverse(true),
	}
}

func (st styles) of(k cellKind, selected bool) lipgloss.Style {
	var s lipgloss.Style
	switch k {
	case bad:
		s = st.bad
	case dim:
		s = st.dim
	default:
		s = st.sel.UnsetReverse()
	}
	if selected {
		s = s.Reverse(true)
	}
	return s
}

// widths are the columns' widths: the widest of header and cells.
func (t table) widths() []int {
	w := make([]int, len(t.header))
	for i, h := range t.header {
		w[i] = ansi.StringWidth(h)
	}
	for _, r := range t.rows {
		for i, c := range r.cells {
			if i < len(w) {
				w[i] = max(w[i], ansi.StringWidth(c.text))
			}
		}
	}
	return w
}

func pad(s string, w int, right bool) string {
	n := w - ansi.StringWidth(s)
	if n <= 0 {
		return s
	}
	if right {
		return strings.Repeat(" ", n) + s
	}
	return s + strings.Repeat(" ", n)
}

// render draws the header and rows [start, start+n) of t, each line
// starting with a two-column marker ("> " on the selected row, -1 for
// none).
func (t table) render(st styles, start, n, selected int) []string {
	w := t.widths()
	var out []string
	var h strings.Builder
	h.WriteString("  ")
	for i, name := range t.header {
		if i > 0 {
			h.WriteString("  ")
		}
		h.WriteString(pad(name, w[i], t.right[i]))
	}
	out = append(out, st.head.Render(strings.TrimRight(h.String(), " ")))
	for i := start; i < len(t.rows) && i < start+n; i++ {
		r := t.rows[i]
		sel := i == selected
		var b strings.Builder
		if sel {
			b.WriteString("> ")
		} else {
			b.WriteString("  ")
		}
		for j, c := range r.cells {
			text := pad(c.text, w[j], t.right[j])
			if j < len(r.cells)-1 {
				text += "  "
			}
			if !sel && c.kind == plain {
				b.WriteString(text)
				continue
			}
			b.WriteString(st.of(c.kind, sel).Render(text))
		}
		out = append(out, b.String())
	}
	return out
}

// writePlain writes t as aligned columns for --once -o table.
func (t table) writePlain(w io.Writer) error {
	rows := make([][]string, len(t.rows))
	for i, r := range t.rows {
		rows[i] = make([]string, len(r.cells))
		for j, c := range r.cells {
			rows[i][j] = c.text
		}
	}
	return client.WriteTable(w, t.header, rows)
}

func txt(s string) cell                      { return cell{text: s} }
func num[T ~int | ~int32 | ~int64](n T) cell { return cell{text: strconv.FormatInt(int64(n), 10)} }

// offsetCell is an offset, or a dim "-" when unknown.
func offsetCell(o int64) cell {
	if o < 0 {
		return cell{text: "-", kind: dim}
	}
	return num(o)
}

func ids(list []int32) string {
	if len(list) == 0 {
		return "-"
	}
	s := make([]string, len(list))
	for i, id := range list {
		s[i] = strconv.Itoa(int(id))
	}
	return strings.Join(s, ",")
}

// rateCell is a count per second: "-" when unknown, else up to three
// significant digits with k/M/G.
func rateCell(r *float64) cell {
	if r == nil {
		return cell{text: "-", kind: dim}
	}
	return txt(siText(*r) + "/s")
}

// bytesRateCell is bytes per second in binary units.
func bytesRateCell(r *float64) cell {
	if r == nil {
		return cell{text: "-", kind: dim}
	}
	return txt(bytesText(*r) + "/s")
}

func siText(v float64) string {
	switch {
	case v >= 1e9:
		return fmt.Sprintf("%.1fG", v/1e9)
	case v >= 1e6:
		return fmt.Sprintf("%.1fM", v/1e6)
	case v >= 1e3:
		return fmt.Sprintf("%.1fk", v/1e3)
	case v == float64(int64(v)):
		return strconv.FormatInt(int64(v), 10)
	}
	return fmt.Sprintf("%.1f", v)
}

func bytesText(v float64) string {
	const unit = 1024
	if v < unit {
		return fmt.Sprintf("%.0fB", v)
	}
	v, exp := v/unit, 0
	for v >= unit && exp < 4 {
		v /= unit
		exp++
	}
	return fmt.Sprintf("%.1f%ciB", v, "KMGTP"[exp])
}

func sizeCell(n int64) cell {
	if n < 0 {
		return cell{text: "-", kind: dim}
	}
	return txt(bytesText(float64(n)))
}

func lagTimeCell(ms int64) cell {
	if ms < 0 {
		return cell{text: "-", kind: dim}
	}
	return txt(admin.FormatLagTime(time.Duration(ms) * time.Millisecond))
}

// sparkBlocks are the eight heights of a sparkline.
var sparkBlocks = []rune("▁▂▃▄▅▆▇█")

// Sparkline draws values in width columns, oldest on the left: each
// column the largest value of its share of the samples, scaled so that
// the largest of all is a full block. Fewer samples than columns draw
// one column each; no samples draw nothing.
func Sparkline(values []int64, width int) string {
	if len(values) == 0 || width <= 0 {
		return ""
	}
	cols := values
	if len(values) > width {
		cols = make([]int64, width)
		for i := range cols {
			lo, hi := i*len(values)/width, (i+1)*len(values)/width
			m := values[lo]
			for _, v := range values[lo:hi] {
				m = max(m, v)
			}
			cols[i] = m
		}
	}
	top := int64(0)
	for _, v := range cols {
		top = max(top, v)
	}
	var b strings.Builder
	for _, v := range cols {
		level := 0
		if top > 0 && v > 0 {
			level = int((v*int64(len(sparkBlocks)-1) + top - 1) / top)
		}
		b.WriteRune(sparkBlocks[min(level, len(sparkBlocks)-1)])
	}
	return b.String()
}

// partitionState is a partition's STATE cell.
func partitionState(p Partition) cell {
	switch {
	case p.Offline:
		return cell{text: "offline", kind: bad}
	case strings.HasSuffix(p.Error, " unreachable"):
		return cell{text: "leader unreachable", kind: bad}
	case p.UnderReplicated:
		return cell{text: "under-replicated", kind: bad}
	case p.Error != "":
		return cell{text: "error", kind: bad}
	}
	return txt("ok")
}

func isrCell(p Partition) cell {
	if p.UnderReplicated || p.Offline {
		return cell{text: ids(p.ISR), kind: bad}
	}
	return txt(ids(p.ISR))
}

func brokerStateCell(s string) cell {
	if s != admin.BrokerAlive {
		return cell{text: s, kind: bad}
	}
	return txt(s)
}

func stalledCell(stalled bool) cell {
	if stalled {
		return cell{text: "STALLED", kind: bad}
	}
	return cell{text: "-", kind: dim}
}

// WriteTable writes snap as plain aligned tables (mqtail --once -o
// table): the brokers, every topic's partitions, every group's
// partitions and, when there are share groups, their share-partitions.
func WriteTable(w io.Writer, snap Snapshot) error {
	controller := "none"
	switch {
	case snap.QuorumLost:
		controller = "none (quorum lost)"
	case snap.Controller >= 0:
		controller = strconv.Itoa(int(snap.Controller))
	}
	if _, err := fmt.Fprintf(w, "CLUSTER %s  CONTROLLER %s  AT %s\n\n", orDash(snap.ClusterID), controller,
		time.UnixMilli(snap.TimeMillis).UTC().Format(time.RFC3339)); err != nil {
		return err
	}
	tables := []table{brokerTable(snap, 0), topicTable(snap, "", 0, ""), groupTable(snap, "", 0, sparkWidth)}
	if len(snap.Queues) > 0 {
		tables = append(tables, queueTable(snap, "", 0))
	}
	for i, t := range tables {
		if i > 0 {
			if _, err := io.WriteString(w, "\n"); err != nil {
				return err
			}
		}
		if err := t.writePlain(w); err != nil {
			return err
		}
	}
	for _, e := range snap.Errors {
		if _, err := fmt.Fprintf(w, "\nerror: %s\n", e); err != nil {
			return err
		}
	}
	for _, h := range snap.HungTransactions {
		if _, err := fmt.Fprintf(w, "\nwarning: %s\n", h.Detail); err != nil {
			return err
		}
	}
	return nil
}

func orDash(s string) string {
	if s == "" {
		return "-"
	}
	return s
}
