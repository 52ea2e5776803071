// Package server moves Kafka protocol frames between client connections and
// a Handler. It listens on Unix sockets, TCP, TCP with TLS (ssl://) and
// the SASL listeners (sasl_plaintext://, sasl_ssl://), reads size-prefixed request
// frames, decodes the request header and body with kmsg, calls the Handler,
// and writes the responses back in request order. It knows nothing about
// topics, partitions or groups; lib/broker implements Handler. A Handler
// that answers API keys kmsg does not know (mq's own requests) also
// implements RequestMaker, which gives the server the empty requests to
// decode those frames into.
//
// # Use
//
//	srv, err := server.New(server.Config{
//		Listeners: []string{"unix:///run/mq/mqd.sock", "tcp://127.0.0.1:9092", "ssl://0.0.0.0:9093"},
//		TLS:       tlsFiles, // server.NewTLS(server.TLSFiles{Cert: ..., Key: ...})
//		Logger:    logger,
//	}, broker)
//	if err != nil { ... }
//	if err := srv.Start(); err != nil { ... } // listening once it returns
//	...
//	err = srv.Shutdown(ctx) // drain in-flight requests, then close
//
// # Connections and concurrency
//
// Each connection has two goroutines. The reader reads one frame at a time,
// decodes it and calls Handler.Handle synchronously, so Handle sees a
// connection's requests one by one and in order, and whatever Handle does
// before returning (appending a batch to a log) happens in request order.
// Handle returns a Reply, which is queued. The writer takes Replies from the
// queue in order, calls each one (it may block: acks=all, fetch long-poll)
// and writes the response it returns. While a Reply blocks, the reader keeps
// reading (pipelining), until MaxInFlight requests are read but unanswered;
// then it stops reading until the writer catches up (backpressure).
// Different connections run fully in parallel.
//
// # Connection limits
//
// Config.MaxConnections bounds the open connections of all listeners
// together (max.connections), Config.MaxConnectionsPerIP those of one
// peer IP address (max.connections.per.ip, with per-address
// MaxConnectionsPerIPOverrides); Unix socket connections count toward
// the first only. A connection over a bound is closed in the accept
// loop, before its goroutines start or anything is read, logged at most
// once a second for the whole server (the line counts those held back)
// and counted (ConnectionsRefused). ConnectionsAccepted counts the
// others.
//
// # Unix sockets
//
// The directory of a unix:// listener is created 0700 when missing. One
// that exists must be owned by this process's user (or root) and
// writable by no one else, or Start fails with an UnsafeSocketDirError:
// another user could replace the socket in it and receive the clients.
//
// A response that is complete when Handle returns (Request.Ready: a produce
// already acknowledged, a fetch with data at hand) skips the handoff: when
// no earlier response is still queued, the reader writes it itself, so the
// writer goroutine is not woken for it. Otherwise it is queued behind the
// others like any Reply.
//
// Every Reply returned by Handle (other than Ready's) is called exactly
// once, on the writer goroutine, even when the connection has closed in the meantime (its
// response is then dropped); the context passed to Handle is cancelled when
// the connection closes, so a blocking Reply should select on it.
//
// # TLS
//
// An ssl:// listener (Kafka's SSL listener) serves TLS 1.2 and later with
// the certificate and key of a TLS (NewTLS, from PEM files), which also
// decides whether clients must present a certificate (ClientAuth:
// none, requested or required, Kafka's ssl.client.auth) and which CAs
// it must chain to. TLS.Reload reads the files again: handshakes begun
// afterwards use the new pair, open connections keep theirs, and files
// that do not load leave the old pair in service.
//
// The handshake is the first thing a connection's reader goroutine does,
// never the accept loop's: a peer that stalls it holds only its own
// goroutine. It must finish within Config.HandshakeTimeout (10 s by
// default) of the accept, or the connection is closed; no request is
// read before it has finished. A failed handshake (a plaintext client on
// the TLS port, a client certificate of another CA, expired, or missing
// when required) closes the connection with a log line, at most one a
// second for the whole server (the line counts those held back). A
// connection closed before it sent a byte (a port check) logs at debug
// level only.
//
// Once the handshake is done, ConnInfo.TLS holds its state and
// ConnInfo.Principal the principal of a verified client certificate:
// "User:" and the certificate's subject as an RFC 2253 distinguished
// name, Kafka's default mapping (Principal). Responses on a TLS
// connection are written through it: file regions are read into memory
// and encrypted, not sent with sendfile.
//
// A connection on a unix:// listener is authenticated by the kernel: at
// accept the server reads the peer process's uid (SO_PEERCRED, on Linux)
// and ConnInfo.Principal is "User:uid:N" (auth.UnixUser). Elsewhere, and
// on tcp://, a connection that did not authenticate has an empty
// Principal, Kafka's User:ANONYMOUS.
//
// # The order connections end in when the process dies
//
// With Config.ExitFirst, a connection whose first client id ExitFirst
// names (another broker's) takes a duplicate of its socket numbered in
// the upper half of the descriptor limit. A killed process's sockets end
// from the one with the highest descriptor down (Linux 6), so the other
// brokers' connections end before any client's: a client that saw its
// connection end and asks another broker for metadata finds it already
// knowing (exitorder.go). Closing the connection closes the duplicate.
//
// # Memory
//
// The request bytes held in memory across all connections are bounded by
// Config.QueuedMaxRequestBytes (queued.max.request.bytes). Once a frame's
// size prefix is read, the reader reserves the frame's bytes from that
// budget before it allocates anything; when there is no room it stops
// reading (the peer's writes then block: TCP back-pressure) until
// responses give some back. The reservation is given back when the server
// is done with the frame: once its response has been written or dropped
// (or at once, for a frame refused or cut off). A frame is read into one
// buffer of its exact size (or a pooled one), never grown. Reserving the
// whole frame at once keeps half-read frames from filling the budget and
// waiting on each other forever.
//
// Frames of up to 1 MiB may pass larger ones waiting for room, and frames
// above 1 MiB together hold at most seven eighths of the budget (but room
// for one of the largest size always), so that ordinary requests of other
// clients are served while large frames hold or wait for the budget. A
// frame whose bytes arrive too slowly once reserved (Config.RequestBodyTimeout
// and MinRequestBodyRate) closes its connection, so a peer that announces a
// large frame and trickles it cannot keep its reservation for long.
//
// The large frames of one source, a peer IP address (all its
// connections) or one Unix socket connection, together hold at most half
// of what large frames may (but room for one of the largest size
// always). A frame over its source's share waits without holding up the
// large frames of other sources, so a peer that announces large frames on
// many connections and sends nothing holds one share, and the large
// requests of other clients are served meanwhile. RequestBytes reports
// the bytes reserved and waiting.
//
// Bytes a handler keeps beyond the response (byte fields of a request it
// does not Recycle) are outside the budget, and so is memory the Go
// collector has not reclaimed yet: under the default GOGC the heap grows
// to twice what the last collection found live before the next one. (16
// connections sending 100 MiB frames to mqd with the default 256 MiB
// budget peak at 418 MiB resident; with GOMEMLIMIT=320MiB, at 317 MiB.)
//
// # Invariants
//
//   - Responses leave a connection in the order of their requests, each with
//     its request's correlation id; an empty Response writes nothing (acks=0)
//     and does not disturb the order of the others.
//   - The response header is flexible (carries an empty tagged-field
//     section) exactly when the response is flexible, except for ApiVersions,
//     whose response header is always v0.
//   - ApiVersions is answered by the server from Handler.ApiVersions (plus
//     ApiVersions 0..4 when the handler does not list it), with Produce
//     advertised from v0 whatever the lowest version the handler serves,
//     as Kafka 4 does for librdkafka's sake. An ApiVersions request at a
//     version not supported is answered at v0 with UNSUPPORTED_VERSION and
//     ApiVersions' own versions only, without parsing anything past the
//     correlation id (KIP-511, as Kafka answers), so the client retries at
//     the highest of them. From v3 on the answer carries the handler's
//     feature flags (ApiVersionsFeaturer: transaction.version) and tags.
//   - Any other key or version the handler does not serve (a Produce below
//     its minimum too), a frame size below the header minimum or above
//     Config.MaxRequestBytes, or bytes that do not decode close the
//     connection with a log line. (Bytes left over after a request body are
//     ignored, as Kafka does.) Nothing a peer sends can affect another
//     connection, and outside bytes never cause a panic (a recover per
//     goroutine is only a last resort, and logs loudly).
//   - A connection that sends nothing for Config.IdleTimeout while no
//     request is outstanding, or that accepts no response bytes for that
//     long, is closed.
//   - When the peer closes its side (even a half-close), the connection is
//     closed at once, as Kafka does: responses still pending are dropped,
//     though their Replies are still called, with the context cancelled.
//   - A request frame is reused only when its handler calls
//     Request.Recycle (kmsg's decoded byte slices point into it, and other
//     handlers may keep those), and only once its response has been
//     written; its Request struct is reused then too, and its decoded body
//     for produce and fetch. Frames of API keys whose last request was
//     recycled come from size-classed pools, and their bodies are decoded
//     with strings pointing into the frame; the others are allocated at
//     their exact size and decoded with copied strings. Response encode buffers
//     are pooled, and Ready costs no allocation.
//   - File parts of a Response are read at an explicit offset (the file
//     position is never used). Regions up to 64 KiB are read with pread
//     into a staging buffer along with the byte parts around them, and
//     written once 256 KiB or more are staged, so a fetch over thousands
//     of partitions goes out in a few writes, not two system calls per
//     partition. Larger regions are sent with sendfile(2), or with
//     positional reads where sendfile is unavailable. A file shorter than
//     the region closes the connection, since the frame can no longer be
//     completed.
//
// # Shutdown
//
// Shutdown closes the listeners (removing Unix socket files), stops every
// reader (a request only partly received is dropped; the client will see the
// connection close and retry), waits for the requests already read to
// be answered and written, then closes the connections. If its context ends
// first it closes everything at once. Close does that immediately.
package server
