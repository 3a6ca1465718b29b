package group

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"testing"
)

// FuzzOffsetsLogRecovery feeds arbitrary bytes after a valid header to the
// offsets log recovery: it must never panic, must either recover a prefix
// or report a *CorruptionError, and a recovered store must accept and
// persist a new commit.
func FuzzOffsetsLogRecovery(f *testing.F) {
	valid := encodeCommit(nil, "g", []OffsetCommit{{Topic: "t", Partition: 1, Offset: 2, Metadata: "m"}})
	rec := func(payload []byte) []byte {
		dir := f.TempDir()
		s, err := OpenFileStore(dir)
		if err != nil {
			f.Fatal(err)
		}
		if err := s.append(payload, func() {}); err != nil {
			f.Fatal(err)
		}
		s.Close()
		data, err := os.ReadFile(filepath.Join(dir, fileStoreName))
		if err != nil {
			f.Fatal(err)
		}
		return data[fileHeaderLen:]
	}
	f.Add(rec(valid))
	f.Add(rec(encodeDeleteOffsets("g", []TopicPartition{{"t", 1}})))
	md, _ := encodeGroupMetadata("g", GroupMetadata{Generation: 1, Members: []MemberMetadata{{ID: "m"}}})
	f.Add(rec(md))
	f.Add([]byte{0, 0, 0, 3, 1, 2, 3, 4, 9, 9, 9})
	f.Fuzz(func(t *testing.T, body []byte) {
		dir := t.TempDir()
		header := append([]byte(fileStoreMagic), 0, 0, 0, fileStoreVersion)
		if err := os.WriteFile(filepath.Join(dir, fileStoreName), append(header, body...), 0o644); err != nil {
			t.Fatal(err)
		}
		s, err := OpenFileStore(dir)
		if err != nil {
			var ce *CorruptionError
			if !errors.As(err, &ce) {
				t.Fatalf("error is not a CorruptionError: %v", err)
			}
			return
		}
		defer s.Close()
		if err := s.Commit(context.Background(), "fuzz", []OffsetCommit{{Topic: "x", Offset: 7}}); err != nil {
			t.Fatalf("commit after recovery: %v", err)
		}
		s.Close()
		s2, err := OpenFileStore(dir)
		if err != nil {
			t.Fatalf("reopen after recovery and commit: %v", err)
		}
		defer s2.Close()
		got, _ := s2.Load(context.Background())
		if len(got["fuzz"]) != 1 || got["fuzz"][0].Offset != 7 {
			t.Fatalf("commit lost after recovery: %+v", got["fuzz"])
		}
	})
}
