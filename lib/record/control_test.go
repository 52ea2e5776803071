package record

import (
	"testing"

	"github.com/twmb/franz-go/pkg/kmsg"
)

func TestMarkerRoundTripsAndKafkaDecodesIt(t *testing.T) {
	for _, commit := range []bool{false, true} {
		b := BuildMarker(Marker{ProducerID: 7, ProducerEpoch: 3, Commit: commit, CoordinatorEpoch: 42}, 1234)
		h, err := Validate(b)
		if err != nil {
			t.Fatal(err)
		}
		if !h.Control() || !h.Transactional() || h.ProducerID != 7 || h.ProducerEpoch != 3 || h.BaseSequence != -1 || h.LastOffsetDelta != 0 {
			t.Fatalf("header %+v", h)
		}
		typ, ce, err := ControlType(b)
		if err != nil || ce != 42 || (typ == ControlCommit) != commit {
			t.Fatalf("commit %v: type %d epoch %d err %v", commit, typ, ce, err)
		}
		// kmsg's own decoding of the batch and of the control key.
		var rb kmsg.RecordBatch
		if err := rb.ReadFrom(b); err != nil {
			t.Fatal(err)
		}
		if rb.Attributes&0x30 != 0x30 || rb.NumRecords != 1 {
			t.Fatalf("kmsg batch %+v", rb)
		}
		var rec kmsg.Record
		if err := rec.ReadFrom(rb.Records); err != nil {
			t.Fatal(err)
		}
		var key kmsg.ControlRecordKey
		if err := key.ReadFrom(rec.Key); err != nil {
			t.Fatal(err)
		}
		var val kmsg.EndTxnMarker
		if err := val.ReadFrom(rec.Value); err != nil {
			t.Fatal(err)
		}
		if (key.Type == kmsg.ControlRecordKeyTypeCommit) != commit || val.CoordinatorEpoch != 42 {
			t.Fatalf("kmsg key %+v value %+v", key, val)
		}
	}
}

func TestControlTypeRefusesOtherBatches(t *testing.T) {
	plain := mustBuild(t, BuildOptions{}, []Record{{Value: []byte("v")}})
	if _, _, err := ControlType(plain); err == nil {
		t.Fatal("a data batch was taken for a control batch")
	}
	short := mustBuild(t, BuildOptions{Idempotent: true, Transactional: true, Control: true, BaseSequence: -1}, []Record{{Key: []byte{0}, Value: nil}})
	if _, _, err := ControlType(short); err == nil {
		t.Fatal("a one-byte control key was accepted")
	}
}

func FuzzControlType(f *testing.F) {
	f.Add(BuildMarker(Marker{ProducerID: 1, Commit: true, CoordinatorEpoch: 5}, 0))
	f.Add(BuildMarker(Marker{ProducerID: 1}, 0))
	f.Add(mustBuild(f, BuildOptions{}, []Record{{Value: []byte("v")}}))
	f.Fuzz(func(t *testing.T, b []byte) {
		typ, ce, err := ControlType(b)
		if err != nil {
			return
		}
		h, herr := ParseHeader(b)
		if herr != nil || !h.Control() {
			t.Fatalf("accepted a batch that is not a control batch: %+v %v", h, herr)
		}
		if typ != ControlAbort && typ != ControlCommit && ce != -1 {
			t.Fatalf("type %d has a coordinator epoch %d", typ, ce)
		}
	})
}
