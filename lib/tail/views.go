package tail

import (
	"cmp"
	"fmt"
	"slices"
	"strconv"
	"strings"

	"github.com/mqproject/mq/lib/admin"
)

// sparkWidth is the width of the groups view's lag sparkline.
const sparkWidth = 20

// sortOrders are the orders s cycles through, for each list view.
var sortOrders = map[view][]string{
	viewTopics:  {"name", "msg/s", "bytes/s", "state"},
	viewGroups:  {"name", "lag", "lag-time"},
	viewBrokers: {"id", "leads", "bytes-in"},
	viewQueues:  {"name", "available", "oldest"},
}

func matches(filter string, fields ...string) bool {
	if filter == "" {
		return true
	}
	f := strings.ToLower(filter)
	for _, s := range fields {
		if strings.Contains(strings.ToLower(s), f) {
			return true
		}
	}
	return false
}

func rateValue(r *float64) float64 {
	if r == nil {
		return -1
	}
	return *r
}

// topicTable is one row per partition of the topics that match filter
// (only the topic named only, when it is not empty), in sort order.
func topicTable(snap Snapshot, filter string, sort int, only string) table {
	type entry struct {
		topic string
		p     Partition
	}
	var es []entry
	for _, t := range snap.Topics {
		if only != "" && t.Topic != only || only == "" && !matches(filter, t.Topic) {
			continue
		}
		for _, p := range t.Partitions {
			es = append(es, entry{t.Topic, p})
		}
	}
	byName := func(a, b entry) int {
		return cmp.Or(strings.Compare(a.topic, b.topic), cmp.Compare(a.p.Partition, b.p.Partition))
	}
	problem := func(p Partition) int {
		switch {
		case p.Offline:
			return 2
		case p.UnderReplicated:
			return 1
		}
		return 0
	}
	slices.SortStableFunc(es, func(a, b entry) int {
		switch sortOrders[viewTopics][sort] {
		case "msg/s":
			return cmp.Or(cmp.Compare(rateValue(b.p.MessagesInPerSec), rateValue(a.p.MessagesInPerSec)), byName(a, b))
		case "bytes/s":
			return cmp.Or(cmp.Compare(rateValue(b.p.BytesInPerSec), rateValue(a.p.BytesInPerSec)), byName(a, b))
		case "state":
			return cmp.Or(cmp.Compare(problem(b.p), problem(a.p)), byName(a, b))
		}
		return byName(a, b)
	})
	t := table{
		header: []string{"TOPIC", "PART", "LEADER", "REPLICAS", "ISR", "STATE", "LOG-START", "HIGH-WATERMARK", "MSG/S", "BYTES/S", "SIZE"},
		right:  []bool{false, true, true, false, false, false, true, true, true, true, true},
		drop:   []int{0, 0, 2, 5, 3, 0, 7, 4, 1, 3, 6},
	}
	for _, e := range es {
		leader := txt(strconv.Itoa(int(e.p.Leader)))
		if e.p.Leader < 0 {
			leader = cell{text: "none", kind: bad}
		}
		t.rows = append(t.rows, row{key: e.topic, cells: []cell{
			txt(e.topic), num(e.p.Partition), leader, txt(ids(e.p.Replicas)), isrCell(e.p), partitionState(e.p),
			offsetCell(e.p.LogStartOffset), offsetCell(e.p.HighWatermark),
			rateCell(e.p.MessagesInPerSec), bytesRateCell(e.p.BytesInPerSec), sizeCell(e.p.SizeBytes),
		}})
	}
	return t
}

// groupTable is one row per partition of the groups that match filter
// (by group or topic name), a group without partitions one row alone.
func groupTable(snap Snapshot, filter string, sort int, spark int) table {
	type entry struct {
		g Group
		p *GroupPartition
	}
	var es []entry
	for _, g := range snap.Groups {
		if len(g.Partitions) == 0 {
			if matches(filter, g.Group) {
				es = append(es, entry{g, nil})
			}
			continue
		}
		for i := range g.Partitions {
			if matches(filter, g.Group, g.Partitions[i].Topic) {
				es = append(es, entry{g, &g.Partitions[i]})
			}
		}
	}
	lag := func(e entry) int64 {
		if e.p == nil {
			return -1
		}
		return e.p.Lag
	}
	lagTime := func(e entry) int64 {
		if e.p == nil {
			return -1
		}
		return e.p.LagTimeMillis
	}
	byName := func(a, b entry) int {
		c := strings.Compare(a.g.Group, b.g.Group)
		if c != 0 || a.p == nil || b.p == nil {
			return c
		}
		return cmp.Or(strings.Compare(a.p.Topic, b.p.Topic), cmp.Compare(a.p.Partition, b.p.Partition))
	}
	slices.SortStableFunc(es, func(a, b entry) int {
		switch sortOrders[viewGroups][sort] {
		case "lag":
			return cmp.Or(cmp.Compare(lag(b), lag(a)), byName(a, b))
		case "lag-time":
			return cmp.Or(cmp.Compare(lagTime(b), lagTime(a)), byName(a, b))
		}
		return byName(a, b)
	})
	t := table{
		header: []string{"GROUP", "STATE", "MEMBERS", "TOPIC", "PART", "COMMITTED", "HIGH-WATERMARK", "LAG", "LAG-TIME", "LAG-TREND", "STALLED"},
		right:  []bool{false, false, true, false, true, true, true, true, true, false, false},
		drop:   []int{0, 4, 5, 0, 0, 6, 7, 0, 1, 2, 1},
	}
	for _, e := range es {
		cells := []cell{txt(e.g.Group), txt(orDash(e.g.State)), num(len(e.g.Members))}
		if e.p == nil {
			dash := cell{text: "-", kind: dim}
			cells = append(cells, dash, dash, dash, dash, dash, dash, dash, dash)
		} else {
			p := e.p
			lagCell := offsetCell(p.Lag)
			if p.Stalled {
				lagCell.kind = bad
			}
			cells = append(cells, txt(p.Topic), num(p.Partition), offsetCell(p.Committed), offsetCell(p.HighWatermark),
				lagCell, lagTimeCell(p.LagTimeMillis), txt(Sparkline(p.LagHistory, spark)), stalledCell(p.Stalled))
		}
		t.rows = append(t.rows, row{key: e.g.Group, cells: cells})
	}
	return t
}

// brokerTable is one row per broker, in sort order.
func brokerTable(snap Snapshot, sort int) table {
	bs := slices.Clone(snap.Brokers)
	slices.SortStableFunc(bs, func(a, b Broker) int {
		switch sortOrders[viewBrokers][sort] {
		case "leads":
			return cmp.Or(cmp.Compare(b.PartitionsLed, a.PartitionsLed), cmp.Compare(a.ID, b.ID))
		case "bytes-in":
			return cmp.Or(cmp.Compare(rateValue(b.BytesInPerSec), rateValue(a.BytesInPerSec)), cmp.Compare(a.ID, b.ID))
		}
		return cmp.Compare(a.ID, b.ID)
	})
	t := table{
		header: []string{"BROKER", "ADDRESS", "STATE", "CONTROLLER", "LEADS", "BYTES-IN/S", "BYTES-OUT/S", "UPLOAD-LAG"},
		right:  []bool{true, false, false, false, true, true, true, true},
		drop:   []int{0, 3, 0, 1, 2, 4, 4, 5},
	}
	for _, b := range bs {
		ctrl := cell{text: "-", kind: dim}
		if b.Controller {
			ctrl = txt("leader")
		}
		t.rows = append(t.rows, row{key: strconv.Itoa(int(b.ID)), cells: []cell{
			num(b.ID), txt(b.Host + ":" + strconv.Itoa(int(b.Port))), brokerStateCell(b.State), ctrl, num(b.PartitionsLed),
			bytesRateCell(b.BytesInPerSec), bytesRateCell(b.BytesOutPerSec), uploadLagCell(b),
		}})
	}
	return t
}

// uploadLagCell is what waits on a broker for the remote store: a dim
// "-" when it tiers nothing, marked when its uploads fail.
func uploadLagCell(b Broker) cell {
	if b.UploadLagBytes == nil {
		return cell{text: "-", kind: dim}
	}
	c := sizeCell(*b.UploadLagBytes)
	if b.UploadFailing {
		c.text, c.kind = c.text+" failing", bad
	}
	return c
}

// topicReaders are the partitions of topic the groups read.
func topicReaders(snap Snapshot, topic string, spark int) table {
	t := table{
		header: []string{"GROUP", "PART", "COMMITTED", "LAG", "LAG-TIME", "LAG-TREND", "STALLED"},
		right:  []bool{false, true, true, true, true, false, false},
		drop:   []int{0, 0, 3, 0, 1, 2, 1},
	}
	for _, g := range snap.Groups {
		for _, p := range g.Partitions {
			if p.Topic == topic {
				t.rows = append(t.rows, row{key: g.Group, cells: []cell{txt(g.Group), num(p.Partition), offsetCell(p.Committed),
					offsetCell(p.Lag), lagTimeCell(p.LagTimeMillis), txt(Sparkline(p.LagHistory, spark)), stalledCell(p.Stalled)}})
			}
		}
	}
	return t
}

// groupMembers is the members of a group, with the partitions each owns.
func groupMembers(g Group) table {
	t := table{header: []string{"MEMBER", "CLIENT-ID", "HOST", "PARTITIONS"}, right: []bool{false, false, false, true}}
	for _, m := range g.Members {
		n := 0
		for _, p := range g.Partitions {
			if p.MemberID == m.MemberID {
				n++
			}
		}
		t.rows = append(t.rows, row{cells: []cell{txt(m.MemberID), txt(orDash(m.ClientID)), txt(orDash(m.Host)), num(n)}})
	}
	return t
}

// groupPartitions is a group's partitions for its detail view, with a
// wide sparkline.
func groupPartitions(g Group, spark int) table {
	t := table{
		header: []string{"TOPIC", "PART", "MEMBER", "COMMITTED", "HIGH-WATERMARK", "LAG", "LAG-TIME", "LAG-TREND", "STALLED", "ERROR"},
		right:  []bool{false, true, false, true, true, true, true, false, false, false},
		drop:   []int{0, 0, 4, 3, 5, 0, 1, 2, 1, 0},
	}
	for _, p := range g.Partitions {
		errCell := cell{text: "-", kind: dim}
		if p.Error != "" {
			errCell = cell{text: p.Error, kind: bad}
		}
		t.rows = append(t.rows, row{cells: []cell{txt(p.Topic), num(p.Partition), txt(orDash(p.MemberID)), offsetCell(p.Committed),
			offsetCell(p.HighWatermark), offsetCell(p.Lag), lagTimeCell(p.LagTimeMillis), txt(Sparkline(p.LagHistory, spark)),
			stalledCell(p.Stalled), errCell}})
	}
	return t
}

// queueTable is one row per share-partition of the share groups that
// match filter (by group or topic name), a group without partitions one
// row alone, in sort order.
func queueTable(snap Snapshot, filter string, sort int) table {
	type entry struct {
		q Queue
		p *admin.QueuePartition
	}
	var es []entry
	for _, q := range snap.Queues {
		if len(q.Partitions) == 0 {
			if matches(filter, q.Group) {
				es = append(es, entry{q, nil})
			}
			continue
		}
		for i := range q.Partitions {
			if matches(filter, q.Group, q.Partitions[i].Topic) {
				es = append(es, entry{q, &q.Partitions[i]})
			}
		}
	}
	field := func(e entry, f func(*admin.QueuePartition) int64) int64 {
		if e.p == nil {
			return -1
		}
		return f(e.p)
	}
	byName := func(a, b entry) int {
		c := strings.Compare(a.q.Group, b.q.Group)
		if c != 0 || a.p == nil || b.p == nil {
			return c
		}
		return cmp.Or(strings.Compare(a.p.Topic, b.p.Topic), cmp.Compare(a.p.Partition, b.p.Partition))
	}
	available := func(p *admin.QueuePartition) int64 { return p.Available }
	oldest := func(p *admin.QueuePartition) int64 { return p.OldestUnackedMillis }
	slices.SortStableFunc(es, func(a, b entry) int {
		switch sortOrders[viewQueues][sort] {
		case "available":
			return cmp.Or(cmp.Compare(field(b, available), field(a, available)), byName(a, b))
		case "oldest":
			return cmp.Or(cmp.Compare(field(b, oldest), field(a, oldest)), byName(a, b))
		}
		return byName(a, b)
	})
	t := table{
		header: []string{"QUEUE", "STATE", "MEMBERS", "TOPIC", "PART", "START", "END", "AVAILABLE", "ACQUIRED", "ARCHIVED", "OLDEST-UNACKED", "DEAD-LETTERS"},
		right:  []bool{false, false, true, false, true, true, true, true, true, true, true, false},
		// Narrow, the columns that say whether work waits stay: what is
		// available, how old the oldest unacknowledged record is, and the
		// dead letters.
		drop: []int{0, 4, 3, 0, 0, 6, 5, 0, 2, 7, 1, 0},
	}
	for _, e := range es {
		dead := cell{text: "-", kind: dim}
		if e.q.DeadLetterTopic != "" {
			dead = txt(fmt.Sprintf("%d in %s", e.q.DeadLetters, e.q.DeadLetterTopic))
			if e.q.DeadLetters > 0 {
				dead.kind = bad
			}
		}
		cells := []cell{txt(e.q.Group), txt(orDash(e.q.State)), num(e.q.Members)}
		if e.p == nil {
			d := cell{text: "-", kind: dim}
			cells = append(cells, d, d, d, d, d, d, d, d)
		} else {
			p := e.p
			age := cell{text: "-", kind: dim}
			if p.OldestUnackedMillis > 0 {
				age = lagTimeCell(p.OldestUnackedMillis)
			}
			cells = append(cells, txt(p.Topic), num(p.Partition), offsetCell(p.StartOffset), offsetCell(p.LogEndOffset),
				txt(strconv.FormatInt(p.Available, 10)), txt(strconv.FormatInt(p.Acquired, 10)), txt(strconv.FormatInt(p.Archived, 10)), age)
		}
		t.rows = append(t.rows, row{key: e.q.Group, cells: append(cells, dead)})
	}
	return t
}
