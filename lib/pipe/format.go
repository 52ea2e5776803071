package pipe

import (
	"fmt"
	"strconv"

	"github.com/twmb/franz-go/pkg/kgo"
)

// Format is a compiled -f output format: kcat's tokens
//
//	%t topic       %p partition    %o offset     %T timestamp (ms since epoch)
//	%k key         %K key length (-1 for a null key)
//	%s value       %S value length (-1 for a null value)
//	%h headers as name=value pairs separated by commas
//	%% a percent sign
//
// and the escapes \n \t \r \0 and \\. Everything else is copied as is. A
// null key, value or header value prints as nothing, or as the text
// given to WithNull (consume -Z: NullText, as kcat -Z prints it).
type Format struct {
	ops []formatOp
	// null is what %k, %s and %h print for a null key, value or header
	// value; %K and %S print -1 for null whatever it is.
	null []byte
}

// NullText is what consume -Z prints for null, the string kcat -Z prints.
const NullText = "NULL"

// WithNull returns a copy of f that prints a null key, value or header
// value as text.
func (f *Format) WithNull(text string) *Format {
	g := *f
	g.null = []byte(text)
	return &g
}

type formatOp struct {
	verb byte   // 0 for literal text
	text []byte // the literal text
}

// DefaultFormat prints the value and a newline.
const DefaultFormat = `%s\n`

// ParseFormat compiles a -f format; an unknown %-token or \-escape is an
// error naming it.
func ParseFormat(s string) (*Format, error) {
	f := &Format{}
	var lit []byte
	flush := func() {
		if len(lit) > 0 {
			f.ops = append(f.ops, formatOp{text: lit})
			lit = nil
		}
	}
	for i := 0; i < len(s); i++ {
		c := s[i]
		switch c {
		case '%':
			if i+1 == len(s) {
				return nil, fmt.Errorf("format ends in a lone %%; write %%%% for a percent sign")
			}
			i++
			switch v := s[i]; v {
			case '%':
				lit = append(lit, '%')
			case 't', 'p', 'o', 'T', 'k', 'K', 's', 'S', 'h':
				flush()
				f.ops = append(f.ops, formatOp{verb: v})
			default:
				return nil, fmt.Errorf("unknown token %%%s in format (known: %%t %%p %%o %%T %%k %%K %%s %%S %%h %%%%)", string(rune(v)))
			}
		case '\\':
			if i+1 == len(s) {
				return nil, fmt.Errorf(`format ends in a lone \; write \\ for a backslash`)
			}
			i++
			switch e := s[i]; e {
			case 'n':
				lit = append(lit, '\n')
			case 't':
				lit = append(lit, '\t')
			case 'r':
				lit = append(lit, '\r')
			case '0':
				lit = append(lit, 0)
			case '\\':
				lit = append(lit, '\\')
			default:
				return nil, fmt.Errorf(`unknown escape \%s in format (known: \n \t \r \0 \\)`, string(rune(e)))
			}
		default:
			lit = append(lit, c)
		}
	}
	flush()
	return f, nil
}

// Append appends r formatted to dst.
func (f *Format) Append(dst []byte, r *kgo.Record) []byte {
	for _, op := range f.ops {
		switch op.verb {
		case 0:
			dst = append(dst, op.text...)
		case 't':
			dst = append(dst, r.Topic...)
		case 'p':
			dst = strconv.AppendInt(dst, int64(r.Partition), 10)
		case 'o':
			dst = strconv.AppendInt(dst, r.Offset, 10)
		case 'T':
			dst = strconv.AppendInt(dst, r.Timestamp.UnixMilli(), 10)
		case 'k':
			dst = f.appendBytes(dst, r.Key)
		case 'K':
			dst = appendLen(dst, r.Key)
		case 's':
			dst = f.appendBytes(dst, r.Value)
		case 'S':
			dst = appendLen(dst, r.Value)
		case 'h':
			for i, h := range r.Headers {
				if i > 0 {
					dst = append(dst, ',')
				}
				dst = append(dst, h.Key...)
				dst = append(dst, '=')
				dst = f.appendBytes(dst, h.Value)
			}
		}
	}
	return dst
}

// appendBytes appends b, or f's text for null when b is null.
func (f *Format) appendBytes(dst, b []byte) []byte {
	if b == nil {
		return append(dst, f.null...)
	}
	return append(dst, b...)
}

func appendLen(dst, b []byte) []byte {
	if b == nil {
		return append(dst, "-1"...)
	}
	return strconv.AppendInt(dst, int64(len(b)), 10)
}
