package bench

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
)

// primeFlag in a record's flag byte marks the records primePartitions
// sends: neither measured nor counted by the consumers.
const primeFlag = 2

// primePartitions has every producer send one record to every partition
// of the topic and waits for the answers, before the load starts.
//
// franz-go's idempotent producer keeps one request per partition in flight
// until the partition's first successful answer (recBuf.okOnSink, franz-go
// #223); the default partitioner stays on a partition for 64 KiB, so at
// 2,000 records/s of 1 KiB over 1,200 partitions a bench producer meets a
// partition for the first time every ~64 ms for over a minute, and the
// records produced meanwhile wait for that first answer. A producer that
// has run for minutes, what the window means to measure, has had its
// answer from every partition.
func primePartitions(ctx context.Context, producers []*kgo.Client, tracers []*produceTracer, partitions int32) error {
	var wg sync.WaitGroup
	errs := make([]error, len(producers))
	for i, cl := range producers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			var mu sync.Mutex
			for p := range partitions {
				v := make([]byte, RecordHeaderSize)
				binary.BigEndian.PutUint64(v, uint64(time.Now().UnixNano()))
				v[8] = primeFlag
				cl.Produce(ctx, &kgo.Record{Partition: p, Value: v}, func(r *kgo.Record, err error) {
					if tracers[i] != nil && err == nil {
						tracers[i].promised(r.Partition, time.Now())
					}
					if err != nil {
						mu.Lock()
						errs[i] = errors.Join(errs[i], fmt.Errorf("partition %d: %w", r.Partition, err))
						mu.Unlock()
					}
				})
			}
			if err := cl.Flush(ctx); err != nil {
				mu.Lock()
				errs[i] = errors.Join(errs[i], err)
				mu.Unlock()
			}
		}()
	}
	wg.Wait()
	if err := errors.Join(errs...); err != nil {
		return fmt.Errorf("prime partitions: %w", err)
	}
	return nil
}

// primingPartitioner sends the priming records (primeFlag) to the
// partition they name and every other record where base would.
type primingPartitioner struct{ base kgo.Partitioner }

func (p primingPartitioner) ForTopic(topic string) kgo.TopicPartitioner {
	return primingTopicPartitioner{p.base.ForTopic(topic)}
}

type primingTopicPartitioner struct{ base kgo.TopicPartitioner }

func isPrimeRecord(r *kgo.Record) bool {
	return len(r.Value) == RecordHeaderSize && r.Value[8] == primeFlag
}

// RequiresConsistency: a priming record's index is its partition among
// all partitions, not among the writable ones.
func (p primingTopicPartitioner) RequiresConsistency(r *kgo.Record) bool {
	return isPrimeRecord(r) || p.base.RequiresConsistency(r)
}

func (p primingTopicPartitioner) Partition(r *kgo.Record, n int) int {
	if isPrimeRecord(r) {
		return int(r.Partition)
	}
	return p.base.Partition(r, n)
}

// PartitionByBackup keeps the default partitioner's use of the partitions'
// backlogs (franz-go calls Partition only when this is not implemented).
func (p primingTopicPartitioner) PartitionByBackup(r *kgo.Record, n int, backup kgo.TopicBackupIter) int {
	if isPrimeRecord(r) {
		return int(r.Partition)
	}
	if b, ok := p.base.(kgo.TopicBackupPartitioner); ok {
		return b.PartitionByBackup(r, n, backup)
	}
	return p.base.Partition(r, n)
}
