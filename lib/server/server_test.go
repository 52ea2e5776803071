package server

import (
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"math/rand/v2"
	"net"
	"os"
	"path/filepath"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/mqproject/mq/lib/mqtest"
)

func TestApiVersionsAnsweredAtEachVersion(t *testing.T) {
	s := startServer(t, Config{}, newFake(nil))
	for _, addr := range s.Addrs() {
		for _, tc := range []struct {
			name        string
			version     int16
			wantVersion int16 // the version the response is encoded at
			wantErr     int16
		}{
			{"v0", 0, 0, 0},
			{"v3", 3, 3, 0},
			{"v4", 4, 4, 0},
			{"v5 not advertised", 5, 0, kerr.UnsupportedVersion.Code},
			{"v99", 99, 0, kerr.UnsupportedVersion.Code},
			{"negative", -1, 0, kerr.UnsupportedVersion.Code},
		} {
			t.Run(addr[:3]+"/"+tc.name, func(t *testing.T) {
				c := dial(t, addr)
				var frame []byte
				if tc.version <= 4 && tc.version >= 0 {
					req := kmsg.NewPtrApiVersionsRequest()
					req.SetVersion(tc.version)
					req.ClientSoftwareName = "mq-test"
					req.ClientSoftwareVersion = "1"
					id := "t"
					frame = appendRequest(nil, req, 42, &id)
				} else {
					// An unknown version's header and body may be anything.
					frame = binary.BigEndian.AppendUint32(nil, 15)
					frame = binary.BigEndian.AppendUint16(frame, apiVersionsKey)
					frame = binary.BigEndian.AppendUint16(frame, uint16(tc.version))
					frame = binary.BigEndian.AppendUint32(frame, 42)
					frame = append(frame, 0xde, 0xad, 0xbe, 0xef, 0x01, 0x02, 0x03)
				}
				if _, err := c.Write(frame); err != nil {
					t.Fatal(err)
				}
				resp := kmsg.NewPtrApiVersionsResponse()
				resp.SetVersion(tc.wantVersion)
				if corr := recv(t, c, resp); corr != 42 {
					t.Fatalf("correlation id %d, want 42", corr)
				}
				if resp.ErrorCode != tc.wantErr {
					t.Fatalf("error code %d, want %d", resp.ErrorCode, tc.wantErr)
				}
				want := map[int16][2]int16{0: {0, 13}, 3: {0, 13}, 18: {0, 4}}
				if tc.wantErr != 0 {
					// KIP-511: ApiVersions' own versions, to ask again.
					want = map[int16][2]int16{18: {0, 4}}
				}
				got := map[int16][2]int16{}
				for _, k := range resp.ApiKeys {
					got[k.ApiKey] = [2]int16{k.MinVersion, k.MaxVersion}
				}
				if len(got) != len(want) {
					t.Fatalf("api keys %v, want %v", got, want)
				}
				for k, v := range want {
					if got[k] != v {
						t.Fatalf("api keys %v, want %v", got, want)
					}
				}
				// The connection stays usable after an unsupported version.
				send(t, c, metadataRequest(12), 43)
				if corr := recv(t, c, &kmsg.MetadataResponse{Version: 12}); corr != 43 {
					t.Fatalf("correlation id %d, want 43", corr)
				}
			})
		}
	}
}

// taggingHandler adds one tagged field to its ApiVersions responses.
type taggingHandler struct{ *fakeHandler }

const testTag = 10999

func (taggingHandler) ApiVersionsTags() kmsg.Tags {
	var t kmsg.Tags
	t.Set(testTag, []byte(`"hello"`))
	return t
}

// askApiVersions sends ApiVersions at version on c, with the version as
// its correlation id, and reads the answer.
func askApiVersions(t *testing.T, c net.Conn, version int16) *kmsg.ApiVersionsResponse {
	t.Helper()
	req := kmsg.NewPtrApiVersionsRequest()
	req.SetVersion(version)
	send(t, c, req, int32(version))
	resp := kmsg.NewPtrApiVersionsResponse()
	resp.SetVersion(version)
	recv(t, c, resp)
	return resp
}

func TestApiVersionsCarryTheHandlersTagsAtFlexibleVersions(t *testing.T) {
	s := startServer(t, Config{}, taggingHandler{newFake(nil)})
	c := dial(t, s.Addrs()[0])
	for version := int16(0); version <= 4; version++ {
		resp := askApiVersions(t, c, version)
		var got []string
		resp.UnknownTags.Each(func(k uint32, v []byte) { got = append(got, fmt.Sprintf("%d=%s", k, v)) })
		want := []string{fmt.Sprintf("%d=%s", testTag, `"hello"`)}
		if version < 3 {
			want = nil // no tagged fields before v3
		}
		if !slices.Equal(got, want) {
			t.Errorf("v%d: tags %v, want %v", version, got, want)
		}
		if resp.ErrorCode != 0 || len(resp.ApiKeys) != 3 {
			t.Errorf("v%d: error %d, %d keys; the tags must not disturb the rest", version, resp.ErrorCode, len(resp.ApiKeys))
		}
	}
}

// featuringHandler advertises one feature, finalized at level 2.
type featuringHandler struct{ *fakeHandler }

func (featuringHandler) ApiVersionsFeatures() Features {
	return Features{
		Supported:      []kmsg.ApiVersionsResponseSupportedFeature{{Name: "transaction.version", MinVersion: 0, MaxVersion: 2}},
		Finalized:      []kmsg.ApiVersionsResponseFinalizedFeature{{Name: "transaction.version", MinVersionLevel: 2, MaxVersionLevel: 2}},
		FinalizedEpoch: 7,
	}
}

func TestApiVersionsCarryTheHandlersFeaturesFromV3(t *testing.T) {
	for _, tc := range []struct {
		name string
		h    Handler
		want string // at v3+
	}{
		{"features", featuringHandler{newFake(nil)}, "supported [transaction.version 0..2] finalized epoch 7 [transaction.version 2..2]"},
		{"none", newFake(nil), "supported [] finalized epoch -1 []"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s := startServer(t, Config{}, tc.h)
			c := dial(t, s.Addrs()[0])
			for version := int16(0); version <= 4; version++ {
				resp := askApiVersions(t, c, version)
				var supported, finalized []string
				for _, f := range resp.SupportedFeatures {
					supported = append(supported, fmt.Sprintf("%s %d..%d", f.Name, f.MinVersion, f.MaxVersion))
				}
				for _, f := range resp.FinalizedFeatures {
					finalized = append(finalized, fmt.Sprintf("%s %d..%d", f.Name, f.MinVersionLevel, f.MaxVersionLevel))
				}
				got := fmt.Sprintf("supported %v finalized epoch %d %v", supported, resp.FinalizedFeaturesEpoch, finalized)
				want := tc.want
				if version < 3 {
					want = "supported [] finalized epoch -1 []" // no features before v3
				}
				if got != want {
					t.Errorf("v%d: %s, want %s", version, got, want)
				}
				if resp.ErrorCode != 0 || len(resp.ApiKeys) != 3 {
					t.Errorf("v%d: error %d, %d keys; the features must not disturb the rest", version, resp.ErrorCode, len(resp.ApiKeys))
				}
			}
		})
	}
}

func TestApiVersionsRangeFromHandlerIsHonoured(t *testing.T) {
	h := newFake(nil)
	h.versions = append(slices.Clone(defaultVersions), kmsg.ApiVersionsResponseApiKey{ApiKey: apiVersionsKey, MinVersion: 0, MaxVersion: 3})
	s := startServer(t, Config{}, h)
	c := dial(t, s.Addrs()[0])
	req := kmsg.NewPtrApiVersionsRequest()
	req.SetVersion(4)
	send(t, c, req, 1)
	resp := kmsg.NewPtrApiVersionsResponse() // v0
	recv(t, c, resp)
	if resp.ErrorCode != kerr.UnsupportedVersion.Code {
		t.Fatalf("v4 with handler max 3: error %d, want %d", resp.ErrorCode, kerr.UnsupportedVersion.Code)
	}
}

// A handler serving Produce from v3, as mq's broker does, has Produce
// advertised from v0 (librdkafka compresses only when it sees v0) while
// v0-v2 requests still close the connection without reaching it.
func TestProduceAdvertisedFromV0ButServedFromHandlerMinimum(t *testing.T) {
	var handled atomic.Int32
	h := newFake(func(ctx context.Context, c *ConnInfo, req *Request) Reply {
		handled.Add(1)
		return echoReply(ctx, c, req)
	})
	h.versions = []kmsg.ApiVersionsResponseApiKey{{ApiKey: produceKey, MinVersion: 3, MaxVersion: 11}}
	s := startServer(t, Config{}, h)
	addr := s.Addrs()[0]

	c := dial(t, addr)
	req := kmsg.NewPtrApiVersionsRequest()
	req.SetVersion(3)
	send(t, c, req, 1)
	resp := kmsg.NewPtrApiVersionsResponse()
	resp.SetVersion(3)
	recv(t, c, resp)
	got := map[int16][2]int16{}
	for _, k := range resp.ApiKeys {
		got[k.ApiKey] = [2]int16{k.MinVersion, k.MaxVersion}
	}
	if want := [2]int16{0, 11}; got[produceKey] != want {
		t.Fatalf("Produce advertised as %v, want %v (all keys: %v)", got[produceKey], want, got)
	}

	produce := func(version int16) *kmsg.ProduceRequest {
		r := kmsg.NewPtrProduceRequest()
		r.SetVersion(version)
		r.Acks = 1
		return r
	}
	for v := int16(0); v < 3; v++ {
		c := dial(t, addr)
		send(t, c, produce(v), 2)
		expectClosed(t, c)
	}
	if n := handled.Load(); n != 0 {
		t.Fatalf("handler saw %d Produce requests below v3", n)
	}
	for _, v := range []int16{3, 11} {
		c := dial(t, addr)
		send(t, c, produce(v), 3)
		if corr := recv(t, c, &kmsg.ProduceResponse{Version: v}); corr != 3 {
			t.Fatalf("Produce v%d: correlation id %d, want 3", v, corr)
		}
	}
	if n := handled.Load(); n != 2 {
		t.Fatalf("handler saw %d Produce requests at v3 and v11, want 2", n)
	}
}

func TestKgoClientNegotiatesApiVersions(t *testing.T) {
	s := startServer(t, Config{}, newFake(nil))
	network, addr, _ := parseListener(s.Addrs()[1])
	cl, err := kgo.NewClient(
		kgo.SeedBrokers("mq:9092"),
		kgo.Dialer(func(ctx context.Context, _, _ string) (net.Conn, error) {
			var d net.Dialer
			return d.DialContext(ctx, network, addr)
		}),
	)
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	resp, err := cl.Request(ctx, kmsg.NewPtrApiVersionsRequest())
	if err != nil {
		t.Fatal(err)
	}
	av := resp.(*kmsg.ApiVersionsResponse)
	if av.ErrorCode != 0 || len(av.ApiKeys) != 3 {
		t.Fatalf("kgo ApiVersions: error %d keys %v", av.ErrorCode, av.ApiKeys)
	}
}

func TestNewRejectsBadConfig(t *testing.T) {
	h := newFake(nil)
	for _, tc := range []struct {
		name     string
		cfg      Config
		versions []kmsg.ApiVersionsResponseApiKey
	}{
		{"no listeners", Config{}, nil},
		{"bad scheme", Config{Listeners: []string{"http://x"}}, nil},
		{"relative unix path", Config{Listeners: []string{"unix://rel/sock"}}, nil},
		{"tcp without port", Config{Listeners: []string{"tcp://localhost"}}, nil},
		{"tiny max request", Config{Listeners: []string{"tcp://127.0.0.1:0"}, MaxRequestBytes: 3}, nil},
		{"budget below the default max request", Config{Listeners: []string{"tcp://127.0.0.1:0"}, QueuedMaxRequestBytes: DefaultMaxRequestBytes - 1}, nil},
		{"budget below max request", Config{Listeners: []string{"tcp://127.0.0.1:0"}, MaxRequestBytes: 2 << 20, QueuedMaxRequestBytes: 1 << 20}, nil},
		{"negative body timeout", Config{Listeners: []string{"tcp://127.0.0.1:0"}, RequestBodyTimeout: -1}, nil},
		{"negative body rate", Config{Listeners: []string{"tcp://127.0.0.1:0"}, MinRequestBodyRate: -1}, nil},
		{"unknown key", Config{Listeners: []string{"tcp://127.0.0.1:0"}}, []kmsg.ApiVersionsResponseApiKey{{ApiKey: 9999}}},
		{"version beyond kmsg", Config{Listeners: []string{"tcp://127.0.0.1:0"}}, []kmsg.ApiVersionsResponseApiKey{{ApiKey: 3, MaxVersion: 99}}},
		{"min above max", Config{Listeners: []string{"tcp://127.0.0.1:0"}}, []kmsg.ApiVersionsResponseApiKey{{ApiKey: 3, MinVersion: 4, MaxVersion: 1}}},
		{"duplicate", Config{Listeners: []string{"tcp://127.0.0.1:0"}}, []kmsg.ApiVersionsResponseApiKey{{ApiKey: 3}, {ApiKey: 3}}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			h.versions = tc.versions
			if h.versions == nil {
				h.versions = defaultVersions
			}
			if _, err := New(tc.cfg, h); err == nil {
				t.Fatal("New accepted it")
			}
		})
	}
}

func TestPipelinedRepliesCompletingOutOfOrderAreAnsweredInOrder(t *testing.T) {
	const n = 50
	release := make([]chan struct{}, n)
	for i := range release {
		release[i] = make(chan struct{})
	}
	var handled []int32
	h := newFake(func(ctx context.Context, _ *ConnInfo, req *Request) Reply {
		handled = append(handled, req.CorrelationID) // reader goroutine only
		ch := release[req.CorrelationID%n]
		done := make(chan Response, 1)
		// The work completes on its own goroutine, in an order the test
		// chooses; the Reply waits for it.
		go func() {
			<-ch
			resp := req.Body.ResponseKind().(*kmsg.MetadataResponse)
			resp.ClusterID = kmsg.StringPtr(string(rune('a' + req.CorrelationID%26)))
			done <- Response{Msg: resp}
		}()
		return func() Response {
			select {
			case r := <-done:
				return r
			case <-ctx.Done():
				return Response{}
			}
		}
	})
	s := startServer(t, Config{}, h)
	for _, addr := range s.Addrs() {
		t.Run(addr[:3], func(t *testing.T) {
			handled = handled[:0]
			base := int32(1000)
			if addr[:3] == "uni" {
				base = 2000
			}
			for i := range release {
				release[i] = make(chan struct{})
			}
			c := dial(t, addr)
			var frames []byte
			for i := range int32(n) {
				frames = appendRequest(frames, metadataRequest(int16(i%13)), base+i, nil)
			}
			if _, err := c.Write(frames); err != nil {
				t.Fatal(err)
			}
			// Complete them in a random order.
			seed := rand.Uint64()
			t.Logf("seed %d", seed)
			r := rand.New(rand.NewPCG(seed, 0))
			for _, i := range r.Perm(n) {
				close(release[(int(base)+i)%n])
			}
			for i := range int32(n) {
				resp := &kmsg.MetadataResponse{Version: int16(i % 13)}
				corr := recv(t, c, resp)
				if corr != base+i {
					t.Fatalf("response %d has correlation id %d, want %d", i, corr, base+i)
				}
				if want := string(rune('a' + (base+i)%26)); i%13 >= 2 && (resp.ClusterID == nil || *resp.ClusterID != want) {
					t.Fatalf("response %d: cluster id %v, want %q", i, resp.ClusterID, want)
				}
			}
			if len(handled) != n || !slices.IsSorted(handled) {
				t.Fatalf("Handle saw %v, want %d correlation ids in order", handled, n)
			}
		})
	}
}

func TestReaderStopsAtMaxInFlight(t *testing.T) {
	const n = MaxInFlight * 2
	var handled, replied atomic.Int64
	var violation atomic.Value
	gate := make(chan struct{})
	h := newFake(func(_ context.Context, _ *ConnInfo, req *Request) Reply {
		i := handled.Add(1)
		// The writer returns a slot only after a Reply has returned, so when
		// Handle runs for request i, at least i-MaxInFlight have returned.
		if r := replied.Load(); i-r > MaxInFlight {
			violation.Store(i)
		}
		return func() Response {
			<-gate
			replied.Add(1)
			return Response{Msg: req.Body.ResponseKind()}
		}
	})
	s := startServer(t, Config{}, h)
	c := dial(t, s.Addrs()[0])
	var frames []byte
	for i := range int32(n) {
		frames = appendRequest(frames, metadataRequest(9), i, nil)
	}
	go c.Write(frames)
	mqtest.WaitFor(t, "the reader to fill its in-flight window", func() (bool, string) {
		n := handled.Load()
		return n == MaxInFlight, fmt.Sprintf("%d of %d handled", n, MaxInFlight)
	})
	close(gate)
	for i := range int32(n) {
		if corr := recv(t, c, &kmsg.MetadataResponse{Version: 9}); corr != i {
			t.Fatalf("correlation id %d, want %d", corr, i)
		}
	}
	if v := violation.Load(); v != nil {
		t.Fatalf("request %d handled with more than %d in flight", v, MaxInFlight)
	}
}

func TestEmptyResponsesWriteNothingAndKeepOrder(t *testing.T) {
	h := newFake(func(_ context.Context, _ *ConnInfo, req *Request) Reply {
		switch req.CorrelationID % 3 {
		case 0:
			return nil
		case 1:
			return func() Response { return Response{} }
		}
		return func() Response { return Response{Msg: req.Body.ResponseKind()} }
	})
	s := startServer(t, Config{}, h)
	c := dial(t, s.Addrs()[0])
	var frames []byte
	for i := range int32(30) {
		frames = appendRequest(frames, metadataRequest(12), i, nil)
	}
	if _, err := c.Write(frames); err != nil {
		t.Fatal(err)
	}
	for i := int32(2); i < 30; i += 3 {
		if corr := recv(t, c, &kmsg.MetadataResponse{Version: 12}); corr != i {
			t.Fatalf("correlation id %d, want %d", corr, i)
		}
	}
}

func TestCloseAfterClosesTheConnection(t *testing.T) {
	h := newFake(func(_ context.Context, _ *ConnInfo, req *Request) Reply {
		return func() Response { return Response{Msg: req.Body.ResponseKind(), CloseAfter: true} }
	})
	s := startServer(t, Config{}, h)
	c := dial(t, s.Addrs()[0])
	send(t, c, metadataRequest(1), 5)
	if corr := recv(t, c, &kmsg.MetadataResponse{Version: 1}); corr != 5 {
		t.Fatalf("correlation id %d", corr)
	}
	expectClosed(t, c)
}

func TestFilePartsAreSentByteExact(t *testing.T) {
	content := make([]byte, 3<<20)
	for i := range content {
		content[i] = byte(i*7 + i>>11)
	}
	f := writeTemp(t, content)
	type region struct{ off, len int64 }
	var regions = []region{{0, 10}, {100, 5000}, {1, int64(len(content)) - 1}, {12345, 0}}
	h := newFake(func(_ context.Context, _ *ConnInfo, req *Request) Reply {
		r := regions[req.CorrelationID%int32(len(regions))]
		return func() Response {
			return Response{
				Flexible: req.CorrelationID%2 == 0,
				Parts: []Part{
					{Bytes: []byte("head")},
					{Bytes: []byte("-")},
					{File: f, Offset: r.off, Len: r.len},
					{Bytes: []byte("tail")},
					{File: f, Offset: 3, Len: 4},
				},
			}
		}
	})
	s := startServer(t, Config{}, h)
	for _, addr := range s.Addrs() {
		t.Run(addr[:3], func(t *testing.T) {
			// Several connections send regions of the same file at once.
			var wg sync.WaitGroup
			for range 3 {
				c := dial(t, addr)
				wg.Go(func() {
					var frames []byte
					for i := range int32(8) {
						frames = appendRequest(frames, metadataRequest(0), i, nil)
					}
					if _, err := c.Write(frames); err != nil {
						t.Error(err)
						return
					}
					for i := range int32(8) {
						corr, body, err := readFrame(c)
						if err != nil {
							t.Error(err)
							return
						}
						if corr != i {
							t.Errorf("correlation id %d, want %d", corr, i)
						}
						if i%2 == 0 {
							if body[0] != 0 {
								t.Errorf("flexible header: tag byte %d", body[0])
							}
							body = body[1:]
						}
						r := regions[i%int32(len(regions))]
						want := slices.Concat([]byte("head-"), content[r.off:r.off+r.len], []byte("tail"), content[3:7])
						if !bytes.Equal(body, want) {
							t.Errorf("response %d: %d bytes differ from the %d expected", i, len(body), len(want))
						}
					}
				})
			}
			wg.Wait()
		})
	}
}

func TestManyFilePartsAreGatheredByteExact(t *testing.T) {
	// A response of many regions, as a fetch over many partitions: small
	// ones gathered into writes of maxStaged bytes and more, larger ones
	// sent between them, and byte parts small and large.
	content := make([]byte, 1<<20)
	for i := range content {
		content[i] = byte(i*13 + i>>9)
	}
	f := writeTemp(t, content)
	big := bytes.Repeat([]byte("B"), maxStagedRegion+1)
	sizes := []int64{0, 1, 999, 3 << 10, maxStagedRegion, maxStagedRegion + 1, 17 << 10}
	var parts []Part
	var want []byte
	for i := range 200 {
		n := sizes[i%len(sizes)]
		off := int64(i*4099) % (int64(len(content)) - n)
		header := []byte(fmt.Sprintf("partition %d:", i))
		if i%50 == 49 {
			header = big
		}
		parts = append(parts, Part{Bytes: header}, Part{File: f, Offset: off, Len: n})
		want = append(append(want, header...), content[off:off+n]...)
	}
	h := newFake(func(_ context.Context, _ *ConnInfo, req *Request) Reply {
		return req.Ready(Response{Parts: parts})
	})
	s := startServer(t, Config{}, h)
	for _, addr := range s.Addrs() {
		t.Run(addr[:3], func(t *testing.T) {
			c := dial(t, addr)
			for corr := range int32(3) {
				send(t, c, metadataRequest(0), corr)
				got, body, err := readFrame(c)
				if err != nil || got != corr {
					t.Fatalf("response %d: correlation id %d, err %v", corr, got, err)
				}
				if !bytes.Equal(body, want) {
					t.Fatalf("response %d: %d bytes differ from the %d expected", corr, len(body), len(want))
				}
			}
		})
	}
}

func writeTemp(t testing.TB, content []byte) *os.File {
	t.Helper()
	f, err := os.CreateTemp(t.TempDir(), "segment")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { f.Close() })
	if _, err := f.Write(content); err != nil {
		t.Fatal(err)
	}
	return f
}

func TestFileRegionPastEndOfTruncatedFileClosesConnection(t *testing.T) {
	f := writeTemp(t, bytes.Repeat([]byte("x"), 1000))
	closed := writeTemp(t, []byte("gone"))
	closed.Close()
	h := newFake(func(_ context.Context, _ *ConnInfo, req *Request) Reply {
		return func() Response {
			switch req.CorrelationID {
			case 1:
				return Response{Parts: []Part{{Bytes: []byte("h")}, {File: f, Offset: 500, Len: 2000}}}
			case 2:
				return Response{Parts: []Part{{File: f, Offset: 5000, Len: 10}}}
			default:
				return Response{Parts: []Part{{File: closed, Offset: 0, Len: 4}}}
			}
		}
	})
	s := startServer(t, Config{}, h)
	for _, addr := range s.Addrs() {
		for corr := int32(1); corr <= 3; corr++ {
			c := dial(t, addr)
			send(t, c, metadataRequest(0), corr)
			expectClosed(t, c)
		}
		checkAlive(t, addr)
	}
}

func TestCopyFileRegionFallback(t *testing.T) {
	content := bytes.Repeat([]byte("0123456789"), 20000)
	f := writeTemp(t, content)
	var out bytes.Buffer
	if err := copyFileRegion(&out, f, 7, 150000); err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(out.Bytes(), content[7:150007]) {
		t.Fatal("copied bytes differ")
	}
	if err := copyFileRegion(io.Discard, f, 199990, 11); !errors.Is(err, errFileShort) {
		t.Fatalf("region past the end: %v, want errFileShort", err)
	}
}

func TestFilePartsOverNetPipeUseFallback(t *testing.T) {
	content := bytes.Repeat([]byte("abc"), 50000)
	f := writeTemp(t, content)
	h := newFake(func(_ context.Context, _ *ConnInfo, req *Request) Reply {
		return func() Response {
			return Response{Parts: []Part{{File: f, Offset: 2, Len: 100000}}}
		}
	})
	s, err := New(Config{Listeners: []string{"tcp://127.0.0.1:0"}, Logger: testLogger(t)}, h)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	client, srv := net.Pipe()
	defer client.Close()
	s.startConn(srv, &listener{network: "pipe"})
	client.SetDeadline(time.Now().Add(10 * time.Second))
	send(t, client, metadataRequest(0), 9)
	corr, body, err := readFrame(client)
	if err != nil || corr != 9 || !bytes.Equal(body, content[2:100002]) {
		t.Fatalf("corr %d err %v, body equal %v", corr, err, bytes.Equal(body, content[2:100002]))
	}
}

func TestBadFramesCloseOnlyTheirConnection(t *testing.T) {
	h := newFake(nil)
	h.versions = []kmsg.ApiVersionsResponseApiKey{{ApiKey: 3, MinVersion: 1, MaxVersion: 12}}
	s := startServer(t, Config{MaxRequestBytes: 1024}, h)
	header := func(key, version int16, rest ...byte) []byte {
		b := binary.BigEndian.AppendUint16(nil, uint16(key))
		b = binary.BigEndian.AppendUint16(b, uint16(version))
		b = binary.BigEndian.AppendUint32(b, 1)
		return append(b, rest...)
	}
	frame := func(body []byte) []byte {
		return append(binary.BigEndian.AppendUint32(nil, uint32(len(body))), body...)
	}
	for _, tc := range []struct {
		name  string
		bytes []byte
	}{
		{"oversized", binary.BigEndian.AppendUint32(nil, 1025)},
		{"huge", binary.BigEndian.AppendUint32(nil, 0x7fffffff)},
		{"negative size", binary.BigEndian.AppendUint32(nil, 0xffffffff)},
		{"below header minimum", frame([]byte{0, 3, 0, 1, 0, 0, 0, 1, 0})},
		{"unknown api key", frame(header(9999, 0, 0xff, 0xff))},
		{"key not advertised", frame(header(0, 9, 0xff, 0xff))},
		{"version not advertised", frame(header(3, 0, 0xff, 0xff))},
		{"version above advertised", frame(header(3, 13, 0xff, 0xff, 0))},
		{"client id past the end", frame(header(3, 1, 0x00, 0x40, 'a'))},
		{"negative client id length", frame(header(3, 1, 0x80, 0x00))},
		{"truncated body", frame(header(3, 1, 0xff, 0xff, 0, 0, 0, 5))},
		{"bad header tags", frame(header(3, 12, 0xff, 0xff, 0x05, 0x01))},
		{"half a size then EOF", []byte{0, 0}},
		{"half a frame then EOF", []byte{0, 0, 0, 100, 0, 3}},
	} {
		for _, addr := range s.Addrs() {
			t.Run(addr[:3]+"/"+tc.name, func(t *testing.T) {
				c := dial(t, addr)
				if _, err := c.Write(tc.bytes); err != nil {
					t.Fatal(err)
				}
				if cw, ok := c.(interface{ CloseWrite() error }); ok && tc.name[:4] == "half" {
					cw.CloseWrite()
				}
				expectClosed(t, c)
				checkAlive(t, addr)
				budgetUsed(t, s, 0)
			})
		}
	}
}

func TestFlexibleHeaderTagsAreSkipped(t *testing.T) {
	var gotClient *string
	h := newFake(func(ctx context.Context, c *ConnInfo, req *Request) Reply {
		gotClient = req.ClientID
		return echoReply(ctx, c, req)
	})
	s := startServer(t, Config{}, h)
	c := dial(t, s.Addrs()[0])
	req := metadataRequest(12)
	body := req.AppendTo(nil)
	b := binary.BigEndian.AppendUint16(nil, 3)
	b = binary.BigEndian.AppendUint16(b, 12)
	b = binary.BigEndian.AppendUint32(b, 8)
	b = binary.BigEndian.AppendUint16(b, 2)
	b = append(b, "me"...)
	b = append(b, 2, 0, 3, 'a', 'b', 'c', 7, 0) // two header tags
	b = append(b, body...)
	if _, err := c.Write(append(binary.BigEndian.AppendUint32(nil, uint32(len(b))), b...)); err != nil {
		t.Fatal(err)
	}
	if corr := recv(t, c, &kmsg.MetadataResponse{Version: 12}); corr != 8 {
		t.Fatalf("correlation id %d", corr)
	}
	if gotClient == nil || *gotClient != "me" {
		t.Fatalf("client id %v", gotClient)
	}
}

func TestIdleConnectionIsClosed(t *testing.T) {
	s := startServer(t, Config{IdleTimeout: 50 * time.Millisecond}, newFake(nil))
	for _, addr := range s.Addrs() {
		c := dial(t, addr)
		expectClosed(t, c)
	}
}

func TestOutstandingReplyIsNotIdleness(t *testing.T) {
	const idle = 50 * time.Millisecond
	gate := make(chan struct{})
	h := newFake(func(_ context.Context, _ *ConnInfo, req *Request) Reply {
		return func() Response {
			<-gate
			return Response{Msg: req.Body.ResponseKind()}
		}
	})
	s := startServer(t, Config{IdleTimeout: idle}, h)
	c := dial(t, s.Addrs()[0])
	send(t, c, metadataRequest(4), 3)
	// Several idle periods pass while the reply is pending: no close.
	c.SetReadDeadline(time.Now().Add(6 * idle))
	var one [1]byte
	if _, err := c.Read(one[:]); err == nil || !errors.Is(err, os.ErrDeadlineExceeded) {
		t.Fatalf("read while reply pending: %v, want our own deadline", err)
	}
	close(gate)
	c.SetReadDeadline(time.Now().Add(10 * time.Second))
	if corr := recv(t, c, &kmsg.MetadataResponse{Version: 4}); corr != 3 {
		t.Fatalf("correlation id %d", corr)
	}
	expectClosed(t, c) // and idle again afterwards
}

func TestHandlerPanicClosesOnlyThatConnection(t *testing.T) {
	h := newFake(func(_ context.Context, _ *ConnInfo, req *Request) Reply {
		if req.CorrelationID == 666 {
			panic("handler bug")
		}
		return func() Response { return Response{Msg: req.Body.ResponseKind()} }
	})
	s, err := New(Config{Listeners: []string{"tcp://127.0.0.1:0"}}, h)
	if err != nil {
		t.Fatal(err)
	}
	if err := s.Start(); err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	c := dial(t, s.Addrs()[0])
	send(t, c, metadataRequest(1), 666)
	expectClosed(t, c)
	checkAlive(t, s.Addrs()[0])
	if s.panics.Load() != 1 {
		t.Fatalf("panics %d, want 1", s.panics.Load())
	}
}

func TestShutdownWaitsForInFlightReply(t *testing.T) {
	entered := make(chan struct{})
	gate := make(chan struct{})
	var handled, replies atomic.Int64
	h := newFake(func(ctx context.Context, _ *ConnInfo, req *Request) Reply {
		handled.Add(1)
		return func() Response {
			defer replies.Add(1)
			if req.CorrelationID == 1 {
				close(entered)
				<-gate
			}
			if ctx.Err() != nil {
				t.Error("handler context cancelled during a graceful shutdown")
			}
			return Response{Msg: req.Body.ResponseKind()}
		}
	})
	s := startServer(t, Config{}, h)
	addrs := s.Addrs()
	_, sock, _ := parseListener(addrs[1])
	c := dial(t, addrs[1])
	var frames []byte
	for i := range int32(3) {
		frames = appendRequest(frames, metadataRequest(7), 1+i, nil)
	}
	if _, err := c.Write(frames); err != nil {
		t.Fatal(err)
	}
	<-entered
	mqtest.WaitFor(t, "all three requests to be read", func() (bool, string) {
		n := handled.Load()
		return n == 3, fmt.Sprintf("%d handled", n)
	})
	if replies.Load() != 0 {
		t.Fatal("a Reply returned before the gate opened")
	}
	shutdown := make(chan error, 1)
	go func() { shutdown <- s.Shutdown(context.Background()) }()
	mqtest.WaitFor(t, "the socket file to be removed", func() (bool, string) {
		_, err := os.Stat(sock)
		return errors.Is(err, fs.ErrNotExist), fmt.Sprintf("stat: %v", err)
	})
	if _, err := net.Dial("tcp", addrs[0][len("tcp://"):]); err == nil {
		t.Fatal("new connection accepted after Shutdown began")
	}
	select {
	case err := <-shutdown:
		t.Fatalf("Shutdown returned %v while a Reply was blocked", err)
	default:
	}
	close(gate)
	for i := range int32(3) {
		if corr := recv(t, c, &kmsg.MetadataResponse{Version: 7}); corr != 1+i {
			t.Fatalf("correlation id %d, want %d", corr, 1+i)
		}
	}
	if err := <-shutdown; err != nil {
		t.Fatalf("Shutdown: %v", err)
	}
	expectClosed(t, c)
}

func TestShutdownGivesUpWhenContextEnds(t *testing.T) {
	entered := make(chan struct{})
	sawCancel := make(chan struct{})
	h := newFake(func(ctx context.Context, _ *ConnInfo, req *Request) Reply {
		return func() Response {
			close(entered)
			<-ctx.Done()
			close(sawCancel)
			return Response{Msg: req.Body.ResponseKind()}
		}
	})
	s := startServer(t, Config{}, h)
	c := dial(t, s.Addrs()[0])
	send(t, c, metadataRequest(7), 1)
	<-entered
	ctx, cancel := context.WithTimeout(context.Background(), 50*time.Millisecond)
	defer cancel()
	if err := s.Shutdown(ctx); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("Shutdown: %v, want deadline exceeded", err)
	}
	<-sawCancel
	expectClosed(t, c)
}

func TestServeReturnsAfterShutdown(t *testing.T) {
	s, err := New(Config{Listeners: []string{"tcp://127.0.0.1:0"}}, newFake(nil))
	if err != nil {
		t.Fatal(err)
	}
	served := make(chan error, 1)
	go func() { served <- s.Serve() }()
	mqtest.WaitFor(t, "Serve to listen", func() (bool, string) {
		addrs := s.Addrs()
		return len(addrs) == 1, fmt.Sprintf("addresses %v", addrs)
	})
	checkAlive(t, s.Addrs()[0])
	if err := s.Shutdown(context.Background()); err != nil {
		t.Fatal(err)
	}
	if err := <-served; err != nil {
		t.Fatalf("Serve: %v", err)
	}
	if err := s.Start(); err == nil {
		t.Fatal("Start after Shutdown succeeded")
	}
}

func TestUnixSocketFile(t *testing.T) {
	path := shortSocketPath(t)
	s := startServer(t, Config{Listeners: []string{"unix://" + path}}, newFake(nil))
	if got := s.Addrs(); len(got) != 1 || got[0] != "unix://"+path {
		t.Fatalf("Addrs %v", got)
	}
	fi, err := os.Stat(path)
	if err != nil {
		t.Fatal(err)
	}
	if fi.Mode().Perm() != 0o660 {
		t.Fatalf("socket mode %v, want 0660", fi.Mode().Perm())
	}
	di, err := os.Stat(filepath.Dir(path))
	if err != nil {
		t.Fatal(err)
	}
	if di.Mode().Perm()&^0o750 != 0 {
		t.Fatalf("socket directory mode %v, want at most 0750", di.Mode().Perm())
	}

	t.Run("live server answers", func(t *testing.T) {
		s2, err := New(Config{Listeners: []string{"unix://" + path}}, newFake(nil))
		if err != nil {
			t.Fatal(err)
		}
		if err := s2.Start(); !errors.Is(err, ErrAddressInUse) {
			t.Fatalf("second server on a live socket: %v, want ErrAddressInUse", err)
		}
		checkAlive(t, "unix://"+path)
	})

	t.Run("stale socket replaced", func(t *testing.T) {
		stale := shortSocketPath(t)
		os.MkdirAll(filepath.Dir(stale), 0o750)
		l, err := net.ListenUnix("unix", &net.UnixAddr{Name: stale, Net: "unix"})
		if err != nil {
			t.Fatal(err)
		}
		l.SetUnlinkOnClose(false)
		l.Close()
		s3 := startServer(t, Config{Listeners: []string{"unix://" + stale}}, newFake(nil))
		checkAlive(t, s3.Addrs()[0])
		if err := s3.Shutdown(context.Background()); err != nil {
			t.Fatal(err)
		}
		if _, err := os.Stat(stale); !errors.Is(err, fs.ErrNotExist) {
			t.Fatalf("socket file after shutdown: %v", err)
		}
	})

	t.Run("regular file not removed", func(t *testing.T) {
		p := shortSocketPath(t)
		os.MkdirAll(filepath.Dir(p), 0o750)
		os.WriteFile(p, []byte("data"), 0o600)
		s4, err := New(Config{Listeners: []string{"unix://" + p}}, newFake(nil))
		if err != nil {
			t.Fatal(err)
		}
		if err := s4.Start(); err == nil {
			s4.Close()
			t.Fatal("listened over a regular file")
		}
		if b, _ := os.ReadFile(p); string(b) != "data" {
			t.Fatal("regular file was changed")
		}
	})
}

func TestEveryReplyIsCalledOnceEvenAfterClose(t *testing.T) {
	var handled, called atomic.Int64
	gate := make(chan struct{})
	h := newFake(func(ctx context.Context, _ *ConnInfo, req *Request) Reply {
		handled.Add(1)
		return func() Response {
			called.Add(1)
			select {
			case <-gate:
			case <-ctx.Done():
			}
			return Response{Msg: req.Body.ResponseKind()}
		}
	})
	s := startServer(t, Config{}, h)
	c := dial(t, s.Addrs()[1])
	var frames []byte
	for i := range int32(10) {
		frames = appendRequest(frames, metadataRequest(7), i, nil)
	}
	if _, err := c.Write(frames); err != nil {
		t.Fatal(err)
	}
	mqtest.WaitFor(t, "ten requests handled", func() (bool, string) {
		n := handled.Load()
		return n == 10, fmt.Sprintf("%d handled", n)
	})
	c.Close()
	mqtest.WaitFor(t, "every Reply called", func() (bool, string) {
		n := called.Load()
		return n == 10, fmt.Sprintf("%d of 10 called", n)
	})
	mqtest.WaitFor(t, "the connection to be forgotten", func() (bool, string) {
		s.mu.Lock()
		defer s.mu.Unlock()
		return len(s.conns) == 0, fmt.Sprintf("%d connections", len(s.conns))
	})
}

func TestLargeRequestIsReadWhole(t *testing.T) {
	records := make([]byte, 3<<20+17)
	for i := range records {
		records[i] = byte(i)
	}
	got := make(chan []byte, 1)
	h := newFake(func(ctx context.Context, c *ConnInfo, req *Request) Reply {
		got <- req.Body.(*kmsg.ProduceRequest).Topics[0].Partitions[0].Records
		return echoReply(ctx, c, req)
	})
	s := startServer(t, Config{}, h)
	c := dial(t, s.Addrs()[0])
	prod := kmsg.NewPtrProduceRequest()
	prod.SetVersion(9)
	prod.Topics = []kmsg.ProduceRequestTopic{{Topic: "t", Partitions: []kmsg.ProduceRequestTopicPartition{{Records: records}}}}
	send(t, c, prod, 11)
	if corr := recv(t, c, &kmsg.ProduceResponse{Version: 9}); corr != 11 {
		t.Fatalf("correlation id %d", corr)
	}
	if !bytes.Equal(<-got, records) {
		t.Fatal("records differ")
	}
}

func TestDoneIsCalledAfterWriteAndAfterDrop(t *testing.T) {
	var written, dropped atomic.Int32
	release := make(chan struct{})
	h := newFake(func(_ context.Context, _ *ConnInfo, req *Request) Reply {
		if req.CorrelationID == 1 {
			return func() Response {
				return Response{Msg: req.Body.ResponseKind(), Done: func() { written.Add(1) }}
			}
		}
		return func() Response {
			<-release // the client has gone by now
			return Response{Msg: req.Body.ResponseKind(), Done: func() { dropped.Add(1) }}
		}
	})
	s := startServer(t, Config{}, h)
	c := dial(t, s.Addrs()[0])
	send(t, c, metadataRequest(0), 1)
	recv(t, c, &kmsg.MetadataResponse{Version: 0})
	mqtest.WaitFor(t, "Done after write", func() (bool, string) {
		n := written.Load()
		return n == 1, fmt.Sprintf("%d Done calls after a write", n)
	})

	send(t, c, metadataRequest(0), 2)
	c.Close()
	close(release)
	mqtest.WaitFor(t, "Done after drop", func() (bool, string) {
		n := dropped.Load()
		return n == 1, fmt.Sprintf("%d Done calls after a drop", n)
	})
}

func TestReadyAndBlockingRepliesMixedAreAnsweredInOrder(t *testing.T) {
	const n = 200
	seed := rand.Uint64()
	t.Logf("seed %d", seed)
	r := rand.New(rand.NewPCG(seed, 0))
	ready := make([]bool, n) // which requests are answered with Ready
	release := make([]chan struct{}, n)
	for i := range ready {
		ready[i] = r.IntN(3) > 0
		release[i] = make(chan struct{})
	}
	var done atomic.Int64
	h := newFake(func(ctx context.Context, _ *ConnInfo, req *Request) Reply {
		i := req.CorrelationID
		resp := req.Body.ResponseKind().(*kmsg.MetadataResponse)
		resp.ClusterID = kmsg.StringPtr(fmt.Sprint(i))
		if ready[i] {
			return req.Ready(Response{Msg: resp, Done: func() { done.Add(1) }})
		}
		return func() Response {
			select {
			case <-release[i]:
			case <-ctx.Done():
			}
			return Response{Msg: resp, Done: func() { done.Add(1) }}
		}
	})
	s := startServer(t, Config{}, h)
	c := dial(t, s.Addrs()[0])
	// Blocking replies are released in a random order while requests are
	// still being sent, a few at a time, so that Ready responses meet both
	// an idle writer and a queue with blocked replies ahead of them.
	go func() {
		for _, i := range r.Perm(n) {
			close(release[i])
		}
	}()
	go func() {
		for i := 0; i < n; {
			k := min(n-i, 1+i%7)
			var frames []byte
			for j := range k {
				frames = appendRequest(frames, metadataRequest(12), int32(i+j), nil)
			}
			if _, err := c.Write(frames); err != nil {
				return
			}
			i += k
		}
	}()
	for i := range int32(n) {
		resp := &kmsg.MetadataResponse{Version: 12}
		corr := recv(t, c, resp)
		if corr != i || resp.ClusterID == nil || *resp.ClusterID != fmt.Sprint(i) {
			t.Fatalf("response %d: correlation id %d, cluster id %v", i, corr, resp.ClusterID)
		}
	}
	mqtest.WaitFor(t, "every Done hook", func() (bool, string) {
		d := done.Load()
		return d == n, fmt.Sprintf("%d of %d Done hooks", d, n)
	})
}

func TestReadyResponseAfterBlockedReplyWaitsForIt(t *testing.T) {
	gate := make(chan struct{})
	h := newFake(func(ctx context.Context, _ *ConnInfo, req *Request) Reply {
		resp := req.Body.ResponseKind()
		if req.CorrelationID == 0 {
			return func() Response {
				<-gate
				return Response{Msg: resp}
			}
		}
		return req.Ready(Response{Msg: resp})
	})
	s := startServer(t, Config{}, h)
	c := dial(t, s.Addrs()[1])
	var frames []byte
	for i := range int32(3) {
		frames = appendRequest(frames, metadataRequest(12), i, nil)
	}
	if _, err := c.Write(frames); err != nil {
		t.Fatal(err)
	}
	close(gate)
	for i := range int32(3) {
		if corr := recv(t, c, &kmsg.MetadataResponse{Version: 12}); corr != i {
			t.Fatalf("correlation id %d, want %d", corr, i)
		}
	}
	// With nothing queued, the next Ready response is written at once.
	send(t, c, metadataRequest(12), 3)
	if corr := recv(t, c, &kmsg.MetadataResponse{Version: 12}); corr != 3 {
		t.Fatalf("correlation id %d, want 3", corr)
	}
}

func TestReadyResponseWithCloseAfterClosesTheConnection(t *testing.T) {
	h := newFake(func(_ context.Context, _ *ConnInfo, req *Request) Reply {
		return req.Ready(Response{Msg: req.Body.ResponseKind(), CloseAfter: true})
	})
	s := startServer(t, Config{}, h)
	c := dial(t, s.Addrs()[0])
	send(t, c, metadataRequest(12), 1)
	if corr := recv(t, c, &kmsg.MetadataResponse{Version: 12}); corr != 1 {
		t.Fatalf("correlation id %d, want 1", corr)
	}
	expectClosed(t, c)
	checkAlive(t, s.Addrs()[0])
}
