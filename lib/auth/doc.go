// Package auth is who a connection is and what it may do: principals,
// the SASL mechanisms that establish them, and the authorizer that
// checks each request's operations against the cluster's ACLs.
//
// A principal is written as Kafka writes it, "User:" and a name:
//
//   - a verified TLS client certificate: "User:" and its subject as an
//     RFC 2253 distinguished name (lib/server);
//   - a SASL login (PLAIN, SCRAM-SHA-256, SCRAM-SHA-512): "User:" and the
//     user name;
//   - a Unix socket peer: "User:uid:N", N the peer's uid (SO_PEERCRED);
//   - anything else: Anonymous, "User:ANONYMOUS".
//
// The package keeps no state of its own and does no I/O: the users'
// credentials and the ACLs live in the controller's replicated image, and
// lib/server and lib/broker hand them in.
package auth
