package group

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/mqproject/mq/lib/clock"
)

func TestPartitionForMatchesKafka(t *testing.T) {
	for _, tc := range []struct {
		group string
		n     int32
		want  int32
	}{
		{"", 50, 0},
		{"a", 50, 97 % 50},
		{"hello", 50, 99162322 % 50},                // "hello".hashCode() == 99162322
		{"polygenelubricants", 50, 0},               // hashCode == Integer.MIN_VALUE: abs is 0
		{"console-consumer-12345", 1, 0},            // one partition
		{"\U0001F600", 50, (55357*31 + 56832) % 50}, // a surrogate pair
	} {
		if got := PartitionFor(tc.group, tc.n); got != tc.want {
			t.Errorf("PartitionFor(%q, %d) = %d, want %d", tc.group, tc.n, got, tc.want)
		}
	}
}

func TestRecordsRoundTrip(t *testing.T) {
	k, err := decodeKey(offsetKey("g", "t", 3))
	if err != nil || !k.isOffset || k.group != "g" || k.topic != "t" || k.partition != 3 {
		t.Fatalf("offset key: %+v %v", k, err)
	}
	k, err = decodeKey(groupKey("g"))
	if err != nil || k.isOffset || k.group != "g" {
		t.Fatalf("group key: %+v %v", k, err)
	}
	ov := offsetValue{offset: 42, leaderEpoch: 7, metadata: "m", commitMS: 1000}
	if got, err := decodeOffsetValue(ov.encode()); err != nil || got != ov {
		t.Fatalf("offset value: %+v %v", got, err)
	}
	gv := groupValue{protocolType: "consumer", generation: 5, protocol: "range", leader: "a", stateMS: 9,
		members: []storedMember{{id: "a", instanceID: "i", clientID: "c", clientHost: "/h", rebalanceMS: 1, sessionMS: 2,
			subscription: []byte("s"), assignment: []byte("x")}}}
	got, err := decodeGroupValue(gv.encode())
	if err != nil || got.generation != 5 || got.protocol != "range" || len(got.members) != 1 || got.members[0].instanceID != "i" ||
		string(got.members[0].assignment) != "x" {
		t.Fatalf("group value: %+v %v", got, err)
	}
}

func FuzzDecodeRecords(f *testing.F) {
	f.Add(offsetKey("g", "t", 1))
	f.Add(offsetValue{offset: 1, metadata: "m"}.encode())
	f.Add((&groupValue{protocolType: "consumer", members: []storedMember{{id: "a"}}}).encode())
	f.Fuzz(func(t *testing.T, b []byte) {
		decodeKey(b)
		decodeOffsetValue(b)
		decodeGroupValue(b)
	})
}

func TestCommitFailsWhenStoreFails(t *testing.T) {
	store := &MemStore{}
	c := New(Config{Partitions: 1, Store: store, Clock: clock.NewManual(time.Unix(0, 0))})
	defer c.Close()
	if err := c.Load(0); err != nil {
		t.Fatal(err)
	}
	store.Fail = errTestStore
	_, err := c.CommitOffsets(context.Background(), CommitRequest{Group: "g", Generation: -1,
		Offsets: []CommitOffset{{TopicPartition: TopicPartition{"t", 0}, Offset: Offset{Offset: 1}}}})
	var se *StoreError
	if !errorsAs(err, &se) {
		t.Fatalf("commit with a failing store: %v", err)
	}
	if offs, _ := c.FetchOffsets("g", []TopicPartition{{"t", 0}}); offs[0].Offset.Offset != -1 {
		t.Errorf("a failed commit is visible: %+v", offs)
	}
	if err := c.Check("g"); err != nil {
		t.Errorf("Check: %v", err)
	}
	c.Unload(0)
	if err := c.Check("g"); err != ErrNotCoordinator {
		t.Errorf("Check after Unload: %v", err)
	}
}

var errTestStore = errors.New("disk full")

func errorsAs(err error, target any) bool { return errors.As(err, target) }

// TestGroupValueVersions decodes group records of every value version
// (as the test scripts' append-group writes them): each keeps its
// members, with what its version holds; version 3 is what the
// coordinator writes.
func TestGroupValueVersions(t *testing.T) {
	v := groupValue{protocolType: "consumer", generation: 4, protocol: "range", leader: "m", stateMS: 1000,
		members: []storedMember{{id: "m", instanceID: "i", clientID: "c", clientHost: "/h",
			rebalanceMS: 30000, sessionMS: 10000, subscription: []byte("s"), assignment: []byte("a")}}}
	if got, want := encodeGroupValueAs(&v, groupValueVersion), v.encode(); string(got) != string(want) {
		t.Fatalf("version %d: test encoding %x, coordinator's %x", groupValueVersion, got, want)
	}
	for version := int16(0); version <= groupValueVersion; version++ {
		got, err := decodeGroupValue(encodeGroupValueAs(&v, version))
		if err != nil {
			t.Fatalf("version %d: %v", version, err)
		}
		want := v.members[0]
		if version < 3 {
			want.instanceID = ""
		}
		if version < 1 {
			want.rebalanceMS = 0
		}
		if len(got.members) != 1 || fmt.Sprint(got.members[0]) != fmt.Sprint(want) || got.leader != "m" || got.generation != 4 {
			t.Errorf("version %d: decoded %+v, want member %+v", version, got, want)
		}
	}
}
