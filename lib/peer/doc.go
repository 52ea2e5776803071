// Package peer is the Kafka client one mq broker uses to talk to
// another: a follower's fetches from its leader, a share-group state
// write or read on the node leading its state partition, a metrics
// scrape's lag lookup, a transaction coordinator's markers and a
// partition leader's question to another node's coordinator (Nodes
// implements lib/txn's Peers). Requests are encoded and responses decoded
// with kmsg; nothing here knows what the requests mean.
//
// A Conn is one TCP connection sending one request at a time (Do), not
// safe for concurrent use. Do reuses the connection's input buffer: a
// response refers into it until the next Do. Every exchange is bounded
// by a timeout and by its context; after any error the connection must
// be closed, as its stream may be mid-response.
//
// DialTLS dials an ssl:// listener: the TLS handshake, with the
// tls.Config given (a node's certificate and the cluster CA), completes
// within the dial's context. A Leader whose LeaderConfig.TLS is set dials
// its leader that way, taking the config afresh at each dial so that a
// certificate read again on SIGHUP is used from the next connection on;
// lib/partition sets it, and picks the leader's ssl:// listener, when
// security.inter.broker.protocol is SSL. So does every other connection
// to another broker then: a Pool of NewPoolTLS (the coordinators' and
// share groups' requests), a Watch of NewWatchTLS (its tracked
// connections) and lib/node's lag lookups for the metrics, each to the
// other broker's ssl:// listener; otherwise they dial the advertised
// plaintext address. Conn.HungUp looks at the TCP connection under TLS.
//
// A Leader's Fetch carries the follower's broker epoch once
// LeaderConfig.BrokerEpoch gives one (Fetch v15's ReplicaState,
// KIP-903; v13 with the replica id before): a leader refuses the
// fetches of an epoch older than its image's registration of the broker
// (STALE_BROKER_EPOCH), which the Fetcher backs off on like any refusal.
//
// A Pool keeps idle Conns by address for callers on many goroutines
// (Get, Put); it is safe for concurrent use and holds no lock across I/O.
// Nodes addresses a Pool's brokers by node id (lib/partition's
// Manager.PeerAddr gives the addresses).
//
// A Watch is what the node's followers learn of their leaders' processes:
// a Leader tells it of every failed exchange (Lost) and every good one
// (Reached), and it keeps an idle connection of its own to every other
// broker (Track), which wakes the moment that broker's process dies.
// After a loss it dials the broker once, and only a refused
// dial (nothing listens: the process is gone) makes the broker gone. A
// dial that connects or times out clears the suspicion: a frozen or
// cut-off broker is the controller's session timeout to judge. The
// Metadata handler asks it (through lib/partition) so as not to send
// clients to a leader this node knows is gone.
package peer
