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
	"github.com/twmb/franz-go/pkg/kgo"
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
	props := BuildZoneConfigMap(kc, ZoneInput{Zone: kc.Spec.Zones[0]}).Data[BrokerConfigFile]
	path := filepath.Join(t.TempDir(), BrokerConfigFile)
	if err := os.WriteFile(path, []byte(props), 0o644); err != nil {
		t.Fatal(err)
	}

	var srvs []*server.Server
	for ord := int32(0); ord < 2; ord++ {
		kv, err := server.ReadConfigFile(path)
		if err != nil {
			t.Fatal(err)
		}
		for k, v := range kv {
			if strings.HasPrefix(v, ClusterTLSDir+"/") {
				kv[k] = tlsDir + strings.TrimPrefix(v, ClusterTLSDir)
			}
		}
		// The pod's DNS names become the loopback; the client listener
		// is not under test (it has no SASL users here).
		kv["listeners"] = "CLIENT://127.0.0.1:0,REPLICATION://127.0.0.1:0"
		kv["advertised.listeners"] = "CLIENT://127.0.0.1:0,REPLICATION://127.0.0.1:0"
		kv["log.dirs"] = t.TempDir()
		kv["metrics.listen"] = "127.0.0.1:0"
		t.Setenv(EnvPodName, BrokerPodName(kc.Name, "zone-a", ord))
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
		srvs = append(srvs, srv)
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
