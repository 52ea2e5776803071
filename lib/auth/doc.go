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
// # SASL
//
// A Session is the server side of one SASL exchange (SaslAuthenticate's
// bytes in, the answers out). SCRAM-SHA-256 and SCRAM-SHA-512 (RFC 5802,
// RFC 7677) run github.com/xdg-go/scram's server conversation: the
// client's nonce must come back with the server's appended, and the
// proof must match the stored key, so a wrong proof, and a proof
// replayed from an earlier exchange (whose server nonce differs), are
// refused. A user without a credential gets a random decoy credential
// and fails at the proof like a wrong password: neither the answer nor
// the point of failure tells whether the user exists. PLAIN (RFC 4616,
// "authzid NUL user NUL password") is checked against the same stored
// SCRAM credentials: the password is salted with a credential's salt and
// iterations and its StoredKey compared in constant time. An authzid
// other than empty or the user is refused.
//
// librdkafka before 2.6.1 (kcat, confluent-kafka) sends a client-final
// nonce that repeats its own nonce before the server's whole one; Kafka
// accepts a nonce that ends with the server's, and so does Session. Such
// a message cannot go through xdg-go (its nonce check is equality and
// the proof covers the message as sent), so doubledNonceFinal checks its
// proof with crypto/hmac, RFC 5802's formula, and everything else runs
// through xdg-go.
//
// A Credential holds only the salt, the iteration count (4096 to 16384,
// Kafka's bounds) and the keys derived from the salted password,
// StoredKey and ServerKey: neither the password nor the salted password
// (which Kafka clients send in AlterUserScramCredentials) is kept.
//
// Every refusal wraps ErrAuthenticationFailed; what it wraps is for the
// server's log and holds no secret.
//
// The package keeps no state of its own and does no I/O: the users'
// credentials and the ACLs live in the controller's replicated image, and
// lib/server and lib/broker hand them in.
package auth
