package e2e

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"os/exec"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	kafka "github.com/segmentio/kafka-go"
	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/mqproject/mq/lib/mqtest"
	"github.com/mqproject/mq/lib/record"
)

// compactedView is what a consumer reads of a compacted topic's one
// partition from the start up to the high-water mark: per key, the
// values in offset order ("<null>" for a tombstone).
// An error is a high-water mark not known now (a leader moving).
func compactedView(t *testing.T, newClient func(...kgo.Opt) *kgo.Client, topic string) (map[string][]string, error) {
	t.Helper()
	ctx := ctxFor(t, 30*time.Second)
	ends, err := kadm.NewClient(newClient()).ListEndOffsets(ctx, topic)
	if err != nil {
		return nil, err
	}
	end, ok := ends.Lookup(topic, 0)
	if !ok || end.Err != nil {
		return nil, fmt.Errorf("%s: no high-water mark (%v)", topic, end.Err)
	}
	cl := newClient(kgo.ConsumePartitions(map[string]map[int32]kgo.Offset{topic: {0: kgo.NewOffset().AtStart()}}))
	defer cl.Close()
	view := map[string][]string{}
	last := int64(-1)
	for last < end.Offset-1 {
		fs := cl.PollFetches(ctx)
		if ctx.Err() != nil {
			t.Fatalf("%s: read up to offset %d of %d", topic, last, end.Offset)
		}
		if err := fs.Err(); err != nil {
			t.Fatalf("%s: %v", topic, err)
		}
		fs.EachRecord(func(r *kgo.Record) {
			if r.Offset <= last {
				t.Fatalf("%s: offset %d after %d", topic, r.Offset, last)
			}
			last = r.Offset
			v := string(r.Value)
			if r.Value == nil {
				v = "<null>"
			}
			view[string(r.Key)] = append(view[string(r.Key)], v)
		})
	}
	return view, nil
}

// The table the compaction tests write: tableKeys keys k0, k1, …, each
// written tableRounds times ("k3-0" … "k3-29"), then 40 records of key
// "pad" so that the records above end up in sealed segments, which the
// cleaner may compact (never the active one).
const tableKeys, tableRounds = 10, 30

// writeTable writes the table to topic, with a tombstone for k3 after
// its values when tombstone is set.
func writeTable(t *testing.T, cl *kgo.Client, topic string, tombstone bool) {
	t.Helper()
	ctx := ctxFor(t, time.Minute)
	for round := range tableRounds {
		var recs []*kgo.Record
		for k := range tableKeys {
			recs = append(recs, &kgo.Record{Topic: topic, Key: fmt.Appendf(nil, "k%d", k), Value: fmt.Appendf(nil, "k%d-%d", k, round)})
		}
		if err := cl.ProduceSync(ctx, recs...).FirstErr(); err != nil {
			t.Fatal(err)
		}
	}
	if tombstone {
		if err := cl.ProduceSync(ctx, &kgo.Record{Topic: topic, Key: []byte("k3")}).FirstErr(); err != nil {
			t.Fatal(err)
		}
	}
	for i := range 40 {
		if err := cl.ProduceSync(ctx, &kgo.Record{Topic: topic, Key: []byte("pad"), Value: fmt.Appendf(nil, "pad-%d-%s", i, strings.Repeat("x", 64))}).FirstErr(); err != nil {
			t.Fatal(err)
		}
	}
}

// TestCompactedTopicKeepsTheLatestValuePerKey: a topic with
// cleanup.policy=compact and small segments gets ten keys written thirty
// times each and a tombstone for one; the broker's cleaner compacts the
// sealed segments, and a consumer from the start (kgo, and kcat) reads
// each key's latest value once, at its own offset, and the tombstone while
// delete.retention.ms has not passed; where it is 0 the tombstone goes
// too. The view survives a restart.
func TestCompactedTopicKeepsTheLatestValuePerKey(t *testing.T) {
	b := startBroker(t, brokerOpts{props: []string{"log.cleaner.backoff.ms=50"}})
	ctx := ctxFor(t, time.Minute)
	retention := map[string]string{"keep": "3600000", "drop": "0"}
	for topic, ms := range retention {
		cfg := map[string]*string{}
		for k, v := range map[string]string{"cleanup.policy": "compact", "segment.bytes": "2048", "min.cleanable.dirty.ratio": "0.01", "delete.retention.ms": ms} {
			cfg[k] = &v
		}
		if _, err := b.admin().CreateTopic(ctx, 1, 1, cfg, topic); err != nil {
			t.Fatal(err)
		}
	}
	cl := b.client()
	const keys, rounds = tableKeys, tableRounds
	for topic := range retention {
		writeTable(t, cl, topic, true)
	}
	want := func(topic string) map[string][]string {
		w := map[string][]string{}
		for k := range keys {
			w[fmt.Sprintf("k%d", k)] = []string{fmt.Sprintf("k%d-%d", k, rounds-1)}
		}
		w["k3"] = []string{"<null>"}
		if topic == "drop" {
			delete(w, "k3")
		}
		return w
	}
	compactedAsWanted := func(topic string) (bool, string) {
		view, err := compactedView(t, b.client, topic)
		if err != nil {
			return false, err.Error()
		}
		pads := view["pad"]
		delete(view, "pad")
		w := want(topic)
		for k, vs := range w {
			if !slices.Equal(view[k], vs) {
				return false, fmt.Sprintf("%s: key %s reads %v, want %v", topic, k, view[k], vs)
			}
		}
		if len(view) != len(w) || len(pads) == 0 || pads[len(pads)-1] != fmt.Sprintf("pad-39-%s", strings.Repeat("x", 64)) {
			return false, fmt.Sprintf("%s: keys %d, want %d; %d pads", topic, len(view), len(w), len(pads))
		}
		return true, ""
	}
	for topic := range retention {
		mqtest.Wait{Timeout: 30 * time.Second}.For(t, topic+" compacted", func() (bool, string) { return compactedAsWanted(topic) })
	}
	if !strings.Contains(b.stderr.String(), "msg=compacted") {
		t.Fatalf("mqd did not log its compaction passes:\n%s", b.stderr.String())
	}

	// mqctl topic describe shows what the cleaner did.
	res := runTool(t, 30*time.Second, "", "mqctl", "-b", b.addr, "topic", "describe", "keep", "-o", "json")
	var described []struct {
		Partitions []struct {
			Cleaner []struct {
				DirtyRatio        float64 `json:"dirty_ratio"`
				LastCleanedMillis int64   `json:"last_cleaned_ms"`
				Passes            int64   `json:"passes"`
				BytesReclaimed    int64   `json:"bytes_reclaimed"`
			} `json:"cleaner"`
		} `json:"partitions"`
	}
	if err := json.Unmarshal([]byte(res.stdout), &described); err != nil || len(described) != 1 || len(described[0].Partitions) != 1 || len(described[0].Partitions[0].Cleaner) != 1 {
		t.Fatalf("mqctl topic describe keep -o json: exit %d, %v\n%s%s", res.code, err, res.stdout, res.stderr)
	}
	if c := described[0].Partitions[0].Cleaner[0]; c.Passes == 0 || c.BytesReclaimed <= 0 || c.LastCleanedMillis <= 0 || c.DirtyRatio >= 1 {
		t.Fatalf("mqctl topic describe shows the cleaner's state %+v; want passes, bytes reclaimed and a last clean", c)
	}
	if table := runTool(t, 30*time.Second, "", "mqctl", "-b", b.addr, "topic", "describe", "keep"); !strings.Contains(table.stdout, "CLEANER") || !strings.Contains(table.stdout, "freed") {
		t.Fatalf("mqctl topic describe table has no cleaner column:\n%s", table.stdout)
	}

	// kcat (librdkafka) reads the compacted log the same: the tombstone
	// as NULL with -Z.
	if path, err := exec.LookPath("kcat"); err == nil {
		res := runTool(t, 30*time.Second, "", path, "-b", b.addr, "-C", "-t", "keep", "-e", "-Z", "-f", `%k=%s\n`)
		var got []string
		for _, l := range lines(strings.NewReader(res.stdout)) {
			if !strings.HasPrefix(l, "pad=") {
				got = append(got, l)
			}
		}
		var wantLines []string
		for k := range keys {
			v := fmt.Sprintf("k%d-%d", k, rounds-1)
			if k == 3 {
				v = "NULL"
			}
			wantLines = append(wantLines, fmt.Sprintf("k%d=%s", k, v))
		}
		slices.Sort(got)
		if res.code != 0 || !slices.Equal(got, wantLines) {
			t.Fatalf("kcat: exit %d, read %q, want %q\n%s", res.code, got, wantLines, res.stderr)
		}
	} else {
		t.Log("kcat not installed: its part skipped (CI installs it)")
	}

	b.restart(false)
	for topic := range retention {
		if ok, why := compactedAsWanted(topic); !ok {
			t.Fatalf("after a restart: %s", why)
		}
	}
}

// compactionLogged is a node's log line for a pass that compacted table-0.
var compactionLogged = regexp.MustCompile(`msg=compacted .*partition=table-0 `)

// TestCompactionOnEveryReplica: on a 3-node cluster each replica of a
// compacted topic compacts its own log, and after the leader is killed
// the new leader serves the same latest value per key.
func TestCompactionOnEveryReplica(t *testing.T) {
	parallel(t)
	c := startCluster(t, 3, clusterOpts{props: withProps("log.cleaner.backoff.ms=50")})
	c.createTopicOn("table", [][]int32{{1, 2, 3}}, map[string]string{"cleanup.policy": "compact", "segment.bytes": "2048",
		"min.cleanable.dirty.ratio": "0.01", "min.insync.replicas": "2"})
	writeTable(t, c.client(kgo.RequiredAcks(kgo.AllISRAcks())), "table", false)
	latest := func() (bool, string) {
		view, err := compactedView(t, c.client, "table")
		if err != nil {
			return false, err.Error()
		}
		for k := range 10 {
			if key, want := fmt.Sprintf("k%d", k), fmt.Sprintf("k%d-29", k); !slices.Equal(view[key], []string{want}) {
				return false, fmt.Sprintf("key %s reads %v, want [%s]", key, view[key], want)
			}
		}
		return true, ""
	}
	mqtest.Wait{Timeout: 30 * time.Second}.For(t, "the latest value of every key", latest)
	// Every replica compacts its own log.
	mqtest.Wait{Timeout: 30 * time.Second}.For(t, "every replica to compact table-0", func() (bool, string) {
		for _, n := range c.nodes {
			if !compactionLogged.MatchString(n.stderr.String()) {
				return false, fmt.Sprintf("node %d logged no compaction of table-0", n.id)
			}
		}
		return true, ""
	})
	c.node(1).kill()
	c.waitPartitions("table", "a new leader", func(ps []partitionState) bool { return len(ps) == 1 && ps[0].leader > 1 })
	// Once the new leader's high-water mark is known (it may answer
	// NOT_LEADER for a moment), it serves the same latest values: a view
	// read without error must be right the first time.
	mqtest.Wait{Timeout: 30 * time.Second}.For(t, "the new leader to serve table", func() (bool, string) {
		if _, err := compactedView(t, c.client, "table"); err != nil {
			return false, err.Error()
		}
		if ok, why := latest(); !ok {
			t.Fatalf("after the leader was killed: %s", why)
		}
		return true, ""
	})
}

// TestGroupOffsetsSurviveCompactedOffsetsTopic: __consumer_offsets is
// compacted (small segments here, so that the cleaner has sealed ones to
// work on); after many commits of one group and a restart, the group's
// offsets are its last commits.
func TestGroupOffsetsSurviveCompactedOffsetsTopic(t *testing.T) {
	b := startBroker(t, brokerOpts{props: []string{"log.cleaner.backoff.ms=50", "offsets.topic.num.partitions=1"}})
	ctx := ctxFor(t, time.Minute)
	adm := b.admin()
	if _, err := adm.CreateTopic(ctx, 2, 1, nil, "work"); err != nil {
		t.Fatal(err)
	}
	commit := func(group string, at int64) {
		t.Helper()
		o := kadm.Offsets{}
		o.Add(kadm.Offset{Topic: "work", Partition: 0, At: at, LeaderEpoch: -1})
		o.Add(kadm.Offset{Topic: "work", Partition: 1, At: 2 * at, LeaderEpoch: -1})
		if resp, err := adm.CommitOffsets(ctx, group, o); err != nil || resp.Error() != nil {
			t.Fatalf("commit %s at %d: %v %v", group, at, err, resp.Error())
		}
	}
	commit("a", 1) // creates __consumer_offsets
	set := func(k, v string) kadm.AlterConfig { return kadm.AlterConfig{Name: k, Value: &v} }
	if _, err := adm.AlterTopicConfigs(ctx, []kadm.AlterConfig{set("segment.bytes", "2048"), set("min.cleanable.dirty.ratio", "0.01")}, "__consumer_offsets"); err != nil {
		t.Fatal(err)
	}
	for at := int64(2); at <= 200; at++ {
		commit("a", at)
		commit("b", at/2)
	}
	mqtest.Wait{Timeout: 30 * time.Second}.For(t, "__consumer_offsets-0 compacted", func() (bool, string) {
		return regexp.MustCompile(`msg=compacted .*partition=__consumer_offsets-0 `).MatchString(b.stderr.String()), "no compaction of __consumer_offsets-0 logged"
	})
	check := func(when string) {
		t.Helper()
		for group, at := range map[string]int64{"a": 200, "b": 100} {
			got, err := adm.FetchOffsets(ctx, group)
			if err != nil {
				t.Fatal(err)
			}
			p0, _ := got.Lookup("work", 0)
			p1, _ := got.Lookup("work", 1)
			if p0.At != at || p1.At != 2*at {
				t.Fatalf("%s: group %s has offsets %d and %d, want %d and %d", when, group, p0.At, p1.At, at, 2*at)
			}
		}
	}
	check("before the restart")
	b.restart(false)
	adm = b.admin()
	check("after a restart")
}

// TestFollowerCatchesUpFromACompactedLeader: a follower that was down
// while the leader compacted fetches the compacted batches (with their
// offset gaps), rejoins the ISR, and serves the latest value of every
// key once it leads. Node 1 is the only controller voter and hosts
// nothing, so the replicas' nodes can go down without the quorum.
func TestFollowerCatchesUpFromACompactedLeader(t *testing.T) {
	parallel(t)
	c := startCluster(t, 4, clusterOpts{voters: 1, props: withProps("log.cleaner.backoff.ms=50")})
	c.createTopicOn("table", [][]int32{{2, 3, 4}}, map[string]string{"cleanup.policy": "compact", "segment.bytes": "2048",
		"min.cleanable.dirty.ratio": "0.01", "min.insync.replicas": "1"})
	late := c.node(4)
	late.kill()
	c.waitPartitions("table", "node 4 out of the ISR", func(ps []partitionState) bool {
		return len(ps) == 1 && ps[0].leader == 2 && !slices.Contains(ps[0].isr, 4)
	})
	writeTable(t, c.client(kgo.RequiredAcks(kgo.AllISRAcks())), "table", false)
	mqtest.Wait{Timeout: 30 * time.Second}.For(t, "node 2 to compact table-0", func() (bool, string) {
		return compactionLogged.MatchString(c.node(2).stderr.String()), "the leader, node 2, logged no compaction of table-0"
	})
	late.start()
	c.waitPartitions("table", "node 4 back in the ISR", func(ps []partitionState) bool {
		return len(ps) == 1 && slices.Contains(ps[0].isr, 4)
	})
	c.node(2).kill()
	c.node(3).kill()
	c.waitPartitions("table", "node 4 leads", func(ps []partitionState) bool { return len(ps) == 1 && ps[0].leader == 4 })
	mqtest.Wait{Timeout: 30 * time.Second}.For(t, "node 4 to serve table", func() (bool, string) {
		view, err := compactedView(t, c.client, "table")
		if err != nil {
			return false, err.Error()
		}
		for k := range 10 {
			if key, want := fmt.Sprintf("k%d", k), fmt.Sprintf("k%d-29", k); len(view[key]) == 0 || view[key][len(view[key])-1] != want {
				t.Fatalf("node 4 serves key %s as %v, want its last value %s", key, view[key], want)
			}
		}
		return true, ""
	})
}

// TestCompactDeleteTopicExpiresAndCompacts: a topic whose cleanup.policy
// changes at run time from compact to compact,delete has both done to it.
// Records written with timestamps two days old, in segments of their own,
// go to retention.ms (a day) once the policy deletes, whether or not the
// cleaner emptied their segments first; then the cleaner compacts the
// recent records to each key's latest value, and the key rewritten
// recently (o0) keeps its recent value.
func TestCompactDeleteTopicExpiresAndCompacts(t *testing.T) {
	b := startBroker(t, brokerOpts{props: []string{"log.cleaner.backoff.ms=50", "log.retention.check.interval.ms=100"}})
	ctx := ctxFor(t, 2*time.Minute)
	const topic = "both"
	cfg := map[string]*string{}
	// Every batch below is larger than segment.bytes, so each is a segment
	// of its own and retention sees the old ones alone.
	for k, v := range map[string]string{"cleanup.policy": "compact", "segment.bytes": "1024", "retention.ms": "86400000",
		"min.cleanable.dirty.ratio": "0.01", "delete.retention.ms": "3600000"} {
		cfg[k] = &v
	}
	if _, err := b.admin().CreateTopic(ctx, 1, 1, cfg, topic); err != nil {
		t.Fatal(err)
	}
	// Uncompressed, so that the batches' sizes are what the segments hold.
	cl := b.client(kgo.ProducerBatchCompression(kgo.NoCompression()))
	filler := strings.Repeat("x", 300)
	write := func(prefix string, keys, rounds int, ts time.Time, extra ...string) {
		for round := range rounds {
			var recs []*kgo.Record
			names := extra
			for k := range keys {
				names = append(slices.Clone(names), fmt.Sprintf("%s%d", prefix, k))
			}
			for _, key := range names {
				recs = append(recs, &kgo.Record{Topic: topic, Key: []byte(key), Timestamp: ts,
					Value: fmt.Appendf(nil, "%s-%d-%s", key, round, filler)})
			}
			if err := cl.ProduceSync(ctx, recs...).FirstErr(); err != nil {
				t.Fatal(err)
			}
		}
	}
	old := time.Now().Add(-48 * time.Hour)
	write("o", 5, 4, old)
	write("pad", 1, 1, time.Now()) // seals the last old segment
	ends, err := b.admin().ListEndOffsets(ctx, topic)
	if err != nil {
		t.Fatal(err)
	}
	oldEnd, _ := ends.Lookup(topic, 0)

	// Retention acts on the old segments once the policy deletes.
	if res, err := b.admin().AlterTopicConfigs(ctx, []kadm.AlterConfig{{Name: "cleanup.policy", Value: kadm.StringPtr("compact,delete")}}, topic); err != nil || res[0].Err != nil {
		t.Fatalf("alter cleanup.policy: %v %v", err, res)
	}
	adm := b.admin()
	mqtest.Wait{Timeout: time.Minute}.For(t, "the log start past the old records", func() (bool, string) {
		starts, err := adm.ListStartOffsets(ctx, topic)
		if err != nil {
			return false, err.Error()
		}
		start, _ := starts.Lookup(topic, 0)
		return start.Err == nil && start.Offset >= oldEnd.Offset-1, fmt.Sprintf("log start %d (%v), old records end at %d", start.Offset, start.Err, oldEnd.Offset)
	})

	// Recent records: five keys ten times, o0 among them, then padding so
	// that they are all in sealed segments.
	write("n", 5, 10, time.Now(), "o0")
	write("pad", 1, 3, time.Now())
	want := map[string][]string{"o0": {"o0-9-" + filler}}
	for k := range 5 {
		key := fmt.Sprintf("n%d", k)
		want[key] = []string{fmt.Sprintf("%s-9-%s", key, filler)}
	}
	mqtest.Wait{Timeout: time.Minute}.For(t, "only the latest value of each key", func() (bool, string) {
		view, err := compactedView(t, b.client, topic)
		if err != nil {
			return false, err.Error()
		}
		delete(view, "pad0")
		for k, vs := range want {
			if !slices.Equal(view[k], vs) {
				return false, fmt.Sprintf("key %s reads %d values %.12q, want only the latest", k, len(view[k]), view[k])
			}
		}
		if len(view) != len(want) {
			keys := slices.Sorted(maps.Keys(view))
			return false, fmt.Sprintf("keys %v, want %d: o1…o4 expired with their segments", keys, len(want))
		}
		return true, ""
	})
}

// TestKafkaGoReaderReadsACompactedTopic is the scenario of kafka-go's
// TestReaderReadCompactedMessage, with its Writer and Reader: a compacted
// topic of 200-byte segments gets batches of three records from a
// producer without a producer id, many of them holding only values of a
// key written again later ("dup_"), then ten end markers so that the
// duplicates end up in sealed segments. Once the cleaner has been over
// them, a Reader with 200-byte fetches reads every key exactly once. A
// segment left holding only batches without records (record count 0)
// makes the Reader fetch it forever: its offset moves by the records it
// reads. Raw fetches at every offset, inside the batches that lost all
// their records included, get the batch covering it and none without
// records.
func TestKafkaGoReaderReadsACompactedTopic(t *testing.T) {
	parallel(t)
	b := startBroker(t, brokerOpts{props: []string{"log.cleaner.backoff.ms=50"}})
	ctx := ctxFor(t, 2*time.Minute)
	const topic = "compacted"
	cfg := map[string]*string{}
	for k, v := range map[string]string{"cleanup.policy": "compact", "segment.bytes": "200", "min.cleanable.dirty.ratio": "0.01"} {
		cfg[k] = &v
	}
	if _, err := b.admin().CreateTopic(ctx, 1, 1, cfg, topic); err != nil {
		t.Fatal(err)
	}
	// Keys and values of four bytes, so that the batches' sizes are close
	// to the segments'. A unique key n goes with 0 to 4 duplicates, each
	// pattern thirty times, so that every layout of segments comes up.
	var msgs []kafka.Message
	keys := map[string]bool{}
	add := func(k string) {
		msgs = append(msgs, kafka.Message{Key: []byte(k), Value: []byte(k)})
		keys[k] = true
	}
	n := 0
	for dups := range 5 {
		for range 30 {
			add(fmt.Sprintf("%04d", n))
			n++
			for range dups {
				add("dup_")
			}
		}
	}
	for i := range 10 {
		add(fmt.Sprintf("e-%02d", i))
	}
	w := &kafka.Writer{Addr: kafka.TCP(b.addr), Topic: topic, Balancer: &kafka.Hash{}, BatchSize: 3,
		RequiredAcks: kafka.RequireAll, MaxAttempts: 2}
	if err := w.WriteMessages(ctx, msgs...); err != nil {
		t.Fatal(err)
	}
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	mqtest.Wait{Timeout: time.Minute}.For(t, "the compaction of compacted-0", func() (bool, string) {
		return regexp.MustCompile(`msg=compacted .*partition=compacted-0 `).MatchString(b.stderr.String()), "no compaction logged"
	})

	// readOnce reads with a new Reader until it has seen every key, and
	// reports whether it saw each once.
	readOnce := func() (bool, string) {
		r := kafka.NewReader(kafka.ReaderConfig{Brokers: []string{b.addr}, Topic: topic, Partition: 0,
			MinBytes: 200, MaxBytes: 200, MaxWait: 100 * time.Millisecond})
		defer r.Close()
		seen := map[string]int{}
		for len(seen) < len(keys) {
			rctx, cancel := context.WithTimeout(ctx, 10*time.Second)
			m, err := r.ReadMessage(rctx)
			cancel()
			if err != nil {
				return false, fmt.Sprintf("the reader is stuck at offset %d after %d keys: %v", r.Offset(), len(seen), err)
			}
			seen[string(m.Key)]++
		}
		for k, times := range seen {
			if !keys[k] || times != 1 {
				return false, fmt.Sprintf("key %q read %d times", k, times)
			}
		}
		return true, ""
	}
	mqtest.Wait{Timeout: time.Minute}.For(t, "kafka-go's reader to read every key once", readOnce)

	// A fetch at any offset of the cleaned log, one inside a batch that
	// lost every record included, gets the batch covering it, and no
	// batch without records.
	cl := b.client()
	adm := kadm.NewClient(cl)
	ends, err := adm.ListEndOffsets(ctx, topic)
	if err != nil {
		t.Fatal(err)
	}
	end, _ := ends.Lookup(topic, 0)
	details, err := adm.ListTopics(ctx, topic)
	if err != nil {
		t.Fatal(err)
	}
	for offset := int64(0); offset < end.Offset; offset++ {
		req := kmsg.NewPtrFetchRequest()
		req.ReplicaID, req.MaxBytes = -1, 200
		req.Topics = []kmsg.FetchRequestTopic{{Topic: topic, TopicID: details[topic].ID, Partitions: []kmsg.FetchRequestTopicPartition{
			{Partition: 0, FetchOffset: offset, PartitionMaxBytes: 200, CurrentLeaderEpoch: -1, LogStartOffset: -1}}}}
		resp, err := req.RequestWith(ctx, cl)
		if err != nil {
			t.Fatal(err)
		}
		fp := resp.Topics[0].Partitions[0]
		if fp.ErrorCode != 0 || len(fp.RecordBatches) == 0 {
			t.Fatalf("fetch at %d: %v, %d bytes", offset, kerr.ErrorForCode(fp.ErrorCode), len(fp.RecordBatches))
		}
		for i, rest := 0, fp.RecordBatches; len(rest) > 0; i++ {
			_, next, h, err := record.Next(rest)
			if err != nil {
				break // a batch cut by the fetch's size limit
			}
			if i == 0 && (h.BaseOffset > offset || h.LastOffset() < offset) {
				t.Fatalf("fetch at %d starts with the batch [%d, %d]", offset, h.BaseOffset, h.LastOffset())
			}
			if h.NumRecords == 0 {
				t.Fatalf("fetch at %d: the batch [%d, %d] has no records", offset, h.BaseOffset, h.LastOffset())
			}
			rest = next
		}
	}
}

// TestCompactedTopicRefusesRecordsWithoutKey: a compacted topic refuses a
// record without a key with INVALID_RECORD, naming the record (KIP-467's
// per-record errors), as Kafka does: the cleaner could never remove it.
// A topic that only deletes takes such records until compact is added to
// its cleanup.policy. mqpipe says why it failed.
func TestCompactedTopicRefusesRecordsWithoutKey(t *testing.T) {
	b := startBroker(t, brokerOpts{})
	ctx := ctxFor(t, time.Minute)
	adm := b.admin()
	if _, err := adm.CreateTopic(ctx, 1, 1, map[string]*string{"cleanup.policy": kadm.StringPtr("compact")}, "table"); err != nil {
		t.Fatal(err)
	}
	if _, err := adm.CreateTopic(ctx, 1, 1, nil, "stream"); err != nil {
		t.Fatal(err)
	}
	cl := b.client(kgo.RecordRetries(0))
	if err := cl.ProduceSync(ctx, &kgo.Record{Topic: "table", Value: []byte("v")}).FirstErr(); !errors.Is(err, kerr.InvalidRecord) {
		t.Fatalf("a record without a key to a compacted topic: %v, want INVALID_RECORD", err)
	}
	if err := cl.ProduceSync(ctx, &kgo.Record{Topic: "table", Key: []byte("k"), Value: []byte("v")}).FirstErr(); err != nil {
		t.Fatalf("a keyed record to a compacted topic: %v", err)
	}
	if err := cl.ProduceSync(ctx, &kgo.Record{Topic: "stream", Value: []byte("v")}).FirstErr(); err != nil {
		t.Fatalf("a record without a key to a topic that deletes: %v", err)
	}

	// The raw answer: the message and the index of each keyless record.
	batch, err := record.Build(record.BuildOptions{BaseTimestamp: time.Now().UnixMilli()},
		[]record.Record{{Key: []byte("a"), Value: []byte("1")}, {Value: []byte("2")}, {Value: []byte("3")}})
	if err != nil {
		t.Fatal(err)
	}
	req := kmsg.NewPtrProduceRequest()
	req.Acks, req.TimeoutMillis = -1, 5000
	req.Topics = []kmsg.ProduceRequestTopic{{Topic: "table", Partitions: []kmsg.ProduceRequestTopicPartition{{Partition: 0, Records: batch}}}}
	resp, err := req.RequestWith(ctx, cl)
	if err != nil {
		t.Fatal(err)
	}
	p := resp.Topics[0].Partitions[0]
	var refused []int32
	for _, r := range p.ErrorRecords {
		refused = append(refused, r.RelativeOffset)
	}
	if p.ErrorCode != kerr.InvalidRecord.Code || p.ErrorMessage == nil || !strings.Contains(*p.ErrorMessage, "without a key") || !slices.Equal(refused, []int32{1, 2}) {
		t.Fatalf("produce v%d of keyless records: %v %v, record errors at %v; want INVALID_RECORD at [1 2]",
			req.Version, kerr.ErrorForCode(p.ErrorCode), p.ErrorMessage, refused)
	}

	// Once stream compacts too, it refuses them.
	if res, err := adm.AlterTopicConfigs(ctx, []kadm.AlterConfig{{Name: "cleanup.policy", Value: kadm.StringPtr("compact,delete")}}, "stream"); err != nil || res[0].Err != nil {
		t.Fatalf("alter cleanup.policy: %v %v", err, res)
	}
	mqtest.WaitFor(t, "stream to refuse records without a key", func() (bool, string) {
		err := cl.ProduceSync(ctx, &kgo.Record{Topic: "stream", Value: []byte("v")}).FirstErr()
		return errors.Is(err, kerr.InvalidRecord), fmt.Sprint(err)
	})
	res := runTool(t, 30*time.Second, "line\n", "mqpipe", "-b", b.addr, "produce", "-t", "table")
	if res.code == 0 || !strings.Contains(res.stderr, "INVALID_RECORD") {
		t.Fatalf("mqpipe produce of lines without a key to a compacted topic: exit %d\n%s", res.code, res.stderr)
	}
	t.Logf("mqpipe: exit %d: %s", res.code, res.stderr)
}

// TestTombstonesExpireOnAQuietTopic: a compacted topic with
// delete.retention.ms=1000 gets 200 keys written 20 times, tombstones for
// 10 of them, and one last record that seals the tombstones' segment;
// then nothing more. The cleaner compacts, keeping the tombstones for
// their delete retention, and once that has passed removes them with no
// new write to make the log dirty: the deleted keys leave the log (a
// GDPR delete on a quiet changelog).
func TestTombstonesExpireOnAQuietTopic(t *testing.T) {
	b := startBroker(t, brokerOpts{props: []string{"log.cleaner.backoff.ms=50"}})
	ctx := ctxFor(t, 2*time.Minute)
	const topic = "quiet"
	cfg := map[string]*string{}
	for k, v := range map[string]string{"cleanup.policy": "compact", "segment.bytes": "16384", "min.cleanable.dirty.ratio": "0.01",
		"delete.retention.ms": "1000"} {
		cfg[k] = &v
	}
	if _, err := b.admin().CreateTopic(ctx, 1, 1, cfg, topic); err != nil {
		t.Fatal(err)
	}
	cl := b.client(kgo.ProducerBatchCompression(kgo.NoCompression()))
	const keys, versions, deleted = 200, 20, 10
	for v := range versions {
		var recs []*kgo.Record
		for k := range keys {
			recs = append(recs, &kgo.Record{Topic: topic, Key: fmt.Appendf(nil, "k%03d", k), Value: fmt.Appendf(nil, "k%03d-%d", k, v)})
		}
		if err := cl.ProduceSync(ctx, recs...).FirstErr(); err != nil {
			t.Fatal(err)
		}
	}
	var tombs []*kgo.Record
	for k := range deleted {
		tombs = append(tombs, &kgo.Record{Topic: topic, Key: fmt.Appendf(nil, "k%03d", k)})
	}
	if err := cl.ProduceSync(ctx, tombs...).FirstErr(); err != nil {
		t.Fatal(err)
	}
	// Larger than a segment: it starts the active segment, and the
	// tombstones' segment is sealed, so cleanable. The last write.
	if err := cl.ProduceSync(ctx, &kgo.Record{Topic: topic, Key: []byte("last"), Value: []byte(strings.Repeat("x", 20000))}).FirstErr(); err != nil {
		t.Fatal(err)
	}
	mqtest.Wait{Timeout: time.Minute}.For(t, "the tombstones and deleted keys to leave the log", func() (bool, string) {
		view, err := compactedView(t, b.client, topic)
		if err != nil {
			return false, err.Error()
		}
		for k := range keys {
			key := fmt.Sprintf("k%03d", k)
			var want []string
			if k >= deleted {
				want = []string{fmt.Sprintf("%s-%d", key, versions-1)}
			}
			if !slices.Equal(view[key], want) {
				return false, fmt.Sprintf("key %s reads %v, want %v", key, view[key], want)
			}
		}
		return true, ""
	})
}
