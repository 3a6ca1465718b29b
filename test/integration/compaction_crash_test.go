package integration

import (
	"context"
	"fmt"
	"path/filepath"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/strata-dev/strata/broker/brokertest"
)

// TestCrashDuringCleaning kills the broker with SIGKILL while the log
// cleaner is writing a cleaned segment of a compacted topic (its
// .cleaned file exists; the cleaner's IO throttle keeps it writing long
// enough to be caught), restarts it, and checks that a consumer from
// offset 0 reads the latest value of every key, offsets increasing. (The
// restarted cleaner may be writing .cleaned files again at once, so
// leftovers are checked by the log's TestCleanCrashRecovery instead.)
func TestCrashDuringCleaning(t *testing.T) {
	const topic, records, keys = "cleaned", 20000, 100
	p := brokertest.StartProcess(t, brokertest.WithSetting("log.cleaner.backoff.ms", "50"),
		brokertest.WithSetting("log.cleaner.io.max.bytes.per.second", "100000"))
	ctx, cancel := context.WithTimeout(context.Background(), 4*time.Minute)
	defer cancel()
	cl, err := kgo.NewClient(kgo.SeedBrokers(p.Addr()), kgo.DefaultProduceTopic(topic),
		kgo.RequiredAcks(kgo.AllISRAcks()), kgo.ProducerBatchMaxBytes(8000))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	compact, seg, ratio := "compact", "16384", "0.01"
	if _, err := kadm.NewClient(cl).CreateTopic(ctx, 1, 1, map[string]*string{
		"cleanup.policy": &compact, "segment.bytes": &seg, "min.cleanable.dirty.ratio": &ratio}, topic); err != nil {
		t.Fatal(err)
	}
	want := map[string]string{}
	for i := range records {
		k := fmt.Sprintf("key-%03d", i%keys)
		want[k] = fmt.Sprintf("%s=%06d", k, i)
		cl.Produce(ctx, &kgo.Record{Key: []byte(k), Value: []byte(want[k])}, func(_ *kgo.Record, err error) {
			if err != nil {
				t.Errorf("produce: %v", err)
			}
		})
	}
	if err := cl.Flush(ctx); err != nil {
		t.Fatal(err)
	}
	cl.Close()

	dir := filepath.Join(p.Dir(), topic+"-0")
	deadline := time.Now().Add(2 * time.Minute)
	for {
		if m, _ := filepath.Glob(filepath.Join(dir, "*.cleaned")); len(m) > 0 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("the cleaner never wrote a .cleaned segment")
		}
		time.Sleep(time.Millisecond)
	}
	p.Kill()
	p.Restart()
	cons, err := kgo.NewClient(kgo.SeedBrokers(p.Addr()), kgo.ConsumeTopics(topic), kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()))
	if err != nil {
		t.Fatal(err)
	}
	defer cons.Close()
	got := map[string]string{}
	n, last := 0, int64(-1)
	for last < records-1 {
		fs := cons.PollFetches(ctx)
		if err := fs.Err0(); err != nil {
			t.Fatal(err)
		}
		fs.EachRecord(func(r *kgo.Record) {
			if r.Offset <= last {
				t.Fatalf("offset %d after %d", r.Offset, last)
			}
			last, n = r.Offset, n+1
			got[string(r.Key)] = string(r.Value)
		})
	}
	if fmt.Sprint(got) != fmt.Sprint(want) {
		t.Fatalf("latest values after the crash:\n got %v\nwant %v", got, want)
	}
	t.Logf("consumer read %d of %d records after a SIGKILL mid-clean", n, records)
}
