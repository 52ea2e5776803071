package record

import "errors"

// Varints inside records are zig-zag encoded base-128 integers, least
// significant group first, as in protocol buffers. An int32 takes at most 5
// bytes and an int64 at most 10; a longer encoding, or one whose last byte
// carries bits that do not fit the type, is an overflow.
const (
	maxVarintLen  = 5
	maxVarlongLen = 10
)

var (
	errVarintShort    = errors.New("varint truncated")
	errVarintOverflow = errors.New("varint overflows")
)

// readVarint decodes a zig-zag varint that must fit an int32 from the start
// of b and returns it with the number of bytes it used.
func readVarint(b []byte) (int32, int, error) {
	var u uint32
	for i := 0; i < maxVarintLen; i++ {
		if i >= len(b) {
			return 0, 0, errVarintShort
		}
		c := b[i]
		if i == maxVarintLen-1 && c > 0x0f {
			return 0, 0, errVarintOverflow
		}
		u |= uint32(c&0x7f) << (7 * i)
		if c < 0x80 {
			return int32(u>>1) ^ -int32(u&1), i + 1, nil
		}
	}
	return 0, 0, errVarintOverflow // not reached: the last byte check returns first
}

// readVarlong decodes a zig-zag varint that must fit an int64.
func readVarlong(b []byte) (int64, int, error) {
	var u uint64
	for i := 0; i < maxVarlongLen; i++ {
		if i >= len(b) {
			return 0, 0, errVarintShort
		}
		c := b[i]
		if i == maxVarlongLen-1 && c > 0x01 {
			return 0, 0, errVarintOverflow
		}
		u |= uint64(c&0x7f) << (7 * i)
		if c < 0x80 {
			return int64(u>>1) ^ -int64(u&1), i + 1, nil
		}
	}
	return 0, 0, errVarintOverflow
}

func zigzag(v int64) uint64 { return uint64(v<<1) ^ uint64(v>>63) }

// appendVarint appends v zig-zag encoded. It serves int32 and int64 alike:
// an int32 widened to int64 encodes to the same bytes.
func appendVarint(dst []byte, v int64) []byte {
	u := zigzag(v)
	for u >= 0x80 {
		dst = append(dst, byte(u)|0x80)
		u >>= 7
	}
	return append(dst, byte(u))
}

// varintLen is the number of bytes appendVarint uses for v.
func varintLen(v int64) int {
	u := zigzag(v)
	n := 1
	for u >= 0x80 {
		u >>= 7
		n++
	}
	return n
}
