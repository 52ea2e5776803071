package server

import (
	"context"
	"crypto/tls"
	"net"
	"os"

	"github.com/twmb/franz-go/pkg/kmsg"
)

// Request is one decoded request.
//
// Byte-slice fields of Body (record batches, group member metadata, …) point
// into the request's frame buffer, and so may its strings when the last
// request of the same API was recycled. The server reuses that buffer only
// when the handler calls Recycle; otherwise a handler may keep them as
// long as it likes.
type Request struct {
	Key, Version  int16
	CorrelationID int32
	ClientID      *string
	Body          kmsg.Request // already decoded, version set

	// ready is the response Ready was given, when readySet.
	ready    Response
	readySet bool
	// recycle is set by Recycle.
	recycle bool
}

// Recycle tells the server that neither Handle nor the Reply it returns
// keeps or reads any byte field of Body after Handle returns, that nothing
// keeps a string of Body beyond the response (the response may carry
// them: it is written before the buffer is reused), and that nothing uses
// the Request or its Body once the Reply has returned. The server then
// reuses the request's buffer, the Request and (for produce and fetch)
// the Body for later requests once the response has been written, and
// decodes later requests of the same API with their strings pointing into
// the buffer, which spares the hot paths (a produce request is mostly its
// record batches) allocations per request. A handler that keeps any of
// these must not call it.
func (r *Request) Recycle() { r.recycle = true }

// Ready returns a Reply that answers with resp, and tells the server that
// the response is complete already. When no earlier response of the
// connection is still waiting to be written, the server writes it at once
// on the reader goroutine instead of handing it to the writer goroutine,
// which saves a goroutine wake-up per request; otherwise it is queued like
// any Reply, so responses keep their order either way. Handle must return
// the Reply that Ready returned (the server uses resp and does not call
// that Reply), and resp must not be modified afterwards.
func (r *Request) Ready(resp Response) Reply {
	r.ready, r.readySet = resp, true
	return readyReply
}

// Answer returns the response to a request that Handle answered with
// reply: the one given to Ready, or else what reply returns (nil: an empty
// Response). It calls reply, so it is for callers of Handle other than the
// server (tests), which must not call the Reply Ready returned.
func (r *Request) Answer(reply Reply) Response {
	switch {
	case reply == nil:
		return Response{}
	case r.readySet:
		return r.ready
	}
	return reply()
}

// readyReply is what Ready returns: the server answers with Request.ready
// instead of calling it, so one func serves every request.
func readyReply() Response {
	panic("server: the Reply returned by Request.Ready is not to be called")
}

// ConnInfo describes the connection a request came on. It is the same value
// for every request of a connection and must not be modified.
type ConnInfo struct {
	ID            uint64
	Network       string // "tcp" or "unix"
	Local, Remote net.Addr
	// Listener is the address of the listener the connection came on,
	// as Server.Addrs gives it: "tcp://127.0.0.1:9092",
	// "ssl://0.0.0.0:9093", "sasl_ssl://0.0.0.0:9094",
	// "unix:///run/mq/mqd.sock".
	Listener string
	// TLS is the connection's TLS state once its handshake is done; nil
	// on tcp:// and unix:// listeners.
	TLS *tls.ConnectionState
	// Principal is who the connection authenticated as, in Kafka's form:
	// "User:" and the user name of a SASL login (sasl_plaintext://,
	// sasl_ssl://; every request on those comes after it), else "User:"
	// and the subject of a verified client certificate (see Principal);
	// on a unix:// listener "User:uid:N", N the peer process's uid
	// (SO_PEERCRED, auth.UnixUser). Empty when the connection did not
	// authenticate: Kafka's User:ANONYMOUS.
	Principal string
}

// Handler answers requests. Handle is called on the connection's reader goroutine,
// one request at a time and in order, so work that must happen in request order
// (appending to a log) is done before it returns. It returns a Reply; the server
// calls Reply funcs on the connection's writer goroutine, in request order, and
// writes what they return. A Reply may block (acks=all waiting, fetch long-poll).
// Different connections call Handle concurrently.
//
// The ctx passed to Handle belongs to the connection: it is cancelled when the
// connection closes or the server is closed (not while a graceful Shutdown is
// still draining), and a blocking Reply should give up when it is done. Every
// Reply that Handle returns is called exactly once, even when the connection
// has closed meanwhile (its result is then discarded), so a Reply may release
// resources. A nil Reply means "no response", like an empty Response.
//
// ApiVersions requests (key 18) never reach Handle: the server answers them
// from the list ApiVersions returns, which New reads once (and the tags of
// ApiVersionsTagger).
type Handler interface {
	Handle(ctx context.Context, c *ConnInfo, req *Request) Reply
	// ApiVersions lists the supported keys and version ranges. The server
	// advertises them in ApiVersions, except that Produce is advertised
	// from v0 (see produceAdvertisedMin), and passes Handle only requests
	// within them.
	ApiVersions() []kmsg.ApiVersionsResponseApiKey
}

// RequestMaker is implemented by a Handler that answers requests kmsg does
// not know (API keys of its own): NewRequest returns an empty request of
// key to decode into, or nil for a key it does not know either. The server
// calls it from every connection's reader goroutine.
type RequestMaker interface {
	NewRequest(key int16) kmsg.Request
}

// ApiVersionsTagger is implemented by a Handler that adds tagged fields to
// its ApiVersions responses: ApiVersionsTags returns them, and the server
// puts them in every response at a flexible version (v3+), where Kafka's
// ApiVersions has tagged fields; older versions carry none. The server
// calls it once, in New, like ApiVersions.
type ApiVersionsTagger interface {
	ApiVersionsTags() kmsg.Tags
}

// ApiVersionsFeaturer is implemented by a Handler that advertises feature
// flags (KIP-584) in its ApiVersions responses: the server puts them in
// every response at v3+, where Kafka's ApiVersions carries them, and
// calls ApiVersionsFeatures once, in New, like ApiVersions.
type ApiVersionsFeaturer interface {
	ApiVersionsFeatures() Features
}

// Features are the feature flags of ApiVersions (KIP-584): the levels of
// each feature this broker supports, and the level finalized, the one
// clients speak (a client switches to what a level means only when it is
// finalized).
type Features struct {
	Supported []kmsg.ApiVersionsResponseSupportedFeature
	Finalized []kmsg.ApiVersionsResponseFinalizedFeature
	// FinalizedEpoch orders the finalized levels (clients keep those of
	// the highest epoch); it is sent only with Finalized levels, -1
	// (none finalized) otherwise.
	FinalizedEpoch int64
}

// Reply produces the response when the writer is ready for it (see
// Request.Ready for a response complete at once). Returning a zero
// Response means "no response" (produce with acks=0).
type Reply func() Response

// Response is either a kmsg response, which the server encodes, or a pre-encoded body made of parts
// (bytes and file regions), which the server writes as is after the response header
// (used by Fetch to send segment bytes without copying them through user space).
//
// A Msg is encoded at the version of the request it answers (the server sets
// it). Msg and Parts are exclusive; when Msg is set, Parts is ignored.
type Response struct {
	Msg      kmsg.Response
	Parts    []Part
	Flexible bool // for Parts: whether the response header carries tagged fields
	// CloseAfter closes the connection after writing (or instead of writing, when empty).
	CloseAfter bool
	// Done, when set, is called once the writer is finished with the
	// Response: after writing it, or after dropping it on a broken
	// connection. Resources the Parts point at (segment files) may be
	// released then.
	Done func()
	// ErrorCodes are the nonzero Kafka error codes a Parts body carries
	// (top level and per partition), for the Observer, which cannot read
	// them out of encoded bytes; a Msg's are in the Msg. It may alias
	// memory the Done hook releases.
	ErrorCodes []int16
}

// Part is one piece of a pre-encoded response body: either Bytes, or the
// region [Offset, Offset+Len) of File. The server reads files only with
// positional reads (sendfile with an explicit offset, pread), never moving the
// file position, so many connections may send regions of one *os.File at
// once. The file must stay open until the response has been written, that is
// until the writer goroutine is done with the Response; a file closed earlier
// fails (closes) the connection rather than sending wrong bytes.
type Part struct {
	Bytes []byte
	// File, when set, sends Len bytes from File at Offset (read into the
	// response when small, else sendfile when the connection allows). If the file is shorter than Offset+Len (truncated
	// meanwhile), the connection is closed: the response cannot be completed.
	File *os.File
	// Source, when set instead of File, lends the file for the time the
	// part is written: a descriptor that may be closed while idle (a log
	// segment's, see log.Files) is open only while it is sent.
	Source      FileSource
	Offset, Len int64
}

// FileSource lends an open file. AcquireFile returns it open until the
// matching ReleaseFile; both may be called from any goroutine, once per
// part written.
type FileSource interface {
	AcquireFile() (*os.File, error)
	ReleaseFile()
}

// isFile reports whether the part is a file region.
func (p Part) isFile() bool { return p.File != nil || p.Source != nil }

// acquire returns the part's file, open until release.
func (p Part) acquire() (*os.File, error) {
	if p.Source == nil {
		return p.File, nil
	}
	return p.Source.AcquireFile()
}

// release ends the use acquire began.
func (p Part) release() {
	if p.Source != nil {
		p.Source.ReleaseFile()
	}
}

// Empty reports whether r carries nothing to write.
func (r Response) Empty() bool {
	return r.Msg == nil && len(r.Parts) == 0
}

// size is the number of body bytes the part contributes.
func (p Part) size() int64 {
	if p.isFile() {
		return p.Len
	}
	return int64(len(p.Bytes))
}
