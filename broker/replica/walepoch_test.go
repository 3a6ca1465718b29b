package replica

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/go-logr/logr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/strata-dev/strata/broker/meta"
	"github.com/strata-dev/strata/broker/objstore"
	"github.com/strata-dev/strata/broker/record"
	"github.com/strata-dev/strata/broker/wal"
)

// epochBatch is one batch of one record at base, stamped with epoch.
func epochBatch(t *testing.T, base int64, epoch int32, value string) record.Batch {
	t.Helper()
	spec := record.DefaultSpec()
	spec.BaseOffset = base
	spec.PartitionLeaderEpoch = epoch
	spec.BaseTimestamp = 1_700_000_000_000
	b, err := record.Build(spec, []record.Record{{Value: []byte(value)}})
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// walRange is one uploaded range: its chunk epoch, the epoch stamped in
// its batch (normally the same), its offset.
type walRange struct {
	chunkEpoch, batchEpoch int32
	offset                 int64
}

// TestFollowerRefusesPointersOfOtherEpochs hands a follower pointers, in
// a replica fetch answer of its leader, to objects that really are in the
// leader's bucket with valid CRCs, and checks which ones it appends: a
// pointer whose leader epoch is newer than the epoch it follows at, older
// than the latest epoch in its log or than the pointer before it, or
// whose batches carry another epoch than the pointer, is not appended
// (nor downloaded, for the epoch checks), and the follower fetches from
// there inline.
func TestFollowerRefusesPointersOfOtherEpochs(t *testing.T) {
	const current = 7 // the leader epoch the follower fetches at
	tests := []struct {
		name string
		// logEpoch, when >= 0, is the epoch of one batch already in the
		// follower's log at offset 0 (the pointers then start at 1).
		logEpoch int32
		ranges   []walRange
		// appended is how many of the ranges the follower appends;
		// skipFrom is where it fetches inline from (-1: nowhere).
		appended int
		skipFrom int64
		// gets is how many GETs of the bucket the fetch makes.
		gets int
		// moved: the follower's leader epoch moved on while the fetch was
		// parked (a deposed leader answering late).
		moved bool
	}{
		{name: "current epoch", logEpoch: -1, ranges: []walRange{{current, current, 0}}, appended: 1, skipFrom: -1, gets: 1},
		{name: "older epoch the log does not pass", logEpoch: 4, ranges: []walRange{{5, 5, 1}}, appended: 1, skipFrom: -1, gets: 1},
		{name: "epochs rising within the answer", logEpoch: -1, ranges: []walRange{{5, 5, 0}, {current, current, 1}}, appended: 2, skipFrom: -1, gets: 2},
		{name: "epoch newer than the leader's", logEpoch: -1, ranges: []walRange{{current + 2, current + 2, 0}}, appended: 0, skipFrom: 1, gets: 0},
		{name: "epoch older than the follower's log", logEpoch: 5, ranges: []walRange{{3, 3, 1}}, appended: 0, skipFrom: 2, gets: 0},
		{name: "epoch falling within the answer", logEpoch: -1, ranges: []walRange{{current, current, 0}, {6, 6, 1}}, appended: 1, skipFrom: 2, gets: 1},
		{name: "batch epoch differs from the pointer's", logEpoch: -1, ranges: []walRange{{current, current - 1, 0}}, appended: 0, skipFrom: 1, gets: 1},
		{name: "leadership moved while the fetch was parked", logEpoch: -1, ranges: []walRange{{current, current, 0}}, appended: 0, skipFrom: -1, gets: 0, moved: true},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			ctx := context.Background()
			bucket := objstore.NewFaulty(objstore.NewMem("wal-b"))
			m := &Manager{cfg: Config{NodeID: 1, Log: logr.Discard()}}
			m.wal = &walRep{m: m, down: wal.NewDownloader(wal.DownloaderConfig{Store: func(string) (objstore.Store, error) { return bucket, nil }, HedgeAfter: -1})} // counts GETs
			f := &fetcher{m: m, leader: 2}
			p := NewPartition(tp, openLog(t), 1, nil)
			// It follows broker 2 at the current epoch.
			p.role, p.state.Leader, p.state.LeaderEpoch = RoleFollower, 2, current
			if tc.logEpoch >= 0 {
				if _, err := p.Log.AppendAsFollower([]record.Batch{epochBatch(t, 0, tc.logEpoch, "in the log")}); err != nil {
					t.Fatal(err)
				}
			}

			// One object per range, as a leader uploads them.
			var ptrs []wal.Pointer
			var want []byte
			for i, r := range tc.ranges {
				b := epochBatch(t, r.offset, r.batchEpoch, fmt.Sprintf("range %d", i))
				obj, infos, err := wal.Encode(wal.Header{Version: wal.Version, Cluster: "test", Zone: "b", BrokerID: 2, Incarnation: 1, Sequence: uint64(i), CreatedAt: time.UnixMilli(1_700_000_000_000)},
					[]wal.ChunkInput{{Topic: tp.Topic, Partition: tp.Partition, LeaderEpoch: r.chunkEpoch, BaseOffset: r.offset, LastOffset: r.offset, Batches: [][]byte{b}}})
				if err != nil {
					t.Fatal(err)
				}
				key := wal.ObjectKey("test", "b", 2, 1, uint64(i))
				if err := bucket.Put(ctx, key, obj); err != nil {
					t.Fatal(err)
				}
				ptrs = append(ptrs, wal.PointerTo("wal-b", key, infos[0]))
				if i < tc.appended {
					want = append(want, b...)
				}
			}

			// The leader's answer: the pointers in the partition's tag.
			fr := kmsg.NewPtrFetchResponse()
			fr.SetVersion(FetchVersion)
			rt := kmsg.NewFetchResponseTopic()
			rt.Topic = tp.Topic
			sp := kmsg.NewFetchResponseTopicPartition()
			sp.Partition = tp.Partition
			if err := SetPointers(&sp, ptrs); err != nil {
				t.Fatal(err)
			}
			rt.Partitions = append(rt.Partitions, sp)
			fr.Topics = append(fr.Topics, rt)
			it := fetchItem{p: p, epoch: current, offset: p.Log.EndOffset(), lastEpoch: p.Log.LatestEpoch(), logStart: p.Log.StartOffset(), pointers: true}
			if tc.moved {
				p.mu.Lock()
				p.state.LeaderEpoch = current + 1
				p.mu.Unlock()
			}

			got := f.download(ctx, fr, map[meta.TopicPartition]fetchItem{tp: it})[tp]
			if !bytes.Equal(got, want) {
				t.Fatalf("follower would append %d bytes, want %d (the first %d of %d ranges)", len(got), len(want), tc.appended, len(tc.ranges))
			}
			p.mu.Lock()
			skip := p.walSkipUntil
			p.mu.Unlock()
			switch {
			case tc.skipFrom < 0 && skip > it.offset:
				t.Fatalf("follower fetches inline up to %d, want the WAL path", skip)
			case tc.skipFrom >= 0 && skip < tc.skipFrom:
				t.Fatalf("follower fetches inline up to %d, want at least %d (the refused range)", skip, tc.skipFrom)
			}
			if n := bucket.Calls(objstore.OpGet); n != tc.gets {
				t.Fatalf("%d GETs, want %d (a pointer of another epoch is not downloaded)", n, tc.gets)
			}
		})
	}
}

func TestCheckPointerEpoch(t *testing.T) {
	ptr := func(epoch int32) wal.Pointer {
		return wal.Pointer{Bucket: "wal-a", Key: "k", Length: 1, Topic: "t", BaseOffset: 10, LastOffset: 10, LeaderEpoch: epoch}
	}
	tests := []struct {
		epoch, current, last int32
		ok                   bool
	}{
		{5, 5, 5, true},
		{5, 5, -1, true},
		{4, 5, 3, true},
		{6, 5, 5, false},
		{4, 5, 5, false},
		{0, 0, -1, true},
	}
	for _, tc := range tests {
		err := checkPointerEpoch(ptr(tc.epoch), tc.current, tc.last)
		if (err == nil) != tc.ok || err != nil && !errors.Is(err, errPointerEpoch) {
			t.Errorf("pointer epoch %d at leader epoch %d, log epoch %d: %v, want ok=%v", tc.epoch, tc.current, tc.last, err, tc.ok)
		}
	}
	use, refused, err := usablePointers([]wal.Pointer{ptr(3), {Topic: "other", LeaderEpoch: 9}, ptr(4), ptr(2), ptr(5)}, meta.TopicPartition{Topic: "t"}, 5, -1)
	if len(use) != 2 || refused == nil || refused.LeaderEpoch != 2 || !errors.Is(err, errPointerEpoch) {
		t.Fatalf("usablePointers: %v, refused %v, %v; want epochs 3 and 4, then epoch 2 refused", use, refused, err)
	}
}
