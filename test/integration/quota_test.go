package integration

import (
	"context"
	"errors"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/strata-dev/strata/broker/brokertest"
)

// throttleHook counts the throttle times a client was given.
type throttleHook struct{ n, ms atomic.Int64 }

func (h *throttleHook) OnBrokerThrottle(_ kgo.BrokerMetadata, d time.Duration, _ bool) {
	h.n.Add(1)
	h.ms.Add(d.Milliseconds())
}

// TestClientQuotas: AlterClientQuotas stores a producer_byte_rate for a
// client ID in the cluster metadata; DescribeClientQuotas shows it; a
// producer with that client ID producing as fast as it can is held to the
// rate (measured after the quota's first window span) with throttle times
// in its responses, while a producer with another client ID is not
// throttled. Invalid entities, unknown or unenforced keys and bad values
// are refused with messages, and nothing of a refused entry is stored.
func TestClientQuotas(t *testing.T) {
	c := brokertest.StartCluster(t, []string{"a"}, brokertest.WithSetting("quota.window.num", "3"))
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	admCl, err := kgo.NewClient(kgo.SeedBrokers(c.Addrs()...))
	if err != nil {
		t.Fatal(err)
	}
	defer admCl.Close()
	adm := kadm.NewClient(admCl)
	if _, err := adm.CreateTopic(ctx, 1, 1, nil, "quota"); err != nil {
		t.Fatal(err)
	}

	const rate = 256 << 10 // B/s
	app := "quota-app"
	res, err := adm.AlterClientQuotas(ctx, []kadm.AlterClientQuotaEntry{{
		Entity: kadm.ClientQuotaEntity{{Type: "client-id", Name: &app}},
		Ops:    []kadm.AlterClientQuotaOp{{Key: "producer_byte_rate", Value: rate}},
	}})
	if err != nil || res[0].Err != nil {
		t.Fatalf("alter: %v %v", err, res)
	}
	described, err := adm.DescribeClientQuotas(ctx, true, []kadm.DescribeClientQuotaComponent{{Type: "client-id", MatchName: &app}})
	if err != nil || len(described) != 1 || described[0].Values[0].Key != "producer_byte_rate" || described[0].Values[0].Value != rate {
		t.Fatalf("describe: %v %+v", err, described)
	}

	for _, bad := range []struct {
		entry kadm.AlterClientQuotaEntry
		code  error
		msg   string
	}{
		{kadm.AlterClientQuotaEntry{Entity: kadm.ClientQuotaEntity{{Type: "client-id", Name: &app}}, Ops: []kadm.AlterClientQuotaOp{{Key: "request_percentage", Value: -5}}},
			kerr.InvalidConfig, "above 0"},
		{kadm.AlterClientQuotaEntry{Entity: kadm.ClientQuotaEntity{{Type: "client-id", Name: &app}}, Ops: []kadm.AlterClientQuotaOp{{Key: "connection_creation_rate", Value: 50}}},
			kerr.InvalidRequest, "ip entities only"},
		{kadm.AlterClientQuotaEntry{Entity: kadm.ClientQuotaEntity{{Type: "client-id", Name: &app}}, Ops: []kadm.AlterClientQuotaOp{{Key: "producer_byte_rat", Value: 5}}},
			kerr.InvalidRequest, "unknown quota key"},
		{kadm.AlterClientQuotaEntry{Entity: kadm.ClientQuotaEntity{{Type: "client-id", Name: &app}}, Ops: []kadm.AlterClientQuotaOp{{Key: "consumer_byte_rate", Value: 0}}},
			kerr.InvalidConfig, "above 0"},
		{kadm.AlterClientQuotaEntry{Entity: kadm.ClientQuotaEntity{{Type: "ip", Name: &app}}, Ops: []kadm.AlterClientQuotaOp{{Key: "consumer_byte_rate", Value: 5}}},
			kerr.InvalidRequest, "not an IP address"},
		{kadm.AlterClientQuotaEntry{Entity: kadm.ClientQuotaEntity{{Type: "group", Name: &app}}, Ops: []kadm.AlterClientQuotaOp{{Key: "consumer_byte_rate", Value: 5}}},
			kerr.InvalidRequest, "unknown quota entity type"},
	} {
		res, err := adm.AlterClientQuotas(ctx, []kadm.AlterClientQuotaEntry{bad.entry})
		if err != nil {
			t.Fatal(err)
		}
		if !errors.Is(res[0].Err, bad.code) || res[0].ErrMessage == "" || !strings.Contains(res[0].ErrMessage, bad.msg) {
			t.Errorf("%v %+v: %v %q, want %v mentioning %q", bad.entry.Entity, bad.entry.Ops, res[0].Err, res[0].ErrMessage, bad.code, bad.msg)
		}
	}
	all, err := adm.DescribeClientQuotas(ctx, false, nil)
	if err != nil || len(all) != 1 || all[0].Entity[0].Name == nil || *all[0].Entity[0].Name != app {
		t.Fatalf("after refused changes the cluster holds %+v (%v), want only %s's quota", all, err, app)
	}

	produce := func(clientID string, d time.Duration) (measured float64, h *throttleHook) {
		h = &throttleHook{}
		cl, err := kgo.NewClient(kgo.SeedBrokers(c.Addrs()...), kgo.ClientID(clientID), kgo.DefaultProduceTopic("quota"),
			kgo.RequiredAcks(kgo.AllISRAcks()), kgo.ProducerBatchCompression(kgo.NoCompression()), kgo.WithHooks(h),
			// Requests well below the quota's span (3 windows × the rate),
			// and little buffered: the flush at the end is short.
			kgo.ProducerBatchMaxBytes(32<<10), kgo.MaxBufferedRecords(200))
		if err != nil {
			t.Fatal(err)
		}
		defer cl.Close()
		value := []byte(strings.Repeat("q", 1000))
		var acked atomic.Int64
		start := time.Now()
		warm := start.Add(d / 3) // past the first window span (3 × 1 s)
		var fromBytes int64
		var from time.Time
		for time.Since(start) < d {
			if from.IsZero() && time.Now().After(warm) {
				from, fromBytes = time.Now(), acked.Load()
			}
			cl.Produce(ctx, &kgo.Record{Value: value}, func(r *kgo.Record, err error) {
				if err != nil {
					t.Errorf("produce: %v", err)
					return
				}
				acked.Add(int64(len(r.Value)))
			})
		}
		measured = float64(acked.Load()-fromBytes) / time.Since(from).Seconds()
		if err := cl.Flush(ctx); err != nil {
			t.Fatal(err)
		}
		return measured, h
	}

	got, h := produce(app, 9*time.Second)
	t.Logf("client %s: %.0f B/s of record values after the first span (quota %d B/s), %d throttles, %d ms", app, got, rate, h.n.Load(), h.ms.Load())
	if h.n.Load() == 0 {
		t.Fatal("no response carried a throttle time")
	}
	// Record values are most of the request bytes the quota counts; the
	// rest (batch and request headers) only lowers the value rate.
	if got > rate*1.1 {
		t.Fatalf("produced %.0f B/s, over the quota of %d B/s by more than 10 %%", got, rate)
	}
	if got < rate*0.5 {
		t.Fatalf("produced %.0f B/s, less than half the quota of %d B/s: throttled far more than the quota asks", got, rate)
	}

	free, hf := produce("other-app", 3*time.Second)
	if hf.n.Load() != 0 {
		t.Fatalf("a client without a quota was throttled %d times", hf.n.Load())
	}
	t.Logf("client other-app: %.0f B/s, not throttled", free)

	// A consumer is held to consumer_byte_rate the same way (the topic
	// holds several MB by now).
	consumerApp := "quota-consumer"
	res, err = adm.AlterClientQuotas(ctx, []kadm.AlterClientQuotaEntry{{
		Entity: kadm.ClientQuotaEntity{{Type: "client-id", Name: &consumerApp}},
		Ops:    []kadm.AlterClientQuotaOp{{Key: "consumer_byte_rate", Value: rate}},
	}})
	if err != nil || res[0].Err != nil {
		t.Fatalf("alter: %v %v", err, res)
	}
	ch := &throttleHook{}
	cons, err := kgo.NewClient(kgo.SeedBrokers(c.Addrs()...), kgo.ClientID(consumerApp), kgo.ConsumeTopics("quota"),
		kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()), kgo.FetchMaxBytes(32<<10), kgo.FetchMaxPartitionBytes(32<<10), kgo.WithHooks(ch))
	if err != nil {
		t.Fatal(err)
	}
	var consumed int64
	var from time.Time
	var fromBytes int64
	cstart := time.Now()
	for time.Since(cstart) < 9*time.Second {
		pctx, pcancel := context.WithTimeout(ctx, time.Second)
		fs := cons.PollFetches(pctx)
		pcancel()
		fs.EachRecord(func(r *kgo.Record) { consumed += int64(len(r.Value)) })
		if from.IsZero() && time.Since(cstart) >= 3*time.Second {
			from, fromBytes = time.Now(), consumed
		}
	}
	cons.Close()
	crate := float64(consumed-fromBytes) / time.Since(from).Seconds()
	t.Logf("client %s: consumed %.0f B/s of record values after the first span (quota %d B/s), %d throttles", consumerApp, crate, rate, ch.n.Load())
	if ch.n.Load() == 0 || crate > rate*1.1 {
		t.Fatalf("consumer at %.0f B/s with %d throttles: not held to its quota of %d B/s", crate, ch.n.Load(), rate)
	}

	// librdkafka (kcat) is held to a quota too: 2 MB of values take at
	// least what the quota allows beyond the first span's burst.
	kcatApp := "kcat-app"
	res, err = adm.AlterClientQuotas(ctx, []kadm.AlterClientQuotaEntry{{
		Entity: kadm.ClientQuotaEntity{{Type: "client-id", Name: &kcatApp}},
		Ops:    []kadm.AlterClientQuotaOp{{Key: "producer_byte_rate", Value: rate}},
	}})
	if err != nil || res[0].Err != nil {
		t.Fatalf("alter: %v %v", err, res)
	}
	const kcatRecords = 2000
	in := []byte(strings.Repeat(strings.Repeat("k", 1000)+"\n", kcatRecords))
	start := time.Now()
	runKcat(t, in, "-b", c.Addrs()[0], "-P", "-t", "quota", "-X", "client.id="+kcatApp, "-X", "acks=all", "-X", "batch.size=32768")
	elapsed := time.Since(start)
	burst := 2 * rate // (quota.window.num − 1) windows of 1 s
	if least := time.Duration(0.9 * float64(kcatRecords*1000-burst) / rate * float64(time.Second)); elapsed < least {
		t.Fatalf("kcat produced %d B in %v at %d B/s quota: faster than the quota allows (at least %v)", kcatRecords*1000, elapsed, rate, least)
	}
	t.Logf("kcat: %d B in %v: %.0f B/s overall with a first-span burst of %d B (quota %d B/s)", kcatRecords*1000, elapsed.Round(time.Millisecond),
		kcatRecords*1000/elapsed.Seconds(), burst, rate)

	// KIP-599: a client with controller_mutation_rate 2 partitions/s has
	// a budget of 3 windows × 2 = 6 partitions. CreateTopics v6+ takes
	// topics while the budget is not negative, then refuses them with
	// THROTTLING_QUOTA_EXCEEDED and a throttle time; the budget refills
	// at the quota.
	maker := "topic-maker"
	res, err = adm.AlterClientQuotas(ctx, []kadm.AlterClientQuotaEntry{{
		Entity: kadm.ClientQuotaEntity{{Type: "client-id", Name: &maker}},
		Ops:    []kadm.AlterClientQuotaOp{{Key: "controller_mutation_rate", Value: 2}},
	}})
	if err != nil || res[0].Err != nil {
		t.Fatalf("alter: %v %v", err, res)
	}
	mcl, err := kgo.NewClient(kgo.SeedBrokers(c.Addrs()...), kgo.ClientID(maker))
	if err != nil {
		t.Fatal(err)
	}
	defer mcl.Close()
	create := func(topics ...string) *kmsg.CreateTopicsResponse {
		t.Helper()
		req := kmsg.NewPtrCreateTopicsRequest()
		req.TimeoutMillis = 30000
		for _, name := range topics {
			rt := kmsg.NewCreateTopicsRequestTopic()
			rt.Topic, rt.NumPartitions, rt.ReplicationFactor = name, 4, 1
			req.Topics = append(req.Topics, rt)
		}
		resp, err := req.RequestWith(ctx, mcl)
		if err != nil {
			t.Fatal(err)
		}
		return resp
	}
	resp := create("m1", "m2", "m3")
	// m1 (4 of 6 left: 2), m2 admitted at 2 (then −2), m3 refused.
	codes := []int16{resp.Topics[0].ErrorCode, resp.Topics[1].ErrorCode, resp.Topics[2].ErrorCode}
	if codes[0] != 0 || codes[1] != 0 || codes[2] != kerr.ThrottlingQuotaExceeded.Code || resp.ThrottleMillis <= 0 {
		t.Fatalf("CreateTopics of 3 × 4 partitions with a budget of 6: codes %v, throttle %d ms; want 0, 0, THROTTLING_QUOTA_EXCEEDED and a throttle", codes, resp.ThrottleMillis)
	}
	t.Logf("controller_mutation_rate 2/s: m3 refused, throttle %d ms", resp.ThrottleMillis)
	// Another client ID is not limited; after the throttle the budget is
	// back at 0 or more and admits m3.
	if r := createTopicAs(ctx, t, c.Addrs(), "free-maker", "f1", "f2", "f3"); r != nil {
		t.Fatalf("a client without a mutation quota: %v", r)
	}
	time.Sleep(time.Duration(resp.ThrottleMillis) * time.Millisecond) // the throttle the broker asked for (the test's subject)
	if resp := create("m3"); resp.Topics[0].ErrorCode != 0 {
		t.Fatalf("m3 after the throttle: %v", kerr.ErrorForCode(resp.Topics[0].ErrorCode))
	}

	// Removing the quota removes its record.
	res, err = adm.AlterClientQuotas(ctx, []kadm.AlterClientQuotaEntry{{
		Entity: kadm.ClientQuotaEntity{{Type: "client-id", Name: &app}},
		Ops:    []kadm.AlterClientQuotaOp{{Key: "producer_byte_rate", Remove: true}},
	}, {
		Entity: kadm.ClientQuotaEntity{{Type: "client-id", Name: &kcatApp}},
		Ops:    []kadm.AlterClientQuotaOp{{Key: "producer_byte_rate", Remove: true}},
	}, {
		Entity: kadm.ClientQuotaEntity{{Type: "client-id", Name: &consumerApp}},
		Ops:    []kadm.AlterClientQuotaOp{{Key: "consumer_byte_rate", Remove: true}},
	}, {
		Entity: kadm.ClientQuotaEntity{{Type: "client-id", Name: &maker}},
		Ops:    []kadm.AlterClientQuotaOp{{Key: "controller_mutation_rate", Remove: true}},
	}})
	if err != nil || res[0].Err != nil || res[1].Err != nil || res[2].Err != nil || res[3].Err != nil {
		t.Fatalf("remove: %v %v", err, res)
	}
	if all, err := adm.DescribeClientQuotas(ctx, false, nil); err != nil || len(all) != 0 {
		t.Fatalf("after removing every quota: %+v %v", all, err)
	}
}

// createTopicAs creates 1-partition topics as clientID; the first
// per-topic error, or nil.
func createTopicAs(ctx context.Context, t *testing.T, addrs []string, clientID string, topics ...string) error {
	t.Helper()
	cl, err := kgo.NewClient(kgo.SeedBrokers(addrs...), kgo.ClientID(clientID))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	res, err := kadm.NewClient(cl).CreateTopics(ctx, 4, 1, nil, topics...)
	if err != nil {
		return err
	}
	return res.Error()
}
