package auth

import (
	"errors"
	"strings"
	"testing"
)

func FuzzParsePlain(f *testing.F) {
	for _, s := range []string{"\x00alice\x00s3cret", "a\x00b\x00c", "", "\x00\x00", "x\x00y"} {
		f.Add([]byte(s))
	}
	creds := store{}
	c, err := NewCredential(ScramSHA256, "s3cret", MinIteration)
	if err != nil {
		f.Fatal(err)
	}
	creds["alice"] = map[string]Credential{ScramSHA256: c}
	f.Fuzz(func(t *testing.T, msg []byte) {
		_, user, pass, err := ParsePlain(msg)
		if err == nil && (user == "" || pass == "") {
			t.Fatalf("accepted %q with an empty user or password", msg)
		}
		s, _ := NewSession(Plain, creds.lookup)
		if _, err := s.Step(msg); err != nil && !errors.Is(err, ErrAuthenticationFailed) {
			t.Fatalf("%q: error %v does not wrap ErrAuthenticationFailed", msg, err)
		}
		if s.User() != "" && s.User() != "alice" {
			t.Fatalf("%q authenticated %q", msg, s.User())
		}
	})
}

// FuzzScramSession feeds two arbitrary client messages (client-first,
// client-final) to a SCRAM session: it must never panic, never
// authenticate, and fail only with ErrAuthenticationFailed.
func FuzzScramSession(f *testing.F) {
	f.Add([]byte("n,,n=alice,r=abcdef"), []byte("c=biws,r=abcdef,p=AAAA"))
	f.Add([]byte("n,,n=bob,r=x,ext=1"), []byte("c=biws,r=x,p="))
	f.Add([]byte("y,a=alice,n=alice,r=x"), []byte(""))
	f.Add([]byte("p=tls-unique,,n=a,r=b"), []byte("c=,r=,p=,x"))
	f.Add([]byte("n,,m=ext,n=a,r=b"), []byte("c=biws"))
	creds := store{}
	c, err := NewCredential(ScramSHA512, "s3cret", MinIteration)
	if err != nil {
		f.Fatal(err)
	}
	creds["alice"] = map[string]Credential{ScramSHA512: c}
	f.Fuzz(func(t *testing.T, first, final []byte) {
		s, err := NewSession(ScramSHA512, creds.lookup)
		if err != nil {
			t.Fatal(err)
		}
		for _, msg := range [][]byte{first, final} {
			if _, err := s.Step(msg); err != nil {
				if !errors.Is(err, ErrAuthenticationFailed) {
					t.Fatalf("error %v does not wrap ErrAuthenticationFailed", err)
				}
				break
			}
		}
		if s.User() != "" {
			t.Fatalf("authenticated %q from %q, %q", s.User(), first, final)
		}
	})
}

// FuzzScramDoubledNonceFinal feeds client-final messages whose nonce ends
// with the exchange's server nonce (what reaches doubledNonceFinal, the
// form of librdkafka before 2.6.1) around arbitrary text: never a
// panic, never a login without a proof.
func FuzzScramDoubledNonceFinal(f *testing.F) {
	f.Add("c=biws", "rdkafka", ",p=AAAA")
	f.Add("c=biws", "x", ",p=")
	f.Add("c=", "", "")
	f.Add("", "pre", ",p=!!notbase64")
	f.Add("c=biws", "pre", ",e=1,p=q4tbRgI6l6FQy3H0UNQu1M8Ctdkvx0GAetk9H/EXho4=")
	creds := store{}
	c, err := NewCredential(ScramSHA256, "s3cret", MinIteration)
	if err != nil {
		f.Fatal(err)
	}
	creds["alice"] = map[string]Credential{ScramSHA256: c}
	f.Fuzz(func(t *testing.T, cbind, prefix, tail string) {
		s, err := NewSession(ScramSHA256, creds.lookup)
		if err != nil {
			t.Fatal(err)
		}
		serverFirst, err := s.Step([]byte("n,,n=alice,r=rdkafka"))
		if err != nil {
			t.Fatal(err)
		}
		serverNonce := strings.TrimPrefix(strings.Split(string(serverFirst), ",")[0], "r=")
		final := cbind + ",r=" + prefix + serverNonce + tail
		if _, err := s.Step([]byte(final)); err != nil && !errors.Is(err, ErrAuthenticationFailed) {
			t.Fatalf("%q: error %v does not wrap ErrAuthenticationFailed", final, err)
		}
		if s.User() != "" {
			t.Fatalf("%q authenticated %q", final, s.User())
		}
	})
}
