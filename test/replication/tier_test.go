package replication

import (
	"context"
	"encoding/hex"
	"testing"
	"time"

	"github.com/go-logr/logr"
	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/strata-dev/strata/broker/brokertest"
	"github.com/strata-dev/strata/broker/objstore"
	"github.com/strata-dev/strata/broker/tier"
	"github.com/strata-dev/strata/internal/testutil/s3server"
)

// tierBucketName is the slow-tier bucket of the tier tests.
const tierBucketName = "strata-tier"

// tierBucket starts an S3 server with the slow-tier bucket and returns it
// with the broker settings that tier to it: every 100 ms, and a replica
// out of the ISR after 3 s so that the failover tests elect quickly.
// The brokers (processes or in-process) take the bucket's credentials
// from STRATA_TIER_*, set here for the test.
func tierBucket(t *testing.T) (*s3server.Server, []brokertest.Option) {
	t.Helper()
	srv := s3server.Start(t, tierBucketName)
	t.Setenv("STRATA_TIER_ACCESS_KEY_ID", srv.AccessKey)
	t.Setenv("STRATA_TIER_SECRET_ACCESS_KEY", srv.SecretKey)
	return srv, []brokertest.Option{
		brokertest.WithSetting("replica.lag.time.max.ms", "3000"),
		brokertest.WithSetting("remote.log.storage.system.enable", "true"),
		brokertest.WithSetting("remote.log.manager.task.interval.ms", "100"),
		brokertest.WithSetting("tier.bucket.name", tierBucketName),
		brokertest.WithSetting("tier.bucket.region", srv.Region),
		brokertest.WithSetting("tier.bucket.endpoint", srv.Endpoint),
		brokertest.WithSetting("tier.bucket.force.path.style", "true"),
	}
}

// TestTierLeaderFailover produces with acks=all to a tiered topic
// (local.retention.ms=1: every replica keeps only what the slow tier does
// not hold yet) while the partition leader is SIGKILLed twice during
// uploads. Afterwards the newest manifest is consistent (segments
// contiguous from its start, no overlap, every object's size and CRC as
// recorded), the tier holds data that no replica keeps locally any more,
// and a consumer from offset 0 reads every acknowledged record at its
// offset.
func TestTierLeaderFailover(t *testing.T) {
	srv, tiered := tierBucket(t)
	c := brokertest.StartProcessCluster(t, zones, tiered...)
	cl := newClient(t, c.Addrs())
	adm := kadm.NewClient(cl)
	two, on, one, seg := "2", "true", "1", "8192"
	createTopic(t, adm, "tiered", 1, map[string]*string{"min.insync.replicas": &two, "remote.storage.enable": &on,
		"local.retention.ms": &one, "segment.bytes": &seg})

	st, err := objstore.NewS3(context.Background(), objstore.Config{Bucket: tierBucketName, Region: srv.Region, Endpoint: srv.Endpoint, ForcePathStyle: true,
		Credentials: &objstore.StaticCredentials{AccessKeyID: srv.AccessKey, SecretAccessKey: srv.SecretKey}})
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	details, err := adm.ListTopics(context.Background(), "tiered")
	if err != nil {
		t.Fatal(err)
	}
	id := details["tiered"].ID
	view := func() *tier.Partition {
		return tier.New(st, tier.Config{Cluster: "test"}, logr.Discard()).Partition("tiered", hex.EncodeToString(id[:]), 0)
	}
	tierEnd := func() int64 {
		m, err := view().Load(context.Background())
		if err != nil {
			return -1
		}
		return m.EndOffset
	}

	prod := newClient(t, c.Addrs(), kgo.RequiredAcks(kgo.AllISRAcks()), kgo.ProduceRequestTimeout(3*time.Second),
		kgo.RetryBackoffFn(func(int) time.Duration { return 20 * time.Millisecond }))
	producer := startAckProducer(prod, "tiered", "rec", true)
	for k := range 2 {
		producer.waitMore(t, "progress before the kill", 300)
		before := tierEnd()
		if deadline := time.Now().Add(60 * time.Second); !waitUntil(deadline, func() bool { return tierEnd() > before }) {
			// What a timeout needs to be understood (make test-stress saw
			// it once in the first round, with no broker logging a thing).
			objs, lerr := st.List(context.Background(), "")
			ends, eerr := adm.ListEndOffsets(context.Background(), "tiered")
			m, merr := view().Load(context.Background())
			t.Fatalf("kill %d: no upload within 60 s: tier end %d before, manifest now %+v (%v); %d records acknowledged (%s); end offsets %+v (%v); %d objects in the tier bucket (%v); leader %v",
				k+1, before, m, merr, producer.count(), producer.errors(), ends, eerr, len(objs), lerr, func() int32 { l, _ := leaderOf(adm, "tiered"); return l }())
		}
		old, _ := leaderOf(adm, "tiered")
		if old < 1 {
			t.Fatalf("kill %d: no leader", k)
		}
		c.Processes[old-1].Kill()
		waitFor(t, "a new leader", 60*time.Second, func() bool { l, _ := leaderOf(adm, "tiered"); return l >= 1 && l != old })
		c.Processes[old-1].Start()
		t.Logf("kill %d: leader %d killed at tier end %d, %d records acknowledged", k+1, old, tierEnd(), producer.count())
	}
	producer.waitMore(t, "progress after the last kill", 300)
	acked, fails := producer.finish()
	hwm := highWatermark(t, adm, "tiered")
	// The last closed segments reach the tier; the active one stays local.
	waitFor(t, "uploads to catch up", 60*time.Second, func() bool { return tierEnd() >= hwm-int64(len(acked))/4 })

	m, err := view().Load(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	if m.StartOffset != 0 || len(m.Segments) == 0 || m.Segments[0].BaseOffset != 0 {
		t.Fatalf("manifest starts at %d with %d segments, want 0", m.StartOffset, len(m.Segments))
	}
	epochs := map[int32]int{}
	for i, s := range m.Segments {
		if i > 0 && s.BaseOffset != m.Segments[i-1].LastOffset+1 {
			t.Fatalf("manifest segments %d [%d, %d] and %d [%d, %d]: a gap or an overlap", i-1, m.Segments[i-1].BaseOffset, m.Segments[i-1].LastOffset, i, s.BaseOffset, s.LastOffset)
		}
		if err := view().VerifySegment(context.Background(), s); err != nil {
			t.Fatal(err)
		}
		epochs[s.LeaderEpoch]++
	}
	if len(epochs) < 2 {
		t.Fatalf("segments uploaded at epochs %v: want uploads by more than one leader", epochs)
	}
	// Some records live only in the tier now.
	leader, _ := leaderOf(adm, "tiered")
	localStart := earliestLocal(t, c.Processes[leader-1].Addr(), "tiered")
	if localStart <= 0 {
		t.Fatalf("leader's local log starts at %d: nothing was deleted locally", localStart)
	}
	checkAcknowledged(t, c.Addrs(), "tiered", hwm, acked)

	// Deleting the topic deletes its tier data (every replica tries).
	if _, err := adm.DeleteTopic(context.Background(), "tiered"); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "the deleted topic's tier data gone", 60*time.Second, func() bool {
		objs, err := st.List(context.Background(), "tier/")
		return err == nil && len(objs) == 0
	})
	t.Logf("%d records acknowledged (%d produce errors), high watermark %d; tier [%d, %d) in %d segments by epochs %v; leader's local log starts at %d",
		len(acked), fails, hwm, m.StartOffset, m.EndOffset, len(m.Segments), epochs, localStart)
}

// earliestLocal is ListOffsets -4 (KIP-1005, v8) of partition 0, asked of
// one broker.
func earliestLocal(t *testing.T, addr, topic string) int64 {
	t.Helper()
	cl := newClient(t, []string{addr})
	req := kmsg.NewPtrListOffsetsRequest()
	req.Version = 8
	rt := kmsg.NewListOffsetsRequestTopic()
	rt.Topic = topic
	rp := kmsg.NewListOffsetsRequestTopicPartition()
	rp.Timestamp = -4
	rt.Partitions = append(rt.Partitions, rp)
	req.Topics = append(req.Topics, rt)
	resp, err := req.RequestWith(context.Background(), cl)
	if err != nil {
		t.Fatal(err)
	}
	sp := resp.Topics[0].Partitions[0]
	if sp.ErrorCode != 0 {
		t.Fatalf("ListOffsets -4: error %d", sp.ErrorCode)
	}
	return sp.Offset
}
