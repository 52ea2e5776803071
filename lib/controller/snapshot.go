package controller

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"maps"
	"slices"

	"github.com/mqproject/mq/lib/auth"
)

// A snapshot is the 4-byte magic "MQCI" (mq cluster image), one version
// byte, then the version's body, one JSON object: snapshotV1 for version
// 1, snapshotV2 (brokers with their Raft address and liveness) for
// versions 2 and 3; version 3 partitions may hold a reassignment in
// progress, which an older node refuses rather than forget.
// writeSnapshot writes version 3; readSnapshot reads all three.
// Raft's file snapshot store adds its own CRC, size and index metadata
// around it.
const (
	snapshotMagic   = "MQCI"
	snapshotVersion = 3
	// maxSnapshotSize bounds what Restore reads into memory.
	maxSnapshotSize = 1 << 30
)

type snapshotV1 struct {
	Version        uint64                      `json:"version"`
	ClusterID      string                      `json:"cluster_id"`
	ControllerID   int32                       `json:"controller_id"`
	Brokers        []snapshotBrokerV1          `json:"brokers"`
	Topics         []snapshotTopicV1           `json:"topics"`
	BrokerConfigs  map[int32]map[string]string `json:"broker_configs"`
	NextProducerID int64                       `json:"next_producer_id"`
}

type snapshotBrokerV1 struct {
	ID        int32    `json:"id"`
	Host      string   `json:"host"`
	Port      int32    `json:"port"`
	Rack      *string  `json:"rack,omitempty"`
	Listeners []string `json:"listeners,omitempty"`
	Epoch     int64    `json:"epoch"`
}

// snapshotV2 is snapshotV1 with snapshotBrokerV2 brokers.
type snapshotV2 struct {
	Version        uint64                      `json:"version"`
	ClusterID      string                      `json:"cluster_id"`
	ControllerID   int32                       `json:"controller_id"`
	Brokers        []snapshotBrokerV2          `json:"brokers"`
	Topics         []snapshotTopicV1           `json:"topics"`
	BrokerConfigs  map[int32]map[string]string `json:"broker_configs"`
	NextProducerID int64                       `json:"next_producer_id"`
	// GroupConfigs came later within version 2: absent in older
	// snapshots, which have none.
	GroupConfigs map[string]map[string]string `json:"group_configs,omitempty"`
	// ScramCredentials came later within version 3: user, mechanism,
	// credential. A node that does not know the field refuses the
	// snapshot rather than drop the users.
	ScramCredentials map[string]map[string]snapshotScramV1 `json:"scram_credentials,omitempty"`
	// ACLs came later within version 3, sorted as auth.ACLs keeps them:
	// absent when there are none. A node that does not know the field
	// refuses the snapshot rather than forget them.
	ACLs []aclBindingV1 `json:"acls,omitempty"`
	// NodePrincipals too came later within version 3 (BindNode).
	NodePrincipals map[int32]string `json:"node_principals,omitempty"`
	// RemoteLogs and RemotePurges too came later within version 3
	// (tiered storage); a node that does not know them refuses the
	// snapshot rather than forget remote data.
	RemoteLogs   []snapshotRemoteLogV1 `json:"remote_logs,omitempty"`
	RemotePurges []TopicID             `json:"remote_purges,omitempty"`
}

type snapshotRemoteLogV1 struct {
	Topic     TopicID         `json:"topic_id"`
	Partition int32           `json:"partition"`
	Segments  []RemoteSegment `json:"segments"`
}

type snapshotScramV1 struct {
	Salt       []byte `json:"salt"`
	Iterations int32  `json:"iterations"`
	StoredKey  []byte `json:"stored_key"`
	ServerKey  []byte `json:"server_key"`
}

type snapshotBrokerV2 struct {
	snapshotBrokerV1
	RaftAddr             string `json:"raft_addr,omitempty"`
	Fenced               bool   `json:"fenced,omitempty"`
	InControlledShutdown bool   `json:"in_controlled_shutdown,omitempty"`
}

type snapshotTopicV1 struct {
	Name       string              `json:"name"`
	ID         TopicID             `json:"id"`
	Partitions []snapshotPartition `json:"partitions"`
	Configs    map[string]string   `json:"configs,omitempty"`
	Internal   bool                `json:"internal,omitempty"`
}

type snapshotPartition struct {
	ID             int32   `json:"id"`
	Replicas       []int32 `json:"replicas"`
	ISR            []int32 `json:"isr"`
	Leader         int32   `json:"leader"`
	LeaderEpoch    int32   `json:"leader_epoch"`
	PartitionEpoch int32   `json:"partition_epoch"`
	// Adding and Removing, since version 3, are a reassignment in
	// progress.
	Adding   []int32 `json:"adding,omitempty"`
	Removing []int32 `json:"removing,omitempty"`
	Original []int32 `json:"original,omitempty"`
}

// writeSnapshot writes img in the current snapshot format. The output is a
// function of the image alone (brokers and topics sorted), so equal images
// give equal snapshots.
func writeSnapshot(w io.Writer, img *Image) error {
	s := snapshotV2{
		Version:        img.Version,
		ClusterID:      img.ClusterID,
		ControllerID:   img.ControllerID,
		Brokers:        []snapshotBrokerV2{},
		Topics:         []snapshotTopicV1{},
		BrokerConfigs:  img.BrokerConfigs,
		NextProducerID: img.NextProducerID,
		GroupConfigs:   img.GroupConfigs,
		NodePrincipals: img.NodePrincipals,
	}
	for user, byMech := range img.ScramCredentials {
		if s.ScramCredentials == nil {
			s.ScramCredentials = map[string]map[string]snapshotScramV1{}
		}
		s.ScramCredentials[user] = map[string]snapshotScramV1{}
		for mech, c := range byMech {
			s.ScramCredentials[user][mech] = snapshotScramV1{
				Salt: c.Salt, Iterations: int32(c.Iterations), StoredKey: c.StoredKey, ServerKey: c.ServerKey,
			}
		}
	}
	for _, b := range img.ACLs.Bindings() {
		s.ACLs = append(s.ACLs, aclBindingToV1(b))
	}
	for _, k := range sortedRemote(img.RemoteLogs) {
		s.RemoteLogs = append(s.RemoteLogs, snapshotRemoteLogV1{Topic: k.Topic, Partition: k.Partition, Segments: img.RemoteLogs[k].Segments})
	}
	s.RemotePurges = img.RemotePurges
	for _, id := range sortedKeys(img.Brokers) {
		b := img.Brokers[id]
		s.Brokers = append(s.Brokers, snapshotBrokerV2{
			snapshotBrokerV1: snapshotBrokerV1{
				ID: b.ID, Host: b.Host, Port: b.Port, Rack: b.Rack, Listeners: b.Listeners, Epoch: b.Epoch,
			},
			RaftAddr: b.RaftAddr, Fenced: b.Fenced, InControlledShutdown: b.InControlledShutdown,
		})
	}
	for _, t := range sortedTopics(img) {
		st := snapshotTopicV1{Name: t.Name, ID: t.ID, Configs: t.Configs, Internal: t.Internal}
		for _, p := range t.Partitions {
			st.Partitions = append(st.Partitions, snapshotPartition{
				ID: p.ID, Replicas: p.Replicas, ISR: p.ISR, Leader: p.Leader,
				LeaderEpoch: p.LeaderEpoch, PartitionEpoch: p.PartitionEpoch,
				Adding: p.AddingReplicas, Removing: p.RemovingReplicas, Original: p.OriginalReplicas,
			})
		}
		s.Topics = append(s.Topics, st)
	}
	body, err := json.Marshal(&s)
	if err != nil {
		return fmt.Errorf("encode snapshot: %w", err)
	}
	buf := make([]byte, 0, len(snapshotMagic)+1+len(body))
	buf = append(buf, snapshotMagic...)
	buf = append(buf, snapshotVersion)
	buf = append(buf, body...)
	if _, err := w.Write(buf); err != nil {
		return fmt.Errorf("write snapshot: %w", err)
	}
	return nil
}

// readSnapshot reads an image written by writeSnapshot and checks its
// invariants. Anything else is refused with ErrInvalidSnapshot.
func readSnapshot(r io.Reader) (*Image, error) {
	data, err := io.ReadAll(io.LimitReader(r, maxSnapshotSize+1))
	if err != nil {
		return nil, fmt.Errorf("read snapshot: %w", err)
	}
	if len(data) > maxSnapshotSize {
		return nil, fmt.Errorf("%w: larger than %d bytes", ErrInvalidSnapshot, maxSnapshotSize)
	}
	if len(data) < len(snapshotMagic)+1 || !bytes.HasPrefix(data, []byte(snapshotMagic)) {
		return nil, fmt.Errorf("%w: bad magic", ErrInvalidSnapshot)
	}
	var s snapshotV2
	body := data[len(snapshotMagic)+1:]
	v := data[len(snapshotMagic)]
	switch v {
	case 1:
		var s1 snapshotV1
		if err := strictUnmarshal(body, &s1); err != nil {
			return nil, fmt.Errorf("%w: %v", ErrInvalidSnapshot, err)
		}
		s = snapshotV2{
			Version: s1.Version, ClusterID: s1.ClusterID, ControllerID: s1.ControllerID,
			Topics: s1.Topics, BrokerConfigs: s1.BrokerConfigs, NextProducerID: s1.NextProducerID,
		}
		for _, b := range s1.Brokers {
			s.Brokers = append(s.Brokers, snapshotBrokerV2{snapshotBrokerV1: b})
		}
	case 2, 3:
		if err := strictUnmarshal(body, &s); err != nil {
			return nil, fmt.Errorf("%w: %v", ErrInvalidSnapshot, err)
		}
	default:
		return nil, fmt.Errorf("%w: unknown version %d", ErrInvalidSnapshot, v)
	}
	img := emptyImage()
	img.Version = s.Version
	img.ClusterID = s.ClusterID
	img.ControllerID = s.ControllerID
	img.NextProducerID = s.NextProducerID
	for _, b := range s.Brokers {
		if _, dup := img.Brokers[b.ID]; dup {
			return nil, fmt.Errorf("%w: broker %d twice", ErrInvalidSnapshot, b.ID)
		}
		if len(b.Listeners) == 0 {
			b.Listeners = nil
		}
		img.Brokers[b.ID] = Broker{
			ID: b.ID, Host: b.Host, Port: b.Port, Rack: b.Rack, Listeners: b.Listeners, Epoch: b.Epoch,
			RaftAddr: b.RaftAddr, Fenced: b.Fenced, InControlledShutdown: b.InControlledShutdown,
		}
	}
	for _, st := range s.Topics {
		if _, dup := img.Topics[st.Name]; dup {
			return nil, fmt.Errorf("%w: topic %q twice", ErrInvalidSnapshot, st.Name)
		}
		if _, dup := img.TopicsByID[st.ID]; dup {
			return nil, fmt.Errorf("%w: topic id %s twice", ErrInvalidSnapshot, st.ID)
		}
		t := &Topic{Name: st.Name, ID: st.ID, Configs: st.Configs, Internal: st.Internal}
		if t.Configs == nil {
			t.Configs = map[string]string{}
		}
		for _, p := range st.Partitions {
			if v < 3 && (p.Adding != nil || p.Removing != nil || p.Original != nil) {
				return nil, fmt.Errorf("%w: topic %q: a version %d snapshot holds a reassignment", ErrInvalidSnapshot, st.Name, v)
			}
			t.Partitions = append(t.Partitions, Partition{
				ID: p.ID, Replicas: p.Replicas, ISR: p.ISR, Leader: p.Leader,
				LeaderEpoch: p.LeaderEpoch, PartitionEpoch: p.PartitionEpoch,
				AddingReplicas: p.Adding, RemovingReplicas: p.Removing, OriginalReplicas: p.Original,
			})
		}
		img.Topics[t.Name] = t
		img.TopicsByID[t.ID] = t
	}
	maps.Copy(img.BrokerConfigs, s.BrokerConfigs)
	if len(s.GroupConfigs) > 0 {
		img.GroupConfigs = s.GroupConfigs
	}
	for user, byMech := range s.ScramCredentials {
		for mech, c := range byMech {
			cred := scramCredentialV1{User: user, Mechanism: mech, Salt: c.Salt, Iterations: c.Iterations, StoredKey: c.StoredKey, ServerKey: c.ServerKey}
			if err := checkScramCredential(cred); err != nil {
				return nil, fmt.Errorf("%w: %v", ErrInvalidSnapshot, err)
			}
			if img.ScramCredentials == nil {
				img.ScramCredentials = map[string]map[string]auth.Credential{}
			}
			if img.ScramCredentials[user] == nil {
				img.ScramCredentials[user] = map[string]auth.Credential{}
			}
			img.ScramCredentials[user][mech] = auth.Credential{Salt: c.Salt, Iterations: int(c.Iterations), StoredKey: c.StoredKey, ServerKey: c.ServerKey}
		}
	}
	if len(s.ACLs) > 0 {
		bindings := make([]auth.Binding, len(s.ACLs))
		for i, b := range s.ACLs {
			bindings[i] = b.binding()
			if err := bindings[i].Validate(); err != nil {
				return nil, fmt.Errorf("%w: %v", ErrInvalidSnapshot, err)
			}
		}
		img.ACLs = auth.NewACLs(bindings)
	}
	if len(s.NodePrincipals) > 0 {
		img.NodePrincipals = s.NodePrincipals
	}
	for _, r := range s.RemoteLogs {
		if img.RemoteLogs == nil {
			img.RemoteLogs = map[RemotePartition]*RemoteLog{}
		}
		img.RemoteLogs[RemotePartition{r.Topic, r.Partition}] = &RemoteLog{Segments: r.Segments}
	}
	if len(s.RemotePurges) > 0 {
		img.RemotePurges = s.RemotePurges
	}
	if err := img.check(); err != nil {
		return nil, fmt.Errorf("%w: %v", ErrInvalidSnapshot, err)
	}
	return img, nil
}

func sortedRemote(m map[RemotePartition]*RemoteLog) []RemotePartition {
	out := slices.Collect(maps.Keys(m))
	slices.SortFunc(out, func(a, b RemotePartition) int {
		if c := bytes.Compare(a.Topic[:], b.Topic[:]); c != 0 {
			return c
		}
		return int(a.Partition - b.Partition)
	})
	return out
}

func sortedKeys[K ~int32, V any](m map[K]V) []K {
	out := make([]K, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	slices.Sort(out)
	return out
}
