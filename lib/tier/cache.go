package tier

import (
	"container/list"
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"sync"
)

// Ranger reads byte ranges of objects; the store type of lib/tier
// implements it. Safe for concurrent use.
type Ranger interface {
	// ReadRange returns n bytes of object key from offset off (fewer only
	// at the object's end).
	ReadRange(ctx context.Context, key string, off, n int64) ([]byte, error)
}

const (
	// DefaultChunkBytes is the size of one ranged GET. Against S3 a GET
	// pays a first-byte latency of tens of milliseconds and then streams
	// at 50–100 MB/s per connection: at 4 MiB the latency is a third of
	// the request or less, while a consumer that reads one batch at a
	// random offset fetches no more than 4 MiB it may not need. Larger
	// chunks (8–16 MiB, what S3's own guidance names for ranged reads)
	// would save requests but make every first read of a chunk wait
	// longer.
	DefaultChunkBytes = 4 << 20
	// DefaultReadAhead is how many chunks a sequential reader keeps in
	// flight ahead of itself. S3 scales by parallel connections, not by
	// one faster one: 8 GETs of 4 MiB (32 MiB in flight) keep a
	// replay at several hundred MB/s, eight connections' worth, while
	// one reader holds an eighth of the default cache.
	DefaultReadAhead = 8
	// DefaultCacheBytes bounds a cache whose CacheConfig.MaxBytes is zero:
	// the read-ahead windows of eight sequential readers at the defaults.
	DefaultCacheBytes = 256 << 20
)

// ErrClosed is returned by ReadAt on a closed Cache, and by the reads
// that were waiting for a GET when it closed.
var ErrClosed = errors.New("tier: cache closed")

// CacheConfig sets a Cache's bounds. The zero value takes the defaults.
type CacheConfig struct {
	MaxBytes   int64 // remote.log.reader.cache.bytes; 0: DefaultCacheBytes; raised to ChunkBytes when smaller
	ChunkBytes int64 // size of one ranged GET; 0: DefaultChunkBytes
	ReadAhead  int   // chunks fetched ahead, in parallel, once a reader reads sequentially; 0: DefaultReadAhead; negative: none
	Logger     *slog.Logger
}

// CacheStats counts what a Cache did since it was made, and what it holds.
type CacheStats struct {
	GETs          int64 // ranged GETs issued (read-ahead included)
	ReadAheadGETs int64 // of them, the ones read-ahead issued
	BytesFetched  int64 // bytes those GETs returned
	Hits          int64 // chunk reads served from a cached chunk
	Misses        int64 // chunk reads that waited for a GET, their own or one in flight
	Evictions     int64 // cached chunks dropped to make room
	Bytes         int64 // bytes held now: cached chunks and GETs in flight
	InFlight      int64 // GETs in flight now
}

// Cache is a bounded cache of fixed-size chunks of immutable remote
// objects. See the package documentation for its rules.
type Cache struct {
	r          Ranger
	log        *slog.Logger
	maxBytes   int64
	chunkBytes int64
	readAhead  int

	// ctx is the context of every GET: cancelled by Close, never by a
	// reader, so one reader's cancelled context fails no other reader.
	ctx    context.Context
	cancel context.CancelFunc
	gets   sync.WaitGroup // GET goroutines

	mu      sync.Mutex
	closed  bool
	objects map[string]*object
	lru     list.List     // cached chunks, most recently used at the front
	freed   chan struct{} // closed when room may have appeared; nil while nobody waits
	stats   CacheStats
}

// chunkID names chunk index of an object: the bytes from
// index*chunkBytes, chunkBytes of them or up to the object's end.
type chunkID struct {
	key   string
	index int64
}

// chunk is one chunk, loading or cached. Its fields are guarded by
// Cache.mu, except data and err, written once before done is closed and
// only read after.
type chunk struct {
	id   chunkID
	size int64         // bytes reserved for it: the chunk's length
	done chan struct{} // closed when its GET ended
	data []byte
	err  error

	fetched  bool          // the GET ended
	elem     *list.Element // in Cache.lru while cached
	pins     int           // readers copying from it or waiting for it
	read     bool          // a reader asked for it (read-ahead chunks start unread)
	gone     bool          // out of its object's map: evicted, forgotten, failed or closed
	released bool          // its bytes were given back
}

// object is what the cache knows of one object: its chunks, and where the
// recent reads of it ended, to tell a sequential reader.
type object struct {
	size   int64
	chunks map[int64]*chunk
	ends   [4]int64 // end offsets of recent reads; 0: none
	next   int      // the slot the next unmatched read takes
}

// NewCache returns a cache reading through r.
func NewCache(r Ranger, cfg CacheConfig) *Cache {
	if cfg.ChunkBytes <= 0 {
		cfg.ChunkBytes = DefaultChunkBytes
	}
	if cfg.MaxBytes <= 0 {
		cfg.MaxBytes = DefaultCacheBytes
	}
	if cfg.MaxBytes < cfg.ChunkBytes {
		cfg.MaxBytes = cfg.ChunkBytes
	}
	switch {
	case cfg.ReadAhead == 0:
		cfg.ReadAhead = DefaultReadAhead
	case cfg.ReadAhead < 0:
		cfg.ReadAhead = 0
	}
	logger := cfg.Logger
	if logger == nil {
		logger = slog.New(slog.DiscardHandler)
	}
	ctx, cancel := context.WithCancel(context.Background())
	return &Cache{
		r:          r,
		log:        logger,
		maxBytes:   cfg.MaxBytes,
		chunkBytes: cfg.ChunkBytes,
		readAhead:  cfg.ReadAhead,
		ctx:        ctx,
		cancel:     cancel,
		objects:    make(map[string]*object),
	}
}

// ReadAt reads from object key (whose size is size) at off into p, like
// io.ReaderAt: n < len(p) only with an error, io.EOF when p reaches past
// the object's end. ctx bounds this call's wait only: the GETs it starts
// or joins go on for the other readers and the cache.
func (c *Cache) ReadAt(ctx context.Context, key string, size int64, p []byte, off int64) (int, error) {
	if off < 0 {
		return 0, fmt.Errorf("tier: read %s at negative offset %d", key, off)
	}
	if off >= size {
		return 0, io.EOF
	}
	if len(p) == 0 {
		return 0, nil
	}
	end := off + int64(len(p))
	var eof error
	if end > size {
		end, eof = size, io.EOF
	}
	first, last := off/c.chunkBytes, (end-1)/c.chunkBytes

	c.mu.Lock()
	if c.closed {
		c.mu.Unlock()
		return 0, ErrClosed
	}
	o := c.object(key, size)
	ahead := last
	if o.sequential(off, end, c.chunkBytes) {
		ahead = min(last+int64(c.readAhead), (size-1)/c.chunkBytes)
	}
	c.mu.Unlock()

	n := 0
	for i := first; i <= last; i++ {
		ch, err := c.pin(ctx, key, size, i)
		if err != nil {
			c.tidy(key)
			return n, err
		}
		if i == first {
			// The rest of this read and the read-ahead window start now,
			// in parallel, after the chunk needed first.
			c.prefetch(key, size, first+1, ahead, last)
		}
		select {
		case <-ch.done:
		case <-ctx.Done():
			c.unpin(ch)
			return n, ctx.Err()
		}
		if ch.err != nil {
			c.unpin(ch)
			return n, ch.err
		}
		start := i * c.chunkBytes
		lo, hi := max(off, start)-start, min(end, start+ch.size)-start
		n += copy(p[n:], ch.data[lo:hi])
		c.unpin(ch)
	}
	return n, eof
}

// object returns key's object, made anew when it is unknown or the
// caller's size differs from the one its chunks were read with. Called
// with c.mu held.
func (c *Cache) object(key string, size int64) *object {
	o := c.objects[key]
	if o != nil && o.size != size {
		c.forget(key)
		o = nil
	}
	if o == nil {
		o = &object{size: size, chunks: make(map[int64]*chunk)}
		c.objects[key] = o
	}
	return o
}

// tidy drops key's object when it holds no chunk: a read that gave up
// before its first chunk leaves nothing behind.
func (c *Cache) tidy(key string) {
	c.mu.Lock()
	if o := c.objects[key]; o != nil && len(o.chunks) == 0 {
		delete(c.objects, key)
	}
	c.mu.Unlock()
}

// sequential records a read of [off, end) and says whether it continues
// one of the recent reads (starts within a chunk of where one ended), or
// starts the object: a replay reads each object from its start.
func (o *object) sequential(off, end, chunkBytes int64) bool {
	for i, e := range o.ends {
		if e > 0 && off >= e-chunkBytes && off <= e+chunkBytes {
			o.ends[i] = end
			return true
		}
	}
	o.ends[o.next] = end
	o.next = (o.next + 1) % len(o.ends)
	return off == 0
}

// pin returns chunk index of key, cached or loading, pinned for the
// caller, who unpins it. When the chunk needs a GET and the cache has no
// room, pin waits for room: GETs in flight end and pinned chunks are
// unpinned, so the wait ends.
func (c *Cache) pin(ctx context.Context, key string, size, index int64) (*chunk, error) {
	for {
		c.mu.Lock()
		if c.closed {
			c.mu.Unlock()
			return nil, ErrClosed
		}
		o := c.object(key, size)
		if ch := o.chunks[index]; ch != nil {
			ch.pins++
			ch.read = true
			if ch.elem != nil {
				c.lru.MoveToFront(ch.elem)
				c.stats.Hits++
			} else {
				c.stats.Misses++
			}
			c.mu.Unlock()
			return ch, nil
		}
		if ch := c.start(o, key, index, true); ch != nil {
			ch.pins++
			ch.read = true
			c.stats.Misses++
			c.mu.Unlock()
			return ch, nil
		}
		if c.freed == nil {
			c.freed = make(chan struct{})
		}
		freed := c.freed
		c.mu.Unlock()
		select {
		case <-freed:
		case <-ctx.Done():
			return nil, ctx.Err()
		case <-c.ctx.Done():
			return nil, ErrClosed
		}
	}
}

// prefetch starts GETs for the chunks from..to of key that are neither
// cached nor loading, in order, while there is room without evicting a
// chunk nobody read yet. Chunks up to demand are this read's own: they
// start as read, so other read-ahead does not evict them first.
func (c *Cache) prefetch(key string, size, from, to, demand int64) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.closed {
		return
	}
	o := c.object(key, size)
	for i := from; i <= to; i++ {
		if o.chunks[i] != nil {
			continue
		}
		ch := c.start(o, key, i, i <= demand)
		if ch == nil {
			return
		}
		if i <= demand {
			ch.read = true
		} else {
			c.stats.ReadAheadGETs++
		}
	}
}

// start reserves room for chunk index of o and starts its GET, or
// returns nil when there is no room. A demand read may evict any cached
// chunk nobody is copying from; read-ahead only the ones already read.
// Called with c.mu held.
func (c *Cache) start(o *object, key string, index int64, demand bool) *chunk {
	off := index * c.chunkBytes
	size := min(c.chunkBytes, o.size-off)
	for c.stats.Bytes+size > c.maxBytes {
		victim := c.victim(demand)
		if victim == nil {
			return nil
		}
		c.stats.Evictions++
		c.drop(victim)
	}
	// Evicting o's last chunk took o out of the map: it is in use again.
	c.objects[key] = o
	c.stats.Bytes += size
	c.stats.GETs++
	c.stats.InFlight++
	ch := &chunk{id: chunkID{key, index}, size: size, done: make(chan struct{})}
	o.chunks[index] = ch
	c.gets.Add(1)
	go c.fetch(ch, off)
	return ch
}

// victim returns the least recently used cached chunk that may be
// evicted, or nil. Called with c.mu held.
func (c *Cache) victim(demand bool) *chunk {
	for e := c.lru.Back(); e != nil; e = e.Prev() {
		ch := e.Value.(*chunk)
		if ch.pins == 0 && (demand || ch.read) {
			return ch
		}
	}
	return nil
}

// fetch runs one chunk's GET, on a goroutine of its own.
func (c *Cache) fetch(ch *chunk, off int64) {
	defer c.gets.Done()
	data, err := c.r.ReadRange(c.ctx, ch.id.key, off, ch.size)
	switch {
	case err == nil && int64(len(data)) != ch.size:
		err = fmt.Errorf("tier: read %s at %d: %d bytes, want %d: %w", ch.id.key, off, len(data), ch.size, io.ErrUnexpectedEOF)
	case err != nil && c.ctx.Err() != nil:
		err = ErrClosed
	case err != nil:
		err = fmt.Errorf("tier: read %s at %d: %w", ch.id.key, off, err)
	}

	c.mu.Lock()
	c.stats.InFlight--
	ch.fetched = true
	if err == nil {
		ch.data = data
		c.stats.BytesFetched += int64(len(data))
	} else {
		ch.err = err
	}
	switch {
	case ch.gone:
		c.release(ch)
	case err != nil:
		if !ch.read && !errors.Is(err, ErrClosed) {
			c.log.Warn("tier: read-ahead failed", "key", ch.id.key, "offset", off, "err", err)
		}
		c.drop(ch) // the next reader tries again
	default:
		ch.elem = c.lru.PushFront(ch)
		c.signal() // unpinned, it may be evicted
	}
	c.mu.Unlock()
	close(ch.done)
}

// unpin ends a reader's use of ch.
func (c *Cache) unpin(ch *chunk) {
	c.mu.Lock()
	ch.pins--
	if ch.pins == 0 {
		c.release(ch)
		c.signal()
	}
	c.mu.Unlock()
}

// drop takes ch out of the cache; its bytes are given back once its GET
// ended and no reader holds it. Called with c.mu held.
func (c *Cache) drop(ch *chunk) {
	if ch.gone {
		return
	}
	ch.gone = true
	if o := c.objects[ch.id.key]; o != nil && o.chunks[ch.id.index] == ch {
		delete(o.chunks, ch.id.index)
		if len(o.chunks) == 0 {
			delete(c.objects, ch.id.key)
		}
	}
	if ch.elem != nil {
		c.lru.Remove(ch.elem)
		ch.elem = nil
	}
	c.release(ch)
}

// release gives ch's bytes back when it is gone, fetched and unpinned.
// Called with c.mu held.
func (c *Cache) release(ch *chunk) {
	if !ch.gone || !ch.fetched || ch.pins > 0 || ch.released {
		return
	}
	ch.released = true
	c.stats.Bytes -= ch.size
	c.signal()
}

// signal wakes the reads waiting for room. Called with c.mu held.
func (c *Cache) signal() {
	if c.freed != nil {
		close(c.freed)
		c.freed = nil
	}
}

// Forget drops the chunks of object key: it was deleted. A GET of it in
// flight ends for the readers waiting on it and is not kept.
func (c *Cache) Forget(key string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.forget(key)
}

// forget is Forget with c.mu held.
func (c *Cache) forget(key string) {
	o := c.objects[key]
	if o == nil {
		return
	}
	for _, ch := range o.chunks {
		c.drop(ch)
	}
	delete(c.objects, key)
}

// Stats returns the counters and what the cache holds now.
func (c *Cache) Stats() CacheStats {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.stats
}

// Close cancels the GETs in flight, waits for them to return, and drops
// every chunk. Reads waiting for a GET get ErrClosed, and so does every
// later ReadAt. Close may be called more than once.
func (c *Cache) Close() {
	c.mu.Lock()
	c.closed = true
	c.cancel()
	c.mu.Unlock()
	c.gets.Wait()
	c.mu.Lock()
	for key := range c.objects {
		c.forget(key)
	}
	c.mu.Unlock()
}
