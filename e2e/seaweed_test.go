package e2e

import (
	"bytes"
	"context"
	"io"
	"testing"
	"time"

	"gocloud.dev/blob"
	_ "gocloud.dev/blob/s3blob"

	"github.com/mqproject/mq/lib/mqtest"
)

// startSeaweed starts a SeaweedFS server for t, an S3-compatible store on
// loopback ports with one bucket (mqtest.StartSeaweed). Its keys are in
// this process's environment from TestMain on (mqtest.SetSeaweedEnv),
// where gocloud clients of the test and every mqd (they inherit it) find
// them. It returns the S3 endpoint and the server: URL() is the bucket's
// remote.log.storage.url, Stop and Start take the store down and bring it
// back. Without a weed binary the test is skipped, or fails in CI.
func startSeaweed(t *testing.T) (endpoint string, s *mqtest.Seaweed) {
	t.Helper()
	s = mqtest.StartSeaweed(t)
	return s.Endpoint, s
}

// TestSeaweedKeepsObjectsAcrossARestart checks the harness the tiered
// storage tests stand on: objects written through gocloud's s3blob read
// back, a stopped store refuses requests, and a restarted one still has
// the objects.
func TestSeaweedKeepsObjectsAcrossARestart(t *testing.T) {
	parallel(t)
	_, s := startSeaweed(t)
	ctx := context.Background()
	bucket, err := blob.OpenBucket(ctx, s.URL())
	if err != nil {
		t.Fatal(err)
	}
	defer bucket.Close()
	data := bytes.Repeat([]byte("0123456789abcdef"), 64<<10) // 1 MiB
	if err := bucket.WriteAll(ctx, "t-0/00000000000000000000.log", data, nil); err != nil {
		t.Fatalf("write: %v", err)
	}
	part, err := bucket.NewRangeReader(ctx, "t-0/00000000000000000000.log", 1000, 16, nil)
	if err != nil {
		t.Fatal(err)
	}
	got, err := io.ReadAll(part)
	part.Close()
	if err != nil || !bytes.Equal(got, data[1000:1016]) {
		t.Fatalf("ranged read: %q, %v", got, err)
	}

	s.Stop()
	down, cancel := context.WithTimeout(ctx, 2*time.Second)
	defer cancel()
	if _, err := bucket.ReadAll(down, "t-0/00000000000000000000.log"); err == nil {
		t.Fatal("a read from the stopped store succeeded")
	}
	s.Start()
	mqtest.Wait{Timeout: time.Minute}.For(t, "the object read back after the restart", func() (bool, string) {
		got, err := bucket.ReadAll(ctx, "t-0/00000000000000000000.log")
		if err != nil {
			return false, err.Error()
		}
		return bytes.Equal(got, data), "the bytes differ"
	})
}
