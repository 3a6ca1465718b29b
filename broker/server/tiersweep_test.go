package server

import (
	"bytes"
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/go-logr/logr"
	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/strata-dev/strata/broker/log"
	"github.com/strata-dev/strata/broker/objstore"
	"github.com/strata-dev/strata/broker/record"
	"github.com/strata-dev/strata/broker/tier"
)

// TestTierSweepsOrphans: a broker with tier.orphan.grace.ms=1000 deletes
// an object a crash left in its partition's prefix (named by no
// manifest) and the prefix of a topic that no longer exists, once they
// are older than the grace; what the manifest names stays (a consumer
// from 0 gets every record) and strata_tier_swept_objects_total counts
// the deletions.
func TestTierSweepsOrphans(t *testing.T) {
	store := tierStore(t)
	cfg := DefaultConfig()
	cfg.Listen, cfg.MetricsListen = "127.0.0.1:0", "127.0.0.1:0"
	cfg.Broker.DataDir = t.TempDir()
	cfg.RetentionCheckInterval = time.Hour
	cfg.Tier = TierConfig{Enable: true, TaskInterval: 50 * time.Millisecond, Store: store}
	if _, err := applyTierSetting(&cfg.Tier, "tier.orphan.grace.ms", "1000"); err != nil {
		t.Fatal(err)
	}
	s, err := Start(context.Background(), cfg, logr.Discard())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = s.Shutdown(context.Background()) })
	cl, err := kgo.NewClient(kgo.SeedBrokers(s.Addr()))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	ctx := context.Background()
	const topic, n = "swept", 300
	one, segBytes, remote := "1", "4096", "true"
	if _, err := kadm.NewClient(cl).CreateTopic(ctx, 1, 1, map[string]*string{"remote.storage.enable": &remote, "local.retention.ms": &one, "segment.bytes": &segBytes}, topic); err != nil {
		t.Fatal(err)
	}
	produceN(t, cl, topic, 0, n)
	waitTiered(t, cl, topic, n/2)
	p, err := s.broker.Partition(topic, 0)
	if err != nil {
		t.Fatal(err)
	}
	prefix := p.Tiered().Prefix()
	root := prefix[:strings.Index(prefix[len("tier/"):], "/")+len("tier/")+1]

	// Left by a crash between a data and a manifest write.
	crashLeft := prefix + "segments/00000000000099999000-00000000000099999999-0.log"
	if err := store.Put(ctx, crashLeft, []byte("crash-left")); err != nil {
		t.Fatal(err)
	}
	// Left by a topic deletion that failed: a topic ID the broker does
	// not know, with a manifest and segments.
	ghost := tier.New(store, tier.Config{Cluster: strings.TrimSuffix(strings.TrimPrefix(root, "tier/"), "/")}, logr.Discard()).Partition("ghost", "00112233445566778899aabbccddeeff", 0)
	lc := log.DefaultConfig()
	lc.SegmentBytes = 1000
	gl, err := log.Open(t.TempDir(), lc)
	if err != nil {
		t.Fatal(err)
	}
	defer gl.Close()
	for i := range 10 {
		b, err := record.Build(record.DefaultSpec(), []record.Record{{Value: bytes.Repeat([]byte{byte('a' + i)}, 300)}})
		if err != nil {
			t.Fatal(err)
		}
		if _, err := gl.AppendAsLeader([]record.Batch{b}, 0); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := ghost.Upload(ctx, gl, gl.EndOffset(), 0); err != nil {
		t.Fatal(err)
	}
	if objs, err := store.List(ctx, ghost.Prefix()); err != nil || len(objs) == 0 {
		t.Fatalf("test setup: the ghost topic has %d objects (%v)", len(objs), err)
	}

	deadline := time.Now().Add(60 * time.Second)
	for {
		_, errCrash := store.Head(ctx, crashLeft)
		ghostObjs, err := store.List(ctx, ghost.Prefix())
		if errors.Is(errCrash, objstore.ErrNotFound) && err == nil && len(ghostObjs) == 0 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("after 60 s: crash-left object %v, ghost topic %d objects (%v)", errCrash, len(ghostObjs), err)
		}
		time.Sleep(50 * time.Millisecond)
	}
	consumeAll(t, s.Addr(), topic, n)
	_, metrics := get(t, "http://"+s.MetricsAddr()+"/metrics")
	if !strings.Contains(metrics, "strata_tier_swept_objects_total ") || strings.Contains(metrics, "\nstrata_tier_swept_objects_total 0\n") {
		t.Errorf("strata_tier_swept_objects_total missing or 0 after a sweep")
	}
	if !strings.Contains(metrics, "\nstrata_tier_upload_failing_partitions 0\n") {
		t.Errorf("strata_tier_upload_failing_partitions is not 0 with the bucket up")
	}
}
