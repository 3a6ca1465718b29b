package wal_test

import (
	"fmt"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/strata-dev/strata/broker/record"
	"github.com/strata-dev/strata/broker/wal"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// batch builds a valid batch of n records at base with the leader epoch
// stamped, each value valueSize bytes.
func batch(t testing.TB, base int64, n int, epoch int32, valueSize int) []byte {
	t.Helper()
	recs := make([]record.Record, n)
	for i := range recs {
		v := make([]byte, valueSize)
		for j := range v {
			v[j] = byte(int(base) + i + j)
		}
		recs[i] = record.Record{Key: []byte(fmt.Sprintf("k%d", base+int64(i))), Value: v}
	}
	spec := record.DefaultSpec()
	spec.BaseOffset = base
	spec.PartitionLeaderEpoch = epoch
	spec.BaseTimestamp = 1_700_000_000_000
	b, err := record.Build(spec, recs)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// chunk builds a chunk of nBatches batches of recsPerBatch records from base.
func chunk(t testing.TB, topic string, partition int32, epoch int32, base int64, nBatches, recsPerBatch int) wal.ChunkInput {
	t.Helper()
	c := wal.ChunkInput{Topic: topic, Partition: partition, LeaderEpoch: epoch, BaseOffset: base}
	off := base
	for i := 0; i < nBatches; i++ {
		c.Batches = append(c.Batches, batch(t, off, recsPerBatch, epoch, 16))
		off += int64(recsPerBatch)
	}
	c.LastOffset = off - 1
	return c
}

var testHeader = wal.Header{
	Version: wal.Version, Cluster: "demo", Zone: "us-east-1a", BrokerID: 7, Incarnation: 3, Sequence: 42,
	CreatedAt: time.UnixMilli(1_750_000_000_123).UTC(),
}

// waitFor polls cond until it holds or the deadline passes.
func waitFor(t testing.TB, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(20 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(2 * time.Millisecond)
	}
}
