package controllers_test

import (
	"fmt"
	"maps"
	"net"
	"net/http"
	"os"
	"slices"
	"strconv"
	"sync"
	"testing"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"
	"k8s.io/apimachinery/pkg/types"

	strata "github.com/strata-dev/strata/api/v1alpha1"
	"github.com/strata-dev/strata/broker/brokertest"
	"github.com/strata-dev/strata/broker/meta/metatest"
	"github.com/strata-dev/strata/controllers"
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
var loopback = &loopbackEndpoints{clusters: map[types.NamespacedName]*loopbackCluster{}}

type loopbackEndpoints struct {
	mu       sync.Mutex
	clusters map[types.NamespacedName]*loopbackCluster
}

var _ controllers.BrokerEndpoints = (*loopbackEndpoints)(nil)

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
	return c.Addrs(), nil
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
	saslAddr := ""
	if c.sasl {
		// The first listener's address is the --listen flag's; the
		// operator and replication keep using it (PLAINTEXT).
		saslAddr = freeLoopbackAddr()
		bopts = append(bopts, brokertest.WithSetting("listeners", "PLAINTEXT://127.0.0.1:0,SASL_PLAINTEXT://"+saslAddr))
	}
	b := &loopbackBroker{Process: brokertest.StartProcess(GinkgoTB(), bopts...), ID: id, Zone: zone, MetricsAddr: metrics, SASLAddr: saslAddr}
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
	return startLoopback(kc, false, opts)
}

// startSASLLoopbackBrokers is startLoopbackBrokers with a second listener
// per broker, SASL_PLAINTEXT (SCRAM-SHA-256/512) at loopbackBroker.SASLAddr,
// for clients that log in as KafkaUsers.
func startSASLLoopbackBrokers(kc *strata.KafkaCluster, opts ...brokertest.Option) *loopbackCluster {
	GinkgoHelper()
	return startLoopback(kc, true, opts)
}

func startLoopback(kc *strata.KafkaCluster, sasl bool, opts []brokertest.Option) *loopbackCluster {
	GinkgoHelper()
	t := GinkgoTB()
	c := &loopbackCluster{Etcd: metatest.Start(t).Endpoints(), Brokers: map[int32]*loopbackBroker{}, opts: opts, sasl: sasl}
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
	})
	return c
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

// freeLoopbackAddr is a 127.0.0.1 address with a port free right now.
func freeLoopbackAddr() string {
	GinkgoHelper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	Expect(err).NotTo(HaveOccurred())
	defer ln.Close()
	return net.JoinHostPort("127.0.0.1", strconv.Itoa(ln.Addr().(*net.TCPAddr).Port))
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
