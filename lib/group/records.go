package group

import (
	"encoding/binary"
	"errors"
	"fmt"
	"math"
)

// Record formats of __consumer_offsets. All integers are big-endian;
// a string is an int16 length then bytes (length -1: null); bytes are an
// int32 length then bytes; an array is an int32 count then its elements.
// The layouts are those Kafka documents for the topic, so its tools can
// read ours:
//
//	offset key      (version 1): version int16, group string, topic string, partition int32
//	group key       (version 2): version int16, group string
//	offset value    (version 3): version int16, offset int64, leader epoch int32,
//	                             metadata string, commit timestamp int64 (ms)
//	group value     (version 3): version int16, protocol type string, generation int32,
//	                             protocol string (nullable), leader string (nullable),
//	                             state timestamp int64 (ms), members array of:
//	                               member id string, instance id string (nullable),
//	                               client id string, client host string,
//	                               rebalance timeout int32 (ms), session timeout int32 (ms),
//	                               subscription bytes, assignment bytes
//
// A record with a null value is a tombstone: the offset (or the group's
// metadata) is deleted. Readers accept offset keys of version 0 and 1 and
// offset values of versions 0 to 3 (version 1 adds an expire timestamp
// after the commit timestamp, which is read and ignored; version 3 adds
// the leader epoch).
const (
	offsetKeyVersion   = 1
	groupKeyVersion    = 2
	offsetValueVersion = 3
	groupValueVersion  = 3
)

var errBadRecord = errors.New("group: malformed __consumer_offsets record")

// recordKey is a decoded key: an offset key (Topic set) or a group key.
type recordKey struct {
	group     string
	isOffset  bool
	topic     string
	partition int32
}

// offsetValue is a committed offset as stored.
type offsetValue struct {
	offset      int64
	leaderEpoch int32
	metadata    string
	commitMS    int64
}

// groupValue is a group's metadata as stored.
type groupValue struct {
	protocolType string
	generation   int32
	protocol     string
	leader       string
	stateMS      int64
	members      []storedMember
}

type storedMember struct {
	id, instanceID, clientID, clientHost string
	rebalanceMS, sessionMS               int32
	subscription, assignment             []byte
}

type encoder struct{ b []byte }

func (e *encoder) i16(v int16) { e.b = binary.BigEndian.AppendUint16(e.b, uint16(v)) }
func (e *encoder) i32(v int32) { e.b = binary.BigEndian.AppendUint32(e.b, uint32(v)) }
func (e *encoder) i64(v int64) { e.b = binary.BigEndian.AppendUint64(e.b, uint64(v)) }
func (e *encoder) str(s string) {
	if len(s) > math.MaxInt16 {
		s = s[:math.MaxInt16]
	}
	e.i16(int16(len(s)))
	e.b = append(e.b, s...)
}

// nstr writes "" as null.
func (e *encoder) nstr(s string) {
	if s == "" {
		e.i16(-1)
		return
	}
	e.str(s)
}
func (e *encoder) bytes(b []byte) {
	e.i32(int32(len(b)))
	e.b = append(e.b, b...)
}

func offsetKey(group, topic string, partition int32) []byte {
	e := encoder{}
	e.i16(offsetKeyVersion)
	e.str(group)
	e.str(topic)
	e.i32(partition)
	return e.b
}

func groupKey(group string) []byte {
	e := encoder{}
	e.i16(groupKeyVersion)
	e.str(group)
	return e.b
}

func (v offsetValue) encode() []byte {
	e := encoder{}
	e.i16(offsetValueVersion)
	e.i64(v.offset)
	e.i32(v.leaderEpoch)
	e.str(v.metadata)
	e.i64(v.commitMS)
	return e.b
}

func (v *groupValue) encode() []byte {
	e := encoder{}
	e.i16(groupValueVersion)
	e.str(v.protocolType)
	e.i32(v.generation)
	e.nstr(v.protocol)
	e.nstr(v.leader)
	e.i64(v.stateMS)
	e.i32(int32(len(v.members)))
	for _, m := range v.members {
		e.str(m.id)
		e.nstr(m.instanceID)
		e.str(m.clientID)
		e.str(m.clientHost)
		e.i32(m.rebalanceMS)
		e.i32(m.sessionMS)
		e.bytes(m.subscription)
		e.bytes(m.assignment)
	}
	return e.b
}

// decoder reads the formats above; the first short or bad field sets err
// and makes every later read return zero values.
type decoder struct {
	b   []byte
	err error
}

func (d *decoder) fail() {
	if d.err == nil {
		d.err = errBadRecord
	}
	d.b = nil
}

func (d *decoder) take(n int) []byte {
	if d.err != nil || n < 0 || len(d.b) < n {
		d.fail()
		return nil
	}
	v := d.b[:n]
	d.b = d.b[n:]
	return v
}

func (d *decoder) i16() int16 {
	if b := d.take(2); b != nil {
		return int16(binary.BigEndian.Uint16(b))
	}
	return 0
}

func (d *decoder) i32() int32 {
	if b := d.take(4); b != nil {
		return int32(binary.BigEndian.Uint32(b))
	}
	return 0
}

func (d *decoder) i64() int64 {
	if b := d.take(8); b != nil {
		return int64(binary.BigEndian.Uint64(b))
	}
	return 0
}

// str reads a string; null reads as "".
func (d *decoder) str() string {
	n := d.i16()
	if n == -1 {
		return ""
	}
	return string(d.take(int(n)))
}

func (d *decoder) bytes() []byte {
	n := d.i32()
	if n == -1 {
		return nil
	}
	return append([]byte(nil), d.take(int(n))...)
}

func decodeKey(b []byte) (recordKey, error) {
	d := decoder{b: b}
	var k recordKey
	switch v := d.i16(); v {
	case 0, 1:
		k.isOffset = true
		k.group = d.str()
		k.topic = d.str()
		k.partition = d.i32()
	case 2:
		k.group = d.str()
	default:
		if d.err == nil {
			return k, fmt.Errorf("%w: key version %d", errBadRecord, v)
		}
	}
	return k, d.err
}

func decodeOffsetValue(b []byte) (offsetValue, error) {
	d := decoder{b: b}
	var v offsetValue
	v.leaderEpoch = -1
	version := d.i16()
	if d.err == nil && (version < 0 || version > 3) {
		return v, fmt.Errorf("%w: offset value version %d", errBadRecord, version)
	}
	v.offset = d.i64()
	if version >= 3 {
		v.leaderEpoch = d.i32()
	}
	v.metadata = d.str()
	v.commitMS = d.i64()
	if version == 1 {
		d.i64() // expire timestamp, from a time when clients chose retention
	}
	return v, d.err
}

func decodeGroupValue(b []byte) (groupValue, error) {
	d := decoder{b: b}
	var v groupValue
	version := d.i16()
	if d.err == nil && (version < 0 || version > 3) {
		return v, fmt.Errorf("%w: group value version %d", errBadRecord, version)
	}
	v.protocolType = d.str()
	v.generation = d.i32()
	v.protocol = d.str()
	v.leader = d.str()
	if version >= 2 {
		v.stateMS = d.i64()
	}
	n := d.i32()
	if n < 0 || int(n) > len(d.b) {
		d.fail()
	}
	for i := int32(0); i < n && d.err == nil; i++ {
		var m storedMember
		m.id = d.str()
		if version >= 3 {
			m.instanceID = d.str()
		}
		m.clientID = d.str()
		m.clientHost = d.str()
		if version >= 1 {
			m.rebalanceMS = d.i32()
		}
		m.sessionMS = d.i32()
		m.subscription = d.bytes()
		m.assignment = d.bytes()
		v.members = append(v.members, m)
	}
	return v, d.err
}
