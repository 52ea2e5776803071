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

// NameForKey names an API key: Kafka's name, or mq's for its own keys.
func NameForKey(key int16) string {
	if key == SkipDamagedKey {
		return "mq.SkipDamaged"
	}
	return kmsg.NameForKey(key)
}

// NewRequest returns an empty request of one of mq's own API keys, or nil.
func NewRequest(key int16) kmsg.Request {
	switch key {
	case SkipDamagedKey:
		return new(SkipDamagedRequest)
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
	return v
}
