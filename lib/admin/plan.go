package admin

import (
	"bytes"
	"cmp"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"slices"
	"strconv"
	"strings"
)

// Plan is a reassignment plan in the JSON format Kafka's
// kafka-reassign-partitions reads and writes:
//
//	{"version":1,"partitions":[{"topic":"t","partition":0,"replicas":[1,2,3],"log_dirs":["any","any","any"]}]}
//
// Each partition's replicas are its target replica set, the first one its
// preferred leader. mqctl partition reassign --generate, cluster rebalance
// and broker decommission write it; --execute, --verify and --cancel read
// it.
type Plan struct {
	Version    int             `json:"version"`
	Partitions []PlanPartition `json:"partitions"`
}

// PlanPartition is one partition of a Plan.
type PlanPartition struct {
	Topic     string  `json:"topic"`
	Partition int32   `json:"partition"`
	Replicas  []int32 `json:"replicas"`
	// LogDirs names, per replica, the log directory to place it in;
	// mq brokers have one, so "any" is the only value accepted.
	LogDirs []string `json:"log_dirs,omitempty"`
}

// planVersion is the only version of the plan format.
const planVersion = 1

// anyLogDir is the log_dirs entry that lets the broker choose.
const anyLogDir = "any"

// NewPlan returns a plan for partitions, sorted by topic and partition,
// each with log_dirs "any", as kafka-reassign-partitions writes them.
func NewPlan(partitions []PlanPartition) Plan {
	p := Plan{Version: planVersion, Partitions: []PlanPartition{}}
	for _, pp := range partitions {
		pp.Replicas = slices.Clone(pp.Replicas)
		pp.LogDirs = make([]string, len(pp.Replicas))
		for i := range pp.LogDirs {
			pp.LogDirs[i] = anyLogDir
		}
		p.Partitions = append(p.Partitions, pp)
	}
	sortPlanPartitions(p.Partitions)
	return p
}

func sortPlanPartitions(ps []PlanPartition) {
	slices.SortFunc(ps, func(x, y PlanPartition) int {
		return cmp.Or(strings.Compare(x.Topic, y.Topic), cmp.Compare(x.Partition, y.Partition))
	})
}

// WriteTo writes the plan as one line of JSON.
func (p Plan) WriteTo(w io.Writer) (int64, error) {
	b, err := json.Marshal(p)
	if err != nil {
		return 0, err
	}
	n, err := w.Write(append(b, '\n'))
	return int64(n), err
}

// ParsePlan reads a reassignment plan and checks what can be checked
// without the cluster: the version, and that every partition is named
// once, with at least one replica, no replica twice and a log_dirs entry
// ("any") per replica when it has log_dirs. Unknown fields are refused:
// they are typos of these ("replica"). Every error is a usage error, in
// one line, naming the partition at fault.
func ParsePlan(r io.Reader) (Plan, error) {
	data, err := io.ReadAll(r)
	if err != nil {
		return Plan{}, usagef("reading the plan: %v", err)
	}
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.DisallowUnknownFields()
	var p Plan
	if err := dec.Decode(&p); err != nil {
		if errors.Is(err, io.EOF) {
			return Plan{}, usagef("the plan is empty")
		}
		return Plan{}, usagef("the plan is not reassignment JSON: %s", oneLine(err.Error()))
	}
	if dec.More() {
		return Plan{}, usagef("the plan is not reassignment JSON: more than one JSON document")
	}
	if err := p.Check(); err != nil {
		return Plan{}, err
	}
	return p, nil
}

// Check refuses a plan that cannot be right whatever the cluster holds
// (a usage error).
func (p Plan) Check() error {
	if p.Version != planVersion {
		return usagef("the plan's version is %d, want %d", p.Version, planVersion)
	}
	if len(p.Partitions) == 0 {
		return usagef("the plan names no partition")
	}
	seen := map[string]bool{}
	for _, pp := range p.Partitions {
		name := fmt.Sprintf("%s:%d", pp.Topic, pp.Partition)
		switch {
		case pp.Topic == "":
			return usagef("the plan names a partition without a topic")
		case pp.Partition < 0:
			return usagef("the plan names partition %s: partitions are numbered from 0", name)
		case seen[name]:
			return usagef("the plan names partition %s twice", name)
		case len(pp.Replicas) == 0:
			return usagef("partition %s: the plan gives it no replicas", name)
		case pp.LogDirs != nil && len(pp.LogDirs) != len(pp.Replicas):
			return usagef("partition %s: %d log_dirs for %d replicas", name, len(pp.LogDirs), len(pp.Replicas))
		}
		seen[name] = true
		for i, r := range pp.Replicas {
			if r < 0 {
				return usagef("partition %s: broker %d is not a broker id", name, r)
			}
			if slices.Contains(pp.Replicas[:i], r) {
				return usagef("partition %s: broker %d is listed twice", name, r)
			}
		}
		for _, d := range pp.LogDirs {
			if d != anyLogDir {
				return usagef("partition %s: log_dirs %q: mq brokers have one log directory, only \"any\" is accepted", name, d)
			}
		}
	}
	return nil
}

// PlanBroker is a broker the planner may place replicas on.
type PlanBroker struct {
	ID   int32
	Rack string // "": none
}

// Placement is one partition as the planner sees it: where its replicas
// are (the first the preferred leader), and how many bytes a new replica
// has to copy.
type Placement struct {
	Topic     string
	Partition int32
	Replicas  []int32
	Bytes     int64
}

// Place computes where the replicas of partitions should be, on brokers
// only, keeping each partition's replication factor. It is a pure
// function of its arguments, and deterministic.
//
// A replica on a broker not in brokers always moves, to the broker that
// can take it and holds the fewest replicas: first one in a rack that
// holds the fewest of the partition's replicas (when every broker has a
// rack), then the one holding the fewest replicas, then the fewest of
// the topic's. Without balance (a decommission) nothing else moves.
//
// With balance, Place then evens the brokers out, one replica at a time:
// while the most loaded broker holds two or more replicas than the least
// loaded, one replica moves from the first to the second (from the
// smallest partition, so that few bytes are copied, and not one it is
// the preferred leader of, when it can choose), as long as racks allow
// it: a partition never gets more replicas in one rack than an even
// spread over the racks gives. A partition that has more moves first.
// So a replica moves only when its broker holds more than its share,
// and the brokers end within one replica of each other where the racks
// let them.
//
// The preferred leader (the first replica) stays where it is when that
// broker keeps the partition; otherwise it is the replica leading the
// fewest partitions. With balance, leaderships then shift, along chains
// of partitions that share replicas, from a broker to one leading at
// least two fewer partitions, until no such chain is left.
//
// Place's output, placed again with the same brokers, moves nothing. The
// result holds every partition, sorted by topic and partition, with its
// replicas in their order: the preferred leader, the replicas it kept in
// their old order, then the new ones. It fails when brokers is empty or a
// partition has more replicas than there are brokers.
func Place(brokers []PlanBroker, partitions []Placement, balance bool) ([]Placement, error) {
	pl, err := newPlacer(brokers, partitions)
	if err != nil {
		return nil, err
	}
	pl.fill()
	pl.leaders()
	if balance {
		pl.spreadRacks()
		pl.balance()
		pl.balanceLeaders()
	}
	return pl.result(), nil
}

// placer is Place's working state.
type placer struct {
	brokers   []PlanBroker // sorted by id
	allowed   map[int32]bool
	rackOf    map[int32]string
	racks     int // distinct racks; 0: placement is not rack-aware
	parts     []Placement
	kept      [][]int32 // per partition, the replicas it has so far
	load      map[int32]int
	topicLoad map[string]map[int32]int
	lead      []int32 // per partition, its preferred leader
	leading   map[int32]int
}

func newPlacer(brokers []PlanBroker, partitions []Placement) (*placer, error) {
	if len(brokers) == 0 {
		return nil, errors.New("no broker to place replicas on")
	}
	pl := &placer{allowed: map[int32]bool{}, rackOf: map[int32]string{}, load: map[int32]int{},
		topicLoad: map[string]map[int32]int{}, leading: map[int32]int{}}
	rackNames := map[string]bool{}
	for _, b := range brokers {
		if pl.allowed[b.ID] {
			continue
		}
		pl.allowed[b.ID] = true
		pl.rackOf[b.ID] = b.Rack
		rackNames[b.Rack] = true
		pl.brokers = append(pl.brokers, b)
	}
	slices.SortFunc(pl.brokers, func(x, y PlanBroker) int { return cmp.Compare(x.ID, y.ID) })
	if !rackNames[""] {
		pl.racks = len(rackNames)
	}
	pl.parts = slices.Clone(partitions)
	slices.SortFunc(pl.parts, func(x, y Placement) int {
		return cmp.Or(strings.Compare(x.Topic, y.Topic), cmp.Compare(x.Partition, y.Partition))
	})
	pl.kept = make([][]int32, len(pl.parts))
	pl.lead = make([]int32, len(pl.parts))
	for i, p := range pl.parts {
		if i > 0 && pl.parts[i-1].Topic == p.Topic && pl.parts[i-1].Partition == p.Partition {
			return nil, fmt.Errorf("partition %s:%d given twice", p.Topic, p.Partition)
		}
		if len(p.Replicas) == 0 {
			return nil, fmt.Errorf("partition %s:%d has no replicas", p.Topic, p.Partition)
		}
		if len(p.Replicas) > len(pl.brokers) {
			return nil, fmt.Errorf("partition %s:%d has %d replicas and there are %d brokers to place them on", p.Topic, p.Partition, len(p.Replicas), len(pl.brokers))
		}
		pl.lead[i] = -1
		for _, r := range p.Replicas {
			if pl.allowed[r] && !slices.Contains(pl.kept[i], r) {
				pl.add(i, r)
			}
		}
	}
	return pl, nil
}

func (pl *placer) add(i int, b int32) {
	pl.kept[i] = append(pl.kept[i], b)
	pl.load[b]++
	t := pl.topicLoad[pl.parts[i].Topic]
	if t == nil {
		t = map[int32]int{}
		pl.topicLoad[pl.parts[i].Topic] = t
	}
	t[b]++
}

// move moves partition i's replica on from to to, in its place in the
// list; the leadership goes with it.
func (pl *placer) move(i int, from, to int32) {
	k := slices.Index(pl.kept[i], from)
	pl.kept[i][k] = to
	pl.load[from]--
	pl.load[to]++
	pl.topicLoad[pl.parts[i].Topic][from]--
	pl.topicLoad[pl.parts[i].Topic][to]++
	if pl.lead[i] == from {
		pl.setLead(i, to)
	}
}

func (pl *placer) setLead(i int, b int32) {
	if old := pl.lead[i]; old >= 0 {
		pl.leading[old]--
	}
	pl.lead[i] = b
	pl.leading[b]++
}

// rackCount is how many of partition i's replicas are in rack.
func (pl *placer) rackCount(i int, rack string) int {
	n := 0
	for _, r := range pl.kept[i] {
		if pl.rackOf[r] == rack {
			n++
		}
	}
	return n
}

// rackMost is how many replicas of partition i one rack may hold: an
// even spread over the racks.
func (pl *placer) rackMost(i int) int {
	if pl.racks < 2 {
		return len(pl.parts[i].Replicas)
	}
	return (len(pl.parts[i].Replicas) + pl.racks - 1) / pl.racks
}

// fits reports whether partition i's replica on from may move to to:
// to does not hold the partition, and racks allow it.
func (pl *placer) fits(i int, from, to int32) bool {
	if slices.Contains(pl.kept[i], to) {
		return false
	}
	if pl.racks < 2 || pl.rackOf[from] == pl.rackOf[to] {
		return true
	}
	return pl.rackCount(i, pl.rackOf[to]) < pl.rackMost(i)
}

// best is the broker partition i's next replica goes to, among those
// ok accepts: the fewest of its replicas in the broker's rack, then the
// fewest replicas, then the fewest of the topic's, then the lowest id.
// It is -1 when ok accepts none.
func (pl *placer) best(i int, ok func(b int32) bool) int32 {
	var best int32 = -1
	var bestKey [4]int
	for _, b := range pl.brokers {
		if slices.Contains(pl.kept[i], b.ID) || !ok(b.ID) {
			continue
		}
		key := [4]int{0, pl.load[b.ID], pl.topicLoad[pl.parts[i].Topic][b.ID], int(b.ID)}
		if pl.racks > 1 {
			key[0] = pl.rackCount(i, b.Rack)
		}
		if best < 0 || slices.Compare(key[:], bestKey[:]) < 0 {
			best, bestKey = b.ID, key
		}
	}
	return best
}

// fill gives every partition the replicas it lacks.
func (pl *placer) fill() {
	for i, p := range pl.parts {
		for len(pl.kept[i]) < len(p.Replicas) {
			pl.add(i, pl.best(i, func(int32) bool { return true }))
		}
	}
}

// leaders keeps each partition's preferred leader where it stays, and
// gives the others the replica leading the fewest partitions.
func (pl *placer) leaders() {
	for i, p := range pl.parts {
		if cur := p.Replicas[0]; slices.Contains(pl.kept[i], cur) {
			pl.setLead(i, cur)
		}
	}
	topicCount := map[string]map[int32]int{}
	for i, p := range pl.parts {
		if pl.lead[i] >= 0 {
			continue
		}
		t := topicCount[p.Topic]
		if t == nil {
			t = map[int32]int{}
			topicCount[p.Topic] = t
		}
		b := slices.MinFunc(pl.kept[i], func(x, y int32) int {
			return cmp.Or(cmp.Compare(pl.leading[x], pl.leading[y]), cmp.Compare(t[x], t[y]))
		})
		pl.setLead(i, b)
		t[b]++
	}
}

// spreadRacks moves, in partitions with more replicas in one rack than
// an even spread allows, the extra ones to the best broker of a rack
// with room.
func (pl *placer) spreadRacks() {
	if pl.racks < 2 {
		return
	}
	for i := range pl.parts {
		for {
			var from int32 = -1
			for _, r := range pl.kept[i] {
				if pl.rackCount(i, pl.rackOf[r]) > pl.rackMost(i) && (from < 0 || pl.load[r] > pl.load[from]) {
					from = r
				}
			}
			if from < 0 {
				break
			}
			to := pl.best(i, func(b int32) bool { return pl.fits(i, from, b) && pl.rackOf[b] != pl.rackOf[from] })
			if to < 0 {
				break
			}
			pl.move(i, from, to)
		}
	}
}

// balance moves replicas from the most loaded brokers to the least
// loaded, one at a time, while two brokers are two or more apart and a
// replica can move between such brokers.
func (pl *placer) balance() {
	for {
		byLoad := make([]int32, len(pl.brokers))
		for i, b := range pl.brokers {
			byLoad[i] = b.ID
		}
		slices.SortStableFunc(byLoad, func(x, y int32) int { return cmp.Compare(pl.load[y], pl.load[x]) })
		moved := false
	pairs:
		for _, hi := range byLoad {
			for k := len(byLoad) - 1; k >= 0; k-- {
				lo := byLoad[k]
				if pl.load[hi]-pl.load[lo] < 2 {
					break
				}
				if i := pl.pick(hi, lo); i >= 0 {
					pl.move(i, hi, lo)
					moved = true
					break pairs
				}
			}
		}
		if !moved {
			return
		}
	}
}

// pick is the partition whose replica on from moves to to: one that
// fits, not one from leads when there is a choice, then the one whose
// topic from holds the most more of than to, then the smallest. It is -1
// when none fits.
func (pl *placer) pick(from, to int32) int {
	best := -1
	var bestKey [3]int64
	for i, p := range pl.parts {
		if !slices.Contains(pl.kept[i], from) || !pl.fits(i, from, to) {
			continue
		}
		leads := int64(0)
		if pl.lead[i] == from {
			leads = 1
		}
		t := pl.topicLoad[p.Topic]
		key := [3]int64{leads, int64(t[to] - t[from]), p.Bytes}
		if best < 0 || slices.Compare(key[:], bestKey[:]) < 0 {
			best, bestKey = i, key
		}
	}
	return best
}

// balanceLeaders shifts leaderships while a broker leads at least two
// more partitions than another it reaches through a chain: it leads a
// partition of which the next broker holds a replica, which leads one of
// which the next holds a replica, and so on. Each shift moves one
// leadership along each link, so the brokers in between lead as many as
// before.
func (pl *placer) balanceLeaders() {
	for {
		byCount := make([]int32, len(pl.brokers))
		for i, b := range pl.brokers {
			byCount[i] = b.ID
		}
		slices.SortStableFunc(byCount, func(x, y int32) int { return cmp.Compare(pl.leading[y], pl.leading[x]) })
		shifted := false
		for _, x := range byCount {
			if pl.shiftFrom(x) {
				shifted = true
				break
			}
		}
		if !shifted {
			return
		}
	}
}

// shiftFrom finds, breadth first, a chain from x to a broker leading at
// least two fewer partitions, and shifts the leaderships along it.
func (pl *placer) shiftFrom(x int32) bool {
	type link struct {
		part int
		from int32
	}
	prev := map[int32]link{x: {-1, -1}}
	queue := []int32{x}
	for len(queue) > 0 {
		u := queue[0]
		queue = queue[1:]
		for i := range pl.parts {
			if pl.lead[i] != u {
				continue
			}
			for _, r := range pl.kept[i] {
				if _, seen := prev[r]; seen {
					continue
				}
				prev[r] = link{i, u}
				if pl.leading[r] <= pl.leading[x]-2 {
					for v := r; v != x; {
						l := prev[v]
						pl.setLead(l.part, v)
						v = l.from
					}
					return true
				}
				queue = append(queue, r)
			}
		}
	}
	return false
}

// result is every partition's new replicas: the preferred leader, the
// replicas it had before in their order, the new ones in the order they
// were placed.
func (pl *placer) result() []Placement {
	out := make([]Placement, len(pl.parts))
	for i, p := range pl.parts {
		rs := []int32{pl.lead[i]}
		for _, r := range p.Replicas {
			if r != pl.lead[i] && slices.Contains(pl.kept[i], r) && !slices.Contains(rs, r) {
				rs = append(rs, r)
			}
		}
		for _, r := range pl.kept[i] {
			if !slices.Contains(rs, r) {
				rs = append(rs, r)
			}
		}
		out[i] = Placement{Topic: p.Topic, Partition: p.Partition, Replicas: rs, Bytes: p.Bytes}
	}
	return out
}

// Moves lists the partitions of after whose replicas differ from
// before's, as plan partitions; added counts the replicas placed on a
// broker that did not hold them, and bytes what those copy.
func Moves(before, after []Placement) (moves []PlanPartition, added int, bytes int64) {
	was := map[string][]int32{}
	for _, b := range before {
		was[fmt.Sprintf("%s:%d", b.Topic, b.Partition)] = b.Replicas
	}
	for _, a := range after {
		old := was[fmt.Sprintf("%s:%d", a.Topic, a.Partition)]
		if slices.Equal(a.Replicas, old) {
			continue
		}
		moves = append(moves, PlanPartition{Topic: a.Topic, Partition: a.Partition, Replicas: a.Replicas})
		for _, r := range a.Replicas {
			if !slices.Contains(old, r) {
				added++
				bytes += a.Bytes
			}
		}
	}
	sortPlanPartitions(moves)
	return moves, added, bytes
}

// ParseBrokerIDs reads a list of broker ids, "1,2,3": each a number >= 0,
// none twice.
func ParseBrokerIDs(what, s string) ([]int32, error) {
	if strings.TrimSpace(s) == "" {
		return nil, usagef("%s: missing ID,ID...", what)
	}
	var out []int32
	for _, f := range strings.Split(s, ",") {
		n, err := strconv.ParseInt(strings.TrimSpace(f), 10, 32)
		if err != nil || n < 0 {
			return nil, usagef("%s: want broker ids such as 1,2,3, got %q", what, s)
		}
		if slices.Contains(out, int32(n)) {
			return nil, usagef("%s: broker %d given twice", what, n)
		}
		out = append(out, int32(n))
	}
	return out, nil
}
