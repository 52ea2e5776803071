package tier

import (
	"context"
	"testing"

	"github.com/mqproject/mq/lib/record"
)

// TestMaxTimestampFindsTheRemoteMax: the remote log's largest timestamp
// (one batch in the middle, later than every other) and its offset.
func TestMaxTimestampFindsTheRemoteMax(t *testing.T) {
	ctx := context.Background()
	f := newFixture(t, "mem://")
	f.appendBatches(t, 20)
	at := f.log.EndOffset()
	b, err := record.Build(record.BuildOptions{BaseTimestamp: 500}, []record.Record{{Value: []byte("early")}, {Value: []byte("late"), OffsetDelta: 1, TimestampDelta: 1 << 40}})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := f.log.Append(b, 0); err != nil {
		t.Fatal(err)
	}
	f.appendBatches(t, 40)
	if err := f.tier.Sync(ctx, f.partition(0)); err != nil {
		t.Fatal(err)
	}
	rl := f.ctrl.Image().RemoteLog(f.id.Topic, 0)
	if rl.EndOffset() <= at+1 {
		t.Fatalf("remote log ends at %d", rl.EndOffset())
	}
	o, ts, found, err := f.tier.MaxTimestamp(ctx, rl)
	if err != nil || !found || o != at+1 || ts != 500+1<<40 {
		t.Fatalf("max timestamp: offset %d timestamp %d found %v err %v; want %d %d", o, ts, found, err, at+1, 500+1<<40)
	}
}
