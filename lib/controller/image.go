package controller

import (
	"crypto/rand"
	"encoding/base64"
	"fmt"
	"maps"
	"slices"

	"github.com/mqproject/mq/lib/auth"
)

// ClusterDefaultBroker is the broker ID under which Image.BrokerConfigs
// keeps the cluster-wide dynamic broker configs (Kafka's resource name "").
const ClusterDefaultBroker int32 = -1

// Image is the cluster metadata at one point of the Raft log. An Image is
// immutable once published: the FSM builds a new Image (sharing the
// unchanged parts with the old one) for every command that changes
// something, so readers may keep and read an *Image from any goroutine
// without locks. Never modify an Image, a Topic or a map or slice reached
// from one.
type Image struct {
	// Version is the Raft log index of the last command that changed the
	// image (commands that were refused do not move it). 0 for the empty
	// image.
	Version uint64
	// ClusterID is generated once, when the first controller is elected:
	// 16 random bytes, base64url without padding (22 characters), like
	// Kafka's cluster.id.
	ClusterID string
	// ControllerID is the node ID of the last elected controller (the Raft
	// leader that wrote its election record); -1 before any election.
	ControllerID int32
	Brokers      map[int32]Broker
	Topics       map[string]*Topic
	TopicsByID   map[TopicID]*Topic
	// BrokerConfigs holds dynamic broker configs by broker ID; the key
	// ClusterDefaultBroker holds the cluster-wide dynamic defaults.
	BrokerConfigs map[int32]map[string]string
	// GroupConfigs holds the configs of groups (Kafka's GROUP config
	// resource: share.auto.offset.reset and the like) by group ID; nil
	// or absent means none.
	GroupConfigs map[string]map[string]string
	// ScramCredentials holds the users' SCRAM credentials: user, then
	// mechanism (auth.ScramSHA256, auth.ScramSHA512). Only salted keys:
	// never a password. nil when there are none.
	ScramCredentials map[string]map[string]auth.Credential
	// NextProducerID is the first producer ID of the next block handed out
	// by AllocateProducerIDs.
	NextProducerID int64
	// ACLs are the cluster's ACL bindings (CreateAcls, DeleteAcls); nil
	// when there are none. Every binding passed auth.Binding.Validate.
	ACLs *auth.ACLs
	// NodePrincipals binds node IDs to the principal of the certificate
	// each node authenticates with on the Raft port (BindNode, with
	// Config.TLS); nil or absent means none.
	NodePrincipals map[int32]string
	// RemoteLogs are the remote parts of the tiered partitions' logs
	// (remote.storage.enable); nil or absent means none.
	RemoteLogs map[RemotePartition]*RemoteLog
	// RemotePurges are deleted topics whose remote objects are still to
	// be deleted from the store (RemotePurged ends it).
	RemotePurges []TopicID
}

// Topic is one topic of an Image. Immutable like the Image holding it.
type Topic struct {
	Name       string
	ID         TopicID
	Partitions []Partition // Partitions[i].ID == i
	Configs    map[string]string
	Internal   bool
}

// Partition is the replica set and leadership state of one partition.
type Partition struct {
	ID       int32
	Replicas []int32
	// ISR is the in-sync replica set, a subset of Replicas.
	ISR []int32
	// Leader is the leader's broker ID, or -1 when the partition has none.
	// A leader is always in the ISR.
	Leader int32
	// LeaderEpoch grows by at least one whenever the leader changes.
	LeaderEpoch int32
	// PartitionEpoch grows by one with every change to this partition.
	PartitionEpoch int32
	// AddingReplicas, RemovingReplicas and OriginalReplicas are set while
	// the partition is being reassigned (KIP-455), nil otherwise. Replicas
	// then holds the target set, in order, followed by the replicas that
	// leave; AddingReplicas are those not in the original set,
	// RemovingReplicas those not in the target (Target), and
	// OriginalReplicas the set before the move in its order, which a
	// cancel restores (Original). Replicas being added replicate in the
	// background and join the ISR like any follower; once all of the
	// target's new replicas are in the ISR the controller drops the
	// leaving ones (alterISR, completeReassignment).
	AddingReplicas   []int32 `json:",omitempty"`
	RemovingReplicas []int32 `json:",omitempty"`
	OriginalReplicas []int32 `json:",omitempty"`
}

// Reassigning reports whether a reassignment of the partition is in
// progress.
func (p Partition) Reassigning() bool {
	return len(p.AddingReplicas) > 0 || len(p.RemovingReplicas) > 0
}

// Target is the replica set the partition is being moved to: Replicas
// when no reassignment is in progress.
func (p Partition) Target() []int32 { return minus(p.Replicas, p.RemovingReplicas) }

// Original is the replica set the partition had before the reassignment
// in progress, in its order, which cancelling it restores: Replicas when
// none is.
func (p Partition) Original() []int32 {
	if p.OriginalReplicas == nil {
		return p.Replicas
	}
	return p.OriginalReplicas
}

// UnderReplicated reports whether the partition's ISR is smaller than
// its original replica set: replicas a reassignment adds do not count
// until the move completes, as in Kafka (KIP-352), so a move alone does
// not make a partition look under-replicated.
func (p Partition) UnderReplicated() bool { return len(p.ISR) < len(p.Original()) }

// minus returns the members of a not in b, in a's order; a itself when
// b is empty (never modify the result).
func minus(a, b []int32) []int32 {
	if len(b) == 0 {
		return a
	}
	var out []int32
	for _, r := range a {
		if !slices.Contains(b, r) {
			out = append(out, r)
		}
	}
	return out
}

// Broker is a registered broker. Epoch is assigned by the controller: the
// Raft log index of the broker's latest registration, so a broker that
// registers again always gets a larger epoch.
//
// A broker is alive when it is neither Fenced nor InControlledShutdown:
// only alive brokers are given new replicas, elected leaders or added to
// an ISR. A replica on a broker that is fenced (or not registered) is
// offline.
type Broker struct {
	ID        int32
	Host      string
	Port      int32
	Rack      *string
	Listeners []string
	Epoch     int64
	// RaftAddr is the address of the node's Raft transport, which also
	// carries the controller RPCs; empty for a node on the in-memory
	// transport of a lone voter.
	RaftAddr string
	// Fenced is set by the active controller when the broker's session
	// timed out (no heartbeat for broker.session.timeout.ms), and cleared
	// by a heartbeat once the broker has caught up with the image, or by
	// a new registration.
	Fenced bool
	// InControlledShutdown is set when the broker asked to shut down: its
	// leaderships have been moved to other in-sync replicas where there
	// were any. A new registration clears it.
	InControlledShutdown bool
}

// alive reports whether the broker may lead, join an ISR or get replicas.
func (b Broker) alive() bool { return !b.Fenced && !b.InControlledShutdown }

// OfflinePartitions counts the partitions without a live leader: none,
// or one that is fenced or not registered. (A leader in controlled
// shutdown still serves until its leaderships have moved.)
func (img *Image) OfflinePartitions() int {
	n := 0
	for _, t := range img.Topics {
		for _, p := range t.Partitions {
			if b, ok := img.Brokers[p.Leader]; p.Leader < 0 || !ok || b.Fenced {
				n++
			}
		}
	}
	return n
}

// BrokerAlive reports whether broker id is registered and alive in img.
func (img *Image) BrokerAlive(id int32) bool {
	b, ok := img.Brokers[id]
	return ok && b.alive()
}

// TopicID is a topic's unique ID (Kafka's topic UUID). Never all zero.
type TopicID [16]byte

// NewTopicID returns a random topic ID. Like Kafka it never returns the
// reserved all-zero ID or the metadata topic's ID 1, and never one whose
// string form starts with '-' (it would read as a command-line flag).
func NewTopicID() (TopicID, error) {
	for {
		var id TopicID
		if _, err := rand.Read(id[:]); err != nil {
			return TopicID{}, fmt.Errorf("controller: topic id: %w", err)
		}
		if id.valid() && id.String()[0] != '-' {
			return id, nil
		}
	}
}

// valid reports whether id is neither the zero ID nor the reserved ID 1.
func (id TopicID) valid() bool {
	return id != TopicID{} && id != TopicID{15: 1}
}

// IsZero reports whether id is the zero (absent) ID.
func (id TopicID) IsZero() bool { return id == TopicID{} }

// String returns id in base64url without padding, as Kafka prints UUIDs.
func (id TopicID) String() string { return base64.RawURLEncoding.EncodeToString(id[:]) }

// MarshalText encodes id like String.
func (id TopicID) MarshalText() ([]byte, error) { return []byte(id.String()), nil }

// UnmarshalText decodes the form produced by MarshalText.
func (id *TopicID) UnmarshalText(b []byte) error {
	parsed, err := ParseTopicID(string(b))
	if err != nil {
		return err
	}
	*id = parsed
	return nil
}

// ParseTopicID parses the base64url form of a topic ID.
func ParseTopicID(s string) (TopicID, error) {
	var id TopicID
	if base64.RawURLEncoding.DecodedLen(len(s)) != len(id) {
		return TopicID{}, fmt.Errorf("controller: topic id %q: want 22 base64url characters", s)
	}
	n, err := base64.RawURLEncoding.Strict().Decode(id[:], []byte(s))
	if err != nil || n != len(id) {
		return TopicID{}, fmt.Errorf("controller: topic id %q: not base64url", s)
	}
	return id, nil
}

// newClusterID returns 16 random bytes in base64url without padding.
func newClusterID() (string, error) {
	var b [16]byte
	if _, err := rand.Read(b[:]); err != nil {
		return "", fmt.Errorf("controller: cluster id: %w", err)
	}
	return base64.RawURLEncoding.EncodeToString(b[:]), nil
}

// emptyImage is the image of a cluster before its first command.
func emptyImage() *Image {
	return &Image{
		ControllerID:  -1,
		Brokers:       map[int32]Broker{},
		Topics:        map[string]*Topic{},
		TopicsByID:    map[TopicID]*Topic{},
		BrokerConfigs: map[int32]map[string]string{},
	}
}

// Partition returns the partition p of topic, or nil.
func (img *Image) Partition(topic string, p int32) *Partition {
	t := img.Topics[topic]
	if t == nil || p < 0 || int(p) >= len(t.Partitions) {
		return nil
	}
	return &t.Partitions[p]
}

// check verifies the invariants of an image: the FSM never publishes an
// image failing it, Restore refuses a snapshot failing it, and the tests
// run it after every command.
func (img *Image) check() error {
	if img.Brokers == nil || img.Topics == nil || img.TopicsByID == nil || img.BrokerConfigs == nil {
		return fmt.Errorf("nil map in image")
	}
	if img.NextProducerID < 0 {
		return fmt.Errorf("negative next producer id %d", img.NextProducerID)
	}
	for id, b := range img.Brokers {
		if b.ID != id || id < 0 {
			return fmt.Errorf("broker %d registered under id %d", b.ID, id)
		}
	}
	for id, cfg := range img.BrokerConfigs {
		if id < -1 || len(cfg) == 0 {
			return fmt.Errorf("broker configs for %d: bad id or empty", id)
		}
	}
	for k, r := range img.RemoteLogs {
		t := img.TopicsByID[k.Topic]
		if t == nil || k.Partition < 0 || int(k.Partition) >= len(t.Partitions) || r == nil || len(r.Segments) == 0 {
			return fmt.Errorf("remote log of %s-%d: no such partition, or empty", k.Topic, k.Partition)
		}
		for i, s := range r.Segments {
			if s.EndOffset < s.BaseOffset || i > 0 && s.BaseOffset != r.Segments[i-1].EndOffset+1 {
				return fmt.Errorf("remote log of %s-%d: segment %d at %d is not contiguous", k.Topic, k.Partition, i, s.BaseOffset)
			}
		}
	}
	if len(img.Topics) != len(img.TopicsByID) {
		return fmt.Errorf("%d topics by name, %d by id", len(img.Topics), len(img.TopicsByID))
	}
	for name, t := range img.Topics {
		if t == nil || t.Name != name || name == "" {
			return fmt.Errorf("topic %q registered under name %q", topicName(t), name)
		}
		if !t.ID.valid() || img.TopicsByID[t.ID] != t {
			return fmt.Errorf("topic %q: id %s not indexed", name, t.ID)
		}
		if len(t.Partitions) == 0 {
			return fmt.Errorf("topic %q has no partitions", name)
		}
		for i, p := range t.Partitions {
			if p.ID != int32(i) {
				return fmt.Errorf("topic %q: partition %d at index %d", name, p.ID, i)
			}
			if err := checkReplicas(p.Replicas); err != nil {
				return fmt.Errorf("topic %q partition %d: %w", name, i, err)
			}
			if err := checkPartitionState(p.Replicas, p.Leader, p.ISR); err != nil {
				return fmt.Errorf("topic %q partition %d: %w", name, i, err)
			}
			if p.LeaderEpoch < 0 || p.PartitionEpoch < 0 {
				return fmt.Errorf("topic %q partition %d: negative epoch", name, i)
			}
			if err := checkReassignment(p); err != nil {
				return fmt.Errorf("topic %q partition %d: %w", name, i, err)
			}
			if b, ok := img.Brokers[p.Leader]; ok && b.Fenced {
				return fmt.Errorf("topic %q partition %d: leader %d is fenced", name, i, p.Leader)
			}
			for _, r := range p.ISR {
				if b, ok := img.Brokers[r]; ok && b.Fenced && len(p.ISR) > 1 {
					return fmt.Errorf("topic %q partition %d: fenced broker %d in isr %v", name, i, r, p.ISR)
				}
			}
		}
	}
	return nil
}

func topicName(t *Topic) string {
	if t == nil {
		return "<nil>"
	}
	return t.Name
}

// checkReplicas verifies a replica list: non-empty, non-negative IDs, no
// duplicates.
func checkReplicas(replicas []int32) error {
	if len(replicas) == 0 {
		return fmt.Errorf("%w: empty replica list", ErrInvalidReplicaAssignment)
	}
	for i, r := range replicas {
		if r < 0 {
			return fmt.Errorf("%w: negative broker id %d", ErrInvalidReplicaAssignment, r)
		}
		if slices.Contains(replicas[:i], r) {
			return fmt.Errorf("%w: broker %d listed twice", ErrInvalidReplicaAssignment, r)
		}
	}
	return nil
}

// checkReassignment verifies that a reassignment's original set is
// Replicas without the replicas it adds, that the replicas it removes are
// replicas, and that neither its original nor its target set is empty.
func checkReassignment(p Partition) error {
	if !p.Reassigning() {
		if p.OriginalReplicas != nil {
			return fmt.Errorf("%w: original replicas %v without a reassignment", ErrInvalidPartitionState, p.OriginalReplicas)
		}
		return nil
	}
	for _, set := range [][]int32{p.AddingReplicas, p.RemovingReplicas, p.OriginalReplicas} {
		if err := checkReplicas(set); len(set) > 0 && err != nil {
			return err
		}
		if len(minus(set, p.Replicas)) > 0 {
			return fmt.Errorf("%w: reassignment replicas %v are not all replicas %v", ErrInvalidPartitionState, set, p.Replicas)
		}
	}
	orig := minus(p.Replicas, p.AddingReplicas)
	if len(orig) == 0 || len(p.Target()) == 0 {
		return fmt.Errorf("%w: reassignment of %v adding %v removing %v leaves no replica", ErrInvalidPartitionState, p.Replicas, p.AddingReplicas, p.RemovingReplicas)
	}
	if len(p.OriginalReplicas) != len(orig) || len(minus(orig, p.OriginalReplicas)) > 0 {
		return fmt.Errorf("%w: original replicas %v are not replicas %v without those added %v", ErrInvalidPartitionState, p.OriginalReplicas, p.Replicas, p.AddingReplicas)
	}
	return nil
}

// checkPartitionState verifies that isr is a duplicate-free subset of
// replicas and that leader is -1 or a member of isr. An empty ISR is only
// allowed without a leader.
func checkPartitionState(replicas []int32, leader int32, isr []int32) error {
	for i, r := range isr {
		if !slices.Contains(replicas, r) {
			return fmt.Errorf("%w: isr member %d is not a replica", ErrInvalidPartitionState, r)
		}
		if slices.Contains(isr[:i], r) {
			return fmt.Errorf("%w: isr member %d listed twice", ErrInvalidPartitionState, r)
		}
	}
	if leader == -1 {
		return nil
	}
	if !slices.Contains(isr, leader) {
		return fmt.Errorf("%w: leader %d is not in the isr", ErrInvalidPartitionState, leader)
	}
	return nil
}

// ScramCredential is the credential of user for a SCRAM mechanism; its
// signature is auth.Credentials'.
func (img *Image) ScramCredential(user, mechanism string) (auth.Credential, bool) {
	c, ok := img.ScramCredentials[user][mechanism]
	return c, ok
}

// ScramUsers lists the users with a SCRAM credential, sorted.
func (img *Image) ScramUsers() []string {
	return slices.Sorted(maps.Keys(img.ScramCredentials))
}
