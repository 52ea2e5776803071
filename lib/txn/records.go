package txn

import (
	"errors"
	"fmt"
	"slices"
	"time"

	"github.com/twmb/franz-go/pkg/kmsg"
)

// Records of __transaction_state, Kafka's layouts (kmsg.TxnMetadataKey
// and kmsg.TxnMetadataValue), so that its tools read ours:
//
//	key   (version 0): version int16, transactional id string
//	value (version 1, flexible): version int16, producer id int64,
//	      producer epoch int16, timeout int32 (ms), state int8,
//	      partitions (nullable compact array of topic, partitions []int32),
//	      last update int64 (ms), start int64 (ms), and the tagged fields
//	      previous producer id (0), next producer id (1), client
//	      transaction version (2), next producer epoch (3)
//
// Metadata.LastEpoch has no field: it lives in memory only, and a
// request retried across a failover is answered as a fenced one.
//
// A null value is a tombstone: the transactional id expired.
const (
	keyVersion   = 0
	valueVersion = 1
)

var errBadRecord = errors.New("txn: malformed __transaction_state record")

func encodeKey(id string) []byte {
	k := kmsg.NewTxnMetadataKey()
	k.Version, k.TransactionalID = keyVersion, id
	return k.AppendTo(nil)
}

func decodeKey(b []byte) (string, error) {
	k := kmsg.NewTxnMetadataKey()
	if err := k.ReadFrom(b); err != nil {
		return "", fmt.Errorf("%w: key: %v", errBadRecord, err)
	}
	if k.Version != keyVersion {
		return "", fmt.Errorf("%w: key version %d", errBadRecord, k.Version)
	}
	return k.TransactionalID, nil
}

func encodeValue(m *Metadata) []byte {
	v := kmsg.NewTxnMetadataValue()
	v.Version = valueVersion
	v.ProducerID, v.ProducerEpoch = m.ProducerID, m.Epoch
	v.TimeoutMillis = int32(m.Timeout.Milliseconds())
	v.State = kmsg.TransactionState(m.State)
	for _, tp := range m.Partitions {
		if n := len(v.Topics); n > 0 && v.Topics[n-1].Topic == tp.Topic {
			v.Topics[n-1].Partitions = append(v.Topics[n-1].Partitions, tp.Partition)
			continue
		}
		t := kmsg.NewTxnMetadataValueTopic()
		t.Topic, t.Partitions = tp.Topic, []int32{tp.Partition}
		v.Topics = append(v.Topics, t)
	}
	v.LastUpdateTimestamp = m.Update.UnixMilli()
	v.StartTimestamp = -1
	if !m.Start.IsZero() {
		v.StartTimestamp = m.Start.UnixMilli()
	}
	v.PreviousProducerID, v.NextProducerID, v.NextProducerEpoch = m.PrevProducerID, m.NextProducerID, m.NextEpoch
	if m.Version2 {
		v.ClientTransactionVersion = 2
	}
	return v.AppendTo(nil)
}

func decodeValue(id string, b []byte) (Metadata, error) {
	v := kmsg.NewTxnMetadataValue()
	if len(b) >= 2 {
		v.Version = int16(b[0])<<8 | int16(b[1])
	}
	if err := v.ReadFrom(b); err != nil {
		return Metadata{}, fmt.Errorf("%w: value: %v", errBadRecord, err)
	}
	m := Metadata{
		ID: id, ProducerID: v.ProducerID, Epoch: v.ProducerEpoch, LastEpoch: -1,
		PrevProducerID: -1, NextProducerID: -1, NextEpoch: -1,
		Timeout: time.Duration(v.TimeoutMillis) * time.Millisecond, State: State(v.State),
		Update: time.UnixMilli(v.LastUpdateTimestamp), Version2: v.ClientTransactionVersion >= 2,
	}
	if v.Version >= 1 {
		m.PrevProducerID, m.NextProducerID, m.NextEpoch = v.PreviousProducerID, v.NextProducerID, v.NextProducerEpoch
	}
	if v.StartTimestamp >= 0 {
		m.Start = time.UnixMilli(v.StartTimestamp)
	}
	if m.State < Empty || m.State > PrepareEpochFence {
		return Metadata{}, fmt.Errorf("%w: state %d", errBadRecord, m.State)
	}
	for _, t := range v.Topics {
		for _, p := range t.Partitions {
			m.Partitions = append(m.Partitions, TopicPartition{t.Topic, p})
		}
	}
	slices.SortFunc(m.Partitions, compareTopicPartitions)
	m.Partitions = slices.Compact(m.Partitions)
	return m, nil
}
