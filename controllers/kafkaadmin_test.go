package controllers

import (
	"context"
	"errors"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"

	strata "github.com/strata-dev/strata/api/v1alpha1"
	"github.com/strata-dev/strata/broker/brokertest"
)

// staticEndpoints hands out fixed seed addresses (and fails when err is set).
type staticEndpoints struct {
	seeds []string
	err   error
}

func (e *staticEndpoints) Bootstrap(*strata.KafkaCluster) ([]string, error) { return e.seeds, e.err }
func (e *staticEndpoints) HTTP(*strata.KafkaCluster, string, int32, int32) (string, error) {
	return "", errors.ErrUnsupported
}

func TestAdminPool(t *testing.T) {
	c := brokertest.StartCluster(t, []string{"a"})
	ep := &staticEndpoints{seeds: c.Addrs()}
	pool := NewAdminPool(ep)
	defer pool.Close()
	kc := &strata.KafkaCluster{ObjectMeta: metav1.ObjectMeta{Namespace: "kafka", Name: "demo"}}

	adm, err := pool.Admin(kc)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	brokers, err := adm.ListBrokers(ctx)
	if err != nil {
		t.Fatalf("list brokers: %v", err)
	}
	if len(brokers) != 1 || brokers[0].NodeID != 1 || brokers[0].Rack == nil || *brokers[0].Rack != "a" {
		t.Fatalf("brokers = %+v, want broker 1 in rack a", brokers)
	}
	if again, _ := pool.Admin(kc); again != adm {
		t.Fatal("same seeds: the pooled client must be reused")
	}

	// New seeds (the cluster moved) rebuild the client; the same ones in
	// another order do not (an endpoints resolver listing brokers from a
	// map closed the client under other reconciles that were using it).
	ep.seeds = append(c.Addrs(), "127.0.0.1:1")
	moved, _ := pool.Admin(kc)
	if moved == adm {
		t.Fatal("changed seeds: the client must be rebuilt")
	}
	ep.seeds = append([]string{"127.0.0.1:1"}, c.Addrs()...)
	if reordered, _ := pool.Admin(kc); reordered != moved {
		t.Fatal("the same seeds in another order: the pooled client must be reused")
	}
	pool.Forget(types.NamespacedName{Namespace: "kafka", Name: "demo"})

	// No address or a resolver error is an error naming the cluster.
	ep.seeds = nil
	if _, err := pool.Admin(kc); err == nil || err.Error() != "broker addresses of kafka/demo: none known" {
		t.Fatalf("no seeds: err = %v", err)
	}
	ep.err = errors.New("boom")
	if _, err := pool.Admin(kc); err == nil || err.Error() != "broker addresses of kafka/demo: boom" {
		t.Fatalf("resolver error: err = %v", err)
	}
}

func TestServiceEndpoints(t *testing.T) {
	kc := &strata.KafkaCluster{ObjectMeta: metav1.ObjectMeta{Namespace: "kafka", Name: "demo"}}
	url, _ := ServiceEndpoints{}.HTTP(kc, "a", 2, 2)
	if url != "http://demo-a-2.demo-brokers.kafka.svc:9644" {
		t.Fatalf("http = %s", url)
	}
	// Whatever the client listeners, a PLAINTEXT one included: the
	// REPLICATION listener through the headless Service, with the
	// operator's certificate.
	for _, ls := range [][]strata.ListenerSpec{
		nil,
		{{Name: "PLAINTEXT", Port: 9092, Protocol: "PLAINTEXT"}},
		{{Name: "CLIENT", Port: 9093, Protocol: "SASL_SSL"}, {Name: "MTLS", Port: 9094, Protocol: "SSL"}},
	} {
		kc.Spec.Listeners = ls
		seeds, _ := ServiceEndpoints{}.Bootstrap(kc)
		if len(seeds) != 1 || seeds[0] != "demo-brokers.kafka.svc:9091" {
			t.Fatalf("listeners %v: bootstrap = %v", ls, seeds)
		}
		if _, _, err := (ServiceEndpoints{}).TLS(context.Background(), kc); err == nil {
			t.Fatalf("listeners %v: no Secret reader: want an error", ls)
		}
	}

	// A cluster of a release before REPLICATION, while it rolls onto
	// it: its old brokers do not serve REPLICATION, so the PLAINTEXT
	// listener (the old default of empty listeners) until every zone's
	// config replicates over REPLICATION.
	kc.Spec.Listeners = nil
	kc.Spec.Zones = []strata.ZoneSpec{{Name: "a", Brokers: 1}, {Name: "b", Brokers: 1}}
	zoneCM := func(zone, config string) *corev1.ConfigMap {
		return &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: "kafka", Name: ZoneConfigMapName("demo", zone)},
			Data: map[string]string{BrokerConfigFile: config}}
	}
	const (
		old    = "# earlier release\nlisteners=PLAINTEXT://0.0.0.0:9092\n"
		phase1 = "# first roll\ninter.broker.listener.name=PLAINTEXT\nlisteners=PLAINTEXT://0.0.0.0:9092,REPLICATION://0.0.0.0:9091\n"
		done   = "# switched\ninter.broker.listener.name=REPLICATION\nlisteners=PLAINTEXT://0.0.0.0:9092,REPLICATION://0.0.0.0:9091\n"
	)
	for _, tc := range []struct {
		name    string
		configs [2]string
		want    string
	}{
		{"before the upgrade", [2]string{old, old}, "demo-bootstrap.kafka.svc:9092"},
		{"first roll", [2]string{phase1, old}, "demo-bootstrap.kafka.svc:9092"},
		{"switched", [2]string{done, done}, "demo-brokers.kafka.svc:9091"},
	} {
		reader := fake.NewClientBuilder().WithObjects(zoneCM("a", tc.configs[0]), zoneCM("b", tc.configs[1])).Build()
		e := ServiceEndpoints{Secrets: reader}
		seeds, _ := e.Bootstrap(kc)
		if len(seeds) != 1 || seeds[0] != tc.want {
			t.Fatalf("%s: bootstrap = %v, want %s", tc.name, seeds, tc.want)
		}
		cfg, _, err := e.TLS(context.Background(), kc)
		if plaintext := tc.want != "demo-brokers.kafka.svc:9091"; plaintext && (cfg != nil || err != nil) {
			t.Fatalf("%s: TLS %v, %v; want plaintext", tc.name, cfg, err)
		} else if !plaintext && err == nil {
			t.Fatalf("%s: no operator certificate Secret: want an error", tc.name)
		}
	}
}
