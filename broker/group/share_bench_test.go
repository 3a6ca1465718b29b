package group

import (
	"context"
	"testing"
)

// BenchmarkShareAcquireAccept: one ShareFetch's acquisition of 100 records
// and their acceptance, per iteration, with the state in memory only and
// written through a FileStore (two fsyncs per iteration).
func BenchmarkShareAcquireAccept(b *testing.B) {
	for _, durable := range []bool{false, true} {
		name := "memory"
		if durable {
			name = "filestore"
		}
		b.Run(name, func(b *testing.B) {
			ctx := context.Background()
			clock := newFakeClock()
			cfg := Config{Clock: clock}
			if durable {
				fs, err := OpenFileStore(b.TempDir())
				if err != nil {
					b.Fatal(err)
				}
				defer fs.Close()
				cfg.Store = fs
			}
			c, err := New(ctx, cfg)
			if err != nil {
				b.Fatal(err)
			}
			defer c.Close()
			s := NewShareCoordinator(c, ShareConfig{AutoOffsetReset: "earliest"})
			if !durable {
				s.store = nil
			}
			sizes := make([]int64, b.N)
			for i := range sizes {
				sizes[i] = 100
			}
			l := newFakeShareLog(sizes...)
			b.ResetTimer()
			for i := range b.N {
				res, err := s.Acquire(ctx, "g", "m", "t", 0, -1, l, 100, 1<<20)
				if err != nil || len(res.Acquired) != 1 {
					b.Fatalf("acquire: %+v %v", res.Acquired, err)
				}
				first := int64(i) * 100
				if err := s.Acknowledge(ctx, "g", "m", "t", 0, -1, acks(first, first+99, ShareAckAccept), false); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}
