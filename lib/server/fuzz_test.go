package server

import (
	"errors"
	"io"
	"net"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kmsg"
)

// everyKey advertises every request kmsg can decode, at every version, so
// fuzzing reaches all of kmsg's decoders through the server.
func everyKey() []kmsg.ApiVersionsResponseApiKey {
	var keys []kmsg.ApiVersionsResponseApiKey
	for k := int16(0); k < 200; k++ {
		if req := kmsg.RequestForKey(k); req != nil && k != apiVersionsKey {
			keys = append(keys, kmsg.ApiVersionsResponseApiKey{ApiKey: k, MaxVersion: req.MaxVersion()})
		}
	}
	return keys
}

// FuzzConnection feeds arbitrary bytes to a live server as one connection's
// input. The server must not panic, must close the connection (or answer
// and then close it when the input ends), and must keep serving others.
func FuzzConnection(f *testing.F) {
	// Valid frames, alone and pipelined, besides testdata/fuzz/FuzzConnection.
	id := "fuzz"
	av := kmsg.NewPtrApiVersionsRequest()
	av.SetVersion(3)
	f.Add(appendRequest(nil, av, 1, &id))
	md := metadataRequest(12)
	md.Topics = []kmsg.MetadataRequestTopic{{Topic: kmsg.StringPtr("t")}}
	f.Add(appendRequest(appendRequest(nil, md, 2, nil), av, 3, &id))
	prod := kmsg.NewPtrProduceRequest()
	prod.SetVersion(9)
	prod.Acks = -1
	prod.Topics = []kmsg.ProduceRequestTopic{{Topic: "t", Partitions: []kmsg.ProduceRequestTopicPartition{{Partition: 0, Records: []byte{1, 2, 3}}}}}
	f.Add(appendRequest(nil, prod, 4, &id))
	f.Add([]byte{0, 0, 0, 10, 0, 18, 0, 99, 0, 0, 0, 1, 0xff, 0xff})

	h := &fakeHandler{versions: everyKey(), handle: echoReply}
	s := startServer(f, Config{MaxRequestBytes: 1 << 20, IdleTimeout: 5 * time.Second}, h)
	addr := s.Addrs()[1] // the Unix socket: cheapest per connection
	network, path, _ := parseListener(addr)

	f.Fuzz(func(t *testing.T, input []byte) {
		before := s.panics.Load()
		c, err := net.Dial(network, path)
		if err != nil {
			t.Fatal(err)
		}
		defer c.Close()
		c.SetDeadline(time.Now().Add(10 * time.Second))
		// Write while reading: the server may answer before the input ends
		// and stop reading when its in-flight window is full.
		wrote := make(chan struct{})
		go func() {
			defer close(wrote)
			c.Write(input) // the server may close early: errors are expected
			c.(*net.UnixConn).CloseWrite()
		}()
		_, err = io.Copy(io.Discard, c)
		<-wrote
		var ne net.Error
		if errors.As(err, &ne) && ne.Timeout() {
			t.Fatal("the server neither answered nor closed the connection")
		}
		if n := s.panics.Load(); n != before {
			t.Fatalf("server recovered %d panic(s) on this input", n-before)
		}
		checkAlive(t, addr)
	})
}
