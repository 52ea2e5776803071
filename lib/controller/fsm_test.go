package controller

import (
	"bytes"
	"errors"
	"maps"
	"reflect"
	"slices"
	"strings"
	"testing"

	"github.com/mqproject/mq/lib/auth"
)

// testFSM wraps an fsm with a log index counter, as Raft would feed it.
type testFSM struct {
	t     testing.TB
	f     *fsm
	index uint64
}

func newTestFSM(t testing.TB) *testFSM {
	return &testFSM{t: t, f: newFSM(nil)}
}

// apply feeds one raw record to the FSM and checks that a refused record
// leaves the image untouched and an accepted one keeps the invariants.
func (tf *testFSM) apply(data []byte) applyResult {
	tf.t.Helper()
	tf.index++
	before := tf.f.Image()
	var snap bytes.Buffer
	if err := writeSnapshot(&snap, before); err != nil {
		tf.t.Fatal(err)
	}
	res := tf.f.apply(tf.index, data)
	after := tf.f.Image()
	switch {
	case res.err != nil:
		if after != before {
			tf.t.Fatalf("refused record (%v) replaced the image", res.err)
		}
	case res.unchanged:
		if after != before {
			tf.t.Fatalf("record that changed nothing replaced the image")
		}
	default:
		if after.Version != tf.index {
			tf.t.Fatalf("image version %d after applying index %d", after.Version, tf.index)
		}
		if err := after.check(); err != nil {
			tf.t.Fatalf("image invariant broken after index %d: %v", tf.index, err)
		}
	}
	// Whatever happened, the image published before must not have moved.
	var again bytes.Buffer
	if err := writeSnapshot(&again, before); err != nil {
		tf.t.Fatal(err)
	}
	if !bytes.Equal(snap.Bytes(), again.Bytes()) {
		tf.t.Fatalf("applying index %d mutated the previous image", tf.index)
	}
	return res
}

// do encodes and applies one command.
func (tf *testFSM) do(typ commandType, body any) applyResult {
	tf.t.Helper()
	data, err := encodeCommand(typ, body)
	if err != nil {
		tf.t.Fatal(err)
	}
	return tf.apply(data)
}

// must applies a command that has to succeed.
func (tf *testFSM) must(typ commandType, body any) applyResult {
	tf.t.Helper()
	res := tf.do(typ, body)
	if res.err != nil {
		tf.t.Fatalf("%v: %v", typ, res.err)
	}
	return res
}

func topicID(b byte) TopicID { return TopicID{0: b, 15: 0xAA} }

func broker(id int32) *registerBrokerV1 {
	return &registerBrokerV1{ID: id, Host: "localhost", Port: 9092 + id}
}

func createTopic(name string, id byte, partitions int32, rf int16) *createTopicV1 {
	return &createTopicV1{Name: name, ID: topicID(id), Partitions: partitions, ReplicationFactor: rf}
}

// step is one command of a table-driven FSM test.
type step struct {
	typ  commandType
	body any
}

func TestFSMCommands(t *testing.T) {
	threeBrokers := []step{
		{cmdControllerElected, &controllerElectedV1{NodeID: 1, ClusterID: "cluster-a"}},
		{cmdRegisterBroker, broker(1)},
		{cmdRegisterBroker, broker(2)},
		{cmdRegisterBroker, broker(3)},
	}
	withTopic := append(slices.Clone(threeBrokers), step{cmdCreateTopic, createTopic("orders", 1, 2, 3)})

	tests := []struct {
		name    string
		setup   []step
		cmd     step
		wantErr error
		check   func(t *testing.T, img *Image)
	}{
		{
			name:  "create topic places replicas round-robin",
			setup: threeBrokers,
			cmd:   step{cmdCreateTopic, createTopic("orders", 1, 4, 2)},
			check: func(t *testing.T, img *Image) {
				top := img.Topics["orders"]
				if top == nil || img.TopicsByID[topicID(1)] != top {
					t.Fatalf("topic not indexed: %+v", img.Topics)
				}
				// topicID(1) starts at broker index 0x01000000 % 3 == 1.
				want := [][]int32{{2, 3}, {3, 1}, {1, 2}, {2, 3}}
				for i, p := range top.Partitions {
					if !slices.Equal(p.Replicas, want[i]) || !slices.Equal(p.ISR, want[i]) || p.Leader != want[i][0] || p.LeaderEpoch != 0 || p.PartitionEpoch != 0 {
						t.Errorf("partition %d = %+v, want replicas %v led by the first", i, p, want[i])
					}
				}
			},
		},
		{
			name:  "create topic with one broker uses it everywhere",
			setup: threeBrokers[:2],
			cmd:   step{cmdCreateTopic, createTopic("solo", 9, 3, 1)},
			check: func(t *testing.T, img *Image) {
				for _, p := range img.Topics["solo"].Partitions {
					if !slices.Equal(p.Replicas, []int32{1}) || p.Leader != 1 {
						t.Errorf("partition %+v, want replicas [1]", p)
					}
				}
			},
		},
		{
			name:  "create topic with explicit assignments and configs",
			setup: threeBrokers,
			cmd: step{cmdCreateTopic, &createTopicV1{
				Name: "explicit", ID: topicID(2), Assignments: [][]int32{{3, 1}, {1, 2}},
				Configs: map[string]string{"cleanup.policy": "compact"}, Internal: true,
			}},
			check: func(t *testing.T, img *Image) {
				top := img.Topics["explicit"]
				if len(top.Partitions) != 2 || top.Partitions[0].Leader != 3 || !top.Internal || top.Configs["cleanup.policy"] != "compact" {
					t.Errorf("topic = %+v", top)
				}
			},
		},
		{
			name:    "duplicate topic name refused",
			setup:   withTopic,
			cmd:     step{cmdCreateTopic, createTopic("orders", 2, 1, 1)},
			wantErr: ErrTopicExists,
		},
		{
			name:    "duplicate topic id refused",
			setup:   withTopic,
			cmd:     step{cmdCreateTopic, createTopic("other", 1, 1, 1)},
			wantErr: ErrTopicExists,
		},
		{
			name:    "zero topic id refused",
			setup:   threeBrokers,
			cmd:     step{cmdCreateTopic, &createTopicV1{Name: "x", Partitions: 1, ReplicationFactor: 1}},
			wantErr: ErrInvalidCommand,
		},
		{
			name:    "replication factor above broker count refused",
			setup:   threeBrokers,
			cmd:     step{cmdCreateTopic, createTopic("big", 1, 1, 4)},
			wantErr: ErrInvalidReplicationFactor,
		},
		{
			name:    "replication factor with no brokers refused",
			cmd:     step{cmdCreateTopic, createTopic("early", 1, 1, 1)},
			wantErr: ErrInvalidReplicationFactor,
		},
		{
			name:    "zero partitions refused",
			setup:   threeBrokers,
			cmd:     step{cmdCreateTopic, createTopic("none", 1, 0, 1)},
			wantErr: ErrInvalidPartitions,
		},
		{
			name:    "assignment to unregistered broker refused",
			setup:   threeBrokers,
			cmd:     step{cmdCreateTopic, &createTopicV1{Name: "x", ID: topicID(3), Assignments: [][]int32{{7}}}},
			wantErr: ErrInvalidReplicaAssignment,
		},
		{
			name:    "assignment with duplicate replica refused",
			setup:   threeBrokers,
			cmd:     step{cmdCreateTopic, &createTopicV1{Name: "x", ID: topicID(3), Assignments: [][]int32{{1, 1}}}},
			wantErr: ErrInvalidReplicaAssignment,
		},
		{
			name:    "assignments of unequal length refused",
			setup:   threeBrokers,
			cmd:     step{cmdCreateTopic, &createTopicV1{Name: "x", ID: topicID(3), Assignments: [][]int32{{1, 2}, {1}}}},
			wantErr: ErrInvalidReplicaAssignment,
		},
		{
			name:  "delete topic",
			setup: withTopic,
			cmd:   step{cmdDeleteTopic, &deleteTopicV1{Name: "orders"}},
			check: func(t *testing.T, img *Image) {
				if len(img.Topics) != 0 || len(img.TopicsByID) != 0 {
					t.Errorf("topics left: %v %v", img.Topics, img.TopicsByID)
				}
			},
		},
		{
			name:    "delete unknown topic refused",
			setup:   threeBrokers,
			cmd:     step{cmdDeleteTopic, &deleteTopicV1{Name: "orders"}},
			wantErr: ErrUnknownTopic,
		},
		{
			name:  "create partitions grows the topic",
			setup: withTopic,
			cmd:   step{cmdCreatePartitions, &createPartitionsV1{Topic: "orders", Total: 5}},
			check: func(t *testing.T, img *Image) {
				top := img.Topics["orders"]
				if len(top.Partitions) != 5 {
					t.Fatalf("%d partitions, want 5", len(top.Partitions))
				}
				for i, p := range top.Partitions {
					if p.ID != int32(i) || len(p.Replicas) != 3 {
						t.Errorf("partition %d = %+v", i, p)
					}
				}
				if img.TopicsByID[top.ID] != top {
					t.Error("TopicsByID not updated")
				}
			},
		},
		{
			name:  "create partitions with explicit assignments",
			setup: withTopic,
			cmd:   step{cmdCreatePartitions, &createPartitionsV1{Topic: "orders", Total: 3, Assignments: [][]int32{{3, 2, 1}}}},
			check: func(t *testing.T, img *Image) {
				if p := img.Partition("orders", 2); p == nil || p.Leader != 3 {
					t.Errorf("partition 2 = %+v", p)
				}
			},
		},
		{
			name:    "create partitions with too few replicas refused",
			setup:   withTopic,
			cmd:     step{cmdCreatePartitions, &createPartitionsV1{Topic: "orders", Total: 3, Assignments: [][]int32{{3}}}},
			wantErr: ErrInvalidReplicaAssignment,
		},
		{
			name:    "create partitions cannot shrink",
			setup:   withTopic,
			cmd:     step{cmdCreatePartitions, &createPartitionsV1{Topic: "orders", Total: 1}},
			wantErr: ErrInvalidPartitions,
		},
		{
			name:    "too many partitions refused",
			setup:   threeBrokers,
			cmd:     step{cmdCreateTopic, createTopic("huge", 1, MaxPartitions+1, 1)},
			wantErr: ErrInvalidPartitions,
		},
		{
			name:    "growing past the partition limit refused",
			setup:   withTopic,
			cmd:     step{cmdCreatePartitions, &createPartitionsV1{Topic: "orders", Total: MaxPartitions + 1}},
			wantErr: ErrInvalidPartitions,
		},
		{
			name:    "create partitions to the same count refused",
			setup:   withTopic,
			cmd:     step{cmdCreatePartitions, &createPartitionsV1{Topic: "orders", Total: 2}},
			wantErr: ErrInvalidPartitions,
		},
		{
			name:    "create partitions of unknown topic refused",
			setup:   withTopic,
			cmd:     step{cmdCreatePartitions, &createPartitionsV1{Topic: "nope", Total: 9}},
			wantErr: ErrUnknownTopic,
		},
		{
			name: "topic configs set and delete",
			setup: append(slices.Clone(withTopic), step{cmdAlterTopicConfigs, &alterTopicConfigsV1{
				Topic: "orders", Set: map[string]string{"retention.ms": "1000", "segment.bytes": "1024"},
			}}),
			cmd: step{cmdAlterTopicConfigs, &alterTopicConfigsV1{
				Topic: "orders", Set: map[string]string{"retention.ms": "2000"}, Delete: []string{"segment.bytes", "absent"},
			}},
			check: func(t *testing.T, img *Image) {
				want := map[string]string{"retention.ms": "2000"}
				if got := img.Topics["orders"].Configs; !maps.Equal(got, want) {
					t.Errorf("configs = %v, want %v", got, want)
				}
			},
		},
		{
			name:    "topic config both set and deleted refused",
			setup:   withTopic,
			cmd:     step{cmdAlterTopicConfigs, &alterTopicConfigsV1{Topic: "orders", Set: map[string]string{"a": "1"}, Delete: []string{"a"}}},
			wantErr: ErrInvalidConfig,
		},
		{
			name:    "topic config of unknown topic refused",
			cmd:     step{cmdAlterTopicConfigs, &alterTopicConfigsV1{Topic: "orders", Set: map[string]string{"a": "1"}}},
			wantErr: ErrUnknownTopic,
		},
		{
			name: "broker and cluster default configs",
			setup: []step{
				{cmdAlterBrokerConfigs, &alterBrokerConfigsV1{BrokerID: -1, Set: map[string]string{"log.retention.hours": "1"}}},
				{cmdAlterBrokerConfigs, &alterBrokerConfigsV1{BrokerID: 2, Set: map[string]string{"x": "1", "y": "2"}}},
			},
			cmd: step{cmdAlterBrokerConfigs, &alterBrokerConfigsV1{BrokerID: 2, Delete: []string{"x", "y"}}},
			check: func(t *testing.T, img *Image) {
				want := map[int32]map[string]string{-1: {"log.retention.hours": "1"}}
				if !reflect.DeepEqual(img.BrokerConfigs, want) {
					t.Errorf("broker configs = %v, want %v", img.BrokerConfigs, want)
				}
			},
		},
		{
			name: "group configs set and deleted",
			setup: []step{
				{cmdAlterGroupConfigs, &alterGroupConfigsV1{Group: "g", Set: map[string]string{"share.auto.offset.reset": "earliest", "x": "1"}}},
				{cmdAlterGroupConfigs, &alterGroupConfigsV1{Group: "h", Set: map[string]string{"x": "1"}}},
			},
			cmd: step{cmdAlterGroupConfigs, &alterGroupConfigsV1{Group: "h", Delete: []string{"x"}}},
			check: func(t *testing.T, img *Image) {
				want := map[string]map[string]string{"g": {"share.auto.offset.reset": "earliest", "x": "1"}}
				if !reflect.DeepEqual(img.GroupConfigs, want) {
					t.Errorf("group configs = %v, want %v", img.GroupConfigs, want)
				}
			},
		},
		{
			name: "scram credentials upserted and deleted",
			setup: []step{
				{cmdAlterScramCredentials, &alterScramCredentialsV1{Upsertions: []scramCredentialV1{
					scramCred("alice", auth.ScramSHA256), scramCred("alice", auth.ScramSHA512), scramCred("bob", auth.ScramSHA256),
				}}},
			},
			cmd: step{cmdAlterScramCredentials, &alterScramCredentialsV1{
				Deletions:  []scramDeletionV1{{User: "alice", Mechanism: auth.ScramSHA256}, {User: "bob", Mechanism: auth.ScramSHA256}, {User: "nobody", Mechanism: auth.ScramSHA512}},
				Upsertions: []scramCredentialV1{scramCred("carol", auth.ScramSHA512)},
			}},
			check: func(t *testing.T, img *Image) {
				if got := img.ScramUsers(); !reflect.DeepEqual(got, []string{"alice", "carol"}) {
					t.Errorf("users = %v, want [alice carol]", got)
				}
				if _, ok := img.ScramCredential("alice", auth.ScramSHA256); ok {
					t.Errorf("alice's deleted SHA-256 credential is still there")
				}
				if c, ok := img.ScramCredential("alice", auth.ScramSHA512); !ok || c.Iterations != 4096 {
					t.Errorf("alice's SHA-512 credential = %+v, %v", c, ok)
				}
			},
		},
		{
			name: "ACLs created, then deleted by filter",
			setup: []step{{cmdAlterACLs, &alterACLsV1{Create: []aclBindingV1{
				{ResourceType: 2, ResourceName: "orders", PatternType: 3, Principal: "User:alice", Host: "*", Operation: 4, Permission: 3},
				{ResourceType: 2, ResourceName: "ord", PatternType: 4, Principal: "User:bob", Host: "*", Operation: 3, Permission: 2},
				{ResourceType: 3, ResourceName: "g", PatternType: 3, Principal: "User:bob", Host: "*", Operation: 3, Permission: 3},
			}}}},
			// Of the topic ACLs, those that apply to the topic "orders":
			// both; the group's stays.
			cmd: step{cmdAlterACLs, &alterACLsV1{Delete: []aclFilterV1{{ResourceType: 2, ResourceName: new("orders"), PatternType: 2, Operation: 1, Permission: 1}}}},
			check: func(t *testing.T, img *Image) {
				got := img.ACLs.Bindings()
				if len(got) != 1 || got[0].ResourceName != "g" || got[0].Principal != "User:bob" {
					t.Errorf("ACLs = %v, want only the group's", got)
				}
			},
		},
		{
			name: "scram credential with too few iterations refused",
			cmd: step{cmdAlterScramCredentials, &alterScramCredentialsV1{Upsertions: []scramCredentialV1{
				scramCred("alice", auth.ScramSHA256), {User: "bob", Mechanism: auth.ScramSHA256, Salt: []byte("s"), Iterations: 4095, StoredKey: []byte("k"), ServerKey: []byte("k")},
			}}},
			wantErr: ErrInvalidCommand,
		},
		{
			name:    "scram credential of an unknown mechanism refused",
			cmd:     step{cmdAlterScramCredentials, &alterScramCredentialsV1{Upsertions: []scramCredentialV1{scramCred("alice", "SCRAM-SHA-1")}}},
			wantErr: ErrInvalidCommand,
		},
		{
			name:    "scram credential without keys refused",
			cmd:     step{cmdAlterScramCredentials, &alterScramCredentialsV1{Upsertions: []scramCredentialV1{{User: "a", Mechanism: auth.ScramSHA256, Salt: []byte("s"), Iterations: 4096}}}},
			wantErr: ErrInvalidCommand,
		},
		{
			name:    "scram deletion of an empty user refused",
			cmd:     step{cmdAlterScramCredentials, &alterScramCredentialsV1{Deletions: []scramDeletionV1{{Mechanism: auth.ScramSHA256}}}},
			wantErr: ErrInvalidCommand,
		},
		{
			name: "an invalid ACL refuses the whole command",
			cmd: step{cmdAlterACLs, &alterACLsV1{Create: []aclBindingV1{
				{ResourceType: 2, ResourceName: "orders", PatternType: 3, Principal: "User:alice", Host: "*", Operation: 4, Permission: 3},
				{ResourceType: 4, ResourceName: "not-the-cluster", PatternType: 3, Principal: "User:alice", Host: "*", Operation: 7, Permission: 3},
			}}},
			wantErr: ErrInvalidACL,
		},
		{
			name:    "an ACL filter of an unknown pattern type refused",
			cmd:     step{cmdAlterACLs, &alterACLsV1{Delete: []aclFilterV1{{ResourceType: 1, PatternType: 0, Operation: 1, Permission: 1}}}},
			wantErr: ErrInvalidACL,
		},
		{
			name:    "group config of an empty group id refused",
			cmd:     step{cmdAlterGroupConfigs, &alterGroupConfigsV1{Set: map[string]string{"x": "1"}}},
			wantErr: ErrInvalidConfig,
		},
		{
			name:    "broker config for id below -1 refused",
			cmd:     step{cmdAlterBrokerConfigs, &alterBrokerConfigsV1{BrokerID: -2, Set: map[string]string{"x": "1"}}},
			wantErr: ErrInvalidConfig,
		},
		{
			name:    "alter partition to leader below -1 refused",
			setup:   withTopic,
			cmd:     step{cmdAlterPartition, &alterPartitionV1{Topic: "orders", Partition: 1, Leader: -2, LeaderEpoch: 1}},
			wantErr: ErrInvalidPartitionState,
		},
		{
			name:  "alter partition changes leader with a new epoch",
			setup: withTopic,
			cmd:   step{cmdAlterPartition, &alterPartitionV1{Topic: "orders", Partition: 0, Leader: 1, ISR: []int32{1, 2}, LeaderEpoch: 1}},
			check: func(t *testing.T, img *Image) {
				p := img.Partition("orders", 0)
				if p.Leader != 1 || !slices.Equal(p.ISR, []int32{1, 2}) || p.LeaderEpoch != 1 || p.PartitionEpoch != 1 {
					t.Errorf("partition = %+v", p)
				}
				if q := img.Partition("orders", 1); q.PartitionEpoch != 0 {
					t.Errorf("other partition changed: %+v", q)
				}
			},
		},
		{
			name: "alter partition keeps leader within an epoch",
			setup: append(slices.Clone(withTopic),
				step{cmdAlterPartition, &alterPartitionV1{Topic: "orders", Partition: 0, Leader: 1, ISR: []int32{1, 2, 3}, LeaderEpoch: 4}}),
			cmd: step{cmdAlterPartition, &alterPartitionV1{Topic: "orders", Partition: 0, Leader: 1, ISR: []int32{1}, LeaderEpoch: 4}},
			check: func(t *testing.T, img *Image) {
				p := img.Partition("orders", 0)
				if p.LeaderEpoch != 4 || p.PartitionEpoch != 2 || !slices.Equal(p.ISR, []int32{1}) {
					t.Errorf("partition = %+v", p)
				}
			},
		},
		{
			name: "alter partition leader epoch must not go backwards",
			setup: append(slices.Clone(withTopic),
				step{cmdAlterPartition, &alterPartitionV1{Topic: "orders", Partition: 0, Leader: 1, ISR: []int32{1}, LeaderEpoch: 4}}),
			cmd:     step{cmdAlterPartition, &alterPartitionV1{Topic: "orders", Partition: 0, Leader: 1, ISR: []int32{1}, LeaderEpoch: 3}},
			wantErr: ErrStaleLeaderEpoch,
		},
		{
			name:    "alter partition leader change needs a new epoch",
			setup:   withTopic,
			cmd:     step{cmdAlterPartition, &alterPartitionV1{Topic: "orders", Partition: 0, Leader: 1, ISR: []int32{1}, LeaderEpoch: 0}},
			wantErr: ErrStaleLeaderEpoch,
		},
		{
			name:    "alter partition leader outside isr refused",
			setup:   withTopic,
			cmd:     step{cmdAlterPartition, &alterPartitionV1{Topic: "orders", Partition: 0, Leader: 1, ISR: []int32{2}, LeaderEpoch: 1}},
			wantErr: ErrInvalidPartitionState,
		},
		{
			name:    "alter partition isr outside replicas refused",
			setup:   withTopic,
			cmd:     step{cmdAlterPartition, &alterPartitionV1{Topic: "orders", Partition: 0, Leader: 1, ISR: []int32{1, 9}, LeaderEpoch: 1}},
			wantErr: ErrInvalidPartitionState,
		},
		{
			name:  "alter partition to no leader",
			setup: withTopic,
			cmd:   step{cmdAlterPartition, &alterPartitionV1{Topic: "orders", Partition: 0, Leader: -1, ISR: []int32{2}, LeaderEpoch: 1}},
			check: func(t *testing.T, img *Image) {
				if p := img.Partition("orders", 0); p.Leader != -1 {
					t.Errorf("partition = %+v", p)
				}
			},
		},
		{
			name:    "alter unknown partition refused",
			setup:   withTopic,
			cmd:     step{cmdAlterPartition, &alterPartitionV1{Topic: "orders", Partition: 2, Leader: 1, ISR: []int32{1}, LeaderEpoch: 1}},
			wantErr: ErrUnknownPartition,
		},
		{
			name: "producer id blocks are consecutive",
			setup: []step{
				{cmdAllocateProducerID, &allocateProducerIDsV1{Count: 1000}},
			},
			cmd: step{cmdAllocateProducerID, &allocateProducerIDsV1{Count: 10}},
			check: func(t *testing.T, img *Image) {
				if img.NextProducerID != 1010 {
					t.Errorf("next producer id %d, want 1010", img.NextProducerID)
				}
			},
		},
		{
			name:    "empty producer id block refused",
			cmd:     step{cmdAllocateProducerID, &allocateProducerIDsV1{Count: 0}},
			wantErr: ErrInvalidProducerIDCount,
		},
		{
			name:  "broker registration gets the log index as epoch",
			setup: threeBrokers,
			cmd:   step{cmdRegisterBroker, &registerBrokerV1{ID: 2, Host: "h2", Port: 19092, Rack: new("r1"), Listeners: []string{"tcp://h2:19092"}}},
			check: func(t *testing.T, img *Image) {
				b := img.Brokers[2]
				if b.Epoch != int64(img.Version) || b.Host != "h2" || *b.Rack != "r1" || len(img.Brokers) != 3 {
					t.Errorf("broker = %+v (version %d)", b, img.Version)
				}
			},
		},
		{
			name:    "broker with negative id refused",
			cmd:     step{cmdRegisterBroker, &registerBrokerV1{ID: -1}},
			wantErr: ErrInvalidBroker,
		},
		{
			name: "second election keeps the cluster id",
			setup: []step{
				{cmdControllerElected, &controllerElectedV1{NodeID: 1, ClusterID: "first"}},
			},
			cmd: step{cmdControllerElected, &controllerElectedV1{NodeID: 2, ClusterID: "second"}},
			check: func(t *testing.T, img *Image) {
				if img.ClusterID != "first" || img.ControllerID != 2 {
					t.Errorf("cluster %q controller %d", img.ClusterID, img.ControllerID)
				}
			},
		},
		{
			name:    "first election without cluster id refused",
			cmd:     step{cmdControllerElected, &controllerElectedV1{NodeID: 1}},
			wantErr: ErrInvalidCommand,
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			tf := newTestFSM(t)
			for _, s := range tc.setup {
				tf.must(s.typ, s.body)
			}
			res := tf.do(tc.cmd.typ, tc.cmd.body)
			if tc.wantErr != nil {
				if !errors.Is(res.err, tc.wantErr) {
					t.Fatalf("error = %v, want %v", res.err, tc.wantErr)
				}
				return
			}
			if res.err != nil {
				t.Fatalf("error = %v", res.err)
			}
			if tc.check != nil {
				tc.check(t, tf.f.Image())
			}
		})
	}
}

func TestAllocateProducerIDsReturnsBlockStart(t *testing.T) {
	tf := newTestFSM(t)
	var got []int64
	for _, n := range []int64{5, 1, 100} {
		got = append(got, tf.must(cmdAllocateProducerID, &allocateProducerIDsV1{Count: n}).firstProducerID)
	}
	if want := []int64{0, 5, 6}; !slices.Equal(got, want) {
		t.Errorf("blocks start at %v, want %v", got, want)
	}
}

func TestUnknownOrMalformedRecordsAreRefused(t *testing.T) {
	valid, err := encodeCommand(cmdDeleteTopic, &deleteTopicV1{Name: "orders"})
	if err != nil {
		t.Fatal(err)
	}
	withVersion := func(v byte) []byte { b := slices.Clone(valid); b[1] = v; return b }
	withType := func(typ byte) []byte { b := slices.Clone(valid); b[0] = typ; return b }
	tests := []struct {
		name string
		data []byte
		want error
	}{
		{"empty", nil, ErrUnknownCommand},
		{"one byte", []byte{byte(cmdDeleteTopic)}, ErrUnknownCommand},
		{"type zero", withType(0), ErrUnknownCommand},
		{"unknown type", withType(200), ErrUnknownCommand},
		{"future version", withVersion(2), ErrUnknownCommand},
		{"version zero", withVersion(0), ErrUnknownCommand},
		{"no body", []byte{byte(cmdDeleteTopic), 1}, ErrInvalidCommand},
		{"body not an object", append([]byte{byte(cmdDeleteTopic), 1}, `"orders"`...), ErrInvalidCommand},
		{"unknown field", append([]byte{byte(cmdDeleteTopic), 1}, `{"name":"orders","force":true}`...), ErrInvalidCommand},
		{"trailing data", append(slices.Clone(valid), `{}`...), ErrInvalidCommand},
		{"truncated body", valid[:len(valid)-1], ErrInvalidCommand},
		{"wrong field type", append([]byte{byte(cmdDeleteTopic), 1}, `{"name":7}`...), ErrInvalidCommand},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			tf := newTestFSM(t)
			tf.must(cmdRegisterBroker, broker(1))
			tf.must(cmdCreateTopic, createTopic("orders", 1, 1, 1))
			before := tf.f.Image()
			ch := tf.f.Changes()
			res := tf.apply(tc.data)
			if !errors.Is(res.err, tc.want) {
				t.Fatalf("error = %v, want %v", res.err, tc.want)
			}
			if tf.f.Image() != before {
				t.Fatal("image replaced")
			}
			select {
			case <-ch:
				t.Fatal("watchers notified of a refused record")
			default:
			}
			// The valid record still applies afterwards.
			if res := tf.apply(valid); res.err != nil {
				t.Fatalf("valid record after refused one: %v", res.err)
			}
		})
	}
}

func TestApplyNotifiesChanges(t *testing.T) {
	tf := newTestFSM(t)
	ch := tf.f.Changes()
	select {
	case <-ch:
		t.Fatal("closed before any change")
	default:
	}
	tf.must(cmdAllocateProducerID, &allocateProducerIDsV1{Count: 1})
	select {
	case <-ch:
	default:
		t.Fatal("not closed after a change")
	}
	if tf.f.Changes() == ch {
		t.Fatal("channel not replaced")
	}
}

func TestEncodedCommandStartsWithTypeAndVersion(t *testing.T) {
	data, err := encodeCommand(cmdCreateTopic, createTopic("a", 1, 1, 1))
	if err != nil {
		t.Fatal(err)
	}
	if data[0] != byte(cmdCreateTopic) || data[1] != 1 || !strings.HasPrefix(string(data[2:]), "{") {
		t.Fatalf("record %q", data)
	}
}

// TestResignLeadership: a leader that gives a partition up hands it to the
// first live ISR member in replica order and leaves the ISR, in one
// change with new epochs; where no other ISR member is alive, or the
// proposal is stale, it keeps the partition.
func TestResignLeadership(t *testing.T) {
	setup := func(t *testing.T) (*testFSM, Partition) {
		tf := newTestFSM(t)
		tf.must(cmdControllerElected, &controllerElectedV1{NodeID: 1, ClusterID: "c"})
		for id := int32(1); id <= 3; id++ {
			tf.must(cmdRegisterBroker, broker(id))
		}
		tf.must(cmdCreateTopic, createTopic("orders", 1, 1, 3))
		p := tf.f.Image().Partition("orders", 0)
		if len(p.ISR) != 3 || p.Leader != p.Replicas[0] {
			t.Fatalf("partition %+v", p)
		}
		return tf, *p
	}
	resign := func(p Partition) *resignLeadershipV1 {
		return &resignLeadershipV1{Topic: "orders", Partition: 0, Leader: p.Leader, LeaderEpoch: p.LeaderEpoch, PartitionEpoch: p.PartitionEpoch}
	}

	t.Run("to the next live ISR member", func(t *testing.T) {
		tf, p := setup(t)
		res := tf.must(cmdResignLeadership, resign(p))
		got := tf.f.Image().Partition("orders", 0)
		want := p.Replicas[1]
		if got.Leader != want || slices.Contains(got.ISR, p.Leader) || len(got.ISR) != 2 ||
			got.LeaderEpoch != p.LeaderEpoch+1 || got.PartitionEpoch != p.PartitionEpoch+1 || res.partition == nil || res.partition.Leader != want {
			t.Fatalf("after %d resigned: %+v (result %+v); want led by %d, ISR without %d, both epochs moved", p.Leader, got, res.partition, want, p.Leader)
		}
	})
	t.Run("skips a fenced member", func(t *testing.T) {
		tf, p := setup(t)
		next := p.Replicas[1]
		tf.must(cmdFenceBroker, &fenceBrokerV2{ID: next, Epoch: tf.f.Image().Brokers[next].Epoch})
		p = *tf.f.Image().Partition("orders", 0)
		tf.must(cmdResignLeadership, resign(p))
		if got := tf.f.Image().Partition("orders", 0); got.Leader != p.Replicas[2] {
			t.Fatalf("after %d resigned with %d fenced: %+v; want led by %d", p.Leader, next, got, p.Replicas[2])
		}
	})
	t.Run("refused without another live ISR member", func(t *testing.T) {
		tf, p := setup(t)
		tf.must(cmdAlterPartition, &alterPartitionV2{Topic: "orders", Partition: 0, Leader: p.Leader,
			LeaderEpoch: p.LeaderEpoch, PartitionEpoch: p.PartitionEpoch, ISR: []int32{p.Leader}})
		p = *tf.f.Image().Partition("orders", 0)
		if res := tf.do(cmdResignLeadership, resign(p)); !errors.Is(res.err, ErrEligibleLeadersNotAvailable) {
			t.Fatalf("resign as the only ISR member: %v; want ErrEligibleLeadersNotAvailable", res.err)
		}
		if got := tf.f.Image().Partition("orders", 0); got.Leader != p.Leader || got.LeaderEpoch != p.LeaderEpoch {
			t.Fatalf("a refused resignation changed the partition: %+v", got)
		}
	})
	t.Run("stale or not the leader", func(t *testing.T) {
		tf, p := setup(t)
		stale := resign(p)
		stale.LeaderEpoch--
		if res := tf.do(cmdResignLeadership, stale); !errors.Is(res.err, ErrFencedLeaderEpoch) {
			t.Errorf("stale leader epoch: %v", res.err)
		}
		other := resign(p)
		other.Leader = p.Replicas[1]
		if res := tf.do(cmdResignLeadership, other); !errors.Is(res.err, ErrNotLeader) {
			t.Errorf("a follower resigning: %v", res.err)
		}
		moved := resign(p)
		moved.PartitionEpoch++
		if res := tf.do(cmdResignLeadership, moved); !errors.Is(res.err, ErrInvalidUpdateVersion) {
			t.Errorf("other partition epoch: %v", res.err)
		}
	})
}

// TestAlterPartitionOfManyPartitions: version 3 applies each change as
// version 2 would, on its own and in order, in one new image; a refused
// change leaves the others, a second change of one partition is checked
// against the first's epochs, and a record changing nothing publishes no
// image.
func TestAlterPartitionOfManyPartitions(t *testing.T) {
	tf := newTestFSM(t)
	tf.must(cmdControllerElected, &controllerElectedV1{NodeID: 1, ClusterID: "c"})
	for id := int32(1); id <= 3; id++ {
		tf.must(cmdRegisterBroker, broker(id))
	}
	tf.must(cmdCreateTopic, createTopic("orders", 1, 3, 3))
	tf.must(cmdCreateTopic, createTopic("audit", 2, 2, 3))
	img := tf.f.Image()
	shrink := func(topic string, id int32) alterPartitionV2 {
		p := img.Partition(topic, id)
		return alterPartitionV2{Topic: topic, Partition: id, Leader: p.Leader, LeaderEpoch: p.LeaderEpoch,
			PartitionEpoch: p.PartitionEpoch, ISR: []int32{p.Leader}}
	}
	stale := shrink("orders", 1)
	stale.LeaderEpoch++
	res := tf.must(cmdAlterPartition, &alterPartitionV3{Changes: []alterPartitionV2{
		shrink("orders", 0),
		stale,
		shrink("audit", 0),
		shrink("orders", 0), // again, at the epochs the first one left behind
		{Topic: "gone", Partition: 0, Leader: 1, ISR: []int32{1}},
		shrink("orders", 2),
	}})
	after := tf.f.Image()
	if after.Version == img.Version {
		t.Fatal("no new image")
	}
	wantErr := []error{nil, ErrFencedLeaderEpoch, nil, ErrInvalidUpdateVersion, ErrUnknownTopic, nil}
	if len(res.alterations) != len(wantErr) {
		t.Fatalf("%d outcomes, want %d", len(res.alterations), len(wantErr))
	}
	for i, want := range wantErr {
		a := res.alterations[i]
		if !errors.Is(a.err, want) || (want == nil) != (a.partition != nil) {
			t.Errorf("change %d: %+v, want error %v", i, a, want)
		}
	}
	for _, tp := range []TopicPartition{{"orders", 0}, {"audit", 0}, {"orders", 2}} {
		before, got := img.Partition(tp.Topic, tp.Partition), after.Partition(tp.Topic, tp.Partition)
		if len(got.ISR) != 1 || got.ISR[0] != got.Leader || got.PartitionEpoch != before.PartitionEpoch+1 {
			t.Errorf("%v: %+v, want its ISR shrunk to its leader, one partition epoch on", tp, got)
		}
	}
	if got, before := after.Partition("orders", 1), img.Partition("orders", 1); !slices.Equal(got.ISR, before.ISR) || got.PartitionEpoch != before.PartitionEpoch {
		t.Errorf("the refused change applied: %+v", got)
	}
	if got := after.Partition("audit", 1); got.PartitionEpoch != img.Partition("audit", 1).PartitionEpoch {
		t.Errorf("a partition no change named moved: %+v", got)
	}

	same := shrink("orders", 1) // its ISR as it is
	same.ISR = after.Partition("orders", 1).ISR
	if res := tf.must(cmdAlterPartition, &alterPartitionV3{Changes: []alterPartitionV2{same}}); tf.f.Image().Version != after.Version ||
		len(res.alterations) != 1 || res.alterations[0].partition == nil {
		t.Errorf("a record changing nothing: image %d (was %d), outcomes %+v", tf.f.Image().Version, after.Version, res.alterations)
	}
	if res := tf.do(cmdAlterPartition, &alterPartitionV3{}); !errors.Is(res.err, ErrInvalidCommand) {
		t.Errorf("a record without changes: %v, want ErrInvalidCommand", res.err)
	}
}
