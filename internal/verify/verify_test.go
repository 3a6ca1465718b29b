package verify_test

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/strata-dev/strata/broker/brokertest"
	"github.com/strata-dev/strata/internal/verify"
)

func TestMain(m *testing.M) { brokertest.Main(m) }

// waitFor polls cond until it holds, failing the test after a minute.
func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(time.Minute)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// seqOf is the sequence number in a record value "<run> <seq> ...".
func seqOf(r *kgo.Record) string { return strings.Fields(string(r.Value))[1] }

// TestWorkload runs the workload against a three-zone cluster of
// in-process brokers: a clean run passes, and each kind of violation,
// injected into what the consumer sees or written into the topic for
// real, is reported.
func TestWorkload(t *testing.T) {
	c := brokertest.StartCluster(t, []string{"a", "b", "c"})
	ctx := t.Context()
	start := func(t *testing.T, topic string, tamper func(*kgo.Record) []*kgo.Record) *verify.Workload {
		t.Helper()
		w, err := verify.Start(ctx, verify.Options{Seeds: c.Addrs(), Topic: topic, Partitions: 3, ReplicationFactor: 3,
			Rate: 1000, RecordSize: 64, ClientRack: "a", Tamper: tamper})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(w.Close)
		waitFor(t, "300 records acknowledged", func() bool { return w.Acked() >= 300 })
		return w
	}
	// drainAll waits until nothing but want records are pending, then
	// drains: lost is then exactly what the test made lost.
	drainAll := func(t *testing.T, w *verify.Workload, want int64) verify.Status {
		t.Helper()
		w.Stop(ctx)
		waitFor(t, fmt.Sprintf("%d pending", want), func() bool { return w.Status().Pending == want })
		st := w.Drain(ctx, time.Second)
		if !st.Done || st.Running || st.Pending != 0 || st.Lost != want {
			t.Fatalf("final status %+v: want done, %d lost", st, want)
		}
		return st
	}

	t.Run("clean run", func(t *testing.T) {
		w := start(t, "clean", nil)
		if st := w.Status(); !st.Running || st.Done || st.Partitions != 3 {
			t.Fatalf("status while running %+v", st)
		}
		st := w.Drain(ctx, time.Minute)
		if !st.OK() || !st.Drained || st.Acked < 300 || st.Consumed < st.Acked || st.Failed != 0 || st.MaxGapSeconds <= 0 {
			t.Fatalf("final status %+v", st)
		}

		// A second run of the same topic skips the first one's records.
		w2 := start(t, "clean", nil)
		st2 := drainAll(t, w2, 0)
		if !st2.OK() || st2.OtherRecords < st.Consumed {
			t.Fatalf("second run %+v: want OK, the first run's %d records skipped", st2, st.Consumed)
		}
	})

	t.Run("a record the consumer never sees is lost", func(t *testing.T) {
		w := start(t, "lost", func(r *kgo.Record) []*kgo.Record {
			if r.Partition == 1 && seqOf(r) == "10" {
				return nil
			}
			return []*kgo.Record{r}
		})
		st := drainAll(t, w, 1)
		if st.OK() || st.Drained || len(st.LostExamples) != 1 || st.LostExamples[0] != "partition 1: record 10 acknowledged, never consumed" {
			t.Fatalf("final status %+v", st)
		}
	})

	t.Run("a record seen twice is duplicated", func(t *testing.T) {
		w := start(t, "dup", func(r *kgo.Record) []*kgo.Record {
			if r.Partition == 0 && seqOf(r) == "5" {
				return []*kgo.Record{r, r}
			}
			return []*kgo.Record{r}
		})
		st := drainAll(t, w, 0)
		if st.OK() || st.Duplicated != 1 || st.OutOfOrder != 0 || len(st.DuplicatedExamples) != 1 || !strings.HasPrefix(st.DuplicatedExamples[0], "partition 0: record 5 again") {
			t.Fatalf("final status %+v", st)
		}
	})

	t.Run("a record seen after a later one is out of order", func(t *testing.T) {
		var held *kgo.Record
		w := start(t, "reorder", func(r *kgo.Record) []*kgo.Record {
			switch {
			case r.Partition == 2 && seqOf(r) == "3":
				held = r
				return nil
			case r.Partition == 2 && seqOf(r) == "4":
				return []*kgo.Record{r, held}
			}
			return []*kgo.Record{r}
		})
		st := drainAll(t, w, 0)
		if st.OK() || st.OutOfOrder != 1 || st.Duplicated != 0 || len(st.OutOfOrderExamples) != 1 || !strings.HasPrefix(st.OutOfOrderExamples[0], "partition 2: record 3 at offset") {
			t.Fatalf("final status %+v", st)
		}
	})

	t.Run("a copy written into the topic is duplicated, a foreign record skipped", func(t *testing.T) {
		w := start(t, "copy", nil)
		cl, err := kgo.NewClient(kgo.SeedBrokers(c.Addrs()...), kgo.DefaultProduceTopic("copy"), kgo.RecordPartitioner(kgo.ManualPartitioner()))
		if err != nil {
			t.Fatal(err)
		}
		defer cl.Close()
		copyOf := fmt.Sprintf("%s 7 ", w.Status().Run)
		if err := cl.ProduceSync(ctx, &kgo.Record{Partition: 2, Value: []byte(copyOf)}, &kgo.Record{Partition: 1, Value: []byte("not ours")}).FirstErr(); err != nil {
			t.Fatal(err)
		}
		st := drainAll(t, w, 0)
		if st.OK() || st.Duplicated != 1 || st.OtherRecords != 1 || !strings.HasPrefix(st.DuplicatedExamples[0], "partition 2: record 7 again") {
			t.Fatalf("final status %+v", st)
		}
	})
}

// TestStartWaitsForTheTopic: with Partitions 0 the topic must exist; Start
// waits for it and gives up with a clear error when ctx ends.
func TestStartWaitsForTheTopic(t *testing.T) {
	c := brokertest.StartCluster(t, []string{"a"})
	ctx, cancel := context.WithTimeout(t.Context(), 2*time.Second)
	defer cancel()
	_, err := verify.Start(ctx, verify.Options{Seeds: c.Addrs(), Topic: "absent"})
	if err == nil || !strings.Contains(err.Error(), "verify: topic absent: context deadline exceeded") || !strings.Contains(err.Error(), "UNKNOWN_TOPIC_OR_PARTITION") {
		t.Fatalf("err %v", err)
	}
}

// TestRunner: the HTTP interface of a run, from not ready to the final
// status that POST /stop answers.
func TestRunner(t *testing.T) {
	c := brokertest.StartCluster(t, []string{"a", "b", "c"})
	r := verify.NewRunner(verify.Options{Seeds: c.Addrs(), Topic: "runner", Partitions: 6, ReplicationFactor: 3, Rate: 500}, time.Minute)
	h := r.Handler()
	var (
		wg  sync.WaitGroup
		st  verify.Status
		err error
	)
	wg.Add(1)
	go func() { defer wg.Done(); st, err = r.Run(t.Context(), 0) }()

	waitFor(t, "/healthz ready", func() bool { return get(t, h, "/healthz").Code == 200 })
	waitFor(t, "100 records acknowledged", func() bool { return decode(t, get(t, h, "/status")).Acked >= 100 })
	running := decode(t, get(t, h, "/status"))
	if !running.Running || running.Done || running.Partitions != 6 || running.Lost != 0 {
		t.Fatalf("status while running %+v", running)
	}
	final := decode(t, do(t, h, "POST", "/stop"))
	wg.Wait()
	if err != nil {
		t.Fatal(err)
	}
	if !final.Done || final.Running || !final.OK() || !final.Drained || final.Acked < running.Acked || final.Acked != st.Acked {
		t.Fatalf("final status %+v (Run returned %+v)", final, st)
	}
	if code := get(t, h, "/healthz").Code; code != 503 {
		t.Errorf("/healthz after the run: %d, want 503", code)
	}
	if again := decode(t, get(t, h, "/status")); again.Acked != final.Acked || !again.Done {
		t.Errorf("/status after the run %+v, want the final status", again)
	}
}
