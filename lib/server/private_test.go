package server

import (
	"context"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
	"github.com/twmb/franz-go/pkg/kversion"
)

// echoKey is a request kmsg does not know: its body is bytes, answered
// back reversed.
const echoKey int16 = 20000

type echoRequest struct{ body []byte }

func (*echoRequest) Key() int16                  { return echoKey }
func (*echoRequest) MaxVersion() int16           { return 0 }
func (*echoRequest) SetVersion(int16)            {}
func (*echoRequest) GetVersion() int16           { return 0 }
func (*echoRequest) IsFlexible() bool            { return true }
func (r *echoRequest) AppendTo(b []byte) []byte  { return append(b, r.body...) }
func (r *echoRequest) ReadFrom(b []byte) error   { r.body = append([]byte(nil), b...); return nil }
func (*echoRequest) ResponseKind() kmsg.Response { return new(echoResponse) }

type echoResponse struct{ body []byte }

func (*echoResponse) Key() int16                 { return echoKey }
func (*echoResponse) MaxVersion() int16          { return 0 }
func (*echoResponse) SetVersion(int16)           {}
func (*echoResponse) GetVersion() int16          { return 0 }
func (*echoResponse) IsFlexible() bool           { return true }
func (r *echoResponse) AppendTo(b []byte) []byte { return append(b, r.body...) }
func (r *echoResponse) ReadFrom(b []byte) error  { r.body = append([]byte(nil), b...); return nil }
func (*echoResponse) RequestKind() kmsg.Request  { return new(echoRequest) }

// privateHandler is a fakeHandler that also knows echoKey.
type privateHandler struct{ *fakeHandler }

func (privateHandler) NewRequest(key int16) kmsg.Request {
	if key == echoKey {
		return new(echoRequest)
	}
	return nil
}

func TestRequestsOfTheHandlersOwnKeys(t *testing.T) {
	h := newFake(func(_ context.Context, _ *ConnInfo, req *Request) Reply {
		if r, ok := req.Body.(*echoRequest); ok {
			out := make([]byte, len(r.body))
			for i, c := range r.body {
				out[len(out)-1-i] = c
			}
			return func() Response { return Response{Msg: &echoResponse{body: out}} }
		}
		return echoReply(nil, nil, req)
	})
	h.versions = append(h.versions, kmsg.ApiVersionsResponseApiKey{ApiKey: echoKey})

	// Without NewRequest the server cannot decode the key: refused.
	if _, err := New(Config{Listeners: []string{"tcp://127.0.0.1:0"}}, h); err == nil {
		t.Fatal("New accepted a key neither kmsg nor the handler knows")
	}

	s := startServer(t, Config{}, privateHandler{h})
	_, addr, _ := parseListener(s.Addrs()[0])
	versions := kversion.Stable()
	versions.SetMaxKeyVersion(echoKey, 0) // else kgo refuses a key it does not know
	cl, err := kgo.NewClient(kgo.SeedBrokers(addr), kgo.MaxVersions(versions))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	resp, err := cl.Request(ctx, &echoRequest{body: []byte("damaged")})
	if err != nil {
		t.Fatal(err)
	}
	if got := string(resp.(*echoResponse).body); got != "degamad" {
		t.Fatalf("echo answered %q", got)
	}
	// The connection still serves Kafka's requests after ours.
	if _, err := cl.Request(ctx, kmsg.NewPtrMetadataRequest()); err != nil {
		t.Fatal(err)
	}
}

func TestParseListenerTakesBareHostPortAsTCP(t *testing.T) {
	for _, tc := range []struct{ in, network, addr string }{
		{"127.0.0.1:9092", "tcp", "127.0.0.1:9092"},
		{"tcp://[::1]:0", "tcp", "[::1]:0"},
		{"unix:///run/a.sock", "unix", "/run/a.sock"},
		{"host", "", ""},
		{"unix://rel.sock", "", ""},
		{"PLAINTEXT://:9092", "", ""},
	} {
		network, addr, err := parseListener(tc.in)
		if network != tc.network || addr != tc.addr || (err == nil) != (tc.network != "") {
			t.Errorf("parseListener(%q) = %q, %q, %v; want %q, %q", tc.in, network, addr, err, tc.network, tc.addr)
		}
	}
}
