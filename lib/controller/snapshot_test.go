package controller

import (
	"bytes"
	"errors"
	"io"
	"reflect"
	"strings"
	"testing"

	"github.com/hashicorp/raft"

	"github.com/mqproject/mq/lib/auth"
)

// richImage builds an image using every kind of command.
func richImage(t testing.TB) *testFSM {
	t.Helper()
	tf := newTestFSM(t)
	tf.must(cmdControllerElected, &controllerElectedV1{NodeID: 1, ClusterID: "Zm9vYmFyYmF6cXV4cXV1dw"})
	tf.must(cmdRegisterBroker, &registerBrokerV1{ID: 1, Host: "h1", Port: 9092, Rack: new("rack-a"), Listeners: []string{"tcp://h1:9092", "unix:///run/mq.sock"}})
	tf.must(cmdRegisterBroker, broker(2))
	tf.must(cmdRegisterBroker, broker(3))
	tf.must(cmdCreateTopic, &createTopicV1{Name: "orders", ID: topicID(1), Partitions: 3, ReplicationFactor: 3, Configs: map[string]string{"retention.ms": "60000"}})
	tf.must(cmdCreateTopic, &createTopicV1{Name: "__consumer_offsets", ID: topicID(2), Assignments: [][]int32{{1}, {2}}, Internal: true})
	tf.must(cmdCreateTopic, createTopic("doomed", 3, 1, 1))
	tf.must(cmdDeleteTopic, &deleteTopicV1{Name: "doomed"})
	tf.must(cmdCreatePartitions, &createPartitionsV1{Topic: "orders", Total: 4})
	tf.must(cmdAlterPartition, &alterPartitionV1{Topic: "orders", Partition: 1, Leader: -1, ISR: nil, LeaderEpoch: 7})
	tf.must(cmdAlterPartition, &alterPartitionV1{Topic: "orders", Partition: 2, Leader: 3, ISR: []int32{3}, LeaderEpoch: 2})
	tf.must(cmdAlterTopicConfigs, &alterTopicConfigsV1{Topic: "orders", Set: map[string]string{"cleanup.policy": "compact"}})
	tf.must(cmdAlterBrokerConfigs, &alterBrokerConfigsV1{BrokerID: -1, Set: map[string]string{"num.partitions": "3"}})
	tf.must(cmdAlterBrokerConfigs, &alterBrokerConfigsV1{BrokerID: 2, Set: map[string]string{"log.flush.policy": "always"}})
	tf.must(cmdAllocateProducerID, &allocateProducerIDsV1{Count: 1000})
	tf.must(cmdRegisterBroker, broker(4))
	tf.must(cmdAlterReassignments, &alterReassignmentsV1{Partitions: []reassignmentV1{{Topic: "orders", Partition: 0, Replicas: []int32{4, 2, 3}}}})
	tf.must(cmdAlterScramCredentials, &alterScramCredentialsV1{Upsertions: []scramCredentialV1{
		scramCred("alice", auth.ScramSHA256), scramCred("alice", auth.ScramSHA512), scramCred("bob", auth.ScramSHA512),
	}})
	tf.must(cmdAlterACLs, &alterACLsV1{Create: []aclBindingV1{
		{ResourceType: 2, ResourceName: "orders", PatternType: 3, Principal: "User:alice", Host: "*", Operation: 4, Permission: 3},
		{ResourceType: 3, ResourceName: "team-", PatternType: 4, Principal: "User:*", Host: "10.0.0.1", Operation: 3, Permission: 2},
	}})
	tf.must(cmdBindNode, &bindNodeV1{ID: 2, Principal: "User:CN=node-2"})
	return tf
}

// sinkBuffer is a raft.SnapshotSink in memory.
type sinkBuffer struct {
	bytes.Buffer
	closed, cancelled bool
}

func (s *sinkBuffer) ID() string    { return "test" }
func (s *sinkBuffer) Cancel() error { s.cancelled = true; return nil }
func (s *sinkBuffer) Close() error  { s.closed = true; return nil }

var _ raft.SnapshotSink = (*sinkBuffer)(nil)

func TestSnapshotRestoreRoundTrip(t *testing.T) {
	src := richImage(t)
	snap, err := src.f.Snapshot()
	if err != nil {
		t.Fatal(err)
	}
	// Commands applied after Snapshot must not leak into the snapshot.
	want := src.f.Image()
	src.must(cmdAllocateProducerID, &allocateProducerIDsV1{Count: 1})

	var sink sinkBuffer
	if err := snap.Persist(&sink); err != nil {
		t.Fatal(err)
	}
	snap.Release()
	if !sink.closed || sink.cancelled {
		t.Fatalf("sink closed=%v cancelled=%v", sink.closed, sink.cancelled)
	}
	written := bytes.Clone(sink.Bytes())

	dst := newTestFSM(t)
	ch := dst.f.Changes()
	if err := dst.f.Restore(io.NopCloser(&sink)); err != nil {
		t.Fatal(err)
	}
	got := dst.f.Image()
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("restored image differs:\n got %+v\nwant %+v", got, want)
	}
	for name, top := range got.Topics {
		if got.TopicsByID[top.ID] != top {
			t.Errorf("topic %q: TopicsByID does not point at the same topic", name)
		}
	}
	select {
	case <-ch:
	default:
		t.Error("Restore did not notify watchers")
	}
	// A snapshot is a function of the image: writing the restored one
	// gives the same bytes.
	var again bytes.Buffer
	if err := writeSnapshot(&again, got); err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(again.Bytes(), written) {
		t.Errorf("snapshot of restored image differs:\n%s\n%s", again.Bytes(), written)
	}
	// The restored FSM keeps working, producer IDs continue.
	dst.index = got.Version
	if first := dst.must(cmdAllocateProducerID, &allocateProducerIDsV1{Count: 1}).firstProducerID; first != 1000 {
		t.Errorf("first producer id after restore %d, want 1000", first)
	}
}

func TestRestoreRefusesBadSnapshots(t *testing.T) {
	var good bytes.Buffer
	if err := writeSnapshot(&good, richImage(t).f.Image()); err != nil {
		t.Fatal(err)
	}
	body := good.Bytes()[len(snapshotMagic)+1:]
	header := []byte(snapshotMagic + "\x02")
	tests := []struct {
		name string
		data []byte
	}{
		{"empty", nil},
		{"garbage", []byte("this is not a snapshot at all")},
		{"magic only", []byte(snapshotMagic)},
		{"future version", append([]byte(snapshotMagic+"\x04"), body...)},
		{"version 2 broker in version 1", []byte(snapshotMagic + "\x01" + `{"brokers":[{"id":1,"host":"h","port":1,"epoch":1,"raft_addr":"h:9093"}],"broker_configs":{},"topics":[]}`)},
		{"truncated", good.Bytes()[:good.Len()/2]},
		{"trailing data", append(bytes.Clone(good.Bytes()), '{', '}')},
		{"unknown field", append(bytes.Clone(header), `{"version":1,"surprise":1}`...)},
		{"negative producer id", append(bytes.Clone(header), `{"version":1,"next_producer_id":-5}`...)},
		{"duplicate topic", append(bytes.Clone(header), `{"brokers":[],"broker_configs":{},"topics":[`+
			`{"name":"a","id":"AQAAAAAAAAAAAAAAAAAAqg","partitions":[{"id":0,"replicas":[1],"isr":[1],"leader":1}]},`+
			`{"name":"a","id":"AgAAAAAAAAAAAAAAAAAAqg","partitions":[{"id":0,"replicas":[1],"isr":[1],"leader":1}]}]}`...)},
		{"leader outside isr", append(bytes.Clone(header), `{"brokers":[],"broker_configs":{},"topics":[`+
			`{"name":"a","id":"AQAAAAAAAAAAAAAAAAAAqg","partitions":[{"id":0,"replicas":[1,2],"isr":[1],"leader":2}]}]}`...)},
		{"fenced leader", append(bytes.Clone(header), `{"brokers":[{"id":1,"host":"h","port":1,"epoch":1,"fenced":true}],"broker_configs":{},"topics":[`+
			`{"name":"a","id":"AQAAAAAAAAAAAAAAAAAAqg","partitions":[{"id":0,"replicas":[1],"isr":[1],"leader":1}]}]}`...)},
		{"fenced broker beside others in isr", append(bytes.Clone(header), `{"brokers":[{"id":1,"host":"h","port":1,"epoch":1,"fenced":true},{"id":2,"host":"h","port":2,"epoch":2}],"broker_configs":{},"topics":[`+
			`{"name":"a","id":"AQAAAAAAAAAAAAAAAAAAqg","partitions":[{"id":0,"replicas":[1,2],"isr":[2,1],"leader":2}]}]}`...)},
		{"reassignment in a version 2 snapshot", append([]byte(snapshotMagic+"\x02"), `{"brokers":[],"broker_configs":{},"topics":[`+
			`{"name":"a","id":"AQAAAAAAAAAAAAAAAAAAqg","partitions":[{"id":0,"replicas":[1,2],"isr":[1],"leader":1,"adding":[2],"removing":[1]}]}]}`...)},
		{"reassignment adding a non-replica", append([]byte(snapshotMagic+"\x03"), `{"brokers":[],"broker_configs":{},"topics":[`+
			`{"name":"a","id":"AQAAAAAAAAAAAAAAAAAAqg","partitions":[{"id":0,"replicas":[1,2],"isr":[1],"leader":1,"adding":[3]}]}]}`...)},
		{"reassignment removing every replica", append([]byte(snapshotMagic+"\x03"), `{"brokers":[],"broker_configs":{},"topics":[`+
			`{"name":"a","id":"AQAAAAAAAAAAAAAAAAAAqg","partitions":[{"id":0,"replicas":[1,2],"isr":[1],"leader":1,"adding":[2],"removing":[1,2]}]}]}`...)},
		{"invalid ACL", append([]byte(snapshotMagic+"\x03"), `{"brokers":[],"broker_configs":{},"topics":[],`+
			`"acls":[{"resource_type":1,"resource_name":"a","pattern_type":3,"principal":"User:a","host":"*","operation":3,"permission":3}]}`...)},
		{"zero topic id", append(bytes.Clone(header), `{"brokers":[],"broker_configs":{},"topics":[`+
			`{"name":"a","id":"AAAAAAAAAAAAAAAAAAAAAA","partitions":[{"id":0,"replicas":[1],"isr":[1],"leader":1}]}]}`...)},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			tf := richImage(t)
			before := tf.f.Image()
			err := tf.f.Restore(io.NopCloser(bytes.NewReader(tc.data)))
			if !errors.Is(err, ErrInvalidSnapshot) {
				t.Fatalf("Restore = %v, want ErrInvalidSnapshot", err)
			}
			if tf.f.Image() != before {
				t.Fatal("failed Restore replaced the image")
			}
		})
	}
}

func TestSnapshotFormatIsVersioned(t *testing.T) {
	var buf bytes.Buffer
	if err := writeSnapshot(&buf, emptyImage()); err != nil {
		t.Fatal(err)
	}
	if !strings.HasPrefix(buf.String(), snapshotMagic+"\x03{") {
		t.Fatalf("snapshot starts %q", buf.String()[:min(buf.Len(), 8)])
	}
	img, err := readSnapshot(&buf)
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(img, emptyImage()) {
		t.Fatalf("empty image round trip: %+v", img)
	}
}

// A version 1 snapshot, as written before brokers had a Raft address and
// liveness, still restores: its brokers are alive and have no Raft address.
func TestRestoreReadsVersion1Snapshots(t *testing.T) {
	v1 := snapshotMagic + "\x01" + `{"version":7,"cluster_id":"c","controller_id":1,` +
		`"brokers":[{"id":1,"host":"h1","port":9092,"epoch":2}],` +
		`"topics":[{"name":"a","id":"AQAAAAAAAAAAAAAAAAAAqg","partitions":[{"id":0,"replicas":[1],"isr":[1],"leader":1,"leader_epoch":3,"partition_epoch":4}]}],` +
		`"broker_configs":{},"next_producer_id":5}`
	img, err := readSnapshot(strings.NewReader(v1))
	if err != nil {
		t.Fatal(err)
	}
	want := Broker{ID: 1, Host: "h1", Port: 9092, Epoch: 2}
	if got := img.Brokers[1]; !reflect.DeepEqual(got, want) {
		t.Fatalf("broker %+v, want %+v", got, want)
	}
	if p := img.Partition("a", 0); p == nil || p.LeaderEpoch != 3 || p.PartitionEpoch != 4 || img.Version != 7 || img.NextProducerID != 5 {
		t.Fatalf("image %+v partition %+v", img, p)
	}
}

func TestSnapshotKeepsScramCredentials(t *testing.T) {
	src := richImage(t)
	var buf bytes.Buffer
	if err := writeSnapshot(&buf, src.f.Image()); err != nil {
		t.Fatal(err)
	}
	if strings.Contains(buf.String(), "password") {
		t.Fatalf("snapshot mentions a password: %s", buf.String())
	}
	img, err := readSnapshot(&buf)
	if err != nil {
		t.Fatal(err)
	}
	if got := img.ScramUsers(); !reflect.DeepEqual(got, []string{"alice", "bob"}) {
		t.Fatalf("users after restore = %v", got)
	}
	c, ok := img.ScramCredential("bob", auth.ScramSHA512)
	want := scramCred("bob", auth.ScramSHA512)
	if !ok || string(c.Salt) != string(want.Salt) || c.Iterations != int(want.Iterations) ||
		string(c.StoredKey) != string(want.StoredKey) || string(c.ServerKey) != string(want.ServerKey) {
		t.Fatalf("bob's credential after restore = %+v, %v; want %+v", c, ok, want)
	}
	// A snapshot holding a credential no exchange could use is refused.
	var again bytes.Buffer
	writeSnapshot(&again, src.f.Image())
	bad := strings.Replace(again.String(), `"iterations":4096`, `"iterations":1`, 1)
	if _, err := readSnapshot(strings.NewReader(bad)); !errors.Is(err, ErrInvalidSnapshot) {
		t.Fatalf("snapshot with 1 iteration: %v", err)
	}
}

// scramCred is a credential of user for mechanism with made-up keys.
func scramCred(user, mechanism string) scramCredentialV1 {
	return scramCredentialV1{
		User: user, Mechanism: mechanism, Salt: []byte("salt-" + user), Iterations: 4096,
		StoredKey: []byte("stored-" + user + mechanism), ServerKey: []byte("server-" + user + mechanism),
	}
}
