package replication

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/go-logr/logr"
	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/strata-dev/strata/broker/brokertest"
	"github.com/strata-dev/strata/broker/log"
	"github.com/strata-dev/strata/broker/meta/metatest"
	"github.com/strata-dev/strata/broker/objstore"
	"github.com/strata-dev/strata/broker/server"
	"github.com/strata-dev/strata/broker/tier"
	"github.com/strata-dev/strata/broker/traffic"
	"github.com/strata-dev/strata/internal/testutil/s3server"
)

// hydrateCluster starts brokers with WAL replication (one bucket per zone)
// and the slow tier (bucket strata-tier), all on one Versity gateway.
type hydrateCluster struct {
	*brokertest.Cluster
	s3 *s3server.Server
}

func startHydrateCluster(t *testing.T) *hydrateCluster {
	t.Helper()
	s3s := s3server.Start(t, "wal-a", "wal-b", "wal-c", "strata-tier")
	hc := &hydrateCluster{s3: s3s, Cluster: &brokertest.Cluster{Etcd: metatest.Start(t).Endpoints()}}
	for i, z := range zones {
		hc.add(t, i+1, z, true)
	}
	return hc
}

// add starts broker id in zone; hydrate is its tier.hydration.enable.
func (hc *hydrateCluster) add(t *testing.T, id int, zone string, hydrate bool) *brokertest.Broker {
	t.Helper()
	s3s := hc.s3
	creds := &objstore.StaticCredentials{AccessKeyID: s3s.AccessKey, SecretAccessKey: s3s.SecretKey}
	b := brokertest.Start(t, brokertest.ClusterOptions(hc.Etcd, id, zone,
		brokertest.WithSetting("replica.lag.time.max.ms", "10000"),
		brokertest.WithSetting("wal.enable", "true"),
		brokertest.WithSetting("wal.bucket.name", "wal-"+zone),
		brokertest.WithSetting("wal.bucket.region", s3s.Region),
		brokertest.WithSetting("wal.bucket.endpoint", s3s.Endpoint),
		brokertest.WithSetting("wal.bucket.force.path.style", "true"),
		brokertest.WithSetting("remote.log.storage.system.enable", "true"),
		brokertest.WithSetting("remote.log.manager.task.interval.ms", "100"),
		brokertest.WithSetting("tier.bucket.name", "strata-tier"),
		brokertest.WithSetting("tier.bucket.region", s3s.Region),
		brokertest.WithSetting("tier.bucket.endpoint", s3s.Endpoint),
		brokertest.WithSetting("tier.bucket.force.path.style", "true"),
		brokertest.WithSetting("tier.hydration.enable", strconv.FormatBool(hydrate)),
		brokertest.WithConfig(func(c *server.Config) {
			c.Cluster.WAL.Bucket.Credentials = creds
			c.Tier.Bucket.Credentials = creds
		}),
	)...)
	hc.Brokers = append(hc.Brokers, b)
	return b
}

// replicationCrossZone is the bytes a broker's replica fetches exchanged
// with other zones (requests and responses, inline and WAL metadata).
func replicationCrossZone(b *brokertest.Broker) float64 {
	tr := b.Server().Traffic()
	total := 0.0
	for _, p := range []traffic.Path{traffic.ReplicationInline, traffic.ReplicationWALMetadata} {
		total += tr.CrossZone(p, traffic.In) + tr.CrossZone(p, traffic.Out)
	}
	return total
}

// TestHydrateMoveCrossZone is #16's must-show: a zone grows from one
// broker to two and the replicas of partitions holding STRATA_HYDRATE_MB
// (default 50) MB move onto the new broker; the cross-zone bytes of the
// move, from the new broker's traffic counters, divided by the bytes it
// ends up holding are ≤ 5 % with hydration (the history comes from the
// tier bucket, only the tail from the leader in another zone) and ≥ 90 %
// without (tier.hydration.enable=false on a second new broker, which the
// same replicas move to next, in the same run). `make bench-hydrate` runs
// the 1 GB form.
func TestHydrateMoveCrossZone(t *testing.T) {
	mb := 50
	if v, err := strconv.Atoi(os.Getenv("STRATA_HYDRATE_MB")); err == nil && v > 0 {
		mb = v
	}
	const partitions = 4
	total := int64(mb) << 20
	// Small segments, so that all but each partition's active segment
	// (and what the last upload round has not taken yet) is in the tier:
	// about 50 segments per partition.
	segment := min(max(total/partitions/50, 128<<10), 8<<20)

	hc := startHydrateCluster(t)
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Minute)
	defer cancel()
	cl := newClient(t, hc.Addrs())
	adm := kadm.NewClient(cl)
	// Leaders in zones b and c; broker 1 (zone a) holds the replicas that
	// move: every byte the new zone-a broker fetches from its leader
	// crosses a zone.
	assign := make([][]int32, partitions)
	for i := range assign {
		assign[i] = []int32{int32(2 + i%2), int32(3 - i%2), 1}
	}
	createAssigned(ctx, t, cl, "move", assign)
	on, seg := "true", strconv.FormatInt(segment, 10)
	waitFor(t, "the topic configs accepted", 30*time.Second, func() bool {
		res, err := adm.AlterTopicConfigs(ctx, []kadm.AlterConfig{
			{Op: kadm.SetConfig, Name: "remote.storage.enable", Value: &on},
			{Op: kadm.SetConfig, Name: "segment.bytes", Value: &seg},
		}, "move")
		return err == nil && alterErr(res) == nil
	})
	waitFor(t, "the topic configs on every broker", 30*time.Second, func() bool {
		for _, b := range hc.Brokers {
			p, err := b.Server().Broker().Partition("move", 0)
			if err != nil || p.Tiered() == nil || p.Log.Config().SegmentBytes != segment {
				return false
			}
		}
		return true
	})

	prod := newClient(t, hc.Addrs(), kgo.RequiredAcks(kgo.AllISRAcks()), kgo.ProducerBatchMaxBytes(int32(min(segment/2, 900<<10))),
		kgo.RecordPartitioner(kgo.RoundRobinPartitioner()), kgo.ProducerBatchCompression(kgo.NoCompression()))
	value := make([]byte, 16<<10)
	for range total / int64(len(value)) {
		_, _ = rand.Read(value)
		prod.Produce(ctx, &kgo.Record{Topic: "move", Value: slices.Clone(value)}, func(_ *kgo.Record, err error) {
			if err != nil {
				t.Error(err)
			}
		})
	}
	if err := prod.Flush(ctx); err != nil {
		t.Fatal(err)
	}
	// The leaders in zones b and c (a loaded machine may have moved some
	// during the fill): else the new zone-a replica would fetch from a
	// zone-a leader, in its zone.
	preferredLeaders := func() {
		t.Helper()
		set := kadm.TopicsSet{}
		for i := range int32(partitions) {
			set.Add("move", i)
		}
		var asked time.Time
		waitFor(t, "the preferred leaders (zones b and c)", 5*time.Minute, func() bool {
			for i := range int32(partitions) {
				if state(t, hc.Cluster, "move", i).Leader != assign[i][0] {
					if time.Since(asked) > time.Second {
						_, _ = adm.ElectLeaders(ctx, kadm.ElectPreferredReplica, set)
						asked = time.Now()
					}
					return false
				}
			}
			return true
		})
	}
	// Every sealed segment of the leaders in the tier (the leader's own
	// segment boundaries: a follower's differ).
	preferredLeaders()
	waitFor(t, "the sealed segments uploaded", 20*time.Minute, func() bool {
		for i := range int32(partitions) {
			p, err := brokerByID(hc.Cluster, state(t, hc.Cluster, "move", i).Leader).Server().Broker().Partition("move", i)
			if err != nil || p.Tiered() == nil {
				return false
			}
			segs := p.Log.Segments()
			if p.Tiered().EndOffset() < segs[len(segs)-1].Base {
				return false
			}
		}
		return true
	})

	move := func(from, to int32) (crossZone, moved float64) {
		t.Helper()
		preferredLeaders()
		target := brokerByID(hc.Cluster, to)
		before := replicationCrossZone(target)
		var req kadm.AlterPartitionAssignmentsReq
		for i := range int32(partitions) {
			replicas := slices.Clone(assign[i])
			replicas[slices.Index(replicas, from)] = to
			assign[i] = replicas
			req.Assign("move", i, replicas)
		}
		waitFor(t, "the controller to accept the moves", 30*time.Second, func() bool {
			res, err := adm.AlterPartitionAssignments(ctx, req)
			return err == nil && res.Error() == nil
		})
		waitFor(t, "the replicas to move", 30*time.Minute, func() bool {
			for i := range int32(partitions) {
				s := state(t, hc.Cluster, "move", i)
				if s.Reassigning() || slices.Contains(s.Replicas, from) || !slices.Contains(s.ISR, to) {
					return false
				}
			}
			return true
		})
		for i := range int32(partitions) {
			if l := state(t, hc.Cluster, "move", i).Leader; l != assign[i][0] {
				t.Logf("move-%d: the leader moved to broker %d during the move (a loaded machine); the figure may undercount", i, l)
			}
			p, err := target.Server().Broker().Partition("move", i)
			if err != nil {
				t.Fatal(err)
			}
			moved += float64(p.Log.Size())
		}
		return replicationCrossZone(target) - before, moved
	}

	hc.add(t, 4, "a", true)
	hc.add(t, 5, "a", false)
	onCross, onMoved := move(1, 4)
	offCross, offMoved := move(4, 5)
	onRatio, offRatio := onCross/onMoved, offCross/offMoved
	hydrated := 0.0
	if ts := brokerByID(hc.Cluster, 4).Server().Tier(); ts != nil {
		hydrated = float64(ts.Stats().HydratedBytes)
	}
	t.Logf("moved %d partitions (%.1f MB, segment.bytes %d) onto a new zone-a broker: with hydration %.0f cross-zone bytes of %.0f moved = %.2f %% (%.0f bytes from the tier); without %.0f of %.0f = %.2f %%",
		partitions, onMoved/(1<<20), segment, onCross, onMoved, 100*onRatio, hydrated, offCross, offMoved, 100*offRatio)
	if onRatio > 0.05 {
		t.Errorf("with hydration the move crossed zones with %.2f %% of the moved bytes, want ≤ 5 %%", 100*onRatio)
	}
	if offRatio < 0.90 {
		t.Errorf("without hydration the move crossed zones with %.2f %% of the moved bytes, want ≥ 90 %%", 100*offRatio)
	}
	if hydrated < 0.9*onMoved {
		t.Errorf("broker 4 hydrated %.0f bytes from the tier of the %.0f it holds", hydrated, onMoved)
	}
}

// partitionBytes reads a hosted partition's local log from its start up
// to upTo.
func partitionBytes(t *testing.T, b *brokertest.Broker, topic string, upTo int64) (start int64, out []byte) {
	t.Helper()
	p, err := b.Server().Broker().Partition(topic, 0)
	if err != nil {
		t.Fatal(err)
	}
	start = p.Log.StartOffset()
	for off := start; off < upTo; {
		rr, err := p.Log.Read(off, 1<<20, upTo)
		if err != nil {
			t.Fatalf("%s-0 on %s: read at %d: %v", topic, b.Addr(), off, err)
		}
		if len(rr.Records) == 0 {
			t.Fatalf("%s-0 on %s: log ends at %d, below %d", topic, b.Addr(), off, upTo)
		}
		out = append(out, rr.Records...)
		off = rr.HighestOffset + 1
	}
	return start, out
}

// TestHydrateCorruptSegmentAndUntiered moves replicas onto a new broker:
// first of a topic that is not tiered (it replicates from the leader as
// before: nothing hydrated), then of a tiered topic one of whose segment
// objects in the bucket was corrupted. The corrupt download is refused
// (hydration errors counted), never installed: the new replica's log is
// byte for byte the leader's, the segments before the corrupt one came
// from the tier and the rest from the leader.
func TestHydrateCorruptSegmentAndUntiered(t *testing.T) {
	hc := startHydrateCluster(t)
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	cl := newClient(t, hc.Addrs())
	adm := kadm.NewClient(cl)
	createAssigned(ctx, t, cl, "plain", [][]int32{{2, 3, 1}})
	createAssigned(ctx, t, cl, "tiered", [][]int32{{2, 3, 1}})
	on, seg := "true", "16384"
	waitFor(t, "the topic configs accepted", 30*time.Second, func() bool {
		res, err := adm.AlterTopicConfigs(ctx, []kadm.AlterConfig{
			{Op: kadm.SetConfig, Name: "remote.storage.enable", Value: &on},
			{Op: kadm.SetConfig, Name: "segment.bytes", Value: &seg},
		}, "tiered")
		if err == nil {
			res2, err2 := adm.AlterTopicConfigs(ctx, []kadm.AlterConfig{{Op: kadm.SetConfig, Name: "segment.bytes", Value: &seg}}, "plain")
			err = errors.Join(err2, alterErr(res2))
		}
		return err == nil && alterErr(res) == nil
	})
	leader := brokerByID(hc.Cluster, 2)
	waitFor(t, "the topic configs on the leader", 30*time.Second, func() bool {
		p, err := leader.Server().Broker().Partition("tiered", 0)
		q, err2 := leader.Server().Broker().Partition("plain", 0)
		return err == nil && err2 == nil && p.Tiered() != nil && p.Log.Config().SegmentBytes == 16384 && q.Log.Config().SegmentBytes == 16384
	})
	prod := newClient(t, hc.Addrs(), kgo.RequiredAcks(kgo.AllISRAcks()), kgo.ProducerBatchMaxBytes(4096), kgo.ProducerLinger(0), kgo.ProducerBatchCompression(kgo.NoCompression()))
	for i := range 600 {
		for _, topic := range []string{"plain", "tiered"} {
			if err := prod.ProduceSync(ctx, &kgo.Record{Topic: topic, Value: []byte(strings.Repeat(strconv.Itoa(i), 100))}).FirstErr(); err != nil {
				t.Fatal(err)
			}
		}
	}
	lp, err := leader.Server().Broker().Partition("tiered", 0)
	if err != nil {
		t.Fatal(err)
	}
	waitFor(t, "the sealed segments uploaded", time.Minute, func() bool {
		segs := lp.Log.Segments()
		return lp.Tiered().EndOffset() >= segs[len(segs)-1].Base
	})
	m, ok := lp.Tiered().Manifest()
	if !ok || len(m.Segments) < 4 {
		t.Fatalf("manifest with %d segments (end %d), want at least 4; local segments %+v", len(m.Segments), m.EndOffset, lp.Log.Segments())
	}
	// Flip a byte in the middle of the third segment's data object.
	st, err := objstore.NewS3(ctx, objstore.Config{Bucket: "strata-tier", Region: hc.s3.Region, Endpoint: hc.s3.Endpoint, ForcePathStyle: true,
		Credentials: &objstore.StaticCredentials{AccessKeyID: hc.s3.AccessKey, SecretAccessKey: hc.s3.SecretKey}})
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	bad := m.Segments[2]
	key := lp.Tiered().Prefix() + bad.Key
	data, err := st.Get(ctx, key, 0, -1)
	if err != nil {
		t.Fatal(err)
	}
	data[len(data)/2] ^= 0xff
	if err := st.Put(ctx, key, data); err != nil {
		t.Fatal(err)
	}

	b4 := hc.add(t, 4, "a", true)
	moveTo4 := func(topic string) {
		t.Helper()
		var req kadm.AlterPartitionAssignmentsReq
		req.Assign(topic, 0, []int32{2, 3, 4})
		waitFor(t, "the controller to accept the move", 30*time.Second, func() bool {
			res, err := adm.AlterPartitionAssignments(ctx, req)
			return err == nil && res.Error() == nil
		})
		waitFor(t, "the replica to move", 2*time.Minute, func() bool {
			s := state(t, hc.Cluster, topic, 0)
			return !s.Reassigning() && !slices.Contains(s.Replicas, 1) && slices.Contains(s.ISR, 4)
		})
	}
	tierStats := func() (segments, errs int64) {
		s := b4.Server().Tier().Stats()
		return s.HydratedSegments, s.HydrationErrors
	}

	moveTo4("plain")
	if segs, errs := tierStats(); segs != 0 || errs != 0 {
		t.Fatalf("moving an untiered topic hydrated %d segments (%d errors), want none", segs, errs)
	}
	hwm := lp.Log.EndOffset()
	for _, topic := range []string{"plain", "tiered"} {
		if topic == "tiered" {
			moveTo4(topic)
		}
		waitFor(t, "broker 4 to reach the leader's end of "+topic, time.Minute, func() bool { return localLEO(t, b4, topic, 0) >= hwm })
		s2, want := partitionBytes(t, leader, topic, hwm)
		s4, got := partitionBytes(t, b4, topic, hwm)
		if s2 != s4 || !bytes.Equal(got, want) {
			t.Fatalf("%s: broker 4's log [%d, %d) differs from the leader's [%d, %d) (%d vs %d bytes)", topic, s4, hwm, s2, hwm, len(got), len(want))
		}
	}
	segs, errs := tierStats()
	if errs < 1 || segs != 2 {
		t.Fatalf("broker 4 hydrated %d segments with %d errors; want the 2 before the corrupt one and at least one error", segs, errs)
	}
	t.Logf("untiered: nothing hydrated; tiered: %d segments hydrated, %d corrupt downloads refused (segment [%d, %d]), the rest from the leader; logs identical up to %d", segs, errs, bad.BaseOffset, bad.LastOffset, hwm)
}

// TestHydratedReplicaTakesOver adds a replica on a new broker process to
// a tiered partition (local.retention.bytes 64 KiB) that an idempotent
// producer writes to: the new replica hydrates the segments local
// retention keeps from the tier (not the older ones), joins the ISR, and
// holds the leader's batches byte for byte. Then the leader is SIGKILLed:
// the hydrated replica leads, the same producer goes on without a
// duplicate or a gap (its producer state came with the hydrated batches),
// and a consumer from offset 0 (the tier, then the new leader's log) gets
// every record once.
func TestHydratedReplicaTakesOver(t *testing.T) {
	const bucket = tierBucketName
	srv, opts := tierBucket(t)
	c := brokertest.StartProcessCluster(t, zones, opts...)
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	cl := newClient(t, c.Addrs())
	adm := kadm.NewClient(cl)
	createAssigned(ctx, t, cl, "hyd", [][]int32{{2, 3}})
	on, seg, local := "true", "16384", "65536"
	waitFor(t, "the topic configs accepted", 30*time.Second, func() bool {
		res, err := adm.AlterTopicConfigs(ctx, []kadm.AlterConfig{
			{Op: kadm.SetConfig, Name: "remote.storage.enable", Value: &on},
			{Op: kadm.SetConfig, Name: "segment.bytes", Value: &seg},
			{Op: kadm.SetConfig, Name: "local.retention.bytes", Value: &local},
		}, "hyd")
		return err == nil && alterErr(res) == nil
	})
	waitTopicConfigs(t, cl, "hyd", []int32{2, 3}, map[string]string{"remote.storage.enable": on, "segment.bytes": seg, "local.retention.bytes": local})
	view := func() *tier.Partition {
		details, err := adm.ListTopics(ctx, "hyd")
		if err != nil {
			t.Fatal(err)
		}
		id := details["hyd"].ID
		st, err := objstore.NewS3(ctx, objstore.Config{Bucket: bucket, Region: srv.Region, Endpoint: srv.Endpoint, ForcePathStyle: true,
			Credentials: &objstore.StaticCredentials{AccessKeyID: srv.AccessKey, SecretAccessKey: srv.SecretKey}})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(st.Close)
		return tier.New(st, tier.Config{Cluster: "test"}, logr.Discard()).Partition("hyd", hex.EncodeToString(id[:]), 0)
	}()

	prod := newClient(t, c.Addrs(), kgo.RequiredAcks(kgo.AllISRAcks()), kgo.ProducerBatchMaxBytes(4096),
		kgo.ProducerBatchCompression(kgo.NoCompression()), kgo.DefaultProduceTopic("hyd"))
	produce := func(from, to int) {
		t.Helper()
		for i := from; i < to; i++ {
			prod.Produce(ctx, &kgo.Record{Value: []byte(fmt.Sprintf("v-%05d-%s", i, strings.Repeat("x", 200)))}, func(_ *kgo.Record, err error) {
				if err != nil {
					t.Errorf("produce: %v", err)
				}
			})
		}
		if err := prod.Flush(ctx); err != nil {
			t.Fatal(err)
		}
	}
	produce(0, 1500)
	hwm := highWatermark(t, adm, "hyd")
	waitFor(t, "the tier to hold all but the last segments", time.Minute, func() bool {
		m, err := view.Load(ctx)
		return err == nil && m.EndOffset >= hwm-150
	})

	p4 := brokertest.StartProcess(t, brokertest.ClusterOptions(c.Etcd, 4, "a", opts...)...)
	c.Processes = append(c.Processes, p4)
	var req kadm.AlterPartitionAssignmentsReq
	req.Assign("hyd", 0, []int32{2, 4})
	waitFor(t, "the controller to accept the move", 30*time.Second, func() bool {
		res, err := adm.AlterPartitionAssignments(ctx, req)
		return err == nil && res.Error() == nil
	})
	waitFor(t, "broker 4 in the ISR, broker 3 gone", 2*time.Minute, func() bool {
		details, err := adm.ListTopics(ctx, "hyd")
		if err != nil {
			return false
		}
		p := details["hyd"].Partitions[0]
		return slices.Equal(p.Replicas, []int32{2, 4}) && slices.Contains(p.ISR, 4)
	})
	if !strings.Contains(p4.Logs(), "hydrated from the slow tier") {
		t.Fatalf("broker 4 did not hydrate:\n%s", p4.Logs())
	}
	// Broker 4's log as hydrated (stopped to read it, then back in the
	// ISR), compared with the old leader's once that one is killed.
	p4.Stop()
	s4, b4 := readLogRange(t, filepath.Join(p4.Dir(), "hyd-0"), hwm)
	p4.Start()
	waitFor(t, "broker 4 back in the ISR", 2*time.Minute, func() bool {
		_, isr := leaderOf(adm, "hyd")
		return slices.Contains(isr, 4)
	})

	c.Processes[1].Kill()
	waitFor(t, "broker 4 to lead", time.Minute, func() bool { l, _ := leaderOf(adm, "hyd"); return l == 4 })
	produce(1500, 2000)

	cons := newClient(t, []string{p4.Addr()}, kgo.ConsumePartitions(map[string]map[int32]kgo.Offset{"hyd": {0: kgo.NewOffset().AtStart()}}))
	seen := map[string]int64{}
	next := int64(0)
	for next < 2000 {
		fctx, fcancel := context.WithTimeout(ctx, 30*time.Second)
		fs := cons.PollFetches(fctx)
		fcancel()
		if err := fs.Err(); err != nil {
			t.Fatalf("consume at %d: %v", next, err)
		}
		fs.EachRecord(func(r *kgo.Record) {
			if r.Offset != next {
				t.Fatalf("record at offset %d, want %d (a gap)", r.Offset, next)
			}
			v := string(r.Value[:7])
			if prev, dup := seen[v]; dup {
				t.Fatalf("%s at offsets %d and %d: a duplicate", v, prev, r.Offset)
			}
			seen[v] = r.Offset
			next++
		})
	}
	for i := range 2000 {
		if _, ok := seen[fmt.Sprintf("v-%05d", i)]; !ok {
			t.Fatalf("v-%05d missing", i)
		}
	}

	// Broker 4's hydrated log against the old leader's, over the range
	// both hold.
	s2, b2 := readLogRange(t, filepath.Join(c.Processes[1].Dir(), "hyd-0"), hwm)
	if s4 == 0 {
		t.Fatalf("broker 4's log starts at 0: it copied history local.retention.bytes does not keep")
	}
	from := max(s2, s4)
	w2, w4 := batchesByOffset(t, b2), batchesByOffset(t, b4)
	n := 0
	for off, b := range w4 {
		if off < from {
			continue
		}
		if !bytes.Equal(w2[off], b) {
			t.Fatalf("batch %d of broker 4 differs from the old leader's", off)
		}
		n++
	}
	if n == 0 {
		t.Fatalf("broker 4's log [%d, %d) and the old leader's [%d, %d) have no batch in common to compare", s4, hwm, s2, hwm)
	}
	t.Logf("broker 4 hydrated from %d (the old leader kept %d locally); %d batches identical up to %d; 2000 records consumed once each after the failover", s4, s2, n, hwm)
}

// readLogRange reads a stopped replica's log in dir from its start up to
// upTo and returns the start too.
func readLogRange(t *testing.T, dir string, upTo int64) (int64, []byte) {
	t.Helper()
	l, err := log.Open(dir, log.DefaultConfig())
	if err != nil {
		t.Fatal(err)
	}
	start := l.StartOffset()
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}
	return start, readLog(t, dir, upTo)
}
