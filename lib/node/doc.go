// Package node is mq's composition root: it builds one mqd node from its
// settings and runs it. cmd/mqd is flag wiring around Start and Shutdown.
//
//	d, err := node.Start(ctx, node.Config{Settings: s}) // serving when it returns
//	<-d.Fatal()                                 // a configuration conflict found while running
//	err = d.Shutdown(ctx)                       // controlled shutdown, drain, close
//
// Start, in order:
//
//  1. creates the data directory durably (lib/vfs), 0750, warning about
//     one that exists and that other users may read or enter, and locks
//     it (DATA_DIR/.lock, flock, holding the pid): a second mqd on the
//     same directory gets a *DataDirInUseError;
//  2. checks meta.properties (node id, then cluster id once known) and
//     opens the controller (lib/controller) in DATA_DIR/__controller;
//  3. opens the partitions (lib/partition), which start recovering,
//     starts the coordinators on them (coordinator.NewSet: groups,
//     transactions, share groups and share-partitions), and builds the
//     Broker (lib/broker) on these parts, with the authorizer
//     (auth.NodePolicy) and the producer IDs;
//  4. starts the Server (lib/server) on the listeners, with the metrics
//     endpoint (lib/metrics) when metrics.listen is set, and waits for
//     the partitions to open; max.connections 0 becomes three quarters
//     of the open-files limit that log.max.open.files leaves, and a Unix
//     socket directory another user could write in is a *ConfigError;
//  5. registers the broker with the controller under its advertised
//     address and waits for an image holding the registration, from which
//     on the node may lead (partition.Manager.MayLead); from the
//     registration on, the broker keeps a block of producer IDs at hand;
//  6. starts the heartbeat loop and the partitions' log tasks.
//
// Before step 1, Start reads the TLS files of the ssl:// listeners
// (ssl.certificate.location and the others): files that do not load are a
// *ConfigError. ReloadTLS reads them again (mqd calls it on SIGHUP); new
// connections get what it read, and files that do not load leave the
// previous certificate in service.
//
// Shutdown reverses it: a controlled shutdown first (the controller moves
// this broker's leaderships to other in-sync replicas while it still
// serves), then the server drains, the coordinators and the partitions close
// (the logs flushed, the clean shutdown recorded), the controller closes
// and the lock is released. Whatever Start got to is stopped the same way
// when it fails.
//
// # Goroutines
//
//   - the heartbeat loop (lifecycle.go): every broker.heartbeat.interval.ms
//     a BrokerHeartbeat to the active controller, carrying how far this
//     node applied the image and where its offline partitions' logs end
//     (for unclean elections); a stale broker epoch registers again. It
//     also watches the controller's and the data directory's
//     configuration conflicts (Fatal).
//   - the prefetch of producer IDs (controller.ProducerIDs.Run), from the
//     registration until Shutdown: it takes a block of producer IDs from
//     the controller at once and the next one when fewer than a tenth of
//     the current block is left, retrying with a backoff on the node's
//     clock, so that new idempotent producers start on this broker while
//     the controller quorum is lost, as long as the blocks last.
//   - the parts' own: lib/server's per connection, lib/partition's loops,
//     lib/group's and lib/txn's timers, lib/txn's markers,
//     lib/coordinator's remote-write senders, hashicorp/raft's.
//
// A Daemon's methods are safe for concurrent use.
package node
