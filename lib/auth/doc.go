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
// So a SASL user may not be named "uid:N" (CheckUserName).
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
// # Authorization
//
// The ACLs are Kafka's: a Binding says that a principal, from a host
// ("*": any), is allowed or denied (Permission) an Operation on the
// resources of one ResourceType (TOPIC, GROUP, CLUSTER,
// TRANSACTIONAL_ID, DELEGATION_TOKEN) whose names match a pattern:
// LITERAL (the name, or "*" for every name) or PREFIXED (every name
// starting with it, KIP-290). The principal "User:*" is every user.
// ACLs is an immutable, indexed set of them; Filter selects bindings
// for DescribeAcls and DeleteAcls as Kafka's filters do (ANY, and MATCH:
// the bindings that apply to one named resource).
//
// Authorizer.Unrestricted says whether a principal needs no check at
// all (a super user, or no ACL and allow-everyone); Authorizer.Authorize
// decides one operation on one resource:
//
//   - super users (Policy.SuperUsers, Kafka's super.users; and
//     Policy.LocalSuperUsers, honoured on the Unix socket only: root and
//     mqd's own uid) may do anything;
//   - when no binding at all matches the resource, the answer is
//     Policy.AllowEveryoneIfNoACLFound (allow.everyone.if.no.acl.found);
//   - otherwise a DENY for the principal and host of the operation or of
//     ALL refuses, whatever allows it (deny wins); then an ALLOW of the
//     operation, of ALL, or of an operation implying it allows: READ,
//     WRITE, DELETE and ALTER imply DESCRIBE, ALTER_CONFIGS implies
//     DESCRIBE_CONFIGS; else it is refused.
//
// Authorize does not allocate: it runs for every produce and fetch.
// AuthorizeAny asks whether an operation is allowed on some resource of
// a type (Kafka's authorizeByResourceType: InitProducerId's WRITE on
// any topic).
//
// The host of a TCP connection is its peer's IP address as text; a Unix
// socket peer has none, so only bindings for the host "*" apply to it.
//
// The package keeps no state of its own and does no I/O: the users'
// credentials and the ACLs live in the controller's replicated image, and
// lib/server and lib/broker hand them in.
package auth
