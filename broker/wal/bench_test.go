package wal_test

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/strata-dev/strata/broker/objstore"
	"github.com/strata-dev/strata/broker/wal"
	"github.com/strata-dev/strata/internal/testutil/s3server"
)

// benchChunks is a full default-size object: 64 partitions × 4 KiB.
func benchChunks(b *testing.B) ([]wal.ChunkInput, int) {
	var chunks []wal.ChunkInput
	size := 0
	for p := int32(0); p < 64; p++ {
		c := chunk(b, "bench", p, 1, int64(p)*1000, 4, 16) // 4 batches ≈ 1 KiB each
		for _, bt := range c.Batches {
			size += len(bt)
		}
		chunks = append(chunks, c)
	}
	return chunks, size
}

func BenchmarkEncode(b *testing.B) {
	chunks, size := benchChunks(b)
	b.SetBytes(int64(size))
	b.ReportAllocs()
	for b.Loop() {
		if _, _, err := wal.Encode(testHeader, chunks); err != nil {
			b.Fatal(err)
		}
	}
}

func BenchmarkDecode(b *testing.B) {
	chunks, size := benchChunks(b)
	obj, _, err := wal.Encode(testHeader, chunks)
	if err != nil {
		b.Fatal(err)
	}
	b.SetBytes(int64(size))
	b.ReportAllocs()
	for b.Loop() {
		dec, err := wal.Decode(obj)
		if err != nil {
			b.Fatal(err)
		}
		for _, c := range dec.Chunks {
			if _, err := wal.SplitBatches(c.ChunkInfo, c.Data); err != nil {
				b.Fatal(err)
			}
		}
	}
}

// BenchmarkUploader appends 1 KiB batches round-robin over 32 partitions
// through a real uploader into Versity Gateway, with PUT latency injected
// to emulate S3 Express (≈5 ms) or S3 Standard (≈30 ms). It reports
// objects (PUTs) per second and payload MB/s (the benchmark's bytes).
// When the buffer is full the producer backs off, so the figure is the
// sustained rate, not the burst rate.
func BenchmarkUploader(b *testing.B) {
	srv := s3server.Start(b, testBucket)
	base := s3Store(b, srv)
	one := batch(b, 0, 8, 1, 100)
	for _, tc := range []struct {
		latency  time.Duration
		inFlight int
	}{
		{0, 4}, {5 * time.Millisecond, 1}, {5 * time.Millisecond, 4}, {5 * time.Millisecond, 16}, {30 * time.Millisecond, 16},
	} {
		b.Run(fmt.Sprintf("put-latency=%s/in-flight=%d", tc.latency, tc.inFlight), func(b *testing.B) {
			store := objstore.NewFaulty(base)
			store.SetPutLatency(tc.latency)
			var objects, failed int
			u, err := wal.NewUploader(wal.UploaderConfig{
				Store: store, Cluster: "bench", Zone: "zone-a", BrokerID: 1, Incarnation: uint64(time.Now().UnixNano()),
				MaxInFlight: tc.inFlight, MaxBufferedBytes: 8 << 20,
				OnUpload: func(r wal.UploadResult) {
					objects++
					if r.Err != nil {
						failed++
					}
				},
			})
			if err != nil {
				b.Fatal(err)
			}
			b.SetBytes(int64(len(one)))
			offsets := make([]int64, 32)
			i := 0
			for b.Loop() {
				p := i % 32
				i++
				for {
					err := u.Append("bench", int32(p), 1, offsets[p], offsets[p]+7, one)
					if err == nil {
						break
					}
					if !errors.Is(err, wal.ErrBufferFull) {
						b.Fatal(err)
					}
					time.Sleep(100 * time.Microsecond)
				}
				offsets[p] += 8
			}
			if err := u.Close(context.Background()); err != nil {
				b.Fatal(err)
			}
			if failed > 0 {
				b.Fatalf("%d uploads failed", failed)
			}
			b.ReportMetric(float64(objects)/b.Elapsed().Seconds(), "PUTs/s")
		})
	}
}

// BenchmarkTrackerCollect is one deletion round of a leader with a dead
// replica (broker 3, still listed on every partition) and `objects`
// objects uploaded while it was down: an upload, the live follower's
// progress past it, Collect. The old tracker kept every object until the
// retention cap and scanned them all on each Collect, under the mutex
// every replica fetch takes; the tracker now waits only for the
// registered in-sync followers (WaitFor) and Collect costs what changed.
func BenchmarkTrackerCollect(b *testing.B) {
	for _, objects := range []int{10_000, 100_000, 360_000} {
		b.Run(fmt.Sprintf("objects=%d", objects), func(b *testing.B) {
			const partitions = 64
			t0 := time.Unix(1_750_000_000, 0)
			tr := wal.NewTracker(time.Hour)
			for p := range int32(partitions) {
				tr.Lead("t", p, 1)
				tr.WaitFor("t", p, []int32{2})
			}
			next := make([]int64, partitions)
			i := 0
			round := func(collect bool) {
				p := int32(i % partitions)
				tr.Add("b", fmt.Sprintf("o%09d", i), t0, []wal.ChunkNeed{{Topic: "t", Partition: p, LeaderEpoch: 1, LastOffset: next[p] + 9, Replicas: []int32{2, 3}}})
				next[p] += 10
				tr.ReplicaProgress("t", p, 2, next[p])
				if collect {
					tr.Collect(t0.Add(time.Minute))
				}
				i++
			}
			for range objects {
				round(false)
			}
			tr.Collect(t0.Add(time.Minute))
			b.ReportAllocs()
			b.ResetTimer()
			for b.Loop() {
				round(true)
			}
			b.ReportMetric(float64(tr.Len()), "tracked")
		})
	}
}
