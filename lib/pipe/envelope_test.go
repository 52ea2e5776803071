package pipe

import (
	"bytes"
	"encoding/json"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
)

func TestAppendJSONWritesTheEnvelope(t *testing.T) {
	ts := time.UnixMilli(1700000000123)
	for _, c := range []struct {
		name string
		rec  kgo.Record
		want string
	}{
		{"text", kgo.Record{Topic: "t", Partition: 2, Offset: 42, Timestamp: ts, Key: []byte("k"), Value: []byte("hello")},
			`{"topic":"t","partition":2,"offset":42,"timestamp":1700000000123,"key":"k","value":"hello","headers":[]}`},
		{"null key and value", kgo.Record{Topic: "t", Timestamp: ts},
			`{"topic":"t","partition":0,"offset":0,"timestamp":1700000000123,"key":null,"value":null,"headers":[]}`},
		{"empty key is not null", kgo.Record{Topic: "t", Timestamp: ts, Key: []byte{}, Value: []byte{}},
			`{"topic":"t","partition":0,"offset":0,"timestamp":1700000000123,"key":"","value":"","headers":[]}`},
		{"escapes", kgo.Record{Topic: "t", Timestamp: ts, Value: []byte("a\"b\\c\nd\te\x00\x1f<>&é\u2028")},
			`{"topic":"t","partition":0,"offset":0,"timestamp":1700000000123,"key":null,"value":"a\"b\\c\nd\te\u0000\u001f<>&é\u2028","headers":[]}`},
		{"binary", kgo.Record{Topic: "t", Timestamp: ts, Key: []byte{0xff}, Value: []byte{0, 0xfe, 'a'}},
			`{"topic":"t","partition":0,"offset":0,"timestamp":1700000000123,"key_b64":"/w==","value_b64":"AP5h","headers":[]}`},
		{"headers", kgo.Record{Topic: "t", Timestamp: ts, Value: []byte("v"), Headers: []kgo.RecordHeader{
			{Key: "a", Value: []byte("1")}, {Key: "a", Value: nil}, {Key: "\xff", Value: []byte{0x80}}}},
			`{"topic":"t","partition":0,"offset":0,"timestamp":1700000000123,"key":null,"value":"v","headers":[{"key":"a","value":"1"},{"key":"a","value":null},{"key_b64":"/w==","value_b64":"gA=="}]}`},
	} {
		t.Run(c.name, func(t *testing.T) {
			got := string(AppendJSON(nil, &c.rec))
			if got != c.want {
				t.Errorf("got  %s\nwant %s", got, c.want)
			}
			if !json.Valid([]byte(got)) {
				t.Errorf("not valid JSON: %s", got)
			}
			back, err := DecodeJSON([]byte(got))
			if err != nil {
				t.Fatal(err)
			}
			assertSameRecord(t, &c.rec, back)
		})
	}
}

func assertSameRecord(t *testing.T, want, got *kgo.Record) {
	t.Helper()
	if !bytesEqualNil(want.Key, got.Key) || !bytesEqualNil(want.Value, got.Value) {
		t.Errorf("key/value: got %q/%q, want %q/%q (nil: %v/%v, want %v/%v)",
			got.Key, got.Value, want.Key, want.Value, got.Key == nil, got.Value == nil, want.Key == nil, want.Value == nil)
	}
	if got.Partition != want.Partition || !got.Timestamp.Equal(want.Timestamp) {
		t.Errorf("partition/timestamp: got %d/%v, want %d/%v", got.Partition, got.Timestamp, want.Partition, want.Timestamp)
	}
	if len(got.Headers) != len(want.Headers) {
		t.Fatalf("headers: got %q, want %q", got.Headers, want.Headers)
	}
	for i := range got.Headers {
		if got.Headers[i].Key != want.Headers[i].Key || !bytesEqualNil(got.Headers[i].Value, want.Headers[i].Value) {
			t.Errorf("header %d: got %q, want %q", i, got.Headers[i], want.Headers[i])
		}
	}
}

func bytesEqualNil(a, b []byte) bool { return (a == nil) == (b == nil) && bytes.Equal(a, b) }

func TestDecodeJSONReadsHandWrittenLines(t *testing.T) {
	for _, c := range []struct {
		in   string
		want kgo.Record
	}{
		{`{"value":"x"}`, kgo.Record{Partition: -1, Value: []byte("x")}},
		{`{}`, kgo.Record{Partition: -1}},
		{`{"key":"k","partition":3}`, kgo.Record{Partition: 3, Key: []byte("k")}},
		{`{"partition":null,"key":null}`, kgo.Record{Partition: -1}},
		{`  {"topic":"ignored","offset":7,"timestamp":5,"value_b64":"AAE="}  `, kgo.Record{Partition: -1, Timestamp: time.UnixMilli(5), Value: []byte{0, 1}}},
		{`{"headers":[{"key":"h"}]}`, kgo.Record{Partition: -1, Headers: []kgo.RecordHeader{{Key: "h"}}}},
		{`{"value":"\ud83d\ude00"}`, kgo.Record{Partition: -1, Value: []byte("😀")}},
		{`{"key":"k","value":null}`, kgo.Record{Partition: -1, Key: []byte("k")}},
		{`{"key":"k","value":""}`, kgo.Record{Partition: -1, Key: []byte("k"), Value: []byte{}}},
		{`{"key":"","value":"v"}`, kgo.Record{Partition: -1, Key: []byte{}, Value: []byte("v")}},
	} {
		got, err := DecodeJSON([]byte(c.in))
		if err != nil {
			t.Errorf("%s: %v", c.in, err)
			continue
		}
		assertSameRecord(t, &c.want, got)
	}
}

func TestDecodeJSONRejectsBadLines(t *testing.T) {
	for _, c := range []struct{ in, want string }{
		{``, "empty line"},
		{`{"value":"x"`, "unexpected EOF"},
		{`[1]`, "must be an object, not array"},
		{`{"vaule":"x"}`, `unknown field "vaule"`},
		{`{"value":"x"} {"value":"y"}`, "more than one value"},
		{`{"value":1}`, `"value" must be a string, not number`},
		{`{"partition":"1"}`, `"partition" must be an integer, not string`},
		{`{"partition":-2}`, "partition -2 is negative"},
		{`{"timestamp":-5}`, "timestamp -5 is negative"},
		{`{"key":"a","key_b64":"YQ=="}`, `both "key" and "key_b64"`},
		{`{"value_b64":"***"}`, "value_b64: illegal base64"},
		{`{"headers":[{"value":"v"}]}`, "header 1 has no key"},
		{`{"headers":{"a":"b"}}`, `"headers" must be a list`},
	} {
		_, err := DecodeJSON([]byte(c.in))
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s: got error %v, want one containing %q", c.in, err, c.want)
		}
	}
}

// FuzzEnvelopeRoundTrip: any key, value and header bytes survive
// AppendJSON → DecodeJSON exactly, on one line of valid JSON.
func FuzzEnvelopeRoundTrip(f *testing.F) {
	f.Add([]byte("k"), []byte("v"), "h", []byte("hv"), false, int64(0))
	f.Add([]byte{0xff, 0}, []byte("\u2028\n\"\\"), "\xfe", []byte{}, true, int64(1700000000000))
	f.Fuzz(func(t *testing.T, key, value []byte, hkey string, hvalue []byte, nullKey bool, ms int64) {
		if ms < 0 {
			ms = -ms
		}
		if ms > 1<<50 {
			ms = 1 << 50
		}
		if nullKey {
			key = nil
		}
		rec := &kgo.Record{Topic: "t", Partition: 1, Key: key, Value: value, Timestamp: time.UnixMilli(ms),
			Headers: []kgo.RecordHeader{{Key: hkey, Value: hvalue}}}
		line := AppendJSON(nil, rec)
		if !json.Valid(line) || bytes.ContainsAny(line, "\n\r\x00") {
			t.Fatalf("bad line %q", line)
		}
		back, err := DecodeJSON(line)
		if err != nil {
			t.Fatalf("%s: %v", line, err)
		}
		assertSameRecord(t, rec, back)
	})
}

// FuzzDecodeJSON: any line either fails to decode or decodes to a record
// that encodes and decodes to itself.
func FuzzDecodeJSON(f *testing.F) {
	for _, s := range []string{`{"value":"x"}`, `{"key_b64":"/w==","headers":[{"key":"a","value":null}]}`, `{"partition":1,"timestamp":3}`, `{`, `null`} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, line []byte) {
		rec, err := DecodeJSON(line)
		if err != nil {
			return
		}
		rec.Topic = "t"
		if rec.Timestamp.IsZero() {
			rec.Timestamp = time.UnixMilli(0)
		}
		back, err := DecodeJSON(AppendJSON(nil, rec))
		if err != nil {
			t.Fatal(err)
		}
		want := *rec
		if want.Partition < 0 {
			want.Partition = -1
		}
		assertSameRecord(t, &want, back)
		if !reflect.DeepEqual(len(back.Headers), len(rec.Headers)) {
			t.Fatal("headers lost")
		}
	})
}
