package controllers_test

import (
	"bytes"
	"context"
	"crypto/tls"
	"fmt"
	"maps"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"sync"
	"testing"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	strata "github.com/strata-dev/strata/api/v1alpha1"
	"github.com/strata-dev/strata/broker/brokertest"
	"github.com/strata-dev/strata/broker/meta/metatest"
	"github.com/strata-dev/strata/controllers"
	"github.com/strata-dev/strata/internal/freeport"
	"github.com/strata-dev/strata/internal/pki"
)

// TestMain deletes the strata binary built for loopback brokers. (No
// goleak here: the envtest manager's goroutines outlive the specs.)
func TestMain(m *testing.M) {
	code := m.Run()
	brokertest.RemoveBinary()
	os.Exit(code)
}

// loopback is how the suite's operator reaches brokers: specs that need a
// real Kafka cluster behind a KafkaCluster start `strata broker` processes
// on the loopback with startLoopbackBrokers, which registers them here.
// A KafkaCluster without loopback brokers has no broker address, as if
// its Services did not resolve.
//
// As in a real cluster, the operator talks to the brokers' REPLICATION
// listener only: TLS with client certificates of the cluster CA required,
// as the operator's client certificate (Secret <cluster>-operator-cert).
// The brokers serve a certificate of the operator's cluster CA for
// 127.0.0.1 (the operator's own names for the pods do not resolve here),
// issued by the harness from Secret <cluster>-cluster-ca the first time
// the operator asks for the cluster's TLS settings, which happens only
// after the operator has issued the CA. Until then they serve one of a
// throwaway CA. Tests' own clients and replication use PLAINTEXT.
var loopback = &loopbackEndpoints{clusters: map[types.NamespacedName]*loopbackCluster{}}

type loopbackEndpoints struct {
	mu       sync.Mutex
	clusters map[types.NamespacedName]*loopbackCluster
}

var (
	_ controllers.BrokerEndpoints = (*loopbackEndpoints)(nil)
	_ controllers.BrokerTLS       = (*loopbackEndpoints)(nil)
)

func (e *loopbackEndpoints) get(kc *strata.KafkaCluster) *loopbackCluster {
	e.mu.Lock()
	defer e.mu.Unlock()
	return e.clusters[types.NamespacedName{Namespace: kc.Namespace, Name: kc.Name}]
}

func (e *loopbackEndpoints) Bootstrap(kc *strata.KafkaCluster) ([]string, error) {
	c := e.get(kc)
	if c == nil {
		return nil, fmt.Errorf("no loopback brokers for %s/%s", kc.Namespace, kc.Name)
	}
	return c.ReplicationAddrs(), nil
}

// TLS installs a broker certificate of kc's cluster CA in the brokers'
// REPLICATION files (once per CA certificate) and returns the operator's
// TLS settings, as ServiceEndpoints does.
func (e *loopbackEndpoints) TLS(ctx context.Context, kc *strata.KafkaCluster) (*tls.Config, string, error) {
	c := e.get(kc)
	if c == nil {
		return nil, "", fmt.Errorf("no loopback brokers for %s/%s", kc.Namespace, kc.Name)
	}
	if err := ensureOperatorSecrets(ctx, kc); err != nil {
		return nil, "", err
	}
	if err := c.installClusterCert(ctx, kc); err != nil {
		return nil, "", err
	}
	return controllers.OperatorTLSConfig(ctx, k8sClient, kc)
}

// ensureOperatorSecrets creates the cluster CA and the operator's client
// certificate, as the operator's certificate step does, when the operator
// has not: most specs give their clusters FastBucket references that do
// not exist, so the operator stops before its certificate step (a bad
// reference creates nothing), while the specs' loopback brokers run
// anyway. A real cluster has no brokers before that step ran. The Secrets
// are controlled by the KafkaCluster and carry the same keys, so the
// operator takes them as its own if it gets that far.
func ensureOperatorSecrets(ctx context.Context, kc *strata.KafkaCluster) error {
	var caSec corev1.Secret
	caName := controllers.ClusterCASecretName(kc.Name)
	err := k8sClient.Get(ctx, client.ObjectKey{Namespace: kc.Namespace, Name: caName}, &caSec)
	if err != nil && !apierrors.IsNotFound(err) {
		return err
	}
	var opSec corev1.Secret
	opName := controllers.OperatorCertSecretName(kc.Name)
	opErr := k8sClient.Get(ctx, client.ObjectKey{Namespace: kc.Namespace, Name: opName}, &opSec)
	if err == nil && opErr == nil {
		return nil
	}
	live := &strata.KafkaCluster{}
	if err := k8sClient.Get(ctx, client.ObjectKeyFromObject(kc), live); err != nil {
		return err
	}
	write := func(name string, data map[string][]byte) error {
		sec := &corev1.Secret{
			ObjectMeta: metav1.ObjectMeta{Namespace: kc.Namespace, Name: name,
				Labels: map[string]string{controllers.LabelManagedBy: controllers.ManagedBy},
				OwnerReferences: []metav1.OwnerReference{{APIVersion: strata.GroupVersion.String(), Kind: "KafkaCluster",
					Name: live.Name, UID: live.UID, Controller: ptr.To(true), BlockOwnerDeletion: ptr.To(true)}}},
			Type: corev1.SecretTypeTLS,
			Data: data,
		}
		if err := k8sClient.Create(ctx, sec); err != nil && !apierrors.IsAlreadyExists(err) {
			return err
		}
		return nil
	}
	var ca *pki.KeyPair
	if apierrors.IsNotFound(err) {
		if ca, err = pki.NewCA("strata cluster CA "+kc.Namespace+"/"+kc.Name, 0, time.Now()); err != nil {
			return err
		}
		if err := write(caName, map[string][]byte{controllers.TLSCertKey: ca.CertPEM, controllers.TLSKeyKey: ca.KeyPEM, controllers.CACertKey: ca.CertPEM}); err != nil {
			return err
		}
	}
	// Whoever won a race wrote the CA: issue from the stored one.
	if err := k8sClient.Get(ctx, client.ObjectKey{Namespace: kc.Namespace, Name: caName}, &caSec); err != nil {
		return err
	}
	if ca, err = pki.ParseKeyPair(caSec.Data[controllers.TLSCertKey], caSec.Data[controllers.TLSKeyKey]); err != nil {
		return err
	}
	if apierrors.IsNotFound(opErr) {
		leaf, err := ca.Issue(pki.LeafOptions{Subject: controllers.OperatorCertSubject, Client: true}, time.Now())
		if err != nil {
			return err
		}
		return write(opName, map[string][]byte{controllers.TLSCertKey: leaf.CertPEM, controllers.TLSKeyKey: leaf.KeyPEM, controllers.CACertKey: caSec.Data[controllers.CACertKey]})
	}
	return opErr
}

func (e *loopbackEndpoints) HTTP(kc *strata.KafkaCluster, zone string, ordinal, id int32) (string, error) {
	c := e.get(kc)
	if c == nil {
		return "", fmt.Errorf("no loopback brokers for %s/%s", kc.Namespace, kc.Name)
	}
	b := c.broker(id)
	if b == nil {
		return "", fmt.Errorf("no loopback broker %d (zone %s, ordinal %d) for %s/%s", id, zone, ordinal, kc.Namespace, kc.Name)
	}
	return "http://" + b.MetricsAddr, nil
}

// loopbackCluster is the Kafka cluster behind one KafkaCluster: an
// embedded etcd and one `strata broker` process per broker of the spec,
// with the broker IDs and racks the operator gives them (zone block base +
// ordinal; blocks 0, 100, 200, ... in zone order for a new cluster).
type loopbackCluster struct {
	Etcd []string
	// opts are the options every broker got (startLoopbackBrokers' opts);
	// brokers added later (addBroker) get them too.
	opts []brokertest.Option
	// sasl gives every broker a second listener, SASL_PLAINTEXT with
	// SCRAM-SHA-256/512 (startSASLLoopbackBrokers).
	sasl bool
	// mtls gives every broker a listener MTLS: TLS with client
	// certificates of the cluster's clients CA required, the CA's ca.crt
	// read at start (startMTLSLoopbackBrokers).
	mtls bool
	// tlsDir holds the brokers' REPLICATION (and MTLS) files: tls.crt,
	// tls.key, ca.crt (the cluster CA), clients-ca.crt.
	tlsDir string

	tlsMu sync.Mutex
	// installedCA is the cluster CA certificate (PEM) the files are of.
	installedCA []byte

	mu      sync.Mutex // guards Brokers once the kubelet emulator runs
	Brokers map[int32]*loopbackBroker
}

// broker is broker id, nil when there is none.
func (c *loopbackCluster) broker(id int32) *loopbackBroker {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.Brokers[id]
}

// brokers is a copy of the broker map.
func (c *loopbackCluster) brokers() map[int32]*loopbackBroker {
	c.mu.Lock()
	defer c.mu.Unlock()
	return maps.Clone(c.Brokers)
}

// addBroker starts one more broker, id in zone, as a scale-up's new pod
// would run it.
func (c *loopbackCluster) addBroker(key types.NamespacedName, zone string, id int32, opts ...brokertest.Option) *loopbackBroker {
	metrics := freeLoopbackAddr()
	bopts := append(brokertest.ClusterOptions(c.Etcd, int(id), zone, append(slices.Clone(c.opts), opts...)...),
		brokertest.WithSetting("cluster.name", key.Namespace+"/"+key.Name),
		brokertest.WithArgs("--metrics-listen", metrics), brokertest.WithStableAddr())
	// The first listener's address is the --listen flag's; tests'
	// clients and replication use it (PLAINTEXT).
	listeners := "PLAINTEXT://127.0.0.1:0"
	protocols := "PLAINTEXT:PLAINTEXT,REPLICATION:SSL"
	saslAddr, mtlsAddr := "", ""
	if c.sasl {
		saslAddr = freeLoopbackAddr()
		listeners += ",SASL_PLAINTEXT://" + saslAddr
		protocols += ",SASL_PLAINTEXT:SASL_PLAINTEXT"
	}
	if c.mtls {
		mtlsAddr = freeLoopbackAddr()
		listeners += ",MTLS://" + mtlsAddr
		protocols += ",MTLS:SSL"
		bopts = append(bopts,
			brokertest.WithSetting("listener.name.mtls.ssl.certificate.location", filepath.Join(c.tlsDir, controllers.TLSCertKey)),
			brokertest.WithSetting("listener.name.mtls.ssl.key.location", filepath.Join(c.tlsDir, controllers.TLSKeyKey)),
			brokertest.WithSetting("listener.name.mtls.ssl.ca.location", filepath.Join(c.tlsDir, "clients-ca.crt")),
			brokertest.WithSetting("listener.name.mtls.ssl.client.auth", "required"))
	}
	replicationAddr := freeLoopbackAddr()
	listeners += ",REPLICATION://" + replicationAddr
	bopts = append(bopts,
		brokertest.WithSetting("listeners", listeners),
		brokertest.WithSetting("listener.security.protocol.map", protocols),
		brokertest.WithSetting("inter.broker.listener.name", "PLAINTEXT"),
		brokertest.WithSetting("listener.name.replication.ssl.certificate.location", filepath.Join(c.tlsDir, controllers.TLSCertKey)),
		brokertest.WithSetting("listener.name.replication.ssl.key.location", filepath.Join(c.tlsDir, controllers.TLSKeyKey)),
		brokertest.WithSetting("listener.name.replication.ssl.ca.location", filepath.Join(c.tlsDir, controllers.CACertKey)),
		brokertest.WithSetting("listener.name.replication.ssl.client.auth", "required"))
	b := &loopbackBroker{Process: brokertest.StartProcess(GinkgoTB(), bopts...), ID: id, Zone: zone, MetricsAddr: metrics,
		SASLAddr: saslAddr, MTLSAddr: mtlsAddr, ReplicationAddr: replicationAddr}
	c.mu.Lock()
	c.Brokers[id] = b
	c.mu.Unlock()
	return b
}

// loopbackBroker is one broker process and the address of its HTTP
// endpoint (/metrics, /readyz).
type loopbackBroker struct {
	*brokertest.Process
	ID          int32
	Zone        string
	MetricsAddr string
	// SASLAddr is the SASL_PLAINTEXT listener of a cluster started with
	// startSASLLoopbackBrokers ("" otherwise).
	SASLAddr string
	// MTLSAddr is the MTLS listener of a cluster started with
	// startMTLSLoopbackBrokers ("" otherwise).
	MTLSAddr string
	// ReplicationAddr is the REPLICATION listener, the operator's.
	ReplicationAddr string
}

// Addrs are the running brokers' Kafka addresses.
func (c *loopbackCluster) Addrs() []string {
	c.mu.Lock()
	defer c.mu.Unlock()
	var out []string
	for _, b := range c.Brokers {
		out = append(out, b.Addr())
	}
	return out
}

// startLoopbackBrokers starts the brokers of kc's spec (zones in spec
// order, new-cluster ID blocks) and registers them as kc's endpoints until
// the spec ends. opts are added to every broker (e.g. WithSetting). A
// broker started again keeps its address, as a pod keeps its DNS name.
func startLoopbackBrokers(kc *strata.KafkaCluster, opts ...brokertest.Option) *loopbackCluster {
	GinkgoHelper()
	return startLoopback(kc, false, false, opts)
}

// startSASLLoopbackBrokers is startLoopbackBrokers with a second listener
// per broker, SASL_PLAINTEXT (SCRAM-SHA-256/512) at loopbackBroker.SASLAddr,
// for clients that log in as KafkaUsers.
func startSASLLoopbackBrokers(kc *strata.KafkaCluster, opts ...brokertest.Option) *loopbackCluster {
	GinkgoHelper()
	return startLoopback(kc, true, false, opts)
}

// startMTLSLoopbackBrokers is startLoopbackBrokers with a further listener
// per broker, MTLS at loopbackBroker.MTLSAddr: TLS with a certificate of
// the cluster CA, client certificates of the clients CA required (the
// principal is the certificate subject), for KafkaUsers of type tls. kc
// must exist and the operator must have issued its CAs: the brokers read
// the clients CA at start.
func startMTLSLoopbackBrokers(kc *strata.KafkaCluster, opts ...brokertest.Option) *loopbackCluster {
	GinkgoHelper()
	return startLoopback(kc, false, true, opts)
}

func startLoopback(kc *strata.KafkaCluster, sasl, mtls bool, opts []brokertest.Option) *loopbackCluster {
	GinkgoHelper()
	t := GinkgoTB()
	c := &loopbackCluster{Etcd: metatest.Start(t).Endpoints(), Brokers: map[int32]*loopbackBroker{}, opts: opts, sasl: sasl, mtls: mtls, tlsDir: t.TempDir()}
	Expect(c.writeThrowawayCert()).To(Succeed())
	if mtls {
		var clientsCA, clusterCA corev1.Secret
		Eventually(func(g Gomega) {
			g.Expect(k8sClient.Get(suiteCtx, client.ObjectKey{Namespace: kc.Namespace, Name: controllers.ClientsCASecretName(kc.Name)}, &clientsCA)).To(Succeed())
			g.Expect(k8sClient.Get(suiteCtx, client.ObjectKey{Namespace: kc.Namespace, Name: controllers.ClusterCASecretName(kc.Name)}, &clusterCA)).To(Succeed())
		}, timeout, interval).Should(Succeed())
		Expect(writeFileAtomic(filepath.Join(c.tlsDir, "clients-ca.crt"), clientsCA.Data[controllers.CACertKey])).To(Succeed())
		Expect(c.installClusterCert(suiteCtx, kc)).To(Succeed())
	}
	key := types.NamespacedName{Namespace: kc.Namespace, Name: kc.Name}
	for i, z := range kc.Spec.Zones {
		for ord := range z.Brokers {
			c.addBroker(key, z.Name, int32(i)*strata.BrokerIDBlockSize+ord)
		}
	}
	loopback.mu.Lock()
	loopback.clusters[key] = c
	loopback.mu.Unlock()
	DeferCleanup(func() {
		loopback.mu.Lock()
		delete(loopback.clusters, key)
		loopback.mu.Unlock()
		retireCluster(key)
	})
	return c
}

// retireCluster deletes a spec's KafkaCluster once its loopback brokers
// and etcd go, and takes its finalizer off: the suite's one operator
// would otherwise reconcile it for the rest of the run, each round
// waiting out its etcd probe's timeouts against the stopped etcd. By the
// suite's last specs, over a hundred such clusters kept the operator's
// four workers busy and a live cluster's reconcile waited about a minute
// for a worker (make test-stress: "Scaling by bytes" took a minute per
// round of two moves and timed out).
func retireCluster(key types.NamespacedName) {
	kc := &strata.KafkaCluster{}
	if err := k8sClient.Get(suiteCtx, key, kc); err != nil {
		return // never created, or gone
	}
	_ = k8sClient.Delete(suiteCtx, kc)
	Eventually(func() error {
		if err := k8sClient.Get(suiteCtx, key, kc); err != nil {
			return client.IgnoreNotFound(err)
		}
		if len(kc.Finalizers) == 0 {
			return fmt.Errorf("still there")
		}
		kc.Finalizers = nil
		return k8sClient.Update(suiteCtx, kc)
	}).WithTimeout(30 * time.Second).Should(Succeed())
}

// writeThrowawayCert gives the brokers REPLICATION files to start with,
// of a CA nobody else trusts, before the operator has issued its own.
func (c *loopbackCluster) writeThrowawayCert() error {
	ca, err := pki.NewCA("loopback throwaway CA", 0, time.Now())
	if err != nil {
		return err
	}
	return c.writeCert(ca)
}

// installClusterCert writes a broker certificate (127.0.0.1) of kc's
// cluster CA into the brokers' files, unless they already hold one of the
// CA certificate stored now. The brokers re-read them at the next TLS
// handshake.
func (c *loopbackCluster) installClusterCert(ctx context.Context, kc *strata.KafkaCluster) error {
	var sec corev1.Secret
	name := controllers.ClusterCASecretName(kc.Name)
	if err := k8sClient.Get(ctx, client.ObjectKey{Namespace: kc.Namespace, Name: name}, &sec); err != nil {
		if apierrors.IsNotFound(err) {
			return fmt.Errorf("loopback brokers: the cluster CA %s is not issued yet", name)
		}
		return err
	}
	c.tlsMu.Lock()
	defer c.tlsMu.Unlock()
	if bytes.Equal(c.installedCA, sec.Data[controllers.TLSCertKey]) {
		return nil
	}
	ca, err := pki.ParseKeyPair(sec.Data[controllers.TLSCertKey], sec.Data[controllers.TLSKeyKey])
	if err != nil {
		return fmt.Errorf("loopback brokers: Secret %s: %w", name, err)
	}
	if err := c.writeCert(ca); err != nil {
		return err
	}
	c.installedCA = sec.Data[controllers.TLSCertKey]
	return nil
}

// writeCert writes ca.crt and a broker certificate of ca for 127.0.0.1,
// each file renamed into place.
func (c *loopbackCluster) writeCert(ca *pki.KeyPair) error {
	leaf, err := ca.Issue(pki.LeafOptions{Subject: controllers.BrokerCertSubject, Hosts: []string{"127.0.0.1"}}, time.Now())
	if err != nil {
		return err
	}
	for name, data := range map[string][]byte{controllers.CACertKey: ca.CertPEM, controllers.TLSKeyKey: leaf.KeyPEM, controllers.TLSCertKey: leaf.CertPEM} {
		if err := writeFileAtomic(filepath.Join(c.tlsDir, name), data); err != nil {
			return err
		}
	}
	return nil
}

func writeFileAtomic(path string, data []byte) error {
	tmp := path + ".tmp"
	if err := os.WriteFile(tmp, data, 0o600); err != nil {
		return err
	}
	return os.Rename(tmp, path)
}

// ReplicationAddrs are the running brokers' REPLICATION addresses.
func (c *loopbackCluster) ReplicationAddrs() []string {
	c.mu.Lock()
	defer c.mu.Unlock()
	var out []string
	for _, b := range c.Brokers {
		out = append(out, b.ReplicationAddr)
	}
	return out
}

// MTLSAddrs are the running brokers' MTLS addresses.
func (c *loopbackCluster) MTLSAddrs() []string {
	c.mu.Lock()
	defer c.mu.Unlock()
	var out []string
	for _, b := range c.Brokers {
		out = append(out, b.MTLSAddr)
	}
	return out
}

// SASLAddrs are the running brokers' SASL_PLAINTEXT addresses.
func (c *loopbackCluster) SASLAddrs() []string {
	c.mu.Lock()
	defer c.mu.Unlock()
	var out []string
	for _, b := range c.Brokers {
		out = append(out, b.SASLAddr)
	}
	return out
}

// Admin is a Kafka admin client to the running brokers, closed when the
// spec (or the container it is made in) ends.
func (c *loopbackCluster) Admin() *kadm.Client {
	GinkgoHelper()
	cl, err := kgo.NewClient(kgo.SeedBrokers(c.Addrs()...))
	Expect(err).NotTo(HaveOccurred())
	DeferCleanup(cl.Close)
	return kadm.NewClient(cl)
}

// handedOut are the ports freeLoopbackAddr returned: never twice, as
// the kernel may give the same free port to two listens in a row (a
// broker got it for its metrics and its replication listener).
var handedOut = struct {
	sync.Mutex
	ports map[int]bool
}{ports: map[int]bool{}}

// freeLoopbackAddr is a 127.0.0.1 address with a port free right now and
// not returned before, below the kernel's ephemeral range (freeport: a
// port of that range, free when picked, may be any outgoing
// connection's local port by the time the broker binds it).
func freeLoopbackAddr() string {
	GinkgoHelper()
	handedOut.Lock()
	defer handedOut.Unlock()
	for {
		port, err := freeport.Port()
		Expect(err).NotTo(HaveOccurred())
		if !handedOut.ports[port] {
			handedOut.ports[port] = true
			return net.JoinHostPort("127.0.0.1", strconv.Itoa(port))
		}
	}
}

var _ = Describe("loopback brokers", func() {
	It("run the spec's brokers with the operator's broker IDs and racks", func(ctx SpecContext) {
		kc := &strata.KafkaCluster{Spec: strata.KafkaClusterSpec{Zones: []strata.ZoneSpec{{Name: "a", Brokers: 1}, {Name: "b", Brokers: 2}}}}
		kc.Namespace, kc.Name = "default", "loopback-harness"
		c := startLoopbackBrokers(kc)
		cl, err := kgo.NewClient(kgo.SeedBrokers(c.Addrs()...))
		Expect(err).NotTo(HaveOccurred())
		defer cl.Close()
		var got []string
		Eventually(func(g Gomega) {
			brokers, err := kadm.NewClient(cl).ListBrokers(ctx)
			g.Expect(err).NotTo(HaveOccurred())
			got = got[:0]
			for _, b := range brokers {
				got = append(got, fmt.Sprintf("%d/%s", b.NodeID, *b.Rack))
			}
			g.Expect(got).To(ConsistOf("0/a", "100/b", "101/b"))
		}).WithContext(ctx).Should(Succeed())
		url, err := loopback.HTTP(kc, "b", 1, 101)
		Expect(err).NotTo(HaveOccurred())
		resp, err := http.Get(url + "/readyz")
		Expect(err).NotTo(HaveOccurred())
		resp.Body.Close()
		Expect(resp.StatusCode).To(Equal(http.StatusOK))
	}, SpecTimeout(3*time.Minute))
})
