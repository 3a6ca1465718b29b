package tier

import (
	"encoding/json"
	"reflect"
	"testing"
)

// FuzzDecodeManifest feeds arbitrary bytes to the manifest decoder (a
// manifest is read back from a bucket others may write). It must never
// panic; a manifest it accepts holds what readers rely on (segments in
// offset order below EndOffset, no negative sizes, StartOffset at most
// EndOffset) and encodes back to a manifest that decodes the same.
func FuzzDecodeManifest(f *testing.F) {
	seed := Manifest{
		Version: ManifestVersion, Topic: "t", TopicID: "id", Partition: 3, LeaderEpoch: 2, Seq: 7,
		StartOffset: 10, EndOffset: 200,
		Segments: []Segment{
			{BaseOffset: 0, LastOffset: 99, LeaderEpoch: 1, Size: 4096, CRC: 1, MaxTimestamp: 5, Key: segmentKey(0, 99, 1), IndexSize: 8, TimeIndexSize: 12, Epochs: []EpochStart{{1, 0}}},
			{BaseOffset: 100, LastOffset: 199, LeaderEpoch: 2, Size: 4096, MaxTimestamp: -1, Key: segmentKey(100, 199, 2), TxnIndexSize: 40, ProducerSnapshotSize: 30},
		},
	}
	b, err := json.Marshal(seed)
	if err != nil {
		f.Fatal(err)
	}
	f.Add(b)
	f.Add([]byte(`{"version":1,"seq":-1,"segments":null}`))
	f.Add([]byte(`{"version":1,"endOffset":5,"segments":[{"baseOffset":0,"lastOffset":4,"key":"k","size":-1,"indexSize":-8}]}`))
	f.Fuzz(func(t *testing.T, raw []byte) {
		m, err := decodeManifest(raw)
		if err != nil {
			return
		}
		prev := int64(-1)
		for i, s := range m.Segments {
			if s.BaseOffset <= prev || s.LastOffset < s.BaseOffset || s.LastOffset >= m.EndOffset || s.Key == "" {
				t.Fatalf("segment %d [%d, %d] accepted after %d, end %d", i, s.BaseOffset, s.LastOffset, prev, m.EndOffset)
			}
			if s.Size < 0 || s.IndexSize < 0 || s.TimeIndexSize < 0 || s.TxnIndexSize < 0 || s.ProducerSnapshotSize < 0 {
				t.Fatalf("segment %d with a negative size accepted: %+v", i, s)
			}
			prev = s.LastOffset
			if got := m.segmentFor(s.BaseOffset); got != i {
				t.Fatalf("segmentFor(%d) = %d, want %d", s.BaseOffset, got, i)
			}
		}
		if m.StartOffset > m.EndOffset {
			t.Fatalf("start %d past end %d accepted", m.StartOffset, m.EndOffset)
		}
		again, err := json.Marshal(m)
		if err != nil {
			t.Fatal(err)
		}
		m2, err := decodeManifest(again)
		if err != nil {
			t.Fatalf("a re-encoded manifest does not decode: %v", err)
		}
		if !reflect.DeepEqual(normalize(m), normalize(m2)) {
			t.Fatalf("round trip changed the manifest:\n%+v\n%+v", m, m2)
		}
	})
}

// normalize makes nil and empty slices equal (JSON omits empty epochs).
func normalize(m *Manifest) *Manifest {
	c := m.clone()
	if len(c.Segments) == 0 {
		c.Segments = nil
	}
	for i := range c.Segments {
		if len(c.Segments[i].Epochs) == 0 {
			c.Segments[i].Epochs = nil
		}
	}
	return c
}
