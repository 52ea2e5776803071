package broker

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"

	"github.com/mqproject/mq/lib/config"
	"github.com/mqproject/mq/lib/record"
)

// fillSegments produces n batches stamped an hour ago to a topic whose
// segments hold one batch each, so that every closed segment is past any
// short retention.
func fillSegments(t *testing.T, tb *testBroker, topic string, n int) {
	t.Helper()
	old := time.Now().Add(-time.Hour).UnixMilli()
	for i := range n {
		// Keyed: compacted topics refuse records without a key.
		b, err := record.Build(record.BuildOptions{BaseTimestamp: old}, []record.Record{
			{Key: fmt.Appendf(nil, "k%d", 2*i), Value: []byte("v")}, {Key: fmt.Appendf(nil, "k%d", 2*i+1), Value: []byte("v")}})
		if err != nil {
			t.Fatal(err)
		}
		if got := produce(t, tb, topic, 0, -1, b); got.ErrorCode != 0 {
			t.Fatalf("produce to %s: %+v", topic, got)
		}
	}
}

func TestRetentionSparesCompactOnlyTopics(t *testing.T) {
	tb := startBroker(t, "", nil)
	short := map[string]string{"segment.bytes": "100", "retention.ms": "1000"}
	for _, tc := range []struct {
		policy  string
		extra   map[string]string
		deletes bool
	}{
		{"delete", nil, true},
		{"compact", nil, false},
		{"compact", map[string]string{"retention.ms": "-1", "retention.bytes": "1"}, false},
		{"compact,delete", nil, true},
		{"delete", map[string]string{"retention.ms": "-1", "retention.bytes": "1"}, true},
	} {
		configs := map[string]string{"cleanup.policy": tc.policy}
		for k, v := range short {
			configs[k] = v
		}
		for k, v := range tc.extra {
			configs[k] = v
		}
		name := "r-" + tc.policy
		if tc.extra != nil {
			name += "-bytes"
		}
		name = sanitizeTopic(name)
		tb.createTopic(t, name, 1, configs)
		fillSegments(t, tb, name, 4)
		tb.parts.EnforceRetention()
		h := tb.parts.Lookup(name, 0)
		start := h.Log().StartOffset()
		if tc.deletes && start == 0 {
			t.Errorf("%s (cleanup.policy=%s %v): retention deleted nothing", name, tc.policy, tc.extra)
		}
		if !tc.deletes && start != 0 {
			t.Errorf("%s (cleanup.policy=%s %v): retention moved the log start to %d", name, tc.policy, tc.extra, start)
		}
	}
}

// sanitizeTopic makes a legal topic name of s.
func sanitizeTopic(s string) string {
	b := []byte(s)
	for i, c := range b {
		if c == ',' {
			b[i] = '.'
		}
	}
	return string(b)
}

func TestRetentionAppliesOnceCompactTopicAlsoDeletes(t *testing.T) {
	tb := startBroker(t, "", nil)
	tb.createTopic(t, "c", 1, map[string]string{"cleanup.policy": "compact", "segment.bytes": "100", "retention.ms": "1000"})
	fillSegments(t, tb, "c", 3)
	tb.parts.EnforceRetention()
	if start := tb.parts.Lookup("c", 0).Log().StartOffset(); start != 0 {
		t.Fatalf("compact topic lost its head: log start %d", start)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := tb.ctrl.AlterTopicConfigs(ctx, "c", map[string]string{"cleanup.policy": "compact,delete"}, nil); err != nil {
		t.Fatal(err)
	}
	tb.waitFor(t, "config applied", func() bool { return tb.parts.Lookup("c", 0).Config().CleanupPolicy == "compact,delete" })
	tb.parts.EnforceRetention()
	if start := tb.parts.Lookup("c", 0).Log().StartOffset(); start == 0 {
		t.Fatal("compact,delete topic kept segments past retention.ms")
	}
}

func TestRetentionKeepsConsumerOffsets(t *testing.T) {
	tb := startBroker(t, "", func(s *config.Broker) {
		s.GroupInitialRebalanceDelay = 0
		s.OffsetsTopicNumPartitions = 1
		s.LogRetentionMS = 0 // the broker default every topic inherits: keep nothing
		s.LogSegmentBytes = 100
	})
	addr := serve(t, tb)
	tb.createTopic(t, "data", 1, nil)
	adm := kadm.NewClient(newClient(t, addr))
	ctx := ctxTimeout(t, 30*time.Second)
	for i := range 5 {
		var os kadm.Offsets
		os.Add(kadm.Offset{Topic: "data", Partition: 0, At: int64(i), LeaderEpoch: -1})
		if resp, err := adm.CommitOffsets(ctx, "g", os); err != nil || resp.Error() != nil {
			t.Fatalf("commit: %v %v", err, resp.Error())
		}
	}
	h := tb.parts.Lookup(offsetsTopic, 0)
	if h == nil || h.Log().NumSegments() < 3 {
		t.Fatalf("%s has too few segments for the test", offsetsTopic)
	}
	if h.Config().CleanupPolicy != "compact" {
		t.Fatalf("%s cleanup.policy %q, want compact", offsetsTopic, h.Config().CleanupPolicy)
	}
	tb.parts.EnforceRetention()
	if start := h.Log().StartOffset(); start != 0 {
		t.Fatalf("retention deleted %s below offset %d", offsetsTopic, start)
	}
	got, err := adm.FetchOffsets(ctx, "g")
	if err != nil || got.Error() != nil {
		t.Fatalf("fetch offsets: %v %v", err, got.Error())
	}
	if o, _ := got.Lookup("data", 0); o.At != 4 {
		t.Fatalf("committed offset after retention %+v, want 4", o)
	}
}
