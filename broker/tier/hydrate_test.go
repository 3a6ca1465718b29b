package tier_test

import (
	"bytes"
	"context"
	"errors"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/go-logr/logr"

	"github.com/strata-dev/strata/broker/tier"
	"github.com/strata-dev/strata/internal/testutil/s3server"
)

func TestHydrationPlan(t *testing.T) {
	now := time.UnixMilli(1_000_000)
	// Four segments of 100 bytes, max timestamps 100 s, 70 s, 40 s and
	// 10 s before now.
	m := tier.Manifest{StartOffset: 0, EndOffset: 40}
	for i := range int64(4) {
		m.Segments = append(m.Segments, tier.Segment{BaseOffset: i * 10, LastOffset: i*10 + 9, Size: 100, MaxTimestamp: now.UnixMilli() - (100-30*i)*1000, Key: "k"})
	}
	for _, tc := range []struct {
		name  string
		start int64
		ms    time.Duration
		bytes int64
		want  int
	}{
		{"unlimited", 0, -1, -1, 0},
		{"start moved past the first segment", 12, -1, -1, 1},
		{"start inside the first segment", 5, -1, -1, 0},
		{"local.retention.ms 50 s", 0, 50 * time.Second, -1, 2},
		{"local.retention.ms 5 s: nothing", 0, 5 * time.Second, -1, 4},
		{"local.retention.bytes 250", 0, -1, 250, 1},
		{"local.retention.bytes 200", 0, -1, 200, 2},
		{"local.retention.bytes 0: nothing", 0, -1, 0, 4},
		{"both, bytes tighter", 0, 80 * time.Second, 150, 2},
		{"both, time tighter", 0, 30 * time.Second, 1000, 3},
	} {
		t.Run(tc.name, func(t *testing.T) {
			mm := m
			mm.StartOffset = tc.start
			if got := tier.HydrationPlan(mm, tc.ms, tc.bytes, now); got != tc.want {
				t.Fatalf("first segment %d, want %d", got, tc.want)
			}
		})
	}
	if got := tier.HydrationPlan(tier.Manifest{}, -1, -1, now); got != 0 {
		t.Fatalf("empty manifest: %d, want 0", got)
	}
}

// TestDownloadSegment downloads uploaded segments through chunks smaller
// than a batch (Versity), byte for byte, and refuses objects that do not
// match their manifest entry — flipped bytes, a truncated object, a
// wrong CRC in the entry, a missing object — leaving no file behind.
func TestDownloadSegment(t *testing.T) {
	srv := s3server.Start(t, bucket)
	ctx := context.Background()
	st := newStore(t, srv)
	tr := tier.New(st, tier.Config{Cluster: "c", ChunkBytes: 100}, logr.Discard())
	p := tr.Partition("t", "id", 0)
	leader := openLog(t, 2000)
	appendN(t, leader, 30, 0, 1_000)
	if _, err := p.Upload(ctx, leader, leader.EndOffset(), 0); err != nil {
		t.Fatal(err)
	}
	m, err := p.Load(ctx)
	if err != nil || len(m.Segments) < 3 {
		t.Fatalf("manifest %+v, %v: want 3 segments or more", m, err)
	}
	dir := t.TempDir()
	path := filepath.Join(dir, "seg.tmp")
	for _, s := range m.Segments[:2] {
		if err := p.DownloadSegment(ctx, s, path); err != nil {
			t.Fatal(err)
		}
		got, err := os.ReadFile(path)
		if err != nil {
			t.Fatal(err)
		}
		if want := localBytes(t, leader, s.BaseOffset, s.LastOffset+1); !bytes.Equal(got, want) {
			t.Fatalf("segment %d: downloaded %d bytes differ from the leader's %d", s.BaseOffset, len(got), len(want))
		}
	}
	if s := tr.Stats(); s.HydratedSegments != 2 || s.HydratedBytes != m.Segments[0].Size+m.Segments[1].Size || s.HydrationErrors != 0 {
		t.Fatalf("stats %+v after two downloads", s)
	}

	s := m.Segments[2]
	key := p.Prefix() + s.Key
	orig, err := st.Get(ctx, key, 0, -1)
	if err != nil {
		t.Fatal(err)
	}
	flipped := bytes.Clone(orig)
	flipped[len(flipped)-3] ^= 0x01 // inside the last batch's records
	wrongCRC := s
	wrongCRC.CRC++
	for _, tc := range []struct {
		name   string
		object []byte // nil: deleted
		seg    tier.Segment
		want   error
	}{
		{"flipped byte", flipped, s, tier.ErrHydrationCorrupt},
		{"truncated", orig[:len(orig)-10], s, nil},
		{"wrong CRC in the manifest", orig, wrongCRC, tier.ErrHydrationCorrupt},
		{"missing", nil, s, nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var err error
			if tc.object == nil {
				err = st.Delete(ctx, key)
			} else {
				err = st.Put(ctx, key, tc.object)
			}
			if err != nil {
				t.Fatal(err)
			}
			before := tr.Stats().HydrationErrors
			err = p.DownloadSegment(ctx, tc.seg, path)
			if err == nil || tc.want != nil && !errors.Is(err, tc.want) {
				t.Fatalf("download: %v, want %v", err, cmpOr(tc.want, "an error"))
			}
			if _, serr := os.Stat(path); !errors.Is(serr, os.ErrNotExist) {
				t.Fatalf("a refused download left %s (%v)", path, serr)
			}
			if tr.Stats().HydrationErrors != before+1 {
				t.Fatal("the refused download was not counted")
			}
		})
	}
}

func cmpOr(err error, s string) any {
	if err != nil {
		return err
	}
	return s
}
