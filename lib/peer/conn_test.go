package peer

import (
	"context"
	"encoding/binary"
	"errors"
	"io"
	"net"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kmsg"
)

// fakeBroker accepts one connection and answers each request with what
// answer returns for its correlation id and body.
func fakeBroker(t *testing.T, answer func(corr int32, req []byte) []byte) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ln.Close() })
	go func() {
		for {
			conn, err := ln.Accept()
			if err != nil {
				return
			}
			go func() {
				defer conn.Close()
				for {
					var size [4]byte
					if _, err := io.ReadFull(conn, size[:]); err != nil {
						return
					}
					body := make([]byte, binary.BigEndian.Uint32(size[:]))
					if _, err := io.ReadFull(conn, body); err != nil {
						return
					}
					corr := int32(binary.BigEndian.Uint32(body[4:8]))
					resp := answer(corr, body)
					out := binary.BigEndian.AppendUint32(nil, uint32(len(resp)))
					if _, err := conn.Write(append(out, resp...)); err != nil {
						return
					}
				}
			}()
		}
	}()
	return ln.Addr().String()
}

// metadataAnswer is a v1 Metadata response naming one broker.
func metadataAnswer(corr int32) []byte {
	resp := kmsg.NewPtrMetadataResponse()
	resp.Version = 1
	b := kmsg.NewMetadataResponseBroker()
	b.NodeID, b.Host, b.Port = 7, "peer", 9092
	resp.Brokers = append(resp.Brokers, b)
	return resp.AppendTo(binary.BigEndian.AppendUint32(nil, uint32(corr)))
}

func metadataRequest() *kmsg.MetadataRequest {
	req := kmsg.NewPtrMetadataRequest()
	req.Version = 1
	return req
}

func TestDoDecodesTheAnswerToItsRequest(t *testing.T) {
	addr := fakeBroker(t, func(corr int32, _ []byte) []byte { return metadataAnswer(corr) })
	c, err := Dial(context.Background(), addr, "test")
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	for range 3 {
		resp, err := c.Do(context.Background(), metadataRequest(), time.Second)
		if err != nil {
			t.Fatal(err)
		}
		if b := resp.(*kmsg.MetadataResponse).Brokers; len(b) != 1 || b[0].NodeID != 7 {
			t.Fatalf("brokers %+v, want node 7", b)
		}
	}
}

func TestDoRefusesAnswersItCannotTrust(t *testing.T) {
	for name, answer := range map[string]func(int32, []byte) []byte{
		"wrong correlation id": func(corr int32, _ []byte) []byte { return metadataAnswer(corr + 1) },
		"undecodable body":     func(corr int32, _ []byte) []byte { return binary.BigEndian.AppendUint32(nil, uint32(corr)) },
		"too short":            func(int32, []byte) []byte { return []byte{0} },
	} {
		t.Run(name, func(t *testing.T) {
			addr := fakeBroker(t, answer)
			c, err := Dial(context.Background(), addr, "test")
			if err != nil {
				t.Fatal(err)
			}
			defer c.Close()
			if _, err := c.Do(context.Background(), metadataRequest(), time.Second); !errors.Is(err, ErrProtocol) {
				t.Fatalf("Do: %v, want ErrProtocol", err)
			}
		})
	}
}

func TestDoEndsWithItsContext(t *testing.T) {
	silent := make(chan struct{})
	t.Cleanup(func() { close(silent) })
	addr := fakeBroker(t, func(int32, []byte) []byte { <-silent; return nil })
	c, err := Dial(context.Background(), addr, "test")
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() {
		_, err := c.Do(ctx, metadataRequest(), time.Minute)
		done <- err
	}()
	cancel()
	if err := <-done; !errors.Is(err, context.Canceled) {
		t.Fatalf("Do: %v, want context.Canceled", err)
	}
}

func TestPoolReusesHealthyConnectionsOnly(t *testing.T) {
	addr := fakeBroker(t, func(corr int32, _ []byte) []byte { return metadataAnswer(corr) })
	p := NewPool("test")
	defer p.Close()
	ctx := context.Background()
	c1, err := p.Get(ctx, addr)
	if err != nil {
		t.Fatal(err)
	}
	p.Put(c1, nil)
	c2, err := p.Get(ctx, addr)
	if err != nil {
		t.Fatal(err)
	}
	if c2 != c1 {
		t.Fatal("a healthy idle connection was not reused")
	}
	p.Put(c2, errors.New("exchange failed"))
	c3, err := p.Get(ctx, addr)
	if err != nil {
		t.Fatal(err)
	}
	if c3 == c2 {
		t.Fatal("a connection whose exchange failed was reused")
	}
	if _, err := c3.Do(ctx, metadataRequest(), time.Second); err != nil {
		t.Fatal(err)
	}
	p.Put(c3, nil)
	p.Close()
	if _, err := c3.Do(ctx, metadataRequest(), time.Second); err == nil {
		t.Fatal("an idle connection still works after the pool closed")
	}
}
