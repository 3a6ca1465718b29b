package chaos

import (
	"context"
	"fmt"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
)

// livenessProducer is the producer name of the liveness probe's values
// ("live-<n>"): one record per partition, so each is its own sequence.
const livenessProducer = "live"

// probeLiveness checks, after healing, that the cluster serves again:
// every partition takes one record (idempotent, acks=all) and a consumer
// reads it back at its acknowledged offset, all within bound. The probe's
// acknowledgements join the history (they must not be lost either).
func (c *cluster) probeLiveness(ctx context.Context, bound time.Duration) ([]Ack, error) {
	ctx, cancel := context.WithTimeout(ctx, bound)
	defer cancel()
	pcl, err := kgo.NewClient(
		kgo.SeedBrokers(c.addrs...),
		kgo.ClientID(c.producerClientID("chaos-liveness", 0)),
		kgo.RequiredAcks(kgo.AllISRAcks()),
		kgo.RecordPartitioner(kgo.ManualPartitioner()),
		kgo.RecordDeliveryTimeout(bound),
		kgo.RetryBackoffFn(func(int) time.Duration { return 200 * time.Millisecond }),
	)
	if err != nil {
		return nil, err
	}
	defer pcl.Close()
	var recs []*kgo.Record
	for i, tp := range c.tps {
		recs = append(recs, &kgo.Record{Topic: tp.Topic, Partition: tp.Partition, Value: fmt.Appendf(nil, "%s-%d", livenessProducer, i)})
	}
	var acks []Ack
	offsets := map[string]map[int32]kgo.Offset{}
	want := map[TP]Ack{}
	for _, r := range pcl.ProduceSync(ctx, recs...) {
		tp := TP{r.Record.Topic, r.Record.Partition}
		if r.Err != nil {
			return acks, fmt.Errorf("produce to %s: %w", tp, r.Err)
		}
		a := Ack{TP: tp, Offset: r.Record.Offset, Value: string(r.Record.Value)}
		acks = append(acks, a)
		want[tp] = a
		if offsets[tp.Topic] == nil {
			offsets[tp.Topic] = map[int32]kgo.Offset{}
		}
		offsets[tp.Topic][tp.Partition] = kgo.NewOffset().At(a.Offset)
	}
	ccl, err := kgo.NewClient(kgo.SeedBrokers(c.addrs...), kgo.ClientID("chaos-liveness-consumer"), kgo.ConsumePartitions(offsets))
	if err != nil {
		return acks, err
	}
	defer ccl.Close()
	for len(want) > 0 {
		fs := ccl.PollFetches(ctx)
		if ctx.Err() != nil {
			var left []string
			for tp := range want {
				left = append(left, tp.String())
			}
			return acks, fmt.Errorf("%d partitions not read back: %v", len(left), left)
		}
		fs.EachRecord(func(r *kgo.Record) {
			tp := TP{r.Topic, r.Partition}
			if a, ok := want[tp]; ok && r.Offset == a.Offset && string(r.Value) == a.Value {
				delete(want, tp)
			}
		})
	}
	return acks, nil
}
