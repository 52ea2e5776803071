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
