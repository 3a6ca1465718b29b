package replication

import (
	"context"
	"fmt"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/go-logr/logr"
	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/strata-dev/strata/broker/brokertest"
	"github.com/strata-dev/strata/broker/traffic"
)

// BenchmarkProduce3Zones produces 1 KiB records to a 3-partition, RF=3
// topic on a 3-zone loopback cluster (in-process brokers, real etcd) from
// 8 concurrent synchronous producers (one record, or one batch of 16 records,
// per call), and reports per-call latency (p50/p99 in ms), throughput (MB/s of record values) and the inter-broker
// cross-zone bytes (replica fetch requests and responses, read from the
// traffic counters) per produced byte (Produce request bytes).
//
//	go test ./test/replication -run '^$' -bench Produce3Zones -benchtime 4000x
func BenchmarkProduce3Zones(b *testing.B) {
	for _, acks := range []struct {
		name  string
		opt   kgo.Acks
		batch int // records per produce call (one batch)
	}{{"acks=1", kgo.LeaderAck(), 1}, {"acks=all", kgo.AllISRAcks(), 1}, {"acks=all/16-record-batches", kgo.AllISRAcks(), 16}} {
		b.Run(acks.name, func(b *testing.B) {
			c := brokertest.StartCluster(b, zones, brokertest.WithLogger(discard()))
			cl, err := kgo.NewClient(kgo.SeedBrokers(c.Addrs()...), kgo.RequiredAcks(acks.opt), kgo.DisableIdempotentWrite(),
				kgo.ProducerLinger(0), kgo.RecordPartitioner(kgo.ManualPartitioner()))
			if err != nil {
				b.Fatal(err)
			}
			defer cl.Close()
			ctx := context.Background()
			if resp, err := kadm.NewClient(cl).CreateTopic(ctx, 3, 3, nil, "bench"); err != nil || resp.Err != nil {
				b.Fatalf("create topic: %v %v", err, resp.Err)
			}
			value := make([]byte, 1024)
			// Warm up: metadata, connections, fetchers.
			for range 30 {
				if err := cl.ProduceSync(ctx, &kgo.Record{Topic: "bench", Value: value}).FirstErr(); err != nil {
					b.Fatal(err)
				}
			}
			produced0, xzone0 := counters(c)
			const workers = 8
			lat := make([][]time.Duration, workers)
			b.SetBytes(int64(len(value) * acks.batch))
			b.ResetTimer()
			var wg sync.WaitGroup
			for w := range workers {
				wg.Add(1)
				go func() {
					defer wg.Done()
					for i := w; i < b.N; i += workers {
						recs := make([]*kgo.Record, acks.batch)
						for j := range recs {
							recs[j] = &kgo.Record{Topic: "bench", Partition: int32(i % 3), Value: value}
						}
						start := time.Now()
						if err := cl.ProduceSync(ctx, recs...).FirstErr(); err != nil {
							b.Error(err)
							return
						}
						lat[w] = append(lat[w], time.Since(start))
					}
				}()
			}
			wg.Wait()
			b.StopTimer()
			// Let the followers fetch the tail (acks=1) before reading the
			// counters, so that every produced byte is replicated.
			waitReplicated(b, c)
			produced, xzone := counters(c)
			all := slices.Concat(lat...)
			slices.Sort(all)
			if len(all) > 0 {
				b.ReportMetric(float64(all[len(all)/2].Microseconds())/1000, "p50-ms")
				b.ReportMetric(float64(all[len(all)*99/100].Microseconds())/1000, "p99-ms")
			}
			if d := produced - produced0; d > 0 {
				b.ReportMetric((xzone-xzone0)/d, "xzone-B/produced-B")
			}
		})
	}
}

// counters sums, over the brokers, the Produce bytes received and the
// replication bytes sent to brokers in other zones.
func counters(c *brokertest.Cluster) (produced, crossZone float64) {
	for _, br := range c.Brokers {
		t := br.Server().Traffic()
		produced += t.Bytes(traffic.UnknownZone, traffic.Produce, traffic.In)
		crossZone += t.CrossZone(traffic.ReplicationInline, traffic.Out)
	}
	return produced, crossZone
}

func waitReplicated(b *testing.B, c *brokertest.Cluster) {
	deadline := time.Now().Add(30 * time.Second)
	for time.Now().Before(deadline) {
		done := true
		for p := range int32(3) {
			var leos []int64
			for _, br := range c.Brokers {
				part, err := br.Server().Broker().Partition("bench", p)
				if err != nil {
					b.Fatal(err)
				}
				leos = append(leos, part.Log.EndOffset())
			}
			if slices.Min(leos) != slices.Max(leos) {
				done = false
			}
		}
		if done {
			return
		}
		time.Sleep(10 * time.Millisecond)
	}
	b.Fatal(fmt.Errorf("replicas did not converge"))
}

func discard() logr.Logger { return logr.Discard() }
