package tier_test

import (
	"context"
	"errors"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/go-logr/logr"

	"github.com/strata-dev/strata/broker/objstore"
	"github.com/strata-dev/strata/broker/tier"
	"github.com/strata-dev/strata/internal/testutil/s3server"
)

// clock is a settable wall clock for the tier's Config.Clock.
type clock struct{ off atomic.Int64 }

func (c *clock) now() time.Time          { return time.Now().Add(time.Duration(c.off.Load())) }
func (c *clock) advance(d time.Duration) { c.off.Add(int64(d)) }

// checkTierIntact reads every segment the newest manifest names (data
// checked against its CRC, then every batch through the indexes).
func checkTierIntact(t *testing.T, st objstore.Store, topic string) tier.Manifest {
	t.Helper()
	p := tier.New(st, tier.Config{Cluster: "c"}, logr.Discard()).Partition(topic, "id", 0)
	m, err := p.Load(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	for _, s := range m.Segments {
		if err := p.VerifySegment(context.Background(), s); err != nil {
			t.Fatalf("segment named by the manifest: %v", err)
		}
	}
	readAllRemote(t, p, m.StartOffset, m.EndOffset)
	return m
}

func keysUnder(t *testing.T, st objstore.Store, prefix string) []string {
	t.Helper()
	objs, err := st.List(context.Background(), prefix)
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, o := range objs {
		out = append(out, o.Key)
	}
	return out
}

// TestSweepOrphans: objects no manifest names (a crash between the data
// and the manifest write, a deposed leader's upload) are kept while
// younger than the grace and deleted by the leader after it, never an
// object the manifest names; the sweeping leader first makes the newest
// manifest its own epoch's, a deposed sweeper is fenced, and a round
// deletes at most its limit.
func TestSweepOrphans(t *testing.T) {
	srv := s3server.Start(t, bucket)
	ctx := context.Background()
	st := newStore(t, srv)
	var clk clock
	newTier := func() *tier.Partition {
		return tier.New(st, tier.Config{Cluster: "c", Clock: clk.now}, logr.Discard()).Partition("t", "id", 0)
	}
	const grace = time.Hour

	l := openLog(t, 2000)
	appendN(t, l, 30, 0, 1_000)
	p0 := newTier()
	if _, err := p0.Upload(ctx, l, l.EndOffset(), 0); err != nil {
		t.Fatal(err)
	}
	named := keysUnder(t, st, p0.Prefix()+"segments/")
	// Leader 0 crashed between the data and the manifest of the next
	// segment: its data and index objects are there, no manifest names
	// them.
	crashLeft := []string{p0.Prefix() + "segments/00000000000000000090-00000000000000000119-0.log", p0.Prefix() + "segments/00000000000000000090-00000000000000000119-0.log.index"}
	for _, k := range crashLeft {
		if err := st.Put(ctx, k, []byte("crash-left")); err != nil {
			t.Fatal(err)
		}
	}

	// Leader 1 takes over. Right now the orphans are young: nothing goes.
	t1 := tier.New(st, tier.Config{Cluster: "c", Clock: clk.now}, logr.Discard())
	p1 := t1.Partition("t", "id", 0)
	res, err := p1.SweepOrphans(ctx, 1, grace, 1000)
	if err != nil || res.Deleted != 0 || res.Young != len(crashLeft) {
		t.Fatalf("sweep of young orphans: %+v, %v; want none deleted, %d young", res, err, len(crashLeft))
	}
	if m, _ := p1.Load(ctx); m.LeaderEpoch != 0 {
		t.Fatalf("a sweep that deleted nothing wrote a manifest (epoch %d)", m.LeaderEpoch)
	}

	// After the grace they go; every named object stays.
	clk.advance(2 * grace)
	res, err = p1.SweepOrphans(ctx, 1, grace, 1000)
	if err != nil || res.Deleted != len(crashLeft) || res.More {
		t.Fatalf("sweep after the grace: %+v, %v; want %d deleted", res, err, len(crashLeft))
	}
	if got := keysUnder(t, st, p0.Prefix()+"segments/"); strings.Join(got, "\n") != strings.Join(named, "\n") {
		t.Fatalf("after the sweep the segments are\n%s\nwant the named ones\n%s", strings.Join(got, "\n"), strings.Join(named, "\n"))
	}
	m := checkTierIntact(t, st, "t")
	if m.LeaderEpoch != 1 {
		t.Fatalf("the sweeping leader did not make the newest manifest its own (epoch %d, want 1)", m.LeaderEpoch)
	}
	if got := t1.Stats().SweptObjects; got != int64(len(crashLeft)) {
		t.Fatalf("SweptObjects = %d, want %d", got, len(crashLeft))
	}

	// The deposed leader 0 sweeps: fenced, deletes nothing (here an old
	// orphan of leader 1 that it would otherwise take).
	orphan1 := p0.Prefix() + "segments/00000000000000000200-00000000000000000209-1.log"
	if err := st.Put(ctx, orphan1, []byte("x")); err != nil {
		t.Fatal(err)
	}
	clk.advance(2 * grace)
	if _, err := p0.SweepOrphans(ctx, 0, grace, 1000); !errors.Is(err, tier.ErrFenced) {
		t.Fatalf("deposed leader's sweep: %v, want ErrFenced", err)
	}
	if _, err := st.Head(ctx, orphan1); err != nil {
		t.Fatalf("the deposed leader's sweep deleted %s: %v", orphan1, err)
	}

	// The limit bounds a round.
	orphan2 := p0.Prefix() + "segments/00000000000000000300-00000000000000000309-1.log"
	if err := st.Put(ctx, orphan2, []byte("x")); err != nil {
		t.Fatal(err)
	}
	clk.advance(2 * grace)
	res, err = p1.SweepOrphans(ctx, 1, grace, 1)
	if err != nil || res.Deleted != 1 || !res.More {
		t.Fatalf("sweep with limit 1: %+v, %v; want 1 deleted and more left", res, err)
	}
	if res, err = p1.SweepOrphans(ctx, 1, grace, 1); err != nil || res.Deleted != 1 || res.More {
		t.Fatalf("second sweep with limit 1: %+v, %v; want the last one", res, err)
	}
	checkTierIntact(t, st, "t")
}

// TestSweepNeverTakesALiveUpload: a leader's uploads and its sweeps run
// concurrently, with a grace of zero (every unnamed object is old enough):
// no object of an upload in flight is ever deleted, because the sweep
// and the upload of one leader are serialised and an upload names its
// objects before it returns. Another writer's fresh objects (a deposed
// leader still uploading) are kept by the grace.
func TestSweepNeverTakesALiveUpload(t *testing.T) {
	srv := s3server.Start(t, bucket)
	ctx := context.Background()
	st := newStore(t, srv)
	p := tier.New(st, tier.Config{Cluster: "c"}, logr.Discard()).Partition("t", "id", 0)
	l := openLog(t, 1000)
	var wg sync.WaitGroup
	stop := make(chan struct{})
	var sweeps atomic.Int64
	var sweepErr atomic.Value
	wg.Go(func() {
		for {
			select {
			case <-stop:
				return
			default:
			}
			if _, err := p.SweepOrphans(ctx, 0, 0, 1000); err != nil {
				sweepErr.Store(err)
				return
			}
			sweeps.Add(1)
		}
	})
	for round := range 15 {
		appendN(t, l, 4, 0, int64(1_000+100*round))
		if _, err := p.Upload(ctx, l, l.EndOffset(), 0); err != nil {
			close(stop)
			wg.Wait()
			t.Fatalf("upload round %d: %v", round, err)
		}
	}
	deadline := time.Now().Add(time.Minute)
	for sweeps.Load() < 3 && sweepErr.Load() == nil && time.Now().Before(deadline) {
		time.Sleep(10 * time.Millisecond)
	}
	close(stop)
	wg.Wait()
	if err, _ := sweepErr.Load().(error); err != nil {
		t.Fatal(err)
	}
	if sweeps.Load() < 3 {
		t.Fatalf("only %d sweeps ran", sweeps.Load())
	}
	m := checkTierIntact(t, st, "t")
	if len(m.Segments) < 10 {
		t.Fatalf("test setup: %d segments uploaded", len(m.Segments))
	}

	// A deposed leader's upload in flight (another process): fresh
	// objects, kept by the grace.
	fresh := p.Prefix() + "segments/99999999999999999990-99999999999999999999-0.log"
	if err := st.Put(ctx, fresh, []byte("x")); err != nil {
		t.Fatal(err)
	}
	res, err := p.SweepOrphans(ctx, 0, time.Minute, 1000)
	if err != nil || res.Deleted != 0 || res.Young != 1 {
		t.Fatalf("sweep with another writer's fresh object: %+v, %v; want it kept", res, err)
	}
	if _, err := st.Head(ctx, fresh); err != nil {
		t.Fatal(err)
	}
}

// TestSweepDeletedTopics: the controller's sweep empties the prefix of a
// topic the metadata no longer knows once all its objects are older than
// the grace, manifests first; a live topic and a young prefix stay; a
// cluster of the same name with another ID sweeps nothing.
func TestSweepDeletedTopics(t *testing.T) {
	srv := s3server.Start(t, bucket)
	ctx := context.Background()
	st := newStore(t, srv)
	var clk clock
	tr := tier.New(st, tier.Config{Cluster: "c", Clock: clk.now}, logr.Discard())
	const liveID, deadID = "0123456789abcdef0123456789abcdef", "fedcba9876543210fedcba9876543210"
	for _, tp := range []struct {
		topic, id string
		part      int32
	}{{"live-topic", liveID, 0}, {"gone-topic", deadID, 0}, {"gone-topic", deadID, 1}} {
		l := openLog(t, 2000)
		appendN(t, l, 20, 0, 1_000)
		if _, err := tr.Partition(tp.topic, tp.id, tp.part).Upload(ctx, l, l.EndOffset(), 0); err != nil {
			t.Fatal(err)
		}
	}
	other := tier.ClusterPrefix("c") + "notes/readme.txt" // not a topic directory
	if err := st.Put(ctx, other, []byte("x")); err != nil {
		t.Fatal(err)
	}
	livePrefix := tier.ClusterPrefix("c") + "live-topic-" + liveID + "/"
	deadPrefix := tier.ClusterPrefix("c") + "gone-topic-" + deadID + "/"
	liveKeys := keysUnder(t, st, livePrefix)
	live := map[string]bool{liveID: true}
	const grace = time.Hour

	res, err := tr.SweepDeletedTopics(ctx, "cluster-1", live, grace, 1000)
	if err != nil || res.Deleted != 0 || res.Young != 1 {
		t.Fatalf("sweep of a young deleted topic: %+v, %v; want nothing deleted, 1 young", res, err)
	}
	clk.advance(2 * grace)
	// A small limit leaves the rest for the next round; manifests go
	// first (what is left is no readable partition).
	segs := len(keysUnder(t, st, deadPrefix+"0/segments/")) + len(keysUnder(t, st, deadPrefix+"1/segments/"))
	res, err = tr.SweepDeletedTopics(ctx, "cluster-1", live, grace, 3)
	if err != nil || res.Deleted != 3 || !res.More {
		t.Fatalf("limited sweep: %+v, %v; want 3 deleted and more", res, err)
	}
	if got := len(keysUnder(t, st, deadPrefix+"0/segments/")) + len(keysUnder(t, st, deadPrefix+"1/segments/")); got != segs {
		t.Fatalf("the limited sweep deleted segment objects (%d of %d left) before the manifests", got, segs)
	}
	for res.More {
		if res, err = tr.SweepDeletedTopics(ctx, "cluster-1", live, grace, 1000); err != nil {
			t.Fatal(err)
		}
	}
	if got := keysUnder(t, st, deadPrefix); len(got) != 0 {
		t.Fatalf("deleted topic's prefix still holds %v", got)
	}
	if got := keysUnder(t, st, livePrefix); strings.Join(got, " ") != strings.Join(liveKeys, " ") {
		t.Fatalf("the live topic lost objects: %d left of %d", len(got), len(liveKeys))
	}
	if _, err := st.Head(ctx, other); err != nil {
		t.Fatalf("a key outside any topic directory was deleted: %v", err)
	}
	checkTierIntactAt(t, st, "live-topic", liveID)

	// Another cluster named "c" shares the bucket: it sweeps nothing (its
	// metadata knows none of these topics), and from then on neither
	// does the owner.
	intruder := tier.New(st, tier.Config{Cluster: "c", Clock: clk.now}, logr.Discard())
	if _, err := intruder.SweepDeletedTopics(ctx, "cluster-2", map[string]bool{}, grace, 1000); !errors.Is(err, tier.ErrNotOwner) {
		t.Fatalf("sweep by another cluster of the same name: %v, want ErrNotOwner", err)
	}
	l := openLog(t, 2000)
	appendN(t, l, 20, 0, 1_000)
	const otherID = "99999999999999999999999999999999"
	if _, err := intruder.Partition("its-topic", otherID, 0).Upload(ctx, l, l.EndOffset(), 0); err != nil {
		t.Fatal(err)
	}
	clk.advance(2 * grace)
	if _, err := tr.SweepDeletedTopics(ctx, "cluster-1", live, grace, 1000); !errors.Is(err, tier.ErrNotOwner) {
		t.Fatalf("owner's sweep after another cluster of the name appeared: %v, want ErrNotOwner", err)
	}
	if got := keysUnder(t, st, livePrefix); len(got) != len(liveKeys) {
		t.Fatalf("the other cluster's sweep deleted live objects: %d left of %d", len(got), len(liveKeys))
	}
	if got := keysUnder(t, st, tier.ClusterPrefix("c")+"its-topic-"+otherID+"/"); len(got) == 0 {
		t.Fatal("the owner swept the other cluster's topic")
	}
}

func checkTierIntactAt(t *testing.T, st objstore.Store, topic, id string) {
	t.Helper()
	p := tier.New(st, tier.Config{Cluster: "c"}, logr.Discard()).Partition(topic, id, 0)
	m, err := p.Load(context.Background())
	if err != nil || len(m.Segments) == 0 {
		t.Fatalf("live topic's manifest: %d segments, %v", len(m.Segments), err)
	}
	readAllRemote(t, p, m.StartOffset, m.EndOffset)
}
