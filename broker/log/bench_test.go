package log

import (
	"fmt"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/strata-dev/strata/broker/record"
)

// BenchmarkAppend appends batches of 100 records. fsync=interval leaves
// fsync to the (disabled here) timer, i.e. page cache speed plus index
// work; fsync=every-append is FlushInterval 0. Retention by size runs every
// 1000 appends so the benchmark does not fill the disk.
func BenchmarkAppend(b *testing.B) {
	for _, size := range []int{100, 1024} {
		for _, mode := range []struct {
			name  string
			flush int64
		}{{"fsync=none", -1}, {"fsync=every-append", 0}} {
			b.Run(fmt.Sprintf("record=%dB/batch=100/%s", size, mode.name), func(b *testing.B) {
				cfg := DefaultConfig()
				cfg.SegmentBytes = 64 << 20
				cfg.RetentionBytes = 128 << 20
				cfg.FlushInterval = 0
				if mode.flush < 0 {
					cfg.FlushInterval = -1
				}
				l := openLog(b, b.TempDir(), cfg)
				defer l.Close()
				bt := batch(b, 100, size, time.Now().UnixMilli())
				b.SetBytes(int64(len(bt)))
				b.ReportAllocs()
				b.ResetTimer()
				for i := 0; i < b.N; i++ {
					if _, err := l.AppendAsLeader([]record.Batch{bt}, 0); err != nil {
						b.Fatal(err)
					}
					if i%1000 == 999 {
						if _, err := l.ApplyRetention(); err != nil {
							b.Fatal(err)
						}
					}
				}
			})
		}
	}
}

// BenchmarkRead reads a 32 MiB log sequentially in 1 MiB fetches (the
// files are in the page cache: this measures the log's own overhead).
func BenchmarkRead(b *testing.B) {
	cfg := DefaultConfig()
	cfg.SegmentBytes = 8 << 20
	cfg.FlushInterval = -1
	l := openLog(b, b.TempDir(), cfg)
	defer l.Close()
	bt := batch(b, 100, 1024, time.Now().UnixMilli())
	for l.Size() < 32<<20 {
		if _, err := l.AppendAsLeader([]record.Batch{bt}, 0); err != nil {
			b.Fatal(err)
		}
	}
	end := l.EndOffset()
	b.ReportAllocs()
	b.ResetTimer()
	var total int64
	off := int64(0)
	for i := 0; i < b.N; i++ {
		if off >= end {
			off = 0
		}
		res, err := l.Read(off, 1<<20, end)
		if err != nil {
			b.Fatal(err)
		}
		total += int64(len(res.Records))
		off = res.HighestOffset + 1
	}
	b.SetBytes(total / int64(b.N))
}

// BenchmarkOpen reopens a 60 MiB log of 8 MiB segments after a clean
// shutdown and after a crash (the tail segment is re-read and its indexes
// rebuilt).
func BenchmarkOpen(b *testing.B) {
	for _, crash := range []bool{false, true} {
		name := "clean"
		if crash {
			name = "crash"
		}
		b.Run(name, func(b *testing.B) {
			cfg := DefaultConfig()
			cfg.SegmentBytes = 8 << 20
			cfg.FlushInterval = -1
			dir := b.TempDir()
			l := openLog(b, dir, cfg)
			bt := batch(b, 100, 1024, time.Now().UnixMilli())
			for l.Size() < 60<<20 { // the tail segment holds ~4 MiB
				if _, err := l.AppendAsLeader([]record.Batch{bt}, 0); err != nil {
					b.Fatal(err)
				}
			}
			size := l.Size()
			l.Close()
			b.SetBytes(size)
			b.ResetTimer()
			for i := 0; i < b.N; i++ {
				if crash {
					os.Remove(filepath.Join(dir, cleanShutdownFile))
				}
				l := openLog(b, dir, cfg)
				b.StopTimer()
				l.Close()
				b.StartTimer()
			}
		})
	}
}

// BenchmarkAppendParallel has 8 goroutines per CPU append 1 KiB-record
// batches with an fsync before every append returns: fsyncs run outside
// the log lock, so concurrent appends share them.
func BenchmarkAppendParallel(b *testing.B) {
	cfg := DefaultConfig()
	cfg.SegmentBytes = 64 << 20
	cfg.RetentionBytes = 128 << 20
	cfg.FlushInterval = 0
	l := openLog(b, b.TempDir(), cfg)
	defer l.Close()
	ts := time.Now().UnixMilli()
	size := int64(len(batch(b, 100, 1024, ts)))
	b.SetBytes(size)
	b.SetParallelism(8)
	b.ResetTimer()
	b.RunParallel(func(pb *testing.PB) {
		bt := batch(b, 100, 1024, ts) // each goroutine stamps its own batch
		for pb.Next() {
			if _, err := l.AppendAsLeader([]record.Batch{bt}, 0); err != nil {
				b.Error(err)
				return
			}
		}
	})
	b.StopTimer()
	if _, err := l.ApplyRetention(); err != nil {
		b.Fatal(err)
	}
}
