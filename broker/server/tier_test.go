package server

import (
	"bytes"
	"context"
	"fmt"
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/go-logr/logr"
	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/strata-dev/strata/broker/objstore"
	"github.com/strata-dev/strata/internal/testutil/s3server"
)

const tierBucket = "strata-tier"

// startTiered starts a standalone broker whose slow tier is the Versity
// bucket behind faulty, uploading every 50 ms.
func startTiered(t *testing.T, faulty *objstore.Faulty) *Server {
	t.Helper()
	cfg := DefaultConfig()
	cfg.Listen = "127.0.0.1:0"
	cfg.MetricsListen = "127.0.0.1:0"
	cfg.Broker.DataDir = t.TempDir()
	cfg.RetentionCheckInterval = time.Hour // the tier's rounds apply retention
	cfg.Tier = TierConfig{Enable: true, TaskInterval: 50 * time.Millisecond, Store: faulty}
	s, err := Start(context.Background(), cfg, logr.Discard())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = s.Shutdown(context.Background()) })
	return s
}

func tierStore(t *testing.T) *objstore.Faulty {
	t.Helper()
	srv := s3server.Start(t, tierBucket)
	st, err := objstore.NewS3(context.Background(), objstore.Config{
		Bucket: tierBucket, Region: srv.Region, Endpoint: srv.Endpoint, ForcePathStyle: true,
		Credentials: &objstore.StaticCredentials{AccessKeyID: srv.AccessKey, SecretAccessKey: srv.SecretKey},
		MaxAttempts: 1, AttemptTimeout: 2 * time.Second, CallTimeout: 3 * time.Second,
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(st.Close)
	return objstore.NewFaulty(st)
}

// listOffset asks ListOffsets v9 for one timestamp of partition 0.
func listOffset(t *testing.T, cl *kgo.Client, topic string, ts int64) (int64, int16) {
	t.Helper()
	req := kmsg.NewPtrListOffsetsRequest()
	req.Version = 9
	rt := kmsg.NewListOffsetsRequestTopic()
	rt.Topic = topic
	rp := kmsg.NewListOffsetsRequestTopicPartition()
	rp.Timestamp = ts
	rt.Partitions = append(rt.Partitions, rp)
	req.Topics = append(req.Topics, rt)
	resp, err := req.RequestWith(context.Background(), cl)
	if err != nil {
		t.Fatal(err)
	}
	sp := resp.Topics[0].Partitions[0]
	return sp.Offset, sp.ErrorCode
}

func produceN(t *testing.T, cl *kgo.Client, topic string, from, n int) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	var rs []*kgo.Record
	for i := from; i < from+n; i++ {
		rs = append(rs, &kgo.Record{Topic: topic, Value: []byte(fmt.Sprintf("v%05d-%s", i, strings.Repeat("x", 200)))})
	}
	for len(rs) > 0 {
		k := min(len(rs), 20) // several batches, so that segments roll
		if err := cl.ProduceSync(ctx, rs[:k]...).FirstErr(); err != nil {
			t.Fatal(err)
		}
		rs = rs[k:]
	}
}

// consumeAll reads topic from offset 0 with a fresh franz-go client and
// checks it gets records 0..n-1 in order.
func consumeAll(t *testing.T, addr, topic string, n int) {
	t.Helper()
	cl, err := kgo.NewClient(kgo.SeedBrokers(addr), kgo.ConsumeTopics(topic), kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	next := 0
	for next < n {
		fs := cl.PollFetches(ctx)
		if ctx.Err() != nil {
			t.Fatalf("franz-go consumed %d of %d records: %v", next, n, ctx.Err())
		}
		fs.EachError(func(_ string, _ int32, err error) { t.Logf("fetch error (retried): %v", err) })
		fs.EachRecord(func(r *kgo.Record) {
			if want := fmt.Sprintf("v%05d-", next); r.Offset != int64(next) || !bytes.HasPrefix(r.Value, []byte(want)) {
				t.Fatalf("record at offset %d is %.7q, want offset %d %s", r.Offset, r.Value, next, want)
			}
			next++
		})
	}
}

// waitTiered polls until the local log of partition 0 starts at or above
// atLeast (local retention deleted uploaded segments).
func waitTiered(t *testing.T, cl *kgo.Client, topic string, atLeast int64) int64 {
	t.Helper()
	deadline := time.Now().Add(90 * time.Second)
	for {
		local, code := listOffset(t, cl, topic, -4)
		if code == 0 && local >= atLeast {
			return local
		}
		if time.Now().After(deadline) {
			t.Fatalf("local log start of %s still %d (error %d), want >= %d", topic, local, code, atLeast)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// TestTieredConsumeFromZero: with local.retention.ms=1 the broker deletes
// every local segment once it is in the slow tier; franz-go and kcat still
// consume the topic from offset 0 and get every record, across the
// boundary; ListOffsets earliest is the tier's start (0), earliest-local
// the local start, a timestamp lookup finds records in the tier.
func TestTieredConsumeFromZero(t *testing.T) {
	store := tierStore(t)
	s := startTiered(t, store)
	cl, err := kgo.NewClient(kgo.SeedBrokers(s.Addr()))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	adm := kadm.NewClient(cl)
	ctx := context.Background()
	const topic = "tiered"
	one, segBytes := "1", "4096"
	remote := "true"
	if _, err := adm.CreateTopic(ctx, 1, 1, map[string]*string{"remote.storage.enable": &remote, "local.retention.ms": &one, "segment.bytes": &segBytes}, topic); err != nil {
		t.Fatal(err)
	}
	start := time.Now().UnixMilli()
	const n = 400
	produceN(t, cl, topic, 0, n)
	local := waitTiered(t, cl, topic, n/2)

	if earliest, code := listOffset(t, cl, topic, -2); code != 0 || earliest != 0 {
		t.Fatalf("ListOffsets earliest = %d (error %d), want 0 (the tier's start)", earliest, code)
	}
	if tiered, code := listOffset(t, cl, topic, -5); code != 0 || tiered < local-1 {
		t.Fatalf("ListOffsets latest-tiered = %d (error %d), want >= %d", tiered, code, local-1)
	}
	if off, code := listOffset(t, cl, topic, start); code != 0 || off != 0 {
		t.Fatalf("ListOffsets at the first record's timestamp = %d (error %d), want 0 (in the tier)", off, code)
	}
	consumeAll(t, s.Addr(), topic, n)
	_, metrics := get(t, "http://"+s.MetricsAddr()+"/metrics")
	for _, name := range []string{"strata_tier_uploaded_segments_total", "strata_tier_uploaded_bytes_total", "strata_tier_upload_lag_bytes",
		"strata_tier_remote_read_bytes_total", "strata_tier_disk_headroom_bytes"} {
		if !strings.Contains(metrics, name) {
			t.Errorf("/metrics lacks %s", name)
		}
	}
	if strings.Contains(metrics, "\nstrata_tier_remote_read_bytes_total 0\n") {
		t.Error("strata_tier_remote_read_bytes_total is 0 after reading the tier")
	}

	kcat, err := exec.LookPath("kcat")
	if err != nil {
		t.Skip("kcat not installed (hack/test-deps.sh)")
	}
	out, err := exec.Command(kcat, "-C", "-b", s.Addr(), "-t", topic, "-p", "0", "-o", "beginning", "-e", "-q", "-f", "%o %s\n").CombinedOutput()
	if err != nil {
		t.Fatalf("kcat: %v\n%s", err, out)
	}
	lines := strings.Split(strings.TrimSpace(string(out)), "\n")
	if len(lines) != n {
		t.Fatalf("kcat read %d records from 0, want %d; first lines %q", len(lines), n, lines[:min(3, len(lines))])
	}
	for i, l := range lines {
		if want := fmt.Sprintf("%d v%05d", i, i); !strings.HasPrefix(l, want) {
			t.Fatalf("kcat line %d is %q, want %q", i, l, want)
		}
	}
	deleteAndCheckTierEmpty(t, adm, store, topic)
}

// deleteAndCheckTierEmpty deletes topic and waits until the slow tier holds
// nothing of it (Kafka deletes remote data with the topic).
func deleteAndCheckTierEmpty(t *testing.T, adm *kadm.Client, store objstore.Store, topic string) {
	t.Helper()
	ctx := context.Background()
	if objs, err := store.List(ctx, "tier/"); err != nil || len(objs) == 0 {
		t.Fatalf("tier holds %d objects before the deletion (%v)", len(objs), err)
	}
	if _, err := adm.DeleteTopic(ctx, topic); err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(60 * time.Second)
	for {
		objs, err := store.List(ctx, "tier/")
		if err == nil && len(objs) == 0 {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("%d objects of the deleted topic still in the tier (%v)", len(objs), err)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// TestTieredBucketOutage: while the tier bucket fails, produce and
// consumption of recent data go on, a read below the local log start gets
// KAFKA_STORAGE_ERROR (retriable), local segments stay until uploaded; once
// the bucket is back, uploads catch up and a consumer from 0 gets all.
func TestTieredBucketOutage(t *testing.T) {
	faulty := tierStore(t)
	s := startTiered(t, faulty)
	cl, err := kgo.NewClient(kgo.SeedBrokers(s.Addr()), kgo.RecordRetries(3))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	ctx := context.Background()
	const topic = "outage"
	one, segBytes, remote := "1", "4096", "true"
	if _, err := kadm.NewClient(cl).CreateTopic(ctx, 1, 1, map[string]*string{"remote.storage.enable": &remote, "local.retention.ms": &one, "segment.bytes": &segBytes}, topic); err != nil {
		t.Fatal(err)
	}
	produceN(t, cl, topic, 0, 200)
	local := waitTiered(t, cl, topic, 100)

	faulty.SetFailAll(true)
	produceN(t, cl, topic, 200, 200) // produce is not affected
	// Recent data is read from the local log.
	p, err := s.broker.Partition(topic, 0)
	if err != nil {
		t.Fatal(err)
	}
	if r, err := p.Log.Read(local, 1<<20, p.Log.EndOffset()); err != nil || len(r.Records) == 0 {
		t.Fatalf("local read during the outage: %d bytes, %v", len(r.Records), err)
	}
	// The local log keeps what the tier could not take.
	deadline := time.Now().Add(10 * time.Second)
	for s.Tier().Stats().UploadErrors == 0 {
		if time.Now().After(deadline) {
			t.Fatal("no failed upload round during the outage")
		}
		time.Sleep(20 * time.Millisecond)
	}
	if got := p.Log.StartOffset(); got > p.Tiered().EndOffset() {
		t.Fatalf("local log start %d passed the tier's end %d: segments deleted before upload", got, p.Tiered().EndOffset())
	}
	// A remote read gets KAFKA_STORAGE_ERROR: an offset below the local
	// start that no one read yet (the read-ahead cache is cold for it).
	req := kmsg.NewPtrFetchRequest()
	req.Version = 12
	req.MaxWaitMillis, req.MaxBytes = 100, 1<<20
	rt := kmsg.NewFetchRequestTopic()
	rt.Topic = topic
	// The client picks the version (v13+ names topics by ID).
	details, err := kadm.NewClient(cl).ListTopics(ctx, topic)
	if err != nil {
		t.Fatal(err)
	}
	rt.TopicID = details[topic].ID
	rp := kmsg.NewFetchRequestTopicPartition()
	rp.FetchOffset, rp.PartitionMaxBytes = 0, 1<<20
	rt.Partitions = append(rt.Partitions, rp)
	req.Topics = append(req.Topics, rt)
	resp, err := req.RequestWith(ctx, cl)
	if err != nil {
		t.Fatal(err)
	}
	if code := resp.Topics[0].Partitions[0].ErrorCode; code != kerr.KafkaStorageError.Code {
		t.Fatalf("remote fetch during the outage: error %d, want KAFKA_STORAGE_ERROR (%d)", code, kerr.KafkaStorageError.Code)
	}
	if !kerr.IsRetriable(kerr.KafkaStorageError) {
		t.Fatal("KAFKA_STORAGE_ERROR is not retriable for clients")
	}

	faulty.SetFailAll(false)
	waitTiered(t, cl, topic, 300)
	consumeAll(t, s.Addr(), topic, 400)
}

// TestTieredTopicConfigValidation: Kafka's rules for remote.storage.enable
// and local retention, on a broker with and without the slow tier.
func TestTieredTopicConfigValidation(t *testing.T) {
	tiered := startTiered(t, tierStore(t))
	plain := startTest(t)
	ctx := context.Background()
	s := func(v string) *string { return &v }
	create := func(srv *Server, topic string, cfg map[string]*string) error {
		cl, err := kgo.NewClient(kgo.SeedBrokers(srv.Addr()))
		if err != nil {
			t.Fatal(err)
		}
		defer cl.Close()
		resp, err := kadm.NewClient(cl).CreateTopic(ctx, 1, 1, cfg, topic)
		if resp.Err != nil {
			return fmt.Errorf("%w: %s", resp.Err, resp.ErrMessage)
		}
		return err
	}
	for _, tt := range []struct {
		name string
		srv  *Server
		cfg  map[string]*string
		want string // "" accepted, else a substring of the error
	}{
		{"tier off in the broker", plain, map[string]*string{"remote.storage.enable": s("true")}, "remote.log.storage.system.enable"},
		{"compacted", tiered, map[string]*string{"remote.storage.enable": s("true"), "cleanup.policy": s("compact")}, "cleanup.policy=delete"},
		{"local above total", tiered, map[string]*string{"remote.storage.enable": s("true"), "retention.ms": s("1000"), "local.retention.ms": s("2000")}, "cannot be more than retention.ms"},
		{"local bytes unlimited with a total", tiered, map[string]*string{"remote.storage.enable": s("true"), "retention.bytes": s("1000"), "local.retention.bytes": s("-1")}, "cannot be more than retention.bytes"},
		{"not a boolean", tiered, map[string]*string{"remote.storage.enable": s("yes")}, "remote.storage.enable"},
		{"tiered", tiered, map[string]*string{"remote.storage.enable": s("true"), "local.retention.ms": s("1000")}, ""},
		{"untiered on a tier broker", tiered, map[string]*string{"cleanup.policy": s("compact")}, ""},
	} {
		t.Run(tt.name, func(t *testing.T) {
			err := create(tt.srv, strings.ReplaceAll(tt.name, " ", "-"), tt.cfg)
			switch {
			case tt.want == "" && err != nil:
				t.Fatalf("refused: %v", err)
			case tt.want != "" && (err == nil || !strings.Contains(err.Error(), tt.want)):
				t.Fatalf("CreateTopic = %v, want INVALID_CONFIG naming %q", err, tt.want)
			}
		})
	}
	// Turning the tier off again is refused (the tier's data would be stranded).
	cl, err := kgo.NewClient(kgo.SeedBrokers(tiered.Addr()))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	resps, err := kadm.NewClient(cl).AlterTopicConfigs(ctx, []kadm.AlterConfig{{Op: kadm.SetConfig, Name: "remote.storage.enable", Value: s("false")}}, "tiered")
	if err == nil && resps[0].Err != nil {
		err = fmt.Errorf("%w: %s", resps[0].Err, resps[0].ErrMessage)
	}
	if err == nil || !strings.Contains(err.Error(), "not supported") {
		t.Fatalf("disabling remote storage: %v, want INVALID_CONFIG", err)
	}
}
