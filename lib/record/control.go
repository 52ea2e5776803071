package record

import (
	"encoding/binary"
	"errors"
	"fmt"
)

// Control records. A control batch (attributes bit 5, always with the
// transactional bit 4, never compressed by Kafka) holds one record whose
// key is the control record type and whose value, for a transaction
// marker, is the end-transaction marker:
//
//	key   version int16 (0) | type int16 (0 abort, 1 commit)
//	value version int16 (0) | coordinator epoch int32
//
// Kafka defines other control types (leader change, snapshots of its own
// Raft log); a log keeps them as bytes and they end no transaction.

// Control record types.
const (
	ControlAbort  int16 = 0
	ControlCommit int16 = 1
)

// ErrBadControl is a control batch whose record is not a well-formed
// control record.
var ErrBadControl = errors.New("record: bad control record")

// Marker is a transaction marker: the end of a producer's transaction on
// one partition.
type Marker struct {
	ProducerID       int64
	ProducerEpoch    int16
	Commit           bool
	CoordinatorEpoch int32
}

// BuildMarker returns a control batch holding m at offset 0 with
// timestamp ts (milliseconds). Its base sequence is -1: markers carry no
// sequence.
func BuildMarker(m Marker, ts int64) []byte {
	typ := ControlAbort
	if m.Commit {
		typ = ControlCommit
	}
	var key [4]byte
	binary.BigEndian.PutUint16(key[2:], uint16(typ))
	var value [6]byte
	binary.BigEndian.PutUint32(value[2:], uint32(m.CoordinatorEpoch))
	b, err := Build(BuildOptions{
		BaseTimestamp: ts, Idempotent: true, ProducerID: m.ProducerID, ProducerEpoch: m.ProducerEpoch,
		BaseSequence: -1, Transactional: true, Control: true,
	}, []Record{{Key: key[:], Value: value[:]}})
	if err != nil {
		// An uncompressed batch of one small record always builds.
		panic(fmt.Sprintf("record: build marker: %v", err))
	}
	return b
}

// ControlType returns the type of the control record of a control batch
// (ControlAbort, ControlCommit or another) and, for a marker, its
// coordinator epoch (-1 for other types). The batch must be whole; its
// CRC is not checked.
func ControlType(batch []byte) (typ int16, coordinatorEpoch int32, err error) {
	h, err := ParseHeader(batch)
	if err != nil {
		return 0, -1, err
	}
	if !h.Control() {
		return 0, -1, fmt.Errorf("%w: not a control batch", ErrBadControl)
	}
	if h.Size() > len(batch) {
		return 0, -1, fmt.Errorf("%w: batch of %d bytes, have %d", ErrBadLength, h.Size(), len(batch))
	}
	typ, coordinatorEpoch = -1, -1
	found := false
	err = Iterate(batch[:h.Size()], 1<<16, func(r *Record) error {
		if found {
			return nil
		}
		found = true
		if len(r.Key) < 4 {
			return fmt.Errorf("%w: key of %d bytes", ErrBadControl, len(r.Key))
		}
		if v := int16(binary.BigEndian.Uint16(r.Key)); v < 0 {
			return fmt.Errorf("%w: key version %d", ErrBadControl, v)
		}
		typ = int16(binary.BigEndian.Uint16(r.Key[2:]))
		if typ == ControlAbort || typ == ControlCommit {
			if len(r.Value) < 6 {
				return fmt.Errorf("%w: marker value of %d bytes", ErrBadControl, len(r.Value))
			}
			coordinatorEpoch = int32(binary.BigEndian.Uint32(r.Value[2:]))
		}
		return nil
	})
	if err != nil {
		return 0, -1, err
	}
	if !found {
		return 0, -1, fmt.Errorf("%w: no record", ErrBadControl)
	}
	return typ, coordinatorEpoch, nil
}
