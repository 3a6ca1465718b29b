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
