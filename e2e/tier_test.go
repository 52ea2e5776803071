package e2e

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/mqproject/mq/lib/mqtest"
)

// tierStore is one remote store the tiered-storage tests run against:
// its remote.log.storage.url for a test, and how to list the objects
// under a key prefix (to count uploads and see deletions).
type tierStore struct {
	name string
	open func(t *testing.T) (url string, objects func(prefix string) []string)
}

// tierStores are the stores of the tiered-storage tests.
var tierStores = []tierStore{
	{name: "file", open: func(t *testing.T) (string, func(string) []string) {
		dir := filepath.Join(t.TempDir(), "remote")
		return "file://" + dir, func(prefix string) []string {
			var keys []string
			_ = filepath.WalkDir(dir, func(path string, d os.DirEntry, err error) error {
				if err == nil && !d.IsDir() {
					rel, _ := filepath.Rel(dir, path)
					if strings.HasPrefix(rel, prefix) {
						keys = append(keys, rel)
					}
				}
				return nil
			})
			return keys
		}
	}},
}

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
	cl, err := kgo.NewClient(kgo.SeedBrokers(addr), kgo.ConsumePartitions(map[string]map[int32]kgo.Offset{topic: {0: kgo.NewOffset().AtStart()}}))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	ctx := ctxFor(t, 60*time.Second)
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

			b.restart(false)
			cl = b.client()
			if got, code := listOffset(t, cl, topic, -2); code != 0 || got != 0 {
				t.Fatalf("log start after a restart: %d (error %d)", got, code)
			}
			checkSame(t, "kgo after a restart", consumeTiered(t, b.addr, topic, n), want)
		})
	}
}
