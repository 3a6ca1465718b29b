package protocol_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/strata-dev/strata/broker/brokertest"
)

// BenchmarkProduce measures acks=1 produce throughput through a franz-go
// client into one in-process broker (no compression), with the default
// flush policy (fsync within 1 s) and with flush.ms=0 (fsync before every
// acknowledgement). MB/s counts record values; records/s is reported
// alongside.
func BenchmarkProduce(b *testing.B) {
	for _, bc := range []struct {
		size    int
		flushMs string
	}{{100, "1000"}, {1024, "1000"}, {100, "0"}, {1024, "0"}} {
		name := fmt.Sprintf("%dB", bc.size)
		if bc.flushMs == "0" {
			name += "/fsync-every-append"
		}
		size := bc.size
		b.Run(name, func(b *testing.B) {
			br := brokertest.Start(b, brokertest.WithLogger(discardLogger()), brokertest.WithSetting("log.flush.interval.ms", bc.flushMs))
			topic := "bench"
			createTopic(b, newAdmin(b, br.Addr()), topic, 1, nil)
			cl := newClient(b, br.Addr(), kgo.DefaultProduceTopic(topic), kgo.RequiredAcks(kgo.LeaderAck()),
				kgo.DisableIdempotentWrite(), kgo.ProducerBatchCompression(kgo.NoCompression()))
			value := make([]byte, size)
			ctx := context.Background()
			b.SetBytes(int64(size))
			b.ResetTimer()
			start := time.Now()
			for range b.N {
				cl.Produce(ctx, &kgo.Record{Value: value}, func(_ *kgo.Record, err error) {
					if err != nil {
						b.Error(err)
					}
				})
			}
			if err := cl.Flush(ctx); err != nil {
				b.Fatal(err)
			}
			b.ReportMetric(float64(b.N)/time.Since(start).Seconds(), "records/s")
		})
	}
}

// BenchmarkFetch measures consume throughput: b.N records are produced
// first (untimed), then a fresh franz-go consumer reads them all.
func BenchmarkFetch(b *testing.B) {
	for _, size := range []int{100, 1024} {
		b.Run(fmt.Sprintf("%dB", size), func(b *testing.B) {
			br := brokertest.Start(b, brokertest.WithLogger(discardLogger()))
			topic := "bench"
			createTopic(b, newAdmin(b, br.Addr()), topic, 1, nil)
			p := newClient(b, br.Addr(), kgo.DefaultProduceTopic(topic), kgo.RequiredAcks(kgo.LeaderAck()),
				kgo.DisableIdempotentWrite(), kgo.ProducerBatchCompression(kgo.NoCompression()))
			value := make([]byte, size)
			ctx := context.Background()
			for range b.N {
				p.Produce(ctx, &kgo.Record{Value: value}, nil)
			}
			if err := p.Flush(ctx); err != nil {
				b.Fatal(err)
			}
			c := newClient(b, br.Addr(), kgo.ConsumeTopics(topic), kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()),
				kgo.FetchMaxBytes(16<<20), kgo.FetchMaxPartitionBytes(16<<20))
			b.SetBytes(int64(size))
			b.ResetTimer()
			start := time.Now()
			n := 0
			for n < b.N {
				fs := c.PollFetches(ctx)
				fs.EachError(func(_ string, _ int32, err error) { b.Fatal(err) })
				n += fs.NumRecords()
			}
			b.ReportMetric(float64(b.N)/time.Since(start).Seconds(), "records/s")
		})
	}
}
