package controllers

import (
	"context"
	"crypto/tls"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/go-logr/logr/testr"
	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	strata "github.com/strata-dev/strata/api/v1alpha1"
	"github.com/strata-dev/strata/broker/meta"
	"github.com/strata-dev/strata/broker/server"
	"github.com/strata-dev/strata/internal/pki"
)

// secretReader serves Secrets from a map: the one Get OperatorTLSConfig
// makes (the real API server is in the envtest suite).
type secretReader map[string]*corev1.Secret

func (m secretReader) Get(_ context.Context, key client.ObjectKey, obj client.Object, _ ...client.GetOption) error {
	s, ok := m[key.Name]
	if !ok {
		return os.ErrNotExist
	}
	s.DeepCopyInto(obj.(*corev1.Secret))
	return nil
}

func (secretReader) List(context.Context, client.ObjectList, ...client.ListOption) error { return nil }

// replicationEndpoints points the admin pool at a broker's REPLICATION
// listener with ServiceEndpoints' TLS decision.
type replicationEndpoints struct {
	ServiceEndpoints
	addr string
}

func (e replicationEndpoints) Bootstrap(*strata.KafkaCluster) ([]string, error) {
	return []string{e.addr}, nil
}

// Two brokers started from the broker.properties the operator renders for
// a cluster whose only client listener is SASL_SSL: they replicate over
// the operator's REPLICATION listener with cluster-CA client certificates
// (an acks=all write needs the follower's fetch), and the operator's admin
// client, having no PLAINTEXT listener to use, reaches them there with its
// CN=strata-operator certificate. A client without a certificate is
// refused on that listener.
func TestReplicationListenerMTLS(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	etcd, err := meta.StartEmbedded(ctx, t.TempDir(), nil)
	if err != nil {
		t.Fatalf("start etcd: %v", err)
	}
	t.Cleanup(etcd.Close)

	kc := &strata.KafkaCluster{
		ObjectMeta: metav1.ObjectMeta{Namespace: "kafka", Name: "sec"},
		Spec: strata.KafkaClusterSpec{
			Zones:     []strata.ZoneSpec{{Name: "zone-a", Brokers: 2}},
			Listeners: []strata.ListenerSpec{{Name: "CLIENT", Port: 9093, Protocol: "SASL_SSL"}},
			Metadata:  strata.MetadataSpec{ExternalEndpoints: etcd.Endpoints},
			// Classic replication: every record crosses REPLICATION.
			WAL: strata.WALSpec{Enabled: ptr.To(false)},
		},
	}
	now := time.Now()
	ca, err := pki.NewCA("test cluster CA", 0, now)
	if err != nil {
		t.Fatal(err)
	}
	brokerCert, err := ca.Issue(pki.LeafOptions{Subject: BrokerCertSubject, Hosts: []string{"127.0.0.1"}}, now)
	if err != nil {
		t.Fatal(err)
	}
	operatorCert, err := ca.Issue(pki.LeafOptions{Subject: OperatorCertSubject, Client: true}, now)
	if err != nil {
		t.Fatal(err)
	}
	tlsDir := t.TempDir()
	for name, data := range map[string][]byte{TLSCertKey: brokerCert.CertPEM, TLSKeyKey: brokerCert.KeyPEM, CACertKey: ca.CertPEM} {
		if err := os.WriteFile(filepath.Join(tlsDir, name), data, 0o600); err != nil {
			t.Fatal(err)
		}
	}
	var srvs []*server.Server
	for ord := int32(0); ord < 2; ord++ {
		srvs = append(srvs, startRenderedBroker(ctx, t, kc, ZoneInput{Zone: kc.Spec.Zones[0]}, ord, tlsDir))
	}

	secrets := secretReader{OperatorCertSecretName(kc.Name): {Data: map[string][]byte{
		TLSCertKey: operatorCert.CertPEM, TLSKeyKey: operatorCert.KeyPEM, CACertKey: ca.CertPEM,
	}}}
	pool := NewAdminPool(replicationEndpoints{ServiceEndpoints: ServiceEndpoints{Secrets: secrets}, addr: srvs[0].ListenerAddr(ReplicationListener)})
	defer pool.Close()
	adm, err := pool.Admin(kc)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := adm.CreateTopic(ctx, 1, 2, nil, "replicated"); err != nil {
		t.Fatalf("the operator's admin client over REPLICATION: %v", err)
	}

	// acks=all: acknowledged only once the follower fetched the record
	// over the mTLS inter-broker listener.
	tlsCfg, _, err := OperatorTLSConfig(ctx, secrets, kc)
	if err != nil {
		t.Fatal(err)
	}
	producer, err := kgo.NewClient(kgo.SeedBrokers(srvs[0].ListenerAddr(ReplicationListener)), kgo.DialTLSConfig(tlsCfg),
		kgo.RequiredAcks(kgo.AllISRAcks()), kgo.DefaultProduceTopic("replicated"))
	if err != nil {
		t.Fatal(err)
	}
	defer producer.Close()
	deadline := time.Now().Add(time.Minute)
	for {
		pctx, pcancel := context.WithTimeout(ctx, 10*time.Second)
		err := producer.ProduceSync(pctx, &kgo.Record{Value: []byte("over mTLS")}).FirstErr()
		pcancel()
		if err == nil {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("acks=all produce: %v", err)
		}
	}
	var isr []int32
	for time.Now().Before(deadline) {
		md, err := adm.Metadata(ctx, "replicated")
		if err != nil {
			t.Fatal(err)
		}
		if isr = md.Topics["replicated"].Partitions[0].ISR; len(isr) == 2 {
			break
		}
	}
	if len(isr) != 2 {
		t.Fatalf("ISR %v: the follower is not fetching over REPLICATION", isr)
	}

	// No client certificate: refused in the handshake.
	bare, err := kgo.NewClient(kgo.SeedBrokers(srvs[0].ListenerAddr(ReplicationListener)),
		kgo.DialTLSConfig(&tls.Config{RootCAs: tlsCfg.RootCAs, MinVersion: tls.VersionTLS12}), kgo.RetryTimeout(2*time.Second))
	if err != nil {
		t.Fatal(err)
	}
	defer bare.Close()
	bctx, bcancel := context.WithTimeout(ctx, 5*time.Second)
	defer bcancel()
	if _, err := kadm.NewClient(bare).ListTopics(bctx); err == nil {
		t.Fatal("a client without a certificate was served on the REPLICATION listener")
	}
}

// startRenderedBroker starts broker ord of zi's zone from the
// broker.properties the operator renders, with the cluster TLS files of
// tlsDir and every listener on the loopback.
func startRenderedBroker(ctx context.Context, t *testing.T, kc *strata.KafkaCluster, zi ZoneInput, ord int32, tlsDir string, edits ...func(map[string]string)) *server.Server {
	t.Helper()
	path := filepath.Join(t.TempDir(), BrokerConfigFile)
	if err := os.WriteFile(path, []byte(BuildZoneConfigMap(kc, zi).Data[BrokerConfigFile]), 0o644); err != nil {
		t.Fatal(err)
	}
	kv, err := server.ReadConfigFile(path)
	if err != nil {
		t.Fatal(err)
	}
	for _, edit := range edits {
		edit(kv)
	}
	var ls []string
	for _, l := range strings.Split(kv["listeners"], ",") {
		name, _, _ := strings.Cut(l, "://")
		ls = append(ls, name+"://127.0.0.1:0")
	}
	for k, v := range kv {
		if strings.HasPrefix(v, ClusterTLSDir+"/") {
			kv[k] = tlsDir + strings.TrimPrefix(v, ClusterTLSDir)
		}
	}
	mountMetricsToken(t, kv, testMetricsToken)
	// The pod's DNS names become the loopback.
	kv["listeners"] = strings.Join(ls, ",")
	kv["advertised.listeners"] = kv["listeners"]
	kv["log.dirs"] = t.TempDir()
	kv["metrics.listen"] = "127.0.0.1:0"
	t.Setenv(EnvPodName, BrokerPodName(kc.Name, zi.Zone.Name, ord))
	cfg := server.DefaultConfig()
	if _, err := server.ApplySettings(&cfg, kv); err != nil {
		t.Fatalf("the broker rejects the operator's config: %v", err)
	}
	srv, err := server.Start(ctx, cfg, testr.New(t))
	if err != nil {
		t.Fatalf("start broker %d: %v", ord, err)
	}
	t.Cleanup(func() {
		sctx, scancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer scancel()
		_ = srv.Shutdown(sctx)
	})
	return srv
}

// An operator upgrade rolls brokers configured without REPLICATION onto
// it. While old and new brokers run side by side, a restarted broker must
// still replicate from an old leader: the first roll renders REPLICATION
// served but inter.broker.listener.name on the old listener
// (UpgradingInterBroker). Rendered straight to REPLICATION, the new
// follower dials the old leader with TLS and never catches up: the
// acks=all write times out and the roll would wait on it for ever.
func TestInterBrokerUpgradeFromPlaintext(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	etcd, err := meta.StartEmbedded(ctx, t.TempDir(), nil)
	if err != nil {
		t.Fatalf("start etcd: %v", err)
	}
	t.Cleanup(etcd.Close)
	kc := &strata.KafkaCluster{
		ObjectMeta: metav1.ObjectMeta{Namespace: "kafka", Name: "up"},
		Spec: strata.KafkaClusterSpec{
			Zones:    []strata.ZoneSpec{{Name: "zone-a", Brokers: 2}},
			Metadata: strata.MetadataSpec{ExternalEndpoints: etcd.Endpoints},
			WAL:      strata.WALSpec{Enabled: ptr.To(false)},
		},
	}
	// A cluster of those releases keeps their defaults (PLAINTEXT, no
	// authorizer): LegacySecurityDefaults.
	kc = WithSecurityDefaults(kc, LegacySecurityDefaults(kc, []string{"# an earlier release\nlisteners=PLAINTEXT://0.0.0.0:9092\n"}))
	tlsDir := brokerTLSDir(t)
	// Broker 0 still runs the config of an operator without REPLICATION.
	earlierRelease := func(kv map[string]string) {
		for k := range kv {
			if strings.HasPrefix(k, "listener.") || strings.HasPrefix(k, "inter.broker.") {
				delete(kv, k)
			}
		}
		kv["listeners"] = "PLAINTEXT://0.0.0.0:9092"
	}
	zi := ZoneInput{Zone: kc.Spec.Zones[0]}
	old := startRenderedBroker(ctx, t, kc, zi, 0, tlsDir, earlierRelease)
	// Broker 1 was restarted by the upgrade's first roll: the zone's
	// stored config was the earlier release's, broker 0 is outdated.
	zi.LegacyInterBroker = UpgradingInterBroker([]string{"# an earlier release\nlisteners=PLAINTEXT://0.0.0.0:9092\n"}, false)
	if !zi.LegacyInterBroker {
		t.Fatal("the first roll of an upgrade must keep the old inter-broker listener")
	}
	startRenderedBroker(ctx, t, kc, zi, 1, tlsDir)

	cl, err := kgo.NewClient(kgo.SeedBrokers(old.Addr()), kgo.RequiredAcks(kgo.AllISRAcks()),
		kgo.RecordPartitioner(kgo.ManualPartitioner()), kgo.DefaultProduceTopic("upgrade"))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	// Partition 0 led by the old broker, 1 by the restarted one.
	req := kmsg.NewPtrCreateTopicsRequest()
	topic := kmsg.NewCreateTopicsRequestTopic()
	topic.Topic, topic.NumPartitions, topic.ReplicationFactor = "upgrade", -1, -1
	for p, replicas := range [][]int32{{0, 1}, {1, 0}} {
		a := kmsg.NewCreateTopicsRequestTopicReplicaAssignment()
		a.Partition, a.Replicas = int32(p), replicas
		topic.ReplicaAssignment = append(topic.ReplicaAssignment, a)
	}
	// Both replicas must take every write: a follower that cannot fetch
	// would otherwise just be dropped from the ISR.
	mir := kmsg.NewCreateTopicsRequestTopicConfig()
	mir.Name, mir.Value = "min.insync.replicas", kmsg.StringPtr("2")
	topic.Configs = append(topic.Configs, mir)
	req.Topics = append(req.Topics, topic)
	resp, err := req.RequestWith(ctx, cl)
	if err != nil {
		t.Fatal(err)
	}
	if err := kerr.ErrorForCode(resp.Topics[0].ErrorCode); err != nil {
		t.Fatalf("create topic: %v", err)
	}
	for p := int32(0); p < 2; p++ {
		// A deadline of our own: with a follower that never fetches, the
		// leader has been seen to hold the acks=all request past its
		// timeout and the client to wait for it (noted for the broker).
		done := make(chan error, 1)
		go func() {
			done <- cl.ProduceSync(ctx, &kgo.Record{Partition: p, Value: []byte("during the upgrade")}).FirstErr()
		}()
		select {
		case err := <-done:
			if err != nil {
				t.Fatalf("acks=all write to partition %d (leader %d) during the upgrade roll: %v", p, p, err)
			}
		case <-time.After(30 * time.Second):
			t.Fatalf("acks=all write to partition %d (leader %d) during the upgrade roll: not acknowledged after 30 s", p, p)
		}
	}
}
