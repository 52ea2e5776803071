package broker

import (
	"context"
	"fmt"
	"testing"

	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/mqproject/mq/lib/controller"
	"github.com/mqproject/mq/lib/server"
)

// BenchmarkMetadata10kPartitions answers a Metadata request for every
// topic of a node hosting 10,000 partitions (10 topics of 1,000), and
// encodes the answer: issue 19 wants it under 50 ms.
//
//	go test -run '^$' -bench Metadata10k -benchtime 20x ./lib/broker
func BenchmarkMetadata10kPartitions(b *testing.B) {
	tb := startBroker(b, "", nil)
	ctx := context.Background()
	for i := range 10 {
		if _, err := tb.ctrl.CreateTopic(ctx, controller.CreateTopic{Name: fmt.Sprintf("t%d", i), Partitions: 1000, ReplicationFactor: 1}); err != nil {
			b.Fatal(err)
		}
	}
	tb.parts.Refresh()
	if n := len(tb.parts.All()); n != 10000 {
		b.Fatalf("%d partitions open, want 10000", n)
	}
	const version = 12
	req := kmsg.NewPtrMetadataRequest()
	req.SetVersion(version)
	sreq := &server.Request{Key: req.Key(), Version: version, CorrelationID: 1, Body: req}
	var size int
	for b.Loop() {
		resp := sreq.Answer(tb.Handle(ctx, testConn, sreq))
		m := resp.Msg.(*kmsg.MetadataResponse)
		if len(m.Topics) != 10 {
			b.Fatalf("%d topics in the answer, want 10", len(m.Topics))
		}
		size = len(m.AppendTo(nil))
	}
	b.ReportMetric(float64(size), "response-bytes")
}
