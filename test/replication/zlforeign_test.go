package replication

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/strata-dev/strata/broker/brokertest"
	"github.com/strata-dev/strata/broker/objstore"
	"github.com/strata-dev/strata/broker/server"
)

// Followers read the forwarded object (issue #30, docs/wal.md
// "Zone-local produce"): a leader that appends a zone-local forwarder's
// range as forwarded points its followers at the forwarder's object
// instead of uploading the records again.

// zlWatch counts, across the cluster, the bytes PUT into the leader's WAL
// objects and into the forwarder's objects (which hold the forwarded
// records: WAL objects shared with its own uploads, or objects of their
// own, keys .../zl-<incarnation>/...), and the GETs of the forwarder's
// objects by broker; with goneForFollowers, a GET of one by any broker
// but leader finds it gone (a follower that comes after the forwarder
// deleted it).
type zlWatch struct {
	walPutBytes      atomic.Int64
	zlPutBytes       atomic.Int64
	leader           int32
	forwarder        string // its broker ID, as in object keys
	goneForFollowers atomic.Bool
	mu               sync.Mutex
	zlGets           map[int32]int
}

type zlWatchStore struct {
	objstore.Store
	w    *zlWatch
	node int32
}

// forwarded says whether key is an object of the forwarder's (keys
// wal/<cluster>/<zone>/<broker>/...).
func (w *zlWatch) forwarded(key string) bool {
	parts := strings.Split(key, "/")
	return len(parts) > 3 && parts[3] == w.forwarder
}

func (s zlWatchStore) Put(ctx context.Context, key string, data []byte) error {
	if s.w.forwarded(key) {
		s.w.zlPutBytes.Add(int64(len(data)))
	} else {
		s.w.walPutBytes.Add(int64(len(data)))
	}
	return s.Store.Put(ctx, key, data)
}

func (s zlWatchStore) Get(ctx context.Context, key string, offset, length int64) ([]byte, error) {
	if s.w.forwarded(key) {
		s.w.mu.Lock()
		s.w.zlGets[s.node]++
		s.w.mu.Unlock()
		if s.node != s.w.leader && s.w.goneForFollowers.Load() {
			// Not a real DELETE: an object holds the ranges of several
			// requests (group commit), and the leader may still have
			// to read the next one (the forwarder deletes an object
			// only after its leaders answered every request in it).
			return nil, fmt.Errorf("%w: s3://%s/%s (test: gone for followers)", objstore.ErrNotFound, s.Bucket(), key)
		}
	}
	return s.Store.Get(ctx, key, offset, length)
}

func (w *zlWatch) gets() map[int32]int {
	w.mu.Lock()
	defer w.mu.Unlock()
	out := map[int32]int{}
	for k, v := range w.zlGets {
		out[k] = v
	}
	return out
}

// startZLForeignCluster starts the WAL cluster with zone-local produce and
// a one-partition topic led by broker 1 (zone a), replicas on 2 (zone b,
// the forwarder of a zone-b producer) and 3, and returns it with its
// zone-b producer.
func startZLForeignCluster(t *testing.T, w *zlWatch, topic string) (*walCluster, *kgo.Client) {
	t.Helper()
	w.leader, w.forwarder, w.zlGets = 1, "2", map[int32]int{}
	wc := startWALCluster(t, brokertest.WithSetting("wal.zonelocal.produce.enable", "true"),
		brokertest.WithConfig(func(c *server.Config) {
			wrap, node := c.Cluster.WAL.WrapStore, c.Broker.NodeID
			c.Cluster.WAL.WrapStore = func(st objstore.Store) objstore.Store { return zlWatchStore{Store: wrap(st), w: w, node: node} }
		}))
	addrs := wc.Addrs()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	createAssigned(ctx, t, newClient(t, addrs), topic, [][]int32{{1, 2, 3}})
	waitFor(t, "broker 1 leads with all in sync", 30*time.Second, func() bool {
		st := state(t, wc.Cluster, topic, 0)
		return st.Leader == 1 && len(st.ISR) == 3
	})
	cl := newClient(t, addrs, kgo.ClientID("orders-svc,strata_az=b"), kgo.RequiredAcks(kgo.AllISRAcks()),
		kgo.ProducerLinger(2*time.Millisecond), kgo.ProducerBatchMaxBytes(16<<10))
	zadm := kadm.NewClient(cl)
	waitFor(t, "broker 2 as the zone-b client's leader", 10*time.Second, func() bool {
		ls := leaders(zadm, topic)
		return len(ls) == 1 && ls[0][0] == 2
	})
	return wc, cl
}

// brokerMetric sums the samples of a counter of broker i (from 0) whose
// label has value (any sample when label is empty).
func brokerMetric(t *testing.T, c *brokertest.Cluster, i int, name, label, value string) float64 {
	t.Helper()
	mfs, err := c.Brokers[i].Server().Metrics().Registry.Gather()
	if err != nil {
		t.Fatal(err)
	}
	sum := 0.0
	for _, mf := range mfs {
		if mf.GetName() != name {
			continue
		}
		for _, m := range mf.GetMetric() {
			ok := label == ""
			for _, l := range m.GetLabel() {
				if l.GetName() == label && l.GetValue() == value {
					ok = true
				}
			}
			if ok {
				sum += m.GetCounter().GetValue()
			}
		}
	}
	return sum
}

// TestZoneLocalFollowersReadForwarded: a zone-b producer's records for a
// partition led in zone a go through broker 2's object; the leader
// uploads none of them (no WAL PUT of the payload's size), its followers
// read them from the forwarder's object (GETs of forwarded objects by
// brokers 2 and 3), and every replica's log is byte-identical to the
// leader's and holds every acknowledged record at its offset.
func TestZoneLocalFollowersReadForwarded(t *testing.T) {
	const topic, n = "zl-foreign", 400
	w := &zlWatch{}
	wc, cl := startZLForeignCluster(t, w, topic)

	putBefore, zlBefore := w.walPutBytes.Load(), w.zlPutBytes.Load()
	acked := produceAll(t, cl, topic, "fwd", n)
	checkReplicas(t, wc.Cluster, topic, 1, []map[int32]map[int64]string{acked})

	uploaded := w.walPutBytes.Load() - putBefore
	payload := float64(w.zlPutBytes.Load() - zlBefore) // the record batches as forwarded
	published := brokerMetric(t, wc.Cluster, 0, "strata_wal_foreign_pointers_total", "outcome", "published")
	reuploaded := brokerMetric(t, wc.Cluster, 0, "strata_wal_foreign_pointers_total", "outcome", "reuploaded")
	gets := w.gets()
	t.Logf("forwarded %.0f B; WAL objects PUT %d B; forwarded ranges published %.0f, reuploaded %.0f; GETs of forwarded objects by broker %v",
		payload, uploaded, published, reuploaded, gets)
	// The WAL objects of the run hold at most the leader's own
	// appends (none here) and object headers, far below the forwarded
	// bytes (which they hold in full when the leader uploads them).
	if payload == 0 || float64(uploaded) > payload/10 {
		t.Fatalf("%d bytes PUT into WAL objects for %.0f bytes of forwarded records: the leader uploaded them again", uploaded, payload)
	}
	if gets[2] == 0 || gets[3] == 0 {
		t.Fatalf("GETs of forwarded objects by broker %v: the followers did not read them", gets)
	}
	if published == 0 || reuploaded != 0 {
		t.Fatalf("forwarded ranges published %.0f, reuploaded %.0f: want all published", published, reuploaded)
	}
	if inline := brokerMetric(t, wc.Cluster, 0, "strata_wal_inline_bytes_total", "", ""); inline > payload/10 {
		t.Fatalf("the leader served %.0f bytes inline to its followers", inline)
	}
}

// TestZoneLocalForwardedObjectGone: the followers find every forwarded
// object gone (NotFound, as after a forwarder whose keep time passed
// deleted it): they fetch those ranges inline from the leader, and
// every replica's log is still byte-identical to the leader's with every
// acknowledged record.
func TestZoneLocalForwardedObjectGone(t *testing.T) {
	const topic, n = "zl-foreign-gone", 300
	w := &zlWatch{}
	wc, cl := startZLForeignCluster(t, w, topic)
	w.goneForFollowers.Store(true)

	acked := produceAll(t, cl, topic, "gone", n)
	checkReplicas(t, wc.Cluster, topic, 1, []map[int32]map[int64]string{acked})

	published := brokerMetric(t, wc.Cluster, 0, "strata_wal_foreign_pointers_total", "outcome", "published")
	reuploaded := brokerMetric(t, wc.Cluster, 0, "strata_wal_foreign_pointers_total", "outcome", "reuploaded")
	asked := brokerMetric(t, wc.Cluster, 0, "strata_wal_inline_bytes_total", "reason", "follower_asked")
	gets := w.gets()
	t.Logf("forwarded ranges published %.0f, reuploaded %.0f; inline bytes the followers asked for %.0f; GETs of forwarded objects by broker %v", published, reuploaded, asked, gets)
	if published == 0 {
		t.Fatal("no forwarded range was published: the fallback was not exercised")
	}
	if gets[2]+gets[3] == 0 {
		t.Fatal("the followers never tried a forwarded object")
	}
	if asked == 0 {
		t.Fatal("no follower asked inline for a range whose object was gone")
	}
}
