package controllers

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/go-logr/logr/testr"
	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	strata "github.com/strata-dev/strata/api/v1alpha1"
	"github.com/strata-dev/strata/broker/meta"
	"github.com/strata-dev/strata/broker/objstore"
	"github.com/strata-dev/strata/broker/server"
	"github.com/strata-dev/strata/broker/wal"
	"github.com/strata-dev/strata/internal/pki"
	"github.com/strata-dev/strata/internal/testutil/s3server"
)

// undeletableStore fails every delete: the broker uploads WAL objects but
// never removes one, as if it had died right after each upload. What it
// leaves behind is exactly what the operator's sweeper exists for.
type undeletableStore struct{ objstore.Store }

func (undeletableStore) Delete(context.Context, string) error {
	return errors.New("test: this broker never deletes its WAL objects")
}

// TestSweeperDeletesObjectsOfOperatorConfiguredBroker runs a real broker
// on the broker.properties the operator renders for a KafkaCluster
// (kafka/demo, zone-a, its FastBucket on a Versity Gateway): only what
// cannot exist on a loopback machine is replaced (etcd endpoints, listener
// and advertised address, data directory), the way `strata broker --set`
// would. The broker writes WAL objects under the cluster name it derives
// from that file and never deletes them; the sweeper, given the
// KafkaCluster, must find every one as its cluster's and delete them once
// older than spec.wal.retention.
func TestSweeperDeletesObjectsOfOperatorConfiguredBroker(t *testing.T) {
	const bucket = "strata-wal-zone-a"
	s3s := s3server.Start(t, bucket)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	etcd, err := meta.StartEmbedded(ctx, t.TempDir(), nil)
	if err != nil {
		t.Fatalf("start etcd: %v", err)
	}
	t.Cleanup(etcd.Close)

	retention := 10 * time.Minute
	kc := &strata.KafkaCluster{
		ObjectMeta: metav1.ObjectMeta{Namespace: "kafka", Name: "demo"},
		Spec: strata.KafkaClusterSpec{
			Zones: []strata.ZoneSpec{{Name: "zone-a", Brokers: 1, FastBucketRef: &strata.LocalObjectReference{Name: "wal-zone-a"}}},
			WAL:   strata.WALSpec{Retention: &metav1.Duration{Duration: retention}},
			// The test's client is anonymous on PLAINTEXT: no ACLs.
			Listeners: []strata.ListenerSpec{{Name: "PLAINTEXT", Port: 9092, Protocol: "PLAINTEXT"}},
			Security:  strata.SecuritySpec{Authorization: &strata.AuthorizationSpec{Type: strata.AuthorizationNone}},
		},
	}
	fb := &strata.FastBucket{
		ObjectMeta: metav1.ObjectMeta{Namespace: "kafka", Name: "wal-zone-a"},
		Spec: strata.FastBucketSpec{
			Zone: "zone-a", Bucket: bucket, Region: s3s.Region, Endpoint: s3s.Endpoint, ForcePathStyle: true,
			Credentials: strata.S3Credentials{SecretRef: &strata.S3SecretReference{Name: "wal-keys"}},
		},
	}
	zi := ZoneInput{Zone: kc.Spec.Zones[0], IDBase: 0, Bucket: fb, ZoneBuckets: map[string]*strata.FastBucket{"zone-a": fb}}

	// The pod: the ConfigMap mounted as a file, $POD_NAME, and the
	// FastBucket Secret's keys as STRATA_WAL_* variables.
	path := filepath.Join(t.TempDir(), BrokerConfigFile)
	if err := os.WriteFile(path, []byte(BuildZoneConfigMap(kc, zi).Data[BrokerConfigFile]), 0o644); err != nil {
		t.Fatal(err)
	}
	t.Setenv(EnvPodName, BrokerPodName(kc.Name, "zone-a", 0))
	t.Setenv(EnvWALAccessKeyID, s3s.AccessKey)
	t.Setenv(EnvWALSecretKey, s3s.SecretKey)
	kv, err := server.ReadConfigFile(path)
	if err != nil {
		t.Fatal(err)
	}
	// The Secret <cluster>-broker-certs mounted at ClusterTLSDir: the
	// REPLICATION listener and the etcd client load these files.
	tlsDir := t.TempDir()
	ca, err := pki.NewCA("test cluster CA", 0, time.Now())
	if err != nil {
		t.Fatal(err)
	}
	leaf, err := ca.Issue(pki.LeafOptions{Subject: BrokerCertSubject, Hosts: []string{"127.0.0.1"}}, time.Now())
	if err != nil {
		t.Fatal(err)
	}
	for name, data := range map[string][]byte{TLSCertKey: leaf.CertPEM, TLSKeyKey: leaf.KeyPEM, CACertKey: ca.CertPEM} {
		if err := os.WriteFile(filepath.Join(tlsDir, name), data, 0o600); err != nil {
			t.Fatal(err)
		}
	}
	for k, v := range kv {
		if strings.HasPrefix(v, ClusterTLSDir+"/") {
			kv[k] = tlsDir + strings.TrimPrefix(v, ClusterTLSDir)
		}
	}
	mountMetricsToken(t, kv, testMetricsToken)
	cfg := server.DefaultConfig()
	if _, err := server.ApplySettings(&cfg, kv); err != nil {
		t.Fatalf("the broker rejects the operator's config: %v", err)
	}
	if _, err := server.ApplySettings(&cfg, map[string]string{
		"metadata.etcd.endpoints": strings.Join(etcd.Endpoints, ","),
		"listeners":               "PLAINTEXT://127.0.0.1:0,REPLICATION://127.0.0.1:0",
		"advertised.address":      "127.0.0.1:0",
		// The operator's advertised.listeners (pod DNS names) name the
		// listener, so they win over advertised.address: replace them too.
		"advertised.listeners": "PLAINTEXT://127.0.0.1:0,REPLICATION://127.0.0.1:0",
		"log.dirs":             t.TempDir(),
		// One broker, no follower in another zone: the operator's
		// default policy, auto, would replicate inline and upload
		// nothing (it starts inline). The sweeper needs objects.
		"wal.policy": "latency",
	}); err != nil {
		t.Fatal(err)
	}
	if got, want := cfg.Cluster.Name, WALClusterName(kc); got != want {
		t.Fatalf("the broker runs as cluster %q, the operator calls it %q", got, want)
	}
	cfg.Cluster.WAL.WrapStore = func(st objstore.Store) objstore.Store { return undeletableStore{st} }
	srv, err := server.Start(ctx, cfg, testr.New(t))
	if err != nil {
		t.Fatalf("start broker: %v", err)
	}
	t.Cleanup(func() {
		sctx, scancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer scancel()
		_ = srv.Shutdown(sctx)
	})

	cl, err := kgo.NewClient(kgo.SeedBrokers(srv.Addr()), kgo.RequiredAcks(kgo.LeaderAck()), kgo.DisableIdempotentWrite())
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	if _, err := kadm.NewClient(cl).CreateTopic(ctx, 1, 1, nil, "orders"); err != nil {
		t.Fatalf("create topic: %v", err)
	}
	for i := range 20 {
		if err := cl.ProduceSync(ctx, &kgo.Record{Topic: "orders", Value: []byte(strings.Repeat("x", 100+i))}).FirstErr(); err != nil {
			t.Fatalf("produce: %v", err)
		}
	}

	store, err := openBucket(ctx, fb.Spec, &StaticCredentials{AccessKeyID: s3s.AccessKey, SecretAccessKey: s3s.SecretKey})
	if err != nil {
		t.Fatal(err)
	}
	var written []objstore.ObjectInfo
	for deadline := time.Now().Add(time.Minute); ; {
		if written, err = store.List(ctx, wal.KeyPrefix); err == nil && len(written) > 0 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the broker uploaded no WAL object within a minute (list: %v)", err)
		}
		time.Sleep(50 * time.Millisecond)
	}
	// Stop the broker: nobody will delete these objects any more.
	sctx, scancel := context.WithTimeout(ctx, 30*time.Second)
	defer scancel()
	if err := srv.Shutdown(sctx); err != nil {
		t.Fatalf("shutdown: %v", err)
	}
	if written, err = store.List(ctx, wal.KeyPrefix); err != nil || len(written) == 0 {
		t.Fatalf("WAL objects after shutdown: %d, %v", len(written), err)
	}
	var oldest, newest time.Time
	for _, o := range written {
		t.Logf("broker wrote %s at %s", o.Key, o.LastModified)
		if o.LastModified.After(newest) {
			newest = o.LastModified
		}
		if oldest.IsZero() || o.LastModified.Before(oldest) {
			oldest = o.LastModified
		}
	}

	clusters := ClustersUsingBucket(fb, []strata.KafkaCluster{*kc})
	// Every object younger than the retention (the broker may have spread its
	// uploads over more than a second on a loaded machine, so the clock is
	// set from the oldest): counted as the cluster's, kept.
	res, err := sweepWAL(ctx, store, fb.Spec.Zone, clusters, oldest.Add(retention-time.Second))
	if err != nil || res.err != nil {
		t.Fatalf("sweep: %v, %v", err, res.err)
	}
	if res.deleted != 0 || len(res.plan.Clusters) != 1 || res.plan.Clusters[0].Objects != int64(len(written)) {
		t.Fatalf("young objects: deleted %d, clusters %+v; want 0 deleted and all %d counted as %s's", res.deleted, res.plan.Clusters, len(written), WALClusterName(kc))
	}
	// At the retention: every object the broker left is swept.
	res, err = sweepWAL(ctx, store, fb.Spec.Zone, clusters, newest.Add(retention))
	if err != nil || res.err != nil {
		t.Fatalf("sweep: %v, %v", err, res.err)
	}
	if res.deleted != int64(len(written)) {
		t.Fatalf("swept %d of the %d objects the broker left behind", res.deleted, len(written))
	}
	if left, err := store.List(ctx, wal.KeyPrefix); err != nil || len(left) != 0 {
		t.Fatalf("after the sweep %d objects remain (%v)", len(left), err)
	}
}
