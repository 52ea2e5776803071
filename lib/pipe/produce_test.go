package pipe

import (
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/mqproject/mq/lib/client"
)

func TestSummaryListsFailedLinesAsRanges(t *testing.T) {
	for _, c := range []struct {
		name   string
		inputs []input
		failed []lineRef
		read   int
		want   string
	}{
		{"one line", []input{{}}, []lineRef{{0, 4}}, 10, "1 of 10 messages not acknowledged: line 4"},
		{"ranges in order", []input{{}}, []lineRef{{0, 9}, {0, 3}, {0, 5}, {0, 4}, {0, 7}}, 10,
			"5 of 10 messages not acknowledged: lines 3-5, 7, 9"},
		{"several files", []input{{name: "a.txt"}, {name: "b.txt"}}, []lineRef{{1, 2}, {0, 1}, {1, 1}}, 6,
			"3 of 6 messages not acknowledged: a.txt:1, b.txt:1-2"},
		{"stdin among files", []input{{name: "a.txt"}, {}}, []lineRef{{1, 2}}, 6,
			"1 of 6 messages not acknowledged: stdin:2"},
	} {
		t.Run(c.name, func(t *testing.T) {
			var stderr strings.Builder
			tr := newTracker(ProduceConfig{Topic: "t", Stderr: &stderr}, c.inputs, 100)
			tr.read = c.read
			for _, ref := range c.failed {
				tr.fail(ref, errors.New("boom"))
			}
			if got := tr.result(); got == nil || got.Error() != c.want {
				t.Errorf("got %v\nwant %s", got, c.want)
			}
			if n := strings.Count(stderr.String(), "boom"); n != len(c.failed) {
				t.Errorf("%d failures described, want %d:\n%s", n, len(c.failed), stderr.String())
			}
		})
	}
}

func TestSummaryElidesManyFailures(t *testing.T) {
	var stderr strings.Builder
	tr := newTracker(ProduceConfig{Topic: "t", Stderr: &stderr}, []input{{}}, 100)
	for i := 1; i <= 100; i += 2 {
		tr.count()
		tr.fail(lineRef{0, i}, errors.New("boom"))
	}
	got := tr.result().Error()
	if !strings.HasPrefix(got, "50 of 50 messages not acknowledged: lines 1, 3, 5,") || !strings.HasSuffix(got, ", 39, …") {
		t.Errorf("summary %q", got)
	}
	if n := strings.Count(stderr.String(), "\n"); n != maxDetails+1 {
		t.Errorf("%d lines on stderr, want %d:\n%s", n, maxDetails+1, stderr.String())
	}
}

func TestReportPrintsInInputOrder(t *testing.T) {
	var out strings.Builder
	tr := newTracker(ProduceConfig{Topic: "t", Report: true, Stdout: &out, Stderr: &strings.Builder{}}, []input{{}}, 100)
	acks := []struct {
		seq       int64
		partition int32
		offset    int64
		err       error
	}{
		{2, 1, 0, nil},
		{0, 0, 7, nil},
		{3, 1, 1, errors.New("boom")},
		{1, 2, 4, nil},
		{4, 0, 8, nil},
	}
	for _, a := range acks {
		tr.acked(a.seq, lineRef{0, int(a.seq) + 1}, &kgo.Record{Partition: a.partition, Offset: a.offset}, a.err)
	}
	tr.finish()
	if want := "0 7\n2 4\n1 0\n0 8\n"; out.String() != want {
		t.Errorf("report %q, want %q", out.String(), want)
	}
}

func TestArenaCopiesAreIndependent(t *testing.T) {
	var a arena
	x := a.copy([]byte("abc"))
	y := a.copy([]byte("de"))
	x = append(x, 'Z') // must not run into y
	if string(y) != "de" || string(x) != "abcZ" {
		t.Errorf("x %q y %q", x, y)
	}
	if e := a.copy(nil); e == nil || len(e) != 0 {
		t.Errorf("empty message copied as %#v, want empty and non-nil", e)
	}
	big := make([]byte, arenaBlock)
	if c := a.copy(big); len(c) != len(big) {
		t.Errorf("big copy has %d bytes", len(c))
	}
}

func TestGiveUpCountsPendingAndPrintsTheReportsBehindThem(t *testing.T) {
	var out, stderr strings.Builder
	tr := newTracker(ProduceConfig{Topic: "t", Report: true, Stdout: &out, Stderr: &stderr}, []input{{}}, 100)
	start := time.Now()
	for seq := range int64(3) {
		tr.count()
		tr.pending[seq] = pendingMsg{ref: lineRef{0, int(seq) + 1}, at: start.Add(time.Duration(seq) * time.Second)}
		tr.sent++
	}
	// The first message is stuck (a partition that refuses), the others
	// were acknowledged: their report lines wait for it.
	tr.acked(1, lineRef{0, 2}, &kgo.Record{Partition: 1, Offset: 10}, nil)
	if got := tr.oldestWait(start.Add(5 * time.Second)); got != 5*time.Second {
		t.Errorf("oldest wait %v, want 5s", got)
	}
	tr.acked(2, lineRef{0, 3}, &kgo.Record{Partition: 1, Offset: 11}, nil)
	if out.String() != "" {
		t.Fatalf("report printed past a pending message: %q", out.String())
	}
	err := tr.giveUp(client.Failf("refused"))
	if err == nil || client.ExitCode(err) != client.ExitFailure || err.Error() != "refused; 1 of 3 messages not acknowledged: line 1" {
		t.Fatalf("give up: %v (exit %d)", err, client.ExitCode(err))
	}
	if want := "1 10\n1 11\n"; out.String() != want {
		t.Errorf("report after giving up %q, want %q", out.String(), want)
	}
	tr.acked(0, lineRef{0, 1}, &kgo.Record{Partition: 0, Offset: 3}, nil) // too late: ignored
	if got := tr.summary(); got != "1 of 3 messages not acknowledged: line 1" {
		t.Errorf("summary after a late acknowledgment %q", got)
	}
	if got := tr.oldestWait(start.Add(time.Hour)); got != 0 {
		t.Errorf("oldest wait after giving up %v, want 0", got)
	}
}

func TestErrorCauseIsTheLastPart(t *testing.T) {
	for in, want := range map[string]string{
		"log: append at offset 7: write /d/t-0/0.log: no space left on device": "no space left on device",
		"boom":  "boom",
		"odd: ": "odd: ",
	} {
		if got := errorCause(in); got != want {
			t.Errorf("errorCause(%q) = %q, want %q", in, got, want)
		}
	}
}

// The refusal of a message too large for the topic says what
// max.message.bytes counts and how large a value can be, with the key
// and headers the message has.
func TestTooLargeSaysWhatTheLimitCountsAndWhatFits(t *testing.T) {
	value := func(n int) []byte { return make([]byte, n) }
	for _, tc := range []struct {
		name string
		cfg  ProduceConfig
		size int
		rec  *kgo.Record
		want string
	}{
		{"the issue's message", ProduceConfig{}, 1048560, &kgo.Record{Value: value(1048560)},
			"message of 1048560 bytes does not fit in topic cr: max.message.bytes (1048588) limits the whole record batch, " +
				"a 61-byte header and each record with its framing, so a value of at most 1048516 bytes fits"},
		{"keyed, with headers", ProduceConfig{}, 1048563, &kgo.Record{Key: []byte("abc"), Value: value(1048560), Headers: []kgo.RecordHeader{{Key: "h", Value: []byte("1")}}},
			"so with this key and these headers a value of at most 1048509 bytes fits"},
		{"a line too long to read, -k", ProduceConfig{Key: []byte("abc")}, 2 << 20, nil,
			"message (key and value) of 2097152 bytes does not fit in topic cr: max.message.bytes (1048588) limits the whole record batch, " +
				"a 61-byte header and each record with its framing, so with this key a value of at most 1048513 bytes fits"},
		{"a line too long to read, -K", ProduceConfig{KeyDelim: ":"}, 2 << 20, nil,
			"so a key and value of at most about 1048516 bytes together fit"},
		{"fitted as sent, not once recompressed", ProduceConfig{}, 1000, &kgo.Record{Value: value(1000)},
			"message of 1000 bytes refused by topic cr: max.message.bytes (1048588) limits the whole record batch, " +
				"a 61-byte header and each record with its framing, and its batch did not fit once stored in the topic's compression.type"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			tc.cfg.Topic = "cr"
			tr := newTracker(tc.cfg, []input{{}}, 1048588)
			defer tr.stop()
			got := tr.tooLarge(tc.size, tc.rec).Error()
			if !strings.HasSuffix(got, tc.want) {
				t.Fatalf("got  %q\nwant …%q", got, tc.want)
			}
		})
	}
}

func TestRecordSendsEmptyAsNullOnlyWithNullEmpty(t *testing.T) {
	// null is "<nil>", empty is "" (a non-nil empty slice).
	show := func(b []byte) string {
		if b == nil {
			return "<nil>"
		}
		return string(b)
	}
	for _, c := range []struct {
		name       string
		cfg        ProduceConfig
		line       string
		key, value string
	}{
		{"-K value", ProduceConfig{KeyDelim: ":"}, "k:v", "k", "v"},
		{"-K empty value", ProduceConfig{KeyDelim: ":"}, "k:", "k", ""},
		{"-K -Z tombstone", ProduceConfig{KeyDelim: ":", NullEmpty: true}, "k:", "k", "<nil>"},
		{"-K empty key", ProduceConfig{KeyDelim: ":"}, ":v", "", "v"},
		{"-K -Z null key", ProduceConfig{KeyDelim: ":", NullEmpty: true}, ":v", "<nil>", "v"},
		{"-K -Z null both", ProduceConfig{KeyDelim: ":", NullEmpty: true}, ":", "<nil>", "<nil>"},
		{"-K -Z no delimiter", ProduceConfig{KeyDelim: ":", NullEmpty: true}, "v", "<nil>", "v"},
		{"-K -Z value holds the delimiter", ProduceConfig{KeyDelim: "::", NullEmpty: true}, "k::a::", "k", "a::"},
		{"empty line", ProduceConfig{}, "", "<nil>", ""},
		{"-Z empty line", ProduceConfig{NullEmpty: true}, "", "<nil>", "<nil>"},
		{"-k -Z empty line", ProduceConfig{Key: []byte("k"), NullEmpty: true}, "", "k", "<nil>"},
		{"-k empty", ProduceConfig{Key: []byte{}}, "v", "", "v"},
		{"-k empty -Z", ProduceConfig{Key: []byte{}, NullEmpty: true}, "v", "<nil>", "v"},
	} {
		t.Run(c.name, func(t *testing.T) {
			c.cfg.Topic = "t"
			c.cfg.Partition = -1
			tr := newTracker(c.cfg, []input{{}}, 100)
			var a arena
			rec, err := tr.record([]byte(c.line), &a)
			if err != nil {
				t.Fatal(err)
			}
			if k, v := show(rec.Key), show(rec.Value); k != c.key || v != c.value {
				t.Errorf("%q: key %q value %q, want key %q value %q", c.line, k, v, c.key, c.value)
			}
		})
	}
}

func TestProduceRefusesTombstonesThatCannotBeSent(t *testing.T) {
	key := [][]byte{[]byte("k")}
	for _, c := range []struct {
		name string
		cfg  ProduceConfig
		want string
	}{
		{"empty key", ProduceConfig{Tombstones: [][]byte{[]byte("a"), {}}}, `--tombstone "": a tombstone needs a key`},
		{"with files", ProduceConfig{Tombstones: key, Files: []string{"in.txt"}}, "drop the FILE arguments"},
		{"with -K", ProduceConfig{Tombstones: key, KeyDelim: ":"}, "--tombstone reads no input"},
		{"with -k", ProduceConfig{Tombstones: key, Key: []byte("x")}, "--tombstone reads no input"},
		{"with json", ProduceConfig{Tombstones: key, JSON: true}, "--tombstone reads no input"},
		{"-Z with json", ProduceConfig{NullEmpty: true, JSON: true}, "drop -Z"},
	} {
		t.Run(c.name, func(t *testing.T) {
			c.cfg.Topic = "t"
			c.cfg.Partition = -1
			err := c.cfg.check()
			if err == nil || !strings.Contains(err.Error(), c.want) || client.ExitCode(err) != client.ExitUsage {
				t.Errorf("got %v (exit %d), want a usage error containing %q", err, client.ExitCode(err), c.want)
			}
		})
	}
	ok := ProduceConfig{Topic: "t", Partition: -1, Tombstones: key, Headers: []kgo.RecordHeader{{Key: "h"}}}
	if err := ok.check(); err != nil {
		t.Errorf("--tombstone k -H h: %v", err)
	}
}

func TestTombstoneFailuresNameTheirKeys(t *testing.T) {
	var stderr strings.Builder
	tr := newTracker(ProduceConfig{Topic: "t", Stderr: &stderr, Tombstones: [][]byte{[]byte("a"), []byte("b"), []byte("c")}}, nil, 100)
	tr.read = 3
	tr.fail(lineRef{0, 2}, errors.New("boom"))
	tr.fail(lineRef{0, 3}, errors.New("boom"))
	if got, want := tr.result().Error(), "2 of 3 messages not acknowledged: tombstones 2-3"; got != want {
		t.Errorf("got %q, want %q", got, want)
	}
	if !strings.Contains(stderr.String(), `mqpipe: tombstone 2 (key "b"): boom`) {
		t.Errorf("stderr does not name the key:\n%s", stderr.String())
	}
}
