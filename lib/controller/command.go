package controller

import (
	"bytes"
	"encoding/json"
	"fmt"

	"github.com/mqproject/mq/lib/auth"
)

// commandType is the first byte of every record the controller writes to
// the Raft log. Values are never reused: a retired command keeps its number.
type commandType uint8

const (
	cmdControllerElected  commandType = 1
	cmdRegisterBroker     commandType = 2
	cmdCreateTopic        commandType = 3
	cmdDeleteTopic        commandType = 4
	cmdCreatePartitions   commandType = 5
	cmdAlterTopicConfigs  commandType = 6
	cmdAlterBrokerConfigs commandType = 7
	cmdAlterPartition     commandType = 8
	cmdAllocateProducerID commandType = 9
	cmdFenceBroker        commandType = 10
	cmdUnfenceBroker      commandType = 11
	cmdControlledShutdown commandType = 12
	cmdElectLeaders       commandType = 13
	cmdResignLeadership   commandType = 14
	cmdAlterGroupConfigs  commandType = 15
	cmdAlterReassignments commandType = 16
	// cmdAlterScramCredentials upserts and deletes users' SCRAM
	// credentials (AlterUserScramCredentials).
	cmdAlterScramCredentials commandType = 17
	cmdAlterACLs             commandType = 18
	cmdBindNode              commandType = 19
	// cmdUnregisterBroker removes a stopped broker that hosts no replica
	// from the image, with its certificate binding (UnregisterBroker).
	cmdUnregisterBroker commandType = 30
	// Tiered storage: the remote-log metadata (remote.go). 23 and 24
	// are kept for it.
	cmdRemoteSegmentUploaded commandType = 20
	cmdRemoteSegmentsDeleted commandType = 21
	cmdRemotePurged          commandType = 22
)

func (t commandType) String() string {
	switch t {
	case cmdControllerElected:
		return "ControllerElected"
	case cmdRegisterBroker:
		return "RegisterBroker"
	case cmdCreateTopic:
		return "CreateTopic"
	case cmdDeleteTopic:
		return "DeleteTopic"
	case cmdCreatePartitions:
		return "CreatePartitions"
	case cmdAlterTopicConfigs:
		return "AlterTopicConfigs"
	case cmdAlterBrokerConfigs:
		return "AlterBrokerConfigs"
	case cmdAlterPartition:
		return "AlterPartition"
	case cmdAllocateProducerID:
		return "AllocateProducerIDs"
	case cmdFenceBroker:
		return "FenceBroker"
	case cmdUnfenceBroker:
		return "UnfenceBroker"
	case cmdControlledShutdown:
		return "ControlledShutdown"
	case cmdElectLeaders:
		return "ElectLeaders"
	case cmdResignLeadership:
		return "ResignLeadership"
	case cmdAlterGroupConfigs:
		return "AlterGroupConfigs"
	case cmdAlterReassignments:
		return "AlterReassignments"
	case cmdAlterScramCredentials:
		return "AlterScramCredentials"
	case cmdAlterACLs:
		return "AlterACLs"
	case cmdBindNode:
		return "BindNode"
	case cmdUnregisterBroker:
		return "UnregisterBroker"
	case cmdRemoteSegmentUploaded:
		return "RemoteSegmentUploaded"
	case cmdRemoteSegmentsDeleted:
		return "RemoteSegmentsDeleted"
	case cmdRemotePurged:
		return "RemotePurged"
	}
	return fmt.Sprintf("command(%d)", uint8(t))
}

// bodyVersion is the version byte written for a body: each body struct is
// one version of one command (the V<n> suffix). Decoding accepts exactly
// the versions listed in decodeCommand.
func bodyVersion(body any) byte {
	switch body.(type) {
	case *registerBrokerV2, *alterPartitionV2, *fenceBrokerV2, *unfenceBrokerV2, *electLeadersV2:
		return 2
	case *registerBrokerV3, *alterPartitionV3:
		return 3
	case *registerBrokerV4:
		return 4
	}
	return 1
}

// retired reports whether a record of type t and version is one this
// build reads (it may be in a log, and is replayed with its own meaning)
// but never writes. A propose received over the RPC is refused for it:
// only Apply of the log reads retired versions.
func retired(t commandType, version byte) bool {
	switch t {
	case cmdRegisterBroker:
		return version < 3
	case cmdFenceBroker, cmdUnfenceBroker:
		return version < 2
	}
	return false
}

// Command bodies. The JSON field names are part of the on-disk format:
// rename a Go field freely, never a tag. A change of meaning needs a new
// version (and decodeCommand keeps reading the old one).

type controllerElectedV1 struct {
	NodeID int32 `json:"node_id"`
	// ClusterID is a fresh random ID proposed by the new controller; the
	// FSM keeps it only when the image has no cluster ID yet.
	ClusterID string `json:"cluster_id"`
}

type registerBrokerV1 struct {
	ID        int32    `json:"id"`
	Host      string   `json:"host"`
	Port      int32    `json:"port"`
	Rack      *string  `json:"rack,omitempty"`
	Listeners []string `json:"listeners,omitempty"`
}

// registerBrokerV2 adds the node's Raft address. Version 2 also changed
// what a registration does (version 1 records keep their old meaning):
// it clears Fenced and InControlledShutdown, moves the leaderships of an
// earlier registration of the same ID to other live in-sync replicas, and
// elects the broker where a partition has no leader.
type registerBrokerV2 struct {
	ID        int32    `json:"id"`
	Host      string   `json:"host"`
	Port      int32    `json:"port"`
	Rack      *string  `json:"rack,omitempty"`
	Listeners []string `json:"listeners,omitempty"`
	RaftAddr  string   `json:"raft_addr,omitempty"`
	// Unclean is the proposing controller's static default of
	// unclean.leader.election.enable.
	Unclean bool `json:"unclean,omitempty"`
}

// registerBrokerV3 is registerBrokerV2 without Unclean: a registration
// never elects a leader from outside the ISR (the active controller
// proposes unclean elections itself, electLeadersV2).
type registerBrokerV3 struct {
	ID        int32    `json:"id"`
	Host      string   `json:"host"`
	Port      int32    `json:"port"`
	Rack      *string  `json:"rack,omitempty"`
	Listeners []string `json:"listeners,omitempty"`
	RaftAddr  string   `json:"raft_addr,omitempty"`
}

// registerBrokerV4 is registerBrokerV3 that also names the partitions
// whose replica on the broker lost records it knew as committed: its log
// ended below its checkpointed high-water mark when the broker opened it
// (a power loss took what was not flushed). The broker leaves their ISRs
// (an ISR it alone was in becomes empty), and leads there only after an
// unclean election; a partition of one replica is the exception, where
// it leads on what it kept. Its JSON is version 3's fields and
// lost_committed.
type registerBrokerV4 struct {
	registerBrokerV3
	LostCommitted []lostReplicaV4 `json:"lost_committed"`
}

// lostReplicaV4 is one replica that lost committed records, with the
// evidence: its log end offset at open and its checkpointed high-water
// mark.
type lostReplicaV4 struct {
	Topic         string `json:"topic"`
	Partition     int32  `json:"partition"`
	EndOffset     int64  `json:"end_offset"`
	HighWatermark int64  `json:"high_watermark"`
}

// fenceBrokerV1 fences a broker whose session timed out.
type fenceBrokerV1 struct {
	ID      int32 `json:"id"`
	Epoch   int64 `json:"epoch"`
	Unclean bool  `json:"unclean,omitempty"`
}

// fenceBrokerV2 is fenceBrokerV1 that never elects a leader from outside
// the ISR.
type fenceBrokerV2 struct {
	ID    int32 `json:"id"`
	Epoch int64 `json:"epoch"`
}

// unfenceBrokerV1 lifts the fence of a broker that heartbeats again.
type unfenceBrokerV1 struct {
	ID      int32 `json:"id"`
	Epoch   int64 `json:"epoch"`
	Unclean bool  `json:"unclean,omitempty"`
}

// unfenceBrokerV2 is unfenceBrokerV1 that never elects a leader from
// outside the ISR.
type unfenceBrokerV2 struct {
	ID    int32 `json:"id"`
	Epoch int64 `json:"epoch"`
}

// controlledShutdownV1 starts the controlled shutdown of a broker, or
// moves the leaderships it took since.
type controlledShutdownV1 struct {
	ID    int32 `json:"id"`
	Epoch int64 `json:"epoch"`
}

// electLeadersV1 runs a preferred (0) or unclean (1) election.
type electLeadersV1 struct {
	Type int8 `json:"type"`
	// Partitions nil means every partition.
	Partitions []topicPartitionV1 `json:"partitions"`
}

// electLeadersV2 is electLeadersV1 where an unclean election elects only
// the leaders the active controller chose (from the brokers' reports of
// their logs) and named in Leaders: a partition without a leader gets its
// first live ISR member, else its named leader when that one is a live
// replica, else none (ErrEligibleLeadersNotAvailable).
type electLeadersV2 struct {
	Type int8 `json:"type"`
	// Partitions nil means every partition.
	Partitions []topicPartitionV1 `json:"partitions"`
	Leaders    []uncleanLeaderV2  `json:"leaders,omitempty"`
	// Configured marks the controller's own election (not an operator's):
	// a named leader is elected only where unclean.leader.election.enable
	// allows it, Default being the proposer's static default.
	Configured bool `json:"configured,omitempty"`
	Default    bool `json:"default,omitempty"`
}

// uncleanLeaderV2 is the leader chosen for one partition and the position
// of its log it reported.
type uncleanLeaderV2 struct {
	Topic     string `json:"topic"`
	Partition int32  `json:"partition"`
	Leader    int32  `json:"leader"`
	LastEpoch int32  `json:"last_epoch"`
	EndOffset int64  `json:"end_offset"`
}

// alterReassignmentsV1 starts, changes or cancels the reassignments of
// partitions (AlterPartitionReassignments), each on its own.
type alterReassignmentsV1 struct {
	Partitions []reassignmentV1 `json:"partitions"`
}

type reassignmentV1 struct {
	Topic     string `json:"topic"`
	Partition int32  `json:"partition"`
	// Replicas is the target replica set; null cancels.
	Replicas []int32 `json:"replicas"`
}

// alterScramCredentialsV1 upserts and deletes SCRAM credentials, all or
// none: a credential that is invalid (unknown mechanism, iterations out
// of bounds, empty user or keys) refuses the command. Deleting a
// credential that does not exist is not an error. Deletions apply
// before upsertions.
type alterScramCredentialsV1 struct {
	Upsertions []scramCredentialV1 `json:"upsertions,omitempty"`
	Deletions  []scramDeletionV1   `json:"deletions,omitempty"`
}

// scramCredentialV1 is one user's credential for one mechanism: only the
// salted keys, never a password or salted password.
type scramCredentialV1 struct {
	User       string `json:"user"`
	Mechanism  string `json:"mechanism"`
	Salt       []byte `json:"salt"`
	Iterations int32  `json:"iterations"`
	StoredKey  []byte `json:"stored_key"`
	ServerKey  []byte `json:"server_key"`
}

type scramDeletionV1 struct {
	User      string `json:"user"`
	Mechanism string `json:"mechanism"`
}

type topicPartitionV1 struct {
	Topic     string `json:"topic"`
	Partition int32  `json:"partition"`
}

type createTopicV1 struct {
	Name              string            `json:"name"`
	ID                TopicID           `json:"id"`
	Partitions        int32             `json:"partitions"`
	ReplicationFactor int16             `json:"replication_factor"`
	Assignments       [][]int32         `json:"assignments,omitempty"`
	Configs           map[string]string `json:"configs,omitempty"`
	Internal          bool              `json:"internal,omitempty"`
}

type deleteTopicV1 struct {
	Name string `json:"name"`
}

type createPartitionsV1 struct {
	Topic string `json:"topic"`
	Total int32  `json:"total"`
	// Assignments lists the replicas of the new partitions only.
	Assignments [][]int32 `json:"assignments,omitempty"`
}

type alterTopicConfigsV1 struct {
	Topic  string            `json:"topic"`
	Set    map[string]string `json:"set,omitempty"`
	Delete []string          `json:"delete,omitempty"`
}

type alterBrokerConfigsV1 struct {
	BrokerID int32             `json:"broker_id"`
	Set      map[string]string `json:"set,omitempty"`
	Delete   []string          `json:"delete,omitempty"`
}

type alterGroupConfigsV1 struct {
	Group  string            `json:"group"`
	Set    map[string]string `json:"set,omitempty"`
	Delete []string          `json:"delete,omitempty"`
}

// alterACLsV1 deletes the ACL bindings any of Delete selects, then adds
// Create (CreateAcls, DeleteAcls). A binding that does not validate
// refuses the whole command.
type alterACLsV1 struct {
	Create []aclBindingV1 `json:"create,omitempty"`
	Delete []aclFilterV1  `json:"delete,omitempty"`
}

// aclBindingV1 is an auth.Binding; the enums are Kafka's wire values.
type aclBindingV1 struct {
	ResourceType int8   `json:"resource_type"`
	ResourceName string `json:"resource_name"`
	PatternType  int8   `json:"pattern_type"`
	Principal    string `json:"principal"`
	Host         string `json:"host"`
	Operation    int8   `json:"operation"`
	Permission   int8   `json:"permission"`
}

// aclFilterV1 is an auth.Filter; a nil name, principal or host matches
// any.
type aclFilterV1 struct {
	ResourceType int8    `json:"resource_type"`
	ResourceName *string `json:"resource_name,omitempty"`
	PatternType  int8    `json:"pattern_type"`
	Principal    *string `json:"principal,omitempty"`
	Host         *string `json:"host,omitempty"`
	Operation    int8    `json:"operation"`
	Permission   int8    `json:"permission"`
}

func aclBindingToV1(b auth.Binding) aclBindingV1 {
	return aclBindingV1{ResourceType: int8(b.ResourceType), ResourceName: b.ResourceName, PatternType: int8(b.PatternType),
		Principal: b.Principal, Host: b.Host, Operation: int8(b.Operation), Permission: int8(b.Permission)}
}

func (b aclBindingV1) binding() auth.Binding {
	return auth.Binding{ResourceType: auth.ResourceType(b.ResourceType), ResourceName: b.ResourceName, PatternType: auth.PatternType(b.PatternType),
		Principal: b.Principal, Host: b.Host, Operation: auth.Operation(b.Operation), Permission: auth.Permission(b.Permission)}
}

func aclFilterToV1(f auth.Filter) aclFilterV1 {
	return aclFilterV1{ResourceType: int8(f.ResourceType), ResourceName: f.ResourceName, PatternType: int8(f.PatternType),
		Principal: f.Principal, Host: f.Host, Operation: int8(f.Operation), Permission: int8(f.Permission)}
}

func (f aclFilterV1) filter() auth.Filter {
	return auth.Filter{ResourceType: auth.ResourceType(f.ResourceType), ResourceName: f.ResourceName, PatternType: auth.PatternType(f.PatternType),
		Principal: f.Principal, Host: f.Host, Operation: auth.Operation(f.Operation), Permission: auth.Permission(f.Permission)}
}

type alterPartitionV1 struct {
	Topic       string  `json:"topic"`
	Partition   int32   `json:"partition"`
	Leader      int32   `json:"leader"`
	ISR         []int32 `json:"isr"`
	LeaderEpoch int32   `json:"leader_epoch"`
}

// alterPartitionV2 is an ISR change proposed by the partition's leader,
// valid only against the leader epoch and partition epoch it names.
type alterPartitionV2 struct {
	Topic          string  `json:"topic"`
	Partition      int32   `json:"partition"`
	Leader         int32   `json:"leader"`
	LeaderEpoch    int32   `json:"leader_epoch"`
	PartitionEpoch int32   `json:"partition_epoch"`
	ISR            []int32 `json:"isr"`
}

// alterPartitionV3 is a leader's ISR changes of many partitions in one
// record: each is checked and applied as version 2 applies one, in order
// and on its own, so that a refused change leaves the others. A node
// rejoining the ISRs of 10,000 partitions takes tens of records instead
// of 10,000.
type alterPartitionV3 struct {
	Changes []alterPartitionV2 `json:"changes"`
}

// bindNodeV1 binds a node ID to the principal of the certificate its
// node authenticates with on the Raft port (Config.TLS): from then on
// only a connection with that principal speaks for the node. A binding
// is never changed: binding a bound ID to another principal, or a
// principal bound to another ID, is refused.
type bindNodeV1 struct {
	ID        int32  `json:"id"`
	Principal string `json:"principal"`
}

// unregisterBrokerV1 removes broker ID's registration and its node's
// certificate binding; refused while the broker is alive or hosts a
// replica.
type unregisterBrokerV1 struct {
	ID int32 `json:"id"`
}

// resignLeadershipV1 is a leader giving up a partition whose log it
// cannot serve whole (a damaged range below the high-water mark): it
// leaves the leadership and the ISR, and the first live ISR member in
// replica order leads. Valid only against the epochs it names.
type resignLeadershipV1 struct {
	Topic          string `json:"topic"`
	Partition      int32  `json:"partition"`
	Leader         int32  `json:"leader"`
	LeaderEpoch    int32  `json:"leader_epoch"`
	PartitionEpoch int32  `json:"partition_epoch"`
}

type allocateProducerIDsV1 struct {
	Count int64 `json:"count"`
}

// encodeCommand frames body as a record of type t at the body's version:
// type byte, version byte, JSON body.
func encodeCommand(t commandType, body any) ([]byte, error) {
	js, err := json.Marshal(body)
	if err != nil {
		return nil, fmt.Errorf("encode %v: %w", t, err)
	}
	return append([]byte{byte(t), bodyVersion(body)}, js...), nil
}

// decodeCommand decodes a record into its command type and a pointer to its
// body struct. It refuses unknown types and versions with ErrUnknownCommand
// and bodies that are not exactly one JSON object of known fields with
// ErrInvalidCommand.
func decodeCommand(data []byte) (commandType, any, error) {
	if len(data) < 2 {
		return 0, nil, fmt.Errorf("%w: record of %d bytes", ErrUnknownCommand, len(data))
	}
	t, version := commandType(data[0]), data[1]
	var body any
	switch {
	case t == cmdControllerElected && version == 1:
		body = new(controllerElectedV1)
	case t == cmdRegisterBroker && version == 1:
		body = new(registerBrokerV1)
	case t == cmdRegisterBroker && version == 2:
		body = new(registerBrokerV2)
	case t == cmdRegisterBroker && version == 3:
		body = new(registerBrokerV3)
	case t == cmdRegisterBroker && version == 4:
		body = new(registerBrokerV4)
	case t == cmdCreateTopic && version == 1:
		body = new(createTopicV1)
	case t == cmdDeleteTopic && version == 1:
		body = new(deleteTopicV1)
	case t == cmdCreatePartitions && version == 1:
		body = new(createPartitionsV1)
	case t == cmdAlterTopicConfigs && version == 1:
		body = new(alterTopicConfigsV1)
	case t == cmdAlterBrokerConfigs && version == 1:
		body = new(alterBrokerConfigsV1)
	case t == cmdAlterGroupConfigs && version == 1:
		body = new(alterGroupConfigsV1)
	case t == cmdAlterPartition && version == 1:
		body = new(alterPartitionV1)
	case t == cmdAlterPartition && version == 2:
		body = new(alterPartitionV2)
	case t == cmdAlterPartition && version == 3:
		body = new(alterPartitionV3)
	case t == cmdFenceBroker && version == 1:
		body = new(fenceBrokerV1)
	case t == cmdFenceBroker && version == 2:
		body = new(fenceBrokerV2)
	case t == cmdUnfenceBroker && version == 1:
		body = new(unfenceBrokerV1)
	case t == cmdUnfenceBroker && version == 2:
		body = new(unfenceBrokerV2)
	case t == cmdControlledShutdown && version == 1:
		body = new(controlledShutdownV1)
	case t == cmdElectLeaders && version == 1:
		body = new(electLeadersV1)
	case t == cmdElectLeaders && version == 2:
		body = new(electLeadersV2)
	case t == cmdResignLeadership && version == 1:
		body = new(resignLeadershipV1)
	case t == cmdAllocateProducerID && version == 1:
		body = new(allocateProducerIDsV1)
	case t == cmdAlterReassignments && version == 1:
		body = new(alterReassignmentsV1)
	case t == cmdAlterScramCredentials && version == 1:
		body = new(alterScramCredentialsV1)
	case t == cmdAlterACLs && version == 1:
		body = new(alterACLsV1)
	case t == cmdBindNode && version == 1:
		body = new(bindNodeV1)
	case t == cmdUnregisterBroker && version == 1:
		body = new(unregisterBrokerV1)
	case t == cmdRemoteSegmentUploaded && version == 1:
		body = new(remoteSegmentUploadedV1)
	case t == cmdRemoteSegmentsDeleted && version == 1:
		body = new(remoteSegmentsDeletedV1)
	case t == cmdRemotePurged && version == 1:
		body = new(remotePurgedV1)
	default:
		return t, nil, fmt.Errorf("%w: %v version %d", ErrUnknownCommand, t, version)
	}
	if err := strictUnmarshal(data[2:], body); err != nil {
		return t, nil, fmt.Errorf("%w: %v version %d: %v", ErrInvalidCommand, t, version, err)
	}
	return t, body, nil
}

// strictUnmarshal decodes exactly one JSON object with no unknown fields
// and nothing after it.
func strictUnmarshal(data []byte, v any) error {
	data = bytes.TrimSpace(data)
	if len(data) == 0 || data[0] != '{' {
		return fmt.Errorf("body is not a JSON object")
	}
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.DisallowUnknownFields()
	if err := dec.Decode(v); err != nil {
		return err
	}
	if dec.More() || dec.InputOffset() != int64(len(data)) {
		return fmt.Errorf("trailing data after JSON body")
	}
	return nil
}
