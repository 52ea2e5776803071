package server

import (
	"context"
	"encoding/binary"
	"fmt"
	"io"
	"os"
	"testing"
	"time"
)

// BenchmarkPipelinedSmallRequests measures one connection with many small
// Metadata requests in flight: one goroutine writes request frames, another
// reads the responses. Allocations are the server's (the client side reuses
// its buffers).
func BenchmarkPipelinedSmallRequests(b *testing.B) {
	h := newFake(func(_ context.Context, _ *ConnInfo, req *Request) Reply {
		return func() Response { return Response{Msg: req.Body.ResponseKind()} }
	})
	s := startServer(b, Config{}, h)
	id := "bench"
	frame := appendRequest(nil, metadataRequest(12), 0, &id)
	for _, addr := range s.Addrs() {
		b.Run(addr[:3], func(b *testing.B) { benchPipelined(b, addr, frame) })
	}
}

// BenchmarkProduceFrames sends 64 KiB produce requests over the Unix
// socket, to a handler that keeps its request buffers and to one that lets
// the server reuse them (Request.Recycle): B/op shows what the pool saves.
func BenchmarkProduceFrames(b *testing.B) {
	for _, recycle := range []bool{false, true} {
		name := map[bool]string{false: "kept", true: "recycled"}[recycle]
		b.Run(name, func(b *testing.B) {
			h := newFake(func(_ context.Context, _ *ConnInfo, req *Request) Reply {
				if recycle {
					req.Recycle()
				}
				return req.Ready(Response{Msg: req.Body.ResponseKind()})
			})
			s := startServer(b, Config{}, h)
			id := "bench"
			frame := appendRequest(nil, produceWithRecords(make([]byte, 64<<10)), 0, &id)
			benchPipelined(b, s.Addrs()[1], frame)
		})
	}
}

// benchPipelined writes b.N copies of frame (correlation ids patched) on
// one connection while another goroutine reads the responses. Allocations
// are the server's (the client side reuses its buffers).
func benchPipelined(b *testing.B, addr string, frame []byte) {
	c := dial(b, addr)
	c.SetDeadline(time.Time{})
	// Write in batches of up to 32 frames, patching the correlation ids.
	batch := max(1, min(32, (1<<20)/len(frame)))
	frames := make([]byte, 0, batch*len(frame))
	for range batch {
		frames = append(frames, frame...)
	}
	done := make(chan error, 1)
	b.ReportAllocs()
	b.SetBytes(int64(len(frame)))
	b.ResetTimer()
	start := time.Now()
	go func() {
		var size [4]byte
		buf := make([]byte, 1024)
		for i := range b.N {
			if _, err := io.ReadFull(c, size[:]); err != nil {
				done <- err
				return
			}
			n := binary.BigEndian.Uint32(size[:])
			if int(n) > len(buf) {
				buf = make([]byte, n)
			}
			if _, err := io.ReadFull(c, buf[:n]); err != nil {
				done <- err
				return
			}
			if corr := int32(binary.BigEndian.Uint32(buf)); corr != int32(i) {
				b.Errorf("correlation id %d, want %d", corr, i)
				done <- nil
				return
			}
		}
		done <- nil
	}()
	for sent := 0; sent < b.N; {
		k := min(batch, b.N-sent)
		for j := range k {
			binary.BigEndian.PutUint32(frames[j*len(frame)+8:], uint32(sent+j))
		}
		if _, err := c.Write(frames[:k*len(frame)]); err != nil {
			b.Fatal(err)
		}
		sent += k
	}
	if err := <-done; err != nil {
		b.Fatal(err)
	}
	b.ReportMetric(float64(b.N)/time.Since(start).Seconds(), "req/s")
}

// BenchmarkFileParts answers each request with a response of many file
// regions, each after a few header bytes, as a fetch over many
// partitions is: how writing a response grows with its regions at the
// same bytes (16 MiB of regions of 16 MiB, 16 KiB and 1 KiB).
func BenchmarkFileParts(b *testing.B) {
	f, err := os.CreateTemp(b.TempDir(), "segment")
	if err != nil {
		b.Fatal(err)
	}
	defer f.Close()
	const total = 16 << 20
	if _, err := f.Write(make([]byte, total)); err != nil {
		b.Fatal(err)
	}
	header := make([]byte, 40)
	for _, size := range []int64{16 << 20, 16 << 10, 1 << 10} {
		var parts []Part
		for off := int64(0); off < total; off += size {
			parts = append(parts, Part{Bytes: header}, Part{File: f, Offset: off, Len: size})
		}
		h := newFake(func(_ context.Context, _ *ConnInfo, req *Request) Reply {
			return req.Ready(Response{Parts: parts})
		})
		s := startServer(b, Config{}, h)
		id := "bench"
		frame := appendRequest(nil, metadataRequest(12), 0, &id)
		for _, addr := range s.Addrs() {
			b.Run(fmt.Sprintf("%s/regions=%d", addr[:3], len(parts)/2), func(b *testing.B) {
				benchPipelined(b, addr, frame)
				b.SetBytes(total)
			})
		}
	}
}
