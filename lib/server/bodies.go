package server

import (
	"sync"

	"github.com/twmb/franz-go/pkg/kmsg"
)

// The API keys of produce and fetch requests.
const (
	produceKey = 0
	fetchKey   = 1
)

// Decoded bodies of the two requests on the hot paths, produce and fetch,
// are reused once their handler has recycled them (Request.Recycle), as
// their frames are: decoding into an old body reuses its topic slice, and
// decoding unsafe (strings pointing into the pooled frame) spares a copy
// of every topic name.
var (
	producePool = sync.Pool{New: func() any { return new(kmsg.ProduceRequest) }}
	fetchPool   = sync.Pool{New: func() any { return new(kmsg.FetchRequest) }}
)

// newBody returns an empty body for key at version to decode into: a
// reused one when reuse is set and key is produce or fetch, else a new one
// (from kmsg, or from newRequest for keys kmsg does not know).
// A reused body keeps only its slices' capacity, so fields that the
// version does not carry are zero; decoding sets the defaults.
func newBody(key, version int16, reuse bool, newRequest func(int16) kmsg.Request) kmsg.Request {
	var body kmsg.Request
	switch {
	case reuse && key == produceKey:
		r := producePool.Get().(*kmsg.ProduceRequest)
		*r = kmsg.ProduceRequest{Topics: r.Topics[:0]}
		body = r
	case reuse && key == fetchKey:
		r := fetchPool.Get().(*kmsg.FetchRequest)
		*r = kmsg.FetchRequest{Topics: r.Topics[:0], ForgottenTopics: r.ForgottenTopics[:0]}
		body = r
	default:
		body = newRequest(key)
	}
	body.SetVersion(version)
	return body
}

// requestMaker returns the function making empty requests for h: kmsg's,
// then h's own when it has some (RequestMaker).
func requestMaker(h Handler) func(int16) kmsg.Request {
	rm, ok := h.(RequestMaker)
	if !ok {
		return kmsg.RequestForKey
	}
	return func(key int16) kmsg.Request {
		if r := kmsg.RequestForKey(key); r != nil {
			return r
		}
		return rm.NewRequest(key)
	}
}

// putBody returns a recycled request's body to its pool, if it has one.
// Its topics are cleared first, up to the slices' capacity: their records
// and (decoded unsafe) names point into the request's frame, and a pooled
// body must not keep a frame the server has given back (a large one would
// stay in memory, outside the request budget). Decoding does not reuse
// what they hold anyway: kmsg zeroes each element it decodes into.
func putBody(body kmsg.Request) {
	switch r := body.(type) {
	case *kmsg.ProduceRequest:
		clear(r.Topics[:cap(r.Topics)])
		producePool.Put(r)
	case *kmsg.FetchRequest:
		clear(r.Topics[:cap(r.Topics)])
		clear(r.ForgottenTopics[:cap(r.ForgottenTopics)])
		fetchPool.Put(r)
	}
}

// decodeBody decodes a request body; unsafe leaves its strings pointing
// into b, which only a recycled frame may allow.
func decodeBody(body kmsg.Request, b []byte, unsafe bool) error {
	if u, ok := body.(kmsg.UnsafeReadFrom); ok && unsafe {
		return u.UnsafeReadFrom(b)
	}
	return body.ReadFrom(b)
}
