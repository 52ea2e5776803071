package tier

import (
	"bytes"
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"math/rand/v2"
	"sync"
	"testing"
	"time"

	"github.com/mqproject/mq/lib/mqtest"
)

var seed = flag.Uint64("seed", 0, "seed of TestCacheRandomized (0: a new one)")

// errInjected is the error TestCacheRandomized's store fails with.
var errInjected = errors.New("injected store error")

// fakeStore is a Ranger over objects in memory that counts its GETs and
// can be slowed, held or made to fail.
type fakeStore struct {
	objects map[string][]byte

	// latency is how long each GET takes: a store's round trip.
	latency time.Duration
	// hold, when set, makes each GET wait for it to be closed (or for its
	// context).
	hold chan struct{}
	// fail, when set, says whether a GET fails.
	fail func(key string, off int64) error
	// check, when set, runs at the start of each GET.
	check func()

	mu          sync.Mutex
	gets        int
	inFlight    int
	maxInFlight int
	cancelled   int // GETs that returned because their context ended
	ranges      []string
}

func newFakeStore(objects map[string][]byte) *fakeStore {
	return &fakeStore{objects: objects}
}

func (s *fakeStore) ReadRange(ctx context.Context, key string, off, n int64) ([]byte, error) {
	if s.check != nil {
		s.check()
	}
	s.mu.Lock()
	s.gets++
	s.inFlight++
	s.maxInFlight = max(s.maxInFlight, s.inFlight)
	s.ranges = append(s.ranges, fmt.Sprintf("%s@%d+%d", key, off, n))
	s.mu.Unlock()
	defer func() {
		s.mu.Lock()
		s.inFlight--
		s.mu.Unlock()
	}()
	cancelled := func() ([]byte, error) {
		s.mu.Lock()
		s.cancelled++
		s.mu.Unlock()
		return nil, ctx.Err()
	}
	if s.hold != nil {
		select {
		case <-s.hold:
		case <-ctx.Done():
			return cancelled()
		}
	}
	if s.latency > 0 {
		t := time.NewTimer(s.latency)
		select {
		case <-t.C:
		case <-ctx.Done():
			t.Stop()
			return cancelled()
		}
	}
	if s.fail != nil {
		if err := s.fail(key, off); err != nil {
			return nil, err
		}
	}
	obj, ok := s.objects[key]
	if !ok {
		return nil, fmt.Errorf("no object %q", key)
	}
	if off > int64(len(obj)) {
		return nil, fmt.Errorf("offset %d past %q's end %d", off, key, len(obj))
	}
	end := min(off+n, int64(len(obj)))
	return bytes.Clone(obj[off:end]), nil
}

func (s *fakeStore) counts() (gets, maxInFlight int) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.gets, s.maxInFlight
}

func randomBytes(r *rand.Rand, n int) []byte {
	b := make([]byte, n)
	for i := range b {
		b[i] = byte(r.Uint32())
	}
	return b
}

// checkInvariants checks the cache's bookkeeping: every cached chunk is in
// its object's map and the LRU list once, the bytes counted cover every
// chunk held, and they are within the bound.
func checkInvariants(t testing.TB, c *Cache) {
	t.Helper()
	c.mu.Lock()
	defer c.mu.Unlock()
	var held, inFlight int64
	for key, o := range c.objects {
		for i, ch := range o.chunks {
			if ch.id != (chunkID{key, i}) || ch.gone || ch.released {
				t.Errorf("chunk %v in %q's map at %d: gone %v released %v", ch.id, key, i, ch.gone, ch.released)
				return
			}
			if (ch.elem != nil) != ch.fetched {
				t.Errorf("chunk %v: fetched %v, in the LRU %v", ch.id, ch.fetched, ch.elem != nil)
				return
			}
			if !ch.fetched {
				inFlight++
			}
			held += ch.size
		}
	}
	for e := c.lru.Front(); e != nil; e = e.Next() {
		ch := e.Value.(*chunk)
		if c.objects[ch.id.key] == nil || c.objects[ch.id.key].chunks[ch.id.index] != ch {
			t.Errorf("chunk %v in the LRU but not in its object's map", ch.id)
			return
		}
	}
	if held > c.stats.Bytes || c.stats.Bytes > c.maxBytes {
		t.Errorf("chunks hold %d bytes, counted %d, bound %d", held, c.stats.Bytes, c.maxBytes)
		return
	}
	if inFlight > c.stats.InFlight {
		t.Errorf("%d chunks loading, %d GETs counted in flight", inFlight, c.stats.InFlight)
		return
	}
}

func TestCacheReadAtReturnsTheObjectsBytes(t *testing.T) {
	r := rand.New(rand.NewPCG(1, 2))
	const size = 10*1000 + 7 // chunks of 1000, the last one short
	obj := randomBytes(r, size)
	for _, tc := range []struct {
		name    string
		off     int64
		len     int
		wantN   int
		wantErr error
	}{
		{"first bytes", 0, 10, 10, nil},
		{"one whole chunk", 1000, 1000, 1000, nil},
		{"across a boundary", 990, 20, 20, nil},
		{"across three chunks", 999, 2002, 2002, nil},
		{"the short last chunk", 10000, 7, 7, nil},
		{"up to the end exactly", 9000, 1007, 1007, nil},
		{"past the end", 9990, 100, 17, io.EOF},
		{"all of it and more", 0, size + 5, size, io.EOF},
		{"at the end", size, 1, 0, io.EOF},
		{"beyond the end", size + 100, 1, 0, io.EOF},
		{"empty", 500, 0, 0, nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			store := newFakeStore(map[string][]byte{"seg": obj})
			c := NewCache(store, CacheConfig{MaxBytes: 4000, ChunkBytes: 1000, ReadAhead: 2})
			defer c.Close()
			p := make([]byte, tc.len)
			n, err := c.ReadAt(context.Background(), "seg", size, p, tc.off)
			if n != tc.wantN || err != tc.wantErr {
				t.Fatalf("ReadAt(%d, %d) = %d, %v; want %d, %v", tc.off, tc.len, n, err, tc.wantN, tc.wantErr)
			}
			if !bytes.Equal(p[:n], obj[min(tc.off, size):min(tc.off, size)+int64(n)]) {
				t.Fatalf("ReadAt(%d, %d): bytes differ from the object's", tc.off, tc.len)
			}
			checkInvariants(t, c)
		})
	}
	t.Run("negative offset", func(t *testing.T) {
		c := NewCache(newFakeStore(map[string][]byte{"seg": obj}), CacheConfig{ChunkBytes: 1000})
		defer c.Close()
		if n, err := c.ReadAt(context.Background(), "seg", size, make([]byte, 1), -1); n != 0 || err == nil {
			t.Fatalf("ReadAt(-1) = %d, %v; want an error", n, err)
		}
	})
}

func TestCacheEvictsTheLeastRecentlyUsedChunk(t *testing.T) {
	obj := randomBytes(rand.New(rand.NewPCG(3, 4)), 10*100)
	for _, tc := range []struct {
		name     string
		reads    []int64 // chunk indexes read in turn, one byte each, in a cache of 3 chunks
		wantGETs int
	}{
		{"hits cost nothing", []int64{0, 1, 2, 0, 1, 2}, 3},
		{"the fourth evicts the first", []int64{0, 1, 2, 3, 0}, 5},
		{"a read refreshes a chunk", []int64{0, 1, 2, 0, 3, 0}, 4},
		{"the refreshed one stays, the next oldest goes", []int64{0, 1, 2, 0, 3, 1}, 5},
		{"cycling one more than fits misses every time", []int64{0, 1, 2, 3, 0, 1, 2, 3}, 8},
	} {
		t.Run(tc.name, func(t *testing.T) {
			store := newFakeStore(map[string][]byte{"seg": obj})
			// Read-ahead off: only the reads decide what is fetched.
			c := NewCache(store, CacheConfig{MaxBytes: 300, ChunkBytes: 100, ReadAhead: -1})
			defer c.Close()
			for _, i := range tc.reads {
				p := make([]byte, 1)
				// The middle of the chunk: never "sequential".
				if _, err := c.ReadAt(context.Background(), "seg", int64(len(obj)), p, i*100+50); err != nil {
					t.Fatal(err)
				}
				if p[0] != obj[i*100+50] {
					t.Fatalf("chunk %d: wrong byte", i)
				}
				checkInvariants(t, c)
			}
			if gets, _ := store.counts(); gets != tc.wantGETs {
				t.Fatalf("%d GETs (%v), want %d", gets, store.ranges, tc.wantGETs)
			}
			st := c.Stats()
			if st.Hits+st.Misses != int64(len(tc.reads)) || st.Misses != int64(tc.wantGETs) || st.Bytes > 300 {
				t.Fatalf("stats %+v after %d reads and %d GETs", st, len(tc.reads), tc.wantGETs)
			}
		})
	}
}

func TestCacheReadersOfALoadingChunkShareOneGET(t *testing.T) {
	obj := randomBytes(rand.New(rand.NewPCG(5, 6)), 1000)
	store := newFakeStore(map[string][]byte{"seg": obj})
	store.hold = make(chan struct{})
	c := NewCache(store, CacheConfig{ChunkBytes: 1000, MaxBytes: 1000})
	defer c.Close()

	const readers = 8
	var wg sync.WaitGroup
	errs := make(chan error, readers)
	for i := range readers {
		wg.Go(func() {
			p := make([]byte, 10)
			off := int64(100 * i)
			if _, err := c.ReadAt(context.Background(), "seg", 1000, p, off); err != nil {
				errs <- err
			} else if !bytes.Equal(p, obj[off:off+10]) {
				errs <- fmt.Errorf("reader %d: wrong bytes", i)
			}
		})
	}
	mqtest.WaitFor(t, "every reader waiting for the chunk", func() (bool, string) {
		st := c.Stats()
		return st.Misses == readers, fmt.Sprintf("%+v", st)
	})
	close(store.hold)
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
	if gets, _ := store.counts(); gets != 1 {
		t.Fatalf("%d GETs for one chunk read by %d readers at once, want 1", gets, readers)
	}
}

func TestCacheCancelledReaderDoesNotFailTheOthers(t *testing.T) {
	obj := randomBytes(rand.New(rand.NewPCG(7, 8)), 1000)
	store := newFakeStore(map[string][]byte{"seg": obj})
	store.hold = make(chan struct{})
	c := NewCache(store, CacheConfig{ChunkBytes: 1000})
	defer c.Close()

	ctx, cancel := context.WithCancel(context.Background())
	first := make(chan error, 1)
	go func() {
		_, err := c.ReadAt(ctx, "seg", 1000, make([]byte, 10), 0)
		first <- err
	}()
	mqtest.WaitFor(t, "the first reader's GET", func() (bool, string) {
		gets, _ := store.counts()
		return gets == 1, fmt.Sprint(gets, " GETs")
	})
	second := make(chan error, 1)
	p := make([]byte, 10)
	go func() {
		_, err := c.ReadAt(context.Background(), "seg", 1000, p, 500)
		second <- err
	}()
	mqtest.WaitFor(t, "the second reader joining the GET", func() (bool, string) {
		st := c.Stats()
		return st.Misses == 2, fmt.Sprintf("%+v", st)
	})
	cancel()
	if err := <-first; !errors.Is(err, context.Canceled) {
		t.Fatalf("cancelled reader: %v, want context.Canceled", err)
	}
	close(store.hold)
	if err := <-second; err != nil {
		t.Fatalf("the other reader: %v", err)
	}
	if !bytes.Equal(p, obj[500:510]) {
		t.Fatal("the other reader: wrong bytes")
	}
	if gets, _ := store.counts(); gets != 1 {
		t.Fatalf("%d GETs, want 1: the cancelled reader's GET serves the other", gets)
	}
	checkInvariants(t, c)
}

func TestCacheFailedGETIsNotKept(t *testing.T) {
	obj := randomBytes(rand.New(rand.NewPCG(9, 10)), 1000)
	store := newFakeStore(map[string][]byte{"seg": obj})
	var mu sync.Mutex
	failures := 1
	errStore := errors.New("store unavailable")
	store.fail = func(string, int64) error {
		mu.Lock()
		defer mu.Unlock()
		if failures > 0 {
			failures--
			return errStore
		}
		return nil
	}
	c := NewCache(store, CacheConfig{ChunkBytes: 1000})
	defer c.Close()
	p := make([]byte, 10)
	if _, err := c.ReadAt(context.Background(), "seg", 1000, p, 0); !errors.Is(err, errStore) {
		t.Fatalf("first read: %v, want the store's error", err)
	}
	checkInvariants(t, c)
	if st := c.Stats(); st.Bytes != 0 {
		t.Fatalf("a failed GET still holds %d bytes", st.Bytes)
	}
	if _, err := c.ReadAt(context.Background(), "seg", 1000, p, 0); err != nil {
		t.Fatalf("second read: %v", err)
	}
	if !bytes.Equal(p, obj[:10]) {
		t.Fatal("second read: wrong bytes")
	}
	if gets, _ := store.counts(); gets != 2 {
		t.Fatalf("%d GETs, want 2: the second read tries again", gets)
	}
}

func TestCacheShortGETIsAnError(t *testing.T) {
	obj := randomBytes(rand.New(rand.NewPCG(11, 12)), 1000)
	c := NewCache(newFakeStore(map[string][]byte{"seg": obj}), CacheConfig{ChunkBytes: 1000})
	defer c.Close()
	// The caller says the object is longer than the store has it.
	_, err := c.ReadAt(context.Background(), "seg", 1500, make([]byte, 10), 1200)
	if !errors.Is(err, io.ErrUnexpectedEOF) {
		t.Fatalf("read of a chunk the store returns short: %v, want io.ErrUnexpectedEOF", err)
	}
}

func TestCacheSlowStoreDoesNotBlockCachedReads(t *testing.T) {
	obj := randomBytes(rand.New(rand.NewPCG(13, 14)), 10*1000)
	store := newFakeStore(map[string][]byte{"seg": obj})
	c := NewCache(store, CacheConfig{ChunkBytes: 1000, MaxBytes: 4000, ReadAhead: -1})
	defer c.Close()
	p := make([]byte, 10)
	if _, err := c.ReadAt(context.Background(), "seg", 10000, p, 5); err != nil {
		t.Fatal(err)
	}
	// From now on the store answers nothing until the end of the test.
	store.mu.Lock()
	store.hold = make(chan struct{})
	store.mu.Unlock()
	defer close(store.hold)
	blocked := make(chan error, 3)
	for _, off := range []int64{3005, 5005, 7005} {
		go func() {
			_, err := c.ReadAt(context.Background(), "seg", 10000, make([]byte, 10), off)
			blocked <- err
		}()
	}
	mqtest.WaitFor(t, "three GETs held by the store", func() (bool, string) {
		st := c.Stats()
		return st.InFlight == 3, fmt.Sprintf("%+v", st)
	})
	for range 100 {
		if _, err := c.ReadAt(context.Background(), "seg", 10000, p, 10); err != nil {
			t.Fatal(err)
		}
	}
	if !bytes.Equal(p, obj[10:20]) {
		t.Fatal("wrong bytes")
	}
	select {
	case err := <-blocked:
		t.Fatalf("a read of a held chunk returned: %v", err)
	default:
	}
}

func TestCacheReadWaitsForRoomAndGivesUpWithItsContext(t *testing.T) {
	obj := randomBytes(rand.New(rand.NewPCG(15, 16)), 3*1000)
	store := newFakeStore(map[string][]byte{"seg": obj})
	store.hold = make(chan struct{})
	c := NewCache(store, CacheConfig{ChunkBytes: 1000, MaxBytes: 1000, ReadAhead: -1})
	defer c.Close()
	// The first read's GET holds all the room.
	first := make(chan error, 1)
	go func() {
		_, err := c.ReadAt(context.Background(), "seg", 3000, make([]byte, 10), 500)
		first <- err
	}()
	mqtest.WaitFor(t, "the first GET", func() (bool, string) {
		st := c.Stats()
		return st.InFlight == 1, fmt.Sprintf("%+v", st)
	})
	ctx, cancel := context.WithCancel(context.Background())
	gaveUp := make(chan error, 1)
	go func() {
		_, err := c.ReadAt(ctx, "seg", 3000, make([]byte, 10), 1500)
		gaveUp <- err
	}()
	p := make([]byte, 10)
	waited := make(chan error, 1)
	go func() {
		_, err := c.ReadAt(context.Background(), "seg", 3000, p, 2500)
		waited <- err
	}()
	cancel()
	if err := <-gaveUp; !errors.Is(err, context.Canceled) {
		t.Fatalf("reader waiting for room, cancelled: %v", err)
	}
	if st := c.Stats(); st.GETs != 1 || st.Bytes > 1000 {
		t.Fatalf("stats %+v: a GET started without room", st)
	}
	close(store.hold)
	if err := <-first; err != nil {
		t.Fatal(err)
	}
	if err := <-waited; err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(p, obj[2500:2510]) {
		t.Fatal("wrong bytes")
	}
	checkInvariants(t, c)
}

func TestCacheReadThatGivesUpLeavesNothing(t *testing.T) {
	obj := randomBytes(rand.New(rand.NewPCG(31, 32)), 2000)
	store := newFakeStore(map[string][]byte{"a": obj, "b": obj})
	store.hold = make(chan struct{})
	c := NewCache(store, CacheConfig{ChunkBytes: 1000, MaxBytes: 1000, ReadAhead: -1})
	defer c.Close()
	held := make(chan error, 1)
	go func() {
		_, err := c.ReadAt(context.Background(), "a", 2000, make([]byte, 10), 500)
		held <- err
	}()
	mqtest.WaitFor(t, "a's GET", func() (bool, string) {
		st := c.Stats()
		return st.InFlight == 1, fmt.Sprintf("%+v", st)
	})
	// No room for b's chunk: the read waits, then gives up.
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if _, err := c.ReadAt(ctx, "b", 2000, make([]byte, 10), 500); !errors.Is(err, context.Canceled) {
		t.Fatalf("read without room, cancelled: %v", err)
	}
	c.mu.Lock()
	_, kept := c.objects["b"]
	c.mu.Unlock()
	if kept {
		t.Fatal("a read that fetched nothing left its object in the cache")
	}
	close(store.hold)
	if err := <-held; err != nil {
		t.Fatal(err)
	}
}

func TestCacheSequentialReaderOverlapsOneGETPerChunk(t *testing.T) {
	const (
		chunkBytes = 64 << 10
		chunks     = 64
		readBytes  = 16 << 10 // four reads per chunk, like fetches smaller than a chunk
	)
	obj := randomBytes(rand.New(rand.NewPCG(17, 18)), chunks*chunkBytes)
	store := newFakeStore(map[string][]byte{"seg": obj})
	store.latency = 2 * time.Millisecond // a store's round trip
	c := NewCache(store, CacheConfig{ChunkBytes: chunkBytes, MaxBytes: 16 * chunkBytes, ReadAhead: 6})
	defer c.Close()
	var got bytes.Buffer
	p := make([]byte, readBytes)
	for off := int64(0); off < int64(len(obj)); off += readBytes {
		n, err := c.ReadAt(context.Background(), "seg", int64(len(obj)), p, off)
		if err != nil {
			t.Fatal(err)
		}
		got.Write(p[:n])
	}
	if !bytes.Equal(got.Bytes(), obj) {
		t.Fatal("bytes read differ from the object's")
	}
	gets, maxInFlight := store.counts()
	st := c.Stats()
	t.Logf("%d chunks: %d GETs (%d read-ahead), at most %d in flight, %d hits, %d misses", chunks, gets, st.ReadAheadGETs, maxInFlight, st.Hits, st.Misses)
	if gets != chunks {
		t.Errorf("%d GETs for %d chunks read once each, want one per chunk", gets, chunks)
	}
	if maxInFlight < 2 {
		t.Errorf("at most %d GET in flight: read-ahead did not overlap GETs", maxInFlight)
	}
	if st.ReadAheadGETs < chunks-2 {
		t.Errorf("%d of %d GETs were read-ahead: the reader waited for chunks it could have had", st.ReadAheadGETs, chunks)
	}
	if st.Bytes > 16*chunkBytes {
		t.Errorf("holds %d bytes, bound %d", st.Bytes, 16*chunkBytes)
	}
}

func TestCacheReadAheadKeepsWithinTheBound(t *testing.T) {
	// A bound of 3 chunks and a read-ahead of 8: read-ahead takes only the
	// room there is, and the reader still gets every byte.
	obj := randomBytes(rand.New(rand.NewPCG(19, 20)), 20*1000)
	store := newFakeStore(map[string][]byte{"seg": obj})
	var c *Cache
	store.check = func() {
		if st := c.Stats(); st.Bytes > 3000 || st.InFlight > 3 {
			t.Errorf("in a GET: %+v, bound 3000 bytes", st)
		}
	}
	c = NewCache(store, CacheConfig{ChunkBytes: 1000, MaxBytes: 3000, ReadAhead: 8})
	defer c.Close()
	var got bytes.Buffer
	p := make([]byte, 300)
	for off := int64(0); off < int64(len(obj)); off += 300 {
		n, err := c.ReadAt(context.Background(), "seg", int64(len(obj)), p, off)
		if err != nil && err != io.EOF {
			t.Fatal(err)
		}
		got.Write(p[:n])
		checkInvariants(t, c)
	}
	if !bytes.Equal(got.Bytes(), obj) {
		t.Fatal("bytes read differ from the object's")
	}
	if gets, _ := store.counts(); gets != 20 {
		t.Fatalf("%d GETs for 20 chunks: read-ahead evicted chunks before they were read", gets)
	}
}

func TestCacheCloseCancelsReadAhead(t *testing.T) {
	obj := randomBytes(rand.New(rand.NewPCG(21, 22)), 20*1000)
	store := newFakeStore(map[string][]byte{"seg": obj})
	store.hold = make(chan struct{}) // never closed: only Close ends the GETs
	c := NewCache(store, CacheConfig{ChunkBytes: 1000, ReadAhead: 4})
	// A read at the object's start: its chunk and four more are fetched.
	waiting := make(chan error, 1)
	go func() {
		_, err := c.ReadAt(context.Background(), "seg", 20000, make([]byte, 10), 0)
		waiting <- err
	}()
	mqtest.WaitFor(t, "the read's GET and the read-ahead held by the store", func() (bool, string) {
		gets, _ := store.counts()
		return gets == 5, fmt.Sprintf("%d GETs, %+v", gets, c.Stats())
	})
	c.Close()
	if err := <-waiting; !errors.Is(err, ErrClosed) {
		t.Fatalf("reader waiting for its chunk at Close: %v, want ErrClosed", err)
	}
	st := c.Stats()
	store.mu.Lock()
	cancelled := store.cancelled
	store.mu.Unlock()
	if st.ReadAheadGETs != 4 || st.InFlight != 0 || st.Bytes != 0 || cancelled != 5 {
		t.Fatalf("after Close: %+v, %d GETs cancelled; want 4 read-ahead GETs, none in flight, nothing held, all 5 cancelled", st, cancelled)
	}
	if _, err := c.ReadAt(context.Background(), "seg", 20000, make([]byte, 10), 0); !errors.Is(err, ErrClosed) {
		t.Fatalf("ReadAt after Close: %v, want ErrClosed", err)
	}
	c.Close()
}

func TestCacheForgetDropsAnObjectsChunks(t *testing.T) {
	r := rand.New(rand.NewPCG(23, 24))
	old, replaced := randomBytes(r, 3000), randomBytes(r, 3000)
	store := newFakeStore(map[string][]byte{"seg": old, "other": old})
	c := NewCache(store, CacheConfig{ChunkBytes: 1000, ReadAhead: -1})
	defer c.Close()
	p := make([]byte, 3000)
	for _, key := range []string{"seg", "other"} {
		if _, err := c.ReadAt(context.Background(), key, 3000, p, 0); err != nil {
			t.Fatal(err)
		}
	}
	c.Forget("seg")
	checkInvariants(t, c)
	if st := c.Stats(); st.Bytes != 3000 {
		t.Fatalf("after Forget: %d bytes held, want the other object's 3000", st.Bytes)
	}
	// A key used again after its object was deleted reads the new object.
	store.objects["seg"] = replaced
	if _, err := c.ReadAt(context.Background(), "seg", 3000, p, 0); err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(p, replaced) {
		t.Fatal("read the forgotten object's bytes")
	}
}

// TestCacheRandomized runs readers of random shapes (sequential replays,
// random reads, reads that give up) against a store that fails now and
// then, with Forget and a small bound, and checks every byte returned and
// the bookkeeping. Replay a failure with -seed.
func TestCacheRandomized(t *testing.T) {
	s := *seed
	if s == 0 {
		s = rand.Uint64()
	}
	t.Logf("seed %d (replay with -seed=%d)", s, s)
	r := rand.New(rand.NewPCG(s, s))

	const chunkBytes = 512
	objects := map[string][]byte{}
	for i := range 6 {
		objects[fmt.Sprintf("obj-%d", i)] = randomBytes(r, 1+r.IntN(20*chunkBytes))
	}
	store := newFakeStore(objects)
	var failMu sync.Mutex
	failRand := rand.New(rand.NewPCG(s, s+1))
	store.fail = func(string, int64) error {
		failMu.Lock()
		defer failMu.Unlock()
		if failRand.IntN(20) == 0 {
			return errInjected
		}
		return nil
	}
	maxBytes := int64(chunkBytes * (2 + r.IntN(12)))
	var c *Cache
	store.check = func() {
		if st := c.Stats(); st.Bytes > maxBytes {
			t.Errorf("in a GET: %+v over the bound %d", st, maxBytes)
		}
	}
	c = NewCache(store, CacheConfig{MaxBytes: maxBytes, ChunkBytes: chunkBytes, ReadAhead: r.IntN(6) - 1})
	defer c.Close()
	keys := []string{"obj-0", "obj-1", "obj-2", "obj-3", "obj-4", "obj-5"}

	var wg sync.WaitGroup
	for w := range 6 {
		wr := rand.New(rand.NewPCG(s, uint64(w)+100))
		wg.Go(func() {
			for range 200 {
				if w == 0 {
					checkInvariants(t, c)
				}
				key := keys[wr.IntN(len(keys))]
				obj := objects[key]
				size := int64(len(obj))
				switch wr.IntN(10) {
				case 0:
					c.Forget(key)
					continue
				case 1, 2, 3, 4: // a sequential replay of part of the object
					off := wr.Int64N(size)
					step := 1 + wr.IntN(3*chunkBytes)
					for range 1 + wr.IntN(10) {
						if !readAndCheck(context.Background(), t, c, key, obj, off, step) {
							break
						}
						off += int64(step)
						if off >= size {
							break
						}
					}
				case 5: // a reader that gives up at once or soon
					ctx, cancel := context.WithCancel(context.Background())
					if wr.IntN(2) == 0 {
						cancel()
					} else {
						time.AfterFunc(time.Duration(wr.IntN(200))*time.Microsecond, cancel)
					}
					readAndCheck(ctx, t, c, key, obj, wr.Int64N(size+10), 1+wr.IntN(4*chunkBytes))
					cancel()
				default:
					readAndCheck(context.Background(), t, c, key, obj, wr.Int64N(size+10), 1+wr.IntN(4*chunkBytes))
				}
			}
		})
	}
	wg.Wait()
	checkInvariants(t, c)
	st := c.Stats()
	t.Logf("maxBytes %d: %+v", maxBytes, st)
	if st.InFlight == 0 && st.Bytes > maxBytes {
		t.Fatalf("holds %d bytes, bound %d", st.Bytes, maxBytes)
	}
	c.Close()
	if st := c.Stats(); st.Bytes != 0 || st.InFlight != 0 {
		t.Fatalf("after Close: %+v", st)
	}
}

// readAndCheck reads len bytes of key at off and checks what came back:
// the object's bytes, io.EOF exactly when the read reaches its end, and
// otherwise only the store's injected error or the reader's own context.
// It returns whether the read succeeded.
func readAndCheck(ctx context.Context, t *testing.T, c *Cache, key string, obj []byte, off int64, n int) bool {
	p := make([]byte, n)
	got, err := c.ReadAt(ctx, key, int64(len(obj)), p, off)
	size := int64(len(obj))
	if got > 0 && !bytes.Equal(p[:got], obj[off:off+int64(got)]) {
		t.Errorf("%s at %d+%d: bytes differ from the object's", key, off, got)
		return false
	}
	switch {
	case err == nil:
		if got != n {
			t.Errorf("%s at %d+%d: %d bytes and no error", key, off, n, got)
		}
		return true
	case err == io.EOF:
		if off+int64(n) <= size || got != int(max(0, size-off)) {
			t.Errorf("%s (size %d) at %d+%d: %d bytes, io.EOF", key, size, off, n, got)
		}
		return false
	case ctx.Err() != nil && errors.Is(err, ctx.Err()):
		return false
	case errors.Is(err, errInjected):
		return false
	default:
		t.Errorf("%s at %d+%d: %v", key, off, n, err)
		return false
	}
}

func TestCacheTellsSequentialReads(t *testing.T) {
	type read struct{ off, end int64 }
	for _, tc := range []struct {
		name  string
		reads []read // in a chunk size of 100
		want  []bool
	}{
		{"an object's start", []read{{0, 10}}, []bool{true}},
		{"elsewhere, first", []read{{500, 510}}, []bool{false}},
		{"the next read", []read{{500, 510}, {510, 520}}, []bool{false, true}},
		{"within a chunk past the end", []read{{500, 510}, {610, 620}}, []bool{false, true}},
		{"within a chunk before the end", []read{{500, 600}, {500, 600}}, []bool{false, true}},
		{"a jump", []read{{500, 510}, {611, 620}}, []bool{false, false}},
		{"two readers taking turns", []read{{100, 110}, {900, 910}, {110, 120}, {910, 920}}, []bool{false, false, true, true}},
		{"a fifth reader pushes out the first", []read{{1000, 1001}, {2000, 2001}, {3000, 3001}, {4000, 4001}, {5000, 5001}, {1001, 1002}, {5001, 5002}}, []bool{false, false, false, false, false, false, true}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var o object
			for i, r := range tc.reads {
				if got := o.sequential(r.off, r.end, 100); got != tc.want[i] {
					t.Fatalf("read %d [%d, %d): sequential %v, want %v", i, r.off, r.end, got, tc.want[i])
				}
			}
		})
	}
}
