// Package peer is the Kafka client one mq broker uses to talk to
// another: a follower's fetches from its leader, a share-group state
// write or read on the node leading its state partition, a metrics
// scrape's lag lookup. Requests are encoded and responses decoded with
// kmsg; nothing here knows what the requests mean.
//
// A Conn is one TCP connection sending one request at a time (Do), not
// safe for concurrent use. Do reuses the connection's input buffer: a
// response refers into it until the next Do. Every exchange is bounded
// by a timeout and by its context; after any error the connection must
// be closed, as its stream may be mid-response.
//
// A Pool keeps idle Conns by address for callers on many goroutines
// (Get, Put); it is safe for concurrent use and holds no lock across I/O.
package peer
