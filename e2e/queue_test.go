package e2e

import (
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/mqproject/mq/lib/mqtest"
)

// TestExecNewShareGroupGetsQueuedJobs: the cron example of docs/mqpipe.md
// processes the jobs sent before its first worker; --start latest skips
// them.
func TestExecNewShareGroupGetsQueuedJobs(t *testing.T) {
	parallel(t)
	b := startBroker(t, brokerOpts{props: shareProps})
	if r := runTool(t, 30*time.Second, "m1\nm2\nm3\n", "mqpipe", "produce", "-b", b.addr, "-t", "mail"); r.code != 0 {
		t.Fatalf("produce: %d %s", r.code, r.stderr)
	}
	r := runTool(t, 60*time.Second, "", "mqpipe", "exec", "-b", b.addr, "-t", "mail", "-g", "cron", "--exit-when-idle", "2s", "--", "sh", "-c", "echo sent $(cat)")
	if r.code != 0 || r.stdout != "sent m1\nsent m2\nsent m3\n" {
		t.Fatalf("exec of a new group: exit %d\nstdout: %q\nstderr: %s", r.code, r.stdout, r.stderr)
	}
	if want := "mqpipe: share group cron is new: it starts at the earliest offset"; !strings.HasPrefix(r.stderr, want) {
		t.Errorf("stderr %q, want it to start %q", r.stderr, want)
	}
	// Not new any more: nothing said, nothing run again.
	r = runTool(t, 60*time.Second, "", "mqpipe", "exec", "-b", b.addr, "-t", "mail", "-g", "cron", "--exit-when-idle", "2s", "--", "sh", "-c", "echo sent $(cat)")
	if r.code != 0 || r.stdout != "" || r.stderr != "" {
		t.Fatalf("exec of the group again: exit %d\nstdout: %q\nstderr: %s", r.code, r.stdout, r.stderr)
	}
	// --start latest: only what comes after.
	r = runTool(t, 60*time.Second, "", "mqpipe", "exec", "-b", b.addr, "-t", "mail", "-g", "late", "--start", "latest", "--exit-when-idle", "2s", "--", "sh", "-c", "echo sent $(cat)")
	if r.code != 0 || r.stdout != "" || !strings.Contains(r.stderr, "starts at the latest offset") {
		t.Fatalf("exec --start latest: exit %d\nstdout: %q\nstderr: %s", r.code, r.stdout, r.stderr)
	}
	r = runTool(t, 10*time.Second, "", "mqpipe", "exec", "-b", b.addr, "-t", "mail", "-g", "x", "--start", "soon", "--", "true")
	if r.code != 2 || !strings.Contains(r.stderr, "want earliest or latest") {
		t.Fatalf("exec --start soon: exit %d, stderr %q", r.code, r.stderr)
	}
}

// TestQueueConfigFromTheShell: a share group's configs are read and set
// with mqctl, before the group exists; queue create starts a new group at
// the earliest offset.
func TestQueueConfigFromTheShell(t *testing.T) {
	b := startBroker(t, brokerOpts{props: shareProps})
	mqctl := func(args ...string) toolResult {
		return runTool(t, 30*time.Second, "", "mqctl", append([]string{"-b", b.addr}, args...)...)
	}
	r := mqctl("queue", "config", "workers", "share.delivery.count.limit=3", "errors.deadletterqueue.topic.name=jobs.dlq", "share.record.lock.duration.ms=15000")
	if r.code != 0 {
		t.Fatalf("queue config set: %d %s", r.code, r.stderr)
	}
	r = mqctl("queue", "config", "workers", "-o", "json")
	var d struct {
		Resource string `json:"resource"`
		Configs  []struct {
			Name, Value, Source string
		} `json:"configs"`
	}
	if r.code != 0 || json.Unmarshal([]byte(r.stdout), &d) != nil {
		t.Fatalf("queue config: %d %s %s", r.code, r.stdout, r.stderr)
	}
	got := map[string]string{}
	for _, c := range d.Configs {
		got[c.Name] = c.Value + " " + c.Source
	}
	want := map[string]string{
		"share.delivery.count.limit":        "3 GROUP_CONFIG",
		"errors.deadletterqueue.topic.name": "jobs.dlq GROUP_CONFIG",
		"share.record.lock.duration.ms":     "15000 GROUP_CONFIG",
		"share.auto.offset.reset":           "latest DEFAULT_CONFIG",
	}
	for k, v := range want {
		if got[k] != v {
			t.Errorf("%s: %q, want %q (all: %v)", k, got[k], v, got)
		}
	}
	r = mqctl("queue", "config", "workers", "-d", "share.record.lock.duration.ms")
	if r.code != 0 {
		t.Fatalf("queue config -d: %d %s", r.code, r.stderr)
	}
	r = mqctl("queue", "config", "workers", "share.record.lock.duration.ms")
	if r.code != 0 || !strings.Contains(r.stdout, "DEFAULT_CONFIG") {
		t.Fatalf("lock duration after -d: %d %s %s", r.code, r.stdout, r.stderr)
	}
	r = mqctl("queue", "config", "workers", "share.delivery.count.limit=0")
	if r.code != 1 || !strings.Contains(r.stderr, "share.delivery.count.limit") || strings.Count(r.stderr, "\n") != 1 {
		t.Fatalf("a bad value: %d %q", r.code, r.stderr)
	}
	r = mqctl("queue", "config", "workers", "share.delivery.count.limit", "share.delivery.count.limit=2")
	if r.code != 2 {
		t.Fatalf("names mixed with changes: %d %q", r.code, r.stderr)
	}

	// jobs.dlq does not exist yet: no dead letters to replay.
	r = mqctl("queue", "dlq", "replay", "--group", "workers", "-o", "json")
	if r.code != 0 || !strings.Contains(r.stdout, `"from":"jobs.dlq","replayed":0`) {
		t.Fatalf("replay before the first dead letter: %d %s %s", r.code, r.stdout, r.stderr)
	}
	r = mqctl("queue", "create", "workers", "-o", "json")
	if r.code != 0 || !strings.Contains(r.stdout, `"new":true`) || !strings.Contains(r.stdout, `"start":"earliest"`) {
		t.Fatalf("queue create: %d %s %s", r.code, r.stdout, r.stderr)
	}
	r = mqctl("queue", "config", "workers", "share.auto.offset.reset")
	if r.code != 0 || !strings.Contains(r.stdout, "earliest") || !strings.Contains(r.stdout, "GROUP_CONFIG") {
		t.Fatalf("start after queue create: %d %s %s", r.code, r.stdout, r.stderr)
	}
}

// TestGroupResetOffsetsRefusesAShareGroup: a share group's id is not a
// consumer group's: mqctl group reset-offsets and a plain OffsetCommit are
// refused and make no consumer group; mqctl queue reset moves the share
// group's start instead.
func TestGroupResetOffsetsRefusesAShareGroup(t *testing.T) {
	b := startBroker(t, brokerOpts{props: shareProps})
	if _, err := b.admin().CreateTopic(ctxFor(t, 10*time.Second), 1, 1, nil, "jobs"); err != nil {
		t.Fatal(err)
	}
	cl := b.client()
	setShareConfigs(t, cl, "W", "share.auto.offset.reset", "earliest")
	const n = 10
	produceValues(t, cl, "jobs", 0, n)
	tally := newShareTally()
	stop := tally.consumers(t, b, "W", "jobs", 1)
	tally.waitDistinct(t, n, 60*time.Second)
	stop()

	mqctl := func(args ...string) toolResult {
		return runTool(t, 30*time.Second, "", "mqctl", append([]string{"-b", b.addr}, args...)...)
	}
	r := mqctl("group", "reset-offsets", "-g", "W", "-t", "jobs", "--to-earliest", "--execute")
	if r.code != 2 || r.stdout != "" || !strings.Contains(r.stderr, `"W" is a share group`) || !strings.Contains(r.stderr, "mqctl queue reset") {
		t.Fatalf("group reset-offsets of a share group: exit %d\nstdout: %s\nstderr: %s", r.code, r.stdout, r.stderr)
	}
	// The broker refuses it too, whatever the client.
	resps, err := b.admin().CommitOffsets(ctxFor(t, 10*time.Second), "W", kadm.OffsetsFromRecords(kgo.Record{Topic: "jobs", Partition: 0, Offset: -1}))
	if err == nil {
		o, _ := resps.Lookup("jobs", 0)
		err = o.Err
	}
	if !errors.Is(err, kerr.GroupIDNotFound) {
		t.Errorf("OffsetCommit for share group W: %v, want GROUP_ID_NOT_FOUND", err)
	}
	r = mqctl("group", "list", "-o", "json")
	if r.code != 0 || strings.Contains(r.stdout, `"W"`) {
		t.Fatalf("group list after the refused resets: %d %s %s", r.code, r.stdout, r.stderr)
	}

	r = mqctl("queue", "reset", "-g", "W", "-t", "jobs", "--to-offset", "4")
	if r.code != 0 || !strings.Contains(r.stdout, "planned") || !strings.Contains(r.stderr, "dry run") {
		t.Fatalf("queue reset (dry run): %d %s %s", r.code, r.stdout, r.stderr)
	}
	r = mqctl("queue", "reset", "-g", "W", "-t", "jobs", "--to-offset", "4", "--execute", "-o", "json")
	if r.code != 0 || !strings.Contains(r.stdout, `"current":10,"new":4,"result":"committed"`) {
		t.Fatalf("queue reset --execute: %d %s %s", r.code, r.stdout, r.stderr)
	}
	again := newShareTally()
	again.consumers(t, b, "W", "jobs", 1)
	again.waitDistinct(t, n-4, 60*time.Second)
	again.mu.Lock()
	for v := range again.accepted {
		if i, _ := strconv.Atoi(v); i < 4 {
			t.Errorf("record %s delivered again after a reset to 4", v)
		}
	}
	again.mu.Unlock()
	r = mqctl("queue", "reset", "-g", "W", "-t", "jobs", "--to-earliest", "--execute")
	if r.code != 1 || !strings.Contains(r.stderr, "has 1 member") {
		t.Fatalf("queue reset of a group with a member: %d %s %s", r.code, r.stdout, r.stderr)
	}
	r = mqctl("queue", "reset", "-g", "W", "-t", "jobs", "--shift-by", "1")
	if r.code != 2 {
		t.Fatalf("queue reset --shift-by: %d %s", r.code, r.stderr)
	}
}

// TestDeadLettersOneSchemaReplayedFromBothWriters: mqpipe exec --dlq and
// the broker's share-group dead-lettering write the same headers to the
// same topic; queue describe counts them and dlq replay puts every one
// back, the older header names included.
func TestDeadLettersOneSchemaReplayedFromBothWriters(t *testing.T) {
	b := startBroker(t, brokerOpts{props: shareProps})
	adm := b.admin()
	for _, topic := range []string{"jobs", "jobs.dead", "again"} {
		if _, err := adm.CreateTopic(ctxFor(t, 10*time.Second), 1, 1, nil, topic); err != nil {
			t.Fatal(err)
		}
	}
	cl := b.client()
	mqctl := func(args ...string) toolResult {
		return runTool(t, 30*time.Second, "", "mqctl", append([]string{"-b", b.addr}, args...)...)
	}
	// mqpipe exec gives up bad-1 and bad-2 (offsets 0 and 2).
	if r := runTool(t, 30*time.Second, "bad-1\nok-1\nbad-2\n", "mqpipe", "produce", "-b", b.addr, "-t", "jobs"); r.code != 0 {
		t.Fatalf("produce: %d %s", r.code, r.stderr)
	}
	r := runTool(t, 60*time.Second, "", "mqpipe", "exec", "-b", b.addr, "-t", "jobs", "-g", "workers", "--attempts", "1", "--dlq", "jobs.dead",
		"--exit-when-idle", "2s", "--", "sh", "-c", `case "$(cat)" in bad*) echo no way >&2; exit 3;; esac`)
	if r.code != 0 {
		t.Fatalf("exec: %d %s", r.code, r.stderr)
	}
	// The broker dead-letters rej-1 (offset 3), rejected by a consumer
	// of the same group.
	if err := cl.ProduceSync(ctxFor(t, 10*time.Second), &kgo.Record{Topic: "jobs", Value: []byte("rej-1")}).FirstErr(); err != nil {
		t.Fatal(err)
	}
	consumer := b.client(kgo.ShareGroup("workers"), kgo.ConsumeTopics("jobs"))
	rejected := false
	cctx := ctxFor(t, 30*time.Second)
	for !rejected {
		fs := consumer.PollFetches(cctx)
		if cctx.Err() != nil {
			t.Fatal("rej-1 never delivered")
		}
		fs.EachRecord(func(r *kgo.Record) {
			r.Ack(kgo.AckReject)
			rejected = rejected || string(r.Value) == "rej-1"
		})
	}
	consumer.FlushAcks(ctxFor(t, 10*time.Second))
	consumer.Close()
	// A dead letter with the header names older mqpipe releases wrote.
	old := &kgo.Record{Topic: "jobs.dead", Value: []byte("old-1"), Headers: []kgo.RecordHeader{
		{Key: "mq.dlq.topic", Value: []byte("jobs")}, {Key: "mq.dlq.partition", Value: []byte("0")}, {Key: "mq.dlq.offset", Value: []byte("9")}}}
	if err := cl.ProduceSync(ctxFor(t, 10*time.Second), old).FirstErr(); err != nil {
		t.Fatal(err)
	}

	var last string
	mqtest.Wait{Timeout: 30 * time.Second}.For(t, "queue describe counting the 4 dead letters", func() (bool, string) {
		r := mqctl("queue", "describe", "workers")
		last = r.stdout + r.stderr
		return r.code == 0 && strings.Contains(r.stdout, "dead letters: jobs.dead (4 records)"), last
	})

	// One schema, whoever wrote it.
	dl := b.client(kgo.ConsumeTopics("jobs.dead"), kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()))
	headers := map[string]map[string]string{}
	dctx := ctxFor(t, 30*time.Second)
	for len(headers) < 4 {
		fs := dl.PollFetches(dctx)
		if dctx.Err() != nil {
			t.Fatalf("read %d dead letters of 4", len(headers))
		}
		fs.EachRecord(func(r *kgo.Record) {
			h := map[string]string{}
			for _, hd := range r.Headers {
				h[hd.Key] = string(hd.Value)
			}
			headers[string(r.Value)] = h
		})
	}
	for v, offset := range map[string]string{"bad-1": "0", "bad-2": "2", "rej-1": "3"} {
		h := headers[v]
		if h["mq.dlq.source.topic"] != "jobs" || h["mq.dlq.source.partition"] != "0" || h["mq.dlq.source.offset"] != offset ||
			h["mq.dlq.group"] != "workers" || h["mq.dlq.delivery.count"] != "1" || h["mq.dlq.error"] == "" || h["mq.dlq.topic"] != "" {
			t.Errorf("dead letter %s: headers %v", v, h)
		}
	}

	r = mqctl("queue", "dlq", "replay", "--group", "workers", "-o", "json")
	if r.code != 0 || !strings.Contains(r.stdout, `"replayed":4`) {
		t.Fatalf("dlq replay --group: %d %s %s", r.code, r.stdout, r.stderr)
	}
	back := b.client(kgo.ConsumePartitions(map[string]map[int32]kgo.Offset{"jobs": {0: kgo.NewOffset().At(4)}}))
	replayed := map[string]int{}
	bctx := ctxFor(t, 30*time.Second)
	for len(replayed) < 4 {
		fs := back.PollFetches(bctx)
		if bctx.Err() != nil {
			t.Fatalf("replayed back on jobs: %v", replayed)
		}
		fs.EachRecord(func(r *kgo.Record) {
			replayed[string(r.Value)] += 1 + len(r.Headers)
		})
	}
	for _, v := range []string{"bad-1", "bad-2", "rej-1", "old-1"} {
		if replayed[v] != 1 {
			t.Errorf("%s replayed %d times (+ headers): %v", v, replayed[v], replayed)
		}
	}
	// --from names the topic itself: no group needed.
	r = mqctl("queue", "dlq", "replay", "--from", "jobs.dead", "--to", "again", "-o", "json")
	if r.code != 0 || !strings.Contains(r.stdout, `"replayed":4`) {
		t.Fatalf("dlq replay --from: %d %s %s", r.code, r.stdout, r.stderr)
	}
}

// TestMetricsShowShareGroups: a share group's window, its oldest
// unacknowledged record and its dead letters are in the metrics, as mqctl
// queue describe counts them.
func TestMetricsShowShareGroups(t *testing.T) {
	b, metricsAddr := startMetricsBroker(t, shareProps...)
	if _, err := b.admin().CreateTopic(ctxFor(t, 10*time.Second), 1, 1, nil, "jobs"); err != nil {
		t.Fatal(err)
	}
	cl := b.client()
	setShareConfigs(t, cl, "workers", "share.auto.offset.reset", "earliest")
	hourAgo := time.Now().Add(-time.Hour)
	for _, from := range []int{0, 5} { // two batches of five
		var recs []*kgo.Record
		for i := from; i < from+5; i++ {
			recs = append(recs, &kgo.Record{Topic: "jobs", Value: []byte(strconv.Itoa(i)), Timestamp: hourAgo})
		}
		if err := cl.ProduceSync(ctxFor(t, 10*time.Second), recs...).FirstErr(); err != nil {
			t.Fatal(err)
		}
	}
	// 0 rejected, 1-4 accepted, 5-9 held.
	consumer := b.client(kgo.ShareGroup("workers"), kgo.ConsumeTopics("jobs"), kgo.ShareMaxRecords(5), kgo.ShareMaxRecordsStrict())
	defer consumer.Close()
	ctx := ctxFor(t, 30*time.Second)
	held := 0
	for held < 5 {
		fs := consumer.PollFetches(ctx)
		if ctx.Err() != nil {
			t.Fatalf("held %d records of 5", held)
		}
		fs.EachRecord(func(r *kgo.Record) {
			switch v, _ := strconv.Atoi(string(r.Value)); {
			case v == 0:
				r.Ack(kgo.AckReject)
			case v < 5:
				r.Ack(kgo.AckAccept)
			default:
				held++
			}
		})
		if held == 0 {
			consumer.FlushAcks(ctx)
		}
	}
	labels := []string{"group=workers", "topic=jobs", "partition=0"}
	want := map[string]float64{
		"mq_share_group_in_flight_records":  5,
		"mq_share_group_available_records":  0,
		"mq_share_group_acquired_records":   5,
		"mq_share_group_archived_records":   0,
		"mq_share_group_dead_letters_total": 1,
	}
	var last string
	mqtest.Wait{Timeout: 30 * time.Second}.For(t, "the share group's window in the metrics", func() (bool, string) {
		families := scrape(t, metricsAddr)
		last = ""
		ok := true
		for name, typ := range shareMetrics {
			if mf := families[name]; mf == nil || mf.GetType() != typ {
				ok = false
				last += fmt.Sprintf("%s: not served as a %v; ", name, typ)
			}
		}
		for name, v := range want {
			if got, present := sample(families, name, labels...); !present || got != v {
				ok = false
				last += fmt.Sprintf("%s = %v (present %v), want %v; ", name, got, present, v)
			}
		}
		if got, _ := sample(families, "mq_share_group_oldest_unacked_seconds", labels...); got < 3500 {
			ok = false
			last += fmt.Sprintf("oldest unacked %vs, want about an hour; ", got)
		}
		if got, _ := sample(families, "mq_share_groups", "state=Stable"); got != 1 {
			ok = false
			last += fmt.Sprintf("mq_share_groups{state=Stable} = %v; ", got)
		}
		return ok, last
	})
}

// TestMqtailOnceShowsQueues: mqtail shows share groups in their own list,
// with their window and dead letters, and not among the consumer groups.
func TestMqtailOnceShowsQueues(t *testing.T) {
	b := startBroker(t, brokerOpts{props: shareProps})
	if _, err := b.admin().CreateTopic(ctxFor(t, 10*time.Second), 1, 1, nil, "jobs"); err != nil {
		t.Fatal(err)
	}
	cl := b.client()
	setShareConfigs(t, cl, "workers", "share.auto.offset.reset", "earliest", "errors.deadletterqueue.topic.name", "jobs.dead")
	produceValues(t, cl, "jobs", 0, 5)
	// The member rejects 0 and holds the rest.
	consumer := b.client(kgo.ShareGroup("workers"), kgo.ConsumeTopics("jobs"))
	defer consumer.Close()
	ctx := ctxFor(t, 30*time.Second)
	for got := 0; got < 5; {
		fs := consumer.PollFetches(ctx)
		if ctx.Err() != nil {
			t.Fatalf("acquired %d records of 5", got)
		}
		fs.EachRecord(func(r *kgo.Record) {
			got++
			if string(r.Value) == "0" {
				r.Ack(kgo.AckReject)
			}
		})
	}
	consumer.FlushAcks(ctx)
	type queue struct {
		Group           string `json:"group"`
		State           string `json:"state"`
		Members         int    `json:"members"`
		DeadLetterTopic string `json:"dead_letter_topic"`
		DeadLetters     int64  `json:"dead_letters"`
		Acquired        int64  `json:"acquired"`
		Partitions      []struct {
			Topic       string `json:"topic"`
			StartOffset int64  `json:"start_offset"`
		} `json:"partitions"`
	}
	var doc struct {
		Groups []struct {
			Group string `json:"group"`
		} `json:"groups"`
		Queues []queue `json:"queues"`
	}
	mqtest.Wait{Timeout: 30 * time.Second}.For(t, "mqtail --once showing the queue", func() (bool, string) {
		r := runTool(t, 30*time.Second, "", "mqtail", "-b", b.addr, "--once", "-o", "json", "--interval", "100ms")
		if r.code != 0 || json.Unmarshal([]byte(r.stdout), &doc) != nil || len(doc.Queues) != 1 {
			return false, r.stdout + r.stderr
		}
		q := doc.Queues[0]
		return q.Group == "workers" && q.State == "Stable" && q.Members == 1 && q.DeadLetterTopic == "jobs.dead" && q.DeadLetters == 1 &&
			q.Acquired == 4 && len(q.Partitions) == 1 && q.Partitions[0].StartOffset == 1, r.stdout
	})
	for _, g := range doc.Groups {
		if g.Group == "workers" {
			t.Errorf("share group workers listed among the consumer groups: %+v", doc.Groups)
		}
	}
	r := runTool(t, 30*time.Second, "", "mqtail", "-b", b.addr, "--once", "--interval", "100ms")
	if r.code != 0 || !strings.Contains(r.stdout, "QUEUE") || !strings.Contains(r.stdout, "1 in jobs.dead") {
		t.Fatalf("mqtail --once: %d\n%s\n%s", r.code, r.stdout, r.stderr)
	}
}

// TestShareGroupRefusedForAConsumerGroupID: the other way round, a share
// member is refused the id of a consumer group, by mqpipe exec (with how
// to join it) and by the broker.
func TestShareGroupRefusedForAConsumerGroupID(t *testing.T) {
	b := startBroker(t, brokerOpts{props: shareProps})
	if _, err := b.admin().CreateTopic(ctxFor(t, 10*time.Second), 1, 1, nil, "jobs"); err != nil {
		t.Fatal(err)
	}
	resps, err := b.admin().CommitOffsets(ctxFor(t, 10*time.Second), "C", kadm.OffsetsFromRecords(kgo.Record{Topic: "jobs", Partition: 0, Offset: -1}))
	if err != nil || resps.Error() != nil {
		t.Fatalf("commit for consumer group C: %v %v", err, resps.Error())
	}
	r := runTool(t, 30*time.Second, "", "mqpipe", "exec", "-b", b.addr, "-t", "jobs", "-g", "C", "--exit-when-idle", "1s", "--", "true")
	if r.code != 2 || !strings.Contains(r.stderr, "C is a consumer group") || strings.Count(r.stderr, "\n") != 1 {
		t.Fatalf("mqpipe exec -g C: exit %d, stderr %q", r.code, r.stderr)
	}
	req := kmsg.NewPtrShareGroupHeartbeatRequest()
	req.GroupID, req.MemberID, req.MemberEpoch, req.SubscribedTopicNames = "C", "m-1", 0, []string{"jobs"}
	resp, err := req.RequestWith(ctxFor(t, 10*time.Second), b.client())
	if err != nil {
		t.Fatal(err)
	}
	if err := kerr.ErrorForCode(resp.ErrorCode); !errors.Is(err, kerr.GroupIDNotFound) {
		t.Errorf("ShareGroupHeartbeat for consumer group C: %v, want GROUP_ID_NOT_FOUND", err)
	}
	r = runTool(t, 30*time.Second, "", "mqctl", "-b", b.addr, "queue", "list")
	if r.code != 0 || strings.Contains(r.stdout, "C ") {
		t.Errorf("queue list after the refusals: %d %q", r.code, r.stdout)
	}
}
