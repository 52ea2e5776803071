package pipe

import (
	"bytes"
	"errors"
	"io"
	"strings"
	"testing"
	"testing/iotest"
)

type readResult struct {
	msg      string
	line     int
	tooLarge int // size reported, 0 if none
}

func readAll(t *testing.T, r io.Reader, delim byte, max int) []readResult {
	t.Helper()
	lr := NewLineReader(r, delim, max)
	var out []readResult
	for {
		msg, err := lr.Next()
		if err == io.EOF {
			return out
		}
		var tl *TooLargeError
		switch {
		case errors.As(err, &tl):
			if tl.Line != lr.Line() {
				t.Fatalf("TooLargeError.Line %d, reader at line %d", tl.Line, lr.Line())
			}
			out = append(out, readResult{line: tl.Line, tooLarge: tl.Size})
		case err != nil:
			t.Fatal(err)
		default:
			out = append(out, readResult{msg: string(msg), line: lr.Line()})
		}
	}
}

func TestLineReaderSplitsMessages(t *testing.T) {
	long := strings.Repeat("x", 300<<10) // several times bufio's buffer
	for _, c := range []struct {
		name  string
		in    string
		delim byte
		max   int
		want  []readResult
	}{
		{"empty input", "", '\n', 0, nil},
		{"one line", "a\n", '\n', 0, []readResult{{"a", 1, 0}}},
		{"no final newline", "a\nb", '\n', 0, []readResult{{"a", 1, 0}, {"b", 2, 0}}},
		{"empty lines are messages", "\n\na\n", '\n', 0, []readResult{{"", 1, 0}, {"", 2, 0}, {"a", 3, 0}}},
		{"carriage returns kept", "a\r\n", '\n', 0, []readResult{{"a\r", 1, 0}}},
		{"NUL delimited", "a\nb\x00c\x00", 0, 0, []readResult{{"a\nb", 1, 0}, {"c", 2, 0}}},
		{"long line", "s\n" + long + "\ne", '\n', 0, []readResult{{"s", 1, 0}, {long, 2, 0}, {"e", 3, 0}}},
		{"at the limit", "abcd\n", '\n', 4, []readResult{{"abcd", 1, 0}}},
		{"over the limit", "abcde\nab\n", '\n', 4, []readResult{{"", 1, 5}, {"ab", 2, 0}}},
		{"long over the limit", "a\n" + long + "\nb", '\n', 1000, []readResult{{"a", 1, 0}, {"", 2, len(long)}, {"b", 3, 0}}},
		{"last line over the limit", "a\n" + long, '\n', 1000, []readResult{{"a", 1, 0}, {"", 2, len(long)}}},
	} {
		t.Run(c.name, func(t *testing.T) {
			for _, r := range []io.Reader{strings.NewReader(c.in), iotest.OneByteReader(strings.NewReader(c.in))} {
				got := readAll(t, r, c.delim, c.max)
				if len(got) != len(c.want) {
					t.Fatalf("got %d messages, want %d", len(got), len(c.want))
				}
				for i := range got {
					if got[i] != c.want[i] {
						g, w := got[i], c.want[i]
						if len(g.msg) > 20 {
							g.msg = g.msg[:20] + "…"
						}
						if len(w.msg) > 20 {
							w.msg = w.msg[:20] + "…"
						}
						t.Errorf("message %d: got %+v, want %+v", i, g, w)
					}
				}
			}
		})
	}
}

func TestLineReaderReportsReadErrors(t *testing.T) {
	boom := errors.New("boom")
	lr := NewLineReader(io.MultiReader(bytes.NewReader([]byte("a\nb")), iotest.ErrReader(boom)), '\n', 0)
	if msg, err := lr.Next(); err != nil || string(msg) != "a" {
		t.Fatalf("first: %q, %v", msg, err)
	}
	if _, err := lr.Next(); !errors.Is(err, boom) {
		t.Fatalf("second: %v, want boom", err)
	}
}
