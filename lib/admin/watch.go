package admin

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"slices"
	"strings"
	"time"

	"github.com/mqproject/mq/lib/client"
)

// Watch is what partition reassign --watch asks for.
type Watch struct {
	// Partitions are the moves to watch (a plan's); nil: every move
	// running when the watch starts.
	Partitions []PlanPartition
	// Out gets the progress: redrawn in place when Terminal, else a
	// line for each partition whose progress changed by a percent or
	// more; either way a line when a move ends ("complete" when it ended
	// on its plan's replicas, "no longer moving" without a plan).
	Out      io.Writer
	Terminal bool
	// Interval is how often the cluster is asked; 0: a second.
	Interval time.Duration
}

// offPlanLooks is how many looks, an Interval apart, a watched move must
// be seen neither moving nor on its plan's replicas before the watch
// calls it failed: a broker's image may lag the controller's for a
// moment after the move was submitted or completed.
const offPlanLooks = 5

// MoveProgress is how far one partition's move is: the bytes its adding
// replicas hold, against what its leader holds.
type MoveProgress struct {
	Topic     string
	Partition int32
	Adding    []int32
	Copied    int64 // bytes the adding replicas hold, each up to the leader's
	Total     int64 // the leader's bytes, once per adding replica
	Rate      float64
	// Silent are the adding replicas' brokers that are fenced or did not
	// answer: nothing is copied to them, the move waits for them.
	Silent []int32
}

// silence says which brokers the move waits for, "" when none.
func (m MoveProgress) silence() string {
	if len(m.Silent) == 0 {
		return ""
	}
	return " (waiting for broker " + joinIDs(m.Silent) + ": fenced or not answering)"
}

// Remaining is what is left to copy.
func (m MoveProgress) Remaining() int64 { return max(m.Total-m.Copied, 0) }

// Percent is how much is copied, 0 to 100.
func (m MoveProgress) Percent() int {
	if m.Total <= 0 {
		return 100
	}
	return int(min(m.Copied*100/m.Total, 100))
}

// ETA is the time left at the rate measured, "-" while there is none.
func (m MoveProgress) ETA() string {
	if m.Remaining() == 0 {
		return "0s"
	}
	if m.Rate <= 0 || len(m.Silent) > 0 {
		return "-"
	}
	return time.Duration(float64(m.Remaining()) / m.Rate * float64(time.Second)).Round(time.Second).String()
}

// progressOf measures a moving partition from the sizes of its replicas
// (by broker): the leader's size is the one to reach, or, while it has
// none that is not adding, the largest of the replicas not adding.
func progressOf(topic string, p int32, s *partitionState, sizes map[int32]int64) MoveProgress {
	m := MoveProgress{Topic: topic, Partition: p, Adding: nonNil(s.adding)}
	var want int64
	if s.leader >= 0 && !slices.Contains(s.adding, s.leader) {
		want = sizes[s.leader]
	} else {
		for _, r := range s.replicas {
			if !slices.Contains(s.adding, r) {
				want = max(want, sizes[r])
			}
		}
	}
	for _, r := range s.adding {
		m.Copied += min(sizes[r], want)
		m.Total += want
	}
	return m
}

// WatchReassignment shows the progress of running moves until each has
// ended (see Watch), then removes the throttles no move needs
// (clearThrottles). A watched move that ended off its plan's replicas
// (cancelled, refused) is a failure (exit 1).
func (a *Admin) WatchReassignment(ctx context.Context, w Watch) error {
	const what = "partition reassign --watch"
	interval := w.Interval
	if interval <= 0 {
		interval = time.Second
	}
	var topics []string // nil: every topic
	target := map[string][]int32{}
	for _, pp := range w.Partitions {
		if !slices.Contains(topics, pp.Topic) {
			topics = append(topics, pp.Topic)
		}
		target[fmt.Sprintf("%s:%d", pp.Topic, pp.Partition)] = pp.Replicas
	}
	watched := map[string]bool{}
	for k := range target {
		watched[k] = true
	}
	printed := map[string]int{} // what was last printed of a move (its percent, its silent brokers), by partition; -1: ended
	offPlan := map[string]int{} // looks that saw it neither moving nor on its plan's replicas
	last := map[string]MoveProgress{}
	var lastAt time.Time
	drawn := 0 // lines drawn on the terminal
	var failed []string
	for first := true; ; first = false {
		c, err := a.state(ctx, what, topics)
		if err != nil {
			return err
		}
		now := time.Now()
		var running []string
		moving := map[string][]int32{}
		c.each(func(t string, p int32, s *partitionState) {
			k := fmt.Sprintf("%s:%d", t, p)
			if !s.moving {
				return
			}
			if first && w.Partitions == nil {
				watched[k] = true
			}
			if watched[k] {
				running = append(running, k)
				moving[t] = append(moving[t], p)
			}
		})
		var lines []string
		pending := 0
		for k := range watched {
			if slices.Contains(running, k) || printed[k] < 0 {
				continue
			}
			topic, p := splitName(k)
			s := c.partition(topic, p)
			if s != nil && target[k] != nil && !slices.Equal(s.replicas, target[k]) && offPlan[k] < offPlanLooks {
				// Just submitted, the broker that answered may not
				// show the move yet: look again before calling it failed.
				offPlan[k]++
				pending++
				continue
			}
			// Ended since the last look.
			printed[k] = -1
			switch {
			case s == nil:
				lines = append(lines, k+": gone (topic deleted?)")
				failed = append(failed, k+": gone")
			case target[k] != nil && !slices.Equal(s.replicas, target[k]):
				lines = append(lines, fmt.Sprintf("%s: not moving, on %s and not the plan's %s", k, joinIDs(s.replicas), joinIDs(target[k])))
				failed = append(failed, k+": ended on "+joinIDs(s.replicas))
			case target[k] == nil:
				lines = append(lines, fmt.Sprintf("%s: no longer moving, on %s", k, joinIDs(s.replicas)))
			default:
				lines = append(lines, fmt.Sprintf("%s: complete, on %s", k, joinIDs(s.replicas)))
			}
		}
		slices.Sort(lines)
		var progress []MoveProgress
		if len(running) > 0 {
			dirs := a.describeLogDirs(ctx, c.liveBrokers(), moving)
			for _, k := range running {
				topic, p := splitName(k)
				m := progressOf(topic, p, c.partition(topic, p), dirs.sizes[topic][p])
				for _, r := range m.Adding {
					if _, down := dirs.errs[r]; down || c.roster.states[r] == BrokerFenced {
						m.Silent = append(m.Silent, r)
					}
				}
				if prev, ok := last[k]; ok && now.After(lastAt) {
					r := float64(m.Copied-prev.Copied) / now.Sub(lastAt).Seconds()
					m.Rate = max(r, 0)
					if prev.Rate > 0 {
						m.Rate = (m.Rate + prev.Rate) / 2
					}
				}
				last[k] = m
				progress = append(progress, m)
			}
		}
		lastAt = now
		if w.Terminal {
			drawn = redraw(w.Out, drawn, lines, progress)
		} else {
			for _, m := range progress {
				k := fmt.Sprintf("%s:%d", m.Topic, m.Partition)
				// A line when the percent changes, or whether a broker
				// it copies to is silent.
				seen := m.Percent() + 1000*len(m.Silent)
				if was, ok := printed[k]; ok && was == seen {
					continue
				}
				printed[k] = seen
				lines = append(lines, fmt.Sprintf("%s: %d%% copied to %s, %s to go, eta %s%s", k, m.Percent(), joinIDs(m.Adding), sizeText(m.Remaining()), m.ETA(), m.silence()))
			}
			for _, l := range lines {
				fmt.Fprintln(w.Out, l)
			}
		}
		if len(running) == 0 && pending == 0 {
			break
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(interval):
		}
	}
	if len(watched) == 0 {
		fmt.Fprintln(w.Out, "no partition is moving")
		return nil
	}
	if err := failures(what, failed); err != nil {
		return err
	}
	removed, err := a.clearThrottles(ctx, what, topicsOf(watched))
	if err != nil {
		return err
	}
	if removed {
		fmt.Fprintln(w.Out, "every move is complete; the throttles were removed")
	} else {
		fmt.Fprintln(w.Out, "every move is complete")
	}
	return nil
}

// redraw replaces the drawn lines of a terminal with lines and the
// progress table, and returns how many lines it drew. The lines of
// moves that ended stay above the table.
func redraw(w io.Writer, drawn int, ended []string, progress []MoveProgress) int {
	var b bytes.Buffer
	if drawn > 0 {
		fmt.Fprintf(&b, "\x1b[%dA\x1b[J", drawn)
	}
	for _, l := range ended {
		b.WriteString(l + "\n")
	}
	n := 0
	if len(progress) > 0 {
		rows := make([][]string, len(progress))
		var left int64
		for i, m := range progress {
			eta := m.ETA()
			if len(m.Silent) > 0 {
				eta = "waiting for " + joinIDs(m.Silent)
			}
			rows[i] = []string{m.Topic, itoa(m.Partition), joinIDs(m.Adding), fmt.Sprintf("%d%%", m.Percent()), sizeText(m.Copied), sizeText(m.Remaining()), eta}
			left += m.Remaining()
		}
		var t bytes.Buffer
		client.WriteTable(&t, []string{"TOPIC", "PARTITION", "ADDING", "DONE", "COPIED", "REMAINING", "ETA"}, rows)
		fmt.Fprintf(&t, "%d moving, %s to go\n", len(progress), sizeText(left))
		n = strings.Count(t.String(), "\n")
		b.Write(t.Bytes())
	}
	w.Write(b.Bytes())
	return n
}

// splitName splits "topic:partition".
func splitName(k string) (string, int32) {
	i := strings.LastIndexByte(k, ':')
	var p int32
	fmt.Sscan(k[i+1:], &p)
	return k[:i], p
}

// topicsOf lists the topics of "topic:partition" names, sorted.
func topicsOf(names map[string]bool) []string {
	var out []string
	for k := range names {
		t, _ := splitName(k)
		if !slices.Contains(out, t) {
			out = append(out, t)
		}
	}
	slices.Sort(out)
	return out
}
