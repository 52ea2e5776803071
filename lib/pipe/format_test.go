package pipe

import (
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
)

func TestFormatAppendsKcatTokens(t *testing.T) {
	rec := &kgo.Record{Topic: "logs", Partition: 3, Offset: 1234, Timestamp: time.UnixMilli(1700000000123),
		Key: []byte("user-7"), Value: []byte("hello world"),
		Headers: []kgo.RecordHeader{{Key: "a", Value: []byte("1")}, {Key: "b", Value: nil}}}
	null := &kgo.Record{Topic: "t", Timestamp: time.UnixMilli(5)}
	for _, c := range []struct {
		format string
		rec    *kgo.Record
		want   string
	}{
		{DefaultFormat, rec, "hello world\n"},
		{`%t %p %o %T`, rec, "logs 3 1234 1700000000123"},
		{`%k=%s (%K/%S)\n`, rec, "user-7=hello world (6/11)\n"},
		{`%h`, rec, "a=1,b="},
		{`100%% \\ \t\r\0`, rec, "100% \\ \t\r\x00"},
		{`[%k][%s] %K %S`, null, "[][] -1 -1"},
		{``, rec, ""},
		{`plain`, rec, "plain"},
		{`%s%s`, rec, "hello worldhello world"},
		{`ü%pü`, rec, "ü3ü"},
	} {
		f, err := ParseFormat(c.format)
		if err != nil {
			t.Errorf("ParseFormat(%q): %v", c.format, err)
			continue
		}
		if got := string(f.Append(nil, c.rec)); got != c.want {
			t.Errorf("%q: got %q, want %q", c.format, got, c.want)
		}
	}
}

func TestFormatWithNullPrintsNullAsText(t *testing.T) {
	tombstone := &kgo.Record{Key: []byte("user-7"), Headers: []kgo.RecordHeader{{Key: "h"}, {Key: "e", Value: []byte{}}}}
	empty := &kgo.Record{Key: []byte{}, Value: []byte{}}
	keyless := &kgo.Record{Value: []byte("v")}
	for _, c := range []struct {
		rec       *kgo.Record
		want      string // WithNull(NullText)
		wantPlain string // as parsed
	}{
		{tombstone, "user-7=NULL -1 h=NULL,e=", "user-7= -1 h=,e="},
		{empty, "= 0 ", "= 0 "},
		{keyless, "NULL=v 1 ", "=v 1 "},
	} {
		plain, err := ParseFormat(`%k=%s %S %h`)
		if err != nil {
			t.Fatal(err)
		}
		withNull := plain.WithNull(NullText)
		if got := string(withNull.Append(nil, c.rec)); got != c.want {
			t.Errorf("with null: got %q, want %q", got, c.want)
		}
		if got := string(plain.Append(nil, c.rec)); got != c.wantPlain {
			t.Errorf("plain (WithNull must not change it): got %q, want %q", got, c.wantPlain)
		}
	}
}

func TestParseFormatRejectsUnknownTokens(t *testing.T) {
	for _, c := range []struct{ format, want string }{
		{`%x`, "unknown token %x"},
		{`abc%`, "lone %"},
		{`\q`, `unknown escape \q`},
		{`a\`, `lone \`},
	} {
		_, err := ParseFormat(c.format)
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%q: got %v, want an error containing %q", c.format, err, c.want)
		}
	}
}

// FuzzParseFormat: no format string panics the parser or the formatter, and
// a format without % or \ prints itself.
func FuzzParseFormat(f *testing.F) {
	for _, s := range []string{DefaultFormat, `%t %p %o %T %k %K %s %S %h %%`, `\n\t\r\0\\`, `%`, `\`, `%q`} {
		f.Add(s)
	}
	rec := &kgo.Record{Topic: "t", Key: []byte("k"), Value: []byte("v"), Headers: []kgo.RecordHeader{{Key: "h"}}}
	f.Fuzz(func(t *testing.T, s string) {
		fm, err := ParseFormat(s)
		if err != nil {
			return
		}
		out := fm.Append(nil, rec)
		if !strings.ContainsAny(s, `%\`) && string(out) != s {
			t.Fatalf("literal format %q printed %q", s, out)
		}
	})
}
