package pipe

import (
	"bytes"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
)

// TestAppendKcatJSONPrintsWhatKcatDoes: each want is the line kcat -J
// printed for a record with these fields (read from mqd with kcat 1.7.1),
// byte for byte: kcat's field names and order, headers only when there
// are some, as a flat list of names and values, and only quote,
// backslash and control characters escaped (other bytes, UTF-8 or not,
// are copied).
func TestAppendKcatJSONPrintsWhatKcatDoes(t *testing.T) {
	ts := time.UnixMilli(1796574579821)
	logAppend := kgo.NewRecordAttrs(kgo.RecordAttrsOpts{TimestampType: 1})
	for _, c := range []struct {
		name   string
		rec    kgo.Record
		broker int32
		want   string
	}{
		{"no key", kgo.Record{Topic: "kj", Timestamp: ts, Value: []byte("plain")}, 1,
			`{"topic":"kj","partition":0,"offset":0,"tstype":"create","ts":1796574579821,"broker":1,"key":null,"payload":"plain"}`},
		{"key", kgo.Record{Topic: "kj", Partition: 3, Offset: 1, Timestamp: ts, Key: []byte("k1"), Value: []byte("v1")}, 2,
			`{"topic":"kj","partition":3,"offset":1,"tstype":"create","ts":1796574579821,"broker":2,"key":"k1","payload":"v1"}`},
		{"null value (tombstone)", kgo.Record{Topic: "kj", Offset: 3, Timestamp: ts, Key: []byte("tomb")}, 1,
			`{"topic":"kj","partition":0,"offset":3,"tstype":"create","ts":1796574579821,"broker":1,"key":"tomb","payload":null}`},
		{"empty key and value are not null", kgo.Record{Topic: "kj", Timestamp: ts, Key: []byte{}, Value: []byte{}}, 1,
			`{"topic":"kj","partition":0,"offset":0,"tstype":"create","ts":1796574579821,"broker":1,"key":"","payload":""}`},
		{"headers", kgo.Record{Topic: "kj", Timestamp: ts, Key: []byte("k2"), Value: []byte("v2"), Headers: []kgo.RecordHeader{
			{Key: "h1", Value: []byte("x")}, {Key: "h2", Value: []byte("y")}, {Key: "h1", Value: []byte("z")},
			{Key: "empty", Value: []byte{}}, {Key: "novalue"}, {Key: "hb", Value: []byte("a\"b\\x01\x01")}}}, 1,
			`{"topic":"kj","partition":0,"offset":0,"tstype":"create","ts":1796574579821,"broker":1,"headers":["h1","x","h2","y","h1","z","empty","","novalue",null,"hb","a\"b\\x01\u0001"],"key":"k2","payload":"v2"}`},
		{"control characters", kgo.Record{Topic: "kj", Timestamp: ts, Value: []byte("\x00\x01\x07\b\t\n\x0b\f\r\x0e\x1a\x1f ~\x7f")}, 1,
			`{"topic":"kj","partition":0,"offset":0,"tstype":"create","ts":1796574579821,"broker":1,"key":null,"payload":"\u0000\u0001\u0007\b\t\n\u000B\f\r\u000E\u001A\u001F ~` + "\x7f" + `"}`},
		{"bytes that are not UTF-8 are copied", kgo.Record{Topic: "kj", Timestamp: ts, Key: []byte("k\"\\x01"), Value: []byte("q\"b\\s\t\x01\x7f\xc3\xa9\xe2\x80\xa8/\xff\xfe end")}, 1,
			`{"topic":"kj","partition":0,"offset":0,"tstype":"create","ts":1796574579821,"broker":1,"key":"k\"\\x01","payload":"q\"b\\s\t\u0001` + "\x7f\xc3\xa9\xe2\x80\xa8/\xff\xfe" + ` end"}`},
		{"log append time", kgo.Record{Topic: "kla", Timestamp: ts, Attrs: logAppend, Value: []byte("x")}, 1,
			`{"topic":"kla","partition":0,"offset":0,"tstype":"logappend","ts":1796574579821,"broker":1,"key":null,"payload":"x"}`},
		{"broker unknown", kgo.Record{Topic: "kj", Timestamp: ts, Value: []byte("v")}, -1,
			`{"topic":"kj","partition":0,"offset":0,"tstype":"create","ts":1796574579821,"broker":-1,"key":null,"payload":"v"}`},
	} {
		t.Run(c.name, func(t *testing.T) {
			if got := string(AppendKcatJSON(nil, &c.rec, c.broker)); got != c.want {
				t.Errorf("got  %q\nwant %q", got, c.want)
			}
		})
	}
}

// TestKcatJSONBrokerIsTheOneOfThePoll: consume -J prints, for the records
// of a poll, the broker their partition was fetched from as the poll
// returned, not one of a fetch read while they are written (a new
// leader's), and -1 for a partition whose broker is not known.
func TestKcatJSONBrokerIsTheOneOfThePoll(t *testing.T) {
	var out bytes.Buffer
	w := newWriter(&ConsumeConfig{KcatJSON: true, Stdout: &out})
	hook := w.clientOpts()
	if len(hook) != 1 {
		t.Fatalf("-J needs its kgo hook: %d options", len(hook))
	}
	r0 := &kgo.Record{Topic: "t", Partition: 0, Timestamp: time.UnixMilli(1), Value: []byte("a")}
	r1 := &kgo.Record{Topic: "t", Partition: 1, Timestamp: time.UnixMilli(1), Value: []byte("b")}
	fetches := kgo.Fetches{{Topics: []kgo.FetchTopic{{Topic: "t", Partitions: []kgo.FetchPartition{
		{Partition: 0, Records: []*kgo.Record{r0}}, {Partition: 1, Records: []*kgo.Record{r1}}}}}}}

	w.brokers.OnFetchBatchRead(kgo.BrokerMetadata{NodeID: 2}, "t", 0, kgo.FetchBatchMetrics{})
	w.polled(fetches)
	w.brokers.OnFetchBatchRead(kgo.BrokerMetadata{NodeID: 3}, "t", 0, kgo.FetchBatchMetrics{}) // the next fetch
	fetches.EachPartition(func(fp kgo.FetchTopicPartition) {
		w.partition(fp.Topic, fp.Partition)
		for _, r := range fp.Records {
			if err := w.write(r); err != nil {
				t.Fatal(err)
			}
		}
	})
	if err := w.flush(); err != nil {
		t.Fatal(err)
	}
	want := `{"topic":"t","partition":0,"offset":0,"tstype":"create","ts":1,"broker":2,"key":null,"payload":"a"}` + "\n" +
		`{"topic":"t","partition":1,"offset":0,"tstype":"create","ts":1,"broker":-1,"key":null,"payload":"b"}` + "\n"
	if got := out.String(); got != want {
		t.Errorf("got\n%swant\n%s", got, want)
	}
}

// TestAppendKcatJSONAllocatesNothing: with room in dst, a record is
// written without allocating.
func TestAppendKcatJSONAllocatesNothing(t *testing.T) {
	r := &kgo.Record{Topic: "t", Timestamp: time.UnixMilli(1), Key: []byte("k"), Value: []byte("v\n\x01"),
		Headers: []kgo.RecordHeader{{Key: "h", Value: []byte("x")}}}
	buf := make([]byte, 0, 1024)
	if n := testing.AllocsPerRun(100, func() { buf = AppendKcatJSON(buf[:0], r, 1) }); n != 0 {
		t.Errorf("%v allocations per record, want 0", n)
	}
}

// BenchmarkAppendKcatJSON is the cost of one record of consume -J, beside
// BenchmarkAppendJSON's of consume --json.
func BenchmarkAppendKcatJSON(b *testing.B) {
	r := benchRecord()
	buf := make([]byte, 0, 1024)
	b.ReportAllocs()
	for b.Loop() {
		buf = AppendKcatJSON(buf[:0], r, 1)
	}
}

func BenchmarkAppendJSON(b *testing.B) {
	r := benchRecord()
	buf := make([]byte, 0, 1024)
	b.ReportAllocs()
	for b.Loop() {
		buf = AppendJSON(buf[:0], r)
	}
}

// benchRecord is a typical log line with a key and two headers.
func benchRecord() *kgo.Record {
	return &kgo.Record{Topic: "logs", Partition: 3, Offset: 123456, Timestamp: time.UnixMilli(1700000000000),
		Key: []byte("user-42"), Value: []byte(`2024-05-01T12:00:00Z INFO request served path="/api/v1/items" status=200 took=3.2ms`),
		Headers: []kgo.RecordHeader{{Key: "trace-id", Value: []byte("4bf92f3577b34da6a3ce929d0e0e4736")}, {Key: "host", Value: []byte("web-3")}}}
}
