package controller

import (
	"bytes"
	"errors"
	"reflect"
	"testing"
)

// seedCommands are valid records of every command type, the fuzzers' seeds
// besides testdata/fuzz.
func seedCommands(t testing.TB) [][]byte {
	var out [][]byte
	for _, s := range []step{
		{cmdControllerElected, &controllerElectedV1{NodeID: 2, ClusterID: "c2"}},
		{cmdRegisterBroker, &registerBrokerV1{ID: 4, Host: "h4", Port: 9092, Rack: new("r"), Listeners: []string{"tcp://h4:9092"}}},
		{cmdCreateTopic, createTopic("new", 7, 2, 2)},
		{cmdCreateTopic, &createTopicV1{Name: "explicit", ID: topicID(8), Assignments: [][]int32{{1, 2}}, Configs: map[string]string{"k": "v"}, Internal: true}},
		{cmdDeleteTopic, &deleteTopicV1{Name: "orders"}},
		{cmdCreatePartitions, &createPartitionsV1{Topic: "orders", Total: 6}},
		{cmdCreatePartitions, &createPartitionsV1{Topic: "orders", Total: 5, Assignments: [][]int32{{1, 2, 3}}}},
		{cmdAlterTopicConfigs, &alterTopicConfigsV1{Topic: "orders", Set: map[string]string{"a": "b"}, Delete: []string{"retention.ms"}}},
		{cmdAlterBrokerConfigs, &alterBrokerConfigsV1{BrokerID: -1, Set: map[string]string{"a": "b"}}},
		{cmdAlterGroupConfigs, &alterGroupConfigsV1{Group: "g", Set: map[string]string{"a": "b"}}},
		{cmdAlterScramCredentials, &alterScramCredentialsV1{Upsertions: []scramCredentialV1{scramCred("a", "SCRAM-SHA-256")}, Deletions: []scramDeletionV1{{User: "b", Mechanism: "SCRAM-SHA-512"}}}},
		{cmdAlterPartition, &alterPartitionV1{Topic: "orders", Partition: 0, Leader: 2, ISR: []int32{2, 3}, LeaderEpoch: 1}},
		{cmdAllocateProducerID, &allocateProducerIDsV1{Count: 50}},
		{cmdRegisterBroker, &registerBrokerV2{ID: 2, Host: "h2", Port: 9092, RaftAddr: "h2:9093", Unclean: true}},
		{cmdAlterPartition, &alterPartitionV2{Topic: "orders", Partition: 0, Leader: 1, ISR: []int32{1, 2}}},
		{cmdFenceBroker, &fenceBrokerV1{ID: 2, Epoch: 3, Unclean: true}},
		{cmdUnfenceBroker, &unfenceBrokerV1{ID: 2, Epoch: 3}},
		{cmdControlledShutdown, &controlledShutdownV1{ID: 3, Epoch: 4}},
		{cmdElectLeaders, &electLeadersV1{Type: 1}},
		{cmdElectLeaders, &electLeadersV1{Type: 0, Partitions: []topicPartitionV1{{Topic: "orders", Partition: 2}}}},
		{cmdRegisterBroker, &registerBrokerV3{ID: 2, Host: "h2", Port: 9092, RaftAddr: "h2:9093"}},
		{cmdFenceBroker, &fenceBrokerV2{ID: 2, Epoch: 3}},
		{cmdBindNode, &bindNodeV1{ID: 2, Principal: "User:CN=node-2"}},
		{cmdUnregisterBroker, &unregisterBrokerV1{ID: 2}},
		{cmdUnfenceBroker, &unfenceBrokerV2{ID: 2, Epoch: 3}},
		{cmdAlterPartition, &alterPartitionV3{Changes: []alterPartitionV2{
			{Topic: "orders", Partition: 0, Leader: 1, ISR: []int32{1}},
			{Topic: "orders", Partition: 1, Leader: 2, ISR: []int32{2, 3}, LeaderEpoch: 1, PartitionEpoch: 2},
		}}},
		{cmdAlterACLs, &alterACLsV1{
			Create: []aclBindingV1{{ResourceType: 2, ResourceName: "orders", PatternType: 3, Principal: "User:alice", Host: "*", Operation: 4, Permission: 3}},
			Delete: []aclFilterV1{{ResourceType: 1, PatternType: 2, ResourceName: new("orders"), Operation: 1, Permission: 1}},
		}},
		{cmdElectLeaders, &electLeadersV2{Type: 1, Leaders: []uncleanLeaderV2{{Topic: "orders", Partition: 0, Leader: 2, LastEpoch: 3, EndOffset: 40}}, Configured: true}},
	} {
		data, err := encodeCommand(s.typ, s.body)
		if err != nil {
			t.Fatal(err)
		}
		out = append(out, data)
	}
	return out
}

// FuzzApply feeds arbitrary records to the FSM holding a rich image. Apply
// must never panic; a refused record must leave the image as it was; an
// accepted one must be a record decodeCommand reads and must keep the
// image's invariants (testFSM.apply checks both).
func FuzzApply(f *testing.F) {
	for _, data := range seedCommands(f) {
		f.Add(data)
	}
	f.Add([]byte{})
	f.Add([]byte{byte(cmdAlterPartition), 2, '{', '}'})
	f.Fuzz(func(t *testing.T, data []byte) {
		tf := richImage(t)
		res := tf.apply(data)
		if res.err == nil {
			if _, _, err := decodeCommand(data); err != nil {
				t.Fatalf("record accepted but does not decode: %v", err)
			}
			return
		}
		if errors.Is(res.err, ErrUnknownCommand) || errors.Is(res.err, ErrInvalidCommand) {
			if _, _, err := decodeCommand(data); err == nil && errors.Is(res.err, ErrUnknownCommand) {
				t.Fatalf("decodable record refused as unknown: %v", res.err)
			}
		}
	})
}

// FuzzRestore feeds arbitrary bytes to readSnapshot: no panic, and what it
// accepts keeps the invariants and round-trips.
func FuzzRestore(f *testing.F) {
	var buf bytes.Buffer
	if err := writeSnapshot(&buf, richImage(f).f.Image()); err != nil {
		f.Fatal(err)
	}
	f.Add(buf.Bytes())
	f.Add([]byte(snapshotMagic + "\x01{}"))
	f.Fuzz(func(t *testing.T, data []byte) {
		img, err := readSnapshot(bytes.NewReader(data))
		if err != nil {
			if !errors.Is(err, ErrInvalidSnapshot) {
				t.Fatalf("error %v is not ErrInvalidSnapshot", err)
			}
			return
		}
		if err := img.check(); err != nil {
			t.Fatalf("accepted snapshot breaks invariants: %v", err)
		}
		var out bytes.Buffer
		if err := writeSnapshot(&out, img); err != nil {
			t.Fatal(err)
		}
		again, err := readSnapshot(&out)
		if err != nil {
			t.Fatalf("re-read: %v", err)
		}
		if !reflect.DeepEqual(img, again) {
			t.Fatalf("round trip differs")
		}
	})
}
