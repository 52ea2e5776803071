package e2e

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/mqproject/mq/lib/record"
)

// storedCodecs reads the segment files of a partition of b and returns the
// codec of every batch in them, in offset order. The batches read are
// those written when it is called: mqd writes a batch to its segment
// before acknowledging it.
func storedCodecs(t *testing.T, b *broker, topic string, partition int) []record.Codec {
	t.Helper()
	segs, err := filepath.Glob(filepath.Join(b.dataDir, fmt.Sprintf("%s-%d", topic, partition), "*.log"))
	if err != nil {
		t.Fatal(err)
	}
	slices.Sort(segs) // 20-digit base offsets sort as numbers
	var codecs []record.Codec
	for _, seg := range segs {
		data, err := os.ReadFile(seg)
		if err != nil {
			t.Fatal(err)
		}
		for len(data) > 0 {
			batch, rest, h, err := record.Next(data)
			if err != nil {
				t.Fatalf("%s: %v", seg, err)
			}
			if err := record.CheckCRC(batch); err != nil {
				t.Fatalf("%s: batch at offset %d: %v", seg, h.BaseOffset, err)
			}
			codecs = append(codecs, h.Codec())
			data = rest
		}
	}
	return codecs
}

// compressible is n lines of keyed values that every codec shrinks (a
// producer may send a batch uncompressed when compressing would make it
// larger), and the lines kcat -f '%k:%s\n' prints for them.
func compressible(n int) string {
	var b strings.Builder
	for i := range n {
		fmt.Fprintf(&b, "k%d:%s %d\n", i, strings.Repeat("a rather repetitive value ", 8), i)
	}
	return b.String()
}

// librdkafka compresses with a codec only when the broker advertises a
// Produce version that has it: gzip, snappy and lz4 need v0 in the list,
// which mq serves from v3 (as Kafka 4 does, it advertises v0 anyway). Every
// codec kcat is asked for must be the one stored.
func TestKcatCompressesWithEveryCodec(t *testing.T) {
	if _, err := exec.LookPath("kcat"); err != nil {
		t.Skip("kcat not installed (CI installs it: apt-get install kcat)")
	}
	b := startBroker(t, brokerOpts{})
	ctx := ctxFor(t, time.Minute)
	for _, codec := range []record.Codec{record.CodecGzip, record.CodecSnappy, record.CodecLZ4, record.CodecZstd} {
		topic := "kz-" + codec.String()
		if _, err := b.admin().CreateTopic(ctx, 1, 1, nil, topic); err != nil {
			t.Fatal(err)
		}
		in := compressible(50)
		kcat(t, b, in, "-P", "-t", topic, "-K:", "-z", codec.String())
		codecs := storedCodecs(t, b, topic, 0)
		if len(codecs) == 0 {
			t.Fatalf("kcat -z %s: nothing stored", codec)
		}
		for i, c := range codecs {
			if c != codec {
				t.Errorf("kcat -z %s: stored batch %d has codec %s (all: %v)", codec, i, c, codecs)
			}
		}
		if got := kcat(t, b, "", "-C", "-t", topic, "-e", "-f", `%k:%s\n`); got != in {
			t.Errorf("kcat -z %s read back:\n got %q\nwant %q", codec, got, in)
		}
	}
	// librdkafka still picks a Produce version mq serves: one below v3
	// would have closed its connection, with a log line.
	if log := b.stderr.String(); strings.Contains(log, "unsupported request") {
		t.Errorf("mqd refused a request of kcat:\n%s", log)
	}
}

// A topic whose compression.type is a codec stores what a producer sends
// in another codec recompressed, and consumers read the records sent;
// producer, the default, keeps the producer's codec. Changing the config
// applies to the batches produced afterwards.
func TestTopicCompressionTypeRecompresses(t *testing.T) {
	b := startBroker(t, brokerOpts{})
	ctx := ctxFor(t, 2*time.Minute)
	adm := b.admin()
	zstd := "zstd"
	if _, err := adm.CreateTopic(ctx, 1, 1, map[string]*string{"compression.type": &zstd}, "cz"); err != nil {
		t.Fatal(err)
	}
	if _, err := adm.CreateTopic(ctx, 1, 1, nil, "cp"); err != nil {
		t.Fatal(err)
	}

	var sent []*kgo.Record
	produce := func(cl *kgo.Client, topic string, from, n int) {
		t.Helper()
		var recs []*kgo.Record
		for i := from; i < from+n; i++ {
			r := &kgo.Record{
				Topic:   topic,
				Key:     fmt.Appendf(nil, "key-%d", i%10),
				Value:   fmt.Appendf(nil, "value %d %s", i, strings.Repeat("abc", i%40)),
				Headers: []kgo.RecordHeader{{Key: "n", Value: fmt.Appendf(nil, "%d", i)}},
			}
			recs = append(recs, r)
		}
		if err := cl.ProduceSync(ctx, recs...).FirstErr(); err != nil {
			t.Fatal(err)
		}
		if topic == "cz" {
			sent = append(sent, recs...)
		}
	}
	plain := b.client(kgo.ProducerBatchCompression(kgo.NoCompression()))
	produce(plain, "cz", 0, 300)
	snappy := b.client(kgo.ProducerBatchCompression(kgo.SnappyCompression()))
	produce(snappy, "cp", 0, 300)

	onlyCodec := func(topic string, want record.Codec) int {
		t.Helper()
		codecs := storedCodecs(t, b, topic, 0)
		if len(codecs) == 0 {
			t.Fatalf("%s: nothing stored", topic)
		}
		for i, c := range codecs {
			if c != want {
				t.Fatalf("%s: batch %d stored as %s, want %s (all: %v)", topic, i, c, want, codecs)
			}
		}
		return len(codecs)
	}
	zstdBatches := onlyCodec("cz", record.CodecZstd)
	onlyCodec("cp", record.CodecSnappy)

	// Batches produced after the change are stored in the new codec.
	lz4 := "lz4"
	if _, err := adm.AlterTopicConfigs(ctx, []kadm.AlterConfig{{Name: "compression.type", Value: &lz4}}, "cz"); err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(30 * time.Second)
	for i := 0; ; i++ {
		produce(plain, "cz", 300+i, 1)
		codecs := storedCodecs(t, b, "cz", 0)
		if codecs[len(codecs)-1] == record.CodecLZ4 {
			if !slices.Equal(codecs[:zstdBatches], slices.Repeat([]record.Codec{record.CodecZstd}, zstdBatches)) {
				t.Fatalf("batches stored before the change rewritten: %v", codecs)
			}
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("compression.type=lz4 not applied after 30s: %v", codecs)
		}
	}

	// kgo reads back every record, keys and headers included.
	cl := b.client(kgo.ConsumeTopics("cz"), kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()))
	var got []*kgo.Record
	for len(got) < len(sent) {
		fs := cl.PollFetches(ctx)
		if ctx.Err() != nil {
			t.Fatalf("read %d of %d records", len(got), len(sent))
		}
		fs.EachError(func(tp string, p int32, err error) { t.Fatalf("fetch %s/%d: %v", tp, p, err) })
		got = append(got, fs.Records()...)
	}
	for i, r := range got {
		w := sent[i]
		if r.Offset != int64(i) || string(r.Key) != string(w.Key) || string(r.Value) != string(w.Value) ||
			len(r.Headers) != 1 || r.Headers[0].Key != "n" || string(r.Headers[0].Value) != string(w.Headers[0].Value) {
			t.Fatalf("record %d: %q=%q %v at offset %d, want %q=%q %v", i, r.Key, r.Value, r.Headers, r.Offset, w.Key, w.Value, w.Headers)
		}
	}
	// So does librdkafka.
	if _, err := exec.LookPath("kcat"); err == nil {
		var want strings.Builder
		for _, r := range sent {
			fmt.Fprintf(&want, "%s|%s|n=%s\n", r.Key, r.Value, r.Headers[0].Value)
		}
		if out := kcat(t, b, "", "-C", "-t", "cz", "-e", "-f", `%k|%s|%h\n`); out != want.String() {
			t.Fatalf("kcat read back:\n got %.300q\nwant %.300q", out, want.String())
		}
	}
}
