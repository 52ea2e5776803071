package log

import "hash/maphash"

// offsetMap maps record keys to the offset of their latest record, in a
// bounded amount of memory: an open-addressing table of 24-byte slots (a
// 128-bit hash of the key from two random seeds, and the offset), filled
// to at most 3/4. It starts small and doubles as keys come, up to 2/3 of
// the limit, so that the old and the new table fit in it together while
// it grows: it holds limit/48 keys at most, and a pass over few keys does
// not pay for a large buffer. Two keys whose 128-bit hashes collide would
// make the cleaner drop the older one's latest record; the seeds are drawn
// per map, so no input can aim for that, and by chance it takes about
// 2^64 keys.
type offsetMap struct {
	slots          []mapSlot
	used, capacity int
	maxSlots       int // the size the table grows to at most
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
	m := &offsetMap{maxSlots: max(bufferBytes, minDedupeBufferBytes) / mapSlotSize * 2 / 3,
		seed1: maphash.MakeSeed(), seed2: maphash.MakeSeed()}
	// Start at the largest size that doubles exactly to maxSlots (give
	// or take rounding) within minDedupeBufferBytes.
	n := m.maxSlots
	for n > minDedupeBufferBytes/mapSlotSize {
		n = (n + 1) / 2
	}
	m.resize(n)
	return m
}

func (m *offsetMap) resize(n int) {
	old := m.slots
	m.slots, m.used, m.capacity = make([]mapSlot, n), 0, n*3/4
	for i := range old {
		if s := old[i]; s.offset != 0 {
			m.insert(s.h1, s.h2, s.offset)
		}
	}
}

// maxKeys is how many keys the map can hold at most.
func (m *offsetMap) maxKeys() int { return m.maxSlots * 3 / 4 }

// room reports whether n more keys fit, growing the table when needed.
func (m *offsetMap) room(n int) bool {
	for m.used+n > m.capacity {
		if len(m.slots) >= m.maxSlots {
			return false
		}
		m.resize(min(2*len(m.slots), m.maxSlots))
	}
	return true
}

func (m *offsetMap) hash(key []byte) (uint64, uint64) {
	return maphash.Bytes(m.seed1, key), maphash.Bytes(m.seed2, key)
}

// put records offset as key's latest; the caller checked room.
func (m *offsetMap) put(key []byte, offset int64) {
	h1, h2 := m.hash(key)
	m.insert(h1, h2, offset+1)
}

func (m *offsetMap) insert(h1, h2 uint64, stored int64) {
	n := uint64(len(m.slots))
	for i := h1 % n; ; i = (i + 1) % n {
		s := &m.slots[i]
		if s.offset == 0 {
			*s = mapSlot{h1: h1, h2: h2, offset: stored}
			m.used++
			return
		}
		if s.h1 == h1 && s.h2 == h2 {
			s.offset = stored
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
