package auth

import (
	"crypto/pbkdf2"
	"crypto/sha256"
	"crypto/sha512"
	"encoding/base64"
	"errors"
	"hash"
	"strings"
	"testing"

	"github.com/xdg-go/scram"
)

// store is an in-memory Credentials.
type store map[string]map[string]Credential

func (s store) lookup(user, mechanism string) (Credential, bool) {
	c, ok := s[user][mechanism]
	return c, ok
}

func (s store) add(t *testing.T, user, mechanism, password string) {
	t.Helper()
	c, err := NewCredential(mechanism, password, MinIteration)
	if err != nil {
		t.Fatal(err)
	}
	if s[user] == nil {
		s[user] = map[string]Credential{}
	}
	s[user][mechanism] = c
}

// login runs a SCRAM exchange of a real client (xdg-go's) against a
// Session; it returns the user the session authenticated and the first
// error of either side.
func login(t *testing.T, creds Credentials, mechanism, user, password string) (string, error) {
	t.Helper()
	_, gen, err := hashOf(mechanism)
	if err != nil {
		t.Fatal(err)
	}
	client, err := gen.NewClientUnprepped(user, password, "")
	if err != nil {
		t.Fatal(err)
	}
	cc := client.NewConversation()
	s, err := NewSession(mechanism, creds)
	if err != nil {
		t.Fatal(err)
	}
	var fromServer string
	for !s.Done() {
		msg, err := cc.Step(fromServer)
		if err != nil {
			return "", err
		}
		out, err := s.Step([]byte(msg))
		if err != nil {
			return "", err
		}
		fromServer = string(out)
	}
	if _, err := cc.Step(fromServer); err != nil {
		return "", err
	}
	if !cc.Valid() {
		return "", errors.New("client does not accept the server's signature")
	}
	return s.User(), nil
}

func TestScramLogsInWithTheRightPasswordOnly(t *testing.T) {
	for _, mech := range ScramMechanisms {
		t.Run(mech, func(t *testing.T) {
			creds := store{}
			creds.add(t, "alice", mech, "s3cret")
			user, err := login(t, creds.lookup, mech, "alice", "s3cret")
			if err != nil || user != "alice" {
				t.Fatalf("right password: user %q, err %v", user, err)
			}
			if _, err := login(t, creds.lookup, mech, "alice", "wrong"); !errors.Is(err, ErrAuthenticationFailed) {
				t.Fatalf("wrong password: err %v, want ErrAuthenticationFailed", err)
			}
			if _, err := login(t, creds.lookup, mech, "bob", "s3cret"); !errors.Is(err, ErrAuthenticationFailed) {
				t.Fatalf("unknown user: err %v, want ErrAuthenticationFailed", err)
			}
		})
	}
}

func TestScramCredentialsAreNotSharedBetweenMechanisms(t *testing.T) {
	creds := store{}
	creds.add(t, "alice", ScramSHA256, "s3cret")
	if _, err := login(t, creds.lookup, ScramSHA512, "alice", "s3cret"); !errors.Is(err, ErrAuthenticationFailed) {
		t.Fatalf("SHA-512 login with only a SHA-256 credential: err %v", err)
	}
}

func TestScramRefusesAReplayedProof(t *testing.T) {
	creds := store{}
	creds.add(t, "alice", ScramSHA256, "s3cret")
	client, _ := scram.SHA256.NewClientUnprepped("alice", "s3cret", "")
	cc := client.NewConversation()
	s1, _ := NewSession(ScramSHA256, creds.lookup)
	first, _ := cc.Step("")
	serverFirst, err := s1.Step([]byte(first))
	if err != nil {
		t.Fatal(err)
	}
	final, _ := cc.Step(string(serverFirst))
	if _, err := s1.Step([]byte(final)); err != nil {
		t.Fatalf("the original exchange: %v", err)
	}
	// An eavesdropper replays both client messages on a new session: the
	// server's nonce differs, so the old proof does not fit.
	s2, _ := NewSession(ScramSHA256, creds.lookup)
	if _, err := s2.Step([]byte(first)); err != nil {
		t.Fatal(err)
	}
	if _, err := s2.Step([]byte(final)); !errors.Is(err, ErrAuthenticationFailed) {
		t.Fatalf("replayed proof: err %v, want ErrAuthenticationFailed", err)
	}
	if s2.User() != "" {
		t.Fatalf("replay authenticated %q", s2.User())
	}
	// And the finished session takes nothing more.
	if _, err := s1.Step([]byte(final)); !errors.Is(err, ErrAuthenticationFailed) {
		t.Fatalf("a message after the end: err %v", err)
	}
}

func TestPlainChecksThePasswordAgainstTheScramCredential(t *testing.T) {
	creds := store{}
	creds.add(t, "alice", ScramSHA512, "s3cret")
	for _, tc := range []struct {
		msg  string
		user string
	}{
		{"\x00alice\x00s3cret", "alice"},
		{"alice\x00alice\x00s3cret", "alice"},
		{"\x00alice\x00wrong", ""},
		{"\x00bob\x00s3cret", ""},
		{"bob\x00alice\x00s3cret", ""},
		{"alice\x00s3cret", ""},
		{"\x00alice\x00", ""},
		{"\x00\x00s3cret", ""},
		{"\x00alice\x00s3cret\x00", ""},
	} {
		s, err := NewSession(Plain, creds.lookup)
		if err != nil {
			t.Fatal(err)
		}
		out, err := s.Step([]byte(tc.msg))
		if tc.user != "" {
			if err != nil || s.User() != tc.user || len(out) != 0 || !s.Done() {
				t.Errorf("%q: user %q, err %v; want %q", tc.msg, s.User(), err, tc.user)
			}
			continue
		}
		if !errors.Is(err, ErrAuthenticationFailed) || s.User() != "" {
			t.Errorf("%q: user %q, err %v; want a refusal", tc.msg, s.User(), err)
		}
	}
}

func TestCredentialFromSaltedPasswordMatchesTheClientsDerivation(t *testing.T) {
	for _, tc := range []struct {
		mech string
		h    func() hash.Hash
	}{{ScramSHA256, sha256.New}, {ScramSHA512, sha512.New}} {
		salt := []byte("0123456789abcdef")
		salted, err := pbkdf2.Key(tc.h, "s3cret", salt, 4096, tc.h().Size())
		if err != nil {
			t.Fatal(err)
		}
		got, err := CredentialFromSaltedPassword(tc.mech, salt, salted, 4096)
		if err != nil {
			t.Fatal(err)
		}
		creds := store{"alice": {tc.mech: got}}
		if user, err := login(t, creds.lookup, tc.mech, "alice", "s3cret"); err != nil || user != "alice" {
			t.Fatalf("%s: login with a credential from the salted password: %q, %v", tc.mech, user, err)
		}
	}
}

func TestIterationsOutsideKafkasBoundsAreRefused(t *testing.T) {
	for _, n := range []int{0, 1, 4095, 16385} {
		if _, err := NewCredential(ScramSHA256, "p", n); !errors.Is(err, ErrBadCredential) {
			t.Errorf("NewCredential with %d iterations: %v", n, err)
		}
		if _, err := CredentialFromSaltedPassword(ScramSHA256, []byte("s"), []byte("x"), n); !errors.Is(err, ErrBadCredential) {
			t.Errorf("CredentialFromSaltedPassword with %d iterations: %v", n, err)
		}
	}
	if _, err := NewSession("SCRAM-SHA-1", store{}.lookup); !errors.Is(err, ErrUnknownMechanism) {
		t.Errorf("SCRAM-SHA-1: %v", err)
	}
}

// doubledNonceClient plays librdkafka before 2.6.1: its client-final
// nonce is its own nonce followed by the server-first nonce. It returns
// the client-final message with a proof for password.
func doubledNonceClient(t *testing.T, s *Session, user, password string, salt []byte, iterations int, clientNonce string) (final, authMessage string) {
	t.Helper()
	first := "n,,n=" + user + ",r=" + clientNonce
	serverFirst, err := s.Step([]byte(first))
	if err != nil {
		t.Fatal(err)
	}
	serverNonce := strings.TrimPrefix(strings.Split(string(serverFirst), ",")[0], "r=")
	withoutProof := "c=biws,r=" + clientNonce + serverNonce
	authMessage = first[3:] + "," + string(serverFirst) + "," + withoutProof
	salted, err := pbkdf2.Key(sha256.New, password, salt, iterations, sha256.Size)
	if err != nil {
		t.Fatal(err)
	}
	clientKey := hmacOf(sha256.New, salted, "Client Key")
	stored := sha256.Sum256(clientKey)
	signature := hmacOf(sha256.New, stored[:], authMessage)
	proof := make([]byte, len(clientKey))
	for i := range proof {
		proof[i] = clientKey[i] ^ signature[i]
	}
	return withoutProof + ",p=" + base64.StdEncoding.EncodeToString(proof), authMessage
}

func TestScramAcceptsLibrdkafkasDoubledNonceButNotAReplay(t *testing.T) {
	creds := store{}
	creds.add(t, "alice", ScramSHA256, "s3cret")
	c := creds["alice"][ScramSHA256]

	s, _ := NewSession(ScramSHA256, creds.lookup)
	final, authMessage := doubledNonceClient(t, s, "alice", "s3cret", c.Salt, c.Iterations, "rdkafkanonce")
	out, err := s.Step([]byte(final))
	if err != nil || s.User() != "alice" || !s.Done() {
		t.Fatalf("doubled nonce, right password: user %q, err %v", s.User(), err)
	}
	if want := "v=" + base64.StdEncoding.EncodeToString(hmacOf(sha256.New, c.ServerKey, authMessage)); string(out) != want {
		t.Fatalf("server-final %q, want %q", out, want)
	}

	s, _ = NewSession(ScramSHA256, creds.lookup)
	final, _ = doubledNonceClient(t, s, "alice", "wrong", c.Salt, c.Iterations, "rdkafkanonce")
	if _, err := s.Step([]byte(final)); !errors.Is(err, ErrAuthenticationFailed) || s.User() != "" {
		t.Fatalf("doubled nonce, wrong password: user %q, err %v", s.User(), err)
	}

	// The same final message on a new exchange: its server nonce is not
	// this exchange's, so the proof is refused.
	s, _ = NewSession(ScramSHA256, creds.lookup)
	if _, err := s.Step([]byte("n,,n=alice,r=rdkafkanonce")); err != nil {
		t.Fatal(err)
	}
	s2, _ := NewSession(ScramSHA256, creds.lookup)
	replayed, _ := doubledNonceClient(t, s2, "alice", "s3cret", c.Salt, c.Iterations, "rdkafkanonce")
	if _, err := s.Step([]byte(replayed)); !errors.Is(err, ErrAuthenticationFailed) || s.User() != "" {
		t.Fatalf("replayed doubled-nonce proof: user %q, err %v", s.User(), err)
	}
}
