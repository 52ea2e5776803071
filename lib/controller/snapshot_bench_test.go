package controller

import (
	"bytes"
	"fmt"
	"io"
	"testing"
)

// BenchmarkSnapshotRestore100kPartitions snapshots and restores an image
// of 100,000 partitions (100 topics of 1,000, three replicas each on
// three brokers): issue 19 wants both under a second.
//
//	go test -run '^$' -bench SnapshotRestore -benchtime 3x ./lib/controller
func BenchmarkSnapshotRestore100kPartitions(b *testing.B) {
	tf := newTestFSM(b)
	tf.must(cmdControllerElected, &controllerElectedV1{NodeID: 1, ClusterID: "Zm9vYmFyYmF6cXV4cXV1dw"})
	for id := int32(1); id <= 3; id++ {
		tf.must(cmdRegisterBroker, broker(id))
	}
	const topics, perTopic = 100, 1000
	for i := range topics {
		tf.must(cmdCreateTopic, &createTopicV1{Name: fmt.Sprintf("t%03d", i), ID: topicID(byte(i + 1)), Partitions: perTopic, ReplicationFactor: 3})
	}
	img := tf.f.Image()
	n := 0
	for _, t := range img.Topics {
		n += len(t.Partitions)
	}
	if n != topics*perTopic {
		b.Fatalf("%d partitions in the image, want %d", n, topics*perTopic)
	}
	var buf bytes.Buffer
	if err := writeSnapshot(&buf, img); err != nil {
		b.Fatal(err)
	}
	size := buf.Len()
	b.Run("snapshot", func(b *testing.B) {
		b.SetBytes(int64(size))
		for b.Loop() {
			var out bytes.Buffer
			if err := writeSnapshot(&out, img); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("restore", func(b *testing.B) {
		b.SetBytes(int64(size))
		for b.Loop() {
			dst := newTestFSM(b)
			if err := dst.f.Restore(io.NopCloser(bytes.NewReader(buf.Bytes()))); err != nil {
				b.Fatal(err)
			}
		}
	})
}
