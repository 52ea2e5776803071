package kafkaext

import (
	"encoding/json"
	"fmt"

	"github.com/twmb/franz-go/pkg/kmsg"
	"github.com/twmb/franz-go/pkg/kversion"
)

// SkipDamagedKey is the API key of SkipDamaged.
const SkipDamagedKey int16 = 16384

// SkipDamagedRequest asks a partition's leader to give up damaged ranges
// of its log: their offsets are lost for good, and consumers step over
// them as over a gap. It is the explicit, logged way out when no healthy
// copy of the data exists (one replica). Send it to the leader.
type SkipDamagedRequest struct {
	Version    int16                  `json:"-"`
	Topic      string                 `json:"topic"`
	Partitions []SkipDamagedPartition `json:"partitions"`
}

// SkipDamagedPartition is one partition of a SkipDamagedRequest.
type SkipDamagedPartition struct {
	Partition int32 `json:"partition"`
	// Offset picks the damaged range holding it; -1 skips every damaged
	// range of the partition.
	Offset int64 `json:"offset"`
}

// SkipDamagedResponse answers a SkipDamagedRequest.
type SkipDamagedResponse struct {
	Version    int16                          `json:"-"`
	Partitions []SkipDamagedPartitionResponse `json:"partitions"`
}

// SkipDamagedPartitionResponse is one partition of a SkipDamagedResponse.
type SkipDamagedPartitionResponse struct {
	Partition int32 `json:"partition"`
	// ErrorCode is a Kafka error code: UNKNOWN_TOPIC_OR_PARTITION,
	// NOT_LEADER_OR_FOLLOWER, OFFSET_OUT_OF_RANGE (no damaged range holds
	// the offset), KAFKA_STORAGE_ERROR.
	ErrorCode    int16          `json:"error_code"`
	ErrorMessage string         `json:"error_message,omitempty"`
	Skipped      []DamagedRange `json:"skipped"`
}

// RefetchKey is the API key of Refetch.
const RefetchKey int16 = 16385

// RefetchRequest is a follower's request to its leader for leave to cut
// its log before a damaged range and fetch the rest again. The follower's
// own image cannot tell it whether it is out of the ISR: the leader may
// have added it an instant ago, or be proposing it. The leader can: it
// grants the request only when the follower is neither in the ISR nor
// being added to it, and from then on keeps the follower out of the ISR
// until it fetches at or below the offset (it cut); otherwise it refuses
// and takes the follower out of the ISR, and the follower asks again.
// Brokers send it to each other.
type RefetchRequest struct {
	Version    int16              `json:"-"`
	ReplicaID  int32              `json:"replica_id"`
	Partitions []RefetchPartition `json:"partitions"`
}

// RefetchPartition is one partition of a RefetchRequest.
type RefetchPartition struct {
	Topic       string `json:"topic"`
	Partition   int32  `json:"partition"`
	LeaderEpoch int32  `json:"leader_epoch"`
	// Offset is where the follower would cut: the damaged range's first
	// offset.
	Offset int64 `json:"offset"`
}

// RefetchResponse answers a RefetchRequest.
type RefetchResponse struct {
	Version    int16                      `json:"-"`
	Partitions []RefetchPartitionResponse `json:"partitions"`
}

// RefetchPartitionResponse is one partition of a RefetchResponse.
type RefetchPartitionResponse struct {
	Topic     string `json:"topic"`
	Partition int32  `json:"partition"`
	// ErrorCode is a Kafka error code: UNKNOWN_TOPIC_OR_PARTITION,
	// NOT_LEADER_OR_FOLLOWER, FENCED_LEADER_EPOCH, UNKNOWN_LEADER_EPOCH.
	ErrorCode    int16  `json:"error_code"`
	ErrorMessage string `json:"error_message,omitempty"`
	// Granted: the follower may cut. False without an error: it is in
	// the ISR, or being added, and is being taken out.
	Granted bool `json:"granted"`
}

// NameForKey names an API key: Kafka's name, or mq's for its own keys.
func NameForKey(key int16) string {
	switch key {
	case SkipDamagedKey:
		return "mq.SkipDamaged"
	case RefetchKey:
		return "mq.Refetch"
	}
	return kmsg.NameForKey(key)
}

// NewRequest returns an empty request of one of mq's own API keys, or nil.
func NewRequest(key int16) kmsg.Request {
	switch key {
	case SkipDamagedKey:
		return new(SkipDamagedRequest)
	case RefetchKey:
		return new(RefetchRequest)
	}
	return nil
}

func (*SkipDamagedRequest) Key() int16           { return SkipDamagedKey }
func (*SkipDamagedRequest) MaxVersion() int16    { return 0 }
func (r *SkipDamagedRequest) SetVersion(v int16) { r.Version = v }
func (r *SkipDamagedRequest) GetVersion() int16  { return r.Version }
func (*SkipDamagedRequest) IsFlexible() bool     { return true }
func (r *SkipDamagedRequest) AppendTo(b []byte) []byte {
	return appendJSON(b, r)
}
func (r *SkipDamagedRequest) ReadFrom(b []byte) error { return readJSON(b, r, "SkipDamaged request") }
func (r *SkipDamagedRequest) ResponseKind() kmsg.Response {
	return &SkipDamagedResponse{Version: r.Version}
}

func (*SkipDamagedResponse) Key() int16           { return SkipDamagedKey }
func (*SkipDamagedResponse) MaxVersion() int16    { return 0 }
func (r *SkipDamagedResponse) SetVersion(v int16) { r.Version = v }
func (r *SkipDamagedResponse) GetVersion() int16  { return r.Version }
func (*SkipDamagedResponse) IsFlexible() bool     { return true }
func (r *SkipDamagedResponse) AppendTo(b []byte) []byte {
	return appendJSON(b, r)
}
func (r *SkipDamagedResponse) ReadFrom(b []byte) error {
	return readJSON(b, r, "SkipDamaged response")
}
func (r *SkipDamagedResponse) RequestKind() kmsg.Request {
	return &SkipDamagedRequest{Version: r.Version}
}

func (*RefetchRequest) Key() int16                 { return RefetchKey }
func (*RefetchRequest) MaxVersion() int16          { return 0 }
func (r *RefetchRequest) SetVersion(v int16)       { r.Version = v }
func (r *RefetchRequest) GetVersion() int16        { return r.Version }
func (*RefetchRequest) IsFlexible() bool           { return true }
func (r *RefetchRequest) AppendTo(b []byte) []byte { return appendJSON(b, r) }
func (r *RefetchRequest) ReadFrom(b []byte) error  { return readJSON(b, r, "Refetch request") }
func (r *RefetchRequest) ResponseKind() kmsg.Response {
	return &RefetchResponse{Version: r.Version}
}

func (*RefetchResponse) Key() int16                 { return RefetchKey }
func (*RefetchResponse) MaxVersion() int16          { return 0 }
func (r *RefetchResponse) SetVersion(v int16)       { r.Version = v }
func (r *RefetchResponse) GetVersion() int16        { return r.Version }
func (*RefetchResponse) IsFlexible() bool           { return true }
func (r *RefetchResponse) AppendTo(b []byte) []byte { return appendJSON(b, r) }
func (r *RefetchResponse) ReadFrom(b []byte) error  { return readJSON(b, r, "Refetch response") }
func (r *RefetchResponse) RequestKind() kmsg.Request {
	return &RefetchRequest{Version: r.Version}
}

// appendJSON appends v's JSON encoding; the types here always encode.
func appendJSON(b []byte, v any) []byte {
	j, err := json.Marshal(v)
	if err != nil {
		panic(fmt.Sprintf("kafkaext: encode %T: %v", v, err))
	}
	return append(b, j...)
}

func readJSON(b []byte, v any, what string) error {
	if err := json.Unmarshal(b, v); err != nil {
		return fmt.Errorf("kafkaext: decode %s: %w", what, err)
	}
	return nil
}

// Versions returns the API versions a kgo client may use (kgo.MaxVersions):
// kgo's stable Kafka versions and mq's requests, which kgo otherwise
// refuses to send as keys it does not know.
func Versions() *kversion.Versions {
	v := kversion.Stable()
	v.SetMaxKeyVersion(SkipDamagedKey, 0)
	v.SetMaxKeyVersion(RefetchKey, 0)
	return v
}
