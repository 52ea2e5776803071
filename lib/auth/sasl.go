package auth

import (
	"bytes"
	"crypto/hmac"
	"crypto/rand"
	"crypto/sha256"
	"crypto/sha512"
	"encoding/base64"
	"errors"
	"fmt"
	"hash"
	"slices"
	"strings"

	"github.com/xdg-go/scram"
)

// The SASL mechanisms, by the names clients send in SaslHandshake.
const (
	Plain        = "PLAIN"
	ScramSHA256  = "SCRAM-SHA-256"
	ScramSHA512  = "SCRAM-SHA-512"
	MinIteration = 4096  // Kafka's minimum SCRAM iteration count
	MaxIteration = 16384 // Kafka's maximum SCRAM iteration count
)

// ScramMechanisms are the SCRAM mechanisms, in the order PLAIN tries
// their credentials.
var ScramMechanisms = []string{ScramSHA256, ScramSHA512}

// Errors of the mechanisms. ErrAuthenticationFailed is the one a client
// is told, whatever went wrong: a malformed message, an unknown user, a
// wrong password or proof; the wrapped detail is for the server's log,
// and never holds a password or a key.
var (
	ErrAuthenticationFailed = errors.New("auth: authentication failed")
	ErrUnknownMechanism     = errors.New("auth: unknown SASL mechanism")
	ErrBadCredential        = errors.New("auth: unacceptable credential")
)

// Credential is what is stored of one user's password for one SCRAM
// mechanism (RFC 5802): the salt, the iteration count, and the keys
// derived from the salted password. Neither the password nor the salted
// password is ever stored: StoredKey lets the server check a client's
// proof, ServerKey lets the client check the server, and neither gives a
// client's proof.
type Credential struct {
	Salt       []byte
	Iterations int
	StoredKey  []byte
	ServerKey  []byte
}

// Credentials finds the credential of user for a SCRAM mechanism; ok is
// false when the user has none. It may be called from any goroutine.
type Credentials func(user, mechanism string) (c Credential, ok bool)

// hashOf returns the hash of a SCRAM mechanism.
func hashOf(mechanism string) (func() hash.Hash, scram.HashGeneratorFcn, error) {
	switch mechanism {
	case ScramSHA256:
		return sha256.New, scram.SHA256, nil
	case ScramSHA512:
		return sha512.New, scram.SHA512, nil
	}
	return nil, nil, fmt.Errorf("%w %q", ErrUnknownMechanism, mechanism)
}

// CheckIterations refuses an iteration count outside Kafka's bounds.
func CheckIterations(iterations int) error {
	if iterations < MinIteration || iterations > MaxIteration {
		return fmt.Errorf("%w: %d iterations, want %d to %d", ErrBadCredential, iterations, MinIteration, MaxIteration)
	}
	return nil
}

// CredentialFromSaltedPassword derives the stored keys from a salted
// password (Hi(password, salt, iterations), which Kafka clients compute
// and send in AlterUserScramCredentials): StoredKey is H(HMAC(salted,
// "Client Key")) and ServerKey HMAC(salted, "Server Key"), RFC 5802
// section 3. The salted password is not kept.
func CredentialFromSaltedPassword(mechanism string, salt, salted []byte, iterations int) (Credential, error) {
	h, _, err := hashOf(mechanism)
	if err != nil {
		return Credential{}, err
	}
	if err := CheckIterations(iterations); err != nil {
		return Credential{}, err
	}
	if len(salt) == 0 || len(salted) == 0 {
		return Credential{}, fmt.Errorf("%w: empty salt or salted password", ErrBadCredential)
	}
	clientKey := hmacOf(h, salted, "Client Key")
	stored := h()
	stored.Write(clientKey)
	return Credential{
		Salt:       slices.Clone(salt),
		Iterations: iterations,
		StoredKey:  stored.Sum(nil),
		ServerKey:  hmacOf(h, salted, "Server Key"),
	}, nil
}

func hmacOf(h func() hash.Hash, key []byte, msg string) []byte {
	m := hmac.New(h, key)
	m.Write([]byte(msg))
	return m.Sum(nil)
}

// NewCredential derives the credential of password for a SCRAM mechanism
// with a fresh random salt (tests, and the users of tools that send
// passwords). The password is used as is, as Kafka clients use it (no
// SASLprep).
func NewCredential(mechanism, password string, iterations int) (Credential, error) {
	salt := make([]byte, 16)
	rand.Read(salt)
	return credentialWithSalt(mechanism, password, salt, iterations)
}

func credentialWithSalt(mechanism, password string, salt []byte, iterations int) (Credential, error) {
	_, gen, err := hashOf(mechanism)
	if err != nil {
		return Credential{}, err
	}
	if err := CheckIterations(iterations); err != nil {
		return Credential{}, err
	}
	client, err := gen.NewClientUnprepped("", password, "")
	if err != nil {
		return Credential{}, fmt.Errorf("%w: %v", ErrBadCredential, err)
	}
	sc, err := client.GetStoredCredentialsWithError(scram.KeyFactors{Salt: string(salt), Iters: iterations})
	if err != nil {
		return Credential{}, fmt.Errorf("%w: %v", ErrBadCredential, err)
	}
	return Credential{Salt: slices.Clone(salt), Iterations: iterations, StoredKey: sc.StoredKey, ServerKey: sc.ServerKey}, nil
}

// Session is the server side of one SASL exchange on one connection:
// Step takes each message the client sends (SaslAuthenticate's bytes)
// and returns the answer, until Done. A Session is used by one goroutine.
type Session struct {
	mechanism string
	creds     Credentials
	// scram is the SCRAM conversation (nil for PLAIN).
	scram *scram.ServerConversation
	// cred is the credential the exchange runs against (a random decoy
	// for a user that does not exist, so that an unknown user goes
	// through the whole exchange and fails where a wrong password does);
	// clientFirst and serverFirst are the first two messages, kept for
	// doubledNonceFinal.
	cred                     Credential
	clientFirst, serverFirst string
	user                     string
	done                     bool
	ok                       bool
}

// NewSession starts the server side of mechanism (Plain, ScramSHA256 or
// ScramSHA512) against creds.
func NewSession(mechanism string, creds Credentials) (*Session, error) {
	s := &Session{mechanism: mechanism, creds: creds}
	if mechanism == Plain {
		return s, nil
	}
	_, gen, err := hashOf(mechanism)
	if err != nil {
		return nil, err
	}
	srv, err := gen.NewServer(s.lookup)
	if err != nil {
		return nil, err
	}
	s.scram = srv.NewConversation()
	return s, nil
}

// lookup is the SCRAM server's credential lookup: a user without a
// credential gets the decoy, a random one nobody's proof matches.
func (s *Session) lookup(user string) (scram.StoredCredentials, error) {
	c, ok := s.creds(user, s.mechanism)
	if !ok {
		c = decoyCredential(s.mechanism)
	}
	s.cred = c
	return scram.StoredCredentials{
		KeyFactors: scram.KeyFactors{Salt: string(c.Salt), Iters: c.Iterations},
		StoredKey:  c.StoredKey,
		ServerKey:  c.ServerKey,
	}, nil
}

func decoyCredential(mechanism string) Credential {
	h, _, _ := hashOf(mechanism)
	c := Credential{Salt: make([]byte, 16), Iterations: MinIteration, StoredKey: make([]byte, h().Size()), ServerKey: make([]byte, h().Size())}
	rand.Read(c.Salt)
	rand.Read(c.StoredKey)
	rand.Read(c.ServerKey)
	return c
}

// Mechanism is the session's mechanism.
func (s *Session) Mechanism() string { return s.mechanism }

// Done reports whether the exchange is over, successfully or not.
func (s *Session) Done() bool { return s.done }

// User is the authenticated user name, once Done with success; empty
// otherwise.
func (s *Session) User() string {
	if s.ok {
		return s.user
	}
	return ""
}

// Step answers one client message. An error wraps
// ErrAuthenticationFailed and ends the exchange; the answer is then
// empty. Once the answer is the last (Done), User names the user.
func (s *Session) Step(msg []byte) ([]byte, error) {
	if s.done {
		return nil, fmt.Errorf("%w: message after the exchange ended", ErrAuthenticationFailed)
	}
	if s.scram == nil {
		s.done = true
		user, err := s.plain(msg)
		if err != nil {
			return nil, err
		}
		s.user, s.ok = user, true
		return nil, nil
	}
	if s.serverFirst != "" {
		if out, ok, err := s.doubledNonceFinal(string(msg)); ok {
			return out, err
		}
	}
	out, err := s.scram.Step(string(msg))
	if s.serverFirst == "" && err == nil {
		s.clientFirst, s.serverFirst = string(msg), out
	}
	if err != nil {
		s.done = true
		return nil, fmt.Errorf("%w: %v", ErrAuthenticationFailed, err)
	}
	if s.scram.Done() {
		s.done = true
		if !s.scram.Valid() {
			return nil, fmt.Errorf("%w: invalid proof", ErrAuthenticationFailed)
		}
		user := s.scram.Username()
		if authz := s.scram.AuthzID(); authz != "" && authz != user {
			return nil, fmt.Errorf("%w: authorization id differs from the user", ErrAuthenticationFailed)
		}
		s.user, s.ok = user, true
	}
	return []byte(out), nil
}

// plain checks a PLAIN message (RFC 4616: authzid NUL authcid NUL
// passwd) against the user's SCRAM credentials: the password is salted
// with each stored credential's salt and iterations and its StoredKey
// compared in constant time. The authzid must be empty or the user.
func (s *Session) plain(msg []byte) (string, error) {
	authz, user, pass, err := ParsePlain(msg)
	if err != nil {
		return "", err
	}
	if authz != "" && authz != user {
		return "", fmt.Errorf("%w: authorization id differs from the user", ErrAuthenticationFailed)
	}
	found := false
	for _, m := range ScramMechanisms {
		c, ok := s.creds(user, m)
		if !ok {
			continue
		}
		found = true
		got, err := credentialWithSalt(m, pass, c.Salt, c.Iterations)
		if err != nil {
			return "", fmt.Errorf("%w: %v", ErrAuthenticationFailed, err)
		}
		if hmac.Equal(got.StoredKey, c.StoredKey) {
			return user, nil
		}
		return "", fmt.Errorf("%w: wrong password", ErrAuthenticationFailed)
	}
	if !found {
		// Spend what a known user's check costs, so that the time taken
		// does not tell whether the user exists.
		d := decoyCredential(ScramSHA256)
		credentialWithSalt(ScramSHA256, pass, d.Salt, d.Iterations)
	}
	return "", fmt.Errorf("%w: wrong password", ErrAuthenticationFailed)
}

// ParsePlain splits a PLAIN message (RFC 4616) into the authorization
// id, the user and the password. The user and password must not be
// empty, and no part may hold a NUL.
func ParsePlain(msg []byte) (authz, user, pass string, err error) {
	parts := bytes.Split(msg, []byte{0})
	if len(parts) != 3 {
		return "", "", "", fmt.Errorf("%w: PLAIN message of %d parts, want 3", ErrAuthenticationFailed, len(parts))
	}
	if len(parts[1]) == 0 || len(parts[2]) == 0 {
		return "", "", "", fmt.Errorf("%w: PLAIN message with an empty user or password", ErrAuthenticationFailed)
	}
	return string(parts[0]), string(parts[1]), string(parts[2]), nil
}

// doubledNonceFinal checks the client-final message of librdkafka before
// 2.6.1 (kcat, confluent-kafka): its nonce is the client's nonce again
// followed by the whole nonce of the server-first message, where RFC
// 5802 wants that nonce alone. Kafka accepts a nonce that ends with the
// server's (from 3.8.1), and so does mq: the server's part, fresh for
// the exchange, is still there, so a replayed proof is still refused.
// xdg-go compares the nonce for equality, and the proof covers the
// message as sent, so such a message cannot go through it: this checks
// it as RFC 5802 section 3 says (ClientKey is the proof XOR
// HMAC(StoredKey, AuthMessage), and H(ClientKey) must be StoredKey,
// compared in constant time) and answers with the server signature.
// ok is false for any other message, which goes to xdg-go.
func (s *Session) doubledNonceFinal(msg string) (out []byte, ok bool, err error) {
	attrs := strings.Split(msg, ",")
	serverNonce, found := strings.CutPrefix(strings.Split(s.serverFirst, ",")[0], "r=")
	if len(attrs) < 3 || !found || !strings.HasPrefix(attrs[1], "r=") {
		return nil, false, nil
	}
	nonce := attrs[1][2:]
	if nonce == serverNonce || !strings.HasSuffix(nonce, serverNonce) {
		return nil, false, nil
	}
	s.done = true
	fail := func(why string) ([]byte, bool, error) {
		return nil, true, fmt.Errorf("%w: %s", ErrAuthenticationFailed, why)
	}
	proofAttr := attrs[len(attrs)-1]
	if !strings.HasPrefix(proofAttr, "p=") {
		return fail("client-final message without a proof")
	}
	proof, err := base64.StdEncoding.DecodeString(proofAttr[2:])
	if err != nil {
		return fail("client-final proof not base64")
	}
	// The channel binding must be the GS2 header of the client-first
	// message, base64: no channel binding.
	gs2End := strings.Index(s.clientFirst, ",n=")
	if gs2End < 0 || attrs[0] != "c="+base64.StdEncoding.EncodeToString([]byte(s.clientFirst[:gs2End+1])) {
		return fail("channel binding does not match")
	}
	h, _, err := hashOf(s.mechanism)
	if err != nil {
		return fail(err.Error())
	}
	authMessage := s.clientFirst[gs2End+1:] + "," + s.serverFirst + "," + strings.Join(attrs[:len(attrs)-1], ",")
	signature := hmacOf(h, s.cred.StoredKey, authMessage)
	if len(proof) != len(signature) {
		return fail("proof of the wrong length")
	}
	clientKey := make([]byte, len(proof))
	for i := range proof {
		clientKey[i] = proof[i] ^ signature[i]
	}
	sum := h()
	sum.Write(clientKey)
	if !hmac.Equal(sum.Sum(nil), s.cred.StoredKey) {
		return fail("invalid proof")
	}
	user := s.scram.Username()
	if authz := s.scram.AuthzID(); authz != "" && authz != user {
		return fail("authorization id differs from the user")
	}
	s.user, s.ok = user, true
	return []byte("v=" + base64.StdEncoding.EncodeToString(hmacOf(h, s.cred.ServerKey, authMessage))), true, nil
}
