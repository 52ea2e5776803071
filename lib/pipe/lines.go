package pipe

import (
	"bufio"
	"errors"
	"fmt"
	"io"
)

// LineReader splits its input into messages at a delimiter byte ('\n', or
// NUL for -0). A message may be of any length up to the reader's maximum,
// far beyond bufio.Scanner's default token size; a longer one is skipped
// without being held in memory and reported as a *TooLargeError, after
// which reading continues with the next message. A final message without a
// trailing delimiter is still a message; an empty input has none.
type LineReader struct {
	r     *bufio.Reader
	delim byte
	max   int
	line  int
	buf   []byte
}

// NewLineReader reads messages from r separated by delim, each at most max
// bytes long (max <= 0: no limit).
func NewLineReader(r io.Reader, delim byte, max int) *LineReader {
	return &LineReader{r: bufio.NewReaderSize(r, 64<<10), delim: delim, max: max}
}

// TooLargeError reports a message longer than the reader's maximum.
type TooLargeError struct {
	Line int // 1-based number of the message in its input
	Size int // its length in bytes, without the delimiter
	Max  int
}

func (e *TooLargeError) Error() string {
	return fmt.Sprintf("message of %d bytes is larger than the limit of %d", e.Size, e.Max)
}

// Line is the 1-based number of the message Next returned last.
func (lr *LineReader) Line() int { return lr.line }

// Next returns the next message without its delimiter. The slice is valid
// only until the following call. At the end of the input it returns io.EOF;
// for an overlong message a *TooLargeError (call Next again to go on); any
// other error is the underlying reader's.
func (lr *LineReader) Next() ([]byte, error) {
	lr.buf = lr.buf[:0]
	size := 0
	for {
		chunk, err := lr.r.ReadSlice(lr.delim)
		switch {
		case err == nil:
			chunk = chunk[:len(chunk)-1] // the delimiter
		case errors.Is(err, bufio.ErrBufferFull):
		case err == io.EOF:
			if size == 0 && len(chunk) == 0 {
				return nil, io.EOF
			}
		default:
			return nil, err
		}
		size += len(chunk)
		tooLarge := lr.max > 0 && size > lr.max
		if !tooLarge {
			if err == nil && len(lr.buf) == 0 {
				lr.line++
				return chunk, nil // the common case: no copy
			}
			lr.buf = append(lr.buf, chunk...)
		} else {
			lr.buf = lr.buf[:0]
		}
		if err == nil || err == io.EOF {
			lr.line++
			if tooLarge {
				if cap(lr.buf) > 1<<20 {
					lr.buf = nil // don't keep a huge buffer for the rest of the input
				}
				return nil, &TooLargeError{Line: lr.line, Size: size, Max: lr.max}
			}
			return lr.buf, nil
		}
	}
}
