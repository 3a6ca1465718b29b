package group

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"reflect"
	"sync"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

func TestOffsetsSurviveCoordinatorRestart(t *testing.T) {
	dir := t.TempDir()
	store, err := OpenFileStore(dir)
	if err != nil {
		t.Fatal(err)
	}
	h := newHarness(t, func(c *Config) { c.Store = store })
	ms := h.stableGroup("g", 2, false)
	wantCode(t, "member commit", h.commit(8, "g", ms[0].id, "", 1, "t", 0, 100), nil)
	wantCode(t, "member commit", h.commit(8, "g", ms[1].id, "", 1, "t", 1, 200), nil)
	wantCode(t, "simple commit", h.commit(2, "s", "", "", -1, "u", 3, 33), nil)
	wantCode(t, "simple commit", h.commit(2, "gone", "", "", -1, "u", 3, 1), nil)
	h.c.DeleteGroups(context.Background(), &kmsg.DeleteGroupsRequest{Groups: []string{"gone"}})
	h.c.Close()
	if err := store.Close(); err != nil {
		t.Fatal(err)
	}

	store2, err := OpenFileStore(dir)
	if err != nil {
		t.Fatal(err)
	}
	defer store2.Close()
	h2 := newHarness(t, func(c *Config) { c.Store = store2 })
	if _, got := h2.fetch("g", "t", 0, 1); got[0].offset != 100 || got[1].offset != 200 {
		t.Fatalf("after restart g = %+v", got)
	}
	if _, got := h2.fetch("s", "u", 3); got[3].offset != 33 {
		t.Fatalf("after restart s = %+v", got)
	}
	if _, got := h2.fetch("gone", "u", 3); got[3].offset != -1 {
		t.Fatalf("deleted group came back: %+v", got)
	}
	// Membership is durable too: the members keep their ids, generation
	// and assignments, and need not rejoin.
	wantCode(t, "old member heartbeat", h2.heartbeat(4, "g", ms[0].id, "", 1), nil)
	wantCode(t, "old member commit", h2.commit(8, "g", ms[1].id, "", 1, "t", 1, 201), nil)
	sr := recv(t, h2.syncAsync(context.Background(), syncReq(3, "g", ms[1].id, "", 1, nil)))
	if sr.resp.ErrorCode != 0 || string(sr.resp.MemberAssignment) != string(ms[1].assignment) {
		t.Fatalf("sync after restart = %+v", sr.resp)
	}
	lg := h2.c.ListGroups(context.Background(), &kmsg.ListGroupsRequest{Version: 4})
	if len(lg.Groups) != 2 || lg.Groups[0].Group != "g" || lg.Groups[0].GroupState != "Stable" || lg.Groups[0].ProtocolType != "consumer" ||
		lg.Groups[1].GroupState != "Empty" {
		t.Fatalf("groups after restart = %+v", lg.Groups)
	}
	// A member that does not come back expires after its session timeout.
	h2.clock.Advance(testSession / 2)
	wantCode(t, "heartbeat", h2.heartbeat(4, "g", ms[0].id, "", 1), nil)
	h2.clock.Advance(testSession/2 + time.Millisecond)
	wantCode(t, "survivor heartbeat", h2.heartbeat(4, "g", ms[0].id, "", 1), kerr.RebalanceInProgress)
	wantCode(t, "expired member", h2.heartbeat(4, "g", ms[1].id, "", 1), kerr.UnknownMemberID)
}

// offsetOnly hides the MembershipStore methods of a store.
type offsetOnly struct{ OffsetStore }

func TestWithoutMembershipStoreMembersRejoinAfterRestart(t *testing.T) {
	store := NewMemoryStore()
	h := newHarness(t, func(c *Config) { c.Store = offsetOnly{store} })
	ms := h.stableGroup("g", 1, false)
	wantCode(t, "commit", h.commit(8, "g", ms[0].id, "", 1, "t", 0, 5), nil)
	h.c.Close()
	h2 := newHarness(t, func(c *Config) { c.Store = offsetOnly{store} })
	wantCode(t, "old member heartbeat", h2.heartbeat(4, "g", ms[0].id, "", 1), kerr.UnknownMemberID)
	if _, got := h2.fetch("g", "t", 0); got[0].offset != 5 {
		t.Fatalf("offset after restart: %+v", got)
	}
}

func TestStaticReplacementSurvivesRestart(t *testing.T) {
	store := NewMemoryStore()
	h := newHarness(t, func(c *Config) { c.Store = store })
	ms := h.stableGroup("g", 2, true)
	r := h.join(joinReq(5, "g", "", ms[1].instance))
	wantCode(t, "static rejoin", r.ErrorCode, nil)
	h.c.Close()
	h2 := newHarness(t, func(c *Config) { c.Store = store })
	wantCode(t, "old incarnation", h2.heartbeat(4, "g", ms[1].id, ms[1].instance, 1), kerr.FencedInstanceID)
	wantCode(t, "new incarnation", h2.heartbeat(4, "g", r.MemberID, ms[1].instance, 1), nil)
}

func TestFileStoreOperationsAndCompaction(t *testing.T) {
	dir := t.TempDir()
	s, err := OpenFileStore(dir)
	if err != nil {
		t.Fatal(err)
	}
	s.CompactMinBytes = 2048
	s.CompactRatio = 2
	ctx := context.Background()
	want := offsetState{}
	apply := func(f func(st OffsetStore) error) {
		t.Helper()
		if err := f(s); err != nil {
			t.Fatal(err)
		}
		ms := NewMemoryStore()
		ms.offsets = want
		if err := f(ms); err != nil {
			t.Fatal(err)
		}
	}
	var maxSize int64
	for i := range 400 {
		g := fmt.Sprintf("g%d", i%5)
		c := OffsetCommit{Topic: "t", Partition: int32(i % 7), Offset: int64(i), LeaderEpoch: int32(i % 3), Metadata: fmt.Sprint("m", i), CommitTimeMillis: int64(1000 + i)}
		apply(func(st OffsetStore) error { return st.Commit(ctx, g, []OffsetCommit{c}) })
		if i%50 == 49 {
			apply(func(st OffsetStore) error {
				return st.DeleteOffsets(ctx, g, []TopicPartition{{"t", 0}, {"t", 1}})
			})
		}
		maxSize = max(maxSize, s.Size())
	}
	apply(func(st OffsetStore) error { return st.DeleteGroup(ctx, "g3") })
	if maxSize > 3*2048 {
		t.Fatalf("log grew to %d bytes: compaction did not run", maxSize)
	}
	got, _ := s.Load(ctx)
	if !reflect.DeepEqual(got, want.snapshot()) {
		t.Fatalf("live state differs from model")
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	s2, err := OpenFileStore(dir)
	if err != nil {
		t.Fatal(err)
	}
	defer s2.Close()
	got, _ = s2.Load(ctx)
	if !reflect.DeepEqual(got, want.snapshot()) {
		t.Fatalf("reopened state differs from model:\n got %v\nwant %v", got, want.snapshot())
	}
	if _, ok := got["g3"]; ok {
		t.Fatal("deleted group reloaded")
	}
	if err := s2.Commit(ctx, "x", nil); err != nil {
		t.Fatal(err)
	}
}

// writeLog builds an offsets log of n single-commit records and returns the
// file path and the end offset of each record.
func writeLog(t *testing.T, n int) (string, []int64) {
	t.Helper()
	dir := t.TempDir()
	s, err := OpenFileStore(dir)
	if err != nil {
		t.Fatal(err)
	}
	ends := []int64{s.Size()}
	for i := range n {
		if err := s.Commit(context.Background(), "g", []OffsetCommit{{Topic: "t", Partition: int32(i), Offset: int64(i)}}); err != nil {
			t.Fatal(err)
		}
		ends = append(ends, s.Size())
	}
	s.Close()
	return filepath.Join(dir, fileStoreName), ends
}

func TestFileStoreRecovery(t *testing.T) {
	for _, tc := range []struct {
		name        string
		damage      func(data []byte, ends []int64) []byte
		wantRecords int   // records that survive
		wantCorrupt int64 // >0: Open fails with corruption at this record index (1-based)
	}{
		{"intact", func(d []byte, _ []int64) []byte { return d }, 3, 0},
		{"torn header", func(d []byte, e []int64) []byte { return d[:e[2]+3] }, 2, 0},
		{"torn payload", func(d []byte, e []int64) []byte { return d[:e[3]-2] }, 2, 0},
		{"zero fill", func(d []byte, _ []int64) []byte { return append(d, make([]byte, 100)...) }, 3, 0},
		{"bad crc in last record", func(d []byte, e []int64) []byte { d[e[3]-1] ^= 0xff; return d }, 2, 0},
		{"bad crc in middle record", func(d []byte, e []int64) []byte { d[e[2]-1] ^= 0xff; return d }, 0, 2},
		{"bad magic", func(d []byte, _ []int64) []byte { d[0] = 'X'; return d }, 0, -1},
		{"short file", func(d []byte, _ []int64) []byte { return d[:3] }, 0, -1},
	} {
		t.Run(tc.name, func(t *testing.T) {
			path, ends := writeLog(t, 3)
			data, err := os.ReadFile(path)
			if err != nil {
				t.Fatal(err)
			}
			damaged := tc.damage(append([]byte(nil), data...), ends)
			if err := os.WriteFile(path, damaged, 0o644); err != nil {
				t.Fatal(err)
			}
			s, err := OpenFileStore(filepath.Dir(path))
			if tc.wantCorrupt != 0 {
				var ce *CorruptionError
				if !errors.As(err, &ce) || ce.File != path {
					t.Fatalf("Open = %v, want CorruptionError for %s", err, path)
				}
				if tc.wantCorrupt > 0 && ce.Offset != ends[tc.wantCorrupt-1] {
					t.Fatalf("corruption at %d, want %d", ce.Offset, ends[tc.wantCorrupt-1])
				}
				after, _ := os.ReadFile(path)
				if !reflect.DeepEqual(after, damaged) {
					t.Fatal("Open changed a corrupt file")
				}
				return
			}
			if err != nil {
				t.Fatalf("Open: %v", err)
			}
			got, _ := s.Load(context.Background())
			if len(got["g"]) != tc.wantRecords {
				t.Fatalf("recovered %d commits, want %d", len(got["g"]), tc.wantRecords)
			}
			// The torn tail is gone: new records append cleanly.
			if err := s.Commit(context.Background(), "g", []OffsetCommit{{Topic: "t", Partition: 99, Offset: 1}}); err != nil {
				t.Fatal(err)
			}
			s.Close()
			s2, err := OpenFileStore(filepath.Dir(path))
			if err != nil {
				t.Fatalf("reopen after append: %v", err)
			}
			defer s2.Close()
			got, _ = s2.Load(context.Background())
			if len(got["g"]) != tc.wantRecords+1 {
				t.Fatalf("after append: %d commits, want %d", len(got["g"]), tc.wantRecords+1)
			}
		})
	}
}

func TestFileStoreIgnoresStaleCompactionFile(t *testing.T) {
	path, _ := writeLog(t, 2)
	if err := os.WriteFile(path+".tmp", []byte("half written"), 0o644); err != nil {
		t.Fatal(err)
	}
	s, err := OpenFileStore(filepath.Dir(path))
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	got, _ := s.Load(context.Background())
	if len(got["g"]) != 2 {
		t.Fatalf("got %v", got)
	}
	if _, err := os.Stat(path + ".tmp"); !os.IsNotExist(err) {
		t.Fatalf("stale temp file left: %v", err)
	}
}

func BenchmarkFileStoreCommit(b *testing.B) {
	s, err := OpenFileStore(b.TempDir())
	if err != nil {
		b.Fatal(err)
	}
	defer s.Close()
	cs := make([]OffsetCommit, 6)
	for i := range cs {
		cs[i] = OffsetCommit{Topic: "topic", Partition: int32(i), LeaderEpoch: 1}
	}
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		for j := range cs {
			cs[j].Offset = int64(i)
		}
		if err := s.Commit(context.Background(), "group", cs); err != nil {
			b.Fatal(err)
		}
	}
}

func TestFileStoreConcurrentGroupCommit(t *testing.T) {
	dir := t.TempDir()
	s, err := OpenFileStore(dir)
	if err != nil {
		t.Fatal(err)
	}
	s.CompactMinBytes = 4096 // compact a few times along the way
	const groups, commits = 8, 200
	var wg sync.WaitGroup
	for g := range groups {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range commits {
				if err := s.Commit(context.Background(), fmt.Sprintf("g%d", g), []OffsetCommit{{Topic: "t", Partition: int32(i % 3), Offset: int64(i)}}); err != nil {
					t.Errorf("commit: %v", err)
					return
				}
			}
		}()
	}
	wg.Wait()
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	if err := s.Commit(context.Background(), "g0", []OffsetCommit{{Topic: "t"}}); !errors.Is(err, ErrClosed) {
		t.Fatalf("commit after close: %v", err)
	}
	s2, err := OpenFileStore(dir)
	if err != nil {
		t.Fatal(err)
	}
	defer s2.Close()
	got, _ := s2.Load(context.Background())
	for g := range groups {
		cs := got[fmt.Sprintf("g%d", g)]
		if len(cs) != 3 {
			t.Fatalf("group %d: %d partitions", g, len(cs))
		}
		for _, c := range cs {
			// The last commit of partition p is the largest i with i%3 == p.
			want := int64(commits - 1 - (commits-1-int(c.Partition))%3)
			if c.Offset != want {
				t.Fatalf("group %d partition %d: offset %d, want %d", g, c.Partition, c.Offset, want)
			}
		}
	}
}

func TestFileStoreMembershipRoundTrip(t *testing.T) {
	dir := t.TempDir()
	s, err := OpenFileStore(dir)
	if err != nil {
		t.Fatal(err)
	}
	s.CompactMinBytes, s.CompactRatio = 2048, 2
	ctx := context.Background()
	want := map[string]GroupMetadata{}
	for i := range 300 {
		g := fmt.Sprintf("g%d", i%3)
		md := GroupMetadata{Generation: int32(i), ProtocolType: "consumer", Protocol: "range", Leader: "m1",
			Members: []MemberMetadata{{ID: "m1", InstanceID: "i1", ClientID: "c", ClientHost: "/127.0.0.1",
				SessionTimeoutMillis: 10000, RebalanceTimeoutMillis: 20000,
				Protocols: []ProtocolMetadata{{Name: "range", Metadata: []byte{0, 1, byte(i)}}}, Assignment: []byte{byte(i)}}}}
		if err := s.SaveGroup(ctx, g, md); err != nil {
			t.Fatal(err)
		}
		want[g] = md
	}
	if err := s.Commit(ctx, "g1", []OffsetCommit{{Topic: "t", Offset: 1}}); err != nil {
		t.Fatal(err)
	}
	if err := s.DeleteGroup(ctx, "g2"); err != nil {
		t.Fatal(err)
	}
	delete(want, "g2")
	if s.Size() > 4*2048 {
		t.Fatalf("log at %d bytes: not compacted", s.Size())
	}
	s.Close()
	s2, err := OpenFileStore(dir)
	if err != nil {
		t.Fatal(err)
	}
	defer s2.Close()
	got, _ := s2.LoadGroups(ctx)
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("membership after reopen:\n got %+v\nwant %+v", got, want)
	}
	offs, _ := s2.Load(ctx)
	if len(offs["g1"]) != 1 {
		t.Fatalf("offsets after reopen: %+v", offs)
	}
}
