package record

import (
	"errors"
	"testing"
)

func TestMarkerRoundTrip(t *testing.T) {
	for _, m := range []Marker{{ControlCommit, 7}, {ControlAbort, 0}} {
		b, err := BuildMarker(42, 3, m, 1000)
		if err != nil {
			t.Fatal(err)
		}
		h := b.Header()
		if !h.IsControl() || !h.IsTransactional() || h.ProducerID != 42 || h.ProducerEpoch != 3 || h.BaseSequence != -1 {
			t.Fatalf("%v: header %+v", m.Type, h)
		}
		got, err := ParseMarker(b)
		if err != nil || got != m {
			t.Fatalf("ParseMarker = %+v, %v; want %+v", got, err, m)
		}
		// Producers may not send control batches.
		if _, err := Validate(b, 0); !errors.Is(err, ErrInvalidRecord) {
			t.Fatalf("Validate accepted a control batch: %v", err)
		}
	}
	if _, err := BuildMarker(1, 0, Marker{Type: 5}, 0); !errors.Is(err, ErrInvalidRecord) {
		t.Fatalf("marker type 5: %v", err)
	}
	plain, err := Build(DefaultSpec(), []Record{{Value: []byte("v")}})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := ParseMarker(plain); !errors.Is(err, ErrInvalidRecord) {
		t.Fatalf("ParseMarker of a data batch: %v", err)
	}
	// A control batch whose key is too short or of another type.
	for _, key := range [][]byte{{0}, {0, 0, 0, 9}} {
		spec := DefaultSpec()
		spec.Control, spec.Transactional = true, true
		b, err := Build(spec, []Record{{Key: key, Value: []byte{0, 0, 0, 0, 0, 1}}})
		if err != nil {
			t.Fatal(err)
		}
		if _, err := ParseMarker(b); !errors.Is(err, ErrInvalidRecord) {
			t.Fatalf("control key %v: %v", key, err)
		}
	}
	b, _ := BuildMarker(1, 0, Marker{ControlCommit, 1}, 0)
	b[len(b)-1] ^= 1
	if _, err := ParseMarker(b); !errors.Is(err, ErrCorrupt) {
		t.Fatalf("corrupt marker: %v", err)
	}
}

// The cleaner's delete horizon (KIP-534): the flag and the base timestamp
// carry it, the record keeps its timestamp and the marker its fields.
func TestMarkerDeleteHorizon(t *testing.T) {
	b, err := BuildMarker(42, 3, Marker{ControlAbort, 9}, 1000)
	if err != nil {
		t.Fatal(err)
	}
	SetBaseOffset(b, 77)
	SetPartitionLeaderEpoch(b, 4)
	if _, ok := b.Header().DeleteHorizon(); ok {
		t.Fatal("a new marker has a delete horizon")
	}
	out, err := WithDeleteHorizon(b, 5000)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := CheckFrame(out); err != nil {
		t.Fatal(err)
	}
	h := out.Header()
	if ms, ok := h.DeleteHorizon(); !ok || ms != 5000 {
		t.Fatalf("delete horizon %d %v, want 5000", ms, ok)
	}
	if h.BaseOffset != 77 || h.PartitionLeaderEpoch != 4 || h.ProducerID != 42 || h.ProducerEpoch != 3 || !h.IsControl() || !h.IsTransactional() || h.MaxTimestamp != 1000 {
		t.Fatalf("header changed: %+v", h)
	}
	recs, err := Records(out, controlLimit)
	if err != nil || len(recs) != 1 || h.RecordTimestamp(recs[0]) != 1000 {
		t.Fatalf("records %+v, %v: want one at timestamp 1000", recs, err)
	}
	if m, err := ParseMarker(out); err != nil || m != (Marker{ControlAbort, 9}) {
		t.Fatalf("marker %+v, %v", m, err)
	}
	plain, _ := Build(DefaultSpec(), []Record{{Value: []byte("v")}})
	if _, err := WithDeleteHorizon(plain, 1); !errors.Is(err, ErrInvalidRecord) {
		t.Fatalf("delete horizon on a data batch: %v", err)
	}
}
