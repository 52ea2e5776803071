package pipe

import (
	"bytes"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"strconv"
	"time"
	"unicode/utf8"

	"github.com/twmb/franz-go/pkg/kgo"
)

// The JSON envelope is one record as one JSON object on one line; consume
// --json writes it and produce --format json reads it back:
//
//	{"topic":"t","partition":0,"offset":42,"timestamp":1700000000000,
//	 "key":"k","value":"hello","headers":[{"key":"h","value":"v"}]}
//
//   - timestamp is milliseconds since the Unix epoch.
//   - key and value are JSON strings when the bytes are valid UTF-8 and
//     JSON null when the key or value is null. Bytes that are not valid
//     UTF-8 are written as "key_b64" / "value_b64" instead, in standard
//     base64 with padding; exactly one of the two names appears.
//   - headers is a list, always present, in record order (names may
//     repeat); each header has "key" (or "key_b64") and "value" (or
//     "value_b64", or null).
//
// Reading, every field is optional: topic and offset are ignored (the
// topic is -t, the broker assigns offsets); a missing or null partition
// (or -1) means "choose by key"; a missing timestamp means now; a missing
// key or value is null. Unknown fields are an error, to catch typos.

// AppendJSON appends r's JSON envelope, without a line terminator, to dst.
func AppendJSON(dst []byte, r *kgo.Record) []byte {
	dst = append(dst, `{"topic":`...)
	dst = appendJSONString(dst, r.Topic)
	dst = append(dst, `,"partition":`...)
	dst = strconv.AppendInt(dst, int64(r.Partition), 10)
	dst = append(dst, `,"offset":`...)
	dst = strconv.AppendInt(dst, r.Offset, 10)
	dst = append(dst, `,"timestamp":`...)
	dst = strconv.AppendInt(dst, r.Timestamp.UnixMilli(), 10)
	dst = appendJSONBytes(dst, "key", r.Key)
	dst = appendJSONBytes(dst, "value", r.Value)
	dst = append(dst, `,"headers":[`...)
	for i, h := range r.Headers {
		if i > 0 {
			dst = append(dst, ',')
		}
		if utf8.ValidString(h.Key) {
			dst = append(dst, `{"key":`...)
			dst = appendJSONString(dst, h.Key)
		} else {
			dst = append(dst, `{"key_b64":"`...)
			dst = base64.StdEncoding.AppendEncode(dst, []byte(h.Key))
			dst = append(dst, '"')
		}
		dst = appendJSONBytes(dst, "value", h.Value)
		dst = append(dst, '}')
	}
	return append(dst, "]}"...)
}

// appendJSONBytes appends ,"name":… for b: null, a string, or name_b64.
func appendJSONBytes(dst []byte, name string, b []byte) []byte {
	dst = append(dst, ',', '"')
	dst = append(dst, name...)
	switch {
	case b == nil:
		return append(dst, `":null`...)
	case utf8.Valid(b):
		dst = append(dst, '"', ':')
		return appendJSONString(dst, b)
	default:
		dst = append(dst, `_b64":"`...)
		dst = base64.StdEncoding.AppendEncode(dst, b)
		return append(dst, '"')
	}
}

const hexDigits = "0123456789abcdef"

// appendJSONString appends s, which must be valid UTF-8, as a JSON string.
// Only what JSON requires is escaped (quote, backslash, control
// characters), so text stays readable; U+2028 and U+2029 are escaped too so
// the line is also valid JavaScript.
func appendJSONString[S string | []byte](dst []byte, s S) []byte {
	dst = append(dst, '"')
	start := 0
	for i := 0; i < len(s); {
		c := s[i]
		if c >= 0x20 && c != '"' && c != '\\' && c < 0x80 {
			i++
			continue
		}
		if c >= 0x80 {
			// U+2028 and U+2029 are E2 80 A8 and E2 80 A9 in UTF-8.
			if c == 0xe2 && i+2 < len(s) && s[i+1] == 0x80 && (s[i+2] == 0xa8 || s[i+2] == 0xa9) {
				dst = append(dst, s[start:i]...)
				dst = append(dst, `\u202`...)
				dst = append(dst, hexDigits[s[i+2]-0xa0])
				i += 3
				start = i
				continue
			}
			i++
			continue
		}
		dst = append(dst, s[start:i]...)
		switch c {
		case '"', '\\':
			dst = append(dst, '\\', c)
		case '\n':
			dst = append(dst, '\\', 'n')
		case '\r':
			dst = append(dst, '\\', 'r')
		case '\t':
			dst = append(dst, '\\', 't')
		default:
			dst = append(dst, '\\', 'u', '0', '0', hexDigits[c>>4], hexDigits[c&0xf])
		}
		i++
		start = i
	}
	dst = append(dst, s[start:]...)
	return append(dst, '"')
}

// envelopeIn is the JSON envelope as read; pointers tell absent or null
// from empty.
type envelopeIn struct {
	Topic     *string    `json:"topic"`
	Partition *int32     `json:"partition"`
	Offset    *int64     `json:"offset"`
	Timestamp *int64     `json:"timestamp"`
	Key       *string    `json:"key"`
	KeyB64    *string    `json:"key_b64"`
	Value     *string    `json:"value"`
	ValueB64  *string    `json:"value_b64"`
	Headers   []headerIn `json:"headers"`
}

type headerIn struct {
	Key      *string `json:"key"`
	KeyB64   *string `json:"key_b64"`
	Value    *string `json:"value"`
	ValueB64 *string `json:"value_b64"`
}

// DecodeJSON reads one JSON envelope (see AppendJSON) into a record to
// produce: Key, Value, Headers, Timestamp (zero when absent) and Partition
// (-1 when absent). Topic and offset are accepted and ignored.
func DecodeJSON(line []byte) (*kgo.Record, error) {
	var in envelopeIn
	dec := json.NewDecoder(bytes.NewReader(line))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&in); err != nil {
		return nil, jsonError(err)
	}
	if _, err := dec.Token(); err != io.EOF {
		return nil, errors.New("json: more than one value on the line")
	}
	r := &kgo.Record{Partition: -1}
	if in.Partition != nil {
		if *in.Partition < -1 {
			return nil, fmt.Errorf("json: partition %d is negative", *in.Partition)
		}
		r.Partition = *in.Partition
	}
	if in.Timestamp != nil {
		if *in.Timestamp < 0 {
			return nil, fmt.Errorf("json: timestamp %d is negative", *in.Timestamp)
		}
		r.Timestamp = time.UnixMilli(*in.Timestamp)
	}
	var err error
	if r.Key, err = decodeBytes("key", in.Key, in.KeyB64); err != nil {
		return nil, err
	}
	if r.Value, err = decodeBytes("value", in.Value, in.ValueB64); err != nil {
		return nil, err
	}
	for i, h := range in.Headers {
		key, err := decodeBytes("key", h.Key, h.KeyB64)
		if err != nil {
			return nil, fmt.Errorf("header %d: %w", i+1, err)
		}
		if key == nil {
			return nil, fmt.Errorf("json: header %d has no key", i+1)
		}
		value, err := decodeBytes("value", h.Value, h.ValueB64)
		if err != nil {
			return nil, fmt.Errorf("header %d: %w", i+1, err)
		}
		r.Headers = append(r.Headers, kgo.RecordHeader{Key: string(key), Value: value})
	}
	return r, nil
}

// decodeBytes returns the bytes of a field given as text or as base64 (at
// most one of them); nil when neither is given or it is null.
func decodeBytes(name string, text, b64 *string) ([]byte, error) {
	switch {
	case text != nil && b64 != nil:
		return nil, fmt.Errorf("json: both %q and %q given", name, name+"_b64")
	case text != nil:
		return []byte(*text), nil
	case b64 != nil:
		b, err := base64.StdEncoding.DecodeString(*b64)
		if err != nil {
			return nil, fmt.Errorf("json: %s_b64: %v", name, err)
		}
		return b, nil
	}
	return nil, nil
}

// jsonError makes encoding/json's errors read well after a line number.
func jsonError(err error) error {
	var typeErr *json.UnmarshalTypeError
	if errors.As(err, &typeErr) {
		if typeErr.Field == "" {
			return fmt.Errorf("json: a line must be an object, not %s", typeErr.Value)
		}
		return fmt.Errorf("json: %q must be %s, not %s", typeErr.Field, jsonKind(typeErr.Type.Kind().String()), typeErr.Value)
	}
	if err == io.EOF {
		return errors.New("json: empty line")
	}
	if msg := err.Error(); len(msg) > 5 && msg[:5] == "json:" {
		return err
	}
	return fmt.Errorf("json: %w", err)
}

func jsonKind(k string) string {
	switch k {
	case "ptr", "string":
		return "a string"
	case "int32", "int64":
		return "an integer"
	case "slice":
		return "a list"
	}
	return k
}
