package pipe

import (
	"strconv"
	"sync"

	"github.com/twmb/franz-go/pkg/kgo"
)

// kcat's JSON (consume -J) is one record as one JSON object on one line,
// with kcat -J's fields, in its order, for scripts written for kcat:
//
//	{"topic":"t","partition":0,"offset":42,"tstype":"create",
//	 "ts":1700000000000,"broker":1,"headers":["h","v"],"key":"k",
//	 "payload":"hello"}
//
//   - tstype is "create" or "logappend" (the topic's
//     message.timestamp.type), and ts the timestamp in milliseconds since
//     the Unix epoch; a record without a timestamp type (a message format
//     older than Kafka 0.10, which mq never serves) has "none" and 0.
//   - broker is the id of the broker the record was fetched from, -1
//     when the client does not know it.
//   - headers appears only when the record has some: a flat list of
//     name, value, name, value..., in record order; a null header value
//     is null.
//   - key and payload are strings, or null when null.
//   - Strings escape only the quote, the backslash and control characters
//     (\b \t \n \f \r, else \u00XX in upper-case hex); every other byte is
//     copied as it is, as kcat does, so a key or value that is not UTF-8
//     makes a line that is not strictly JSON (jq reads such bytes as
//     U+FFFD). The JSON envelope (AppendJSON) keeps them, in base64.
//
// Nothing reads this format back: produce --format json reads the
// envelope.

// AppendKcatJSON appends r as kcat -J prints it, without a line
// terminator, to dst; broker is the id of the broker r was fetched from,
// or -1.
func AppendKcatJSON(dst []byte, r *kgo.Record, broker int32) []byte {
	dst = append(dst, `{"topic":`...)
	dst = appendKcatString(dst, r.Topic)
	dst = append(dst, `,"partition":`...)
	dst = strconv.AppendInt(dst, int64(r.Partition), 10)
	dst = append(dst, `,"offset":`...)
	dst = strconv.AppendInt(dst, r.Offset, 10)
	switch r.Attrs.TimestampType() {
	case 0:
		dst = append(dst, `,"tstype":"create","ts":`...)
		dst = strconv.AppendInt(dst, r.Timestamp.UnixMilli(), 10)
	case 1:
		dst = append(dst, `,"tstype":"logappend","ts":`...)
		dst = strconv.AppendInt(dst, r.Timestamp.UnixMilli(), 10)
	default:
		dst = append(dst, `,"tstype":"none","ts":0`...)
	}
	dst = append(dst, `,"broker":`...)
	dst = strconv.AppendInt(dst, int64(broker), 10)
	if len(r.Headers) > 0 {
		dst = append(dst, `,"headers":[`...)
		for i, h := range r.Headers {
			if i > 0 {
				dst = append(dst, ',')
			}
			dst = appendKcatString(dst, h.Key)
			dst = append(dst, ',')
			dst = appendKcatBytes(dst, h.Value)
		}
		dst = append(dst, ']')
	}
	dst = append(dst, `,"key":`...)
	dst = appendKcatBytes(dst, r.Key)
	dst = append(dst, `,"payload":`...)
	dst = appendKcatBytes(dst, r.Value)
	return append(dst, '}')
}

// appendKcatBytes appends b as a kcat JSON string, or null.
func appendKcatBytes(dst, b []byte) []byte {
	if b == nil {
		return append(dst, "null"...)
	}
	return appendKcatString(dst, b)
}

const upperHexDigits = "0123456789ABCDEF"

// appendKcatString appends s as a JSON string the way kcat -J writes one:
// the quote, the backslash and bytes below 0x20 escaped, all else copied.
func appendKcatString[S string | []byte](dst []byte, s S) []byte {
	dst = append(dst, '"')
	start := 0
	for i := 0; i < len(s); i++ {
		c := s[i]
		if c >= 0x20 && c != '"' && c != '\\' {
			continue
		}
		dst = append(dst, s[start:i]...)
		switch c {
		case '"', '\\':
			dst = append(dst, '\\', c)
		case '\b':
			dst = append(dst, '\\', 'b')
		case '\t':
			dst = append(dst, '\\', 't')
		case '\n':
			dst = append(dst, '\\', 'n')
		case '\f':
			dst = append(dst, '\\', 'f')
		case '\r':
			dst = append(dst, '\\', 'r')
		default:
			dst = append(dst, '\\', 'u', '0', '0', upperHexDigits[c>>4], upperHexDigits[c&0xf])
		}
		start = i + 1
	}
	dst = append(dst, s[start:]...)
	return append(dst, '"')
}

// fetchBrokers knows which broker each partition's records were last
// fetched from, for kcat's "broker": a kgo hook (kgo.HookFetchBatchRead)
// notes the broker of every batch as kgo reads it, before the batch's
// records are buffered for a poll. A partition is in at most one buffered
// fetch at a time and kgo fetches it again only once a poll took that
// one, so what snapshot finds right after a poll is the broker of the
// records the poll returned (unless a whole fetch from another broker,
// the partition's new leader, completed in between).
//
// OnFetchBatchRead is called from kgo's fetch goroutines and snapshot from
// the consume loop, concurrently.
type fetchBrokers struct {
	mu   sync.Mutex
	last map[topicPartition]int32
}

func newFetchBrokers() *fetchBrokers {
	return &fetchBrokers{last: map[topicPartition]int32{}}
}

// OnFetchBatchRead implements kgo.HookFetchBatchRead.
func (b *fetchBrokers) OnFetchBatchRead(meta kgo.BrokerMetadata, topic string, partition int32, _ kgo.FetchBatchMetrics) {
	b.mu.Lock()
	b.last[topicPartition{topic, partition}] = meta.NodeID
	b.mu.Unlock()
}

// snapshot sets into to the broker of each partition of fetches, where
// known, after clearing it.
func (b *fetchBrokers) snapshot(fetches kgo.Fetches, into map[topicPartition]int32) {
	clear(into)
	b.mu.Lock()
	defer b.mu.Unlock()
	fetches.EachPartition(func(fp kgo.FetchTopicPartition) {
		tp := topicPartition{fp.Topic, fp.Partition}
		if id, ok := b.last[tp]; ok {
			into[tp] = id
		}
	})
}
