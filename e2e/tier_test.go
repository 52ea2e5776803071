package e2e

import (
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
	"gocloud.dev/blob"
	_ "gocloud.dev/blob/fileblob" // the file:// store
	_ "gocloud.dev/blob/s3blob"   // an s3:// store

	"github.com/mqproject/mq/lib/mqtest"
)

// tierStore is one remote store the tiered-storage tests run against:
// its remote.log.storage.url for a test, and how to list the objects
// under a key prefix (to count uploads and see deletions).
type tierStore struct {
	name string
	open func(t *testing.T) (url string, objects func(prefix string) []string)
	// outage makes the store fail every request until the returned
	// func is called; nil: the store cannot be taken down.
	outage func(t *testing.T, url string) (back func())
}

// storeObjects lists the objects of the store at url under a prefix,
// through gocloud.dev/blob as mqd reaches it (file://, s3://).
func storeObjects(t *testing.T, url string) func(prefix string) []string {
	return func(prefix string) []string {
		ctx := ctxFor(t, 20*time.Second)
		b, err := blob.OpenBucket(ctx, url)
		if err != nil {
			t.Fatal(err)
		}
		defer b.Close()
		var keys []string
		it := b.List(&blob.ListOptions{Prefix: prefix})
		for {
			o, err := it.Next(ctx)
			if err == io.EOF {
				return keys
			}
			if err != nil {
				// A store that is down (an outage) lists nothing.
				return keys
			}
			keys = append(keys, o.Key)
		}
	}
}

// tierStores are the stores of the tiered-storage tests.
var tierStores = []tierStore{
	{name: "file", open: func(t *testing.T) (string, func(string) []string) {
		url := "file://" + filepath.Join(t.TempDir(), "remote")
		if err := os.MkdirAll(strings.TrimPrefix(url, "file://"), 0o750); err != nil {
			t.Fatal(err)
		}
		return url, storeObjects(t, url)
	},
		// A file where the store's directory was: every write fails
		// (ENOTDIR), whoever the tests run as.
		outage: func(t *testing.T, url string) func() {
			dir := strings.TrimPrefix(url, "file://")
			if err := os.Rename(dir, dir+".away"); err != nil {
				t.Fatal(err)
			}
			if err := os.WriteFile(dir, nil, 0o600); err != nil {
				t.Fatal(err)
			}
			return func() {
				if err := os.Remove(dir); err != nil {
					t.Fatal(err)
				}
				if err := os.Rename(dir+".away", dir); err != nil {
					t.Fatal(err)
				}
			}
		}},

	{name: "s3", open: func(t *testing.T) (string, func(string) []string) {
		_, s := startSeaweed(t)
		url := s.URL()
		seaweeds.Store(url, s)
		t.Cleanup(func() { seaweeds.Delete(url) })
		return url, storeObjects(t, url)
	},
		// SeaweedFS stopped: every request fails (connection refused)
		// until it is started again on the same data.
		outage: func(t *testing.T, url string) func() {
			v, ok := seaweeds.Load(url)
			if !ok {
				t.Fatalf("no SeaweedFS serves %s", url)
			}
			s := v.(*mqtest.Seaweed)
			s.Stop()
			return s.Start
		}},
}

// seaweeds are the SeaweedFS servers of the running tests, by their
// bucket's URL, for the s3 store's outage.
var seaweeds sync.Map

// tierProps are the broker settings of the tiered-storage tests: the
// store, and the tiering and retention tasks every 100 ms.
func tierProps(url string) []string {
	return []string{
		"remote.log.storage.url=" + url,
		"remote.log.manager.task.interval.ms=100",
		"log.retention.check.interval.ms=100",
	}
}

// tieredTopicConfigs: 16 KiB segments, 32 KiB kept locally, everything
// kept in all.
func tieredTopicConfigs(extra map[string]string) map[string]*string {
	m := map[string]*string{
		"remote.storage.enable": kadm.StringPtr("true"),
		"segment.bytes":         kadm.StringPtr("16384"),
		"local.retention.bytes": kadm.StringPtr("32768"),
		"retention.ms":          kadm.StringPtr("-1"),
	}
	for k, v := range extra {
		m[k] = kadm.StringPtr(v)
	}
	return m
}

// produceNumbered produces n records to partition 0 of topic, each key
// "k-i" and value "value-i-" padded to 100 bytes, timestamp base+i ms,
// and returns the values in order.
func produceNumbered(t *testing.T, cl *kgo.Client, topic string, from, n int, base time.Time) []string {
	t.Helper()
	ctx := ctxFor(t, 60*time.Second)
	var values []string
	for i := from; i < from+n; i += 100 {
		var recs []*kgo.Record
		for j := i; j < min(i+100, from+n); j++ {
			v := fmt.Sprintf("value-%06d-", j)
			v += strings.Repeat("x", 100-len(v))
			values = append(values, v)
			recs = append(recs, &kgo.Record{Topic: topic, Partition: 0, Key: []byte(fmt.Sprintf("k-%d", j)), Value: []byte(v), Timestamp: base.Add(time.Duration(j) * time.Millisecond)})
		}
		if err := cl.ProduceSync(ctx, recs...).FirstErr(); err != nil {
			t.Fatal(err)
		}
	}
	return values
}

// listOffset asks partition 0 of topic for ListOffsets timestamp ts
// (-2 earliest, -4 earliest local, or a time in ms).
func listOffset(t *testing.T, cl *kgo.Client, topic string, ts int64) (int64, int16) {
	t.Helper()
	req := kmsg.NewPtrListOffsetsRequest()
	req.ReplicaID = -1
	rt := kmsg.NewListOffsetsRequestTopic()
	rt.Topic = topic
	rp := kmsg.NewListOffsetsRequestTopicPartition()
	rp.Partition, rp.Timestamp, rp.CurrentLeaderEpoch = 0, ts, -1
	rt.Partitions = append(rt.Partitions, rp)
	req.Topics = append(req.Topics, rt)
	resp, err := req.RequestWith(ctxFor(t, 20*time.Second), cl)
	if err != nil {
		t.Fatal(err)
	}
	p := resp.Topics[0].Partitions[0]
	return p.Offset, p.ErrorCode
}

// consumeTiered reads partition 0 of topic from the beginning until n
// records, and returns their values.
func consumeTiered(t *testing.T, addr, topic string, n int) []string {
	t.Helper()
	return consumeIsolated(t, addr, topic, n, kgo.ReadUncommitted())
}

// partitionReader is a client reading partition 0 of topic from start,
// from the brokers of addr (comma separated).
func partitionReader(t *testing.T, addr, topic string, start kgo.Offset, opts ...kgo.Opt) *kgo.Client {
	t.Helper()
	opts = append(opts, kgo.SeedBrokers(strings.Split(addr, ",")...),
		kgo.ConsumePartitions(map[string]map[int32]kgo.Offset{topic: {0: start}}))
	cl, err := kgo.NewClient(opts...)
	if err != nil {
		t.Fatal(err)
	}
	return cl
}

// consumeTieredToEnd reads partition 0 of topic from its log start up to
// offset n-1, and returns the offset of the read's last start and the
// values from it on: when the log start moves past the read (retention
// deleting meanwhile), the client starts again from the new one, and what
// was read before is dropped. A jump past records that logStart (the
// partition's log start now) says still exist fails the test.
func consumeTieredToEnd(t *testing.T, addr, topic string, n int64, logStart func() int64) (int64, []string) {
	t.Helper()
	cl := partitionReader(t, addr, topic, kgo.NewOffset().AtStart())
	defer cl.Close()
	ctx := ctxFor(t, 60*time.Second)
	from, next := int64(-1), int64(-1)
	var got []string
	for next < n {
		fs := cl.PollFetches(ctx)
		if err := fs.Err0(); err != nil {
			t.Fatalf("after %d records from offset %d: %v", len(got), from, err)
		}
		fs.EachRecord(func(r *kgo.Record) {
			if r.Offset != next {
				if next >= 0 && r.Offset > logStart() {
					t.Fatalf("the read jumped from offset %d to %d, past records not deleted (log start %d)", next, r.Offset, logStart())
				}
				from, got = r.Offset, nil
			}
			got = append(got, string(r.Value))
			next = r.Offset + 1
		})
	}
	return from, got
}

func checkSame(t *testing.T, what string, got, want []string) {
	t.Helper()
	if len(got) != len(want) {
		t.Fatalf("%s: %d records, want %d", what, len(got), len(want))
	}
	for i := range want {
		if got[i] != want[i] {
			t.Fatalf("%s: record %d is %q, want %q", what, i, got[i], want[i])
		}
	}
}

// waitTiered waits until the local log of partition 0 of topic starts
// at or after minLocal while the log start (remote) is still 0.
func waitTiered(t *testing.T, cl *kgo.Client, topic string, minLocal int64) {
	t.Helper()
	mqtest.WaitFor(t, "the partition tiered", func() (bool, string) {
		local, code := listOffset(t, cl, topic, -4)
		start, code2 := listOffset(t, cl, topic, -2)
		return code == 0 && code2 == 0 && local >= minLocal && start == 0, fmt.Sprintf("local log start %d (error %d), log start %d (error %d)", local, code, start, code2)
	})
}

// TestTieredReplayFromTheBeginning: 10× the local retention produced to
// a tiered topic is consumed whole from offset 0 with kgo and kcat
// (every record, in order, the same bytes), ListOffsets EARLIEST and by
// timestamp point into the remote part, and all of it holds after a
// restart.
func TestTieredReplayFromTheBeginning(t *testing.T) {
	parallel(t)
	for _, st := range tierStores {
		t.Run(st.name, func(t *testing.T) {
			url, objects := st.open(t)
			b := startBroker(t, brokerOpts{props: tierProps(url)})
			adm := b.admin()
			ctx := ctxFor(t, 30*time.Second)
			const topic = "tiered"
			if _, err := adm.CreateTopic(ctx, 1, 1, tieredTopicConfigs(nil), topic); err != nil {
				t.Fatal(err)
			}
			base := time.Now().Add(-time.Hour).Truncate(time.Millisecond)
			const n = 3000 // ~390 KiB in batches: 12× local.retention.bytes
			want := produceNumbered(t, b.client(kgo.ProducerBatchCompression(kgo.NoCompression())), topic, 0, n, base)
			cl := b.client()
			waitTiered(t, cl, topic, n/2)
			if len(objects("")) == 0 {
				t.Fatal("no object in the store")
			}

			checkSame(t, "kgo from the beginning", consumeTiered(t, b.addr, topic, n), want)
			out := kcat(t, b, "", "-C", "-t", topic, "-p", "0", "-o", "beginning", "-c", fmt.Sprint(n), "-e", "-f", "%o %k %s\n")
			lines := strings.Split(strings.TrimSuffix(out, "\n"), "\n")
			if len(lines) != n {
				t.Fatalf("kcat read %d records, want %d", len(lines), n)
			}
			for i, l := range lines {
				if w := fmt.Sprintf("%d k-%d %s", i, i, want[i]); l != w {
					t.Fatalf("kcat record %d: %q, want %q", i, l, w)
				}
			}

			for _, o := range []int64{0, 10, 777} {
				if got, code := listOffset(t, cl, topic, base.Add(time.Duration(o)*time.Millisecond).UnixMilli()); code != 0 || got != o {
					t.Fatalf("offset for the timestamp of %d: %d (error %d)", o, got, code)
				}
			}

			// A group whose committed offset is in the remote part
			// resumes there and reads on across into the local part.
			commit := kadm.Offsets{}
			commit.Add(kadm.Offset{Topic: topic, Partition: 0, At: 500, LeaderEpoch: -1})
			if err := adm.CommitAllOffsets(ctx, "replayers", commit); err != nil {
				t.Fatal(err)
			}
			gcl, err := kgo.NewClient(kgo.SeedBrokers(b.addr), kgo.ConsumerGroup("replayers"), kgo.ConsumeTopics(topic), kgo.DisableAutoCommit())
			if err != nil {
				t.Fatal(err)
			}
			var fromGroup []string
			gctx := ctxFor(t, 30*time.Second)
			for len(fromGroup) < n-500 {
				fs := gcl.PollFetches(gctx)
				if err := fs.Err0(); err != nil {
					t.Fatalf("group after %d records: %v", len(fromGroup), err)
				}
				fs.EachRecord(func(r *kgo.Record) { fromGroup = append(fromGroup, string(r.Value)) })
			}
			gcl.Close()
			checkSame(t, "a group from offset 500", fromGroup, want[500:])

			b.restart(false)
			cl = b.client()
			if got, code := listOffset(t, cl, topic, -2); code != 0 || got != 0 {
				t.Fatalf("log start after a restart: %d (error %d)", got, code)
			}
			checkSame(t, "kgo after a restart", consumeTiered(t, b.addr, topic, n), want)
		})
	}
}

// logObjects returns the data objects (.log) among keys.
func logObjects(keys []string) []string {
	var out []string
	for _, k := range keys {
		if strings.HasSuffix(k, ".log") {
			out = append(out, k)
		}
	}
	return out
}

// TestTieredRetentionAndTopicDeletionDeleteRemoteData: retention.bytes
// deletes the oldest remote segments (objects and all; the log start
// moves and reads from it are whole), and deleting the topic deletes
// every remote object of it.
func TestTieredRetentionAndTopicDeletionDeleteRemoteData(t *testing.T) {
	for _, st := range tierStores {
		t.Run(st.name, func(t *testing.T) {
			url, objects := st.open(t)
			b := startBroker(t, brokerOpts{props: tierProps(url)})
			adm := b.admin()
			ctx := ctxFor(t, 30*time.Second)
			const topic = "tiered-retention"
			created, err := adm.CreateTopic(ctx, 1, 1, tieredTopicConfigs(nil), topic)
			if err != nil {
				t.Fatal(err)
			}
			prefix := base64.RawURLEncoding.EncodeToString(created.ID[:]) + "/"
			const n = 3000
			want := produceNumbered(t, b.client(kgo.ProducerBatchCompression(kgo.NoCompression())), topic, 0, n, time.Now())
			cl := b.client()
			// Local retention caught up (32 KiB, ~250 records, plus the
			// active segment): the local log holds well under the 100 KB
			// retention.bytes set below, which keeps remote data only
			// while the local log leaves room for it.
			waitTiered(t, cl, topic, n*4/5)
			before := len(logObjects(objects(prefix)))
			del := kadm.Offsets{}
			del.Add(kadm.Offset{Topic: topic, Partition: 0, At: 100})
			if rs, err := adm.DeleteRecords(ctx, del); err != nil || !errors.Is(rs[topic][0].Err, kerr.PolicyViolation) {
				t.Fatalf("DeleteRecords on a tiered topic: %v %+v, want POLICY_VIOLATION", err, rs)
			}

			// Keep about 100 KiB of the ~390 KiB.
			if _, err := adm.AlterTopicConfigs(ctx, []kadm.AlterConfig{{Op: kadm.SetConfig, Name: "retention.bytes", Value: kadm.StringPtr("100000")}}, topic); err != nil {
				t.Fatal(err)
			}
			var start int64
			mqtest.WaitFor(t, "remote retention", func() (bool, string) {
				var code int16
				start, code = listOffset(t, cl, topic, -2)
				after := len(logObjects(objects(prefix)))
				return code == 0 && start >= n/2 && after < before, fmt.Sprintf("log start %d (error %d), %d data objects (%d before)", start, code, after, before)
			})
			local, _ := listOffset(t, cl, topic, -4)
			if start >= local {
				t.Fatalf("log start %d not below the local log start %d: nothing remote left to read", start, local)
			}
			// Retention may go on deleting while this reads (the wait
			// above ends at its first deletion): a read whose offset was
			// deleted meanwhile starts again from the new log start. What
			// must hold is that the read ends whole: every record from
			// where it last started to the end, each the one produced,
			// and that it skipped only what is deleted.
			from, got := consumeTieredToEnd(t, b.addr, topic, n, func() int64 { s, _ := listOffset(t, cl, topic, -2); return s })
			if from < start {
				t.Fatalf("the read's last start %d is below the log start %d", from, start)
			}
			checkSame(t, "kgo from the log start after retention", got, want[from:])

			if _, err := adm.DeleteTopic(ctx, topic); err != nil {
				t.Fatal(err)
			}
			mqtest.WaitFor(t, "the remote data of the deleted topic deleted", func() (bool, string) {
				left := objects(prefix)
				return len(left) == 0, fmt.Sprintf("%d objects left: %v", len(left), left)
			})
		})
	}
}

// TestTieredLeaderFailoverDuringUploads: a 3-node cluster loses the
// leader of a tiered partition while it uploads; the new leader continues
// from the metadata: every acknowledged record reads back once, in
// order, from offset 0, no data object of the store overlaps another
// recorded one, and the killed node, restarted, rejoins the ISR
// copying only the leader's local part.
func TestTieredLeaderFailoverDuringUploads(t *testing.T) {
	parallel(t)
	for _, st := range tierStores {
		t.Run(st.name, func(t *testing.T) {
			url, objects := st.open(t)
			c := startCluster(t, 3, clusterOpts{props: tierProps(url)})
			const topic = "tiered-failover"
			ctx := ctxFor(t, 60*time.Second)
			resp, err := c.admin().CreateTopic(ctx, 1, 3, tieredTopicConfigs(map[string]string{"min.insync.replicas": "2"}), topic)
			if err == nil {
				err = resp.Err
			}
			if err != nil {
				t.Fatal(err)
			}
			c.waitPartitions(topic, topic+" in sync", fullISR)
			cl := c.client(kgo.ProducerBatchCompression(kgo.NoCompression()), kgo.RequiredAcks(kgo.AllISRAcks()))
			now := time.Now()
			want := produceNumbered(t, cl, topic, 0, 1500, now)
			leader := c.waitPartitions(topic, "a leader", func(ps []partitionState) bool { return ps[0].leader > 0 })[0].leader
			if len(logObjects(objects(""))) == 0 {
				// Uploads are under way (100 ms task): wait for the first.
				mqtest.WaitFor(t, "a first upload", func() (bool, string) { return len(logObjects(objects(""))) > 0, "none" })
			}
			c.node(leader).kill()
			c.waitPartitions(topic, "a new leader", func(ps []partitionState) bool { return ps[0].leader > 0 && ps[0].leader != leader })
			want = append(want, produceNumbered(t, cl, topic, 1500, 1500, now)...)
			waitTiered(t, cl, topic, 2000)

			checkSame(t, "kgo from the beginning after a failover", consumeTiered(t, c.bootstrapList(), topic, len(want)), want)
			// Every base offset is in the store once: the controller
			// records each range once, and the new leader deleted what
			// the killed one had uploaded without recording.
			bases := map[string][]string{}
			for _, k := range logObjects(objects("")) {
				base, _, _ := strings.Cut(filepath.Base(k), "-")
				bases[base] = append(bases[base], k)
			}
			for base, keys := range bases {
				if len(keys) > 1 {
					t.Fatalf("base offset %s is in the store %d times: %v", base, len(keys), keys)
				}
			}

			c.node(leader).start()
			c.waitPartitions(topic, "the killed node back in the ISR", fullISR)
			// It had up to offset 1500; the leader's local log starts
			// at 2000 or later: it restarted its log there
			// (OFFSET_MOVED_TO_TIERED_STORAGE) instead of copying what
			// is remote.
			segs, _ := filepath.Glob(filepath.Join(c.node(leader).dataDir, topic+"-0", "*.log"))
			for _, seg := range segs {
				if base, _ := strconv.ParseInt(strings.TrimSuffix(filepath.Base(seg), ".log"), 10, 64); base < 2000 {
					t.Fatalf("the rejoined replica holds segment %s, below the leader's local log start: %v", seg, segs)
				}
			}
			if len(segs) == 0 {
				t.Fatal("the rejoined replica has no segment")
			}
		})
	}
}

// TestTieredStoreDownThenBack: while the store refuses writes, local
// retention deletes nothing that is not uploaded (the local log start
// stays put), mqctl cluster health names the failing uploads, and
// produce and the reads of local data go on; once it is back the
// uploads catch up and everything reads back from offset 0.
func TestTieredStoreDownThenBack(t *testing.T) {
	parallel(t)
	for _, st := range tierStores {
		if st.outage == nil {
			continue
		}
		t.Run(st.name, func(t *testing.T) {
			url, _ := st.open(t)
			b := startBroker(t, brokerOpts{props: tierProps(url)})
			ctx := ctxFor(t, 30*time.Second)
			const topic = "tiered-outage"
			if _, err := b.admin().CreateTopic(ctx, 1, 1, tieredTopicConfigs(nil), topic); err != nil {
				t.Fatal(err)
			}
			pcl := b.client(kgo.ProducerBatchCompression(kgo.NoCompression()))
			now := time.Now()
			want := produceNumbered(t, pcl, topic, 0, 1000, now)
			cl := b.client()
			waitTiered(t, cl, topic, 500)

			back := st.outage(t, url)
			want = append(want, produceNumbered(t, pcl, topic, 1000, 2000, now)...)
			mqtest.WaitFor(t, "uploads failing in cluster health", func() (bool, string) {
				h, res := clusterHealth(t, b.addr)
				for _, p := range h.Problems {
					if p.Kind == "tier_uploads_failing" {
						return res.code == 1, ""
					}
				}
				return false, res.stdout
			})
			mqtest.WaitFor(t, "mqtail showing the uploads failing", func() (bool, string) {
				lag, failing, out := tailUploads(t, b.addr)
				return lag != nil && *lag > 0 && failing, out
			})
			checkSame(t, "the local tail while the store is down", consumeFrom(t, b.addr, topic, 2500, 500), want[2500:])
			// ~260 KiB past the 32 KiB of local.retention.bytes, and the
			// local log still starts no later than the remote one ends.
			extent := describeTiered(t, b, topic)
			if extent.LocalStartOffset > extent.RemoteEndOffset || extent.RemoteEndOffset > 1000 || extent.LocalEndOffset != 3000 || extent.RemoteStartOffset != 0 {
				t.Fatalf("topic describe while the store is down: %+v", extent)
			}

			back()
			waitTiered(t, cl, topic, 2500)
			checkSame(t, "kgo from the beginning after the outage", consumeTiered(t, b.addr, topic, len(want)), want)
			mqtest.WaitFor(t, "a healthy cluster again", func() (bool, string) {
				_, res := clusterHealth(t, b.addr)
				return res.code == 0, res.stdout
			})
			mqtest.WaitFor(t, "mqtail showing nothing waiting", func() (bool, string) {
				lag, failing, out := tailUploads(t, b.addr)
				return lag != nil && *lag == 0 && !failing, out
			})
		})
	}
}

// tailUploads is what mqtail --once -o json says of the upload lag of
// the one broker at addr, and its output.
func tailUploads(t *testing.T, addr string) (lag *int64, failing bool, out string) {
	t.Helper()
	res := runTool(t, 30*time.Second, "", "mqtail", "-b", addr, "--once", "-o", "json", "--interval", "100ms")
	var doc struct {
		Brokers []struct {
			UploadLagBytes *int64 `json:"upload_lag_bytes"`
			UploadFailing  bool   `json:"upload_failing"`
		} `json:"brokers"`
	}
	if res.code != 0 || json.Unmarshal([]byte(res.stdout), &doc) != nil || len(doc.Brokers) != 1 {
		return nil, false, fmt.Sprintf("exit %d: %s%s", res.code, res.stdout, res.stderr)
	}
	return doc.Brokers[0].UploadLagBytes, doc.Brokers[0].UploadFailing, res.stdout
}

// consumeFrom reads n records of partition 0 of topic from offset.
func consumeFrom(t *testing.T, addr, topic string, offset int64, n int) []string {
	t.Helper()
	cl := partitionReader(t, addr, topic, kgo.NewOffset().At(offset))
	defer cl.Close()
	return pollValues(t, cl, n, 30*time.Second)[:n]
}

// pollValues polls cl until it has at least n records, within the
// timeout, and returns their values.
func pollValues(t *testing.T, cl *kgo.Client, n int, timeout time.Duration) []string {
	t.Helper()
	ctx := ctxFor(t, timeout)
	var got []string
	for len(got) < n {
		fs := cl.PollFetches(ctx)
		if err := fs.Err0(); err != nil {
			t.Fatalf("after %d records: %v", len(got), err)
		}
		fs.EachRecord(func(r *kgo.Record) { got = append(got, string(r.Value)) })
	}
	return got
}

// describeTiered returns partition 0's extents as mqctl topic describe
// -o json shows them.
func describeTiered(t *testing.T, b *broker, topic string) (e struct {
	LocalStartOffset  int64 `json:"local_start_offset"`
	LocalEndOffset    int64 `json:"local_end_offset"`
	LocalBytes        int64 `json:"local_bytes"`
	RemoteStartOffset int64 `json:"remote_start_offset"`
	RemoteEndOffset   int64 `json:"remote_end_offset"`
	RemoteBytes       int64 `json:"remote_bytes"`
}) {
	t.Helper()
	res := runTool(t, 30*time.Second, "", "mqctl", "-b", b.addr, "topic", "describe", topic, "-o", "json")
	var ds []struct {
		Partitions []struct {
			Tiered *json.RawMessage `json:"tiered"`
		} `json:"partitions"`
	}
	if err := json.Unmarshal([]byte(res.stdout), &ds); err != nil || len(ds) != 1 || len(ds[0].Partitions) != 1 || ds[0].Partitions[0].Tiered == nil {
		t.Fatalf("topic describe -o json (exit %d, %v): %s", res.code, err, res.stdout)
	}
	if err := json.Unmarshal(*ds[0].Partitions[0].Tiered, &e); err != nil {
		t.Fatal(err)
	}
	if table := runTool(t, 30*time.Second, "", "mqctl", "-b", b.addr, "topic", "describe", topic); !strings.Contains(table.stdout, "REMOTE") {
		t.Fatalf("topic describe shows no REMOTE column:\n%s", table.stdout)
	}
	return e
}

// TestTieredNewLeaderDeletesNothingWithinRetention is the KAFKA-20732
// case: every offset is both remote and local (local retention as
// retention.bytes), and the whole log is within retention.bytes only
// when those offsets count once. A new leader applies retention.bytes
// to the remote part and must delete nothing: the log start stays 0.
func TestTieredNewLeaderDeletesNothingWithinRetention(t *testing.T) {
	parallel(t)
	for _, st := range tierStores {
		t.Run(st.name, func(t *testing.T) {
			url, _ := st.open(t)
			c := startCluster(t, 3, clusterOpts{props: tierProps(url)})
			const topic = "tiered-stale"
			ctx := ctxFor(t, 60*time.Second)
			// Every offset stays local too (local.retention.bytes as
			// retention.bytes), and 1 MB of retention holds it all.
			resp, err := c.admin().CreateTopic(ctx, 1, 3, map[string]*string{
				"remote.storage.enable": kadm.StringPtr("true"), "segment.bytes": kadm.StringPtr("16384"),
				"retention.bytes": kadm.StringPtr("1000000"), "retention.ms": kadm.StringPtr("-1"), "min.insync.replicas": kadm.StringPtr("2"),
			}, topic)
			if err == nil {
				err = resp.Err
			}
			if err != nil {
				t.Fatal(err)
			}
			c.waitPartitions(topic, topic+" in sync", fullISR)
			cl := c.client(kgo.ProducerBatchCompression(kgo.NoCompression()), kgo.RequiredAcks(kgo.AllISRAcks()))
			now := time.Now()
			want := produceNumbered(t, cl, topic, 0, 4500, now) // ~590 KB: within 1 MB once, not twice
			remote := func() (start, end int64) {
				// The remote extent as the leader's describe shows it.
				res := runTool(t, 30*time.Second, "", "mqctl", "-b", c.bootstrapList(), "topic", "describe", topic, "-o", "json")
				var ds []struct {
					Partitions []struct {
						Tiered *struct {
							RemoteStart int64 `json:"remote_start_offset"`
							RemoteEnd   int64 `json:"remote_end_offset"`
						} `json:"tiered"`
					} `json:"partitions"`
				}
				if err := json.Unmarshal([]byte(res.stdout), &ds); err != nil || len(ds) != 1 || len(ds[0].Partitions) != 1 || ds[0].Partitions[0].Tiered == nil {
					return -1, -1
				}
				return ds[0].Partitions[0].Tiered.RemoteStart, ds[0].Partitions[0].Tiered.RemoteEnd
			}
			mqtest.WaitFor(t, "the closed segments uploaded", func() (bool, string) {
				_, end := remote()
				return end >= 4000, fmt.Sprintf("remote end %d", end)
			})
			leader := c.waitPartitions(topic, "a leader", func(ps []partitionState) bool { return ps[0].leader > 0 })[0].leader
			c.node(leader).kill()
			c.waitPartitions(topic, "a new leader", func(ps []partitionState) bool { return ps[0].leader > 0 && ps[0].leader != leader })
			// Two more uploads by the new leader: its retention ran
			// after the first (Sync applies it after uploading).
			for _, n := range []int{4500, 5000} {
				want = append(want, produceNumbered(t, cl, topic, n, 500, now)...)
				mqtest.WaitFor(t, "an upload by the new leader", func() (bool, string) {
					_, end := remote()
					return end >= int64(n), fmt.Sprintf("remote end %d", end)
				})
			}
			if start, _ := remote(); start != 0 {
				t.Fatalf("remote log start %d after the new leader's retention: it deleted data within retention.bytes", start)
			}
			checkSame(t, "kgo from the beginning", consumeTiered(t, c.bootstrapList(), topic, len(want)), want)
		})
	}
}

// TestTieredListOffsetsMaxTimestamp: ListOffsets MAX_TIMESTAMP finds the
// record with the largest timestamp when only the remote part holds it.
func TestTieredListOffsetsMaxTimestamp(t *testing.T) {
	parallel(t)
	for _, st := range tierStores {
		t.Run(st.name, func(t *testing.T) {
			url, _ := st.open(t)
			b := startBroker(t, brokerOpts{props: tierProps(url)})
			const topic = "tiered-maxts"
			if _, err := b.admin().CreateTopic(ctxFor(t, 30*time.Second), 1, 1, tieredTopicConfigs(nil), topic); err != nil {
				t.Fatal(err)
			}
			base := time.Now().Add(-time.Hour).Truncate(time.Millisecond)
			pr := b.client(kgo.ProducerBatchCompression(kgo.NoCompression()))
			const n, latest = 3000, 100
			ctx := ctxFor(t, 60*time.Second)
			for i := 0; i < n; i += 100 {
				var recs []*kgo.Record
				for j := i; j < i+100; j++ {
					ts := base.Add(time.Duration(j) * time.Millisecond)
					if j == latest {
						ts = base.Add(time.Hour) // later than every other record
					}
					recs = append(recs, &kgo.Record{Topic: topic, Partition: 0, Value: []byte(fmt.Sprintf("value-%06d-%s", j, strings.Repeat("x", 90))), Timestamp: ts})
				}
				if err := pr.ProduceSync(ctx, recs...).FirstErr(); err != nil {
					t.Fatal(err)
				}
			}
			cl := b.client()
			waitTiered(t, cl, topic, n/2)
			req := kmsg.NewPtrListOffsetsRequest()
			req.ReplicaID = -1
			rt := kmsg.NewListOffsetsRequestTopic()
			rt.Topic = topic
			rp := kmsg.NewListOffsetsRequestTopicPartition()
			rp.Partition, rp.Timestamp, rp.CurrentLeaderEpoch = 0, -3, -1
			rt.Partitions = append(rt.Partitions, rp)
			req.Topics = append(req.Topics, rt)
			resp, err := req.RequestWith(ctxFor(t, 20*time.Second), cl)
			if err != nil {
				t.Fatal(err)
			}
			p := resp.Topics[0].Partitions[0]
			if p.ErrorCode != 0 || p.Offset != latest || p.Timestamp != base.Add(time.Hour).UnixMilli() {
				t.Fatalf("MAX_TIMESTAMP: offset %d timestamp %d (error %d), want %d %d", p.Offset, p.Timestamp, p.ErrorCode, latest, base.Add(time.Hour).UnixMilli())
			}
		})
	}
}
