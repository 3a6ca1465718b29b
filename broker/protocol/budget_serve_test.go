package protocol_test

import (
	"bytes"
	"fmt"
	"sync"
	"testing"

	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/strata-dev/strata/broker/brokertest"
	"github.com/strata-dev/strata/broker/server"
)

// TestLargeRequestsUnderTinyMemoryBudget runs concurrent multi-MiB produce
// requests through a broker whose in-flight request budget fits less than
// one of them, while a long poll is parked: large requests take turns, the
// parked fetch holds no budget, and everything completes.
func TestLargeRequestsUnderTinyMemoryBudget(t *testing.T) {
	b := brokertest.Start(t, brokertest.WithConfig(func(c *server.Config) { c.MaxInflightRequestMemory = 1 }))
	adm := newAdmin(t, b.Addr())
	createTopic(t, adm, "big", 1, map[string]*string{"max.message.bytes": sp("8388608")})
	createTopic(t, adm, "quiet", 1, nil)

	// A long poll on another topic, parked for the whole test.
	fetcher := newClient(t, b.Addr())
	parked := make(chan error, 1)
	go func() {
		req := kmsg.NewPtrFetchRequest()
		req.MaxWaitMillis, req.MinBytes, req.MaxBytes, req.SessionEpoch = 30_000, 1, 1<<20, -1
		req.Topics = []kmsg.FetchRequestTopic{{Topic: "quiet", TopicID: topicID(t, adm, "quiet"), Partitions: []kmsg.FetchRequestTopicPartition{
			{Partition: 0, PartitionMaxBytes: 1 << 20, CurrentLeaderEpoch: -1, LastFetchedEpoch: -1},
		}}}
		_, err := req.RequestWith(testCtx(t), fetcher)
		parked <- err
	}()

	const producers, perProducer = 3, 8
	var wg sync.WaitGroup
	errs := make(chan error, producers*perProducer)
	for i := range producers {
		p := newClient(t, b.Addr(), kgo.DefaultProduceTopic("big"), kgo.ProducerBatchMaxBytes(8<<20),
			kgo.ProducerBatchCompression(kgo.NoCompression()), kgo.ProducerLinger(0))
		for j := range perProducer {
			wg.Add(1)
			value := bytes.Repeat([]byte{byte(i)}, 3<<19) // 1.5 MiB: every frame is over the 1 MiB budget threshold
			p.Produce(testCtx(t), &kgo.Record{Key: []byte(fmt.Sprint(i, j)), Value: value}, func(_ *kgo.Record, err error) {
				defer wg.Done()
				if err != nil {
					errs <- err
				}
			})
		}
	}
	allDone := make(chan struct{})
	go func() { wg.Wait(); close(allDone) }()
	select {
	case <-allDone:
	case <-testCtx(t).Done(): // a hang guard, not a speed assertion
		t.Fatal("produce requests stuck waiting for the memory budget (a leak?)")
	}
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
	ends, err := adm.ListEndOffsets(testCtx(t), "big")
	if err != nil {
		t.Fatal(err)
	}
	if o, _ := ends.Lookup("big", 0); o.Offset != producers*perProducer {
		t.Fatalf("end offset %d, want %d", o.Offset, producers*perProducer)
	}
	fetcher.Close() // ends the parked fetch
	<-parked
}
