package replication

import (
	"bytes"
	"flag"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/strata-dev/strata/broker/brokertest"
	"github.com/strata-dev/strata/broker/meta/metatest"
	"github.com/strata-dev/strata/broker/wal"
	"github.com/strata-dev/strata/internal/testutil/s3server"
)

var walKills = flag.Int("walfailover.kills", 2, "leader SIGKILLs in TestWALFailover")

// walProcessCluster is a 3-zone cluster of broker subprocesses replicating
// through one bucket per zone (wal-a, wal-b, wal-c) on a real Versity
// Gateway, reached through an S3Proxy that the test controls (PUT latency,
// PUTs held across a SIGKILL or SIGSTOP, request counts).
type walProcessCluster struct {
	*brokertest.Cluster
	proxy *brokertest.S3Proxy
}

func startWALProcessCluster(t *testing.T) *walProcessCluster {
	t.Helper()
	s3s := s3server.Start(t, "wal-a", "wal-b", "wal-c")
	proxy := brokertest.StartS3Proxy(t, s3s.Endpoint)
	// The subprocesses read the bucket credentials from STRATA_WAL_*
	// (the broker's default for wal.bucket.*), inherited from the test.
	t.Setenv("STRATA_WAL_ACCESS_KEY_ID", s3s.AccessKey)
	t.Setenv("STRATA_WAL_SECRET_ACCESS_KEY", s3s.SecretKey)
	c := &brokertest.Cluster{Etcd: metatest.Start(t).Endpoints()}
	for i, z := range zones {
		c.Processes = append(c.Processes, brokertest.StartProcess(t, brokertest.ClusterOptions(c.Etcd, i+1, z,
			brokertest.WithSetting("replica.lag.time.max.ms", "3000"),
			brokertest.WithSetting("unclean.leader.election.enable", "false"),
			brokertest.WithSetting("wal.enable", "true"),
			brokertest.WithSetting("wal.bucket.name", walBucket(int32(i+1))),
			brokertest.WithSetting("wal.bucket.region", s3s.Region),
			brokertest.WithSetting("wal.bucket.endpoint", proxy.Endpoint()),
			brokertest.WithSetting("wal.bucket.force.path.style", "true"),
		)...))
	}
	return &walProcessCluster{Cluster: c, proxy: proxy}
}

// walBucket is the zone bucket broker id uploads to.
func walBucket(id int32) string { return "wal-" + zones[id-1] }

// objectTraffic sums the proxy's counters over the zone buckets.
func (wc *walProcessCluster) objectTraffic() brokertest.S3BucketStats {
	var sum brokertest.S3BucketStats
	for i := range zones {
		s := wc.proxy.Stats(walBucket(int32(i + 1)))
		sum.Puts += s.Puts
		sum.PutBytes += s.PutBytes
		sum.Gets += s.Gets
		sum.GetBytes += s.GetBytes
	}
	return sum
}

// fallbacks counts, over the brokers' output, the WAL ranges followers
// fetched inline instead: failed downloads and refused pointers.
func (wc *walProcessCluster) fallbacks() (failed, refused int) {
	for _, p := range wc.Processes {
		l := p.Logs()
		failed += strings.Count(l, "WAL range not usable")
		refused += strings.Count(l, "WAL pointer refused")
	}
	return failed, refused
}

// checkLateNeverRead fails the test if a follower downloaded any object
// recorded as late (uploaded by a leader while it was being killed or
// deposed): nothing may point at them.
func (wc *walProcessCluster) checkLateNeverRead(t *testing.T) {
	t.Helper()
	for _, put := range wc.proxy.Recorded() {
		if n := wc.proxy.GetsOf(put.Bucket, put.Key); n > 0 {
			t.Fatalf("late object %s/%s of a killed or deposed leader was downloaded %d times", put.Bucket, put.Key, n)
		}
	}
}

func (wc *walProcessCluster) createTopic(t *testing.T, adm *kadm.Client, topic string) {
	t.Helper()
	two := "2"
	createTopic(t, adm, topic, 1, map[string]*string{"min.insync.replicas": &two})
	waitFor(t, "a full ISR", 30*time.Second, func() bool {
		l, isr := leaderOf(adm, topic)
		return l >= 1 && len(isr) == 3
	})
}

// TestWALFailover: WAL replication (followers download the leader's
// uploads from its zone bucket) while the partition leader is killed with
// SIGKILL several times, each time with an upload of the leader in flight
// (its PUT held by the proxy at the moment of the kill, then let through:
// a dead leader's late object lands in the bucket). Producing with
// acks=all (idempotence off) goes on throughout. Afterwards every
// acknowledged record is read back at the offset its acknowledgement
// gave, no offset below the high watermark is empty, the replicas' logs
// are byte-identical up to the high watermark, and the bucket traffic
// shows that replication went through objects (PUTs by leaders and GETs
// by followers), not only inline.
func TestWALFailover(t *testing.T) {
	wc := startWALProcessCluster(t)
	c := wc.Cluster
	wc.proxy.SetPutLatency(20 * time.Millisecond) // S3-like: uploads are in flight most of the time
	adm := kadm.NewClient(newClient(t, c.Addrs()))
	const topic = "walfail"
	wc.createTopic(t, adm, topic)

	prod := newClient(t, c.Addrs(), kgo.RequiredAcks(kgo.AllISRAcks()), kgo.DisableIdempotentWrite(),
		kgo.ProduceRequestTimeout(3*time.Second), kgo.RecordDeliveryTimeout(8*time.Second), kgo.MaxBufferedRecords(200),
		kgo.RetryBackoffFn(func(int) time.Duration { return 20 * time.Millisecond }))
	producer := startAckProducer(prod, topic, "wal", false)
	t.Cleanup(func() { producer.finish() })

	var heldAtKill, lateLanded int
	for k := range *walKills {
		producer.waitMore(t, "progress before the next kill", 300)
		old, _ := leaderOf(adm, topic)
		if old < 1 {
			t.Fatalf("kill %d: no leader", k+1)
		}
		bucket := walBucket(old)
		// Hold the leader's next uploads, kill it while one is in
		// flight, then let them through to the gateway.
		wc.proxy.Hold(bucket) // held PUTs are recorded: the late objects
		waitFor(t, fmt.Sprintf("an upload of leader %d in flight", old), 30*time.Second, func() bool { return wc.proxy.Held(bucket) > 0 })
		c.Processes[old-1].Kill()
		held := wc.proxy.Held(bucket)
		wc.proxy.Release(bucket)
		heldAtKill += held
		waitFor(t, "the killed leader's held uploads forwarded", 30*time.Second, func() bool { return wc.proxy.Stats(bucket).InFlightPuts == 0 })

		waitFor(t, "a new leader", 60*time.Second, func() bool { l, _ := leaderOf(adm, topic); return l >= 1 && l != old })
		c.Processes[old-1].Start()
		waitFor(t, "the killed broker back in the ISR", 60*time.Second, func() bool {
			_, isr := leaderOf(adm, topic)
			return slices.Contains(isr, old) && len(isr) == 3
		})
		t.Logf("kill %d: leader %d killed with %d uploads in flight, %d records acknowledged so far", k+1, old, held, producer.count())
	}
	for _, put := range wc.proxy.Recorded() {
		if put.Status/100 == 2 {
			lateLanded++
		}
	}
	last, _ := leaderOf(adm, topic)
	getsBefore := wc.proxy.Stats(walBucket(last)).Gets
	producer.waitMore(t, "progress after the last kill", 300)
	acked, _ := producer.finish()
	if l, _ := leaderOf(adm, topic); l == last && wc.proxy.Stats(walBucket(last)).Gets == getsBefore {
		t.Fatalf("no follower downloaded from leader %d's bucket after the last failover: the WAL path did not resume", last)
	}
	wc.checkLateNeverRead(t)

	hwm := highWatermark(t, adm, topic)
	checkAcknowledged(t, c.Addrs(), topic, hwm, acked)
	objs := wc.objectTraffic()
	t.Logf("%d leader kills (%d uploads in flight at the kills, %d objects of killed leaders landed in their buckets): %d records acknowledged (%s), high watermark %d, every acknowledged record read back at its offset",
		*walKills, heldAtKill, lateLanded, len(acked), producer.errors(), hwm)
	t.Logf("bucket traffic: %d objects uploaded (%d B), %d ranged GETs by followers (%d B)", objs.Puts, objs.PutBytes, objs.Gets, objs.GetBytes)
	failed, refused := wc.fallbacks()
	t.Logf("followers fetched inline instead: %d failed WAL ranges, %d refused pointers", failed, refused)
	if objs.Puts == 0 || objs.Gets == 0 {
		t.Fatalf("%d objects uploaded, %d downloads: the WAL path was not used", objs.Puts, objs.Gets)
	}
	if lateLanded < *walKills {
		t.Fatalf("%d late objects of killed leaders landed, want at least one per kill (%d)", lateLanded, *walKills)
	}
	stopAndCompareLogs(t, c, topic+"-0", hwm)
}

// TestWALDeposedLeaderFenced: the leader is frozen (SIGSTOP) while its
// uploads are held in flight and producers wait for its acknowledgement,
// a new leader is elected (new leader epoch) and takes more writes, then
// the held uploads reach the gateway and the old leader continues
// (SIGCONT) and uploads what it still had buffered. Those late objects
// land in its zone bucket, yet no replica appends their batches of the
// deposed epoch past the new leader's start: the replicas' logs are
// byte-identical up to the high watermark, every acknowledged record is at
// its offset, and the old leader truncated its unacknowledged tail to the
// new leader's divergence point and then replicated from the new leader.
func TestWALDeposedLeaderFenced(t *testing.T) {
	wc := startWALProcessCluster(t)
	c := wc.Cluster
	adm := kadm.NewClient(newClient(t, c.Addrs()))
	const topic = "walfence"
	wc.createTopic(t, adm, topic)

	// A request in flight to the frozen leader times out after 3 s + 1 s
	// (not the client's default 10 s overhead) and is retried on the new
	// leader.
	cl := newClient(t, c.Addrs(), kgo.RequiredAcks(kgo.AllISRAcks()),
		kgo.ProduceRequestTimeout(3*time.Second), kgo.RequestTimeoutOverhead(time.Second),
		kgo.RecordDeliveryTimeout(20*time.Second), kgo.MaxBufferedRecords(200),
		kgo.RetryBackoffFn(func(int) time.Duration { return 20 * time.Millisecond }))
	producer := startAckProducer(cl, topic, "fence", false)
	t.Cleanup(func() { producer.finish() })
	producer.waitMore(t, "WAL replication before the freeze", 300)

	old, _ := leaderOf(adm, topic)
	if old < 1 {
		t.Fatal("no leader")
	}
	var others []int32
	for id := int32(1); id <= int32(len(zones)); id++ {
		if id != old {
			others = append(others, id)
		}
	}
	bucket := walBucket(old)
	oldProc := c.Processes[old-1]
	wc.proxy.Hold(bucket) // held PUTs are recorded: late objects
	t.Cleanup(func() { wc.proxy.Release(bucket); oldProc.Resume() })
	// An upload in flight means an appended range the followers wait for
	// (they get it inline only after the leader's inline-after delay):
	// freeze the leader with it unacknowledged.
	waitFor(t, fmt.Sprintf("an upload of leader %d in flight", old), 30*time.Second, func() bool { return wc.proxy.Held(bucket) > 0 })
	oldProc.Pause()
	held := wc.proxy.Held(bucket)
	// What it uploads from now on (after it continues) is late too.
	wc.proxy.Record(bucket, true)
	frozen := time.Now()

	var newLeader int32
	waitFor(t, "a new leader", 60*time.Second, func() bool {
		newLeader, _ = partitionLeader(cl, topic, others...)
		return newLeader >= 1 && newLeader != old
	})
	elected := time.Since(frozen)
	producer.waitMore(t, "writes to the new leader", 300)

	// The deposed leader's uploads land late, then it continues.
	wc.proxy.Release(bucket)
	waitFor(t, "the held uploads forwarded", 30*time.Second, func() bool { return wc.proxy.Stats(bucket).InFlightPuts == 0 })
	oldProc.Resume()
	resumed := time.Now()
	waitFor(t, "the old leader back in the ISR as a follower", 60*time.Second, func() bool {
		l, isr := partitionLeader(cl, topic, others...)
		return l == newLeader && slices.Contains(isr, old) && len(isr) == 3
	})
	t.Logf("new leader %v after the freeze; old leader back in the ISR %v after it continued", elected.Round(time.Millisecond), time.Since(resumed).Round(time.Millisecond))
	producer.waitMore(t, "writes replicated to the returned broker", 300)
	acked, _ := producer.finish()
	wc.proxy.Record(bucket, false)

	hwm := highWatermark(t, adm, topic)
	checkAcknowledged(t, c.Addrs(), topic, hwm, acked)
	truncated := strings.Count(oldProc.Logs(), "truncated to the leader's divergence point")
	final := batchesByOffset(t, stopAndCompareLogs(t, c, topic+"-0", hwm))

	// Every batch of the old leader's objects uploaded from the freeze
	// on: either the very batch in the final log (it was replicated
	// before the freeze) or fenced (the final log has another batch
	// there, from the new leadership).
	var landed, same, fenced int
	var fencedEpochs []int32
	for _, put := range wc.proxy.Recorded() {
		if put.Status/100 != 2 {
			continue
		}
		landed++
		obj, err := wal.Decode(put.Body)
		if err != nil {
			t.Fatalf("late object %s: %v", put.Key, err)
		}
		for _, ch := range obj.Chunks {
			if ch.Topic != topic || ch.Err != nil {
				continue
			}
			bs, err := wal.SplitBatches(ch.ChunkInfo, ch.Data)
			if err != nil {
				t.Fatalf("late object %s: %v", put.Key, err)
			}
			for _, b := range bs {
				if got, ok := final[b.BaseOffset()]; ok && bytes.Equal(got, b) {
					same++
					continue
				}
				if b.BaseOffset() >= hwm {
					t.Fatalf("late batch at offset %d is beyond the final high watermark %d: cannot tell whether a replica kept it", b.BaseOffset(), hwm)
				}
				fenced++
				if !slices.Contains(fencedEpochs, ch.LeaderEpoch) {
					fencedEpochs = append(fencedEpochs, ch.LeaderEpoch)
				}
			}
		}
	}
	t.Logf("leader %d frozen with %d uploads in flight, leader %d elected; %d records acknowledged (%s), high watermark %d",
		old, held, newLeader, len(acked), producer.errors(), hwm)
	t.Logf("late objects of the deposed leader: %d landed in %s; their batches: %d replicated before the freeze, %d of epochs %v fenced (in no replica's log); old leader truncated to a divergence point %d times",
		landed, bucket, same, fenced, fencedEpochs, truncated)
	objs := wc.objectTraffic()
	t.Logf("bucket traffic: %d objects uploaded (%d B), %d ranged GETs by followers (%d B)", objs.Puts, objs.PutBytes, objs.Gets, objs.GetBytes)
	failed, refused := wc.fallbacks()
	t.Logf("followers fetched inline instead: %d failed WAL ranges, %d refused pointers", failed, refused)
	wc.checkLateNeverRead(t)
	switch {
	case landed == 0:
		t.Fatal("no late object of the deposed leader landed in its bucket")
	case fenced == 0:
		t.Fatal("the late objects carried no batch of the deposed leadership beyond what was replicated: nothing was fenced")
	case truncated == 0:
		t.Fatal("the deposed leader did not truncate its unacknowledged tail")
	case objs.Gets == 0:
		t.Fatal("no follower downloaded an object: the WAL path was not used")
	}
}
