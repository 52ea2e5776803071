package log

import "hash/maphash"

// offsetMap maps record keys to the offset of their latest record, in a
// fixed amount of memory: an open-addressing table of 24-byte slots (a
// 128-bit hash of the key from two random seeds, and the offset), filled
// to at most 3/4. Two keys whose 128-bit hashes collide would make the
// cleaner drop the older one's latest record; the seeds are drawn per map,
// so no input can aim for that, and by chance it takes about 2^64 keys.
type offsetMap struct {
	slots          []mapSlot
	used, capacity int
	seed1, seed2   maphash.Seed
}

type mapSlot struct {
	h1, h2 uint64
	offset int64 // offset + 1; 0: the slot is free
}

const mapSlotSize = 24

// minDedupeBufferBytes is the smallest memory a cleaning pass uses for its
// offset map.
const minDedupeBufferBytes = 64 << 10

func newOffsetMap(bufferBytes int) *offsetMap {
	n := max(bufferBytes, minDedupeBufferBytes) / mapSlotSize
	return &offsetMap{slots: make([]mapSlot, n), capacity: n * 3 / 4,
		seed1: maphash.MakeSeed(), seed2: maphash.MakeSeed()}
}

// room reports whether n more keys fit.
func (m *offsetMap) room(n int) bool { return m.used+n <= m.capacity }

func (m *offsetMap) hash(key []byte) (uint64, uint64) {
	return maphash.Bytes(m.seed1, key), maphash.Bytes(m.seed2, key)
}

// put records offset as key's latest; the caller checked room.
func (m *offsetMap) put(key []byte, offset int64) {
	h1, h2 := m.hash(key)
	n := uint64(len(m.slots))
	for i := h1 % n; ; i = (i + 1) % n {
		s := &m.slots[i]
		if s.offset == 0 {
			*s = mapSlot{h1: h1, h2: h2, offset: offset + 1}
			m.used++
			return
		}
		if s.h1 == h1 && s.h2 == h2 {
			s.offset = offset + 1
			return
		}
	}
}

// get returns key's latest offset, ok false when the map does not have it.
func (m *offsetMap) get(key []byte) (int64, bool) {
	h1, h2 := m.hash(key)
	n := uint64(len(m.slots))
	for i := h1 % n; ; i = (i + 1) % n {
		s := &m.slots[i]
		if s.offset == 0 {
			return 0, false
		}
		if s.h1 == h1 && s.h2 == h2 {
			return s.offset - 1, true
		}
	}
}
